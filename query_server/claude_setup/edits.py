"""Edits of one file's text that merge: add or remove codemem's server in ``.mcp.json``, its hooks
in a settings file, a marked block in CLAUDE.md, lines in ``.gitignore``; everything else stays."""


from __future__ import annotations

import json
import re
from typing import Any

from query_server.claude_setup.entries import (
    CLAUDE_SECTION,
    GITIGNORE_BEGIN,
    GITIGNORE_END,
    HOOKS,
    SECTION_BEGIN,
    SECTION_END,
    SERVER_NAME,
    Launcher,
    SetupError,
    _hook_event,
    _is_our_server,
)


def _load_object(text: str | None, rel: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SetupError(
            f"{rel}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg} — fix the file "
            "(or move it away) and run the command again; nothing was changed"
        ) from exc
    if not isinstance(data, dict):
        raise SetupError(f"{rel}: expected a JSON object at the top level, found {type(data).__name__} — nothing was changed")
    return data


def _dump(data: dict[str, Any], original: str | None) -> str:
    """JSON in the original file's indentation (two spaces for a new file), ending with a newline."""
    indent: str | int = 2
    if original:
        match = re.search(r"^([ \t]+)\S", original, re.MULTILINE)
        if match:
            indent = match.group(1)
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return text + "\n" if original is None or original.endswith("\n") or not original.strip() else text


def _expect(value: Any, kind: type, rel: str, where: str) -> None:
    if not isinstance(value, kind):
        expected = {dict: "an object", list: "an array"}[kind]
        raise SetupError(f"{rel}: `{where}` must be {expected}, found {type(value).__name__} — nothing was changed")


def _add_mcp_server(text: str | None, rel: str, notes: list[str], launcher: Launcher) -> str | None:
    data = _load_object(text, rel)
    servers = data.setdefault("mcpServers", {})
    _expect(servers, dict, rel, "mcpServers")
    existing = servers.get(SERVER_NAME)
    wanted = launcher.mcp_server()
    if existing is not None:
        if existing != wanted:
            notes.append(f"{rel}: kept the existing `{SERVER_NAME}` server (it differs from "
                         f"{json.dumps(wanted)}; remove it and run init again to replace it)")
        return text
    servers[SERVER_NAME] = wanted
    return _dump(data, text)


def _remove_mcp_server(text: str, rel: str, notes: list[str]) -> str:
    data = _load_object(text, rel)
    servers = data.get("mcpServers")
    if not isinstance(servers, dict) or SERVER_NAME not in servers:
        return text
    if not _is_our_server(servers[SERVER_NAME]):
        notes.append(f"{rel}: left `mcpServers.{SERVER_NAME}` — it was changed after init")
        return text
    del servers[SERVER_NAME]
    if not servers:
        del data["mcpServers"]
    return _dump(data, text)


def _add_hooks(text: str | None, rel: str, launcher: Launcher, notes: list[str]) -> str | None:
    data = _load_object(text, rel)
    hooks = data.setdefault("hooks", {})
    _expect(hooks, dict, rel, "hooks")
    changed = False
    for spec in HOOKS:
        groups = hooks.setdefault(spec.event, [])
        _expect(groups, list, rel, f"hooks.{spec.event}")
        wanted = spec.command_for(launcher)
        present: list[str] = []
        for index, group in enumerate(groups):
            _expect(group, dict, rel, f"hooks.{spec.event}[{index}]")
            handlers = group.get("hooks", [])
            _expect(handlers, list, rel, f"hooks.{spec.event}[{index}].hooks")
            present += [h["command"] for h in handlers if isinstance(h, dict) and _hook_event(h.get("command")) == spec.event]
        if not present:  # a user's own timeout or matcher for codemem's command is kept as it is
            groups.append(spec.group(launcher))
            changed = True
        elif wanted not in present:
            notes.append(f"{rel}: kept the existing `{present[0]}` hook on {spec.event} (it differs from "
                         f"`{wanted}`; remove it and run init again to replace it)")
    return _dump(data, text) if changed else text


def _remove_hooks(text: str, rel: str) -> str:
    """``text`` without codemem's hook handlers (the commands init writes, any launcher); groups, events and the ``hooks``
    key that only held them go too."""
    data = _load_object(text, rel)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return text
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups: list[Any] = []
        removed = False
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                kept_groups.append(group)
                continue
            kept = [h for h in handlers if not (isinstance(h, dict) and _hook_event(h.get("command")) is not None)]
            if len(kept) == len(handlers):
                kept_groups.append(group)
                continue
            removed = True
            if kept:
                kept_groups.append({**group, "hooks": kept})
        if removed:
            changed = True
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if not changed:
        return text
    if not hooks:
        del data["hooks"]
    return _dump(data, text)


# ----------------------------------------------------------------------------- text files


def _find_block(text: str, rel: str, begin: str, end: str) -> tuple[int, int] | None:
    """The character span of the marked block (from its begin line to after its end line)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == begin]
    ends = [i for i, line in enumerate(lines) if line.strip() == end]
    if not starts and not ends:
        return None
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        where = ", ".join(f"line {i + 1}" for i in sorted(starts + ends))
        raise SetupError(
            f"{rel}: expected one `{begin}` followed by one `{end}`, found them at {where} — "
            "fix the markers (or delete codemem's section) and run it again; nothing was changed"
        )
    offset = sum(len(line) for line in lines[:starts[0]])
    return offset, offset + sum(len(line) for line in lines[starts[0]:ends[0] + 1])


def _put_block(text: str | None, rel: str, block: str | None, begin: str, end: str) -> str | None:
    """``text`` with the marked block replaced by ``block`` (appended when absent; removed when None)."""
    current = text or ""
    span = _find_block(current, rel, begin, end)
    if span is not None:
        if block is None:
            return _cut(current, span)
        return current[:span[0]] + block + current[span[1]:]
    if block is None:
        return text
    if not current:
        return block
    return current + ("\n" if current.endswith("\n") else "\n\n") + block


def _cut(text: str, span: tuple[int, int]) -> str:
    """Remove a block and the blank line (or missing final newline) init added before it."""
    head, tail = text[:span[0]], text[span[1]:]
    if not tail and head.endswith("\n\n"):
        head = head[:-1]
    return head + tail


def _remove_block(text: str, rel: str, begin: str, end: str) -> str:
    span = _find_block(text, rel, begin, end)
    return text if span is None else _cut(text, span)


def _add_section(text: str | None, rel: str) -> str | None:
    return _put_block(text, rel, CLAUDE_SECTION, SECTION_BEGIN, SECTION_END)


def _ignore_key(line: str) -> str:
    return line.strip().strip("/")


def _add_ignores(text: str | None, rel: str, wanted: tuple[str, ...]) -> str | None:
    current = text or ""
    span = _find_block(current, rel, GITIGNORE_BEGIN, GITIGNORE_END)
    outside = current if span is None else current[:span[0]] + current[span[1]:]
    have = {_ignore_key(line) for line in outside.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    if span is not None:  # keep what an earlier init (maybe of the other scope) put in the block
        inside = current[span[0]:span[1]].splitlines()[1:-1]
        wanted = tuple(dict.fromkeys([*inside, *wanted]))
    needed = [line for line in wanted if _ignore_key(line) not in have]
    block = "\n".join([GITIGNORE_BEGIN, *needed, GITIGNORE_END]) + "\n" if needed else None
    return _put_block(text, rel, block, GITIGNORE_BEGIN, GITIGNORE_END)


# ----------------------------------------------------------------------------- record




def _add_permissions(text: str | None, rel: str, rules: tuple[str, ...]) -> str | None:
    """``text`` with ``rules`` in ``permissions.allow`` (those already there are not repeated)."""
    data = _load_object(text, rel)
    permissions = data.setdefault("permissions", {})
    _expect(permissions, dict, rel, "permissions")
    allow = permissions.setdefault("allow", [])
    _expect(allow, list, rel, "permissions.allow")
    missing = [rule for rule in rules if rule not in allow]
    if not missing:
        return text
    allow.extend(missing)
    return _dump(data, text)


def _remove_permissions(text: str, rel: str, rules: tuple[str, ...]) -> str:
    """``text`` without ``rules`` in ``permissions.allow``; an ``allow`` or ``permissions`` left
    empty by that goes too."""
    data = _load_object(text, rel)
    permissions = data.get("permissions")
    allow = permissions.get("allow") if isinstance(permissions, dict) else None
    if not isinstance(allow, list) or not any(rule in allow for rule in rules):
        return text
    kept = [rule for rule in allow if rule not in rules]
    if kept:
        permissions["allow"] = kept
    else:
        del permissions["allow"]
        if not permissions:
            del data["permissions"]
    return _dump(data, text)

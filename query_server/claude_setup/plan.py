"""``plan_init`` and ``plan_undo`` (what changes, as text before and after), the record of what init
wrote (``.codemem/init.json``), ``render_diff`` and ``apply_plan``."""


from __future__ import annotations

import difflib
import hashlib
import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from query_server.claude_setup.edits import (
    _add_hooks,
    _add_ignores,
    _add_mcp_server,
    _add_permissions,
    _add_section,
    _load_object,
    _remove_block,
    _remove_hooks,
    _remove_mcp_server,
    _remove_permissions,
)
from query_server.claude_setup.entries import (
    GITIGNORE_BEGIN,
    GITIGNORE_END,
    MCP_ARGS,
    RECORD_PATH,
    RECORD_VERSION,
    SCOPES,
    SECTION_BEGIN,
    SECTION_END,
    Launcher,
    SetupError,
    find_launcher,
    read_tool_rules,
)


@dataclass(frozen=True)
class Targets:
    """The files one scope writes, relative to the project root (``mcp`` None: none)."""

    mcp: str | None
    settings: str
    memory: str
    ignore: tuple[str, ...]


def targets(root: Path, scope: str) -> Targets:
    """Where ``scope`` puts things. Local scope keeps everything out of git: Claude Code reads no
    MCP server from a settings file, and local-scope servers live in ``~/.claude.json``, which
    init does not edit — ``notes`` says how to add it there."""
    if scope == "project":
        memory = ".claude/CLAUDE.md" if (root / ".claude/CLAUDE.md").is_file() and not (root / "CLAUDE.md").exists() else "CLAUDE.md"
        return Targets(".mcp.json", ".claude/settings.json", memory, (".codemem/",))
    if scope == "local":
        return Targets(None, ".claude/settings.local.json", "CLAUDE.local.md",
                       (".codemem/", "CLAUDE.local.md", ".claude/settings.local.json"))
    raise SetupError(f"unknown scope {scope!r} — use one of: {', '.join(SCOPES)}")


@dataclass
class FileChange:
    """One file's text before and after (None: the file is absent / is removed)."""

    rel: str
    before: str | None
    after: str | None

    @property
    def action(self) -> str:
        if self.before is None:
            return "create"
        return "remove" if self.after is None else "update"


@dataclass
class Plan:
    """What init or undo would do to the project at ``root``; ``apply_plan`` does it."""

    root: Path
    changes: list[FileChange] = field(default_factory=list)
    record: dict[str, Any] | None = None  # the new .codemem/init.json (None: remove it)
    record_changed: bool = False
    remove_dirs: list[str] = field(default_factory=list)  # relative; removed when empty
    notes: list[str] = field(default_factory=list)
    launcher: Launcher | None = None  # the command init writes (None: an undo plan)

    @property
    def empty(self) -> bool:
        return not self.changes and not self.record_changed


# ----------------------------------------------------------------------------- planning


def plan_init(root: Path, scope: str = "project", launcher: Launcher | None = None, *, allow_read_tools: bool = False) -> Plan:
    """The changes ``codemem init`` makes in the project at ``root``; writes nothing. The commands
    start codemem with ``launcher`` (default: ``find_launcher()``, what is running now);
    ``allow_read_tools`` also pre-approves codemem's read-only tools in the settings file's
    ``permissions.allow`` (Claude Code then runs them without asking).

    Raises:
        SetupError: the project is not a directory, or an existing file cannot be merged (its
            name, line and what to do are in the message).
    """
    root = _project_root(root)
    where = targets(root, scope)
    record = _read_record(root)
    launcher = find_launcher() if launcher is None else launcher
    plan = Plan(root=root, launcher=launcher)
    editors: list[tuple[str, Callable[[str | None, str], str]]] = []
    if where.mcp:
        editors.append((where.mcp, lambda text, rel: _add_mcp_server(text, rel, plan.notes, launcher)))
    editors += [
        (where.settings, lambda text, rel: _add_settings(text, rel, launcher, plan.notes, allow_read_tools)),
        (where.memory, _add_section),
        (".gitignore", lambda text, rel: _add_ignores(text, rel, where.ignore)),
    ]
    for rel, edit in editors:
        before = _read(root / rel)
        after = edit(before, rel)
        if after != before:
            plan.changes.append(FileChange(rel, before, after))
    if where.mcp is None:
        plan.notes.append(
            "local scope: Claude Code keeps local MCP servers in ~/.claude.json, which init does not edit — "
            f"add the server with: claude mcp add --scope local codemem -- {shlex.join([*launcher.argv, *MCP_ARGS])}"
        )
    if plan.changes:
        plan.record = _updated_record(record, plan.changes, scope, root)
        plan.record_changed = True
    return plan


def plan_undo(root: Path) -> Plan:
    """The changes ``codemem init --undo`` makes: everything init added, in either scope.

    Raises:
        SetupError: a file that must be edited (not restored from the record) does not parse.
    """
    root = _project_root(root)
    record = _read_record(root)
    entries: dict[str, Any] = record.get("files", {}) if record else {}
    candidates: list[str] = list(entries)
    for scope in SCOPES:
        where = targets(root, scope)
        for rel in (where.mcp, where.settings, where.memory, ".gitignore", "CLAUDE.md", ".claude/CLAUDE.md"):
            if rel and rel not in candidates:
                candidates.append(rel)
    plan = Plan(root=root)
    for rel in candidates:
        current = _read(root / rel)
        entry = entries.get(rel)
        if current is None:
            if entry is not None:
                plan.notes.append(f"{rel}: already removed")
            continue
        after = _undo_file(rel, current, entry, plan.notes)
        if after != current:
            plan.changes.append(FileChange(rel, current, after))
    if record is not None:
        plan.record, plan.record_changed = None, True
        plan.remove_dirs = sorted(record.get("created_dirs", []), key=lambda d: -d.count("/"))
    return plan


def _undo_file(rel: str, current: str, entry: dict[str, Any] | None, notes: list[str]) -> str | None:
    """The text ``rel`` gets back (None: remove the file)."""
    if entry is not None and entry.get("after_sha256") == _sha(current):
        if entry.get("created"):
            return None
        if entry.get("before") is not None:
            return str(entry["before"])
    after = _remove_ours(rel, current, notes)
    if entry is not None and entry.get("created") and _is_blank(rel, after):
        return None
    return after


def _add_settings(text: str | None, rel: str, launcher: Launcher, notes: list[str], allow_read_tools: bool) -> str | None:
    """The settings file with codemem's hooks and, when asked, its read-only tools pre-approved."""
    text = _add_hooks(text, rel, launcher, notes)
    return _add_permissions(text, rel, read_tool_rules()) if allow_read_tools else text


def _remove_ours(rel: str, text: str, notes: list[str]) -> str:
    name = Path(rel).name
    if name == ".mcp.json":
        return _remove_mcp_server(text, rel, notes)
    if name.startswith("settings") and name.endswith(".json"):
        return _remove_permissions(_remove_hooks(text, rel), rel, read_tool_rules())
    if name == ".gitignore":
        return _remove_block(text, rel, GITIGNORE_BEGIN, GITIGNORE_END)
    return _remove_block(text, rel, SECTION_BEGIN, SECTION_END)


def _is_blank(rel: str, text: str) -> bool:
    if rel.endswith(".json"):
        try:
            return json.loads(text) == {}
        except ValueError:
            return False
    return not text.strip()


# ----------------------------------------------------------------------------- JSON files




def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise SetupError(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start}) — nothing was changed") from exc
    except OSError as exc:
        raise SetupError(f"{path}: cannot be read ({exc.strerror}) — nothing was changed") from exc


def _project_root(root: Path) -> Path:
    path = Path(root).expanduser()
    if not path.is_dir():
        raise SetupError(f"not a directory: {path} — pass the project's root with --project PATH")
    return path.resolve()


def _read_record(root: Path) -> dict[str, Any] | None:
    text = _read(root / RECORD_PATH)
    if text is None:
        return None
    record = _load_object(text, RECORD_PATH)
    if not isinstance(record.get("files"), dict):
        raise SetupError(f"{RECORD_PATH}: no `files` object — delete it; undo then recognises codemem's entries itself")
    return record


def _updated_record(record: dict[str, Any] | None, changes: list[FileChange], scope: str, root: Path) -> dict[str, Any]:
    """The record after ``changes``: each file keeps its first original text while it is still
    exactly what init left (so undo restores it byte for byte); a file edited since loses its
    snapshot, and undo then removes only codemem's entries from it."""
    record = json.loads(json.dumps(record)) if record else {"version": RECORD_VERSION, "files": {}, "created_dirs": []}
    record["scopes"] = sorted({*record.get("scopes", []), scope})
    files: dict[str, Any] = record["files"]
    for change in changes:
        assert change.after is not None
        entry = files.get(change.rel)
        if entry is None:
            entry = {"created": change.before is None, "before": change.before}
        elif change.before is None or entry.get("after_sha256") != _sha(change.before):
            entry = {"created": change.before is None or bool(entry.get("created")), "before": None}
        files[change.rel] = {**entry, "after_sha256": _sha(change.after)}
    dirs = set(record.get("created_dirs", []))
    for rel in [*(c.rel for c in changes), RECORD_PATH]:
        for parent in Path(rel).parents:
            if str(parent) != "." and not (root / parent).exists():
                dirs.add(parent.as_posix())
    record["created_dirs"] = sorted(dirs)
    return record


# ----------------------------------------------------------------------------- output


def render_diff(plan: Plan) -> str:
    """A unified diff of every file the plan changes (``/dev/null`` for created and removed files)."""
    out: list[str] = []
    for change in plan.changes:
        old = (change.before or "").splitlines(keepends=True)
        new = (change.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            old, new,
            fromfile="/dev/null" if change.before is None else f"a/{change.rel}",
            tofile="/dev/null" if change.after is None else f"b/{change.rel}",
        )
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


DONE = {"create": "created", "update": "updated", "remove": "removed"}


def apply_plan(plan: Plan) -> list[str]:
    """Write the plan; returns one line per file it touched ("created .mcp.json", ...)."""
    done: list[str] = []
    for change in plan.changes:
        path = plan.root / change.rel
        if change.after is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, change.after)
        done.append(f"{DONE[change.action]} {change.rel}")
    if plan.record_changed:
        path = plan.root / RECORD_PATH
        if plan.record is None:
            path.unlink(missing_ok=True)
        else:
            _write(path, json.dumps(plan.record, indent=2, ensure_ascii=False) + "\n")
    for rel in plan.remove_dirs:
        try:
            (plan.root / rel).rmdir()
        except OSError:
            pass  # not empty (or gone): it holds something that is not init's
    return done


def _write(path: Path, text: str) -> None:
    """Replace ``path`` atomically (a temporary file beside it, then a rename), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.codemem-tmp")
    with temp.open("w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    if path.exists():
        os.chmod(temp, path.stat().st_mode & 0o7777)
    os.replace(temp, path)

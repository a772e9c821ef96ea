"""Set a project up for Claude Code, and take it down again: plain functions under `codemem init`.

``plan_init`` computes what ``codemem init`` changes in a project: the MCP server in ``.mcp.json``,
the hooks in ``.claude/settings.json``, a short section between markers in ``CLAUDE.md`` and the
state directory in ``.gitignore`` (with ``scope="local"``: the hooks in
``.claude/settings.local.json`` and the section in ``CLAUDE.local.md``, both gitignored).
``plan_undo`` computes the reverse. Both return a ``Plan`` — the files' text before and after —
and write nothing; ``render_diff`` shows a plan as a unified diff, ``apply_plan`` writes it.

Every change merges: other servers, hooks, keys and lines stay as they are, and running init
twice adds nothing. What init wrote is recorded in ``.codemem/init.json`` (each file's original
text and a hash of what init left there); undo restores the original bytes when the file is
still exactly what init left, and otherwise removes only codemem's own entries (recognised by
their hook commands and the ``codemem`` server entry in any launcher form init writes, and the
markers), so edits made since are kept. Files and directories that init created are removed when
nothing else is left in them.

The commands init writes must resolve where Claude Code runs them: ``find_launcher`` keeps the
bare ``codemem`` when ``codemem`` on PATH is the executable that is running, and otherwise
writes the running console script's absolute path (or ``<python> -m query_server.entry``).

Formats follow Claude Code's documentation: hooks (settings files, ``hooks`` → event → matcher
groups → ``{"type": "command", "command", "timeout"}`` with the timeout in seconds) and project
MCP servers (``.mcp.json``, ``mcpServers`` → name → ``{"type": "stdio", "command", "args"}``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPES = ("project", "local")
RECORD_PATH = ".codemem/init.json"
RECORD_VERSION = 1
SERVER_NAME = "codemem"
MCP_SERVER: dict[str, Any] = {"type": "stdio", "command": "codemem", "args": ["mcp", "--project", "."]}
MCP_ARGS = ("mcp", "--project", ".")
ENTRY_MODULE = "query_server.entry"  # what the console script runs; ``python -m`` runs it too
SECTION_BEGIN = "<!-- codemem:begin -->"
SECTION_END = "<!-- codemem:end -->"
GITIGNORE_BEGIN = "# codemem:begin"
GITIGNORE_END = "# codemem:end"

# The hook events of Claude Code's hooks reference (docs.claude.com/en/docs/claude-code/hooks)
# that codemem may use; ``TOOL_EVENTS`` are the ones whose matcher is a tool-name pattern.
DOCUMENTED_HOOK_EVENTS = frozenset({
    "PreToolUse", "PostToolUse", "Notification", "UserPromptSubmit", "Stop", "SubagentStop",
    "PreCompact", "SessionStart", "SessionEnd",
})
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})


@dataclass(frozen=True)
class HookSpec:
    """One hook codemem installs: ``codemem hook <event>`` on ``event`` (tools matching ``matcher``)."""

    event: str
    matcher: str | None
    timeout: int  # seconds, as Claude Code's settings expect
    purpose: str

    @property
    def command(self) -> str:
        return f"codemem hook {self.event}"

    def command_for(self, launcher: Launcher) -> str:
        return shlex.join([*launcher.argv, "hook", self.event])

    def handler(self, launcher: Launcher | None = None) -> dict[str, Any]:
        command = self.command if launcher is None else self.command_for(launcher)
        return {"type": "command", "command": command, "timeout": self.timeout}

    def group(self, launcher: Launcher | None = None) -> dict[str, Any]:
        group: dict[str, Any] = {"matcher": self.matcher} if self.matcher is not None else {}
        group["hooks"] = [self.handler(launcher)]
        return group


@dataclass(frozen=True)
class Launcher:
    """How the commands init writes start codemem: ``argv`` before the subcommand, and why."""

    argv: tuple[str, ...]
    reason: str

    @property
    def bare(self) -> bool:
        return self.argv == ("codemem",)

    def mcp_server(self) -> dict[str, Any]:
        return {"type": "stdio", "command": self.argv[0], "args": [*self.argv[1:], *MCP_ARGS]}

    def display(self) -> str:
        return shlex.join(self.argv)


BARE = Launcher(("codemem",), "`codemem` on PATH is this codemem")


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def find_launcher(argv0: str | None = None, executable: str | None = None, path: str | None = None) -> Launcher:
    """The command that starts the codemem that is running now, as Claude Code will run it.

    Bare ``codemem`` when ``codemem`` on PATH (``path``, default ``$PATH``) is this very console
    script; otherwise this console script's absolute path (``argv0`` when it is one, else the
    ``codemem`` beside the interpreter), else the interpreter with ``-m query_server.entry``.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    script: Path | None = None
    if argv0 and Path(argv0).name == "codemem" and Path(argv0).is_file():
        script = Path(argv0).absolute()
    elif executable:
        beside = Path(executable).absolute().parent / "codemem"
        if beside.is_file() and os.access(beside, os.X_OK):
            script = beside
    on_path = shutil.which("codemem", path=path)
    if script is not None:
        if on_path and _same_file(on_path, script):
            return BARE
        elsewhere = f"`codemem` on PATH is {on_path}, another installation" if on_path else "`codemem` is not on PATH"
        return Launcher((str(script),), f"{elsewhere}: wrote this codemem's absolute path")
    if not executable:
        if on_path:
            return Launcher(("codemem",), f"cannot tell which executable runs this codemem: wrote `codemem` ({on_path})")
        raise SetupError("cannot find a command that starts codemem: `codemem` is not on PATH and this Python "
                         "does not say where it runs from — put codemem's bin directory on PATH and run init again")
    return Launcher((str(Path(executable).absolute()), "-m", ENTRY_MODULE),
                    "no `codemem` console script beside this Python: wrote the interpreter with -m " + ENTRY_MODULE)


def _launcher_prefix(tokens: list[str]) -> bool:
    """``tokens`` is a launcher init writes: ``codemem`` (bare or a path to it) or ``<python> -m query_server.entry``."""
    if len(tokens) == 1:
        return Path(tokens[0]).name == "codemem"
    return len(tokens) == 3 and tokens[1:] == ["-m", ENTRY_MODULE]


def _hook_event(command: Any) -> str | None:
    """The event of a hook command init writes (in any launcher form); None for anything else."""
    if not isinstance(command, str):
        return None
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if len(tokens) < 3 or tokens[-2] != "hook" or tokens[-1] not in HOOK_EVENTS or not _launcher_prefix(tokens[:-2]):
        return None
    return tokens[-1]


def _is_our_server(entry: Any) -> bool:
    """``entry`` is the server init writes, in any launcher form."""
    if not isinstance(entry, dict) or set(entry) != {"type", "command", "args"} or entry.get("type") != "stdio":
        return False
    args = entry.get("args")
    if not isinstance(entry.get("command"), str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return False
    argv = [entry["command"], *args]
    return tuple(argv[-len(MCP_ARGS):]) == MCP_ARGS and _launcher_prefix(argv[:-len(MCP_ARGS)])


HOOKS: tuple[HookSpec, ...] = (
    HookSpec("SessionStart", None, 10, "add memory counts, what changed since the last session, stale memories and index freshness to the context"),
    HookSpec("PreToolUse", "Edit|Write|MultiEdit|Bash", 5, "deny direct edits of .codemem/ and Bash commands that write into it"),
    HookSpec("PostToolUse", "Read|Edit|Write|MultiEdit", 5, "add the top memories about the file read or edited, each once per session"),
    HookSpec("PreCompact", None, 10, "record a session memory from the transcript before compaction (in the background)"),
    HookSpec("SessionEnd", None, 10, "record a session memory from the transcript (in the background)"),
)
HOOK_COMMANDS = frozenset(spec.command for spec in HOOKS)
HOOK_EVENTS = frozenset(spec.event for spec in HOOKS)


def hooks_config() -> dict[str, list[dict[str, Any]]]:
    """codemem's hooks as the ``hooks`` object of a settings file (and of the plugin's hooks.json)."""
    return {spec.event: [spec.group()] for spec in HOOKS}

CLAUDE_SECTION = f"""{SECTION_BEGIN}
## codemem: project memory and code intelligence

This project's long-term memory and code index live in codemem (MCP server `codemem`), not in
this file. Ask them instead of guessing:

- Before implementing: `code_search` for code that already does it, `find_duplicates` on the
  function you are about to write, `memory_search` for requirements, designs/ADRs and patterns,
  `get_design_context` for the designs and requirements of the area you touch.
- Right after deciding or learning something: `memory_add` (requirements, design, code_pattern,
  component, function, test_history, session, user_preference); when it reports `conflicts`,
  update the stored memory (`memory_update`) instead of adding a second one.
- Before fixing a bug: `validate_fix` (the fix against decisions and past test failures) and
  `check_consistency` (the change against designs and patterns).
- Before committing: `impact_of_change` (callers, tests, requirements and designs affected),
  `trace_requirements` (requirement ↔ code ↔ tests); after a test run: `record_test_run`.
- Navigating: `get_symbol`, `get_related`, `graph_query`. Freshness: `index_status`.
  Memory quality: `memory_health`.
- Never edit `.codemem/` by hand: it is codemem's state (a hook blocks it).
{SECTION_END}
"""


class SetupError(Exception):
    """Input init cannot work with (a file that does not parse, a broken marker): nothing changed."""


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


def plan_init(root: Path, scope: str = "project", launcher: Launcher | None = None) -> Plan:
    """The changes ``codemem init`` makes in the project at ``root``; writes nothing. The commands
    start codemem with ``launcher`` (default: ``find_launcher()``, what is running now).

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
        (where.settings, lambda text, rel: _add_hooks(text, rel, launcher, plan.notes)),
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


def _remove_ours(rel: str, text: str, notes: list[str]) -> str:
    name = Path(rel).name
    if name == ".mcp.json":
        return _remove_mcp_server(text, rel, notes)
    if name.startswith("settings") and name.endswith(".json"):
        return _remove_hooks(text, rel)
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

"""What codemem puts into Claude Code's files: the MCP server entry, the hooks, the CLAUDE.md
section, the launcher that starts codemem, and how init recognises its own entries later."""


from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCOPES = ("project", "local")
RECORD_PATH = ".codemem/init.json"
RECORD_VERSION = 1
SERVER_NAME = "codemem"
MCP_SERVER: dict[str, Any] = {"type": "stdio", "command": "codemem", "args": ["mcp", "--project", "."]}
MCP_ARGS = ("mcp", "--project", ".")
ENTRY_MODULE = "query_server.entry"  # what the console script runs; ``python -m`` runs it too
HOOK_RUNNER = Path(__file__).resolve().parents[1] / "hooks" / "run_hook.py"
"""What a hook command runs with ``python -S`` (``query_server.hooks.run_hook``)."""
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
        return shlex.join(launcher.hook_argv(self.event))

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
    python: str | None = None
    """The interpreter that runs this codemem (absolute), when the commands name paths anyway:
    hooks then run ``<python> -S …/query_server/hooks/run_hook.py <event>`` (no site step, ~20 ms
    less per hook)."""

    @property
    def bare(self) -> bool:
        return self.argv == ("codemem",)

    def hook_argv(self, event: str) -> list[str]:
        """The command of the hook of ``event``."""
        if self.python is None or self.bare:
            return [*self.argv, "hook", event]
        return [self.python, "-S", str(HOOK_RUNNER), event]

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
        return Launcher((str(script),), f"{elsewhere}: wrote this codemem's absolute path",
                        python=str(Path(executable).absolute()) if executable else None)
    if not executable:
        if on_path:
            return Launcher(("codemem",), f"cannot tell which executable runs this codemem: wrote `codemem` ({on_path})")
        raise SetupError("cannot find a command that starts codemem: `codemem` is not on PATH and this Python "
                         "does not say where it runs from — put codemem's bin directory on PATH and run init again")
    python = str(Path(executable).absolute())
    return Launcher((python, "-m", ENTRY_MODULE),
                    "no `codemem` console script beside this Python: wrote the interpreter with -m " + ENTRY_MODULE, python=python)


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
    if len(tokens) == 4 and tokens[1] == "-S" and Path(tokens[2]).parts[-3:] == HOOK_RUNNER.parts[-3:]:
        return tokens[3] if tokens[3] in HOOK_EVENTS else None  # the fast form (Launcher.hook_argv)
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
    HookSpec("UserPromptSubmit", None, 5, "remind to record what came out of the files edited since the last memory, "
             "and to look up earlier decisions before a design choice"),
    HookSpec("PreToolUse", "Edit|Write|MultiEdit|Bash", 5, "deny direct edits of .codemem/ and Bash commands that write into it"),
    HookSpec("PostToolUse", "Read|Edit|Write|MultiEdit|Bash", 5, "add the top memories about the file read or edited "
             "(or the files a Bash command names), each once per session"),
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




def read_tool_rules() -> tuple[str, ...]:
    """Claude Code permission rules (``mcp__codemem__<tool>``) for codemem's read-only MCP tools:
    the registry's tools whose calls change nothing a user sees (``--allow-read-tools``)."""
    # lazy: only init --allow-read-tools and undo need the registry
    from query_server.tools import READ, mcp_tools

    return tuple(f"mcp__{SERVER_NAME}__{entry.name}" for entry in mcp_tools() if entry.retry == READ)

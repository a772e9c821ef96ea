"""Set a project up for Claude Code, and take it down again: plain functions under `codemem init`.

The package: ``entries`` (what codemem adds and how it recognises it), ``edits`` (merging edits of
one file's text), ``plan`` (plan, record, diff, apply).

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

from query_server.claude_setup.entries import (
    BARE,
    CLAUDE_SECTION,
    DOCUMENTED_HOOK_EVENTS,
    HOOK_COMMANDS,
    HOOK_EVENTS,
    HOOK_RUNNER,
    HOOKS,
    MCP_SERVER,
    RECORD_PATH,
    SCOPES,
    SECTION_BEGIN,
    SECTION_END,
    SERVER_NAME,
    TOOL_EVENTS,
    HookSpec,
    Launcher,
    SetupError,
    _hook_event,
    find_launcher,
    hooks_config,
    read_tool_rules,
)
from query_server.claude_setup.plan import (
    FileChange,
    Plan,
    Targets,
    apply_plan,
    plan_init,
    plan_undo,
    render_diff,
    targets,
)

__all__ = [
    "BARE", "CLAUDE_SECTION", "DOCUMENTED_HOOK_EVENTS", "HOOKS", "HOOK_COMMANDS", "HOOK_EVENTS", "HOOK_RUNNER",
    "MCP_SERVER",
    "RECORD_PATH", "SCOPES", "SECTION_BEGIN", "SECTION_END", "SERVER_NAME", "TOOL_EVENTS", "FileChange", "HookSpec",
    "Launcher", "Plan", "SetupError", "Targets", "_hook_event", "apply_plan", "find_launcher", "hooks_config",
    "plan_init", "plan_undo", "read_tool_rules", "render_diff", "targets",
]

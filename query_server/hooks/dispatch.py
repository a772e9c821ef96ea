"""``codemem hook <Event>``: the Claude Code hooks (SessionStart, PostToolUse, PreToolUse,
PreCompact, SessionEnd) and git's post-commit hook (GitPostCommit) — read the event's JSON, run its
module, answer.

Claude Code runs a hook command for every matching event and waits for it, so each hook must
answer within a few tens of milliseconds. The hook modules therefore import **only the standard
library** (no click, rich, pydantic, models or store clients; on their normal paths not even ``re``,
``json``, ``pathlib`` or ``enum``: see ``query_server.hooks.common``) and read the project's SQLite files
read-only (``resources.memory.ledger_reader``, ``resources.manifest_reader``);
``query_server.entry`` routes ``codemem hook`` here before anything else loads, and only the
module of the event at hand is imported.

Input is the hook JSON on stdin (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``,
``tool_name``, ``tool_input``, ``prompt``, ``source``, ``trigger``, ``reason`` …); output follows Claude Code's
documented formats (https://code.claude.com/docs/en/hooks):

* SessionStart (``session_start``) — ``hookSpecificOutput.additionalContext`` (≤ ~2,000 tokens):
  memory counts per type, what changed since the last session, stale memories, index freshness,
  the tools to use.
* UserPromptSubmit (``user_prompt_submit``) — ``hookSpecificOutput.additionalContext``: a reminder to
  record what came out of the files edited since the last memory, and to look up earlier decisions
  before a design choice (seed 002 FR-031/032).
* PostToolUse (``post_tool_use``; Read/Edit/Write/MultiEdit, Bash) — ``hookSpecificOutput.additionalContext``:
  the top 3 memories about that file (or the files a Bash command names; gotchas, patterns and
  designs first), each shown once per session.
* PreToolUse (``pre_tool_use``) — ``hookSpecificOutput.permissionDecision: "deny"`` with a reason
  for direct edits of the state dir (``.codemem/``) and Bash commands that write into it; silence
  (allow) otherwise.
* PreCompact, SessionEnd (``session_end``) — no output; a detached ``query_server.hooks.worker``
  process records a session memory from the transcript through the normal memory_add path.

* GitPostCommit (``post_commit``) — not a Claude Code event: git's post-commit hook, installed by
  ``codemem init --git-notes``; no output; a detached ``query_server.hooks.notes_worker`` ties the
  decisions recorded since the previous commit to the new one (git notes in ``refs/notes/cs/decisions``).

A hook never blocks Claude Code on its own failure: any exception is logged as one line to
``<state>/logs/hooks.log`` and the hook exits 0 with no output. Unknown events exit 0 silently.
A project without a state dir (not indexed) gets a one-line hint at SessionStart, nothing else.
"""

import sys

from query_server.hooks.common import Project, log_error, read_payload, write_answer

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreToolUse", "PreCompact", "SessionEnd")
"""The Claude Code events (``query_server.claude_setup`` installs one hook for each)."""
GIT_EVENTS = ("GitPostCommit",)
"""git's hooks (``codemem init --git-notes`` installs them in the repository)."""
USAGE = (
    "usage: codemem hook <Event>   (Event: " + ", ".join(EVENTS + GIT_EVENTS) + ")\n"
    "Reads Claude Code's hook JSON on stdin and answers in its hook output format; "
    "`codemem init` writes these commands into .claude/settings.json.\n"
)


def run_event(event: str, project: Project, payload: dict) -> dict | None:
    """Run the hook of ``event`` (one of ``EVENTS`` or ``GIT_EVENTS``); its answer, or None for silence."""
    if event == "SessionStart":
        from query_server.hooks.session_start import session_start

        return session_start(project, payload)
    if event == "PostToolUse":
        from query_server.hooks.post_tool_use import post_tool_use

        return post_tool_use(project, payload)
    if event == "PreToolUse":
        from query_server.hooks.pre_tool_use import pre_tool_use

        return pre_tool_use(project, payload)
    if event == "UserPromptSubmit":
        from query_server.hooks.user_prompt_submit import user_prompt_submit

        return user_prompt_submit(project, payload)
    if event == "GitPostCommit":
        from query_server.hooks.post_commit import post_commit

        post_commit(project, payload)
        return None
    from query_server.hooks.session_end import record_session

    record_session(project, payload, event)
    return None


def main(argv: list[str] | None = None, raw: bytes | None = None) -> int:
    """Run one hook on ``raw`` (the JSON read from stdin already), else on stdin; always exit 0 (a
    failure is logged to <state>/logs/hooks.log, never shown)."""
    args = list(sys.argv[2:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    event = args[0] if args else ""
    project: Project | None = None
    try:
        payload = read_payload(raw)
        event = event or str(payload.get("hook_event_name") or "")
        if event not in EVENTS and event not in GIT_EVENTS:
            return 0
        project = Project(payload)
        output = run_event(event, project, payload)
        if output is not None:
            write_answer(output)
    except Exception as exc:  # noqa: BLE001 - a hook must never block Claude Code
        if project is None:
            try:
                project = Project({})
            except Exception:  # noqa: BLE001
                project = None
        log_error(project, event, exc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

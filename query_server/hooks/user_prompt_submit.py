"""UserPromptSubmit: reminders to record what a session learns (seed 002, FR-031 and FR-032).

* **Capture** (FR-031): once edits of ``EDITS_FOR_REMINDER`` different files were made since the
  last count (PostToolUse notes each edit; the count starts at the session's first prompt) and the
  ledger shows no memory added or changed since then (session summaries aside), the next prompt
  gets a line that names the files and asks for ``memory_add`` of what came out of that work.
  Either way the count starts again: a memory recorded meanwhile silences that reminder.
* **Think** (FR-032): a prompt that reads like a design decision ("should we …", "which library
  …", "trade-offs", "X vs Y", "migrate to …") gets a line to look up earlier decisions before
  choosing and to record the choice after — at most once every ``THINK_EVERY_PROMPTS`` prompts.

State per session in ``<state>/hooks/prompted-<session>.json``. Nothing else is read for a
prompt until a capture reminder may be due (then the ledger, once). Standard library only (see
``query_server.hooks.dispatch``).
"""

import os

from query_server.hooks.common import (
    BUSY_TIMEOUT_S,
    Project,
    additional_context,
    edited_file,
    json_dumps,
    json_loads,
    now_iso,
    read_text,
    session_key,
    write_atomic,
)

EDITS_FOR_REMINDER = 3
"""Distinct files edited since the last reminder (or the last memory recorded) that make one due."""
FILES_NAMED = 5
THINK_EVERY_PROMPTS = 5
DECISION_CUES = (
    "should we", "should i", "which approach", "which option", "which library", "which framework", "which database",
    "trade off", "trade offs", "tradeoff", "tradeoffs", "pros and cons", "versus", "vs", "choose between",
    "decide between", "decide whether", "decide on", "architecture", "architectural", "alternatives",
    "better approach", "best approach", "best way to", "migrate to", "migrate from", "adopt",
)
"""Phrases (lower case, whole words) that make a prompt read like a design decision."""
_SPACES = str.maketrans({ch: " " for ch in "\t\n\r.,;:!?()[]{}\"'`*/\\-=<>|"})
"""Punctuation read as a word break (not ``_``: ``vs_code`` is one name)."""
THINK_LINE = (
    "codemem: this reads like a design decision. Before choosing, memory_search it for earlier decisions and "
    "ADRs (get_design_context for the area you touch); once decided, record the choice and why with memory_add "
    "(type design)."
)


def user_prompt_submit(project: Project, payload: dict) -> dict | None:
    """The capture and think reminders due for this prompt, as additionalContext."""
    session_id = str(payload.get("session_id") or "")
    if not project.indexed or not session_id:
        return None
    path = os.path.join(project.hooks_dir, f"prompted-{session_key(session_id)}.json")
    try:
        state = json_loads(read_text(path))
        if not isinstance(state, dict):
            state = {}
    except (OSError, ValueError):
        state = {"since": now_iso()}  # the session's first prompt: memories are counted from here
    state["prompts"] = int(state.get("prompts") or 0) + 1
    lines = []
    capture = _capture_line(project, session_id, state)
    if capture:
        lines.append(capture)
    prompt = payload.get("prompt")
    if isinstance(prompt, str) and reads_like_a_decision(prompt) \
            and state["prompts"] - int(state.get("think_prompt") or -THINK_EVERY_PROMPTS) >= THINK_EVERY_PROMPTS:
        state["think_prompt"] = state["prompts"]
        lines.append(THINK_LINE)
    write_atomic(path, json_dumps(state))
    return additional_context("UserPromptSubmit", "\n".join(lines)) if lines else None


def reads_like_a_decision(prompt: str) -> bool:
    """The prompt holds one of ``DECISION_CUES`` as whole words, in any case."""
    padded = " " + " ".join(prompt[:2_000].translate(_SPACES).lower().split()) + " "
    return any(f" {cue} " in padded for cue in DECISION_CUES)


def _capture_line(project: Project, session_id: str, state: dict) -> str | None:
    """The capture reminder when one is due (updating ``state``), else None."""
    try:
        edits = [rel for rel in read_text(edited_file(project, session_id)).split("\n") if rel]
    except OSError:
        return None
    counted = int(state.get("edits_counted") or 0)
    new = list(dict.fromkeys(edits[counted:]))  # the files edited since the last count, each once
    if len(new) < EDITS_FOR_REMINDER:
        return None
    since = str(state.get("since") or "")
    state.update(edits_counted=len(edits), since=now_iso())
    if since and _recorded_since(project, since):
        return None  # the session recorded what it learned: count again from here
    named = ", ".join(new[:FILES_NAMED]) + (", …" if len(new) > FILES_NAMED else "")
    return (f"codemem: {len(new)} files edited in this session ({named}) and no memory recorded since. If a decision, "
            "a gotcha or a convention came out of that work, record it with memory_add now (design, code_pattern, "
            "user_preference) — memory_search first, to update a stored one rather than add a second.")


def _recorded_since(project: Project, since: str) -> bool:
    from resources.memory.ledger_reader import LedgerReader

    ledger = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S, project.kept)
    if ledger is None:
        return False
    try:
        return ledger.recorded_since(since) > 0
    finally:
        ledger.close()

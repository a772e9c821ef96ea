"""UserPromptSubmit reminders (seed 002 FR-031 ``memory-skill-reminder``, FR-032
``memory-think-reminder``) and their state, with real hook processes on a real ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from query_server.hooks.user_prompt_submit import (
    THINK_EVERY_PROMPTS,
    reads_like_a_decision,
)
from resources.memory.ledger import Ledger, NewMemory
from tests.query_server.hooks.test_hooks import (
    context_of,
    fixture,
    payload,
    project,  # noqa: F401 - the fixture: a real ledger and manifest
    run_hook,
)


def _prompt(root: Path, text: str, session: str) -> str:
    """The hook's additionalContext for one prompt ("" for silence)."""
    done, _ = run_hook("UserPromptSubmit", payload("user_prompt_submit.json", root, prompt=text, session_id=session), cwd=root)
    return context_of(done, "UserPromptSubmit") if done.stdout else ""


def _edit(root: Path, rel: str, session: str) -> None:
    tool_input = dict(fixture("tool_inputs.json")["Edit"], file_path=str(root / rel))
    done, _ = run_hook("PostToolUse", payload("post_tool_use_write.json", root, tool_name="Edit", tool_input=tool_input,
                                              session_id=session), cwd=root)
    assert done.returncode == 0


def test_fr_031_capture_is_suggested_after_significant_edits(project: dict[str, Any]) -> None:  # noqa: F811
    root, session = project["root"], "capture"
    (root / "src" / "retry.py").write_text("def retry():\n    pass\n")
    assert _prompt(root, "add retries to the dispatcher", session) == ""
    for rel in ("src/dispatch.py", "src/retry.py", "src/dispatch.py"):  # two files: not yet
        _edit(root, rel, session)
    assert _prompt(root, "go on", session) == ""
    _edit(root, "README.md", session)
    text = _prompt(root, "now the docs", session)
    assert "3 files edited" in text and "src/dispatch.py, src/retry.py, README.md" in text and "memory_add" in text
    assert _prompt(root, "thanks", session) == ""  # said once: counted again from here

    for rel in ("src/other.py", "src/retry.py", "src/dispatch.py"):  # files edited before count again after a reminder
        _edit(root, rel, session)
    session_memory = Ledger(project["state"] / "memory.db")  # a session summary (PreCompact's) is not a recorded learning
    session_memory.add([NewMemory(memory_type="session", content="Summary.", metadata={"session_id": session},
                                  importance_score=0.4)])
    session_memory.close()
    assert "3 files edited" in _prompt(root, "next", session)


def test_fr_031_a_memory_recorded_since_the_edits_silences_the_reminder(project: dict[str, Any]) -> None:  # noqa: F811
    root, session = project["root"], "recorded"
    assert _prompt(root, "start", session) == ""
    for rel in ("src/dispatch.py", "src/other.py", "README.md"):
        _edit(root, rel, session)
    ledger = Ledger(project["state"] / "memory.db")
    ledger.add([NewMemory(memory_type="design", content="ADR-9: dispatch is idempotent.",
                          metadata={"design_type": "ADR", "title": "ADR-9 idempotent dispatch", "status": "Accepted"},
                          importance_score=0.6)])
    ledger.close()
    assert _prompt(root, "next", session) == ""
    for rel in ("src/dispatch.py", "src/other.py", "README.md"):  # three more, nothing recorded since: due again
        _edit(root, rel, session)
    assert "3 files edited" in _prompt(root, "and again", session)


def test_fr_032_a_decision_prompt_gets_the_think_reminder(project: dict[str, Any]) -> None:  # noqa: F811
    root, session = project["root"], "think"
    text = _prompt(root, "Should we use Redis or Postgres for the job queue?", session)
    assert "design decision" in text and "memory_search" in text and "memory_add" in text
    assert _prompt(root, "Which library is better for retries, tenacity vs backoff?", session) == ""  # not every prompt
    for n in range(THINK_EVERY_PROMPTS - 2):
        assert _prompt(root, f"fix the typo number {n}", session) == ""
    assert "design decision" in _prompt(root, "What are the trade-offs of migrating to asyncio?", session)


@pytest.mark.parametrize(("prompt", "decision"), [
    ("Should we cache tokens in Redis?", True), ("which approach is simpler here", True), ("Postgres vs. SQLite?", True),
    ("list the pros and cons of both", True), ("Let's migrate to pydantic v2", True), ("what's the best way to store it", True),
    ("fix the failing test", False), ("rename vs_code_settings to editor_settings", False), ("adopted files are fine", False),
    ("run the linter and show me the output", False), ("explain this function", False),
])
def test_what_reads_like_a_decision(prompt: str, decision: bool) -> None:
    assert reads_like_a_decision(prompt) is decision


def test_reminders_stay_silent_without_state(tmp_path: Path) -> None:
    done, _ = run_hook("UserPromptSubmit", payload("user_prompt_submit.json", tmp_path, prompt="Should we use Redis?"),
                       cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

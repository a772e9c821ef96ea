"""``codemem hook <Event>`` through the real console script: Claude Code's documented payloads in
(tests/fixtures/hooks), its documented output formats out, within the time budget, stdlib only."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from resources.manifest import FileState, Manifest, SymbolRow
from resources.memory.ledger import Ledger, NewMemory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hooks"
CODEMEM = str(Path(sys.executable).with_name("codemem")) if Path(sys.executable).with_name("codemem").exists() else shutil.which("codemem")
SESSION = "5b0f4a8e-2d7c-4a51-9d0e-7c4b1a2f3e90"

pytestmark = pytest.mark.skipif(CODEMEM is None, reason="the codemem console script is not installed (pip install -e .)")


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEMEM_", "CLAUDE_")) and k != "PYTHONPROFILEIMPORTTIME"}
    env.update(extra)
    return env


def run_hook(event: str, payload: dict[str, Any] | str, *, cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    started = time.perf_counter()
    done = subprocess.run([CODEMEM, "hook", event], input=text, capture_output=True, text=True, cwd=cwd,
                          env=env or clean_env(PYTHONWARNINGS="error"), timeout=60, check=False)
    return done, time.perf_counter() - started


def context_of(done: subprocess.CompletedProcess[str], event: str) -> str:
    """The additionalContext of a documented ``hookSpecificOutput`` answer (checked against its shape)."""
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    documented = fixture("outputs.json")[event]
    assert set(output) <= set(documented), output
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == event
    assert set(specific) == {"hookEventName", "additionalContext"}
    assert isinstance(specific["additionalContext"], str) and specific["additionalContext"]
    return specific["additionalContext"]


def memory(memory_type: str, content: str, **metadata: Any) -> NewMemory:
    return NewMemory(memory_type=memory_type, content=content, metadata=metadata, importance_score=0.5)


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Any]:
    """A project with a real ledger (memories about src/dispatch.py and others) and a real manifest."""
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "dispatch.py").write_text("def dispatch(event):\n    return event\n")
    (root / "src" / "other.py").write_text("x = 1\n")
    (root / "README.md").write_text("readme\n")
    state = root / ".codemem"
    ledger = Ledger(state / "memory.db")
    rows = ledger.add([
        memory("code_pattern", "Gotcha: never call dispatch() inside a DB transaction in src/dispatch.py — it deadlocks.",
               pattern_name="Dispatch outside transactions", pattern_type="Convention", language="python",
               code_template="dispatch(e)", usage_context="webhooks"),
        memory("design", "Webhooks are retried with tenacity; see src.dispatch for the policy.",
               design_type="ADR", title="ADR-3 webhook retries", status="Accepted"),
        memory("component", "The webhook dispatcher package.", component_id="dispatcher", component_type="Service",
               name="Dispatcher", file_path="src"),
        memory("function", "Sends one event.", name="dispatch", signature="def dispatch(event)", file_path="src/dispatch.py",
               start_line=1, end_line=2, language="python"),
        memory("requirements", "Billing must reconcile invoices nightly.", requirement_id="REQ-BILL-001",
               title="Nightly reconcile", priority="High", status="Approved"),
        memory("user_preference", "Anchored to the dispatcher.", category="Convention", key="dispatch.anchor", value=1,
               scope="Project", anchors=[{"qualified_name": "src.dispatch.dispatch", "content_hash": "old"}]),
        memory("session", "Worked on src/dispatch.py last week.", session_id="old-session"),
        memory("design", "Mentions src/dispatcher.py, a different file.", design_type="Specification", title="Other",
               status="Proposed"),
    ])
    ledger.close()
    ids = {row.metadata.get("title") or row.metadata.get("pattern_name") or row.metadata.get("key") or row.memory_type: row.id
           for row in rows}
    with sqlite3.connect(state / "memory.db") as conn:  # the anchor_state table another change adds to the ledger
        conn.execute("CREATE TABLE IF NOT EXISTS anchor_state (memory_id TEXT, qualified_name TEXT, anchored_hash TEXT, "
                     "current_hash TEXT, stale INTEGER, checked_at TEXT)")
        conn.execute("INSERT INTO anchor_state VALUES (?, 'src.dispatch.dispatch', 'old', 'new', 1, '2026-01-01T00:00:00+00:00')",
                     (ids["dispatch.anchor"],))
    manifest = Manifest(state / "index.db")
    with manifest.transaction() as conn:
        entries = []
        for rel in ("src/dispatch.py", "src/other.py"):
            stat = (root / rel).stat()
            symbols = [SymbolRow(id=f"id-{rel}", path=rel, name="dispatch", local_name="dispatch",
                                 qualified_name=rel[:-3].replace("/", ".") + ".dispatch", kind="function", container=None,
                                 language="python", embed_text="", has_dense=False)]
            entries.append((FileState(rel, "python", "h", stat.st_size, stat.st_mtime_ns, "2026-01-01T00:00:00+00:00", 1, 0),
                            {}, symbols))
        manifest.replace_files(conn, entries)
    manifest.close()
    return {"root": root, "state": state, "ids": ids}


def payload(name: str, root: Path, **fields: Any) -> dict[str, Any]:
    data = fixture(name)
    data.update(session_id=SESSION, cwd=str(root))
    data.update(fields)
    return data


# -- SessionStart ---------------------------------------------------------------------------------


def test_session_start_reports_memories_stale_index_and_changes(project: dict[str, Any]) -> None:
    root, ids = project["root"], project["ids"]
    done, _ = run_hook("SessionStart", payload("session_start.json", root), cwd=root)
    text = context_of(done, "SessionStart")
    assert len(text) <= 6_000
    assert "Memories: 8 active" in text and "design 2" in text and "code_pattern 1" in text
    assert "Stale memories" in text and ids["dispatch.anchor"] in text
    assert "Index: 2 files, last indexed 2026-01-01 00:00 UTC" in text and "up to date" in text
    assert "Since the last session" in text  # baseline: the last session memory
    assert "memory_search" in text and "code_search" in text

    # a change between sessions is reported at the next session's start; a resume keeps the baseline
    (root / "src" / "other.py").write_text("x = 2\n")
    ledger = Ledger(project["state"] / "memory.db")
    added = ledger.add([memory("design", "Use JWTs for sessions.", design_type="ADR", title="ADR-9 tokens", status="Accepted")])[0]
    ledger.close()
    done, _ = run_hook("SessionStart", payload("session_start.json", root, session_id="next-session"), cwd=root)
    text = context_of(done, "SessionStart")
    assert "1 new, 0 updated, 0 deleted" in text and added.id in text and "ADR-9 tokens" in text
    assert "1 file(s) changed since" in text
    resumed, _ = run_hook("SessionStart", payload("session_start.json", root, session_id="next-session", source="resume"), cwd=root)
    assert added.id in context_of(resumed, "SessionStart")


def test_session_start_without_state_gives_a_hint_and_other_events_stay_silent(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    done, _ = run_hook("SessionStart", payload("session_start.json", bare), cwd=bare)
    text = context_of(done, "SessionStart")
    assert "\n" not in text and "codemem index" in text
    read = payload("post_tool_use_write.json", bare, tool_name="Read", tool_input={"file_path": str(bare / "a.py")})
    for event, data in (("PostToolUse", read), ("PreToolUse", payload("pre_tool_use_bash.json", bare)),
                        ("PreCompact", payload("pre_compact.json", bare)), ("SessionEnd", payload("session_end.json", bare))):
        done, _ = run_hook(event, data, cwd=bare)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), event
    assert not (bare / ".codemem").exists()


def test_state_dir_from_environment(project: dict[str, Any], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(project["state"], elsewhere)
    done, _ = run_hook("SessionStart", payload("session_start.json", project["root"]), cwd=tmp_path,
                       env=clean_env(CODEMEM_STATE_DIR=str(elsewhere)))
    assert "Memories: 8 active" in context_of(done, "SessionStart")


def test_session_start_prunes_old_per_session_state(project: dict[str, Any]) -> None:
    root, hooks_dir = project["root"], project["state"] / "hooks"
    hooks_dir.mkdir(exist_ok=True)
    old, fresh = hooks_dir / "shown-old.txt", hooks_dir / "shown-fresh.txt"
    for path in (old, fresh):
        path.write_text("x\n")
    week_ago = time.time() - 8 * 86_400
    os.utime(old, (week_ago, week_ago))
    context_of(run_hook("SessionStart", payload("session_start.json", root), cwd=root)[0], "SessionStart")
    assert not old.exists() and fresh.exists() and (hooks_dir / "last_session.json").exists()


def test_the_read_ahead_prunes_old_per_session_state_off_the_next_start(project: dict[str, Any]) -> None:
    """A start that finds the stores read ahead leaves pruning to the read ahead (the session's end)."""
    from query_server.hooks.session_start import read_ahead

    root, hooks_dir = project["root"], project["state"] / "hooks"
    hooks_dir.mkdir(exist_ok=True)
    old = hooks_dir / "edited-old.txt"
    old.write_text("src/a.py\n")
    week_ago = time.time() - 8 * 86_400
    os.utime(old, (week_ago, week_ago))
    assert read_ahead(str(root), str(project["state"]))
    assert not old.exists() and (hooks_dir / "session_start.json").exists()


def test_the_event_may_come_from_the_payload_and_help_is_plain(project: dict[str, Any]) -> None:
    root = project["root"]
    done = subprocess.run([CODEMEM, "hook"], input=json.dumps(payload("session_start.json", root)), capture_output=True,
                          text=True, cwd=root, env=clean_env(), check=False)
    assert "Memories: 8 active" in context_of(done, "SessionStart")
    done = subprocess.run([CODEMEM, "hook", "--help"], capture_output=True, text=True, env=clean_env(), check=False)
    assert done.returncode == 0 and "SessionStart" in done.stdout and "PreToolUse" in done.stdout


# -- PostToolUse ----------------------------------------------------------------------------------


def read_of(root: Path, rel: str, tool: str = "Read", session: str = SESSION) -> dict[str, Any]:
    tool_input = dict(fixture("tool_inputs.json")[tool], file_path=str(root / rel))
    return payload("post_tool_use_write.json", root, tool_name=tool, tool_input=tool_input, session_id=session)


def test_post_tool_use_injects_top_memories_once_per_session(project: dict[str, Any]) -> None:
    root, ids = project["root"], project["ids"]
    done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py"), cwd=root)
    text = context_of(done, "PostToolUse")
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(lines) == 3 and "src/dispatch.py" in text.splitlines()[0]
    assert ids["Dispatch outside transactions"] in lines[0]  # the gotcha first, then the ADR
    assert ids["ADR-3 webhook retries"] in lines[1]
    assert ids["dispatch.anchor"] in lines[2] and "stale" in lines[2]  # anchored through anchor_state
    assert ids["Other"] not in text and ids["Nightly reconcile"] not in text and "old-session" not in text

    again, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", "Edit"), cwd=root)
    rest = context_of(again, "PostToolUse")
    assert not any(line.split("(id ")[-1].rstrip(")") in text for line in rest.splitlines() if line.startswith("- "))
    assert ids["function"] in rest  # its file_path
    # the package's component (file_path "src") is about every file of src/, not this one: never shown
    assert ids["component"] not in text and ids["component"] not in rest

    for tool in ("Write", "MultiEdit"):
        while True:  # the same session sees each memory once, then nothing
            done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", tool), cwd=root)
            if not done.stdout:
                break
            context_of(done, "PostToolUse")
    other_session, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", session="another"), cwd=root)
    assert ids["Dispatch outside transactions"] in context_of(other_session, "PostToolUse")


@pytest.mark.parametrize(("tool", "rel"), [("Read", "README.md"), ("Read", "tools/run.py"), ("Bash", "ls -la src"),
                                           ("Bash", "cat README.md && rm -f .codemem/x"), ("Bash", "pytest tests/missing.py"),
                                           ("Read", ".codemem/memory.db"), ("Read", "../outside.py")])
def test_post_tool_use_is_silent_without_a_match(project: dict[str, Any], tool: str, rel: str) -> None:
    root = project["root"]
    data = read_of(root, "src/dispatch.py")
    data.update(tool_name=tool, tool_input={"file_path": str(root / rel)} if tool != "Bash" else {"command": rel})
    done, _ = run_hook("PostToolUse", data, cwd=root)
    assert (done.returncode, done.stdout) == (0, "")


@pytest.mark.parametrize("command", [
    "python src/dispatch.py --dry-run", "pytest 'src/dispatch.py::test_x' -q", "cd src && python dispatch.py",
    "git diff -- ./src/dispatch.py | head", "FOO=1 python3 src/other.py src/dispatch.py",
])
def test_post_tool_use_after_bash_brings_the_memories_of_the_files_it_names(project: dict[str, Any], command: str) -> None:
    """Seed 002 FR-029: Bash-specific memory context — the gotcha of a file a command runs, once per session."""
    root, ids = project["root"], project["ids"]
    cwd = root / "src" if command.startswith("cd src") else root
    data = payload("post_tool_use_write.json", root, tool_name="Bash", tool_input={"command": command.removeprefix("cd src && ")},
                   cwd=str(cwd), session_id=f"bash-{command}")
    done, _ = run_hook("PostToolUse", data, cwd=root)
    text = context_of(done, "PostToolUse")
    assert "src/dispatch.py" in text.splitlines()[0] and ids["Dispatch outside transactions"] in text
    again, _ = run_hook("PostToolUse", data, cwd=root)
    assert ids["Dispatch outside transactions"] not in again.stdout


# -- PreToolUse -----------------------------------------------------------------------------------


def deny_reason(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    documented = fixture("outputs.json")["PreToolUse"]
    assert set(output) == set(documented) and set(output["hookSpecificOutput"]) == set(documented["hookSpecificOutput"])
    assert output["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert output["hookSpecificOutput"]["permissionDecision"] == "deny"
    return output["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize("tool", ["Edit", "Write", "MultiEdit"])
def test_pre_tool_use_denies_file_edits_in_the_state_dir(project: dict[str, Any], tool: str) -> None:
    root = project["root"]
    for target in (root / ".codemem" / "memory.db", root / ".codemem" / "hooks" / "new.json", root / "src" / ".." / ".codemem" / "x"):
        data = payload("pre_tool_use_bash.json", root, tool_name=tool,
                       tool_input=dict(fixture("tool_inputs.json")[tool], file_path=str(target)))
        reason = deny_reason(run_hook("PreToolUse", data, cwd=root)[0])
        assert "memory_add" in reason and "memory_update" in reason and ".codemem" in reason
    allowed = payload("pre_tool_use_bash.json", root, tool_name=tool,
                      tool_input=dict(fixture("tool_inputs.json")[tool], file_path=str(root / "src" / "dispatch.py")))
    done, _ = run_hook("PreToolUse", allowed, cwd=root)
    assert (done.returncode, done.stdout) == (0, "")


DENIED = [
    "rm -rf .codemem", "rm .codemem/memory.db", "cd src && rm -f ../.codemem/index.db", "mv .codemem/memory.db /tmp/x",
    "sed -i 's/a/b/' .codemem/hooks/last_session.json", "echo x > .codemem/memory.db", "cat a >> ./.codemem/logs/x.log",
    "cp /tmp/evil.db .codemem/memory.db", "sqlite3 .codemem/memory.db 'DELETE FROM memories'",
    "sqlite3 .codemem/memory.db < wipe.sql", "find .codemem -name '*.db' -delete", "ls .codemem/*.db | xargs rm",
    "truncate -s 0 $CLAUDE_PROJECT_DIR/.codemem/memory.db", "bash -c 'rm -rf .codemem/qdrant'",
    "cd .codemem && echo hi > notes.txt", "tee .codemem/x < /dev/null", "dd if=/dev/zero of=.codemem/memory.db",
]
ALLOWED = [
    "npm test", "ls -la .codemem", "cat .codemem/logs/hooks.log", "cp .codemem/memory.db /tmp/backup.db",
    "sqlite3 -readonly .codemem/memory.db 'SELECT COUNT(*) FROM memories'", "rm -rf build dist", "echo .codemem > notes.txt",
    "grep -r codemem . > /tmp/out.txt 2>&1", "du -sh .codemem", "codemem memory list --json",
]


@pytest.mark.parametrize("command", DENIED)
def test_pre_tool_use_denies_bash_writes_into_the_state_dir(project: dict[str, Any], command: str) -> None:
    root = project["root"]
    data = payload("pre_tool_use_bash.json", root, tool_input={"command": command})
    reason = deny_reason(run_hook("PreToolUse", data, cwd=root, env=clean_env(CLAUDE_PROJECT_DIR=str(root)))[0])
    assert reason.startswith("codemem: Bash command refused") and "memory tools" in reason


@pytest.mark.parametrize("command", ALLOWED)
def test_pre_tool_use_allows_everything_else(project: dict[str, Any], command: str) -> None:
    root = project["root"]
    data = payload("pre_tool_use_bash.json", root, tool_input={"command": command})
    done, _ = run_hook("PreToolUse", data, cwd=root)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# -- failures -------------------------------------------------------------------------------------


def test_failures_exit_zero_silently_and_are_logged(project: dict[str, Any]) -> None:
    root, state = project["root"], project["state"]
    done, _ = run_hook("SessionStart", "{not json", cwd=root)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    for unknown in ("Stop", "Nonsense", "sessionstart"):
        done, _ = run_hook(unknown, payload("session_start.json", root), cwd=root)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    for suffix in ("", "-wal", "-shm"):
        (state / f"memory.db{suffix}").unlink(missing_ok=True)
    (state / "memory.db").write_bytes(b"this is not a database" * 100)
    for event, data in (("SessionStart", payload("session_start.json", root)), ("PostToolUse", read_of(root, "src/dispatch.py"))):
        done, _ = run_hook(event, data, cwd=root)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), event
    lines = (state / "logs" / "hooks.log").read_text().splitlines()
    assert len(lines) == 3
    assert "SessionStart JSONDecodeError" in lines[0]
    assert "SessionStart DatabaseError" in lines[1] and "PostToolUse DatabaseError" in lines[2]


# -- stdlib only, fast ----------------------------------------------------------------------------


HOOK_ENTRY = {"query_server", "query_server.entry", "query_server.hooks", "query_server.hooks.relay",
              "query_server.hooks.dispatch", "query_server.hooks.common"}
STORE_READERS = {"resources", "resources.sqlite_readonly", "resources.manifest_reader", "resources.memory",
                 "resources.memory.ledger_reader"}
"""The stdlib-only readers of the ledger and the manifest (and the docstring-only packages above them)."""


def test_hook_process_imports_only_the_standard_library(project: dict[str, Any]) -> None:
    root = project["root"]
    cases = {
        "SessionStart": payload("session_start.json", root),
        "PostToolUse": read_of(root, "src/dispatch.py"),
        "PreToolUse": payload("pre_tool_use_bash.json", root, tool_input={"command": "rm -rf .codemem"}),
        "PreCompact": payload("pre_compact.json", root, transcript_path=str(root / "missing.jsonl")),
        "UserPromptSubmit": payload("user_prompt_submit.json", root, prompt="Should we retry?"),
    }
    expected = {  # the entry, the module of the event and what it reads with
        "SessionStart": HOOK_ENTRY | {"query_server.hooks.session_start", "query_server.hooks.mentions"} | STORE_READERS,
        "PostToolUse": HOOK_ENTRY | {"query_server.hooks.post_tool_use", "query_server.hooks.mentions"} | STORE_READERS,
        "PreToolUse": HOOK_ENTRY | {"query_server.hooks.pre_tool_use"},
        "PreCompact": HOOK_ENTRY | {"query_server.hooks.session_end"},
        "UserPromptSubmit": HOOK_ENTRY | {"query_server.hooks.user_prompt_submit"},
    }
    for event, data in cases.items():
        done, _ = run_hook(event, data, cwd=root, env=clean_env(PYTHONPROFILEIMPORTTIME="1"))
        assert done.returncode == 0
        modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        modules.discard("imported package")
        ours = {m for m in modules if m.split(".")[0] in ("query_server", "resources", "pipelines")}
        assert ours == expected[event], (event, ours)
        foreign = {m for m in modules - ours if m.split(".")[0] not in sys.stdlib_module_names
                   and not m.startswith(("__editable__", "_distutils_hack", "sitecustomize", "_virtualenv"))}
        assert not foreign, (event, foreign)


def test_hooks_answer_quickly(project: dict[str, Any]) -> None:
    """A loose guard (shared CI machines): the real budget (p95 ≤ 50 ms) is measured by bench.hooks."""
    root = project["root"]
    cases = [("SessionStart", payload("session_start.json", root)), ("PostToolUse", read_of(root, "src/other.py")),
             ("PreToolUse", payload("pre_tool_use_bash.json", root))]
    for event, data in cases:
        times = sorted(run_hook(event, data, cwd=root)[1] for _ in range(7))
        assert times[3] < 0.5, (event, times)


# -- PreCompact / SessionEnd ----------------------------------------------------------------------


def _extracted_memories(state: Path) -> list[tuple[str, str, dict[str, Any]]]:
    conn = sqlite3.connect(f"file:{state / 'memory.db'}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT memory_type, content, metadata FROM memories WHERE deleted = 0").fetchall()
    finally:
        conn.close()
    return [(t, c, json.loads(m)) for t, c, m in rows if "extracted" in json.loads(m)]


def _session_memories(state: Path, session_id: str) -> list[tuple[str, str, dict[str, Any], int]]:
    conn = sqlite3.connect(f"file:{state / 'memory.db'}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT id, content, metadata, version FROM memories WHERE memory_type = 'session' AND deleted = 0").fetchall()
    finally:
        conn.close()
    return [(i, c, json.loads(m), v) for i, c, m, v in rows if json.loads(m).get("session_id") == session_id]


def _wait_for(check, timeout: float = 240.0):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    return None


@pytest.mark.slow
def test_precompact_and_session_end_record_one_session_memory(project: dict[str, Any]) -> None:
    root, state = project["root"], project["state"]
    transcript = root.parent / "transcript.jsonl"
    lines = (FIXTURES / "transcript.jsonl").read_text().replace("PROJECT", str(root)).splitlines(keepends=True)
    transcript.write_text("".join(lines[:5]))  # up to the Edit: what a compaction halfway through sees
    worker_log = state / "logs" / "hooks-worker.log"

    done, elapsed = run_hook("PreCompact", payload("pre_compact.json", root, transcript_path=str(transcript)), cwd=root,
                             env=clean_env())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "") and elapsed < 2.0
    first = _wait_for(lambda: _session_memories(state, SESSION))
    assert first is not None, worker_log.read_text() if worker_log.exists() else "no worker log"
    (memory_id, content, meta, version), = first
    assert "src/dispatch.py" in content and "tenacity" in content and "Add retry with backoff" in content
    assert meta["files_modified"] == ["src/dispatch.py"] and meta["outcome"] == "context compacted (manual)"
    assert meta["start_time"] == "2026-01-10T09:00:00.000Z" and version == 1
    assert any("decided to use tenacity" in d for d in meta["key_decisions"])
    assert _wait_for(lambda: (state / "hooks").glob("recorded-*.json") and list((state / "hooks").glob("recorded-*.json")), 30)
    # the decision said in the conversation is stored through memory_extract, once
    (decision,) = _extracted_memories(state)
    assert decision[0] == "design" and decision[1] == "I decided to use tenacity for the retries instead of a hand-written loop."
    assert decision[2]["tags"][:2] == ["extracted", "transcript"] and decision[2]["extracted"]["session_id"] == SESSION

    transcript.write_text("".join(lines))  # the whole session, then it ends
    done, elapsed = run_hook("SessionEnd", payload("session_end.json", root, transcript_path=str(transcript)), cwd=root,
                             env=clean_env())
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "") and elapsed < 2.0
    updated = _wait_for(lambda: [m for m in _session_memories(state, SESSION) if m[3] == 2])
    assert updated is not None, worker_log.read_text()
    (same_id, content, meta, _), = updated
    assert same_id == memory_id
    assert meta["files_modified"] == ["src/dispatch.py", "tests/test_dispatch.py"]
    assert meta["memories_created"] == ["0b0e7c1e-5f0c-4d39-9a55-3f7d2f0c2a11"]
    assert meta["outcome"] == "session ended (other)" and "Memories created: 0b0e7c1e" in content

    run_hook("SessionEnd", payload("session_end.json", root, transcript_path=str(transcript)), cwd=root, env=clean_env())  # a repeat
    assert _wait_for(lambda: "already recorded" in worker_log.read_text(), 240)
    assert [m[3] for m in _session_memories(state, SESSION)] == [2]
    assert len(_extracted_memories(state)) == 1  # later hooks read only what was said since, and skip duplicates

    # the worker read the stores for the next session's start: it renders them without opening either
    assert "next session's start read ahead" in worker_log.read_text()
    done, _ = run_hook("SessionStart", payload("session_start.json", root, session_id="the-next-one"), cwd=root,
                       env=clean_env(PYTHONPROFILEIMPORTTIME="1"))
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "sqlite3" not in imported and "Memories: 10 active" in context_of(done, "SessionStart")


# -- the mentions cache behind PostToolUse ----------------------------------------------------------


def _cache_meta(state: Path) -> dict[str, str]:
    with sqlite3.connect(state / "hooks" / "mentions.db") as conn:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def test_mentions_cache_matches_the_ledger_scan_and_follows_changes(project: dict[str, Any]) -> None:
    from query_server.hooks.common import BUSY_TIMEOUT_S, Project
    from query_server.hooks.mentions import build_mentions, lookup_mentions, mentions_cache
    from query_server.hooks.post_tool_use import anchor_matches, match_strength, module_name
    from resources.memory.ledger_reader import LedgerReader
    root, state, ids = project["root"], project["state"], project["ids"]
    assert "mentions cache built: 8 memories" in build_mentions(state)
    target = Project({"cwd": str(root)})
    for rel in ("src/dispatch.py", "src/other.py", "src/dispatcher.py", "README.md", "tools/run.py"):
        module = module_name(rel)
        ledger = LedgerReader.open(target.ledger_path, BUSY_TIMEOUT_S)
        anchored, _ = anchor_matches(target, ledger, rel)
        cache = mentions_cache(target, ledger)
        assert cache is not None
        from_cache = lookup_mentions(cache, target, rel, module) | dict.fromkeys(anchored, 1.0)
        cache.close()
        scanned = {}
        for memory_id, _type, content, metadata, _ in ledger.mentioning(rel, module, anchored):
            strength = match_strength(rel, module, memory_id in anchored, content, metadata, json.loads(metadata))
            if strength > 0:
                scanned[memory_id] = strength
        ledger.close()
        assert from_cache == scanned, rel
    assert set(lookup_mentions(sqlite3.connect(state / "hooks" / "mentions.db"), target, "src/dispatcher.py",
                               "src.dispatcher")) == {ids["Other"]}  # a mention; the directory's component is not about it

    before = _cache_meta(state)
    ledger = Ledger(state / "memory.db")
    new = ledger.add([NewMemory(memory_type="code_pattern", content="Careful: src/dispatch.py must stay import-free.",
                                metadata={"pattern_name": "Import-free dispatch"}, importance_score=1.0)])[0]
    ledger.soft_delete(ids["Dispatch outside transactions"])
    ledger.close()
    done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", session="after-change"), cwd=root)
    text = context_of(done, "PostToolUse")
    assert new.id in text.splitlines()[1] and ids["Dispatch outside transactions"] not in text
    after = _cache_meta(state)
    assert after["built_at"] == before["built_at"] and int(after["seq"]) == int(before["seq"]) + 2  # in place, from the audit

    ledger = Ledger(state / "memory.db")
    ledger.hard_delete([new.id])
    ledger.close()
    done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", session="after-delete"), cwd=root)
    assert new.id not in context_of(done, "PostToolUse")
    assert _cache_meta(state)["built_at"] == before["built_at"]

    shutil.copy(state / "memory.db", root / "copy.db")  # another ledger file (what `codemem restore` does)
    os.replace(root / "copy.db", state / "memory.db")
    done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", session="after-restore"), cwd=root)
    assert ids["ADR-3 webhook retries"] in context_of(done, "PostToolUse")  # the scan answers while the cache is rebuilt
    assert _wait_for(lambda: _cache_meta(state)["built_at"] != before["built_at"], 60)
    done, _ = run_hook("PostToolUse", read_of(root, "src/dispatch.py", session="after-rebuild"), cwd=root)
    assert ids["ADR-3 webhook retries"] in context_of(done, "PostToolUse") and new.id not in done.stdout


def test_a_session_that_touched_thousands_of_files_is_still_storable() -> None:
    """Metadata is capped at 64 KiB: the session memory of a huge refactor lists what fits and
    counts the rest, and passes the same validation memory_add applies."""
    from query_server.hooks.worker import SessionDigest, render
    from resources.schemas.memory import MemoryAddInput

    digest = SessionDigest(session_id="big-refactor", requests=["Rename the billing package"])
    digest.files = [f"src/billing/module_{n:05d}/implementation_of_feature_{n:05d}.py" for n in range(5_000)]
    digest.memories = [f"00000000-0000-4000-8000-{n:012d}" for n in range(3_000)]
    content, metadata = render(digest, "SessionEnd", "other")
    MemoryAddInput(memory_type="session", content=content, metadata=metadata)  # raises over the limit
    assert metadata["files_modified_count"] == 5_000 and 100 < len(metadata["files_modified"]) < 5_000
    assert metadata["files_modified"] == digest.files[: len(metadata["files_modified"])]
    assert metadata["memories_created_count"] == 3_000
    assert len(json.dumps(metadata)) < 64 * 1024


def test_a_small_index_is_checked_whole_however_busy_the_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mtime check's time budget bounds a large index's check; a small one is checked whole, so
    a start says the same on a busy machine as on a quiet one (the relayed hook answers as the hook
    process does)."""
    import types

    from query_server.hooks import session_start

    monkeypatch.setattr(session_start, "MTIME_CHECK_BUDGET_S", -1.0)  # the deadline passed before the first file
    recent = []
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("x = 1\n")
        recent.append((f"m{i}.py", (tmp_path / f"m{i}.py").stat().st_mtime_ns))
    index = {"files": 3, "last": [time.time(), "now"], "recent": recent}
    line = session_start._index_lines(types.SimpleNamespace(root=str(tmp_path)), index, time.time())[0]
    assert line.endswith("; up to date"), line

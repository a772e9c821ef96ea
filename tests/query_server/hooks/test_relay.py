"""The hooks' fast path (issue 18): while a server runs for the project, a hook process sends
Claude Code's JSON to the server's relay (``query_server.hooks.relay_server``) and prints its
answer — the answer the hook process would have given by itself — importing nothing but
``sys``, ``posix`` and ``_socket``; without a live relay it answers by itself."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from query_server.hooks.relay import SOCKET_FILE, request
from query_server.hooks.relay_server import REFUSED, HookRelay, answer
from tests.query_server.hooks.test_hook_floor import run_bare
from tests.query_server.hooks.test_hooks import (
    CODEMEM,
    clean_env,
    fixture,
    payload,
    project,  # noqa: F401 - the fixture: a real ledger and manifest
    read_of,
)

RELAY_IMPORTS = {"_socket", "query_server", "query_server.hooks", "query_server.hooks.relay"}
"""All a relayed hook process imports beyond the interpreter's own start (no ``os``, no sqlite3)."""


def _interpreter_start() -> set[str]:
    """What ``python -S`` imports before running anything."""
    done = subprocess.run([sys.executable, "-S", "-X", "importtime", "-c", "pass"], capture_output=True, text=True,
                          env=clean_env(), check=True)
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines()} - {"imported package"}


def _sequence(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """Hooks of two sessions, in order: each event's answers and silences, per-session state included."""
    edit = dict(fixture("tool_inputs.json")["Edit"], file_path=str(root / ".codemem" / "memory.db"))
    return [
        ("SessionStart", payload("session_start.json", root, session_id="relay-1")),
        ("PostToolUse", read_of(root, "src/dispatch.py", session="relay-1")),
        ("PostToolUse", read_of(root, "src/dispatch.py", session="relay-1")),  # shown once: silence
        ("PostToolUse", read_of(root, "src/other.py", session="relay-1")),
        ("PreToolUse", payload("pre_tool_use_bash.json", root, tool_name="Edit", tool_input=edit)),
        ("PreToolUse", payload("pre_tool_use_bash.json", root, tool_input={"command": "rm -rf .codemem"})),
        ("PreToolUse", payload("pre_tool_use_bash.json", root, tool_input={"command": "npm test"})),
        ("UserPromptSubmit", payload("user_prompt_submit.json", root, session_id="relay-1", prompt="Should we retry?")),
        ("PostToolUse", payload("post_tool_use_write.json", root, session_id="relay-3", tool_name="Bash",
                                tool_input={"command": "python src/dispatch.py"})),
        ("SessionStart", payload("session_start.json", root, session_id="relay-2")),
        ("PostToolUse", read_of(root, "src/dispatch.py", session="relay-2")),
    ]


def test_a_relayed_hook_answers_as_the_hook_process_would(project: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    root = project["root"]
    twin = tmp_path / "twin" / "proj"  # the same project, same name, answered by its hook processes
    shutil.copytree(root, twin)
    floor = _interpreter_start() | RELAY_IMPORTS
    relay = HookRelay(project["state"])
    relay.start()
    try:
        assert relay.listening and (project["state"] / SOCKET_FILE).is_socket()
        assert (project["state"] / SOCKET_FILE).stat().st_mode & 0o777 == 0o600  # only this user's hooks connect
        answered = 0
        for (event, served_data), (_, alone_data) in zip(_sequence(root), _sequence(twin), strict=True):
            served, served_modules = run_bare(event, served_data, root)
            alone, alone_modules = run_bare(event, alone_data, twin)
            assert served.stdout.replace(str(root), "<root>") == alone.stdout.replace(str(twin), "<root>"), event
            assert served_modules <= floor, (event, sorted(served_modules - floor))
            if event not in ("PreToolUse", "UserPromptSubmit"):  # the hook process reads the stores itself; the relayed one did not
                assert "sqlite3" in alone_modules and "sqlite3" not in served_modules
            answered += bool(served.stdout)
        assert answered == 9  # both session starts, 3 reads with news (other.py: its folder's component), 2 denials,
        # the think reminder, the Bash command's file
    finally:
        relay.close()
    assert not (project["state"] / SOCKET_FILE).exists()


def test_the_console_script_is_relayed_too(project: dict[str, Any]) -> None:  # noqa: F811
    root = project["root"]
    relay = HookRelay(project["state"])
    relay.start()
    try:
        data = json.dumps(payload("session_start.json", root, session_id="relay-cs"))
        done = subprocess.run([CODEMEM, "hook", "SessionStart"], input=data, capture_output=True, text=True, cwd=root,
                              env=clean_env(PYTHONPROFILEIMPORTTIME="1"), timeout=60, check=False)
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        assert done.returncode == 0 and "Memories: 8 active" in done.stdout
        assert "query_server.hooks.relay" in imported and "sqlite3" not in imported
        assert "query_server.hooks.dispatch" not in imported
    finally:
        relay.close()


def test_without_a_live_relay_the_hook_answers_by_itself(project: dict[str, Any]) -> None:  # noqa: F811
    root, state = project["root"], project["state"]
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a killed server's socket file: nobody listens
    stale.bind(str(state / SOCKET_FILE))
    stale.close()
    done, modules = run_bare("SessionStart", payload("session_start.json", root, session_id="alone"), root)
    assert "Memories: 8 active" in done.stdout and "sqlite3" in modules
    relay = HookRelay(state)  # the next server replaces the stale file
    relay.start()
    try:
        assert relay.listening
        done, modules = run_bare("SessionStart", payload("session_start.json", root, session_id="alone-2"), root)
        assert "Memories: 8 active" in done.stdout and "sqlite3" not in modules
    finally:
        relay.close()


def test_one_relay_per_project_and_the_next_takes_over(tmp_path: Path) -> None:
    state = tmp_path / ".codemem"
    state.mkdir()
    first, second = HookRelay(state), HookRelay(state)
    first.start()
    second.start()
    try:
        assert first.listening and not second.listening
        first.close()
        deadline = time.monotonic() + 10
        while not second.listening and time.monotonic() < deadline:
            time.sleep(0.05)
        assert second.listening and (state / SOCKET_FILE).is_socket()
        first.close()  # closing twice, and after another took over, leaves the other's socket alone
        assert (state / SOCKET_FILE).is_socket()
    finally:
        second.close()
    assert not (state / SOCKET_FILE).exists()


def test_the_relay_refuses_what_is_not_its_project_s_hook(project: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    root, state = project["root"], str(project["state"].resolve())
    data = json.dumps(payload("session_start.json", root)).encode()
    assert answer(request("SessionStart", data, environ={}, cwd=str(root).encode()), state).startswith(b"=")
    other = tmp_path / "other"
    (other / ".codemem").mkdir(parents=True)
    foreign = {b"CLAUDE_PROJECT_DIR": str(other).encode()}
    assert answer(request("SessionStart", data, environ=foreign, cwd=str(root).encode()), state) == REFUSED
    assert answer(request("SessionEnd", data, environ={}, cwd=str(root).encode()), state) == REFUSED  # not relayed
    assert answer(b"GET / HTTP/1.1\r\n\r\n", state) == REFUSED
    assert answer(request("SessionStart", b"[1, 2]", environ={}, cwd=str(root).encode()), state) == REFUSED


# -- SessionStart read ahead at a session's end (query_server.hooks.session_start.save_snapshot) ---------------


def test_the_relay_keeps_its_store_connections_and_sees_every_change(project: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    """The relay opens the ledger, the manifest and the mentions cache once, and still answers from
    what they hold now: a memory added by the server, and a ledger file replaced (a restore)."""
    from resources.memory.ledger import Ledger, NewMemory

    root, state = project["root"], project["state"]
    relay = HookRelay(state)
    relay.start()
    try:
        for session in ("kept-1", "kept-2"):  # the first builds the mentions cache (a detached worker)
            done, _ = run_bare("SessionStart", payload("session_start.json", root, session_id=session), root)
            assert "Memories: 8 active" in done.stdout
        deadline = time.monotonic() + 30
        while not (state / "hooks" / "mentions.db").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        replacement = tmp_path / "restored.db"
        shutil.copy2(state / "memory.db", replacement)  # the ledger as it is now, restored later

        ledger = Ledger(state / "memory.db")
        ledger.add([NewMemory(memory_type="code_pattern", content="Gotcha: src/other.py retries twice, never more.",
                              metadata={}, importance_score=0.9)])
        ledger.close()
        done, _ = run_bare("PostToolUse", read_of(root, "src/other.py", session="kept-3"), root)
        assert "retries twice" in done.stdout
        done, _ = run_bare("SessionStart", payload("session_start.json", root, session_id="kept-4"), root)
        assert "Memories: 9 active" in done.stdout

        for suffix in ("-wal", "-shm"):  # a restore: another file where the ledger was
            (state / f"memory.db{suffix}").unlink(missing_ok=True)
        replacement.replace(state / "memory.db")
        done, _ = run_bare("SessionStart", payload("session_start.json", root, session_id="kept-5"), root)
        assert "Memories: 8 active" in done.stdout
        done, _ = run_bare("PostToolUse", read_of(root, "src/other.py", session="kept-6"), root)
        assert "retries twice" not in done.stdout
    finally:
        relay.close()


def _start(root: Path, session: str) -> tuple[str, bool]:
    """SessionStart's answer as Claude Code gets it, and whether the hook opened a store."""
    done, modules = run_bare("SessionStart", payload("session_start.json", root, session_id=session), root)
    return done.stdout, "sqlite3" in modules


def test_a_start_read_ahead_says_what_the_stores_say(project: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    root = project["root"]
    _start(root, "first")
    twin = tmp_path / "twin" / "proj"
    shutil.copytree(root, twin)
    relay = HookRelay(project["state"])  # a server's session ends: its relay reads ahead as it closes
    relay.start()
    relay.close()
    assert (project["state"] / "hooks" / "session_start.json").is_file()

    (fast, opened), (slow, twin_opened) = _start(root, "second"), _start(twin, "second")
    assert not opened and twin_opened
    assert fast.replace(str(root), "<root>") == slow.replace(str(twin), "<root>")
    assert "Since the last session" in fast and "Memories: 8 active" in fast and "Stale memories" in fast

    # read once: the next start counts from this one's, and reads the stores
    (again, opened), (twin_again, _) = _start(root, "third"), _start(twin, "third")
    assert opened and again.replace(str(root), "<root>") == twin_again.replace(str(twin), "<root>")


def test_a_start_read_ahead_is_not_used_once_a_store_changed(project: dict[str, Any]) -> None:  # noqa: F811
    from query_server.hooks.common import Project
    from query_server.hooks.session_start import save_snapshot
    from resources.memory.ledger import Ledger, NewMemory

    root = project["root"]
    _start(root, "first")
    assert save_snapshot(Project({"cwd": str(root)}))
    ledger = Ledger(project["state"] / "memory.db")
    ledger.add([NewMemory(memory_type="session", content="Added after the read-ahead.", metadata={"session_id": "x"},
                          importance_score=0.4)])
    ledger.close()
    text, opened = _start(root, "second")
    assert opened and "Memories: 9 active" in text and "Added after the read-ahead." in text

    assert save_snapshot(Project({"cwd": str(root)}))
    (src := root / "src" / "dispatch.py").write_text(src.read_text() + "# edited\n")
    text, opened = _start(root, "third")  # the index is unchanged: read ahead, and the edit is seen as the session starts
    assert not opened and "1 of the" not in text and "file(s) changed since" in text

    assert save_snapshot(Project({"cwd": str(root)}))
    text, opened = _start(root, "third")  # the same session again (resume): its first baseline, from the stores
    assert opened


def test_codemem_index_reads_the_next_start_ahead(tmp_path: Path) -> None:
    """With no server up, `codemem index` leaves the next SessionStart read ahead: the hook opens no store."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    done = subprocess.run([CODEMEM, "index", str(root), "--plain", "--no-embed"], capture_output=True, text=True, timeout=300,
                          env=clean_env(CODEMEM_DENSE_EMBEDDINGS="false"), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (root / ".codemem" / "hooks" / "session_start.json").is_file()
    text, opened = _start(root, "after-index")
    assert not opened and "Index: 1 files" in text

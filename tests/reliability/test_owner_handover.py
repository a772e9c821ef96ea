"""Writes in flight when the project's owner process dies (issue 25, item 3): exactly once.

A second process forwards its calls to the owner (``query_server.ownership``). When the owner is
SIGKILLed during a write, the forwarding handle takes over and retries with the call's
idempotency key, so the caller gets one result and the ledger holds one row — whether the dead
owner had committed or not.

- Fault points: the owner kills itself right after the ledger committed a ``memory_add``,
  ``memory_update``, ``memory_delete`` or ``import_memory`` and before it answered; the caller (this
  process) must get the first outcome, not a duplicate, a version conflict or "not found".
- Random kills: two ``codemem mcp`` processes on one project; the test writes through the second
  while the owner is SIGKILLed at a random moment, then the survivor owns the project and a new
  ``codemem mcp`` writes through it for the next trial. Counted over every trial: acknowledged
  memories lost, memories stored twice, calls that failed (each must say clearly what happened).
  ``CODEMEM_SOAK_TRIALS`` trials (default 50) under the ``soak`` marker; 5 in the default run.
  Also counted: trials whose kill hit a call the owner had received (``killed_in_flight``), and
  retried calls the dead owner had already committed (``replayed``: the key returned them).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from query_server import ownership
from query_server.memory.stores import REPLAYED
from query_server.ownership import OWNER_FILE, ProjectHandle
from query_server.service import ToolError
from resources.schemas.memory import ExportMemoryInput, ImportMemoryInput, MemoryAddInput, MemoryDeleteInput, MemoryUpdateInput
from resources.settings import Settings
from tests.reliability.children import REPO_ROOT, McpStdioClient, child_env
from tests.reliability.graph_servers import stop_graph_servers

SIGKILLED = -signal.SIGKILL
SOAK_TRIALS = int(os.environ.get("CODEMEM_SOAK_TRIALS", "50"))
SHORT_TRIALS = 5
CLEAR_FAILURE = "owner process"
"""Every failed call's message names what went away (the project's owner process)."""

_OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    handle = ProjectHandle(Settings(project_root=Path(sys.argv[1])))
    assert handle.is_owner, "another process owns the project"
    while True:
        time.sleep(1)
    """
)


def _owner_pid(project: Path) -> int | None:
    try:
        return int(json.loads((project / ".codemem" / OWNER_FILE).read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def _wait_owner(project: Path, pid: int, alive: Callable[[], bool], timeout: float = 180) -> None:
    """Wait until process ``pid`` serves the project (owner.json names it)."""
    deadline = time.monotonic() + timeout
    while _owner_pid(project) != pid:
        assert alive(), f"process {pid} died before owning {project}"
        assert time.monotonic() < deadline, f"process {pid} did not own {project} within {timeout} s"
        time.sleep(0.05)


@contextmanager
def _owner_child(project: Path, tmp_path: Path, fault: str) -> Iterator[subprocess.Popen[str]]:
    """A process that owns the project and SIGKILLs itself at fault point ``fault``."""
    log = (tmp_path / "owner.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(project)], stdout=log, stderr=subprocess.STDOUT,
                            text=True, env=child_env(fault), cwd=str(REPO_ROOT))
    try:
        _wait_owner(project, proc.pid, lambda: proc.poll() is None)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        log.close()


def _rows(project: Path, where: str = "1=1", params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Memory rows (id, content, version, deleted) read straight from the ledger file."""
    conn = sqlite3.connect(f"file:{project / '.codemem' / 'memory.db'}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(f"SELECT id, content, version, deleted FROM memories WHERE {where}", params).fetchall()
    finally:
        conn.close()


def _audit_ops(project: Path, memory_id: str) -> list[str]:
    conn = sqlite3.connect(f"file:{project / '.codemem' / 'memory.db'}?mode=ro", uri=True, timeout=30)
    try:
        return [r[0] for r in conn.execute("SELECT operation FROM audit WHERE memory_id=? ORDER BY seq", (memory_id,))]
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# 1. The owner dies between its ledger commit and its answer
# --------------------------------------------------------------------------------------------


def _add(handle: ProjectHandle, project: Path) -> None:
    content = "Handover: the retry queue keeps 17 entries"
    result = handle.call("memory_add", MemoryAddInput(memory_type="session", content=content))
    assert _rows(project, "content=?", (content,)) == [(result.memory_id, content, 1, 0)]


def _update(handle: ProjectHandle, project: Path) -> None:
    added = handle.call("memory_add", MemoryAddInput(memory_type="session", content="Handover: the cache keeps 3 entries"))
    result = handle.call("memory_update", MemoryUpdateInput(
        memory_id=added.memory_id, memory_type="session", content="Handover: the cache keeps 4 entries", expected_version=1))
    assert (result.status, result.version) == ("updated", 2)
    assert _rows(project, "id=?", (added.memory_id,)) == [(added.memory_id, "Handover: the cache keeps 4 entries", 2, 0)]
    assert _audit_ops(project, added.memory_id) == ["create", "update"]


def _delete(handle: ProjectHandle, project: Path) -> None:
    added = handle.call("memory_add", MemoryAddInput(memory_type="session", content="Handover: the parser keeps 9 entries"))
    result = handle.call("memory_delete", MemoryDeleteInput(memory_id=added.memory_id, memory_type="session", hard_delete=True))
    assert result.status == "hard_deleted"
    assert _rows(project, "id=?", (added.memory_id,)) == []
    assert _audit_ops(project, added.memory_id) == ["create", "hard_delete"]


def _import(handle: ProjectHandle, project: Path) -> None:
    lines = [
        {"id": "6f1c1c52-1f7e-4a36-9d43-3c1c0a3d6a11", "memory_type": "session", "content": "Handover import: with an id"},
        {"memory_type": "session", "content": "Handover import: without an id"},
    ]
    result = handle.call("import_memory", ImportMemoryInput(data="\n".join(json.dumps(line) for line in lines)))
    assert (result.imported, result.skipped, result.overwritten, result.errors) == (2, 0, 0, [])
    for line in lines:
        assert len(_rows(project, "content=?", (line["content"],))) == 1, line


@contextmanager
def _every_log() -> Iterator[list[dict[str, Any]]]:
    """structlog's entries of every level meanwhile (a CLI test in this worker may have configured
    a filter at WARNING that drops INFO before any processor sees it)."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(**saved)


@pytest.mark.parametrize(("fault", "scenario"), [
    ("memory_add:after_ledger", _add),
    ("memory_update:after_ledger", _update),
    ("memory_delete:after_ledger", _delete),
    ("import_memory:after_ledger", _import),
], ids=["memory_add", "memory_update", "memory_delete", "import_memory"])
def test_a_write_committed_by_an_owner_that_died_before_answering_is_applied_once(
    project: Path, tmp_path: Path, graph_servers: Path, fault: str, scenario: Callable[[ProjectHandle, Path], None],
) -> None:
    with _owner_child(project, tmp_path, fault) as owner:
        handle = ProjectHandle(Settings(project_root=project))
        try:
            assert not handle.is_owner
            with _every_log() as logs:
                scenario(handle, project)
            assert owner.wait(30) == SIGKILLED, "the owner did not reach the fault point"
            assert handle.is_owner, "the caller did not take the project over"
            handover = [entry for entry in logs if "owner" in entry["event"] or "taking over" in entry["event"]]
            assert handover and {entry["log_level"] for entry in handover} == {"info"}, handover  # a normal hand-off
        finally:
            handle.close()


def test_a_call_that_cannot_be_repeated_is_reported_not_retried(project: Path, tmp_path: Path, graph_servers: Path) -> None:
    """export_memory writes a file, and a repeat would refuse it (it exists): when the owner dies
    after writing it, the caller is told the export may have completed instead of getting an error
    about its own file."""
    with _owner_child(project, tmp_path, "export_memory:after_write") as owner:
        handle = ProjectHandle(Settings(project_root=project))
        try:
            handle.call("memory_add", MemoryAddInput(memory_type="session", content="Handover: exported once"))
            with pytest.raises(ToolError, match=r"owner process \(pid \d+\) went away while running export_memory .* may have completed"):
                handle.call("export_memory", ExportMemoryInput(output_path="exported.jsonl"))
            assert owner.wait(30) == SIGKILLED
            assert "Handover: exported once" in (project / "exported.jsonl").read_text()
        finally:
            handle.close()
            stop_graph_servers(project)  # the dead owner's: no process took over to reuse and stop it


_SQUATTER = textwrap.dedent(
    """
    import fcntl, json, os, socket, sys, time
    from pathlib import Path

    state = Path(sys.argv[1])
    fd = os.open(state / "owner.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nobody listens there
    (state / "owner.json").write_text(json.dumps({"pid": os.getpid(), "port": port, "token": "x"}))
    print("LOCKED", flush=True)
    time.sleep(600)
    """
)


def test_a_write_whose_owner_died_and_no_one_took_over_fails_clearly_within_the_bound(
    project: Path, tmp_path: Path, graph_servers: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner dies and another process holds the lock without answering: the write waits for a
    new owner up to ``HANDOVER_WAIT_S`` (3 s here), then says what happened."""
    monkeypatch.setattr(ownership, "HANDOVER_WAIT_S", 3.0)
    with _owner_child(project, tmp_path, "none") as owner:
        handle = ProjectHandle(Settings(project_root=project))
        squatter = None
        try:
            assert not handle.is_owner
            owner.kill()
            assert owner.wait(30) == SIGKILLED
            squatter = subprocess.Popen([sys.executable, "-c", _SQUATTER, str(project / ".codemem")], stdout=subprocess.PIPE, text=True)
            assert squatter.stdout is not None and squatter.stdout.readline().strip() == "LOCKED"
            started = time.monotonic()
            with pytest.raises(ToolError, match=r"owner process went away during memory_add and no process took over within 3 s"):
                handle.call("memory_add", MemoryAddInput(memory_type="session", content="Handover: nobody answers"))
            assert 3.0 <= time.monotonic() - started < 10.0
            assert _rows(project, "content=?", ("Handover: nobody answers",)) == []
        finally:
            if squatter is not None:
                squatter.kill()
                squatter.wait(30)
            handle.close()
            stop_graph_servers(project)  # the dead owner's: no process took over to reuse and stop it


# --------------------------------------------------------------------------------------------
# 2. Random SIGKILL of the owner while a second codemem mcp writes through it
# --------------------------------------------------------------------------------------------


def _writes_until_handed_over(
    client: McpStdioClient, owner: McpStdioClient, project: Path, trial: int, rng: random.Random,
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """``memory_add`` through ``client`` in a loop; the owner is SIGKILLed at a random moment, and
    the loop goes on until ``client`` owns the project and has stored 3 more memories.

    Returns:
        Content → id of every acknowledged memory, and (content, message) of every failed call.
    """
    acked: dict[str, str] = {}
    failed: list[tuple[str, str]] = []
    killer = threading.Timer(rng.uniform(0.05, 1.5), lambda: os.kill(owner.proc.pid, signal.SIGKILL))
    killer.start()
    after_handover = 0
    n = 0
    deadline = time.monotonic() + 300
    try:
        while after_handover < 3:
            assert time.monotonic() < deadline, f"trial {trial}: the client did not take over within 300 s"
            n += 1
            content = f"Handover trial {trial} write {n}: the {rng.choice(['cache', 'queue', 'parser'])} keeps {rng.randint(1, 10**6)} entries"
            result = client.tool_result("memory_add", {"memory_type": "session", "content": content})
            assert result is not None, f"trial {trial}: the forwarding codemem mcp died"
            if result.get("isError"):
                failed.append((content, result["content"][0]["text"]))
            else:
                acked[content] = (result.get("structuredContent") or json.loads(result["content"][0]["text"]))["memory_id"]
            if owner.proc.poll() is not None and _owner_pid(project) == client.proc.pid:
                after_handover += 1
    finally:
        killer.cancel()
    assert owner.proc.wait(30) == SIGKILLED
    return acked, failed


RETRIED = "retrying on the next owner"
"""What a forwarding process logs for each retried call (``"sent": true``: the dying owner had it)."""


def _handover_soak(project: Path, logs: Path, trials: int) -> dict[str, Any]:
    rng = random.Random(25_3 + trials)
    logs.mkdir(exist_ok=True)
    owner = McpStdioClient(project, logs / "first-owner.log")
    assert owner.initialize()
    _wait_owner(project, owner.proc.pid, lambda: owner.proc.poll() is None)
    assert owner.tool("memory_add", {"memory_type": "session", "content": "Handover warm-up: the model is loaded"})
    figures = Counter[str]()
    acked: dict[str, str] = {}
    unclear: list[tuple[int, str]] = []
    try:
        for trial in range(trials):
            log = logs / f"client-{trial}.log"
            client = McpStdioClient(project, log)
            assert client.initialize(), f"trial {trial}: codemem mcp did not start"
            assert _owner_pid(project) == owner.proc.pid
            started = time.monotonic()
            got, failed = _writes_until_handed_over(client, owner, project, trial, rng)
            owner.close()
            owner = client
            lines = log.read_text().splitlines()
            in_flight = any(RETRIED in line and '"sent": true' in line for line in lines)
            replayed = sum(REPLAYED in line for line in lines)
            stored = Counter(content for _, content, _, _ in _rows(project, "content LIKE ?", (f"Handover trial {trial} %",)))
            ids = {content: mid for mid, content, _, _ in _rows(project, "content LIKE ?", (f"Handover trial {trial} %",))}
            lost = [c for c, mid in got.items() if ids.get(c) != mid]
            twice = [c for c, count in stored.items() if count > 1]
            unclear += [(trial, message) for _, message in failed if CLEAR_FAILURE not in message]
            figures.update(trials=1, calls=len(got) + len(failed), acknowledged=len(got), failed=len(failed),
                           lost=len(lost), duplicated=len(twice), killed_in_flight=int(in_flight), replayed=replayed)
            acked.update(got)
            print(f"handover trial {trial}: {len(got)} acknowledged, {len(failed)} failed, {len(lost)} lost, "
                  f"{len(twice)} stored twice, a call in flight at the kill: {in_flight}, committed before it: {replayed} "
                  f"({time.monotonic() - started:.1f}s)", flush=True)
            assert not lost and not twice, (trial, lost, twice, failed)
    finally:
        owner.close()
    assert unclear == [], unclear
    return {**figures, "unclear_failures": len(unclear), "memories": len(acked)}


def test_sigkill_of_the_owner_during_writes_through_a_second_mcp_short(project: Path, tmp_path: Path, graph_servers: Path) -> None:
    result = _handover_soak(project, tmp_path / "logs", SHORT_TRIALS)
    print(f"\nowner hand-over (short): {result}")
    assert result["lost"] == result["duplicated"] == result["unclear_failures"] == 0, result


@pytest.mark.soak
def test_sigkill_of_the_owner_during_writes_through_a_second_mcp_soak(project: Path, tmp_path: Path, graph_servers: Path) -> None:
    result = _handover_soak(project, tmp_path / "logs", SOAK_TRIALS)
    print(f"\nowner hand-over soak: {result}")
    assert result["lost"] == result["duplicated"] == result["unclear_failures"] == 0, result

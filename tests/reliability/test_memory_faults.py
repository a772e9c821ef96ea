"""Memory durability under faults: SIGKILL at named points and at random times, store outages,
racing writers, and a restart of the MCP server (REQ-MEM-REL-001/003, REQ-MEM-VER-006/008).

Everything is real: subprocesses that kill themselves (``CODEMEM_FAULT_POINT``, see
``resources.faults``) or are killed, the SQLite ledger, qdrant-edge, the embedded FalkorDB and the
local embedding model. The embedded FalkorDB's ``redis-server`` outlives a SIGKILLed owner and is
reused by the next open; each test stops whatever graph server is left under its own tmp dir.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from query_server.service import CodeMemService, ToolError
from resources.memory.ledger import Ledger
from resources.memory.projection import COLLECTIONS, GRAPH_LABELS
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryGetInput,
    MemorySearchInput,
    MemoryUpdateInput,
)
from resources.settings import Settings
from tests.reliability.children import child_env
from tests.reliability.graph_servers import graph_servers_under, stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
SIGKILLED = -signal.SIGKILL


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _run(script: str, *args: str, fault: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter (the repository on its path)."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True, text=True, env=child_env(fault), cwd=str(REPO_ROOT), timeout=timeout,
    )


def _acks(stdout: str) -> list[str]:
    """The subprocess's acknowledgement lines (``ACK ...``; the service's log lines also go to stdout)."""
    return [line.removeprefix("ACK ") for line in stdout.splitlines() if line.startswith("ACK ")]


def _open(project: Path) -> CodeMemService:
    return CodeMemService(Settings(project_root=project))


def _ledger_path(project: Path) -> Path:
    return Settings(project_root=project).resolved_state_dir() / "memory.db"


def _outbox_ids(ledger: Ledger) -> set[str]:
    with ledger._reading() as conn:  # noqa: SLF001 - a test reads the table directly
        return {r[0] for r in conn.execute("SELECT memory_id FROM outbox")}


def _audit_rows(ledger: Ledger, where: str = "1=1", params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with ledger._reading() as conn:  # noqa: SLF001
        return list(conn.execute(f"SELECT memory_id, operation, request_id FROM audit WHERE {where}", params))


def _payloads(svc: CodeMemService, memory_type: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    hits = svc.vectors.retrieve(COLLECTIONS[memory_type], ids)
    return {h.id: h.payload for h in hits}


def _assert_projections_match_ledger(svc: CodeMemService) -> None:
    """Qdrant and the graph hold exactly what the ledger says (after a sync)."""
    ledger = svc.memory.ledger
    rows = list(ledger.iter_memories())
    by_type: dict[str, list[Any]] = {}
    for row in rows:
        by_type.setdefault(row.memory_type, []).append(row)
    stats = svc.memory.memory_statistics()
    assert stats.outbox["pending"] == 0, stats.outbox
    assert stats.sync_status["pending"] == 0 and stats.sync_status["failed"] == 0, stats.sync_status
    points = stats.storage["vector_store"]["points_per_type"]
    for memory_type in COLLECTIONS:
        typed = by_type.get(memory_type, [])
        assert points[memory_type] == len(typed), (memory_type, points[memory_type], len(typed))
        if not typed:
            continue
        collection = COLLECTIONS[memory_type]
        assert svc.vectors.ids(collection) == {r.id for r in typed}, memory_type
        payloads = _payloads(svc, memory_type, [r.id for r in typed])
        for row in typed:
            payload = payloads[row.id]
            assert payload["version"] == row.version, (row.id, payload["version"], row.version)
            assert payload["deleted"] == row.deleted and payload["content_hash"] == row.content_hash, row.id
        live = {r.id for r in typed if not r.deleted}
        assert svc.graph.node_ids(GRAPH_LABELS[memory_type]) == live, memory_type  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# 1. SIGKILL after the ledger commit, before the projection
# --------------------------------------------------------------------------------------------

_ADD_ONE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    result = svc.memory.memory_add(MemoryAddInput.model_validate_json(sys.argv[2]))
    print("ACK", result.model_dump_json(), flush=True)
    svc.close()
    """
)

_MEMORIES: dict[str, dict[str, Any]] = {
    "requirements": {
        "content": "Password reset links expire fifteen minutes after they are emailed",
        "metadata": {"requirement_id": "REQ-AUTH-RESET-004", "title": "Reset link expiry", "priority": "High",
                     "status": "Approved"},
        "query": "how long is a password reset link valid",
    },
    "design": {
        "content": "Background jobs go through a Postgres-backed queue with SKIP LOCKED instead of Redis",
        "metadata": {"design_type": "ADR", "title": "ADR-12 job queue", "status": "Accepted",
                     "rationale": "one database to operate"},
        "query": "which queue do background jobs use",
    },
    "code_pattern": {
        "content": "HTTP handlers validate the body with a pydantic model before touching the database",
        "metadata": {"pattern_name": "Validate first", "pattern_type": "Convention", "language": "python",
                     "code_template": "body = Model.model_validate(await request.json())",
                     "usage_context": "every HTTP endpoint"},
        "query": "validate request body before database access",
    },
    "user_preference": {
        "content": "Prefer single quotes in TypeScript string literals",
        "metadata": {"category": "CodingStyle", "key": "ts.quotes", "value": "single", "scope": "Language"},
        "query": "quote style for TypeScript strings",
    },
}


@pytest.mark.parametrize("memory_type", sorted(_MEMORIES))
def test_sigkill_after_ledger_commit_is_projected_on_restart(project: Path, graph_servers: Path, memory_type: str) -> None:
    spec = _MEMORIES[memory_type]
    request = MemoryAddInput(
        memory_type=memory_type, content=spec["content"], metadata=spec["metadata"], request_id=f"crash-{memory_type}"
    )
    died = _run(_ADD_ONE, str(project), request.model_dump_json(), fault="memory_add:after_ledger")
    assert died.returncode == SIGKILLED, died.stderr[-3000:]
    assert _acks(died.stdout) == []  # never acknowledged

    # What the crash left: the row committed with its outbox entry, nothing projected yet.
    ledger = Ledger(_ledger_path(project))
    try:
        [row] = list(ledger.iter_memories())
        assert (row.memory_type, row.content, row.version, row.sync_status) == (memory_type, spec["content"], 1, "pending")
        assert _outbox_ids(ledger) == {row.id}
        assert [(op, rid) for _, op, rid in _audit_rows(ledger)] == [("create", f"crash-{memory_type}")]
    finally:
        ledger.close()

    svc = _open(project)  # starts the background sync, which drains what the crash left
    try:
        got = svc.memory.memory_get(MemoryGetInput(memory_id=row.id, memory_type=memory_type))
        assert got.content == spec["content"] and got.version == 1 and got.sync_status in ("pending", "synced")
        svc.memory.sync()
        stats = svc.memory.memory_statistics()
        assert stats.outbox["pending"] == 0 and stats.sync_status == {"synced": 1, "pending": 0, "failed": 0}
        assert stats.storage["vector_store"]["points_per_type"][memory_type] == 1
        assert svc.memory.memory_get(MemoryGetInput(memory_id=row.id, memory_type=memory_type)).sync_status == "synced"
        found = svc.memory.memory_search(MemorySearchInput(query=spec["query"]))
        assert found.search_mode == "hybrid" and found.results and found.results[0].id == row.id
        assert found.results[0].provenance.sync_status == "synced"
        assert row.id in svc.graph.node_ids(GRAPH_LABELS[memory_type])  # type: ignore[arg-type]
        # the client's retry after the crash (same request_id) gets the same memory, not a copy
        again = svc.memory.memory_add(request)
        assert again.memory_id == row.id and svc.memory.memory_statistics().memory_counts[memory_type]["total"] == 1
        _assert_projections_match_ledger(svc)
    finally:
        svc.close()


# --------------------------------------------------------------------------------------------
# 2. SIGKILL inside the ledger transaction of a bulk add
# --------------------------------------------------------------------------------------------

_BULK = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput, MemoryBulkAddInput
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    before = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    if before is not None:
        print("ACK before", svc.memory.memory_add(MemoryAddInput.model_validate(before)).memory_id, flush=True)
    result = svc.memory.memory_bulk_add(MemoryBulkAddInput.model_validate_json(sys.argv[2]))
    print("ACK bulk", result.model_dump_json(), flush=True)
    svc.close()
    """
)


def test_sigkill_mid_ledger_transaction_commits_nothing_and_the_retry_succeeds(project: Path, graph_servers: Path) -> None:
    bulk = {
        "request_id": "bulk-crash-1",
        "memories": [{"memory_type": "session", "content": f"Reviewed the billing module, part {i}"} for i in range(5)],
    }
    earlier = {"memory_type": "session", "content": "Set up the billing module repository"}
    died = _run(_BULK, str(project), json.dumps(bulk), json.dumps(earlier), fault="ledger_add:mid_transaction")
    assert died.returncode == SIGKILLED, died.stderr[-3000:]
    lines = _acks(died.stdout)
    assert len(lines) == 1 and lines[0].startswith("before "), died.stdout  # the bulk add never returned
    earlier_id = lines[0].split()[1]

    ledger = Ledger(_ledger_path(project))
    try:
        rows = list(ledger.iter_memories())
        assert [r.id for r in rows] == [earlier_id]  # none of the 5 (two were inserted before the kill)
        assert _audit_rows(ledger, "request_id=?", ("bulk-crash-1",)) == []
        assert [m for m, _, _ in _audit_rows(ledger)] == [earlier_id]
        assert _outbox_ids(ledger) <= {earlier_id}
    finally:
        ledger.close()

    retried = _run(_BULK, str(project), json.dumps(bulk))
    assert retried.returncode == 0, retried.stderr[-3000:]
    result = json.loads(_acks(retried.stdout)[-1].removeprefix("bulk "))
    assert result["added_count"] == 5 and result["errors"] == [] and len(set(result["added_ids"])) == 5

    svc = _open(project)
    try:
        svc.memory.sync()
        again = svc.memory.memory_bulk_add(bulk_input := _bulk_input(bulk))  # same request id again: same memories
        assert again.added_ids == result["added_ids"], bulk_input.request_id
        stats = svc.memory.memory_statistics()
        assert stats.memory_counts["session"]["total"] == 6
        audit = _audit_rows(svc.memory.ledger, "request_id=?", ("bulk-crash-1",))
        assert sorted(m for m, _, _ in audit) == sorted(result["added_ids"]) and {op for _, op, _ in audit} == {"create"}
        hit = svc.memory.memory_search(MemorySearchInput(query="billing module part 3")).results
        assert result["added_ids"][3] in [h.id for h in hit[:3]]
        _assert_projections_match_ledger(svc)
    finally:
        svc.close()


def _bulk_input(bulk: dict[str, Any]) -> Any:
    from resources.schemas.memory import MemoryBulkAddInput

    return MemoryBulkAddInput.model_validate(bulk)


def test_retry_with_a_request_id_whose_memory_was_hard_deleted(project: Path, graph_servers: Path, service_factory) -> None:  # noqa: ANN001
    from resources.schemas.memory import MemoryDeleteInput

    svc = service_factory(project)
    request = MemoryAddInput(memory_type="session", content="Retried note", request_id="retry-after-delete")
    first = svc.memory.memory_add(request)
    svc.memory.memory_delete(MemoryDeleteInput(memory_id=first.memory_id, memory_type="session", hard_delete=True))
    with pytest.raises(ToolError, match="request_id 'retry-after-delete' was used for a memory that has since been deleted"):
        svc.memory.memory_add(request)  # a late client retry


# --------------------------------------------------------------------------------------------
# 3. SIGKILL between the projection batches of a large bulk add
# --------------------------------------------------------------------------------------------

_TOPICS = ("invoice", "shipping", "refund", "login", "search", "upload", "export", "billing", "cache", "webhook")


def _bulk_300() -> dict[str, Any]:
    memories = []
    for i in range(300):
        topic = _TOPICS[i % len(_TOPICS)]
        if i % 3 == 0:
            memories.append({
                "memory_type": "test_history",
                "content": f"test_{topic}_{i} failed: the {topic} fixture number {i} timed out",
                "metadata": {"test_name": f"test_{topic}_{i}", "test_file": f"tests/test_{topic}.py", "status": "Failed"},
            })
        else:
            memories.append({"memory_type": "session", "content": f"Session {i}: worked on the {topic} flow, step {i}"})
    return {"request_id": "bulk-300", "memories": memories}


def test_sigkill_between_projection_batches_projects_the_rest_on_restart(project: Path, graph_servers: Path) -> None:
    bulk = _bulk_300()
    died = _run(_BULK, str(project), json.dumps(bulk), fault="memory_bulk_add:between_projection_batches")
    assert died.returncode == SIGKILLED, died.stderr[-3000:]
    assert _acks(died.stdout) == []

    ledger = Ledger(_ledger_path(project))
    try:
        rows = list(ledger.iter_memories())
        assert len(rows) == 300 and len({r.id for r in rows}) == 300
        assert ledger.sync_counts() == {"synced": 128, "pending": 172, "failed": 0}  # the first batch got through
        assert len(_outbox_ids(ledger)) == 172
        ids_in_order = [m for m, _, _ in _audit_rows(ledger, "request_id=? ORDER BY seq", ("bulk-300",))]
        assert len(ids_in_order) == 300
    finally:
        ledger.close()

    svc = _open(project)
    try:
        report = svc.memory.sync()
        assert report["failed"] == 0, report
        stats = svc.memory.memory_statistics()
        assert stats.outbox["pending"] == 0 and stats.sync_status == {"synced": 300, "pending": 0, "failed": 0}
        points = stats.storage["vector_store"]["points_per_type"]
        for memory_type in ("session", "test_history"):
            assert points[memory_type] == stats.memory_counts[memory_type]["active"], (memory_type, points)
        assert stats.memory_counts["session"]["active"] + stats.memory_counts["test_history"]["active"] == 300
        _assert_projections_match_ledger(svc)  # no duplicates, no strays: the point ids are exactly the ledger's
        retry = svc.memory.memory_bulk_add(_bulk_input(bulk))  # the client's retry: the same 300, nothing new
        assert retry.added_ids == ids_in_order and svc.memory.memory_statistics().sync_status["synced"] == 300
        # memories from both sides of the crash are searchable
        for i in (5, 100, 127, 128, 200, 299):
            item = bulk["memories"][i]
            found = svc.memory.memory_search(MemorySearchInput(query=item["content"], memory_types=[item["memory_type"]], limit=3))
            assert found.search_mode == "hybrid" and found.results[0].id == ids_in_order[i], (i, item["content"])
    finally:
        svc.close()


# --------------------------------------------------------------------------------------------
# 4. SIGKILL at random times during a stream of writes
# --------------------------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput, MemoryDeleteInput, MemoryUpdateInput
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    trial = int(sys.argv[2])
    rng = random.Random(trial)
    live = [(row.id, row.memory_type, row.version) for row in svc.memory.ledger.iter_memories(include_deleted=False)]
    n = 0
    while True:
        n += 1
        roll = rng.random()
        if roll < 0.55 or len(live) < 3:
            if rng.random() < 0.5:
                mtype, metadata = "session", {}
            else:
                mtype, metadata = "design", {"design_type": "Specification", "title": f"spec {trial}.{n}", "status": "Proposed"}
            r = svc.memory.memory_add(MemoryAddInput(memory_type=mtype, content=f"trial {trial} note {n}: {rng.random()}", metadata=metadata))
            live.append((r.memory_id, mtype, r.version))
            print("ACK add", r.memory_id, r.version, flush=True)
        elif roll < 0.85:
            i = rng.randrange(len(live))
            mid, mtype, version = live[i]
            r = svc.memory.memory_update(MemoryUpdateInput(memory_id=mid, memory_type=mtype, content=f"trial {trial} edit {n}: {rng.random()}", expected_version=version))
            live[i] = (mid, mtype, r.version)
            print("ACK update", mid, r.version, flush=True)
        else:
            mid, mtype, version = live.pop(rng.randrange(len(live)))
            hard = rng.random() < 0.3
            print("ACK", "try-hard" if hard else "try-soft", mid, flush=True)
            svc.memory.memory_delete(MemoryDeleteInput(memory_id=mid, memory_type=mtype, hard_delete=hard))
            print("ACK", "hard" if hard else "soft", mid, flush=True)
    """
)

SOAK_TRIALS = int(os.environ.get("CODEMEM_SOAK_TRIALS", "50"))


def _kill_writer_at_random(project: Path, trial: int, rng: random.Random) -> list[list[str]]:
    """Start the writer, SIGKILL it 0.5-3 s after its first acknowledged write; its output lines."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(project), str(trial)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=str(REPO_ROOT), bufsize=1,
    )
    lines: list[list[str]] = []
    first = threading.Event()
    errors: list[str] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if raw.startswith("ACK "):
                lines.append(raw.split()[1:])
                first.set()

    def read_err() -> None:
        assert proc.stderr is not None
        errors.extend(proc.stderr.readlines())

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=read_err, daemon=True)]
    for reader in readers:
        reader.start()
    try:
        if not first.wait(120):
            raise AssertionError(f"trial {trial}: the writer acknowledged nothing: {''.join(errors)[-3000:]}")
        time.sleep(rng.uniform(0.5, 3.0))
        assert proc.poll() is None, f"trial {trial}: the writer died by itself: {''.join(errors)[-3000:]}"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == SIGKILLED
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(10)
    return lines


@pytest.mark.soak
def test_random_sigkill_soak_loses_no_acknowledged_write(project: Path, graph_servers: Path) -> None:
    rng = random.Random(20261122)
    acked_adds: dict[str, int] = {}
    acked_versions: dict[str, int] = {}
    soft_deleted: set[str] = set()
    hard_deleted: set[str] = set()
    tried_hard: set[str] = set()
    committed_unacknowledged: set[str] = set()  # adds in flight at a kill that did commit (later writers see them)
    timings: list[float] = []
    for trial in range(SOAK_TRIALS):
        started = time.monotonic()
        lines = _kill_writer_at_random(project, trial, rng)
        for words in lines:
            if len(words) < 2:
                continue  # the last line may be cut by the kill
            op, mid = words[0], words[1]
            if op == "add" and len(words) == 3:
                acked_adds[mid] = int(words[2])
                acked_versions[mid] = int(words[2])
            elif op == "update" and len(words) == 3:
                acked_versions[mid] = max(acked_versions.get(mid, 0), int(words[2]))
            elif op == "soft":
                soft_deleted.add(mid)
            elif op == "hard":
                hard_deleted.add(mid)
            elif op == "try-hard":
                tried_hard.add(mid)

        ledger = Ledger(_ledger_path(project))
        try:
            rows = {row.id: row for row in ledger.iter_memories()}
            for mid in acked_adds:
                row = rows.get(mid)
                if row is None:  # only a hard delete (acknowledged or in flight at the kill) may remove it
                    assert mid in tried_hard, f"trial {trial}: acknowledged memory {mid} is gone"
                    assert ledger.audit_of(mid)[-1]["operation"] == "hard_delete", mid
                    continue
                assert row.version >= acked_versions[mid], (trial, mid, row.version, acked_versions[mid])
                if mid in soft_deleted:
                    assert row.deleted, (trial, mid)
            for mid in hard_deleted:
                assert mid not in rows, (trial, mid)
            unacknowledged = set(rows) - set(acked_adds) - committed_unacknowledged
            assert len(unacknowledged) <= 1, (trial, unacknowledged)  # at most the add in flight at the kill
            committed_unacknowledged |= unacknowledged
            for row in rows.values():
                trail = ledger.audit_of(row.id)
                assert trail[0]["operation"] == "create"
                assert trail[-1]["current"] == row.snapshot(), (trial, row.id)
                assert [e["current"]["version"] for e in trail] == list(range(1, row.version + 1)), (trial, row.id)
        finally:
            ledger.close()

        svc = _open(project)
        try:
            report = svc.memory.sync()
            assert report["failed"] == 0, (trial, report)
            _assert_projections_match_ledger(svc)
            gone = [mid for mid in acked_adds if mid not in rows]
            for memory_type in ("session", "design"):
                assert svc.vectors.retrieve(COLLECTIONS[memory_type], gone) == [], (trial, memory_type)
        finally:
            svc.close()
        timings.append(time.monotonic() - started)
    assert len(acked_adds) > SOAK_TRIALS  # the writers did real work
    print(f"\nsoak: {SOAK_TRIALS} trials, {len(acked_adds)} acknowledged adds "
          f"(+{len(committed_unacknowledged)} committed at a kill), "
          f"{len(hard_deleted)} hard / {len(soft_deleted)} soft deletes, mean trial {sum(timings) / len(timings):.1f}s")


# --------------------------------------------------------------------------------------------
# 5. A store is down: the write succeeds pending, the sync catches up when it is back
# --------------------------------------------------------------------------------------------


def test_vector_store_outage_keeps_writes_pending_until_sync(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    svc = service_factory(project)
    before = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Profiled the slow checkout page"))
    assert before.sync_status == "synced"

    def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("qdrant down")

    monkeypatch.setattr(svc.vectors, "upsert", down)
    added = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Moved invoice rendering to a worker process"))
    assert added.status == "created" and added.sync_status == "pending"
    updated = svc.memory.memory_update(MemoryUpdateInput(
        memory_id=before.memory_id, memory_type="session", content="Profiled the slow checkout page: N+1 queries", expected_version=1,
    ))
    assert updated.version == 2
    stats = svc.memory.memory_statistics()
    assert stats.outbox["pending"] == 2 and "qdrant down" in stats.outbox["last_error"], stats.outbox
    assert stats.sync_status["pending"] == 2
    got = svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session"))
    assert got.sync_status == "pending" and got.content.startswith("Moved invoice")

    # Only writes fail: search still answers in hybrid mode from what Qdrant has (the pending memory
    # is not there yet, and search_mode does not say so).
    partial = svc.memory.memory_search(MemorySearchInput(query="invoice rendering worker process"))
    assert partial.search_mode == "hybrid"
    stale = svc.memory.memory_search(MemorySearchInput(query="slow checkout page profiling")).results
    assert stale and stale[0].id == before.memory_id and stale[0].provenance.version == 2  # ledger value, new version

    # Qdrant wholly down: search degrades to the ledger and says so; the pending memory is found.
    monkeypatch.setattr(svc.vectors, "ranked_lists", down)
    degraded = svc.memory.memory_search(MemorySearchInput(query="invoice rendering worker process"))
    assert degraded.search_mode.startswith("ledger-keyword (vector store unavailable") and "qdrant down" in degraded.search_mode
    assert degraded.results and degraded.results[0].id == added.memory_id

    monkeypatch.undo()  # the store is back
    report = svc.memory.sync()
    assert report["failed"] == 0 and report["projected"] == 2, report
    stats = svc.memory.memory_statistics()
    assert stats.outbox["pending"] == 0 and stats.sync_status == {"synced": 2, "pending": 0, "failed": 0}
    found = svc.memory.memory_search(MemorySearchInput(query="invoice rendering worker process"))
    assert found.search_mode == "hybrid" and found.results[0].id == added.memory_id
    assert found.results[0].provenance.sync_status == "synced"
    assert _payloads(svc, "session", [before.memory_id])[before.memory_id]["version"] == 2
    _assert_projections_match_ledger(svc)


def test_graph_outage_keeps_writes_pending_until_sync(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    svc = service_factory(project)

    def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("falkordb down")

    monkeypatch.setattr(svc.graph, "merge_nodes", down)
    added = svc.memory.memory_add(MemoryAddInput(
        memory_type="design", content="Feature flags are read from the config service at start-up",
        metadata={"design_type": "Architecture", "title": "Feature flag source", "status": "Accepted"},
    ))
    assert added.sync_status == "pending"
    stats = svc.memory.memory_statistics()
    assert stats.outbox["pending"] == 1 and "falkordb down" in stats.outbox["last_error"], stats.outbox
    assert added.memory_id not in svc.graph.node_ids("Design")
    # the vector upsert ran before the graph failed: the memory is searchable while pending
    found = svc.memory.memory_search(MemorySearchInput(query="where do feature flags come from"))
    assert found.search_mode == "hybrid" and found.results[0].id == added.memory_id
    assert found.results[0].provenance.sync_status == "pending"

    monkeypatch.undo()
    report = svc.memory.sync()
    assert report["failed"] == 0 and report["projected"] == 1, report
    stats = svc.memory.memory_statistics()
    assert stats.outbox["pending"] == 0 and stats.sync_status == {"synced": 1, "pending": 0, "failed": 0}
    assert added.memory_id in svc.graph.node_ids("Design")
    assert svc.memory.memory_search(MemorySearchInput(query="where do feature flags come from")).results[0].provenance.sync_status == "synced"
    _assert_projections_match_ledger(svc)


def test_outage_retries_in_the_background_without_a_manual_sync(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    svc = service_factory(project)

    def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("qdrant down")

    monkeypatch.setattr(svc.vectors, "upsert", down)
    added = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Rotated the webhook signing secret"))
    assert added.sync_status == "pending"
    monkeypatch.undo()
    deadline = time.monotonic() + 30  # first retry is due after 2 s; the sync thread wakes every 2 s
    while svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session")).sync_status != "synced":
        assert time.monotonic() < deadline, svc.memory.memory_statistics().outbox
        time.sleep(0.2)
    assert svc.memory.memory_search(MemorySearchInput(query="webhook signing secret")).results[0].id == added.memory_id


# --------------------------------------------------------------------------------------------
# 6. Two writers at the same version: exactly one wins
# --------------------------------------------------------------------------------------------


def _racing_update(
    svc: CodeMemService, memory_id: str, content: str, name: str, barrier: threading.Barrier, outcome: dict[str, Any]
) -> None:
    """Update ``memory_id`` from version 1 as soon as the other writer is ready too."""
    barrier.wait()
    try:
        outcome[name] = svc.memory.memory_update(
            MemoryUpdateInput(memory_id=memory_id, memory_type="session", content=content, expected_version=1)
        )
    except ToolError as exc:
        outcome[name] = exc


def test_two_threads_updating_the_same_version_one_wins(project: Path, graph_servers: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project)
    rounds = 12
    ids = [svc.memory.memory_add(MemoryAddInput(memory_type="session", content=f"Initial note {i} about retries")).memory_id for i in range(rounds)]
    for n, mid in enumerate(ids):
        assert svc.memory.memory_get(MemoryGetInput(memory_id=mid, memory_type="session")).version == 1
        barrier = threading.Barrier(2)
        outcome: dict[str, Any] = {}
        threads = [
            threading.Thread(target=_racing_update, args=(svc, mid, f"Note {n} rewritten by writer {name}", name, barrier, outcome))
            for name in ("a", "b")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        wins = [k for k, v in outcome.items() if not isinstance(v, Exception)]
        losses = [v for v in outcome.values() if isinstance(v, ToolError)]
        assert len(wins) == 1 and len(losses) == 1, outcome
        assert "now at version 2" in str(losses[0]) and "expected_version=2" in str(losses[0])
        assert outcome[wins[0]].version == 2
        row = svc.memory.ledger.get(mid)
        assert row.version == 2 and row.content == f"Note {n} rewritten by writer {wins[0]}"
        assert [e["operation"] for e in svc.memory.ledger.audit_of(mid)] == ["create", "update"]
    svc.memory.sync()
    _assert_projections_match_ledger(svc)


def _dense_of(svc: CodeMemService, memory_type: str, memory_id: str) -> Any:
    """The dense vector Qdrant holds for a memory (the store's public retrieve leaves vectors out)."""
    import numpy as np

    from resources.vectors.store import DENSE

    [record] = svc.vectors._shard(COLLECTIONS[memory_type]).retrieve([memory_id], with_payload=False, with_vector=True)  # noqa: SLF001
    return np.asarray(record.vector[DENSE], dtype=float)


def _cosine(a: Any, b: Any) -> float:
    import numpy as np

    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_concurrent_updates_leave_the_latest_contents_vector(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    from resources.memory.projection import prepared_text

    svc = service_factory(project)
    mid = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Original note about the release")).memory_id
    original = svc.memory.projector.project
    release = threading.Event()

    def late_projection(memory_ids: Any, *, vectors_of: Any = None) -> Any:
        if threading.current_thread().name == "first-writer":  # this writer is descheduled before it projects
            release.wait(60)
        return original(memory_ids, vectors_of=vectors_of)

    monkeypatch.setattr(svc.memory.projector, "project", late_projection)
    first = threading.Thread(
        target=svc.memory.memory_update, name="first-writer",
        args=(MemoryUpdateInput(memory_id=mid, memory_type="session", content="The deploy pipeline runs on GitHub Actions"),),
    )
    first.start()
    deadline = time.monotonic() + 60
    while svc.memory.ledger.get(mid).version < 2:  # the first update is committed
        assert time.monotonic() < deadline
        time.sleep(0.01)
    second = svc.memory.memory_update(MemoryUpdateInput(memory_id=mid, memory_type="session", content="Our favourite lunch spot serves ramen"))
    assert second.version == 3
    release.set()
    first.join(60)
    svc.memory.sync()
    row = svc.memory.ledger.get(mid)
    assert (row.content, row.version, row.sync_status) == ("Our favourite lunch spot serves ramen", 3, "synced")
    assert _payloads(svc, "session", [mid])[mid]["version"] == 3
    expected = svc.embedder.embed_documents([prepared_text("session", row.content, row.metadata)])[0]
    assert _cosine(_dense_of(svc, "session", mid), expected) > 0.99


_REMOTE_UPDATE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from query_server.ownership import ProjectHandle
    from query_server.service import ToolError
    from resources.schemas.memory import MemoryUpdateInput
    from resources.settings import Settings

    project, memory_id, name, go = Path(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4])
    handle = ProjectHandle(Settings(project_root=project))
    assert not handle.is_owner
    (go.parent / f"ready-{name}").touch()
    while not go.exists():
        time.sleep(0.001)
    try:
        result = handle.call("memory_update", MemoryUpdateInput(
            memory_id=memory_id, memory_type="session", content=f"rewritten by process {name}", expected_version=1))
        print("ACK", json.dumps({"ok": result.version}), flush=True)
    except ToolError as exc:
        print("ACK", json.dumps({"error": str(exc)}), flush=True)
    handle.close()
    """
)


def test_two_processes_through_the_owner_one_wins(project: Path, tmp_path: Path, graph_servers: Path) -> None:
    from query_server.ownership import ProjectHandle

    owner = ProjectHandle(Settings(project_root=project))
    try:
        assert owner.is_owner
        mid = owner.call("memory_add", MemoryAddInput(memory_type="session", content="Shared note both agents edit")).memory_id
        sync_dir = tmp_path / "race"
        sync_dir.mkdir()
        go = sync_dir / "go"
        procs = {
            name: subprocess.Popen(
                [sys.executable, "-c", _REMOTE_UPDATE, str(project), mid, name, str(go)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=str(REPO_ROOT),
            )
            for name in ("a", "b")
        }
        deadline = time.monotonic() + 120
        while not all((sync_dir / f"ready-{n}").exists() for n in procs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values()), [
                p.stderr.read() for p in procs.values() if p.poll() is not None  # type: ignore[union-attr]
            ]
            time.sleep(0.02)
        go.touch()
        results = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
            results[name] = json.loads(_acks(out)[-1])
        wins = [n for n, r in results.items() if "ok" in r]
        losses = [r["error"] for r in results.values() if "error" in r]
        assert len(wins) == 1 and len(losses) == 1, results
        assert results[wins[0]]["ok"] == 2 and "now at version 2" in losses[0]
        record = owner.call("memory_get", MemoryGetInput(memory_id=mid, memory_type="session"))
        assert record.version == 2 and record.content == f"rewritten by process {wins[0]}"
    finally:
        owner.close()


# --------------------------------------------------------------------------------------------
# 7. Durability across a restart of the MCP server (REQ-MEM-VER-008)
# --------------------------------------------------------------------------------------------


def _stdio_server(project: Path) -> Any:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "query_server.cli", "mcp", "--project", str(project)],
        env=child_env(), cwd=str(REPO_ROOT),
    )


def _wait_owner_gone(project: Path, timeout: float = 60) -> None:
    owner_file = Settings(project_root=project).resolved_state_dir() / "owner.json"
    deadline = time.monotonic() + timeout
    while owner_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)


async def _search_until_found(client: Any, query: str, memory_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = await client.call_tool("memory_search", {"query": query, "limit": 5})
        assert not found.is_error, found
        data = found.structured_content
        if any(r["id"] == memory_id for r in data["results"]):
            return data
        assert time.monotonic() < deadline, data
        await anyio.sleep(0.3)


@pytest.mark.slow
def test_memories_survive_restarts_of_the_mcp_server(project: Path, graph_servers: Path) -> None:
    from mcp import Client

    project.joinpath("app.py").write_text("def main():\n    return 0\n")
    ids: dict[str, str] = {}

    async def first_run() -> None:
        async with Client(_stdio_server(project)) as client:
            added = await client.call_tool("memory_add", {
                "memory_type": "design",
                "content": "Uploads are stored in object storage; the database keeps only their keys",
                "metadata": {"design_type": "ADR", "title": "ADR-3 upload storage", "status": "Accepted"},
            })
            assert not added.is_error, added
            ids["a"] = added.structured_content["memory_id"]

    anyio.run(first_run)
    _wait_owner_gone(project)
    leftovers = stop_graph_servers(project)  # a clean shutdown stops its graph server; kill any that is left
    assert leftovers == [], f"the graph server outlived `codemem mcp`: {leftovers}"

    async def second_run() -> None:
        async with Client(_stdio_server(project)) as client:
            data = await _search_until_found(client, "where are uploaded files kept", ids["a"])
            assert data["results"][0]["id"] == ids["a"] and data["search_mode"] == "hybrid"
            got = (await client.call_tool("memory_get", {"memory_id": ids["a"], "memory_type": "design"})).structured_content
            assert got["version"] == 1 and got["sync_status"] == "synced"
            added = await client.call_tool("memory_add", {
                "memory_type": "session", "content": "Migrated the thumbnail job to the new upload bucket",
            })
            assert not added.is_error, added
            ids["b"] = added.structured_content["memory_id"]
            # like a container being stopped: the server and its graph server die without cleanup
            owner = json.loads((Settings(project_root=project).resolved_state_dir() / "owner.json").read_text())
            os.kill(owner["pid"], signal.SIGKILL)
            stop_graph_servers(project)

    try:
        anyio.run(second_run)
    except Exception as exc:  # noqa: BLE001 - the client may complain about the server it lost
        if "b" not in ids:
            raise
        print(f"client after the kill: {type(exc).__name__}: {exc}")
    assert graph_servers_under(project) == []

    async def third_run() -> None:
        async with Client(_stdio_server(project)) as client:
            await _search_until_found(client, "where are uploaded files kept", ids["a"])
            data = await _search_until_found(client, "thumbnail job upload bucket", ids["b"])
            assert data["results"][0]["id"] == ids["b"]
            rows = await client.call_tool("graph_query", {
                "cypher": "MATCH (n) WHERE n.memory_id IN $ids RETURN n.memory_id AS id ORDER BY id",
                "parameters": {"ids": sorted(ids.values())},
            })
            assert not rows.is_error, rows
            assert [r["id"] for r in rows.structured_content["results"]] == sorted(ids.values())
            stats = (await client.call_tool("memory_statistics", {})).structured_content
            assert stats["memory_counts"]["design"]["total"] == 1 and stats["memory_counts"]["session"]["total"] == 1

    anyio.run(third_run)
    _wait_owner_gone(project)

"""The memory ledger: versions, audit, outbox, soft/hard delete, and durability under SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from resources.memory.ledger import (
    MAX_ATTEMPTS_BEFORE_FAILED,
    Ledger,
    MemoryNotFound,
    NewMemory,
    Relationship,
    VersionConflict,
)


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    led = Ledger(tmp_path / "memory.db")
    yield led
    led.close()


def _new(content: str = "Search answers in 200 ms", **metadata: object) -> NewMemory:
    return NewMemory(memory_type="requirements", content=content, metadata={"title": "Latency", **metadata})


def test_add_creates_row_audit_and_outbox(ledger: Ledger) -> None:
    [row] = ledger.add([_new()], request_id="req-1")
    assert row.version == 1 and row.sync_status == "pending" and not row.deleted
    assert ledger.get(row.id).content == "Search answers in 200 ms"
    [entry] = ledger.audit_of(row.id)
    assert entry["operation"] == "create" and entry["previous"] is None and entry["request_id"] == "req-1"
    assert ledger.due_outbox() == [row.id]
    assert ledger.counts() == {"requirements": {"total": 1, "active": 1, "deleted": 0}}


def test_repeated_request_id_returns_the_first_result(ledger: Ledger) -> None:
    first = ledger.add([_new()], request_id="same")
    again = ledger.add([_new("other")], request_id="same")
    assert [r.id for r in again] == [r.id for r in first]
    assert ledger.counts()["requirements"]["total"] == 1


def test_replayed_tells_what_a_request_id_last_did_to_a_memory(ledger: Ledger) -> None:
    (row,) = ledger.add([_new()], request_id="create-1")
    ledger.update(row.id, content="Search answers in 150 ms", request_id="update-1")
    assert ledger.replayed("create-1", row.id) == ("create", {**row.snapshot(), "version": 1})
    operation, after = ledger.replayed("update-1", row.id)  # type: ignore[misc]
    assert (operation, after["version"], after["content"]) == ("update", 2, "Search answers in 150 ms")
    ledger.hard_delete([row.id], request_id="delete-1")
    assert ledger.replayed("delete-1", row.id) == ("hard_delete", None)
    assert ledger.replayed("never-used", row.id) is None
    assert ledger.replayed("update-1", "another-memory") is None


def test_bulk_add_is_all_or_nothing(ledger: Ledger) -> None:
    good = _new("one")
    clash = _new("two")
    clash.id = good.id  # the second insert violates the primary key
    with pytest.raises(sqlite3.IntegrityError):
        ledger.add([good, clash])
    assert ledger.get(good.id) is None
    assert ledger.due_outbox() == []


def test_update_bumps_version_and_audits_previous_value(ledger: Ledger) -> None:
    [row] = ledger.add([_new()])
    after, changed = ledger.update(row.id, content="Search answers in 50 ms", expected_version=1)
    assert changed and after.version == 2 and after.content_hash != row.content_hash
    trail = ledger.audit_of(row.id)
    assert [e["operation"] for e in trail] == ["create", "update"]
    assert trail[1]["previous"]["content"] == "Search answers in 200 ms"
    assert trail[1]["current"]["content"] == "Search answers in 50 ms"
    same, changed = ledger.update(row.id, content="Search answers in 50 ms")
    assert not changed and same.version == 2


def test_stale_version_is_refused_with_the_current_one(ledger: Ledger) -> None:
    [row] = ledger.add([_new()])
    ledger.update(row.id, content="first writer", expected_version=1)
    with pytest.raises(VersionConflict) as caught:
        ledger.update(row.id, content="second writer", expected_version=1)
    assert caught.value.current_version == 2
    assert "expected_version=2" in str(caught.value)
    with pytest.raises(VersionConflict):
        ledger.update(row.id, content="x", expected_updated_at=row.updated_at)
    assert ledger.get(row.id).content == "first writer"


def test_soft_delete_restore_and_hard_delete(ledger: Ledger) -> None:
    [row] = ledger.add([_new()])
    [other] = ledger.add([_new("design note")])
    ledger.update(other.id, relationships=[Relationship(other.id, "ADDRESSES", row.id, "memory")])
    deleted = ledger.soft_delete(row.id)
    assert deleted.deleted and deleted.deleted_at and deleted.version == 2
    assert ledger.counts()["requirements"] == {"total": 2, "active": 1, "deleted": 1}
    restored = ledger.restore(row.id)
    assert not restored.deleted and restored.version == 3
    assert ledger.hard_delete([row.id]) == 1
    assert ledger.get(row.id) is None
    out, incoming = ledger.relationships_of(other.id)
    assert out == [] and incoming == []
    assert [e["operation"] for e in ledger.audit_of(row.id)] == ["create", "soft_delete", "restore", "hard_delete"]
    assert ledger.audit_of(row.id)[-1]["previous"]["content"] == "Search answers in 200 ms"
    with pytest.raises(MemoryNotFound):
        ledger.update(row.id, content="gone")


def test_outbox_backoff_marks_failed_after_repeated_errors(ledger: Ledger) -> None:
    [row] = ledger.add([_new()])
    for _ in range(MAX_ATTEMPTS_BEFORE_FAILED):
        ledger.mark_failed([row.id], "ConnectionError: qdrant down")
    assert ledger.get(row.id).sync_status == "failed"
    assert ledger.due_outbox() == []  # backing off
    stats = ledger.outbox_stats()
    assert stats["pending"] == 1 and "qdrant down" in stats["last_error"]
    ledger.retry_now()
    assert ledger.due_outbox() == [row.id]
    ledger.mark_projected(row.id, ledger.outbox_entry(row.id))
    assert ledger.get(row.id).sync_status == "synced" and ledger.due_outbox() == []


def test_a_change_during_projection_stays_queued(ledger: Ledger) -> None:
    [row] = ledger.add([_new()])
    seen = ledger.outbox_entry(row.id)
    time.sleep(0.001)
    ledger.update(row.id, content="changed while projecting")
    ledger.mark_projected(row.id, seen)
    assert ledger.due_outbox() == [row.id] and ledger.get(row.id).sync_status == "pending"


def test_metadata_lookup_and_iteration(ledger: Ledger) -> None:
    rows = ledger.add([_new(f"requirement {i}", requirement_id=f"REQ-MEM-FN-{i:03d}") for i in range(5)])
    [hit] = ledger.find_by_metadata("requirements", "requirement_id", "REQ-MEM-FN-003")
    assert hit.id == rows[3].id
    assert [r.id for r in ledger.iter_memories(batch=2)] == [r.id for r in rows]
    ledger.soft_delete(rows[0].id)
    assert len(list(ledger.iter_memories(include_deleted=False))) == 4


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from resources.memory.ledger import Ledger, NewMemory
    ledger = Ledger(Path(sys.argv[1]))
    i = 0
    while True:
        [row] = ledger.add([NewMemory(memory_type="session", content=f"session {i}", metadata={})])
        if i % 3 == 0:
            ledger.update(row.id, content=f"session {i} (edited)")
        print(row.id, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1])
def test_sigkill_mid_write_loses_nothing_acknowledged(tmp_path: Path, delay: float) -> None:
    db = tmp_path / "memory.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    time.sleep(delay + 0.8)  # interpreter start-up, then writes
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acknowledged = out.split()
    assert acknowledged, "the writer never acknowledged a write"
    ledger = Ledger(db)
    try:
        rows = ledger.get_many(acknowledged)
        assert set(rows) == set(acknowledged)  # every acknowledged memory survived the kill
        total = sum(c["total"] for c in ledger.counts().values())
        assert total in (len(acknowledged), len(acknowledged) + 1)  # at most one committed, unacknowledged
        for row in ledger.iter_memories():
            trail = ledger.audit_of(row.id)
            assert trail[0]["operation"] == "create"
            assert trail[-1]["current"]["content"] == row.content  # audit and row agree
            assert row.sync_status == "pending" and ledger.outbox_entry(row.id) is not None
    finally:
        ledger.close()


def test_replica_follows_the_source_by_audit_sequence(tmp_path: Path) -> None:
    """A replica (the global scope's per-project copy) takes rows as they are — ids, versions, times,
    links — queues them for projection, drops what the source removed, and writes no audit."""
    source = Ledger(tmp_path / "global.db", scope="global")
    replica = Ledger(tmp_path / "replica.db", scope="global")
    try:
        assert source.last_audit_seq() == 0
        first, second = source.add([_new("one"), _new("two")])
        source.update(second.id, relationships=[Relationship(second.id, "RELATES_TO", first.id, "memory:requirements")])
        seq = source.last_audit_seq()
        assert seq == 3 and source.audited_since(2) == {second.id} and source.audited_since(seq) == set()
        rows = list(source.get_many([first.id, second.id]).values())
        assert replica.replicate(rows, {r.id: source.relationships_of(r.id)[0] for r in rows}, []) == 2
        copied = replica.get(second.id)
        assert copied is not None and (copied.version, copied.updated_at, copied.scope) == (2, source.get(second.id).updated_at, "global")
        assert [(r.rel_type, r.target_id) for r in replica.relationships_of(second.id)[0]] == [("RELATES_TO", first.id)]
        assert set(replica.due_outbox()) == {first.id, second.id} and replica.last_audit_seq() == 0
        source.hard_delete([first.id])
        assert source.audited_since(seq) == {first.id}
        replica.replicate([], {}, [first.id])
        assert replica.get(first.id) is None and first.id in replica.due_outbox()
    finally:
        source.close()
        replica.close()

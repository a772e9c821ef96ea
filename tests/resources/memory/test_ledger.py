"""The memory ledger: versions, audit, outbox, soft/hard delete, and durability under SIGKILL.

One contract suite over both stores: the SQLite file (embedded mode) and PostgreSQL (server mode,
a real throwaway cluster, ``tests/postgres_cluster.py``); then what only PostgreSQL has to show
(writers in several processes at once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from resources.memory.ledger import (
    MAX_ATTEMPTS_BEFORE_FAILED,
    Ledger,
    LedgerError,
    MemoryNotFound,
    Merge,
    NewMemory,
    Relationship,
    VersionConflict,
)


Opener = Callable[..., Ledger]
"""``open_ledger(name="memory", scope="project")``: a ledger of the backend under test (the same
name again: a second connection to the same ledger)."""


def _target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(backend, where its ledgers go): a directory for SQLite, a database URL for PostgreSQL."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path)
    return "postgres", request.getfixturevalue("postgres_url")


def _open(backend: str, where: str, name: str = "memory", scope: str = "project") -> Ledger:
    if backend == "sqlite":
        return Ledger(Path(where) / f"{name}.db", scope=scope)
    from resources.memory.ledger_postgres import PostgresLedgerStore

    return Ledger(store=PostgresLedgerStore(where, namespace=name), scope=scope)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    return _target(request, tmp_path)


@pytest.fixture
def open_ledger(backend: tuple[str, str]) -> Iterator[Opener]:
    opened: list[Ledger] = []

    def make(name: str = "memory", scope: str = "project") -> Ledger:
        opened.append(_open(*backend, name, scope))
        return opened[-1]

    yield make
    for led in opened:
        led.close()


@pytest.fixture
def ledger(open_ledger: Opener) -> Ledger:
    return open_ledger()


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
    with pytest.raises(ledger.integrity_errors):
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
    from tests.resources.memory.test_ledger import _open
    from resources.memory.ledger import NewMemory
    ledger = _open(sys.argv[1], sys.argv[2])
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
def test_sigkill_mid_write_loses_nothing_acknowledged(backend: tuple[str, str], delay: float) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, *backend],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    first = proc.stdout.readline()  # started (a loaded machine may take seconds), writing
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    acknowledged = (first + out).split()
    assert len(acknowledged) > 1, "the writer acknowledged too few writes to be killed in the middle of one"
    ledger = _open(*backend)
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


def test_replica_follows_the_source_by_audit_sequence(open_ledger: Opener) -> None:
    """A replica (the global scope's per-project copy) takes rows as they are — ids, versions, times,
    links — queues them for projection, drops what the source removed, and writes no audit."""
    source = open_ledger("global", scope="global")
    replica = open_ledger("replica", scope="global")
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


def test_normalization_is_one_transaction_and_its_unlinks_come_back(ledger: Ledger) -> None:
    keeper, duplicate, citing, gone = ledger.add([_new("one"), _new("one"), _new("design note"), _new("old")])
    ledger.update(citing.id, relationships=[Relationship(citing.id, "ADDRESSES", duplicate.id, "memory")])
    ledger.update(duplicate.id, relationships=[Relationship(duplicate.id, "IMPLEMENTS_REQ", "pkg.mod.f", "code")])
    ledger.update(keeper.id, relationships=[Relationship(keeper.id, "DEPENDS_ON", "missing-memory", "memory")])
    ledger.soft_delete(gone.id)
    assert ledger.duplicate_groups() == [("requirements", sorted([keeper.id, duplicate.id]))] or sorted(
        ledger.duplicate_groups()[0][1]) == sorted([keeper.id, duplicate.id])
    orphan = Relationship(keeper.id, "DEPENDS_ON", "missing-memory", "memory")
    counts = ledger.apply_normalization(
        [Merge(keeper.id, [duplicate.id], {"title": "Latency", "merged": True})], [gone.id],
        meta={"generation": "2"}, request_id="norm-1", orphan_links=[orphan],
    )
    assert counts == {"merged": 1, "cleaned": 1, "unlinked": 1, "queued": 3}
    assert ledger.meta("generation") == "2" and ledger.get(gone.id) is None
    assert ledger.get(duplicate.id).deleted and ledger.get(keeper.id).metadata["merged"] is True
    assert [e["operation"] for e in ledger.audit_of(duplicate.id)][-1] == "merged_into"
    out, incoming = ledger.relationships_of(keeper.id)
    assert [(r.rel_type, r.target_id) for r in out] == [("IMPLEMENTS_REQ", "pkg.mod.f")]  # re-pointed; orphan gone
    assert [(r.source_id, r.rel_type) for r in incoming] == [(citing.id, "ADDRESSES")]
    assert ledger.unlinked_by("norm-1") == 1
    assert ledger.restore_links("norm-1") == 1 and ledger.restore_links("norm-1") == 0  # twice restores once
    assert ("DEPENDS_ON", "missing-memory") in [(r.rel_type, r.target_id) for r in ledger.relationships_of(keeper.id)[0]]


def test_a_merge_does_not_duplicate_a_link_the_keeper_has(ledger: Ledger) -> None:
    keeper, duplicate, citing = ledger.add([_new("one"), _new("one"), _new("design note")])
    for source, target in ((citing.id, keeper.id), (citing.id, duplicate.id)):
        ledger.update(source, relationships=[Relationship(source, "ADDRESSES", target, "memory")])
    ledger.apply_normalization([Merge(keeper.id, [duplicate.id], {})], [], meta={})
    assert [(r.source_id, r.target_id) for r in ledger.relationships_of(keeper.id)[1]] == [(citing.id, keeper.id)]
    assert ledger.relationships_of(duplicate.id) == ([], [])


def test_adopt_takes_newer_versions_only_and_audits_what_it_replaced(ledger: Ledger) -> None:
    (row,) = ledger.add([_new()])
    newer = ledger.get(row.id)
    newer.content, newer.version, newer.updated_at = "from another clone", 5, "2999-01-01T00:00:00.000000+00:00"
    older = ledger.get(row.id)
    older.content, older.version = "stale", 1
    assert ledger.adopt([older], {}) == []
    assert ledger.adopt([newer], {row.id: [Relationship(row.id, "TESTS", "t.test_a", "code")]}) == [row.id]
    after = ledger.get(row.id)
    assert (after.content, after.version) == ("from another clone", 5)
    assert ledger.audit_of(row.id)[-1]["previous"]["content"] == "Search answers in 200 ms"
    assert [r.target_id for r in ledger.relationships_of(row.id)[0]] == ["t.test_a"]


def test_access_counts_add_up_and_keep_the_latest_time(ledger: Ledger) -> None:
    a, b = ledger.add([_new("a"), _new("b")])
    ledger.record_access([a.id, a.id, b.id])
    assert ledger.flush_access()
    ledger.record_access([a.id])
    assert ledger.flush_access()
    rows = ledger.get_many([a.id, b.id])
    assert (rows[a.id].access_count, rows[b.id].access_count) == (3, 1)
    assert rows[a.id].last_accessed_at >= rows[b.id].last_accessed_at and rows[a.id].version == 1


def test_metadata_lookup_by_value_type(ledger: Ledger) -> None:
    rows = ledger.add([
        _new("text", key="style"), _new("number", key=7), _new("flag", key=True), _new("none"),
    ])
    assert [r.id for r in ledger.find_by_metadata("requirements", "key", "style")] == [rows[0].id]
    assert [r.id for r in ledger.find_by_metadata("requirements", "key", 7)] == [rows[1].id]
    assert [r.id for r in ledger.find_by_metadata("requirements", "key", True)] == [rows[2].id]
    assert ledger.find_by_metadata("requirements", "key", "absent") == []
    with pytest.raises(LedgerError):
        ledger.find_by_metadata("requirements", "key') OR 1=1 --", "x")


def test_anchor_state_staleness_and_anchored_memories(ledger: Ledger) -> None:
    anchored, plain = ledger.add([_new("anchored", anchors=[{"qualified_name": "m.f"}]), _new("plain", anchors=None)])
    assert [r.id for r in ledger.anchored_memories()] == [anchored.id]
    ledger.set_anchor_state([(anchored.id, "m.f", "h1", "h2"), (anchored.id, "m.g", "h3", "h3")])
    stale = ledger.stale_anchors()
    assert list(stale) == [anchored.id] and [s["qualified_name"] for s in stale[anchored.id]] == ["m.f"]
    assert ledger.stale_anchors([plain.id]) == {} and ledger.stale_anchors([]) == {}
    ledger.clear_anchor_state([anchored.id])
    assert ledger.stale_anchors() == {}


def test_listing_counting_and_following_changes(ledger: Ledger) -> None:
    first, second, third = ledger.add([_new("a"), _new("b"), NewMemory(memory_type="session", content="c", metadata={})])
    ledger.update(second.id, relationships=[Relationship(second.id, "RELATES_TO", first.id, "memory")])
    assert [r.id for r in ledger.recent(limit=2)] == [second.id, third.id]
    assert [r.id for r in ledger.recent(memory_types=["requirements"], offset=1)] == [first.id]
    assert ledger.memory_types(["requirements", "design", "session"]) == {"requirements", "session"}
    assert [(r.source_id, r.target_id) for r in ledger.relationships_touching([first.id])] == [(second.id, first.id)]
    assert len(ledger.all_relationships()) == 1
    assert ledger.sync_counts() == {"synced": 0, "pending": 3, "failed": 0}
    since = ledger.last_audit_seq()
    ledger.soft_delete(third.id)
    assert [(m, prev["deleted"]) for _, m, prev in ledger.audit_after(since)] == [(third.id, False)]
    assert ledger.changed_since(ledger.get(third.id).updated_at) == {third.id}
    assert ledger.expired_deletions(older_than_days=0) == [third.id] and ledger.expired_deletions() == []
    for memory_id in (first.id, second.id, third.id):
        ledger.mark_projected(memory_id, None)
    assert ledger.enqueue_all() == 3 and ledger.sync_counts()["pending"] == 3
    ledger.set_meta("model", "minilm")
    ledger.set_meta("model", "voyage-code-3")
    assert ledger.meta("model") == "voyage-code-3" and ledger.meta("missing") is None


def test_a_backup_is_a_sqlite_ledger_with_every_row(ledger: Ledger, tmp_path: Path) -> None:
    first, second = ledger.add([_new("a"), _new("b")], request_id="r1")
    ledger.update(second.id, content="b2", relationships=[Relationship(second.id, "RELATES_TO", first.id, "memory")])
    ledger.set_anchor_state([(first.id, "m.f", "h1", None)])
    ledger.backup_to(tmp_path / "backup" / "memory.db")
    copy = Ledger(tmp_path / "backup" / "memory.db")
    try:
        assert oct((tmp_path / "backup" / "memory.db").stat().st_mode & 0o777) == "0o600"
        assert copy.get_many([first.id, second.id]) == ledger.get_many([first.id, second.id])
        assert copy.audit_of(second.id) == ledger.audit_of(second.id)
        assert copy.relationships_of(second.id) == ledger.relationships_of(second.id)
        assert copy.stale_anchors() == ledger.stale_anchors() and copy.due_outbox() == ledger.due_outbox()
        assert copy.last_audit_seq() == ledger.last_audit_seq() == 3
        (added,) = copy.add([_new("after the restore")])
        assert copy.audit_of(added.id)[0]["seq"] == 4  # the copy's audit sequence goes on from the source's
    finally:
        copy.close()


# -- PostgreSQL: writers in several processes at once ----------------------------------------


def _two_replicas(postgres_url: str) -> tuple[Ledger, Ledger]:
    """Two ledgers over the same schema, each with its own connection pool (two replicas)."""
    return _open("postgres", postgres_url), _open("postgres", postgres_url)


def test_replicas_racing_on_one_version_let_exactly_one_win(postgres_url: str) -> None:
    import threading

    one, two = _two_replicas(postgres_url)
    try:
        (row,) = one.add([_new()])
        def write(ledger: Ledger, text: str, expected: int, barrier: threading.Barrier, outcomes: list[str]) -> None:
            barrier.wait()
            try:
                ledger.update(row.id, content=text, expected_version=expected)
                outcomes.append("won")
            except VersionConflict:
                outcomes.append("refused")

        for round_ in range(20):
            version = one.get(row.id).version
            barrier, outcomes = threading.Barrier(2), []
            threads = [
                threading.Thread(target=write, args=(led, f"{name} {round_}", version, barrier, outcomes))
                for led, name in ((one, "a"), (two, "b"))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(outcomes) == ["refused", "won"], round_
            assert two.get(row.id).version == version + 1
        assert len(one.audit_of(row.id)) == 21  # create + one update per round: no lost or doubled write
    finally:
        one.close()
        two.close()


def test_one_request_id_sent_to_two_replicas_at_once_creates_once(postgres_url: str) -> None:
    import threading

    one, two = _two_replicas(postgres_url)
    try:
        def send(ledger: Ledger, round_: int, barrier: threading.Barrier, results: list[list[str]]) -> None:
            barrier.wait()
            results.append([r.id for r in ledger.add([_new(f"memory {round_}")], request_id=f"retry-{round_}")])

        for round_ in range(10):
            barrier, results = threading.Barrier(2), []
            threads = [threading.Thread(target=send, args=(led, round_, barrier, results)) for led in (one, two)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert results[0] == results[1], round_
        assert one.counts()["requirements"]["total"] == 10
    finally:
        one.close()
        two.close()


def test_the_audit_sequence_follows_commit_order_across_replicas(postgres_url: str) -> None:
    """A follower that has read up to seq N never misses an entry committed later with a lower seq:
    a replica's write waits while another replica's write transaction is open."""
    import threading

    one, two = _two_replicas(postgres_url)
    try:
        (row,) = one.add([_new()])
        holding, release, written = threading.Event(), threading.Event(), threading.Event()

        def long_write() -> None:
            with one._transaction() as conn:
                conn.execute("UPDATE memories SET importance_score=0.9 WHERE id=?", (row.id,))
                holding.set()
                release.wait(10)

        holder = threading.Thread(target=long_write)
        holder.start()
        assert holding.wait(10)
        writer = threading.Thread(target=lambda: (two.add([_new("other replica")]), written.set()))
        writer.start()
        assert not written.wait(0.5)  # the other replica's write waits for the open transaction
        assert one.last_audit_seq() == 1  # and reads do not
        release.set()
        holder.join()
        writer.join()
        assert written.is_set() and one.get(row.id).importance_score == 0.9 and one.last_audit_seq() == 2
    finally:
        one.close()
        two.close()


def test_postgres_ledger_errors_say_what_to_do(postgres_url: str) -> None:
    from resources.memory.ledger_postgres import PostgresLedgerStore
    from tests.postgres_cluster import _free_port

    with pytest.raises(LedgerError, match="lower-case"):
        PostgresLedgerStore(postgres_url, namespace="Robert'); DROP TABLE memories; --")
    url = f"postgresql://someone:s3cret@127.0.0.1:{_free_port()}/codemem"  # nothing listens there
    with pytest.raises(LedgerError, match="CODEMEM_DATABASE_URL") as failure:
        PostgresLedgerStore(url, namespace="memory")
    assert "s3cret" not in str(failure.value)


def test_postgres_sql_keeps_literals_and_doubles_percent_signs() -> None:
    from resources.postgres import postgres_sql

    assert postgres_sql("SELECT 'a?b', x FROM t WHERE y=? AND z LIKE 'p%' AND w=?") == (
        "SELECT 'a?b', x FROM t WHERE y=%s AND z LIKE 'p%%' AND w=%s"
    )


def test_one_projector_at_a_time_and_a_change_meanwhile_is_projected_next(open_ledger: Opener) -> None:
    """Two projectors (two replicas, or two connections): a claimed memory is the claimer's; a
    change made while it projects keeps the row queued and due the moment the claim is released."""
    one, two = open_ledger(), open_ledger()
    a, b = one.add([_new("a"), _new("b")])
    claimed = one.claim([a.id, b.id])
    assert claimed == {a.id: one.outbox_entry(a.id), b.id: one.outbox_entry(b.id)}
    assert two.claim([a.id, b.id]) == {} and two.due_outbox() == []  # the other projector skips them
    assert set(one.due_outbox()) == {a.id, b.id}  # the claimer's own (its projector serializes them)
    time.sleep(0.001)
    two.update(a.id, content="changed while the first projector worked")
    assert two.claim([a.id]) == {}  # the change keeps the claim: the first projector's write is older
    two.release([a.id])
    assert two.claim([a.id]) == {}  # another projector's release leaves the claim alone
    one.mark_projected(a.id, claimed[a.id])
    one.mark_projected(b.id, claimed[b.id])
    assert two.due_outbox() == [a.id] and two.get(b.id).sync_status == "synced"
    again = two.claim([a.id])
    assert again == {a.id: two.outbox_entry(a.id)} and again[a.id] != claimed[a.id]
    two.release([a.id])
    assert one.due_outbox() == [a.id]
    one.claim([a.id])
    one.mark_failed([a.id], "qdrant down")
    assert two.claim([a.id]) != {}  # a failure releases the claim (the row waits for its backoff)


def test_a_memory_with_nothing_queued_has_nothing_to_project(open_ledger: Opener) -> None:
    """Its projection was written after its last change (another projector, or another thread of
    this one, got there first): a claim leaves it out, and nothing is queued for it."""
    one = open_ledger()
    (row,) = one.add([_new()])
    one.mark_projected(row.id, one.claim([row.id])[row.id])
    assert one.claim([row.id, "never-written"]) == {} and one.outbox_stats()["pending"] == 0


def test_a_projector_that_lost_its_claim_never_marks_its_write_done(open_ledger: Opener) -> None:
    """Its lease ran out and another projector took the memory (and may have written a newer
    version): the late finisher queues it again, so the last write is a fresh one."""
    one, two = open_ledger(), open_ledger()
    (row,) = one.add([_new()])
    stale = one.claim([row.id], lease_s=0)  # the first projector stalls past its lease
    time.sleep(0.001)
    two.update(row.id, content="v2")
    fresh = two.claim([row.id])
    assert fresh
    two.mark_projected(row.id, fresh[row.id])  # the second writes v2 and is done
    assert one.get(row.id).sync_status == "synced"
    one.mark_projected(row.id, stale[row.id])  # then the first one's v1 lands
    assert one.due_outbox() == [row.id] and one.get(row.id).sync_status == "pending"
    third = two.claim([row.id])
    one.mark_failed([row.id], "late failure")  # a claim it no longer has is not released by it
    assert third and one.claim([row.id]) == {}


def test_a_rebuild_during_a_projection_is_not_marked_done_by_it(open_ledger: Opener) -> None:
    one, two = open_ledger(), open_ledger()
    (row,) = one.add([_new()])
    claimed = one.claim([row.id])
    time.sleep(0.001)
    assert two.enqueue_all() == 1  # another replica drops the collections and queues everything
    one.mark_projected(row.id, claimed[row.id])
    assert two.due_outbox() == [row.id]


def test_a_claim_left_by_a_killed_process_does_not_outlive_it_in_embedded_mode(tmp_path: Path) -> None:
    """SQLite has one owner: whatever claims its file holds at open are a dead process's."""
    first = Ledger(tmp_path / "memory.db")
    (row,) = first.add([_new()])
    assert first.claim([row.id])
    first.close()
    second = Ledger(tmp_path / "memory.db")
    try:
        assert second.due_outbox() == [row.id]
    finally:
        second.close()


def test_a_nul_character_is_kept_out_the_same_way_in_both_modes(ledger: Ledger) -> None:
    (row,) = ledger.add([_new("stack trace\x00tail", detail={"lines": ["a\x00b"]})])
    (updated, _) = ledger.update(row.id, content="again\x00")
    assert ledger.get(row.id).metadata["detail"] == {"lines": ["a\ufffdb"]} and updated.content == "again\ufffd"
    assert ledger.audit_of(row.id)[0]["current"]["content"] == "stack trace\ufffdtail"


def test_metadata_objects_match_and_none_matches_nothing(ledger: Ledger) -> None:
    with_object, with_null = ledger.add([_new("object", key={"a": 1, "b": [2]}), _new("null", key=None)])
    assert [r.id for r in ledger.find_by_metadata("requirements", "key", {"a": 1, "b": [2]})] == [with_object.id]
    assert ledger.find_by_metadata("requirements", "key", None) == []


def test_a_postgres_write_waits_for_another_writer_only_so_long(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import resources.postgres

    monkeypatch.setattr(resources.postgres, "WRITE_WAIT_S", 0.3)
    one, two = _two_replicas(postgres_url)
    try:
        holding, release = threading.Event(), threading.Event()

        def stuck() -> None:
            with one._transaction():
                holding.set()
                release.wait(10)

        holder = threading.Thread(target=stuck)
        holder.start()
        assert holding.wait(10)
        with pytest.raises(LedgerError, match="nothing was written"):
            two.add([_new()])
        release.set()
        holder.join()
        assert two.add([_new()]) and two.counts()["requirements"]["total"] == 1
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("finish", ["release", "mark_failed"])
def test_a_projector_that_lost_its_claim_and_gives_up_queues_the_memory_again(open_ledger: Opener, finish: str) -> None:
    """Its vectors may have landed before the graph step deferred or failed: the memory must be
    projected once more after the other projector's write."""
    one, two = open_ledger(), open_ledger()
    (row,) = one.add([_new()])
    one.claim([row.id], lease_s=0)
    time.sleep(0.001)
    two.update(row.id, content="v2")
    fresh = two.claim([row.id])
    two.mark_projected(row.id, fresh[row.id])
    one.release([row.id]) if finish == "release" else one.mark_failed([row.id], "graph down")
    assert one.due_outbox() == [row.id] and one.get(row.id).sync_status == "pending"


def test_an_older_embedded_ledger_with_nul_characters_loads_into_postgres(tmp_path: Path, postgres_url: str) -> None:
    import sqlite3

    from resources.memory.ledger_postgres import PostgresLedgerStore

    old = Ledger(tmp_path / "old" / "memory.db")
    (row,) = old.add([_new("placeholder")])
    old.close()
    raw = sqlite3.connect(tmp_path / "old" / "memory.db")  # as a codemem before the NUL rule wrote it
    raw.execute("UPDATE memories SET content=?, metadata=? WHERE id=?", ("trace\x00tail", '{"note": "a\\u0000b"}', row.id))
    raw.commit()
    raw.close()
    store = PostgresLedgerStore(postgres_url, namespace="memory")
    assert store.load_from(tmp_path / "old" / "memory.db")
    ledger = Ledger(store=store)
    try:
        got = ledger.get(row.id)
        assert (got.content, got.metadata) == ("trace\ufffdtail", {"note": "a\ufffdb"})
    finally:
        ledger.close()


def test_a_projection_written_to_a_generation_swapped_meanwhile_is_queued_again(open_ledger: Opener) -> None:
    """Another replica's normalization swapped the collections while this write went to the old ones."""
    one, two = open_ledger(), open_ledger()
    (row,) = one.add([_new()])
    claimed = one.claim([row.id])
    two.set_meta("memory_generation", "1")
    one.mark_projected(row.id, claimed[row.id], meta=("memory_generation", "0"))
    assert one.due_outbox() == [row.id] and one.get(row.id).sync_status == "pending"
    one.mark_projected(row.id, one.claim([row.id])[row.id], meta=("memory_generation", "1"))
    assert one.due_outbox() == [] and one.get(row.id).sync_status == "synced"


def test_the_hooks_copy_is_made_anew_when_its_ledger_is_restored(open_ledger: Opener, tmp_path: Path) -> None:
    from resources.memory.ledger_copy import LedgerCopy

    ledger = open_ledger()
    (kept,) = ledger.add([_new("kept")])
    ledger.backup_to(tmp_path / "backup.db")
    copy = LedgerCopy(ledger, tmp_path / "copy" / "memory-server-copy.db")
    try:
        (later,) = ledger.add([_new("later")])
        copy.refresh()
        inode = (tmp_path / "copy" / "memory-server-copy.db").stat().st_ino
        assert set(copy._copy.get_many([kept.id, later.id])) == {kept.id, later.id}
        if ledger.path is not None:
            return  # (a SQLite ledger is restored by replacing its file: the server opens a new ledger)
        ledger.load_from(tmp_path / "backup.db")
        copy.refresh()
        assert set(copy._copy.get_many([kept.id, later.id])) == {kept.id}
        assert (tmp_path / "copy" / "memory-server-copy.db").stat().st_ino != inode  # the hooks' caches start again
    finally:
        copy.close()


def test_two_processes_following_one_hooks_copy_leave_it_equal_to_the_ledger(open_ledger: Opener, tmp_path: Path) -> None:
    """With every store shared there is no owner: two servers of one state dir both keep the hooks'
    copy. A follower that another one overtook between its read and its write reads on from where
    the other left (it neither fails on the audit's sequence nor writes an older memory back)."""
    import threading

    ledger = open_ledger()
    followers = [Ledger(tmp_path / "copy.db"), Ledger(tmp_path / "copy.db")]
    try:
        errors: list[BaseException] = []
        for round_ in range(15):
            (row,) = ledger.add([_new(f"memory {round_}")])
            ledger.update(row.id, content=f"memory {round_}, updated")
            start = threading.Barrier(2)

            def follow(copy: Ledger, start: threading.Barrier = start) -> None:
                try:
                    start.wait(5)
                    copy.follow(ledger, batch=1)
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=follow, args=(copy,)) for copy in followers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        assert errors == []
        assert followers[0].last_audit_seq() == ledger.last_audit_seq()
        expected = {r.id: (r.content, r.version) for r in ledger.iter_memories()}
        assert {r.id: (r.content, r.version) for r in followers[1].iter_memories()} == expected
    finally:
        for copy in followers:
            copy.close()


def test_two_processes_keeping_one_hooks_copy_follow_it_across_a_restore(postgres_url: str, tmp_path: Path) -> None:
    """Two servers of one state dir keep the hooks' copy; after a restore one makes it anew and
    renames it into place: the other follows the new file from then on (before: it stayed on the
    replaced one, and the hooks saw a copy that no longer moved)."""
    from resources.memory.ledger_copy import LedgerCopy
    from resources.memory.ledger_postgres import PostgresLedgerStore

    ledger = Ledger(store=PostgresLedgerStore(postgres_url, namespace="memory"))
    path = tmp_path / "memory-server-copy.db"
    one, two = LedgerCopy(ledger, path), LedgerCopy(ledger, path)
    try:
        (kept,) = ledger.add([_new("kept")])
        ledger.backup_to(tmp_path / "backup.db")
        one.refresh()
        two.refresh()
        ledger.add([_new("dropped by the restore")])
        ledger.load_from(tmp_path / "backup.db")  # a restore: the ledger's epoch changes
        one.refresh()  # makes the copy anew
        two.refresh()  # makes it anew too, renamed over the first one's
        (later,) = ledger.add([_new("after the restore")])
        one.refresh()  # its file was replaced: it follows the one in place now
        reader = Ledger(path)
        try:
            assert {r.id for r in reader.iter_memories()} == {kept.id, later.id}
            assert reader.last_audit_seq() == ledger.last_audit_seq()
        finally:
            reader.close()
        assert not list(tmp_path.glob(".memory-server-copy.db.*.new"))
    finally:
        one.close()
        two.close()
        ledger.close()

"""Access frequency in memory ranking (REQ-MEM-FN-024, issue 20 item 2): the reads that return
memories count an access, the counts reach the ledger in batches off the read path, and a
frequently used memory wins a near-tie without ever lifting an irrelevant one."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from query_server.memory.reads import ACCESS_SATURATION, access_frequency
from resources.memory import ledger_access
from resources.memory.ledger import Ledger, NewMemory
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryContextInput,
    MemoryGetInput,
    MemorySearchInput,
)

WEBHOOK_A = ("Webhook deliveries are retried with exponential backoff, at most five attempts, then parked in "
             "the dead-letter queue (billing team).")
WEBHOOK_B = ("Webhook deliveries are retried with exponential backoff, at most five attempts, then parked in "
             "the dead-letter queue (payments team).")
UNRELATED = "The admin dashboard uses a dark colour theme with teal accents and rounded card corners."
TANGENT = "Webhook endpoints are registered per tenant in the admin dashboard; each has a signing secret."
QUERY = "how are failed webhook deliveries retried"


@pytest.fixture
def svc(project: Path, service_factory):
    return service_factory(project)


def _add(svc, content: str, memory_type: str = "session") -> str:
    return svc.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content)).memory_id


def _stored_count(svc, memory_id: str) -> int:
    row = svc.memory.ledger.get(memory_id)
    assert row is not None
    return row.access_count


def _search(svc, query: str = QUERY, limit: int = 10) -> list[tuple[str, float]]:
    """(id, score) of the ranking, without counting accesses (what the tools would show)."""
    ranked, _ = svc.memory.reads.ranked(MemorySearchInput(query=query, limit=limit), limit)
    return [(row.id, score) for score, row in ranked]


def _use(svc, memory_id: str, times: int) -> None:
    for _ in range(times):
        svc.memory.memory_get(MemoryGetInput(memory_id=memory_id, memory_type="session"))
    assert svc.memory.ledger.flush_access()


def test_counted_reads_increment_access_count(svc) -> None:
    a, b = _add(svc, WEBHOOK_A), _add(svc, UNRELATED)
    assert _stored_count(svc, a) == 0
    # memory_get counts one access; the answer includes it before the ledger commits it
    got = svc.memory.memory_get(MemoryGetInput(memory_id=a, memory_type="session"))
    assert got.access_count == 1
    # memory_search counts each returned hit
    found = svc.memory.memory_search(MemorySearchInput(query=QUERY, limit=1))
    assert [h.id for h in found.results] == [a] and found.results[0].access_count == 2
    # memory_context counts each entry it returns
    context = svc.memory.memory_context(MemoryContextInput(topic="webhook retries dead-letter queue", limit=1))
    assert [e.id for g in context.groups for e in g.memories] == [a]
    assert svc.memory.ledger.flush_access()
    row = svc.memory.ledger.get(a)
    assert row is not None and row.access_count == 3 and row.last_accessed_at is not None
    assert _stored_count(svc, b) == 0  # not returned: not counted
    assert row.version == 1  # a statistic: no new version, nothing audited
    assert [e["operation"] for e in svc.memory.ledger.audit_of(a)] == ["create"]


def test_counts_are_committed_in_one_batch_after_a_delay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_access, "ACCESS_FLUSH_S", 0.05)
    ledger = Ledger(tmp_path / "memory.db")
    try:
        (row,) = ledger.add([NewMemory(memory_type="session", content="worked on the importer", metadata={})])
        writes: list[int] = []
        real = ledger._transaction

        @contextmanager
        def counted(**options: bool):
            writes.append(1)
            with real(**options) as conn:
                yield conn

        monkeypatch.setattr(ledger, "_transaction", counted)
        for _ in range(25):  # a burst of reads: one write
            ledger.record_access([row.id])
        assert ledger.get(row.id).access_count == 0 and ledger.pending_access([row.id])[row.id][0] == 25
        deadline = time.monotonic() + 5
        while ledger.get(row.id).access_count == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ledger.get(row.id).access_count == 25 and len(writes) == 1
        assert ledger.pending_access([row.id]) == {}
        ledger.record_access([row.id, row.id])
    finally:
        ledger.close()  # commits the tally left
    reopened = Ledger(tmp_path / "memory.db")
    try:
        assert reopened.get(row.id).access_count == 27
    finally:
        reopened.close()


def test_a_read_never_waits_for_the_ledger_lock(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "memory.db")
    try:
        (row,) = ledger.add([NewMemory(memory_type="session", content="worked on the exporter", metadata={})])
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with ledger._transaction():  # a long write (bulk import, normalization) holds the ledger
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(5)
        started = time.perf_counter()
        ledger.record_access([row.id])
        assert time.perf_counter() - started < 0.05
        release.set()
        holder.join()
        assert ledger.flush_access() and ledger.get(row.id).access_count == 1
    finally:
        ledger.close()


def test_frequently_used_memory_wins_a_near_tie(svc) -> None:
    a, b = _add(svc, WEBHOOK_A), _add(svc, WEBHOOK_B)
    _add(svc, UNRELATED)
    before = dict(_search(svc))
    assert abs(before[a] - before[b]) / max(before[a], before[b]) < 0.05  # equally relevant
    order = [i for i, _ in _search(svc) if i in (a, b)]
    used = order[1]  # the one that ranks second without use
    _use(svc, used, 20)
    after = _search(svc)
    assert after[0][0] == used
    boost = dict(after)[used] / before[used]
    assert 1.0 < boost <= 1.0 + svc.settings.memory_access_weight + 1e-9
    svc.settings.memory_access_weight = 0.0  # the setting turns it off: the order without use again
    assert [i for i, _ in _search(svc) if i in (a, b)] == order


def test_frequently_used_irrelevant_memory_does_not_outrank_a_relevant_one(svc) -> None:
    relevant = _add(svc, WEBHOOK_A)
    others = [_add(svc, UNRELATED), _add(svc, TANGENT)]  # off topic; on the topic but not the answer
    for other in others:
        _use(svc, other, 3 * ACCESS_SATURATION)  # used as much as counting can express
    ranking = _search(svc)
    assert ranking[0][0] == relevant
    scores = dict(ranking)
    assert svc.memory.ledger.get(relevant).access_count == 0
    for other in others:
        assert scores.get(other, 0.0) < scores[relevant] / 2


def test_a_failed_count_write_fails_no_read_and_loses_nothing(svc, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _add(svc, WEBHOOK_A)
    ledger = svc.memory.ledger

    @contextmanager
    def locked(**options: bool):
        raise sqlite3.OperationalError("database is locked")
        yield

    monkeypatch.setattr(ledger, "_transaction", locked)
    got = svc.memory.memory_get(MemoryGetInput(memory_id=a, memory_type="session"))
    found = svc.memory.memory_search(MemorySearchInput(query=QUERY))
    assert got.content == WEBHOOK_A and [h.id for h in found.results][:1] == [a]
    assert ledger.flush_access() is False  # the write failed: the counts are kept for a retry
    assert ledger._access_state().timer is not None  # ... by the timer, not only by the next read
    assert ledger.pending_access([a])[a][0] == 2
    assert svc.memory.memory_get(MemoryGetInput(memory_id=a, memory_type="session")).access_count == 3
    monkeypatch.undo()
    assert ledger.flush_access() is True
    row = ledger.get(a)
    assert row is not None and row.access_count == 3 and row.content == WEBHOOK_A and not row.deleted

    def broken(memory_ids):
        raise RuntimeError("tally unavailable")

    monkeypatch.setattr(ledger, "record_access", broken)  # even a counter that raises fails no read
    assert svc.memory.memory_get(MemoryGetInput(memory_id=a, memory_type="session")).content == WEBHOOK_A
    assert svc.memory.memory_search(MemorySearchInput(query=QUERY)).results[0].id == a


def test_access_frequency_is_bounded_log_scaled_and_decays() -> None:
    now = datetime.now(UTC)
    at = now.isoformat()
    values = [access_frequency(n, at, now.timestamp()) for n in (0, 1, 5, ACCESS_SATURATION, 10 * ACCESS_SATURATION)]
    assert values[0] == 0.0 and values == sorted(values) and values[-2] == values[-1] == 1.0
    month_ago = (now - timedelta(days=30)).isoformat()
    assert access_frequency(ACCESS_SATURATION, month_ago, now.timestamp()) == pytest.approx(0.5)

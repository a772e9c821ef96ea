"""The ledger's outbox: which memories still have to be projected into Qdrant and the graph.

A change commits its outbox row with it; the projector (``resources.memory.projection``) claims
due rows, projects them, and marks them done or failed (with exponential backoff).

A claim (``claim``) lets one projector at a time project a memory, whichever process or replica
it runs in: another projector skips a claimed row until the claim is released (``mark_projected``,
``mark_failed``) or its lease runs out (the claimer died). Without it, two replicas projecting one
memory could write an older version over a newer one and then mark the newer one done. A change
made during a projection keeps the claim and the row: the release makes it due again at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import now_iso

MAX_ATTEMPTS_BEFORE_FAILED = 5
"""Projection attempts after which a memory's sync_status reads ``failed`` (retries go on)."""
CLAIM_LEASE_S = 120.0
"""How long a projector's claim holds when it is neither released nor renewed (a dead claimer's
memories are projected by another this long after)."""


def _later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


class LedgerOutbox(LedgerConnection):
    """The projection queue of the ledger."""

    def due_outbox(self, limit: int = 256) -> list[str]:
        """Memory ids whose projection is due now (oldest first)."""
        at = now_iso()
        with self._reading() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT memory_id FROM outbox WHERE next_attempt_at <= ? AND (claimed_until IS NULL OR "
                    "claimed_until <= ?) ORDER BY enqueued_at LIMIT ?",
                    (at, at, limit),
                )
            ]

    def claim(self, memory_ids: Sequence[str], *, lease_s: float = CLAIM_LEASE_S) -> dict[str, str | None]:
        """Take the projection of ``memory_ids`` for ``lease_s`` seconds.

        Returns:
            Memory id → when its outbox row was queued (pass it to ``mark_projected``), or None when
            nothing is queued for it (any projector may write it: the ledger holds its latest).
            Ids another projector has claimed are left out: that projector writes them.
        """
        claimed: dict[str, str | None] = {}
        wanted = list(dict.fromkeys(memory_ids))
        at, until = now_iso(), _later(lease_s)
        with self._transaction(durable=False) as conn:  # a claim lost in a power cut only expires early
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                queued = {
                    r[0]: (r[1], r[2])
                    for r in conn.execute(
                        f"SELECT memory_id, enqueued_at, claimed_until FROM outbox WHERE memory_id IN ({marks})", chunk
                    )
                }
                free = [m for m in chunk if m in queued and (queued[m][1] is None or queued[m][1] <= at)]
                conn.executemany("UPDATE outbox SET claimed_until=? WHERE memory_id=?", [(until, m) for m in free])
                claimed.update({m: None for m in chunk if m not in queued})
                claimed.update({m: queued[m][0] for m in free})
        return {m: claimed[m] for m in wanted if m in claimed}

    def outbox_stats(self) -> dict[str, Any]:
        """Queue length, attempts and the last error (for statistics and /health)."""
        with self._reading() as conn:
            pending, max_attempts = conn.execute("SELECT count(*), max(attempts) FROM outbox").fetchone()
            error = conn.execute(
                "SELECT last_error FROM outbox WHERE last_error IS NOT NULL ORDER BY next_attempt_at DESC LIMIT 1"
            ).fetchone()
        return {"pending": pending, "max_attempts": max_attempts or 0, "last_error": error[0] if error else None}

    def release(self, memory_ids: Sequence[str]) -> None:
        """Give up the claims on ``memory_ids`` (not projected now: due again at their next attempt)."""
        with self._transaction(durable=False) as conn:
            conn.executemany("UPDATE outbox SET claimed_until=NULL WHERE memory_id=?", [(m,) for m in memory_ids])

    def mark_projected(self, memory_id: str, enqueued_at: str | None) -> None:
        """The projection of ``memory_id`` is current: drop its outbox row unless it was re-queued
        after ``enqueued_at`` (a newer change still has to be projected: its claim is released, so
        that it is due at once)."""
        with self._transaction() as conn:
            if enqueued_at is None:
                conn.execute("DELETE FROM outbox WHERE memory_id=?", (memory_id,))
            else:
                conn.execute("DELETE FROM outbox WHERE memory_id=? AND enqueued_at=?", (memory_id, enqueued_at))
            still = conn.execute("SELECT 1 FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
            if still:
                conn.execute("UPDATE outbox SET claimed_until=NULL WHERE memory_id=?", (memory_id,))
            else:
                conn.execute("UPDATE memories SET sync_status='synced' WHERE id=?", (memory_id,))

    def outbox_entry(self, memory_id: str) -> str | None:
        """When the memory's pending projection was queued (None when nothing is pending)."""
        with self._reading() as conn:
            row = conn.execute("SELECT enqueued_at FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
        return row[0] if row else None

    def mark_failed(self, memory_ids: Sequence[str], error: str) -> None:
        """A projection attempt failed: back off exponentially (2 s doubling, capped at 5 min)."""
        with self._transaction() as conn:
            for memory_id in memory_ids:
                row = conn.execute("SELECT attempts FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
                if row is None:
                    continue
                attempts = int(row[0]) + 1
                delay = min(300.0, 2.0 * 2 ** (attempts - 1))
                due = _later(delay)
                conn.execute(
                    "UPDATE outbox SET attempts=?, next_attempt_at=?, last_error=?, claimed_until=NULL WHERE memory_id=?",
                    (attempts, due, error[:2000], memory_id),
                )
                status = "failed" if attempts >= MAX_ATTEMPTS_BEFORE_FAILED else "pending"
                conn.execute("UPDATE memories SET sync_status=? WHERE id=?", (status, memory_id))

    def enqueue_all(self) -> int:
        """Queue every memory for projection (rebuilding the projections from the ledger)."""
        at = now_iso()
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO outbox(memory_id, enqueued_at, attempts, next_attempt_at) "
                "SELECT id, ?, 0, ? FROM memories WHERE TRUE "
                "ON CONFLICT(memory_id) DO UPDATE SET attempts=0, next_attempt_at=excluded.next_attempt_at",
                (at, at),
            )
            conn.execute("UPDATE memories SET sync_status='pending'")
            return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def requeue(self, memory_ids: Sequence[str]) -> None:
        """Queue memories for projection again (a store lost their last projection: a restarted
        graph server, ``resources.memory.graph_replay``); an id no longer in the ledger is queued
        too, and its projection removed."""
        at = now_iso()
        with self._transaction() as conn:
            for memory_id in memory_ids:
                self._enqueue(conn, memory_id, at)

    def retry_now(self) -> None:
        """Make every queued projection due now (a store came back)."""
        with self._transaction() as conn:
            conn.execute("UPDATE outbox SET next_attempt_at=?", (now_iso(),))

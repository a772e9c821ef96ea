"""The ledger's outbox: which memories still have to be projected into Qdrant and the graph.

A change commits its outbox row with it; the projector (``resources.memory.projection``) claims
due rows, projects them, and marks them done or failed (with exponential backoff).

A claim (``claim``) lets one projector at a time project a memory, whichever process or replica
it runs in: another projector skips a claimed row until the claim is released (``mark_projected``,
``mark_failed``, ``release``: each only the claims of its own ledger object) or its lease runs out
(the claimer died). Without it, two replicas projecting one memory could write an older version
over a newer one and then mark the newer one done. A change made during a projection keeps the
claim and the row: the release makes it due again at once. A projector that finishes after losing
its claim (a lease run out) queues the memory again instead of marking it done, so a late, older
write is always followed by a fresh one. Leases are read on each process's clock: one running far
ahead only takes claims early (duplicate work, never a stale projection left as done).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import now_iso
from resources.sqlite import read_meta

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
        """Memory ids whose projection is due now (oldest first), but those another process's
        projector claimed (this process's own claims are its projector's, which serializes its
        projections: a caller waits for the one under way, as before claims)."""
        at = now_iso()
        with self._reading() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT memory_id FROM outbox WHERE next_attempt_at <= ? AND (claimed_until IS NULL OR "
                    "claimed_until <= ? OR claimed_by = ?) ORDER BY enqueued_at LIMIT ?",
                    (at, at, self._claimer, limit),
                )
            ]

    def claim(self, memory_ids: Sequence[str], *, lease_s: float = CLAIM_LEASE_S) -> dict[str, str]:
        """Take the projection of ``memory_ids`` for ``lease_s`` seconds, as this ledger object's
        projector.

        Returns:
            Memory id → when its outbox row was queued (pass it to ``mark_projected``). Left out: ids
            another projector holds (that projector writes them) and ids with nothing queued (their
            projection was written after their last change: by another projector, or by this one's
            other thread). This object's own claims are taken again (its projector serializes its
            projections).
        """
        claimed: dict[str, str] = {}
        wanted = list(dict.fromkeys(memory_ids))
        at, until = now_iso(), _later(lease_s)
        with self._transaction(durable=False) as conn:  # a claim lost in a power cut only expires early
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                queued = {
                    r[0]: (r[1], r[2], r[3])
                    for r in conn.execute(
                        f"SELECT memory_id, enqueued_at, claimed_until, claimed_by FROM outbox WHERE memory_id IN ({marks})",
                        chunk,
                    )
                }
                free = [
                    m for m in chunk
                    if m in queued and (queued[m][1] is None or queued[m][1] <= at or queued[m][2] == self._claimer)
                ]
                conn.executemany(
                    "UPDATE outbox SET claimed_until=?, claimed_by=? WHERE memory_id=?",
                    [(until, self._claimer, m) for m in free],
                )
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
        """Give up this projector's claims on ``memory_ids`` (not projected now: due again at their
        next attempt). A claim already lost (its lease ran out, another projector took the memory)
        queues the memory again: a part of this projector's write may have landed after the other's."""
        at = now_iso()
        with self._transaction() as conn:
            for memory_id in memory_ids:
                if not self._requeue_if_lost(conn, memory_id, at):
                    self._release_claim(conn, memory_id)

    def _release_claim(self, conn: Any, memory_id: str) -> None:
        """Clear this projector's claim on ``memory_id`` (another projector's stays)."""
        conn.execute(
            "UPDATE outbox SET claimed_until=NULL, claimed_by=NULL WHERE memory_id=? AND claimed_by=?",
            (memory_id, self._claimer),
        )

    def _requeue_if_lost(self, conn: Any, memory_id: str, at: str) -> bool:
        """Whether this projector's claim on ``memory_id`` was lost; then the memory is queued again
        (a fresh ``enqueued_at``: its current holder's completion does not count as the last write)."""
        row = conn.execute("SELECT claimed_by FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
        if row is not None and row[0] in (self._claimer, None):
            return False
        self._requeue(conn, memory_id, at)
        return True

    @staticmethod
    def _requeue(conn: Any, memory_id: str, at: str) -> None:
        """Queue ``memory_id`` again with a fresh ``enqueued_at``, leaving any claim as it is."""
        conn.execute(
            "INSERT INTO outbox(memory_id, enqueued_at, attempts, next_attempt_at) VALUES (?,?,0,?) "
            "ON CONFLICT(memory_id) DO UPDATE SET enqueued_at=excluded.enqueued_at",
            (memory_id, at, at),
        )
        conn.execute("UPDATE memories SET sync_status='pending' WHERE id=?", (memory_id,))

    def mark_projected(self, memory_id: str, enqueued_at: str | None, *, meta: tuple[str, str] | None = None) -> None:
        """The projection of ``memory_id`` was written from the row read after claiming it
        (``enqueued_at``: what ``claim`` returned).

        * Still this projector's claim, nothing queued since: the outbox row goes, the memory reads
          ``synced``.
        * Re-queued after ``enqueued_at`` (a change during the projection): the row stays, its claim
          released, so that it is due at once.
        * The claim was lost (its lease ran out and another projector took the memory, which may
          have written a newer version before this write landed): queued again now, so that the
          last write is a fresh one.
        * ``meta`` (key, value) no longer holds (another replica swapped the collections' generation
          while this write went to the old one): queued again now.

        ``enqueued_at=None`` (no claim taken): the row goes whatever it holds (maintenance only).
        """
        at = now_iso()
        with self._transaction() as conn:
            if enqueued_at is None:
                conn.execute("DELETE FROM outbox WHERE memory_id=?", (memory_id,))
                conn.execute("UPDATE memories SET sync_status='synced' WHERE id=?", (memory_id,))
                return
            if meta is not None and (read_meta(conn, meta[0]) or "0") != meta[1]:
                self._requeue(conn, memory_id, at)
                return
            if self._requeue_if_lost(conn, memory_id, at):
                return  # whoever holds the memory now must not take this write for current
            queued = conn.execute("SELECT enqueued_at FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()[0]
            if queued == enqueued_at:
                conn.execute("DELETE FROM outbox WHERE memory_id=?", (memory_id,))
                conn.execute("UPDATE memories SET sync_status='synced' WHERE id=?", (memory_id,))
            else:
                self._release_claim(conn, memory_id)

    def outbox_entry(self, memory_id: str) -> str | None:
        """When the memory's pending projection was queued (None when nothing is pending)."""
        with self._reading() as conn:
            row = conn.execute("SELECT enqueued_at FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
        return row[0] if row else None

    def mark_failed(self, memory_ids: Sequence[str], error: str) -> None:
        """A projection attempt failed: back off exponentially (2 s doubling, capped at 5 min). A
        claim already lost queues the memory again instead (``release``)."""
        at = now_iso()
        with self._transaction() as conn:
            for memory_id in memory_ids:
                if self._requeue_if_lost(conn, memory_id, at):
                    continue
                row = conn.execute("SELECT attempts FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
                if row is None:
                    continue
                attempts = int(row[0]) + 1
                delay = min(300.0, 2.0 * 2 ** (attempts - 1))
                due = _later(delay)
                conn.execute(
                    "UPDATE outbox SET attempts=?, next_attempt_at=?, last_error=? WHERE memory_id=?",
                    (attempts, due, error[:2000], memory_id),
                )
                self._release_claim(conn, memory_id)
                status = "failed" if attempts >= MAX_ATTEMPTS_BEFORE_FAILED else "pending"
                conn.execute("UPDATE memories SET sync_status=? WHERE id=?", (status, memory_id))

    def enqueue_all(self) -> int:
        """Queue every memory for projection (rebuilding the projections from the ledger)."""
        at = now_iso()
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO outbox(memory_id, enqueued_at, attempts, next_attempt_at) "
                "SELECT id, ?, 0, ? FROM memories WHERE TRUE "
                "ON CONFLICT(memory_id) DO UPDATE SET enqueued_at=excluded.enqueued_at, attempts=0, "
                "next_attempt_at=excluded.next_attempt_at, last_error=NULL",
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

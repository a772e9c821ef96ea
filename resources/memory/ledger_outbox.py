"""The ledger's outbox: which memories still have to be projected into Qdrant and the graph.

A change commits its outbox row with it; the projector (``resources.memory.projection``) takes
due rows, projects them, and marks them done or failed (with exponential backoff).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import now_iso

MAX_ATTEMPTS_BEFORE_FAILED = 5
"""Projection attempts after which a memory's sync_status reads ``failed`` (retries go on)."""


class LedgerOutbox(LedgerConnection):
    """The projection queue of the ledger."""

    def due_outbox(self, limit: int = 256) -> list[str]:
        """Memory ids whose projection is due now (oldest first)."""
        with self._lock:
            return [
                r[0]
                for r in self._conn.execute(
                    "SELECT memory_id FROM outbox WHERE next_attempt_at <= ? ORDER BY enqueued_at LIMIT ?",
                    (now_iso(), limit),
                )
            ]

    def outbox_stats(self) -> dict[str, Any]:
        """Queue length, attempts and the last error (for statistics and /health)."""
        with self._lock:
            pending, max_attempts = self._conn.execute("SELECT count(*), max(attempts) FROM outbox").fetchone()
            error = self._conn.execute(
                "SELECT last_error FROM outbox WHERE last_error IS NOT NULL ORDER BY next_attempt_at DESC LIMIT 1"
            ).fetchone()
        return {"pending": pending, "max_attempts": max_attempts or 0, "last_error": error[0] if error else None}

    def mark_projected(self, memory_id: str, enqueued_at: str | None) -> None:
        """The projection of ``memory_id`` is current: drop its outbox row unless it was re-queued
        after ``enqueued_at`` (a newer change still has to be projected)."""
        with self._transaction() as conn:
            if enqueued_at is None:
                conn.execute("DELETE FROM outbox WHERE memory_id=?", (memory_id,))
            else:
                conn.execute("DELETE FROM outbox WHERE memory_id=? AND enqueued_at=?", (memory_id, enqueued_at))
            still = conn.execute("SELECT 1 FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
            if not still:
                conn.execute("UPDATE memories SET sync_status='synced' WHERE id=?", (memory_id,))

    def outbox_entry(self, memory_id: str) -> str | None:
        """When the memory's pending projection was queued (None when nothing is pending)."""
        with self._lock:
            row = self._conn.execute("SELECT enqueued_at FROM outbox WHERE memory_id=?", (memory_id,)).fetchone()
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
                due = (datetime.now(UTC) + timedelta(seconds=delay)).isoformat(timespec="microseconds")
                conn.execute(
                    "UPDATE outbox SET attempts=?, next_attempt_at=?, last_error=? WHERE memory_id=?",
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
                "SELECT id, ?, 0, ? FROM memories WHERE 1 "
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

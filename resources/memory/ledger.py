"""The memory ledger: the system of record for project memories.

A SQLite file in WAL mode (embedded mode) or a PostgreSQL schema (server mode,
``resources.memory.ledger_postgres``) holds every memory row (with a version), an append-only
audit of every change (operation, previous value, new value, time, request id), the memories'
relationships and an outbox of projection work. Qdrant and the graph are projections written after the
ledger commits; a crash between the two loses nothing, because the outbox row committed with
the change says what is still to project (see ``resources.memory.projection``).

Every write is one transaction, alone among the ledger's writers (``BEGIN IMMEDIATE``; in
PostgreSQL an advisory lock): it either happens whole (row, audit and outbox together) or not at
all, whichever process or replica makes it.

``Ledger`` is one class assembled by job: the connection and transaction
(``ledger_connection``, over ``ledger_sqlite`` or ``ledger_postgres``), reads (``ledger_queries``), the outbox (``ledger_outbox``), bulk rewrites
(``ledger_bulk``), access counts (``ledger_access``: deferred and batched) and, here, the writes
of single memories. The schema, rows and errors are in ``ledger_model``; they are importable from
here too, as the ledger's public names.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from resources.faults import fault_point
from resources.memory.ledger_access import LedgerAccess
from resources.memory.ledger_bulk import LedgerBulkWrites
from resources.memory.ledger_model import (
    COLUMNS,
    RETENTION_DAYS,
    SCHEMA_VERSION,
    LedgerError,
    LedgerReplaced,
    MemoryNotFound,
    MemoryRow,
    Merge,
    NewMemory,
    Relationship,
    VersionConflict,
    content_hash,
    now_iso,
    without_nul,
)
from resources.memory.ledger_outbox import MAX_ATTEMPTS_BEFORE_FAILED, LedgerOutbox
from resources.memory.ledger_queries import LedgerQueries

__all__ = [
    "MAX_ATTEMPTS_BEFORE_FAILED", "RETENTION_DAYS", "SCHEMA_VERSION", "Ledger", "LedgerError", "LedgerReplaced",
    "MemoryNotFound", "MemoryRow", "Merge", "NewMemory", "Relationship", "VersionConflict", "content_hash", "now_iso",
]


class Ledger(LedgerQueries, LedgerOutbox, LedgerBulkWrites, LedgerAccess):
    """The memory ledger of one project or scope (thread-safe): ``Ledger(path)`` for its SQLite file,
    ``Ledger(store=PostgresLedgerStore(url, namespace=...))`` for a PostgreSQL schema."""

    def add(self, memories: Sequence[NewMemory], *, request_id: str | None = None) -> list[MemoryRow]:
        """Create memories in one transaction (all or nothing).

        Args:
            memories: The memories to create (ids are UUIDv4 unless given).
            request_id: Recorded in the audit; a repeated request id returns the memories it
                created instead of creating them twice (safe client retries).

        Returns:
            The created rows, in order.
        """
        memories = [
            replace(memory, content=without_nul(memory.content), metadata=without_nul(memory.metadata))
            for memory in memories
        ]
        with self._transaction() as conn:
            if request_id is not None:
                earlier = [
                    row[0]
                    for row in conn.execute(
                        "SELECT memory_id FROM audit WHERE request_id=? AND operation='create' ORDER BY seq", (request_id,)
                    )
                ]
                if earlier:
                    return [row for row in (self._fetch(conn, memory_id) for memory_id in earlier) if row is not None]
            created: list[MemoryRow] = []
            for memory in memories:
                at = now_iso()
                created_at = memory.created_at or at
                updated_at = memory.updated_at or created_at
                conn.execute(
                    f"INSERT INTO memories({COLUMNS}) VALUES (?,?,?,?,?,?,0,NULL,1,?,?,0,NULL,'pending')",
                    (
                        memory.id,
                        memory.memory_type,
                        memory.content,
                        json.dumps(memory.metadata),
                        content_hash(memory.content),
                        memory.importance_score,
                        created_at,
                        updated_at,
                    ),
                )
                for rel in memory.relationships:
                    self._put_relationship(conn, memory.id, rel, at)
                row = self._fetch(conn, memory.id)
                assert row is not None
                self._audit(conn, memory.id, "create", None, row.snapshot(), at, request_id)
                self._enqueue(conn, memory.id, at)
                created.append(row)
                if len(created) == 2:
                    fault_point("ledger_add:mid_transaction")
            return created

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance_score: float | None = None,
        relationships: Sequence[Relationship] | None = None,
        expected_version: int | None = None,
        expected_updated_at: str | None = None,
        request_id: str | None = None,
        operation: str = "update",
    ) -> tuple[MemoryRow, bool]:
        """Change a memory (optimistic concurrency on version or updated_at).

        Args:
            memory_id: The memory.
            content: New content (None keeps it).
            metadata: The complete new metadata (None keeps it).
            importance_score: New importance (None keeps it).
            relationships: Relationships to add (existing ones are kept).
            expected_version: Refuse unless the memory is at this version.
            expected_updated_at: Refuse unless the memory's updated_at is this.
            request_id: Recorded in the audit.
            operation: The audit operation name (``update``, ``merge``, ``restore``...).

        Returns:
            The row after the change and whether anything changed.

        Raises:
            MemoryNotFound: no such memory.
            VersionConflict: the memory moved on since the caller read it.
        """
        content, metadata = without_nul(content), without_nul(metadata)
        with self._transaction() as conn:
            row = self._fetch(conn, memory_id)
            if row is None:
                raise MemoryNotFound(memory_id)
            if (expected_version is not None and row.version != expected_version) or (
                expected_updated_at is not None and row.updated_at != expected_updated_at
            ):
                raise VersionConflict(memory_id, row.version, row.updated_at)
            new_content = row.content if content is None else content
            new_metadata = row.metadata if metadata is None else metadata
            new_importance = row.importance_score if importance_score is None else importance_score
            rels = list(relationships or [])
            if (new_content, new_metadata, new_importance) == (row.content, row.metadata, row.importance_score) and not rels:
                return row, False
            at = now_iso()
            conn.execute(
                "UPDATE memories SET content=?, metadata=?, content_hash=?, importance_score=?, version=version+1, "
                "updated_at=? WHERE id=?",
                (new_content, json.dumps(new_metadata), content_hash(new_content), new_importance, at, memory_id),
            )
            for rel in rels:
                self._put_relationship(conn, memory_id, rel, at)
            after = self._fetch(conn, memory_id)
            assert after is not None
            self._audit(conn, memory_id, operation, row.snapshot(), after.snapshot(), at, request_id)
            self._enqueue(conn, memory_id, at)
            return after, True

    def soft_delete(self, memory_id: str, *, request_id: str | None = None) -> MemoryRow:
        """Flag a memory deleted (kept ``RETENTION_DAYS`` days, restorable until cleanup)."""
        with self._transaction() as conn:
            row = self._fetch(conn, memory_id)
            if row is None:
                raise MemoryNotFound(memory_id)
            if row.deleted:
                return row
            at = now_iso()
            conn.execute(
                "UPDATE memories SET deleted=1, deleted_at=?, version=version+1, updated_at=? WHERE id=?",
                (at, at, memory_id),
            )
            after = self._fetch(conn, memory_id)
            assert after is not None
            self._audit(conn, memory_id, "soft_delete", row.snapshot(), after.snapshot(), at, request_id)
            self._enqueue(conn, memory_id, at)
            return after

    def restore(self, memory_id: str, *, request_id: str | None = None) -> MemoryRow:
        """Undo a soft delete."""
        with self._transaction() as conn:
            row = self._fetch(conn, memory_id)
            if row is None:
                raise MemoryNotFound(memory_id)
            if not row.deleted:
                return row
            at = now_iso()
            conn.execute(
                "UPDATE memories SET deleted=0, deleted_at=NULL, version=version+1, updated_at=? WHERE id=?",
                (at, memory_id),
            )
            after = self._fetch(conn, memory_id)
            assert after is not None
            self._audit(conn, memory_id, "restore", row.snapshot(), after.snapshot(), at, request_id)
            self._enqueue(conn, memory_id, at)
            return after

    def hard_delete(self, memory_ids: Iterable[str], *, request_id: str | None = None, operation: str = "hard_delete") -> int:
        """Remove memories and their relationships for good (the audit keeps their last value)."""
        removed = 0
        with self._transaction() as conn:
            for memory_id in memory_ids:
                row = self._fetch(conn, memory_id)
                if row is None:
                    continue
                at = now_iso()
                conn.execute("DELETE FROM memories WHERE id=?", (memory_id,))
                conn.execute("DELETE FROM relationships WHERE source_id=? OR target_id=?", (memory_id, memory_id))
                self._audit(conn, memory_id, operation, row.snapshot(), None, at, request_id)
                self._enqueue(conn, memory_id, at)
                removed += 1
        return removed

    def set_anchor_state(self, states: Sequence[tuple[str, str, str, str | None]]) -> None:
        """Record each anchor's check: (memory id, qualified name, anchored hash, current hash or None
        when the symbol is gone). Anchors of those memories not listed are dropped."""
        at = now_iso()
        with self._transaction() as conn:
            for memory_id in {s[0] for s in states}:
                conn.execute("DELETE FROM anchor_state WHERE memory_id=?", (memory_id,))
            conn.executemany(
                "INSERT INTO anchor_state(memory_id, qualified_name, anchored_hash, current_hash, stale, checked_at) "
                "VALUES (?,?,?,?,?,?)",
                [(m, q, a, c, int(c != a), at) for m, q, a, c in states],
            )

    def clear_anchor_state(self, memory_ids: Sequence[str]) -> None:
        """Forget the anchor checks of memories (re-anchored, or no longer anchored)."""
        with self._transaction() as conn:
            conn.executemany("DELETE FROM anchor_state WHERE memory_id=?", [(m,) for m in memory_ids])

"""The ledger's reads: memories by id, type, content or metadata, their relationships and audit,
counts, and what changed since a point (for replicas and the anchor checks)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import (
    COLUMNS,
    RETENTION_DAYS,
    LedgerError,
    MemoryRow,
    Relationship,
    row_of,
    type_conditions,
)

_METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LedgerQueries(LedgerConnection):
    """Reads of the ledger (each under the connection's lock)."""

    def get(self, memory_id: str) -> MemoryRow | None:
        """One memory (deleted ones included), or None."""
        with self._reading() as conn:
            return self._fetch(conn, memory_id)

    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRow]:
        """Memories by id (missing ids are absent)."""
        found: dict[str, MemoryRow] = {}
        ids = list(dict.fromkeys(memory_ids))
        with self._reading() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for values in conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id IN ({marks})", chunk):
                    row = row_of(values, self.scope)
                    found[row.id] = row
        return found

    def iter_memories(
        self, *, memory_types: Sequence[str] | None = None, include_deleted: bool = True, batch: int = 1000
    ) -> Iterator[MemoryRow]:
        """Every memory, oldest first, read in batches (for exports, rebuilds, normalization)."""
        where, params = type_conditions(memory_types, include_deleted)
        last = ("", "")
        while True:
            with self._reading() as conn:
                rows = [
                    row_of(values, self.scope)
                    for values in conn.execute(
                        f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)} AND (created_at, id) > (?, ?) "
                        "ORDER BY created_at, id LIMIT ?",
                        [*params, *last, batch],
                    )
                ]
            if not rows:
                return
            yield from rows
            last = (rows[-1].created_at, rows[-1].id)

    def recent(
        self, *, memory_types: Sequence[str] | None = None, include_deleted: bool = False, offset: int = 0, limit: int = 20
    ) -> list[MemoryRow]:
        """Memories, most recently updated first."""
        where, params = type_conditions(memory_types, include_deleted)
        with self._reading() as conn:
            return [
                row_of(values, self.scope)
                for values in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)} ORDER BY updated_at DESC, id "
                    "LIMIT ? OFFSET ?",
                    [*params, limit, offset],
                )
            ]

    def find_by_hash(self, memory_type: str, digest: str) -> list[MemoryRow]:
        """Live memories of a type with exactly this content."""
        with self._reading() as conn:
            return [
                row_of(values, self.scope)
                for values in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE memory_type=? AND content_hash=? AND deleted=0",
                    (memory_type, digest),
                )
            ]

    def find_by_metadata(self, memory_type: str, key: str, value: Any) -> list[MemoryRow]:
        """Live memories of a type whose metadata ``key`` equals ``value`` (``requirement_id`` and
        ``key`` are indexed); None matches nothing (an absent key and a JSON null alike)."""
        if not _METADATA_KEY.match(key):
            raise LedgerError(f"metadata key {key!r} must be a plain identifier")
        if value is None:
            return []
        with self._reading() as conn:
            return [
                row_of(values, self.scope)
                for values in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE memory_type=? AND {self._store.metadata_equals(key)} "
                    "AND deleted=0",
                    (memory_type, self._store.metadata_parameter(value)),
                )
            ]

    def relationships_of(self, memory_id: str) -> tuple[list[Relationship], list[Relationship]]:
        """The memory's outgoing relationships and those other memories point at it with."""
        with self._reading() as conn:
            return self._relationships_where(conn, "source_id", memory_id), self._relationships_where(
                conn, "target_id", memory_id
            )

    @staticmethod
    def _relationships_where(conn: Any, column: str, memory_id: str) -> list[Relationship]:
        return [
            Relationship(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5])
            for r in conn.execute(
                "SELECT source_id, rel_type, target_id, target_kind, properties, created_at FROM relationships "
                f"WHERE {column}=? ORDER BY created_at",  # column: source_id or target_id, never user text
                (memory_id,),
            )
        ]

    def relationships_touching(self, ids: Sequence[str]) -> list[Relationship]:
        """Relationships whose source or target is one of ``ids`` (memories or code entities a
        memory links to), for walks over the memory graph; each one once."""
        found: dict[tuple[str, str, str], Relationship] = {}
        wanted = list(dict.fromkeys(ids))
        with self._reading() as conn:
            for start in range(0, len(wanted), 400):
                chunk = wanted[start : start + 400]
                marks = ",".join("?" * len(chunk))
                for r in conn.execute(
                    "SELECT source_id, rel_type, target_id, target_kind, properties, created_at FROM relationships "
                    f"WHERE source_id IN ({marks}) UNION SELECT source_id, rel_type, target_id, target_kind, properties, "
                    f"created_at FROM relationships WHERE target_id IN ({marks})",
                    (*chunk, *chunk),
                ):
                    found.setdefault((r[0], r[1], r[2]), Relationship(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]))
        return [found[key] for key in sorted(found)]

    def audit_of(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's audit trail, oldest first."""
        with self._reading() as conn:
            return [
                {
                    "seq": r[0],
                    "operation": r[1],
                    "previous": json.loads(r[2]) if r[2] else None,
                    "current": json.loads(r[3]) if r[3] else None,
                    "at": r[4],
                    "request_id": r[5],
                }
                for r in conn.execute(
                    "SELECT seq, operation, previous, current, at, request_id FROM audit WHERE memory_id=? ORDER BY seq",
                    (memory_id,),
                )
            ]

    def replayed(self, request_id: str, memory_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """What the call with idempotency key ``request_id`` last did to ``memory_id``: its audit
        operation and the memory as it left it (None after a hard delete); None when it did nothing.

        A retried call (its owner died before answering) returns this first outcome instead of
        changing the memory again."""
        with self._reading() as conn:
            found = conn.execute(
                "SELECT operation, current FROM audit WHERE request_id=? AND memory_id=? ORDER BY seq DESC LIMIT 1",
                (request_id, memory_id),
            ).fetchone()
        if found is None:
            return None
        return found[0], json.loads(found[1]) if found[1] else None

    def unlinked_by(self, request_id: str) -> int:
        """How many relationships the write with ``request_id`` removed as orphaned (its ``unlink``
        audit entries: what ``restore_links`` can put back)."""
        with self._reading() as conn:
            return int(conn.execute(
                "SELECT count(*) FROM audit WHERE request_id=? AND operation='unlink'", (request_id,)
            ).fetchone()[0])

    def memory_types(self, types: Sequence[str], *, include_deleted: bool = False) -> set[str]:
        """Those of ``types`` this ledger holds memories of (live ones only unless
        ``include_deleted``): one index seek each, whatever the ledger's size."""
        where = "" if include_deleted else " AND deleted=0"
        query = f"SELECT 1 FROM memories WHERE memory_type=?{where} LIMIT 1"
        with self._reading() as conn:
            return {str(t) for t in types if conn.execute(query, (str(t),)).fetchone() is not None}

    def counts(self) -> dict[str, dict[str, int]]:
        """total/active/deleted per memory type."""
        result: dict[str, dict[str, int]] = {}
        with self._reading() as conn:
            for memory_type, total, deleted in conn.execute(
                "SELECT memory_type, count(*), CAST(coalesce(sum(deleted), 0) AS INTEGER) FROM memories GROUP BY memory_type"
            ):
                result[memory_type] = {"total": total, "active": total - (deleted or 0), "deleted": deleted or 0}
        return result

    def all_relationships(self) -> list[Relationship]:
        """Every relationship memories declare (for health checks)."""
        with self._reading() as conn:
            return [
                Relationship(source, rel_type, target, kind, json.loads(props), at)
                for source, rel_type, target, kind, props, at in conn.execute(
                    "SELECT source_id, rel_type, target_id, target_kind, properties, created_at FROM relationships"
                )
            ]

    def duplicate_groups(self, limit: int = 100) -> list[tuple[str, list[str]]]:
        """Live memories of one type with identical content: (type, ids), largest groups first."""
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT memory_type, {self._store.comma_joined('id')} FROM memories WHERE deleted=0 "
                "GROUP BY memory_type, content_hash "
                "HAVING count(*) > 1 ORDER BY count(*) DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [(memory_type, ids.split(",")) for memory_type, ids in rows]

    def sync_counts(self) -> dict[str, int]:
        """How many memories are synced, pending or failed."""
        result = {"synced": 0, "pending": 0, "failed": 0}
        with self._reading() as conn:
            for status, n in conn.execute("SELECT sync_status, count(*) FROM memories GROUP BY sync_status"):
                result[status] = n
        return result

    def expired_deletions(self, *, older_than_days: int = RETENTION_DAYS) -> list[str]:
        """Ids of soft-deleted memories past their retention."""
        cutoff = (datetime.now(UTC) - timedelta(days=older_than_days)).isoformat(timespec="microseconds")
        with self._reading() as conn:
            return [r[0] for r in conn.execute("SELECT id FROM memories WHERE deleted=1 AND deleted_at < ?", (cutoff,))]

    def anchored_memories(self) -> list[MemoryRow]:
        """Live memories that carry code anchors (``metadata.anchors``)."""
        with self._reading() as conn:
            return [
                row_of(values, self.scope)
                for values in conn.execute(
                    f"SELECT {COLUMNS} FROM memories WHERE deleted=0 AND {self._store.metadata_text('anchors')} IS NOT NULL"
                )
            ]

    def stale_anchors(self, memory_ids: Sequence[str] | None = None) -> dict[str, list[dict[str, Any]]]:
        """Memory id → its anchors whose code changed or vanished since it was anchored."""
        sql = "SELECT memory_id, qualified_name, anchored_hash, current_hash, checked_at FROM anchor_state WHERE stale=1"
        params: list[Any] = []
        if memory_ids is not None:
            if not memory_ids:
                return {}
            sql += f" AND memory_id IN ({','.join('?' * len(memory_ids))})"
            params = list(memory_ids)
        found: dict[str, list[dict[str, Any]]] = {}
        with self._reading() as conn:
            for memory_id, name, anchored, current, at in conn.execute(sql, params):
                found.setdefault(memory_id, []).append(
                    {"qualified_name": name, "anchored_hash": anchored, "current_hash": current, "checked_at": at}
                )
        return found

    def changed_since(self, at: str) -> set[str]:
        """Ids of memories with an audited change at or after ``at``."""
        with self._reading() as conn:
            return {r[0] for r in conn.execute("SELECT DISTINCT memory_id FROM audit WHERE at >= ?", (at,))}

    def last_audit_seq(self) -> int:
        """The sequence number of the latest audit entry (0 when none): it grows with every change
        of a memory, whichever process made it (what a replica compares to know it is behind)."""
        with self._reading() as conn:
            return int(conn.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])

    def audit_after(self, seq: int, limit: int = 10_000) -> list[tuple[int, str, dict[str, Any] | None]]:
        """(seq, memory id, the memory before the change) of the audit entries after ``seq``, oldest
        first: what a follower of the ledger (the git notes sync) has still to apply."""
        with self._reading() as conn:
            return [
                (int(r[0]), r[1], json.loads(r[2]) if r[2] else None)
                for r in conn.execute(
                    "SELECT seq, memory_id, previous FROM audit WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
                )
            ]

    def audited_since(self, seq: int) -> set[str]:
        """Ids of memories with an audit entry after ``seq``."""
        with self._reading() as conn:
            return {r[0] for r in conn.execute("SELECT DISTINCT memory_id FROM audit WHERE seq > ?", (seq,))}

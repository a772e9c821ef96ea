"""The memory ledger: the system of record for project memories.

SQLite in WAL mode holds every memory row (with a version), an append-only audit of every
change (operation, previous value, new value, time, request id), the memories' relationships
and an outbox of projection work. Qdrant and the graph are projections written after the
ledger commits; a crash between the two loses nothing, because the outbox row committed with
the change says what is still to project (see ``resources.memory.projection``).

Every write is one ``BEGIN IMMEDIATE`` transaction: it either happens whole (row, audit and
outbox together) or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from resources.faults import fault_point
from resources.private_files import make_private_file
from resources.sqlite import immediate_transaction, open_database, read_meta, write_meta

SCHEMA_VERSION = 1
RETENTION_DAYS = 30
"""Soft-deleted memories are kept this long before cleanup may hard-delete them."""
MAX_ATTEMPTS_BEFORE_FAILED = 5
"""Projection attempts after which a memory's sync_status reads ``failed`` (retries go on)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    memory_type TEXT NOT NULL,
    content TEXT NOT NULL,
    metadata TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    importance_score REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at TEXT,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    deleted_at TEXT,
    sync_status TEXT NOT NULL DEFAULT 'pending'
);
CREATE INDEX IF NOT EXISTS memories_type ON memories(memory_type, deleted);
CREATE INDEX IF NOT EXISTS memories_updated ON memories(updated_at);
CREATE INDEX IF NOT EXISTS memories_hash ON memories(memory_type, content_hash);
CREATE INDEX IF NOT EXISTS memories_requirement_id ON memories(memory_type, json_extract(metadata, '$.requirement_id'));
CREATE INDEX IF NOT EXISTS memories_preference_key ON memories(memory_type, json_extract(metadata, '$.key'));
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    previous TEXT,
    current TEXT,
    at TEXT NOT NULL,
    request_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_memory ON audit(memory_id);
CREATE INDEX IF NOT EXISTS audit_request ON audit(request_id);
CREATE TABLE IF NOT EXISTS relationships (
    source_id TEXT NOT NULL,
    rel_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    properties TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, rel_type, target_id)
);
CREATE INDEX IF NOT EXISTS relationships_target ON relationships(target_id);
CREATE TABLE IF NOT EXISTS outbox (
    memory_id TEXT PRIMARY KEY,
    enqueued_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS anchor_state (
    memory_id TEXT NOT NULL,
    qualified_name TEXT NOT NULL,
    anchored_hash TEXT NOT NULL,
    current_hash TEXT,
    stale INTEGER NOT NULL DEFAULT 0,
    checked_at TEXT NOT NULL,
    PRIMARY KEY (memory_id, qualified_name)
);
CREATE INDEX IF NOT EXISTS anchor_state_stale ON anchor_state(stale);
CREATE INDEX IF NOT EXISTS memories_origin ON memories(memory_type, json_extract(metadata, '$.origin'));
"""

_COLUMNS = (
    "id, memory_type, content, metadata, content_hash, importance_score, access_count, last_accessed_at, "
    "version, created_at, updated_at, deleted, deleted_at, sync_status"
)


_METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds (ordering-safe)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def content_hash(content: str) -> str:
    """SHA-256 of a memory's content (what decides whether its embedding must be refreshed)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class LedgerError(Exception):
    """A ledger operation that cannot be done; the message says why and what to do."""


class LedgerReplaced(LedgerError):
    """The ledger file was replaced or deleted under the open connection; writes are refused."""


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``; None when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


class MemoryNotFound(LedgerError):
    """No memory with that id (and type)."""


class VersionConflict(LedgerError):
    """Optimistic concurrency: the memory changed since the caller read it."""

    def __init__(self, memory_id: str, current_version: int, current_updated_at: str) -> None:
        """Record the memory's current version for the caller to re-read."""
        self.current_version = current_version
        self.current_updated_at = current_updated_at
        super().__init__(
            f"memory {memory_id} was changed by someone else: it is now at version {current_version} "
            f"(updated_at {current_updated_at}) — read it again with memory_get, merge your change and "
            f"retry with expected_version={current_version}"
        )


@dataclass
class MemoryRow:
    """One memory as the ledger holds it."""

    id: str
    memory_type: str
    content: str
    metadata: dict[str, Any]
    content_hash: str
    importance_score: float
    access_count: int
    last_accessed_at: str | None
    version: int
    created_at: str
    updated_at: str
    deleted: bool
    deleted_at: str | None
    sync_status: str
    scope: str = "project"
    """The memory scope whose ledger holds the row (``project``, ``local`` or ``global``); not a
    column: each scope has its own ledger file."""

    def snapshot(self) -> dict[str, Any]:
        """The row as JSON-ready dict (what the audit and exports record)."""
        return {
            "id": self.id,
            "memory_type": self.memory_type,
            "content": self.content,
            "metadata": self.metadata,
            "importance_score": self.importance_score,
            "version": self.version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deleted": self.deleted,
            "deleted_at": self.deleted_at,
        }


@dataclass
class Relationship:
    """A relationship a memory declares (source is always the memory)."""

    source_id: str
    rel_type: str
    target_id: str
    target_kind: str
    properties: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""


@dataclass
class NewMemory:
    """What a caller hands the ledger to create one memory."""

    memory_type: str
    content: str
    metadata: dict[str, Any]
    importance_score: float = 0.5
    relationships: list[Relationship] = field(default_factory=list)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: str | None = None
    updated_at: str | None = None


@dataclass
class Merge:
    """Duplicates to fold into one keeper (normalization)."""

    keeper_id: str
    dropped_ids: list[str]
    metadata: dict[str, Any]
    similarity: float = 1.0


def _row(values: Sequence[Any], scope: str = "project") -> MemoryRow:
    return MemoryRow(
        id=values[0],
        memory_type=values[1],
        content=values[2],
        metadata=json.loads(values[3]),
        content_hash=values[4],
        importance_score=float(values[5]),
        access_count=int(values[6]),
        last_accessed_at=values[7],
        version=int(values[8]),
        created_at=values[9],
        updated_at=values[10],
        deleted=bool(values[11]),
        deleted_at=values[12],
        sync_status=values[13],
        scope=scope,
    )


def _scope(memory_types: Sequence[str] | None, include_deleted: bool) -> tuple[list[str], list[Any]]:
    """WHERE conditions and parameters for a type list and the deleted flag."""
    where = ["1=1"]
    params: list[Any] = []
    if memory_types:
        where.append(f"memory_type IN ({','.join('?' * len(memory_types))})")
        params.extend(memory_types)
    if not include_deleted:
        where.append("deleted=0")
    return where, params


class Ledger:
    """The SQLite memory ledger of one project (thread-safe; one connection, serialized)."""

    def __init__(self, path: Path, *, scope: str = "project") -> None:
        """Open (creating if needed) the ledger at ``path``; its rows say they belong to ``scope``
        (``project``; ``local`` and ``global`` scopes are ledgers of their own, see
        ``resources.memory.scopes``)."""
        self.path = path
        self.scope = scope
        wal = path.with_name(path.name + "-wal")
        if path.exists() and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            # SQLite would read it as a new, empty ledger: every memory would vanish without a word
            raise LedgerError(f"{path} is empty (truncated?) — run `codemem repair`: it restores the latest "
                              "`codemem backup` or keeps the file aside")
        self._conn = open_database(path, synchronous="FULL", foreign_keys=True)
        self._identity = _file_identity(path)
        self._lock = threading.RLock()
        with self._lock:
            self._conn.executescript(_SCHEMA)
            self._conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    # -- transactions ----------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, refused before it starts and unacknowledged after it commits
        when the ledger file on disk is no longer the one this connection writes."""
        with self._lock:
            self._check_identity()
            with immediate_transaction(self._conn, self._lock) as conn:
                yield conn
            self._check_identity()

    def _check_identity(self) -> None:
        """Raise ``LedgerReplaced`` when the file at ``self.path`` was replaced or removed: SQLite would
        go on writing into the open, deleted file, and every write after it would be lost."""
        if _file_identity(self.path) != self._identity:
            raise LedgerReplaced(
                f"the memory ledger {self.path} was replaced or removed while codemem had it open — this write "
                "is not acknowledged and writes are refused until codemem restarts; restart the MCP server or "
                "`codemem serve` (then `codemem repair` checks the file)"
            )

    @staticmethod
    def _audit(
        conn: sqlite3.Connection,
        memory_id: str,
        operation: str,
        previous: dict[str, Any] | None,
        current: dict[str, Any] | None,
        at: str,
        request_id: str | None,
    ) -> None:
        conn.execute(
            "INSERT INTO audit(memory_id, operation, previous, current, at, request_id) VALUES (?,?,?,?,?,?)",
            (
                memory_id,
                operation,
                json.dumps(previous) if previous is not None else None,
                json.dumps(current) if current is not None else None,
                at,
                request_id,
            ),
        )

    @staticmethod
    def _enqueue(conn: sqlite3.Connection, memory_id: str, at: str) -> None:
        conn.execute(
            "INSERT INTO outbox(memory_id, enqueued_at, attempts, next_attempt_at) VALUES (?,?,0,?) "
            "ON CONFLICT(memory_id) DO UPDATE SET enqueued_at=excluded.enqueued_at, attempts=0, "
            "next_attempt_at=excluded.next_attempt_at, last_error=NULL",
            (memory_id, at, at),
        )
        conn.execute("UPDATE memories SET sync_status='pending' WHERE id=?", (memory_id,))

    def _fetch(self, conn: sqlite3.Connection, memory_id: str) -> MemoryRow | None:
        values = conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id=?", (memory_id,)).fetchone()
        return _row(values, self.scope) if values else None

    # -- writes ----------------------------------------------------------------------------
    def add(self, memories: Sequence[NewMemory], *, request_id: str | None = None) -> list[MemoryRow]:
        """Create memories in one transaction (all or nothing).

        Args:
            memories: The memories to create (ids are UUIDv4 unless given).
            request_id: Recorded in the audit; a repeated request id returns the memories it
                created instead of creating them twice (safe client retries).

        Returns:
            The created rows, in order.
        """
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
                    f"INSERT INTO memories({_COLUMNS}) VALUES (?,?,?,?,?,?,0,NULL,1,?,?,0,NULL,'pending')",
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

    @staticmethod
    def _put_relationship(conn: sqlite3.Connection, source_id: str, rel: Relationship, at: str) -> None:
        conn.execute(
            "INSERT INTO relationships(source_id, rel_type, target_id, target_kind, properties, created_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(source_id, rel_type, target_id) DO UPDATE SET "
            "properties=excluded.properties, target_kind=excluded.target_kind",
            (source_id, rel.rel_type, rel.target_id, rel.target_kind, json.dumps(rel.properties), rel.created_at or at),
        )

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

    def record_access(self, memory_ids: Sequence[str]) -> None:
        """Count a retrieval of each memory (access_count, last_accessed_at; not audited)."""
        if not memory_ids:
            return
        at = now_iso()
        with self._lock:
            # A usage statistic, not a memory: committed without waiting for the disk (WAL keeps
            # it consistent; a power cut may lose the last few counts, never a memory).
            self._conn.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._transaction() as conn:
                    conn.executemany(
                        "UPDATE memories SET access_count=access_count+1, last_accessed_at=? WHERE id=?",
                        [(at, memory_id) for memory_id in memory_ids],
                    )
            finally:
                self._conn.execute("PRAGMA synchronous=FULL")

    # -- reads -----------------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryRow | None:
        """One memory (deleted ones included), or None."""
        with self._lock:
            return self._fetch(self._conn, memory_id)

    def get_many(self, memory_ids: Sequence[str]) -> dict[str, MemoryRow]:
        """Memories by id (missing ids are absent)."""
        found: dict[str, MemoryRow] = {}
        ids = list(dict.fromkeys(memory_ids))
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for values in self._conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id IN ({marks})", chunk):
                    row = _row(values, self.scope)
                    found[row.id] = row
        return found

    def iter_memories(
        self, *, memory_types: Sequence[str] | None = None, include_deleted: bool = True, batch: int = 1000
    ) -> Iterator[MemoryRow]:
        """Every memory, oldest first, read in batches (for exports, rebuilds, normalization)."""
        where, params = _scope(memory_types, include_deleted)
        last = ("", "")
        while True:
            with self._lock:
                rows = [
                    _row(values, self.scope)
                    for values in self._conn.execute(
                        f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)} AND (created_at, id) > (?, ?) "
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
        where, params = _scope(memory_types, include_deleted)
        with self._lock:
            return [
                _row(values, self.scope)
                for values in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)} ORDER BY updated_at DESC, id "
                    "LIMIT ? OFFSET ?",
                    [*params, limit, offset],
                )
            ]

    def find_by_hash(self, memory_type: str, digest: str) -> list[MemoryRow]:
        """Live memories of a type with exactly this content."""
        with self._lock:
            return [
                _row(values, self.scope)
                for values in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE memory_type=? AND content_hash=? AND deleted=0",
                    (memory_type, digest),
                )
            ]

    def find_by_metadata(self, memory_type: str, key: str, value: Any) -> list[MemoryRow]:
        """Live memories of a type whose metadata ``key`` equals ``value`` (``requirement_id`` and
        ``key`` are indexed)."""
        if not _METADATA_KEY.match(key):
            raise LedgerError(f"metadata key {key!r} must be a plain identifier")
        with self._lock:
            return [
                _row(values, self.scope)
                for values in self._conn.execute(
                    # the literal JSON path lets SQLite use the expression indexes
                    f"SELECT {_COLUMNS} FROM memories WHERE memory_type=? AND json_extract(metadata, '$.{key}') = ? "
                    "AND deleted=0",
                    (memory_type, value if not isinstance(value, (dict, list)) else json.dumps(value)),
                )
            ]

    def relationships_of(self, memory_id: str) -> tuple[list[Relationship], list[Relationship]]:
        """The memory's outgoing relationships and those other memories point at it with."""
        with self._lock:
            return self._relationships_where("source_id", memory_id), self._relationships_where("target_id", memory_id)

    def _relationships_where(self, column: str, memory_id: str) -> list[Relationship]:
        return [
            Relationship(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5])
            for r in self._conn.execute(
                "SELECT source_id, rel_type, target_id, target_kind, properties, created_at FROM relationships "
                f"WHERE {column}=? ORDER BY created_at",  # column: source_id or target_id, never user text
                (memory_id,),
            )
        ]

    def audit_of(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's audit trail, oldest first."""
        with self._lock:
            return [
                {
                    "seq": r[0],
                    "operation": r[1],
                    "previous": json.loads(r[2]) if r[2] else None,
                    "current": json.loads(r[3]) if r[3] else None,
                    "at": r[4],
                    "request_id": r[5],
                }
                for r in self._conn.execute(
                    "SELECT seq, operation, previous, current, at, request_id FROM audit WHERE memory_id=? ORDER BY seq",
                    (memory_id,),
                )
            ]

    def replayed(self, request_id: str, memory_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """What the call with idempotency key ``request_id`` last did to ``memory_id``: its audit
        operation and the memory as it left it (None after a hard delete); None when it did nothing.

        A retried call (its owner died before answering) returns this first outcome instead of
        changing the memory again."""
        with self._lock:
            found = self._conn.execute(
                "SELECT operation, current FROM audit WHERE request_id=? AND memory_id=? ORDER BY seq DESC LIMIT 1",
                (request_id, memory_id),
            ).fetchone()
        if found is None:
            return None
        return found[0], json.loads(found[1]) if found[1] else None

    def counts(self) -> dict[str, dict[str, int]]:
        """total/active/deleted per memory type."""
        result: dict[str, dict[str, int]] = {}
        with self._lock:
            for memory_type, total, deleted in self._conn.execute(
                "SELECT memory_type, count(*), sum(deleted) FROM memories GROUP BY memory_type"
            ):
                result[memory_type] = {"total": total, "active": total - (deleted or 0), "deleted": deleted or 0}
        return result

    def all_relationships(self) -> list[Relationship]:
        """Every relationship memories declare (for health checks)."""
        with self._lock:
            return [
                Relationship(source, rel_type, target, kind, json.loads(props), at)
                for source, rel_type, target, kind, props, at in self._conn.execute(
                    "SELECT source_id, rel_type, target_id, target_kind, properties, created_at FROM relationships"
                )
            ]

    def duplicate_groups(self, limit: int = 100) -> list[tuple[str, list[str]]]:
        """Live memories of one type with identical content: (type, ids), largest groups first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT memory_type, group_concat(id) FROM memories WHERE deleted=0 GROUP BY memory_type, content_hash "
                "HAVING count(*) > 1 ORDER BY count(*) DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [(memory_type, ids.split(",")) for memory_type, ids in rows]

    def sync_counts(self) -> dict[str, int]:
        """How many memories are synced, pending or failed."""
        result = {"synced": 0, "pending": 0, "failed": 0}
        with self._lock:
            for status, n in self._conn.execute("SELECT sync_status, count(*) FROM memories GROUP BY sync_status"):
                result[status] = n
        return result

    def expired_deletions(self, *, older_than_days: int = RETENTION_DAYS) -> list[str]:
        """Ids of soft-deleted memories past their retention."""
        cutoff = (datetime.now(UTC) - timedelta(days=older_than_days)).isoformat(timespec="microseconds")
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT id FROM memories WHERE deleted=1 AND deleted_at < ?", (cutoff,))]

    # -- outbox ----------------------------------------------------------------------------
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

    def retry_now(self) -> None:
        """Make every queued projection due now (a store came back)."""
        with self._transaction() as conn:
            conn.execute("UPDATE outbox SET next_attempt_at=?", (now_iso(),))

    def meta(self, key: str) -> str | None:
        """A ledger-level setting (e.g. the embedding model the projections were built with)."""
        with self._lock:
            return read_meta(self._conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Record a ledger-level setting."""
        with self._transaction() as conn:
            write_meta(conn, key, value)

    def anchored_memories(self) -> list[MemoryRow]:
        """Live memories that carry code anchors (``metadata.anchors``)."""
        with self._lock:
            return [
                _row(values, self.scope)
                for values in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM memories WHERE deleted=0 AND json_extract(metadata, '$.anchors') IS NOT NULL"
                )
            ]

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
        with self._lock:
            for memory_id, name, anchored, current, at in self._conn.execute(sql, params):
                found.setdefault(memory_id, []).append(
                    {"qualified_name": name, "anchored_hash": anchored, "current_hash": current, "checked_at": at}
                )
        return found

    def changed_since(self, at: str) -> set[str]:
        """Ids of memories with an audited change at or after ``at``."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT DISTINCT memory_id FROM audit WHERE at >= ?", (at,))}

    def last_audit_seq(self) -> int:
        """The sequence number of the latest audit entry (0 when none): it grows with every change
        of a memory, whichever process made it (what a replica compares to know it is behind)."""
        with self._lock:
            return int(self._conn.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()[0])

    def audited_since(self, seq: int) -> set[str]:
        """Ids of memories with an audit entry after ``seq``."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT DISTINCT memory_id FROM audit WHERE seq > ?", (seq,))}

    def replicate(
        self, rows: Sequence[MemoryRow], relationships: dict[str, Sequence[Relationship]], gone: Sequence[str]
    ) -> int:
        """Make this ledger a replica of another's rows, in one transaction: ``rows`` are stored as
        they are (same id, version and times; their outgoing relationships replaced by
        ``relationships[id]``), ``gone`` ids are removed, and every one is queued for projection.
        Not audited: a replica is derived data (the source ledger keeps the audit).

        Returns:
            How many memories were queued.
        """
        with self._transaction() as conn:
            at = now_iso()
            for row in rows:
                conn.execute(
                    f"INSERT OR REPLACE INTO memories({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,'pending')",
                    (
                        row.id, row.memory_type, row.content, json.dumps(row.metadata), row.content_hash,
                        row.importance_score, row.access_count, row.last_accessed_at, row.version, row.created_at,
                        row.updated_at, int(row.deleted), row.deleted_at,
                    ),
                )
                conn.execute("DELETE FROM relationships WHERE source_id=?", (row.id,))
                for rel in relationships.get(row.id, ()):
                    self._put_relationship(conn, row.id, rel, at)
                self._enqueue(conn, row.id, at)
            for memory_id in gone:
                conn.execute("DELETE FROM memories WHERE id=?", (memory_id,))
                conn.execute("DELETE FROM relationships WHERE source_id=?", (memory_id,))
                self._enqueue(conn, memory_id, at)
            return len(rows) + len(gone)

    def apply_normalization(
        self,
        merges: Sequence[Merge],
        cleanup_ids: Sequence[str],
        *,
        meta: dict[str, str],
        requeue: Iterable[str] = (),
        request_id: str | None = None,
    ) -> dict[str, int]:
        """Apply a normalization in ONE transaction: merge duplicates into their keepers
        (metadata merged, relationships re-pointed, the others soft-deleted as ``merged_into``),
        hard-delete expired soft-deletes, set ``meta`` (the new projection generation) and queue
        every touched memory for projection. A crash anywhere leaves the ledger as it was.

        Returns:
            Counts of merged, cleaned and queued memories.
        """
        merged = cleaned = 0
        with self._transaction() as conn:
            at = now_iso()
            touched: set[str] = set(requeue)
            for merge in merges:
                keeper = self._fetch(conn, merge.keeper_id)
                if keeper is None or keeper.deleted:
                    continue
                dropped = [r for r in (self._fetch(conn, d) for d in merge.dropped_ids) if r is not None and not r.deleted]
                if not dropped:
                    continue
                conn.execute(
                    "UPDATE memories SET metadata=?, importance_score=?, access_count=access_count+?, "
                    "version=version+1, updated_at=? WHERE id=?",
                    (
                        json.dumps(merge.metadata),
                        max([keeper.importance_score, *(r.importance_score for r in dropped)]),
                        sum(r.access_count for r in dropped),
                        at,
                        keeper.id,
                    ),
                )
                after = self._fetch(conn, keeper.id)
                assert after is not None
                current = {**after.snapshot(), "merged_from": [r.id for r in dropped]}
                self._audit(conn, keeper.id, "merge", keeper.snapshot(), current, at, request_id)
                for row in dropped:
                    for column in ("source_id", "target_id"):
                        conn.execute(
                            f"UPDATE OR IGNORE relationships SET {column}=? WHERE {column}=?", (keeper.id, row.id)
                        )
                    conn.execute("DELETE FROM relationships WHERE source_id=? OR target_id=?", (row.id, row.id))
                    conn.execute("DELETE FROM relationships WHERE source_id=target_id")
                    conn.execute(
                        "UPDATE memories SET deleted=1, deleted_at=?, version=version+1, updated_at=? WHERE id=?",
                        (at, at, row.id),
                    )
                    gone = self._fetch(conn, row.id)
                    assert gone is not None
                    self._audit(
                        conn, row.id, "merged_into", row.snapshot(), {**gone.snapshot(), "merged_into": keeper.id}, at,
                        request_id,
                    )
                    touched.add(row.id)
                    merged += 1
                touched.add(keeper.id)
            for memory_id in cleanup_ids:
                row = self._fetch(conn, memory_id)
                if row is None or not row.deleted:
                    continue
                conn.execute("DELETE FROM memories WHERE id=?", (memory_id,))
                conn.execute("DELETE FROM relationships WHERE source_id=? OR target_id=?", (memory_id, memory_id))
                self._audit(conn, memory_id, "cleanup", row.snapshot(), None, at, request_id)
                touched.add(memory_id)
                cleaned += 1
            for key, value in meta.items():
                write_meta(conn, key, value)
            for memory_id in touched:
                self._enqueue(conn, memory_id, at)
        return {"merged": merged, "cleaned": cleaned, "queued": len(touched)}

    def backup_to(self, target: Path) -> None:
        """A consistent online copy of the ledger (SQLite backup API), readable by its owner only."""
        dest = sqlite3.connect(str(make_private_file(target)))
        try:
            with self._lock:
                self._conn.backup(dest)
        finally:
            dest.close()

    def close(self) -> None:
        """Close the connection (a WAL checkpoint folds the log into the database)."""
        with self._lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()

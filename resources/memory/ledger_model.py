"""The memory ledger's data model: its SQLite schema (PostgreSQL's is ``ledger_postgres.SCHEMA``),
the rows it holds and the errors it raises.

``resources.memory.ledger`` writes these tables; ``resources.memory.ledger_reader`` reads them
for the hooks. The rows are plain dataclasses, shared by every part of the ledger.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SCHEMA_VERSION = 1
RETENTION_DAYS = 30
"""Soft-deleted memories are kept this long before cleanup may hard-delete them."""

SHARED_SCHEMA = (
    "CREATE INDEX IF NOT EXISTS audit_memory ON audit(memory_id)",
    "CREATE INDEX IF NOT EXISTS audit_request ON audit(request_id)",
    """CREATE TABLE IF NOT EXISTS relationships (
    source_id TEXT NOT NULL,
    rel_type TEXT NOT NULL,
    target_id TEXT NOT NULL,
    target_kind TEXT NOT NULL,
    properties TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (source_id, rel_type, target_id)
)""",
    "CREATE INDEX IF NOT EXISTS relationships_target ON relationships(target_id)",
    """CREATE TABLE IF NOT EXISTS outbox (
    memory_id TEXT PRIMARY KEY,
    enqueued_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    last_error TEXT,
    claimed_until TEXT,
    claimed_by TEXT
)""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS anchor_state (
    memory_id TEXT NOT NULL,
    qualified_name TEXT NOT NULL,
    anchored_hash TEXT NOT NULL,
    current_hash TEXT,
    stale INTEGER NOT NULL DEFAULT 0,
    checked_at TEXT NOT NULL,
    PRIMARY KEY (memory_id, qualified_name)
)""",
    "CREATE INDEX IF NOT EXISTS anchor_state_stale ON anchor_state(stale)",
)
"""The tables and indexes SQLite and PostgreSQL declare alike (after ``memories`` and ``audit``,
whose types and expression indexes differ)."""

SCHEMA = """
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
CREATE INDEX IF NOT EXISTS memories_origin ON memories(memory_type, json_extract(metadata, '$.origin'));
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    previous TEXT,
    current TEXT,
    at TEXT NOT NULL,
    request_id TEXT
);
""" + ";\n".join(SHARED_SCHEMA) + ";\n"
"""The ledger's SQLite schema (PostgreSQL's: ``ledger_postgres.SCHEMA``)."""

COLUMNS = (
    "id, memory_type, content, metadata, content_hash, importance_score, access_count, last_accessed_at, "
    "version, created_at, updated_at, deleted, deleted_at, sync_status"
)
"""The ``memories`` columns in the order ``row_of`` reads them."""
AUDIT_COLUMNS = "seq, memory_id, operation, previous, current, at, request_id"
RELATIONSHIP_COLUMNS = "source_id, rel_type, target_id, target_kind, properties, created_at"
ANCHOR_COLUMNS = "memory_id, qualified_name, anchored_hash, current_hash, stale, checked_at"
TABLES = (
    ("memories", COLUMNS),
    ("audit", AUDIT_COLUMNS),
    ("relationships", RELATIONSHIP_COLUMNS),
    ("outbox", "memory_id, enqueued_at, attempts, next_attempt_at, last_error, claimed_until, claimed_by"),
    ("meta", "key, value"),
    ("anchor_state", ANCHOR_COLUMNS),
)
"""Every table of the ledger and its columns (what a backup, a load and a copy move)."""


def placeholders(columns: str) -> str:
    """``?,?,…``: one parameter for each of ``columns`` (a comma-separated list)."""
    return ",".join("?" * len(columns.split(",")))


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


def without_nul(value: Any) -> Any:
    """``value`` with every NUL character (``\\x00``) in its strings replaced by U+FFFD, the
    replacement character: PostgreSQL's text and JSON cannot hold one, and both modes keep the same
    memories (a NUL is never meaningful text; refusing would lose captured memories)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value


def row_of(values: Sequence[Any], scope: str = "project") -> MemoryRow:
    """A ``memories`` row (its columns in ``COLUMNS`` order) as the ``MemoryRow`` of ``scope``."""
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


def type_conditions(memory_types: Sequence[str] | None, include_deleted: bool) -> tuple[list[str], list[Any]]:
    """WHERE conditions and parameters for a type list and the deleted flag."""
    where = ["1=1"]
    params: list[Any] = []
    if memory_types:
        where.append(f"memory_type IN ({','.join('?' * len(memory_types))})")
        params.extend(memory_types)
    if not include_deleted:
        where.append("deleted=0")
    return where, params

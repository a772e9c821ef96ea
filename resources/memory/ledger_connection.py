"""The ledger's connection: opening the file, one write transaction, and the row-level steps every
write shares (the audit entry, the outbox entry, a relationship, a row read).

Every write is one ``BEGIN IMMEDIATE`` transaction, refused (``LedgerReplaced``) when the file on
disk is no longer the one the connection writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from resources.memory.ledger_model import (
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    LedgerError,
    LedgerReplaced,
    MemoryRow,
    Relationship,
    row_of,
)
from resources.private_files import make_private_file
from resources.sqlite import immediate_transaction, open_database, read_meta, write_meta


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``; None when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


class LedgerConnection:
    """One ledger file's connection, serialized by a lock (the base of ``Ledger``)."""

    def __init__(self, path: Path, *, scope: str = "project", shared: bool = False) -> None:
        """Open (creating if needed) the ledger at ``path``; its rows say they belong to ``scope``
        (``project``; the other scopes are ledgers of their own, see ``resources.memory.scopes``).
        ``shared``: a ledger in a directory other users write (``resources.sqlite.open_database``)."""
        self.path = path
        self.scope = scope
        wal = path.with_name(path.name + "-wal")
        if path.exists() and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            # SQLite would read it as a new, empty ledger: every memory would vanish without a word
            raise LedgerError(f"{path} is empty (truncated?) — run `codemem repair`: it restores the latest "
                              "`codemem backup` or keeps the file aside")
        self._conn = open_database(path, synchronous="FULL", foreign_keys=True, shared=shared)
        self._identity = _file_identity(path)
        self._lock = threading.RLock()
        with self._lock:
            self._conn.executescript(SCHEMA)
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
        values = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id=?", (memory_id,)).fetchone()
        return row_of(values, self.scope) if values else None

    @staticmethod
    def _put_relationship(conn: sqlite3.Connection, source_id: str, rel: Relationship, at: str) -> None:
        conn.execute(
            "INSERT INTO relationships(source_id, rel_type, target_id, target_kind, properties, created_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(source_id, rel_type, target_id) DO UPDATE SET "
            "properties=excluded.properties, target_kind=excluded.target_kind",
            (source_id, rel.rel_type, rel.target_id, rel.target_kind, json.dumps(rel.properties), rel.created_at or at),
        )

    def meta(self, key: str) -> str | None:
        """A ledger-level setting (e.g. the embedding model the projections were built with)."""
        with self._lock:
            return read_meta(self._conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Record a ledger-level setting."""
        with self._transaction() as conn:
            write_meta(conn, key, value)

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

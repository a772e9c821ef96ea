"""The ledger's connection: where its rows live (a SQLite file, or a PostgreSQL schema in server
mode), one write transaction, and the row-level steps every write shares (the audit entry, the
outbox entry, a relationship, a row read).

The ledger's SQL is written once, in the subset SQLite and PostgreSQL share (``?`` parameters);
the few fragments that differ come from the store (``self._store.metadata_equals`` ...).
"""

from __future__ import annotations

import json
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from resources.memory.ledger_model import COLUMNS, MemoryRow, Relationship, row_of
from resources.sqlite import read_meta, write_meta


class LedgerStore(Protocol):
    """Where a ledger's rows live: ``SqliteLedgerStore`` or ``PostgresLedgerStore``."""

    path: Path | None
    location: str
    integrity_errors: tuple[type[Exception], ...]

    def reading(self) -> AbstractContextManager[Any]: ...
    def writing(self, *, durable: bool = True) -> AbstractContextManager[Any]: ...
    def metadata_text(self, key: str) -> str: ...
    def metadata_equals(self, key: str) -> str: ...
    def metadata_parameter(self, value: object) -> object: ...
    def later_of(self, a: str, b: str) -> str: ...
    def comma_joined(self, column: str) -> str: ...
    def backup_to(self, target: Path) -> None: ...
    def load_from(self, source: Path, *, only_if_empty: bool = False) -> bool: ...
    def keep_alone(self) -> None: ...
    def alone(self, what: str, *, wait: bool = True) -> AbstractContextManager[None]: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


class LedgerConnection:
    """One ledger's store and the steps its writes share (the base of ``Ledger``).

    Args:
        path: The SQLite ledger file (embedded mode); or ``store``, an open store (server mode:
            ``PostgresLedgerStore``).
        scope: The memory scope its rows belong to (``project``; the other scopes are ledgers of
            their own, see ``resources.memory.scopes``).
        shared: A SQLite ledger in a directory other users write (``resources.sqlite.open_database``).
    """

    def __init__(
        self, path: Path | None = None, *, scope: str = "project", shared: bool = False, store: LedgerStore | None = None
    ) -> None:
        if store is None:
            if path is None:
                raise TypeError("a ledger needs its SQLite file or an open store")
            from resources.memory.ledger_sqlite import SqliteLedgerStore

            store = SqliteLedgerStore(path, shared=shared)
        self._store = store
        self.path = store.path
        """The SQLite file; None for a ledger in PostgreSQL (``location`` names both)."""
        self.location = store.location
        self.scope = scope
        self.integrity_errors = store.integrity_errors
        """What a write that breaks a key (a duplicate id) raises."""
        self._claimer = uuid.uuid4().hex
        """Whose projection claims this object takes (``LedgerOutbox.claim``)."""

    # -- transactions ----------------------------------------------------------------------
    def _transaction(self, *, durable: bool = True) -> AbstractContextManager[Any]:
        """One write transaction (all or nothing), alone among the ledger's writers."""
        return self._store.writing(durable=durable)

    def _reading(self) -> AbstractContextManager[Any]:
        """A connection for reads."""
        return self._store.reading()

    @staticmethod
    def _audit(
        conn: Any,
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
    def _enqueue(conn: Any, memory_id: str, at: str) -> None:
        conn.execute(
            "INSERT INTO outbox(memory_id, enqueued_at, attempts, next_attempt_at) VALUES (?,?,0,?) "
            "ON CONFLICT(memory_id) DO UPDATE SET enqueued_at=excluded.enqueued_at, attempts=0, "
            "next_attempt_at=excluded.next_attempt_at, last_error=NULL",
            (memory_id, at, at),
        )
        conn.execute("UPDATE memories SET sync_status='pending' WHERE id=?", (memory_id,))

    def _fetch(self, conn: Any, memory_id: str) -> MemoryRow | None:
        values = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id=?", (memory_id,)).fetchone()
        return row_of(values, self.scope) if values else None

    @staticmethod
    def _put_relationship(conn: Any, source_id: str, rel: Relationship, at: str) -> None:
        conn.execute(
            "INSERT INTO relationships(source_id, rel_type, target_id, target_kind, properties, created_at) "
            "VALUES (?,?,?,?,?,?) ON CONFLICT(source_id, rel_type, target_id) DO UPDATE SET "
            "properties=excluded.properties, target_kind=excluded.target_kind",
            (source_id, rel.rel_type, rel.target_id, rel.target_kind, json.dumps(rel.properties), rel.created_at or at),
        )

    def meta(self, key: str) -> str | None:
        """A ledger-level setting (e.g. the embedding model the projections were built with)."""
        with self._reading() as conn:
            return read_meta(conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Record a ledger-level setting."""
        with self._transaction() as conn:
            write_meta(conn, key, value)

    def keep_alone(self) -> None:
        """Server mode with embedded projections: check this process still serves the project alone
        (``PostgresLedgerStore.keep_alone``); nothing to check for a SQLite ledger (its owner lock)."""
        self._store.keep_alone()

    def alone(self, what: str, *, wait: bool = True) -> AbstractContextManager[None]:
        """A context manager: the only process doing ``what`` with this ledger meanwhile (in server
        mode, where replicas share it; a SQLite ledger has one owner already). ``wait=False``:
        ``LedgerError`` at once when another process does it."""
        return self._store.alone(what, wait=wait)

    def size_bytes(self) -> int:
        """What the ledger takes on disk (its file; in PostgreSQL its schema's tables and indexes)."""
        return self._store.size_bytes()

    def load_from(self, source: Path, *, only_if_empty: bool = False) -> bool:
        """Replace every row with those of the SQLite ledger file ``source`` (a backup), in one
        transaction (``only_if_empty``: only into a ledger without memories and audit); whether it
        did. A SQLite ledger is restored by replacing its file instead (``LedgerError``)."""
        return self._store.load_from(source, only_if_empty=only_if_empty)

    def backup_to(self, target: Path) -> None:
        """A consistent online copy of the ledger as a SQLite ledger file, readable by its owner only."""
        self._store.backup_to(target)

    def close(self) -> None:
        """Close the store (SQLite: a WAL checkpoint folds the log into the database)."""
        self._store.close()


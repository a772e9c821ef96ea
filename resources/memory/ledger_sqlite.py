"""The ledger in one SQLite file (embedded mode): one connection shared by the process's threads,
serialized by a lock; every write one ``BEGIN IMMEDIATE`` transaction, refused
(``LedgerReplaced``) when the file on disk is no longer the one the connection writes."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from resources.memory.ledger_model import SCHEMA, SCHEMA_VERSION, LedgerError, LedgerReplaced
from resources.private_files import make_private_file
from resources.sqlite import immediate_transaction, open_database


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``; None when it does not exist."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


class SqliteLedgerStore:
    """Where a ledger's rows live in embedded mode: the SQLite file ``path``.

    Args:
        path: The ledger file (created private if missing).
        shared: A ledger in a directory other users write (``resources.sqlite.open_database``).
    """

    integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)
    """What a write that breaks a key raises."""

    def __init__(self, path: Path, *, shared: bool = False) -> None:
        self.path = path
        self.location = str(path)
        wal = path.with_name(path.name + "-wal")
        if path.exists() and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            # SQLite would read it as a new, empty ledger: every memory would vanish without a word
            raise LedgerError(f"{path} is empty (truncated?) — run `codemem repair`: it restores the latest "
                              "`codemem backup` or keeps the file aside")
        self.connection = open_database(path, synchronous="FULL", foreign_keys=True, shared=shared)
        self._identity = _file_identity(path)
        self._lock = threading.RLock()
        with self._lock:
            self.connection.executescript(SCHEMA)
            self.connection.execute(
                "INSERT INTO meta(key, value) VALUES ('schema_version', ?) ON CONFLICT(key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            outbox = {row[1] for row in self.connection.execute("PRAGMA table_info(outbox)")}
            for column in ("claimed_until", "claimed_by"):  # a ledger written before projection claims
                if column not in outbox:
                    try:
                        self.connection.execute(f"ALTER TABLE outbox ADD COLUMN {column} TEXT")
                    except sqlite3.OperationalError as exc:  # another process added it meanwhile
                        if "duplicate column" not in str(exc):
                            raise
            if not shared:  # one owner: a claim left in the file is a dead process's, due again now
                self.connection.execute(
                    "UPDATE outbox SET claimed_until=NULL, claimed_by=NULL WHERE claimed_until IS NOT NULL"
                )

    # -- SQL that differs between SQLite and PostgreSQL -------------------------------------
    @staticmethod
    def metadata_text(key: str) -> str:
        """SQL for metadata's top-level ``key`` as SQL text or number (NULL when absent or JSON null);
        ``key`` a plain identifier the caller checked."""
        return f"json_extract(metadata, '$.{key}')"  # the literal path lets SQLite use the expression indexes

    @staticmethod
    def metadata_equals(key: str) -> str:
        """SQL comparing metadata's ``key`` to one parameter (``metadata_parameter``)."""
        return f"json_extract(metadata, '$.{key}') = ?"

    @staticmethod
    def metadata_parameter(value: object) -> object:
        """The parameter ``metadata_equals`` compares with ``value``."""
        import json

        # an object or a list as json_extract writes it: compact
        return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else value

    @staticmethod
    def later_of(a: str, b: str) -> str:
        """SQL for the larger of two values."""
        return f"MAX({a}, {b})"

    @staticmethod
    def comma_joined(column: str) -> str:
        """SQL aggregating ``column``'s values of a group into one comma-separated text."""
        return f"group_concat({column})"

    # -- transactions ------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads (under the lock: one statement at a time)."""
        with self._lock:
            yield self.connection

    @contextmanager
    def writing(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction, refused before it starts and unacknowledged after it commits
        when the ledger file on disk is no longer the one this connection writes. ``durable=False``:
        a statistic, committed without waiting for the disk (WAL keeps it consistent; a power cut
        may lose it, never a memory)."""
        with self._lock:
            self._check_identity()
            if not durable:
                self.connection.execute("PRAGMA synchronous=NORMAL")
            try:
                with immediate_transaction(self.connection, self._lock) as conn:
                    yield conn
            finally:
                if not durable:
                    self.connection.execute("PRAGMA synchronous=FULL")
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

    def backup_to(self, target: Path) -> None:
        """A consistent online copy of the ledger (SQLite backup API), readable by its owner only."""
        dest = sqlite3.connect(str(make_private_file(target)))
        try:
            with self._lock:
                self.connection.backup(dest)
        finally:
            dest.close()

    def load_from(self, source: Path, *, only_if_empty: bool = False) -> bool:
        """Not for a SQLite ledger: it is restored by replacing its file."""
        raise LedgerError(f"{self.path} is a SQLite file: restore it by replacing the file (`codemem restore`)")

    @contextmanager
    def alone(self, what: str, *, wait: bool = True) -> Iterator[None]:
        """Nothing to take: the state dir's owner lock keeps a SQLite ledger to one process."""
        yield

    def keep_alone(self) -> None:
        """Nothing to check: the state dir's owner lock keeps a SQLite ledger to one process."""

    def size_bytes(self) -> int:
        """The file's size (its WAL not counted)."""
        return self.path.stat().st_size

    def close(self) -> None:
        """Close the connection (a WAL checkpoint folds the log into the database)."""
        with self._lock:
            try:
                self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self.connection.close()

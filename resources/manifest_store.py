"""Where the index manifest's rows live: a SQLite file (embedded mode, ``<state>/index.db``) or a
schema of the PostgreSQL database that server mode shares (``CODEMEM_DATABASE_URL``).

Both stores give ``resources.manifest.Manifest`` the same two things: ``reading()``, a connection
for reads, and ``writing()``, one atomic write transaction, alone among the manifest's writers
(``BEGIN IMMEDIATE`` under the store's lock; in PostgreSQL, an advisory lock that every process
writing the manifest takes). Each takes the manifest's SQL, written once with ``?`` parameters.
The tables are declared once (``schema``), in each engine's types.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from resources.postgres import SchemaStore
from resources.sqlite import immediate_transaction, open_database, read_meta

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    language TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size {integer} NOT NULL,
    mtime_ns {integer} NOT NULL,
    indexed_at TEXT NOT NULL,
    symbol_count {integer} NOT NULL,
    error_count {integer} NOT NULL,
    refs {packed} NOT NULL,
    design_digest TEXT,
    calls {blob},
    written_seq {integer}
);
CREATE TABLE IF NOT EXISTS symbols (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    local_name TEXT NOT NULL,
    qualified_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    container TEXT,
    language TEXT NOT NULL,
    embed_text TEXT NOT NULL,
    has_dense {integer} NOT NULL DEFAULT 0,
    path_qualified_name TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS symbols_path ON symbols(path);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_qualified ON symbols(qualified_name);
CREATE INDEX IF NOT EXISTS symbols_pending ON symbols(has_dense);
CREATE INDEX IF NOT EXISTS symbols_path_qualified ON symbols(path_qualified_name);
CREATE TABLE IF NOT EXISTS resolved_edges (
    source TEXT NOT NULL,
    type TEXT NOT NULL,
    target TEXT NOT NULL,
    properties TEXT NOT NULL,
    PRIMARY KEY (source, type, target)
){without_rowid};
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dirty (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS rewritten (path TEXT PRIMARY KEY){without_rowid};
CREATE TABLE IF NOT EXISTS in_flight (path TEXT NOT NULL, ids TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS in_flight_path ON in_flight(path);
CREATE TABLE IF NOT EXISTS ref_names (
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (path, name)
){without_rowid};
CREATE INDEX IF NOT EXISTS ref_names_name ON ref_names(name);
CREATE TABLE IF NOT EXISTS changed_names (name TEXT PRIMARY KEY){without_rowid};
CREATE TABLE IF NOT EXISTS changed_paths (path TEXT PRIMARY KEY, language TEXT NOT NULL, existed {integer} NOT NULL){without_rowid};
CREATE TABLE IF NOT EXISTS skipped (
    path TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    size {integer} NOT NULL,
    mtime_ns {integer} NOT NULL,
    reason TEXT NOT NULL,
    lasting {integer} NOT NULL DEFAULT 1,
    seen {integer} NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS unsettled_edges (
    source TEXT NOT NULL,
    type TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (source, type, target)
){without_rowid};
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    finished {integer} NOT NULL DEFAULT 0,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
"""
SQLITE_SCHEMA = _SCHEMA.format(integer="INTEGER", blob="BLOB", packed="TEXT", without_rowid=" WITHOUT ROWID")
"""The manifest's tables in SQLite (``refs`` is declared TEXT: rows of an earlier release hold it
as text, later ones packed, ``pack``). The tables keyed by their whole row (or nearly) are
``WITHOUT ROWID``: a rowid table keeps its key twice, in the table and in the key's index
(resolved edges of Linux's ``fs/``: 25 MB as a rowid table, 13 MB without)."""
CLUSTERED_TABLES = ("resolved_edges", "unsettled_edges")
"""Tables an earlier release made with a rowid: rebuilt ``WITHOUT ROWID`` when a manifest opens."""
POSTGRES_SCHEMA = (
    *(statement.strip()
      for statement in _SCHEMA.format(integer="BIGINT", blob="BYTEA", packed="BYTEA", without_rowid="").split(";")
      if statement.strip()),
    "CREATE INDEX IF NOT EXISTS files_written ON files(written_seq)",
)
"""The same tables in PostgreSQL's types (``refs`` always packed), and the order of the files
written last (what the hook relay reads; SQLite's hooks read the rowids)."""
TABLES = ("files", "symbols", "resolved_edges", "meta", "dirty", "rewritten", "in_flight", "ref_names", "changed_names",
          "changed_paths", "skipped", "unsettled_edges", "jobs")
"""Every table of the manifest (what a move from one store to the other copies)."""
FILES_WRITTEN = "files_written"
"""Meta key counting the transactions that replaced files' rows (and so their graph nodes): a
derived layer that wrote edges to those nodes compares it to know whether they may be gone."""


COMPACT_LOG_LIMIT = 64 << 20
"""Bytes a manifest's write-ahead log is cut back to at a checkpoint once it was compacted (the
rewrite passes the whole file through the log)."""
PACK_LEVEL = 3
"""zlib level of the packed column: on Linux's ``fs/`` refs, 1 gives 7.3×, 3 7.8× in less time, 6 8.7× in 2.7× the time."""


def pack(text: str) -> bytes:
    """A packed column's value as stored: the text, zlib-compressed (a BLOB, told apart from older TEXT rows)."""
    return zlib.compress(text.encode("utf-8"), PACK_LEVEL)


def unpack(value: str | bytes) -> str:
    """A packed column's text (a row written before packing holds the text itself)."""
    return value if isinstance(value, str) else zlib.decompress(value).decode("utf-8")


def files_written(conn: Any) -> int:
    """The ``FILES_WRITTEN`` count (0 before the first write)."""
    value = read_meta(conn, FILES_WRITTEN)
    return int(value) if value and value.isdigit() else 0


class ManifestError(RuntimeError):
    """The manifest's store cannot be used; the message says what to do."""


class ManifestStore(Protocol):
    """Where the manifest's rows live (``SqliteManifestStore``, ``PostgresManifestStore``)."""

    location: str

    def reading(self) -> Any:
        """A context manager: a connection for reads (``execute`` with ``?`` parameters)."""

    def writing(self) -> Any:
        """A context manager: one write transaction, alone among the manifest's writers."""

    def alone(self, what: str, *, wait: bool = True, stop: threading.Event | None = None) -> Any:
        """A context manager: the only process doing ``what`` with this manifest meanwhile."""

    def close(self) -> None:
        """Release the store's connections."""


class SqliteManifestStore:
    """The manifest in a SQLite file (WAL, ``synchronous=NORMAL``: it can be rebuilt), one
    connection shared by the process's threads under one lock; a file of an earlier release gets
    the columns added since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        self._conn = open_database(path, synchronous="NORMAL")
        self._lock = threading.RLock()
        self._commits = 0  # this connection's write transactions (``change_marker``)
        self._conn.executescript(SQLITE_SCHEMA.replace(_PATH_QUALIFIED_INDEX, ""))
        self._add_column("symbols", "path_qualified_name", "TEXT NOT NULL DEFAULT ''")
        self._conn.execute(_PATH_QUALIFIED_INDEX)
        self._add_column("files", "design_digest", "TEXT")
        self._add_column("files", "calls", "BLOB")
        self._add_column("skipped", "lasting", "INTEGER NOT NULL DEFAULT 1")
        self._add_column("skipped", "seen", "INTEGER NOT NULL DEFAULT 1")
        if self._add_column("files", "written_seq", "INTEGER"):
            # rows of an earlier release: written at or before now, as far as anyone can tell
            self._conn.execute("UPDATE files SET written_seq = ? WHERE written_seq IS NULL", (files_written(self._conn),))
        for table in CLUSTERED_TABLES:
            self._cluster(table)

    def _cluster(self, table: str) -> None:
        """Rebuild a table an earlier release made with a rowid as ``WITHOUT ROWID`` (its rows
        copied, in one transaction: an interruption leaves the table as it was)."""

        def declaration() -> str:
            row = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
            return row[0] if row else ""

        if "WITHOUT ROWID" in declaration().upper():
            return
        with immediate_transaction(self._conn, self._lock) as conn:
            old = declaration()
            if "WITHOUT ROWID" in old.upper():  # another process rebuilt it meanwhile
                return
            conn.execute(f"ALTER TABLE {table} RENAME TO {table}_with_rowid")
            conn.execute(old.rstrip().rstrip(";") + " WITHOUT ROWID")
            conn.execute(f"INSERT INTO {table} SELECT * FROM {table}_with_rowid")
            conn.execute(f"DROP TABLE {table}_with_rowid")

    def _add_column(self, table: str, column: str, declaration: str) -> bool:
        """Give a manifest of an earlier release a column added since (NULL in its rows); True when
        this call added it."""
        if column not in {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}:
            try:
                self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
            except sqlite3.OperationalError as exc:  # another process added it meanwhile
                if "duplicate column" not in str(exc):
                    raise
                return False
            return True
        return False

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads, under the store's lock."""
        with self._lock:
            yield self._conn

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the store's lock."""
        with self._lock:  # the count moves under the lock that orders the transactions it counts
            try:
                with immediate_transaction(self._conn, self._lock) as conn:
                    yield conn
            finally:
                self._commits += 1  # a rollback too: the marker may change more often than the rows, never less

    def change_marker(self) -> tuple[int, int]:
        """Changes whenever the database may have changed: a write transaction of this connection,
        or a commit of another connection (another process) since (SQLite's ``data_version``).
        A value read from the database stays valid as long as the marker read before it does."""
        with self._lock:
            return self._commits, int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    @contextmanager
    def alone(self, what: str, *, wait: bool = True, stop: threading.Event | None = None) -> Iterator[None]:
        """Nothing to take: one process owns a state dir's files (``query_server.ownership``)."""
        yield

    def compact(self) -> bool:
        """Rewrite the file with its pages full (``VACUUM``; the write-ahead log truncated after):
        B-trees filled in random key order (symbol ids) keep their pages ~75% full, 108 MB of the
        kernel's 1.55 GB manifest, 7 s, during which this process's other manifest reads wait.
        Needs room for two more copies while it runs. False when it fails (for want of room, or
        another connection writing: the rows as they were, the log truncated again) or when a
        reader elsewhere keeps the log from being truncated (its size is then capped at the next
        checkpoint, ``COMPACT_LOG_LIMIT``)."""
        log = logging.getLogger(__name__)
        with self._lock:
            waits = self._conn.execute("PRAGMA busy_timeout").fetchone()[0]
            self._conn.execute("PRAGMA busy_timeout = 1000")  # a writer elsewhere: not worth waiting for
            self._conn.execute(f"PRAGMA journal_size_limit = {COMPACT_LOG_LIMIT}")  # the log shrinks back after
            try:
                self._conn.execute("VACUUM")
                busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            except sqlite3.Error as exc:
                log.warning("the index manifest %s was not compacted: %s", self.path, exc)
                try:  # what the failed rewrite left in the log (all the room a full disk had) given back
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass
                return False
            finally:
                self._commits += 1
                self._conn.execute(f"PRAGMA busy_timeout = {int(waits)}")
            if busy:
                log.info("the index manifest %s was compacted; a reader kept its log from being truncated (later)", self.path)
            return not busy

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()


_PATH_QUALIFIED_INDEX = "CREATE INDEX IF NOT EXISTS symbols_path_qualified ON symbols(path_qualified_name);"
"""Created after the column it indexes (a manifest from before issue 19 lacks it)."""


class PostgresManifestStore(SchemaStore):
    """The manifest in the schema ``namespace`` of a PostgreSQL database (server mode): shared by
    every replica and indexing worker of the project; commits serialized by an advisory lock.

    Raises:
        ManifestError: the database cannot be reached or the schema cannot be created.
    """

    what = "the index manifest"
    schema = POSTGRES_SCHEMA
    marker_table = "jobs"
    tables = TABLES  # a schema an earlier release made gets the tables added since (every statement is IF NOT EXISTS)
    lock_name = "manifest"
    error = ManifestError

    def load_from(self, source: Path) -> bool:
        """Replace this manifest's rows with those of the SQLite manifest ``source`` (a project's
        ``index.db`` moving to server mode), in one transaction, if this one indexes no file yet
        (checked under the write lock; the settings a process opening it wrote meanwhile go).

        Returns:
            Whether the rows were loaded.

        Raises:
            ManifestError: a row cannot be stored (the message names the file).
        """
        import psycopg

        from resources.sqlite_readonly import file_uri

        reader = sqlite3.connect(f"{file_uri(source)}?mode=ro", uri=True)
        try:
            with self.writing() as conn:
                if conn.execute("SELECT 1 FROM files LIMIT 1").fetchone():
                    return False
                for table in TABLES:
                    conn.execute(f"DELETE FROM {table}")
                reader.execute("BEGIN")  # one snapshot of the file
                for table in TABLES:
                    present = [row[1] for row in reader.execute(f"PRAGMA table_info({table})")]
                    if not present:  # (a file written before the table was added)
                        continue
                    columns = ", ".join(present)
                    marks = ", ".join("?" * len(present))
                    packed = {i for i, column in enumerate(present) if column in ("refs", "calls")}
                    texts = {i for i, column in enumerate(present) if column == "embed_text"}
                    cursor = reader.execute(f"SELECT {columns} FROM {table}")
                    while rows := cursor.fetchmany(1000):
                        conn.executemany(f"INSERT INTO {table}({columns}) VALUES ({marks})",
                                         [_packed(row, packed, texts) for row in rows])
                return True
        except (psycopg.Error, sqlite3.Error) as exc:
            raise ManifestError(
                f"the index manifest {source} cannot be moved into {self.location} ({exc}) — nothing was moved; "
                f"delete {source} to index the project anew in PostgreSQL"
            ) from exc
        finally:
            reader.close()


def _packed(row: tuple[Any, ...], packed: set[int], texts: AbstractSet[int] = frozenset()) -> tuple[Any, ...]:
    """A row of a SQLite manifest as PostgreSQL holds it: references packed (an earlier release
    kept them as text), embedding texts as text (SQLite keeps them packed)."""
    if not packed and not texts:
        return row
    return tuple(
        pack(value) if i in packed and isinstance(value, str) else unpack(value) if i in texts and isinstance(value, bytes) else value
        for i, value in enumerate(row)
    )

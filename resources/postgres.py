"""PostgreSQL for the state that server mode shares (``CODEMEM_DATABASE_URL``, issue 23).

Embedded mode keeps its state in SQLite files under one owner; with a database URL, the stores
that move to PostgreSQL (the embedding cache first) take a connection pool from ``open_pool`` and
need no owner: every replica reads and writes directly, and the database serializes them. Schema
changes run under a transaction-scoped advisory lock (``schema_lock``), so replicas starting
together do not race on ``CREATE TABLE IF NOT EXISTS``.

psycopg 3 and psycopg-pool come with the ``server`` extra (``pip install 'codemem[server]'``);
they are imported only here, and only when a URL is configured.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from resources.settings import Settings

POOL_MAX_SIZE = 8
"""Connections one process keeps at most (a server's tool calls run on a few threads)."""
CONNECT_TIMEOUT_S = 10.0
"""How long opening the pool waits for its first connection before it says what is wrong."""
CONNECTION_WAIT_S = 10.0
"""How long a store's call waits for a pooled connection before it says the database is down."""
WRITE_WAIT_S = 30.0
"""How long a write waits for another process's write to the same store (SQLite's busy timeout)."""
ALONE_POLL_S = 0.2
"""How often a process waiting to be alone (``SchemaStore.alone``) asks again."""
_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LITERAL = re.compile(r"('(?:[^']|'')*')")


class DatabaseUnavailable(RuntimeError):
    """The configured PostgreSQL cannot be used; the message says what to do."""


def redacted(url: str) -> str:
    """``url`` without its password (for messages and logs): ``user:password@``, ``?password=`` and
    the ``password=`` of a key/value connection string."""
    url = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)", r"\1***", url, flags=re.IGNORECASE)


def open_pool(url: str, *, max_size: int = POOL_MAX_SIZE) -> ConnectionPool:
    """A connection pool to ``url``, its first connection made (a wrong URL or a stopped server
    fails here, not at the first write).

    Raises:
        DatabaseUnavailable: psycopg is not installed, or no connection could be made.
    """
    try:
        import psycopg
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise DatabaseUnavailable(
            f"CODEMEM_DATABASE_URL is set but psycopg is not installed ({exc.name}) — "
            "`pip install 'codemem[server]'`, or unset CODEMEM_DATABASE_URL to keep the state in SQLite"
        ) from exc
    try:  # one connection first: its error says what is wrong (the pool's would only time out)
        psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT_S)).close()
    except psycopg.Error as exc:
        reason = redacted(" ".join(str(exc).split()) or type(exc).__name__)
        raise DatabaseUnavailable(
            f"cannot connect to PostgreSQL at {redacted(url)} ({reason}) — check that the server runs and that "
            "CODEMEM_DATABASE_URL names it (postgresql://user:password@host:5432/db)"
        ) from exc
    pool = ConnectionPool(  # a connection the server dropped (a restart) is replaced when next taken
        url, min_size=1, max_size=max_size, open=False, name="codemem", check=ConnectionPool.check_connection,
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:  # PoolTimeout included
        pool.close()
        raise DatabaseUnavailable(
            f"cannot connect to PostgreSQL at {redacted(url)} within {CONNECT_TIMEOUT_S:g} s ({exc}) — check that "
            "the server runs and that CODEMEM_DATABASE_URL names it (postgresql://user:password@host:5432/db)"
        ) from exc
    return pool


def project_namespace(settings: Settings) -> str:
    """The PostgreSQL schema of the project's shared state in server mode (its ledger's; other
    stores add a suffix of at most 6 characters): ``codemem_`` and the project id
    (``CODEMEM_PROJECT_ID``; else the directory's name and a digest of its resolved path), folded
    to what a schema name may hold. Every replica and worker of a project must agree on it."""
    import hashlib

    if settings.project_id:
        name = settings.project_id
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    else:
        root = settings.resolved_root()
        name, digest = root.name, hashlib.sha256(str(root).encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:40] or "project"
    return f"codemem_{slug}_{digest}"


def schema_lock(conn: Any, name: str) -> None:
    """Inside ``conn``'s transaction: wait until no other process changes the schema ``name``
    names (released at commit or rollback)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"codemem schema {name}",))


@functools.lru_cache(maxsize=1024)
def postgres_sql(sql: str) -> str:
    """SQL written for both engines (``?`` parameters) as psycopg takes it: ``%s`` parameters, ``%``
    doubled; nothing inside a quoted literal is taken for a parameter."""
    parts = _LITERAL.split(sql)
    return "".join(
        part.replace("%", "%%") if index % 2 else part.replace("%", "%%").replace("?", "%s")
        for index, part in enumerate(parts)
    )


def _storable(params: Sequence[Any]) -> tuple[Any, ...]:
    """Parameters as PostgreSQL can hold them: a NUL character, which its text cannot (SQLite's
    can: a source file with one), as U+FFFD."""
    return tuple(value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value for value in params)


class QmarkConnection:
    """A psycopg connection that takes ``?`` SQL, as a SQLite connection does: the stores that live
    in both engines write their SQL once. Text parameters are stored without NUL (``_storable``)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(postgres_sql(sql), _storable(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        cursor = self._conn.cursor()
        cursor.executemany(postgres_sql(sql), [_storable(row) for row in rows])
        return cursor


class HeldLock:
    """A session advisory lock ``SchemaStore.alone`` holds: ``check`` says whether it still is (the
    session it lives on may be gone: a server restart, an idle-session timeout, an administrator)."""

    def __init__(self, conn: Any, what: str, error: type[Exception]) -> None:
        self._conn, self._what, self._error = conn, what, error

    def check(self) -> None:
        """Raise the store's error when the lock's session is gone (then another process may hold it)."""
        import psycopg

        try:
            self._conn.execute("SELECT 1")
        except psycopg.Error as exc:
            raise self._error(
                f"the lock on {self._what} was lost ({' '.join(str(exc).split())}): another process may be doing the "
                "same now, so this one stops here — run it again"
            ) from exc


class SchemaStore:
    """A store kept in one schema of a PostgreSQL database (``namespace``), so that one database
    holds many projects' stores; every transaction sets its ``search_path`` to it. Writes to one
    store are serialized by a transaction-scoped advisory lock (what ``BEGIN IMMEDIATE`` does for
    its SQLite file); reads take no lock.

    A subclass names what it keeps (``what``, for messages), its tables (``schema``, created under
    a schema lock when ``marker_table`` or one of ``tables`` is missing, so replicas starting
    together do not race, and a schema an earlier release made gets the tables added since), the
    name its locks take (``lock_name``: every version of codemem must use the same) and the error it
    raises (``error``).

    Args:
        url: The database (``CODEMEM_DATABASE_URL``); or ``pool``, an open psycopg pool to share.
        namespace: The PostgreSQL schema (lower-case letters, digits, ``_``; at most 63).
    """

    what: ClassVar[str] = "the store"
    schema: ClassVar[Sequence[str]] = ()
    marker_table: ClassVar[str] = ""
    tables: ClassVar[Sequence[str]] = ()
    """Every table ``schema`` makes (each statement of it is ``IF NOT EXISTS``)."""
    lock_name: ClassVar[str] = ""
    error: ClassVar[type[Exception]] = DatabaseUnavailable

    def __init__(self, url: str | None = None, *, pool: Any = None, namespace: str) -> None:
        if not _NAMESPACE.match(namespace):
            raise self.error(f"{self.what}'s schema name {namespace!r} must be lower-case letters, digits and _ (at most 63)")
        self.namespace = namespace
        self._url = url
        self.location = f"{redacted(url) if url else 'postgresql'} (schema {namespace})"
        self._owns_pool = pool is None
        self._pool: Any = None
        try:
            self._pool = open_pool(url or "") if pool is None else pool
        except DatabaseUnavailable as exc:
            raise self.error(str(exc)) from exc
        import psycopg  # (installed: the pool opened)

        try:
            with self._pool.connection(timeout=CONNECTION_WAIT_S) as conn:
                # the DDL only where the tables are missing: a role that may only read and write rows
                # cannot even run CREATE ... IF NOT EXISTS
                wanted = [f"{namespace}.{table}" for table in dict.fromkeys((self.marker_table, *self.tables))]
                if conn.execute("SELECT bool_or(to_regclass(name) IS NULL) FROM unnest(%s::text[]) AS name", (wanted,)).fetchone()[0]:
                    schema_lock(conn, f"{self.lock_name} {namespace}")
                    conn.execute(f"CREATE SCHEMA IF NOT EXISTS {namespace}")
                    conn.execute("SELECT set_config('search_path', %s, true)", (namespace,))
                    for statement in self.schema:
                        conn.execute(statement)
                    self._created(QmarkConnection(conn))
        except psycopg.Error as exc:
            self.close()
            raise self.error(f"{self.what}'s tables in {self.location} cannot be used ({exc})") from exc

    def _created(self, conn: QmarkConnection) -> None:
        """Inside the transaction that created the tables: rows a new store starts with."""

    @contextmanager
    def _connection(self, *, snapshot: bool = False) -> Iterator[Any]:
        """A pooled connection in one transaction on this store's schema; ``snapshot``: every
        statement reads the same snapshot (REPEATABLE READ, read only)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._pool.connection(timeout=CONNECTION_WAIT_S) as conn:
                if snapshot:
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute("SELECT set_config('search_path', %s, true)", (self.namespace,))
                yield conn
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise self.error(
                f"the database of {self.what}, {self.location}, does not answer ({exc}) — check that PostgreSQL "
                "runs; nothing was written by this call"
            ) from exc

    @contextmanager
    def reading(self) -> Iterator[QmarkConnection]:
        """A pooled connection for reads (one transaction, no lock)."""
        with self._connection() as conn:
            yield QmarkConnection(conn)

    @contextmanager
    def writing(self, *, durable: bool = True) -> Iterator[QmarkConnection]:
        """One write transaction, alone among this store's writers in every process (an advisory
        lock held to commit). ``durable=False``: committed without waiting for the disk
        (``synchronous_commit off``: a crash may lose it)."""
        import psycopg

        with self._connection() as conn:
            conn.execute(f"SET LOCAL lock_timeout = '{int(WRITE_WAIT_S * 1000)}ms'")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"codemem {self.lock_name} {self.namespace}",))
            except psycopg.errors.LockNotAvailable as exc:
                raise self.error(
                    f"another process has held {self.what} {self.location} for writing for over {WRITE_WAIT_S:g} s "
                    "(a long import, normalization or index commit, or a stuck transaction: see pg_stat_activity) "
                    "— nothing was written by this call; retry it"
                ) from exc
            conn.execute("SET LOCAL lock_timeout = 0")
            if not durable:
                conn.execute("SET LOCAL synchronous_commit TO off")
            yield QmarkConnection(conn)

    @contextmanager
    def alone(self, what: str, *, wait: bool = True, stop: threading.Event | None = None) -> Iterator[HeldLock]:
        """Be the only process doing ``what`` with this store for the block: waits for any other
        (a session advisory lock on a connection of its own, released at the end, or by PostgreSQL
        when this process dies or stops answering: TCP keepalives); ``wait=False``: raise ``error``
        at once when another does it; ``stop``: give up waiting once it is set.

        Raises:
            error: PostgreSQL does not answer; another process does ``what`` (``wait=False``); or
                ``stop`` was set while waiting.
        """
        import psycopg

        try:
            conn = psycopg.connect(self._url or self._pool.conninfo, autocommit=True, connect_timeout=int(CONNECTION_WAIT_S),
                                   keepalives=1, keepalives_idle=30, keepalives_interval=10, keepalives_count=3,
                                   tcp_user_timeout=30_000)  # (a check on a partitioned link fails in 30 s)
        except psycopg.Error as exc:
            raise self.error(f"the database of {self.what}, {self.location}, does not answer ({exc}) — check that "
                             "PostgreSQL runs") from exc
        key = f"codemem {self.lock_name} {self.namespace} {what}"
        held = False
        try:
            while not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0]:
                if not wait:
                    raise self.error(f"another codemem process is doing {what} with {self.what} {self.location}")
                if stop is not None and stop.wait(ALONE_POLL_S):
                    raise self.error(f"stopped while another codemem process was doing {what} with {self.what}")
                if stop is None:
                    time.sleep(ALONE_POLL_S)
            held = True
            yield HeldLock(conn, f"{what} with {self.what} {self.location}", self.error)
        finally:
            if held:  # released now: a closed session's locks go only once its server process has ended,
                # which a busy server does after this returns (the next ``alone`` here was refused)
                with contextlib.suppress(psycopg.Error):  # a lost session: its end releases it
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))
            conn.close()

    def size_bytes(self) -> int:
        """The schema's tables, their indexes and TOAST, as PostgreSQL counts them."""
        with self._connection() as conn:
            return int(conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (self.namespace,)
            ).fetchone()[0])

    def close(self) -> None:
        """Close the pool (when this store opened it)."""
        if self._owns_pool and self._pool is not None:
            self._pool.close()

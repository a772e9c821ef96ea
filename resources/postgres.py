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

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

POOL_MAX_SIZE = 8
"""Connections one process keeps at most (a server's tool calls run on a few threads)."""
CONNECT_TIMEOUT_S = 10.0
"""How long opening the pool waits for its first connection before it says what is wrong."""


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


def schema_lock(conn: Any, name: str) -> None:
    """Inside ``conn``'s transaction: wait until no other process changes the schema ``name``
    names (released at commit or rollback)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"codemem schema {name}",))

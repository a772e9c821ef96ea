"""The embedding cache in PostgreSQL (server mode, ``CODEMEM_DATABASE_URL``): what
``EmbeddingCache`` does in SQLite, shared by every replica and indexing worker.

Same keys, values, TTL and LRU eviction as the SQLite cache (``tests/resources/embeddings/test_cache.py``
runs one contract suite over both). Concurrency is the database's:

* an entry is written with ``INSERT … ON CONFLICT DO UPDATE`` (the last writer wins, as in SQLite),
  rows in key order, so two writers of overlapping batches cannot deadlock; each batch is one
  transaction (a process killed in the middle leaves the previous state);
* a lookup refreshes last-use times of the rows no other transaction holds (``SKIP LOCKED``: a
  refresh is best effort, never a wait);
* eviction runs in its own transaction after the write, by one process at a time (a try of an
  advisory lock: another process evicting already is enough), skips rows in use, and brings the
  table down to ``EVICT_TO`` of the limit, so that it does not run at every write of a full cache.

A database that stops answering turns the cache off for ``RETRY_AFTER_S`` after a failure (each
call would otherwise wait for a connection first): embedding goes on without it meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from resources.embeddings.base import EmbeddingError
from resources.embeddings.cache import DAY, CacheBase, entry_rows, stored_vector, text_hash
from resources.postgres import DatabaseUnavailable, open_pool, redacted, schema_lock

TABLE = "codemem_embeddings"
EVICT_TO = 0.9
"""Eviction leaves this share of ``max_entries``."""
RETRY_AFTER_S = 30.0
"""After a failed call, how long the cache is skipped before the database is tried again."""
CONNECTION_WAIT_S = 2.0
"""How long a call waits for a connection of the pool (the server may be down)."""
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (model_id TEXT NOT NULL, text_hash BYTEA NOT NULL, dim INTEGER NOT NULL, "
    "vector BYTEA NOT NULL, created DOUBLE PRECISION NOT NULL, last_used DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (model_id, text_hash))",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_last_used ON {TABLE} (last_used)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_created ON {TABLE} (created)",
)


class PostgresEmbeddingCache(CacheBase):
    """PostgreSQL-backed vector cache with LRU eviction and a TTL; safe to share between threads
    and processes.

    Args:
        url: The database (``CODEMEM_DATABASE_URL``); or ``pool``, an open psycopg pool to use.
        max_entries: Most entries kept; the least recently used beyond it are evicted.
        ttl_seconds: Age after which an entry counts as a miss and is purged.
        clock: Returns the current time in seconds (injectable for tests).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        pool: Any = None,
        max_entries: int = 500_000,
        ttl_seconds: float = 30 * DAY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(max_entries=max_entries, ttl_seconds=ttl_seconds, clock=clock)
        self._lock = threading.Lock()
        try:
            self._owns_pool = pool is None
            self._pool = open_pool(url or "") if pool is None else pool
        except DatabaseUnavailable as exc:
            raise EmbeddingError(str(exc)) from exc
        import psycopg  # (installed: the pool opened)

        self.errors = (psycopg.Error,)
        self.path = redacted(url) if url else "postgresql"
        self._down_until = 0.0
        try:
            with self._pool.connection() as conn:
                # the DDL only where the table is missing: a role that may only read and write rows
                # cannot even run CREATE TABLE IF NOT EXISTS (it needs the schema's CREATE privilege)
                if conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()[0] is None:
                    schema_lock(conn, TABLE)
                    for statement in SCHEMA:
                        conn.execute(statement)
                self._count = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        except psycopg.Error as exc:
            self.close()
            raise EmbeddingError(f"the embedding cache's table in {self.path} cannot be used ({exc})") from exc

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection for one transaction; none (the call fails at once) for ``RETRY_AFTER_S``
        after a failure."""
        import psycopg

        if self._clock_now() < self._down_until:
            raise psycopg.OperationalError(f"the embedding cache's database failed less than {RETRY_AFTER_S:g} s ago")
        try:
            with self._pool.connection(timeout=CONNECTION_WAIT_S) as conn:
                yield conn
        except psycopg.OperationalError:
            self._down_until = self._clock_now() + RETRY_AFTER_S
            raise

    @staticmethod
    def _clock_now() -> float:
        return time.monotonic()

    def close(self) -> None:
        """Close the pool (when this cache opened it)."""
        if self._owns_pool:
            self._pool.close()

    def __len__(self) -> int:
        with self._connection() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Look texts up; found entries have their last-use time refreshed (see ``EmbeddingCache.get_many``)."""
        if not texts:
            return []
        hashes = [text_hash(t) for t in texts]
        now = self._clock()
        found: dict[bytes, np.ndarray] = {}
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT text_hash, dim, vector FROM {TABLE} WHERE model_id = %s AND created > %s AND text_hash = ANY(%s)",
                (model_id, now - self.ttl_seconds, sorted(set(hashes))),
            ).fetchall()
            for h, dim, blob in rows:
                if (vec := stored_vector(dim, blob)) is not None:
                    found[bytes(h)] = vec
            if found:
                conn.execute(
                    f"UPDATE {TABLE} SET last_used = %s WHERE (model_id, text_hash) IN (SELECT model_id, text_hash "
                    f"FROM {TABLE} WHERE model_id = %s AND text_hash = ANY(%s) FOR UPDATE SKIP LOCKED)",
                    (now, model_id, sorted(found)),
                )
        with self._lock:
            return self._counted([found.get(h) for h in hashes])

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray | Iterable[np.ndarray]) -> None:
        """Store vectors for texts in one transaction, replacing older entries (see ``EmbeddingCache.put_many``)."""
        now = self._clock()
        rows = entry_rows(model_id, texts, vectors, now)
        if not rows:
            return
        with self._connection() as conn, conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {TABLE} (model_id, text_hash, dim, vector, created, last_used) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (model_id, text_hash) DO UPDATE SET "
                "dim = excluded.dim, vector = excluded.vector, created = excluded.created, last_used = excluded.last_used",
                list(dict((row[1], row) for row in rows).values()),  # a text twice in one batch: its last vector
            )
        with self._lock:
            self._count += len(rows)  # upper bound: replaced entries count too
            over = self._count > self.max_entries
        if over:  # the batch is committed: eviction holds none of its rows
            self._evict(now)

    def _evict(self, now: float) -> None:
        """Purge expired entries, then the least recently used down to ``EVICT_TO`` of ``max_entries``;
        one process at a time (another one evicting is enough), rows in use left for the next time."""
        with self._connection() as conn:
            if not conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (f"codemem {TABLE} eviction",)).fetchone()[0]:
                return
            conn.execute(
                f"DELETE FROM {TABLE} WHERE (model_id, text_hash) IN (SELECT model_id, text_hash FROM {TABLE} "
                "WHERE created <= %s FOR UPDATE SKIP LOCKED)", (now - self.ttl_seconds,),
            )
            count = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
            target = self.max_entries - int(self.max_entries * (1 - EVICT_TO))  # (a small cache: exactly its limit)
            excess = count - target if count > self.max_entries else 0
            if excess > 0:
                count -= conn.execute(
                    f"DELETE FROM {TABLE} WHERE (model_id, text_hash) IN (SELECT model_id, text_hash FROM {TABLE} "
                    "ORDER BY last_used ASC, model_id, text_hash LIMIT %s FOR UPDATE SKIP LOCKED)", (excess,),
                ).rowcount
        with self._lock:
            self._count = count

    def purge_expired(self) -> int:
        """Delete expired entries now; returns how many."""
        with self._connection() as conn:
            deleted = conn.execute(f"DELETE FROM {TABLE} WHERE created <= %s", (self._clock() - self.ttl_seconds,)).rowcount
        with self._lock:
            self._count = max(0, self._count - deleted)
        return deleted

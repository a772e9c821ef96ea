"""The embedding cache in PostgreSQL (server mode, ``CODEMEM_DATABASE_URL``): what
``EmbeddingCache`` does in SQLite, shared by every replica and indexing worker.

Same keys, values, TTL and LRU eviction as the SQLite cache (``tests/resources/embeddings/test_cache.py``
runs one contract suite over both). Concurrency is the database's: an entry is written with
``INSERT … ON CONFLICT DO UPDATE`` (the last writer wins, as in SQLite), rows are written in key
order so two writers of overlapping batches cannot deadlock, and eviction runs under an advisory
lock so two replicas over the limit do not both evict. Every write is one transaction: a process
killed in the middle leaves the previous state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from resources.embeddings.base import EmbeddingError
from resources.embeddings.cache import DAY, CacheBase, entry_rows, stored_vector, text_hash
from resources.postgres import DatabaseUnavailable, open_pool, redacted, schema_lock

TABLE = "codemem_embeddings"
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
        self.max_entries = max(1, int(max_entries))
        self.ttl_seconds = float(ttl_seconds)
        self._clock = clock
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        try:
            self._owns_pool = pool is None
            self._pool = open_pool(url or "") if pool is None else pool
        except DatabaseUnavailable as exc:
            raise EmbeddingError(str(exc)) from exc
        import psycopg  # (installed: the pool opened)

        self.errors = (psycopg.Error,)
        self.path = redacted(url) if url else "postgresql"
        try:
            with self._pool.connection() as conn:
                schema_lock(conn, TABLE)
                for statement in SCHEMA:
                    conn.execute(statement)
                self._count = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        except psycopg.Error as exc:
            self.close()
            raise EmbeddingError(f"the embedding cache's table in {self.path} cannot be used ({exc})") from exc

    def close(self) -> None:
        """Close the pool (when this cache opened it)."""
        if self._owns_pool:
            self._pool.close()

    def __len__(self) -> int:
        with self._pool.connection() as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0])

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Look texts up; found entries have their last-use time refreshed (see ``EmbeddingCache.get_many``)."""
        if not texts:
            return []
        hashes = [text_hash(t) for t in texts]
        now = self._clock()
        found: dict[bytes, np.ndarray] = {}
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT text_hash, dim, vector FROM {TABLE} WHERE model_id = %s AND created > %s AND text_hash = ANY(%s)",
                (model_id, now - self.ttl_seconds, sorted(set(hashes))),
            ).fetchall()
            for h, dim, blob in rows:
                if (vec := stored_vector(dim, blob)) is not None:
                    found[bytes(h)] = vec
            if found:
                conn.execute(
                    f"UPDATE {TABLE} SET last_used = %s WHERE model_id = %s AND text_hash = ANY(%s)",
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
        with self._pool.connection() as conn:
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {TABLE} (model_id, text_hash, dim, vector, created, last_used) "
                    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (model_id, text_hash) DO UPDATE SET "
                    "dim = excluded.dim, vector = excluded.vector, created = excluded.created, last_used = excluded.last_used",
                    list(dict((row[1], row) for row in rows).values()),  # a text twice in one batch: its last vector
                )
            with self._lock:
                self._count += len(rows)  # upper bound: replaced entries count too
                over = self._count > self.max_entries
            if over:
                self._evict(conn, now)

    def _evict(self, conn: Any, now: float) -> None:
        """Purge expired entries, then the least recently used beyond ``max_entries`` (one process at a time)."""
        schema_lock(conn, f"{TABLE} eviction")
        conn.execute(f"DELETE FROM {TABLE} WHERE created <= %s", (now - self.ttl_seconds,))
        count = conn.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]
        excess = count - self.max_entries
        if excess > 0:
            conn.execute(
                f"DELETE FROM {TABLE} WHERE (model_id, text_hash) IN "
                f"(SELECT model_id, text_hash FROM {TABLE} ORDER BY last_used ASC, model_id, text_hash LIMIT %s)",
                (excess,),
            )
            count -= excess
        with self._lock:
            self._count = count

    def purge_expired(self) -> int:
        """Delete expired entries now; returns how many."""
        with self._pool.connection() as conn:
            deleted = conn.execute(f"DELETE FROM {TABLE} WHERE created <= %s", (self._clock() - self.ttl_seconds,)).rowcount
        with self._lock:
            self._count = max(0, self._count - deleted)
        return deleted

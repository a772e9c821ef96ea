"""A persistent embedding cache in SQLite, and an embedder wrapper that uses it.

Entries are keyed by ``(model_id, sha256(text))`` and hold the vector as little-endian float32
bytes. The database runs in WAL mode; every write is one transaction, so a process killed in
the middle of a write leaves the previous state intact. Entries expire ``ttl_seconds`` after
they were written, and the least recently used ones are evicted beyond ``max_entries``.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from resources.embeddings.base import Embedder, EmbeddingError
from resources.sqlite import immediate_transaction, open_database

log = logging.getLogger(__name__)
DAY = 86_400.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_id  TEXT    NOT NULL,
    text_hash BLOB    NOT NULL,
    dim       INTEGER NOT NULL,
    vector    BLOB    NOT NULL,
    created   REAL    NOT NULL,
    last_used REAL    NOT NULL,
    PRIMARY KEY (model_id, text_hash)
);
CREATE INDEX IF NOT EXISTS embeddings_last_used ON embeddings (last_used);
CREATE INDEX IF NOT EXISTS embeddings_created ON embeddings (created);
"""
_QUERY_SUFFIX = "#query"  # queries and documents embed differently for some models (Voyage)


def text_hash(text: str) -> bytes:
    """The 32-byte sha256 digest of a text (UTF-8; lone surrogates are escaped)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def stored_vector(dim: int, blob: bytes) -> np.ndarray | None:
    """A stored entry's vector (little-endian float32 bytes), None when it is not ``dim`` long."""
    vec = np.frombuffer(blob, dtype="<f4")
    return vec.astype(np.float32) if vec.shape[0] == dim else None


def entry_rows(model_id: str, texts: Sequence[str], vectors: np.ndarray | Iterable[np.ndarray], now: float) -> list[tuple]:
    """``(model_id, text_hash, dim, vector bytes, created, last_used)`` per text, in key order (two
    writers of overlapping batches then lock the same rows in the same order)."""
    rows = []
    for text, vec in zip(texts, vectors, strict=True):
        arr = np.asarray(vec, dtype="<f4").reshape(-1)
        rows.append((model_id, text_hash(text), int(arr.shape[0]), arr.tobytes(), now, now))
    return sorted(rows, key=lambda row: row[1])


class CacheBase:
    """What both embedding caches (``EmbeddingCache``, SQLite; ``PostgresEmbeddingCache``) offer:
    ``get_many`` and ``put_many``, this instance's hits and misses, closing as a context manager."""

    errors: tuple[type[Exception], ...] = ()
    """What a failing lookup or write of this cache raises (``CachedEmbedder`` embeds without it then)."""

    def __init__(self, *, max_entries: int, ttl_seconds: float, clock: Callable[[], float]) -> None:
        self.max_entries = max(1, int(max_entries))
        self.ttl_seconds = float(ttl_seconds)
        self._clock = clock
        self.hits = 0
        self.misses = 0

    @property
    def hit_rate(self) -> float:
        """Hits divided by lookups since this instance was opened (0.0 before any lookup)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def stats(self) -> dict[str, float | int]:
        """Entry count, hits, misses and hit rate."""
        return {"entries": len(self), "hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate}  # type: ignore[arg-type]

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """One vector or None (miss or expired) per text, in order; found entries count as used."""
        raise NotImplementedError

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray | Iterable[np.ndarray]) -> None:
        """Store one vector per text (replacing older entries), in one transaction."""
        raise NotImplementedError

    def _counted(self, result: list[np.ndarray | None]) -> list[np.ndarray | None]:
        hits = sum(v is not None for v in result)
        self.hits += hits
        self.misses += len(result) - hits
        return result

    def close(self) -> None:
        """Release the cache's connection(s)."""

    def __enter__(self) -> CacheBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EmbeddingCache(CacheBase):
    """SQLite-backed vector cache with LRU eviction and a TTL; safe to share between threads.

    Args:
        path: Database file (parent directories are created); ``":memory:"`` for tests.
        max_entries: Most entries kept; the least recently used beyond it are evicted.
        ttl_seconds: Age after which an entry counts as a miss and is purged.
        clock: Returns the current time in seconds (injectable for tests).
    """

    errors = (sqlite3.Error,)

    def __init__(
        self,
        path: Path | str,
        *,
        max_entries: int = 500_000,
        ttl_seconds: float = 30 * DAY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(max_entries=max_entries, ttl_seconds=ttl_seconds, clock=clock)
        self.path = str(path)
        self._lock = threading.RLock()
        try:
            self._conn = open_database(self.path, synchronous="NORMAL")
            with self._transaction():
                for statement in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                    self._conn.execute(statement)
            self._count = self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise EmbeddingError(
                f"Embedding cache {self.path} is unusable ({exc}); delete the file to start a fresh cache."
            ) from exc

    # -- plumbing ------------------------------------------------------------------------------

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        return immediate_transaction(self._conn, self._lock)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    # -- reads and writes ----------------------------------------------------------------------

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """Look texts up; found entries have their last-use time refreshed.

        Args:
            model_id: The embedder's ``model_id``.
            texts: Texts to look up.

        Returns:
            One float32 vector or ``None`` (miss or expired) per text, in order.
        """
        if not texts:
            return []
        hashes = [text_hash(t) for t in texts]
        now = self._clock()
        cutoff = now - self.ttl_seconds
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            unique = list(dict.fromkeys(hashes))
            for start in range(0, len(unique), 500):  # stay under SQLite's variable limit
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings "
                    f"WHERE model_id = ? AND created > ? AND text_hash IN ({marks})",
                    (model_id, cutoff, *chunk),
                ).fetchall()
                for h, dim, blob in rows:
                    if (vec := stored_vector(dim, blob)) is not None:
                        found[bytes(h)] = vec
            if found:
                with self._transaction():
                    self._conn.executemany(
                        "UPDATE embeddings SET last_used = ? WHERE model_id = ? AND text_hash = ?",
                        [(now, model_id, h) for h in found],
                    )
            return self._counted([found.get(h) for h in hashes])

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray | Iterable[np.ndarray]) -> None:
        """Store vectors for texts in one transaction (replacing older entries).

        Args:
            model_id: The embedder's ``model_id``.
            texts: The texts.
            vectors: One vector per text.
        """
        now = self._clock()
        rows = entry_rows(model_id, texts, vectors, now)
        if not rows:
            return
        with self._lock:
            with self._transaction():
                before = self._conn.total_changes
                self._conn.executemany(
                    "INSERT INTO embeddings (model_id, text_hash, dim, vector, created, last_used) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (model_id, text_hash) DO UPDATE SET "
                    "dim = excluded.dim, vector = excluded.vector, created = excluded.created, "
                    "last_used = excluded.last_used",
                    rows,
                )
                self._count += self._conn.total_changes - before  # upper bound: updates count too
                if self._count > self.max_entries:
                    self._evict_locked(now)

    def _evict_locked(self, now: float) -> None:
        """Purge expired entries, then the least recently used beyond ``max_entries``."""
        self._conn.execute("DELETE FROM embeddings WHERE created <= ?", (now - self.ttl_seconds,))
        count = self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        excess = count - self.max_entries
        if excess > 0:
            self._conn.execute(
                "DELETE FROM embeddings WHERE rowid IN "
                "(SELECT rowid FROM embeddings ORDER BY last_used ASC, rowid ASC LIMIT ?)",
                (excess,),
            )
            count -= excess
        self._count = count

    def purge_expired(self) -> int:
        """Delete expired entries now.

        Returns:
            How many entries were deleted.
        """
        with self._lock, self._transaction():
            cur = self._conn.execute("DELETE FROM embeddings WHERE created <= ?", (self._clock() - self.ttl_seconds,))
            self._count = max(0, self._count - cur.rowcount)
            return cur.rowcount


class CachedEmbedder:
    """An :class:`~resources.embeddings.base.Embedder` that consults an :class:`EmbeddingCache`.

    Only texts missing from the cache reach the wrapped embedder (each distinct text once);
    their vectors are stored before returning. Queries are cached under ``model_id + "#query"``
    because some backends embed queries and documents differently.

    Args:
        embedder: The embedder to wrap.
        cache: The cache to use.
    """

    def __init__(self, embedder: Embedder, cache: CacheBase) -> None:
        self.inner = embedder
        self.cache = cache
        self.model_id = embedder.model_id
        self.dimension = embedder.dimension

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, computing only cache misses; see ``Embedder.embed_documents``."""
        return self._embed(list(texts), self.model_id, self.inner.embed_documents)

    def cached_documents(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached document vectors of ``texts`` (None where missing); embeds nothing.

        The indexer uses it to give a re-indexed symbol its dense vector at once when the same
        text was embedded before (an unchanged function in an edited file, a reverted change).
        """
        try:
            found = self.cache.get_many(self.model_id, list(texts))
        except self.cache.errors as exc:
            log.warning("embedding cache lookup failed: %s", exc)
            return [None] * len(texts)
        return [vec if vec is not None and vec.shape[0] == self.dimension else None for vec in found]

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query, cached separately from documents; see ``Embedder.embed_query``."""
        return self._embed([text], self.model_id + _QUERY_SUFFIX, lambda t: self.inner.embed_query(t[0])[None, :])[0]

    def _embed(self, texts: list[str], key: str, compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        try:
            cached = self.cache.get_many(key, texts)
        except self.cache.errors as exc:  # a broken cache must not stop embedding
            log.warning("embedding cache lookup failed, embedding without it: %s", exc)
            cached = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        for i, (text, vec) in enumerate(zip(texts, cached, strict=True)):
            if vec is not None and vec.shape[0] == self.dimension:
                out[i] = vec
            else:
                missing.setdefault(text, []).append(i)
        if missing:
            todo = list(missing)
            fresh = np.asarray(compute(todo), dtype=np.float32)
            if fresh.shape != (len(todo), self.dimension):
                raise EmbeddingError(
                    f"{self.model_id} returned vectors of shape {fresh.shape}, expected {(len(todo), self.dimension)}."
                )
            for text, vec in zip(todo, fresh, strict=True):
                out[missing[text]] = vec
            try:
                self.cache.put_many(key, todo, fresh)
            except self.cache.errors as exc:
                log.warning("embedding cache write failed: %s", exc)
        return out

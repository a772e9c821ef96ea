"""The embedding cache and CachedEmbedder, on real files and the real local model: one contract
suite over both caches, ``EmbeddingCache`` (SQLite, WAL) and ``PostgresEmbeddingCache`` (a real
PostgreSQL cluster, ``tests/postgres_cluster.py``), then what is particular to each."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from resources.embeddings import CachedEmbedder, Embedder, EmbeddingCache, EmbeddingError, LocalMiniLMEmbedder

REPO = Path(__file__).parents[3]
Opener = Callable[..., Any]
"""``open_cache(**options)``: a new instance over the test's one store (a second connection)."""


@pytest.fixture(params=["sqlite", "postgres"])
def open_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens caches over one store of the backend under test, closing them afterwards."""
    opened: list[Any] = []
    if request.param == "sqlite":
        def make(**options: Any) -> Any:
            return EmbeddingCache(tmp_path / "c.sqlite3", **options)
    else:
        from resources.embeddings.cache_postgres import PostgresEmbeddingCache

        url = request.getfixturevalue("postgres_url")

        def make(**options: Any) -> Any:
            return PostgresEmbeddingCache(url, **options)

    def tracked(**options: Any) -> Any:
        opened.append(make(**options))
        return opened[-1]

    yield tracked
    for cache in opened:
        cache.close()


class Clock:
    """A manually advanced clock."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def vec(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_hit_miss_and_hit_rate(open_cache: Opener) -> None:
    cache = open_cache()
    assert cache.hit_rate == 0.0
    assert cache.get_many("m@8", ["a", "b"]) == [None, None]
    cache.put_many("m@8", ["a", "b"], np.stack([vec(1), vec(2)]))
    got = cache.get_many("m@8", ["a", "c", "b"])
    np.testing.assert_array_equal(got[0], vec(1))
    assert got[1] is None
    np.testing.assert_array_equal(got[2], vec(2))
    assert got[0].dtype == np.float32
    assert (cache.hits, cache.misses) == (2, 3)
    assert cache.hit_rate == pytest.approx(2 / 5)
    # The model id is part of the key.
    assert cache.get_many("other@8", ["a"]) == [None]
    assert cache.stats()["entries"] == 2
    cache.close()
    # Persistent across instances.
    reopened = open_cache()
    np.testing.assert_array_equal(reopened.get_many("m@8", ["b"])[0], vec(2))


def test_sqlite_cache_is_a_wal_database(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "c.sqlite3")
    assert cache.path.endswith("c.sqlite3")
    assert cache._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.close()


def test_lru_eviction(open_cache: Opener) -> None:
    clock = Clock()
    cache = open_cache(max_entries=3, clock=clock)
    for i, text in enumerate(["a", "b", "c"]):
        clock.now += 1
        cache.put_many("m", [text], [vec(i)])
    clock.now += 1
    assert cache.get_many("m", ["a"])[0] is not None  # "a" becomes the most recently used
    clock.now += 1
    cache.put_many("m", ["d"], [vec(9)])  # over the limit: the least recently used ("b") goes
    assert len(cache) == 3
    present = [v is not None for v in cache.get_many("m", ["a", "b", "c", "d"])]
    assert present == [True, False, True, True]


def test_ttl_expiry(open_cache: Opener) -> None:
    clock = Clock()
    cache = open_cache(ttl_seconds=30 * 86_400, clock=clock)
    cache.put_many("m", ["old"], [vec(1)])
    clock.now += 29 * 86_400
    cache.put_many("m", ["new"], [vec(2)])
    assert cache.get_many("m", ["old"])[0] is not None
    clock.now += 2 * 86_400  # "old" is now 31 days old, "new" 2 days
    assert cache.get_many("m", ["old", "new"])[0] is None
    assert cache.purge_expired() == 1
    assert len(cache) == 1
    cache.put_many("m", ["old"], [vec(3)])  # re-embedded entries start a new life
    np.testing.assert_array_equal(cache.get_many("m", ["old"])[0], vec(3))


def test_concurrent_threads(open_cache: Opener) -> None:
    shared = open_cache()
    second = open_cache()  # a second connection, as another process would have
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        cache = shared if worker % 2 else second
        try:
            for round_ in range(20):
                texts = [f"w{worker}-r{round_}-{i}" for i in range(5)] + ["shared"]  # one entry every writer writes
                cache.put_many("m", texts, [vec(worker * 1000 + round_ * 10 + i) for i in range(6)])
                got = cache.get_many("m", texts + ["never stored"])
                assert all(g is not None for g in got[:6]) and got[6] is None
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(shared) == 8 * 20 * 5 + 1
    np.testing.assert_array_equal(shared.get_many("m", ["w3-r7-2"])[0], vec(3 * 1000 + 70 + 2))


def test_process_killed_mid_transaction_leaves_prior_entries(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    script = textwrap.dedent(
        f"""
        import os, sys
        import numpy as np
        sys.path.insert(0, {str(REPO)!r})
        from resources.embeddings.cache import EmbeddingCache
        cache = EmbeddingCache({str(path)!r})
        cache.put_many("m", ["a", "b"], np.ones((2, 8), dtype=np.float32))
        steps = 0
        def die_mid_write():
            global steps
            steps += 1
            if steps > 50:  # well inside the INSERT of the batch below
                os._exit(17)
            return 0
        cache._conn.set_progress_handler(die_mid_write, 100)
        cache.put_many("m", [f"t{{i}}" for i in range(5000)], np.zeros((5000, 8), dtype=np.float32))
        sys.exit(0)  # not reached
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 17, proc.stderr
    assert (tmp_path / "c.sqlite3-wal").exists()  # the writer died with its WAL open

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    cache = EmbeddingCache(path)
    assert len(cache) == 2
    a, b, t0 = cache.get_many("m", ["a", "b", "t0"])
    np.testing.assert_array_equal(a, np.ones(8, dtype=np.float32))
    assert b is not None and t0 is None
    cache.put_many("m", ["c"], [vec(1)])  # and it is still writable
    assert len(cache) == 3


def test_corrupt_file_is_an_actionable_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EmbeddingError, match="delete the file"):
        EmbeddingCache(path)


class CountingEmbedder:
    """Delegates to a real embedder and records what it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.documents: list[list[str]] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents.append(list(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self.inner.embed_query(text)


def test_cached_embedder_embeds_misses_only(open_cache: Opener, local_embedder: LocalMiniLMEmbedder) -> None:
    counting = CountingEmbedder(local_embedder)
    cache = open_cache()
    embedder = CachedEmbedder(counting, cache)
    assert isinstance(embedder, Embedder)
    assert (embedder.model_id, embedder.dimension) == (local_embedder.model_id, 384)

    first = embedder.embed_documents(["def a(): pass", "def b(): pass", "def a(): pass"])
    assert counting.documents == [["def a(): pass", "def b(): pass"]]  # duplicates embedded once
    second = embedder.embed_documents(["def b(): pass", "def c(): pass", "def a(): pass"])
    assert counting.documents[-1] == ["def c(): pass"]
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_array_equal(first[0], second[2])
    np.testing.assert_allclose(
        second, local_embedder.embed_documents(["def b(): pass", "def c(): pass", "def a(): pass"]), atol=1e-5
    )

    q1 = embedder.embed_query("def a(): pass")
    q2 = embedder.embed_query("def a(): pass")
    assert counting.queries == ["def a(): pass"]  # queries are cached apart from documents
    np.testing.assert_array_equal(q1, q2)
    assert embedder.embed_documents([]).shape == (0, 384)
    assert cache.hit_rate > 0


def test_broken_cache_does_not_stop_embedding(open_cache: Opener, local_embedder: LocalMiniLMEmbedder) -> None:
    cache = open_cache()
    embedder = CachedEmbedder(local_embedder, cache)
    cache.close()  # every cache operation now raises (sqlite3.ProgrammingError, psycopg's PoolClosed)
    out = embedder.embed_documents(["def a(): pass"])
    np.testing.assert_allclose(out, local_embedder.embed_documents(["def a(): pass"]), atol=1e-6)


def test_postgres_writer_killed_mid_batch_leaves_prior_entries(postgres_url: str) -> None:
    """A replica SIGKILLed while its batch is being written: the batch's transaction never commits."""
    from resources.embeddings.cache_postgres import PostgresEmbeddingCache

    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(REPO)!r})
        from resources.embeddings.cache_postgres import PostgresEmbeddingCache
        cache = PostgresEmbeddingCache({postgres_url!r})
        cache.put_many("m", ["a", "b"], np.ones((2, 8), dtype=np.float32))
        print("writing", flush=True)
        for _ in range(100):  # far more than the kill leaves time for
            cache.put_many("m", [f"t{{i}}" for i in range(200_000)], np.zeros((200_000, 8), dtype=np.float32))
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing", proc.stderr.read() if proc.stderr else ""
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as watcher:  # killed once its batch is being inserted
            deadline = time.monotonic() + 60
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE 'INSERT INTO codemem_embeddings%%' "
                "AND xact_start IS NOT NULL").fetchone()[0]:
                assert time.monotonic() < deadline and proc.poll() is None, "the batch never started"
                time.sleep(0.01)
        proc.kill()
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -9
    cache = PostgresEmbeddingCache(postgres_url)
    try:
        assert len(cache) == 2
        a, t0 = cache.get_many("m", ["a", "t0"])
        np.testing.assert_array_equal(a, np.ones(8, dtype=np.float32))
        assert t0 is None
        cache.put_many("m", ["c"], [vec(1)])  # and it is still writable
        assert len(cache) == 3
    finally:
        cache.close()


def test_unreachable_postgres_is_an_actionable_error() -> None:
    from resources.embeddings.cache_postgres import PostgresEmbeddingCache
    from tests.postgres_cluster import _free_port

    url = f"postgresql://someone:s3cret@127.0.0.1:{_free_port()}/codemem"  # nothing listens there
    with pytest.raises(EmbeddingError, match="CODEMEM_DATABASE_URL") as failure:
        PostgresEmbeddingCache(url)
    assert "s3cret" not in str(failure.value)  # the password is not repeated


def test_postgres_eviction_neither_waits_nor_deadlocks_on_rows_in_use(postgres_url: str) -> None:
    """Another replica holds an expired row (it is re-embedding it) while this one evicts: the
    eviction skips that row, and both writes commit."""
    import psycopg

    from resources.embeddings.cache_postgres import TABLE, PostgresEmbeddingCache

    clock = Clock(1000.0)
    cache = PostgresEmbeddingCache(postgres_url, max_entries=5, ttl_seconds=100, clock=clock)
    try:
        cache.put_many("m", [f"old{i}" for i in range(5)], [vec(i) for i in range(5)])
        clock.now += 200  # all five expired
        with psycopg.connect(postgres_url) as other:  # the other replica's open transaction
            other.execute(f"UPDATE {TABLE} SET created = %s, last_used = %s WHERE text_hash = (SELECT text_hash FROM {TABLE} ORDER BY text_hash LIMIT 1)",
                          (clock.now, clock.now))
            started = time.monotonic()
            cache.put_many("m", ["new1", "new2"], [vec(10), vec(11)])  # over the limit: evicts what is free
            assert time.monotonic() - started < 5  # it did not wait for the other transaction
            other.execute("SELECT pg_advisory_xact_lock(hashtext('codemem codemem_embeddings eviction'))")  # free again
            other.commit()
        assert len(cache) == 3  # the two new entries and the row the other replica kept
        assert cache.get_many("m", ["new1", "new2"])[0] is not None
    finally:
        cache.close()


def test_a_role_that_may_only_read_and_write_rows_opens_the_cache(postgres_url: str) -> None:
    """The table made once (by a role allowed to): a replica's role needs no CREATE privilege."""
    import psycopg

    from resources.embeddings.cache_postgres import TABLE, PostgresEmbeddingCache

    PostgresEmbeddingCache(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS replica")
        admin.execute("CREATE ROLE replica LOGIN")
        admin.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO replica")
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    cache = PostgresEmbeddingCache(postgres_url.replace("codemem@", "replica@"))
    try:
        cache.put_many("m", ["a"], [vec(1)])
        assert cache.get_many("m", ["a"])[0] is not None
    finally:
        cache.close()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"REVOKE ALL ON {TABLE} FROM replica")
            admin.execute("DROP ROLE replica")


def test_a_database_that_stops_answering_is_skipped_for_a_while(postgres_url: str, local_embedder: LocalMiniLMEmbedder) -> None:
    """Each call would wait for a connection first: after one failure the cache is left alone, and
    embedding goes on without it at once."""
    from resources.embeddings.cache_postgres import RETRY_AFTER_S, PostgresEmbeddingCache

    cache = PostgresEmbeddingCache(postgres_url)
    embedder = CachedEmbedder(local_embedder, cache)
    cache._down_until = cache._clock_now() + RETRY_AFTER_S  # as after a failed call
    started = time.monotonic()
    out = embedder.embed_documents(["def a(): pass"])
    assert time.monotonic() - started < 2
    np.testing.assert_allclose(out, local_embedder.embed_documents(["def a(): pass"]), atol=1e-6)
    cache._down_until = 0.0
    assert len(cache) == 0  # nothing was written while it was skipped
    cache.close()

"""The stores' shared SQLite plumbing: opening, transactions, the meta table, per-store durability."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from resources.embeddings.cache import EmbeddingCache
from resources.manifest import Manifest
from resources.memory.ledger import Ledger
from resources.sqlite import immediate_transaction, open_database, read_meta, write_meta

_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def _pragmas(conn) -> tuple[str, str, int]:  # noqa: ANN001
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = _SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]]
    foreign_keys = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    return journal, synchronous, foreign_keys


def test_a_database_opens_private_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "store.db"
    conn = open_database(path, synchronous="NORMAL")
    try:
        assert _pragmas(conn) == ("wal", "NORMAL", 0)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    finally:
        conn.close()


def test_each_store_keeps_its_durability(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "memory.db")
    manifest = Manifest(tmp_path / "index.db")
    cache = EmbeddingCache(tmp_path / "embeddings.db")
    try:
        assert _pragmas(ledger._store.connection) == ("wal", "FULL", 1)
        assert _pragmas(manifest.store._conn) == ("wal", "NORMAL", 0)
        assert _pragmas(cache._conn) == ("wal", "NORMAL", 0)
    finally:
        ledger.close()
        manifest.close()
        cache.close()


def test_meta_values_round_trip_and_a_failed_transaction_leaves_none(tmp_path: Path) -> None:
    conn = open_database(tmp_path / "store.db", synchronous="FULL")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    lock = threading.RLock()
    try:
        assert read_meta(conn, "model") is None
        with immediate_transaction(conn, lock):
            write_meta(conn, "model", "a")
            write_meta(conn, "model", "b")
        assert read_meta(conn, "model") == "b"
        with pytest.raises(RuntimeError), immediate_transaction(conn, lock):
            write_meta(conn, "model", "c")
            raise RuntimeError("fails mid-transaction")
        assert read_meta(conn, "model") == "b"
    finally:
        conn.close()


def test_the_store_meta_accessors_use_it(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "memory.db")
    manifest = Manifest(tmp_path / "index.db")
    try:
        ledger.set_meta("embedding_model", "m1")
        manifest.set_meta("embedding_model", "m2")
        assert ledger.meta("embedding_model") == "m1" and ledger.meta("schema_version") is not None
        assert manifest.get_meta("embedding_model") == "m2" and manifest.get_meta("missing") is None
    finally:
        ledger.close()
        manifest.close()

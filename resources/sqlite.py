"""The SQLite plumbing of codemem's stores: the ledger, the manifest and the embedding cache.

Each store opens one autocommit connection shared by its threads (WAL, a 30 s busy timeout, the
file created private first), writes in ``BEGIN IMMEDIATE`` transactions under its own lock and
keeps its settings in a ``meta (key, value)`` table. Durability stays the store's choice: the
ledger is the system of record (``synchronous=FULL``); the manifest and the cache can be rebuilt
(``NORMAL``). Standard library only.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from resources.private_files import make_private_file

BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for another connection's write lock before it fails."""


def open_database(
    path: Path | str, *, synchronous: Literal["FULL", "NORMAL"], foreign_keys: bool = False, shared: bool = False
) -> sqlite3.Connection:
    """Open (creating if needed) a store's database: autocommit, shareable between threads, WAL.

    Args:
        path: The database file, created private (0600) before SQLite opens it;
            ``":memory:"`` for an in-memory database.
        synchronous: ``FULL`` for a system of record (a commit survives a power cut),
            ``NORMAL`` for state that can be rebuilt.
        foreign_keys: Enforce the schema's foreign keys.
        shared: A database in a directory other users (and maybe other machines) write, such as
            the enterprise memory scope's: its rights are left to the directory (no 0600), and it
            uses a rollback journal, since WAL needs every writer on one host (SQLite's docs).

    Returns:
        The connection; the caller serializes its use with its own lock.
    """
    if str(path) != ":memory:" and not shared:
        make_private_file(Path(path))
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA journal_mode={'DELETE' if shared else 'WAL'}")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    if foreign_keys:
        conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextmanager
def immediate_transaction(conn: sqlite3.Connection, lock: threading.RLock) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` under ``lock`` (an autocommit connection); any exception
    rolls the whole transaction back and propagates."""
    with lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def remove_sidecars(path: Path) -> None:
    """Delete the ``-wal`` and ``-shm`` files beside the SQLite file ``path`` (closed, replaced or
    moved away: SQLite would otherwise apply an old log to whatever file takes the name)."""
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of the SQLite file ``source`` (its write-ahead log included, SQLite's
    backup API) at ``target``, readable by its owner only."""
    src = sqlite3.connect(str(source), timeout=BUSY_TIMEOUT_S)
    try:
        dest = sqlite3.connect(str(make_private_file(target)))
        try:
            src.backup(dest)
        finally:
            dest.close()
    finally:
        src.close()


def read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """The value of ``key`` in the store's ``meta`` table, or None when it is not set."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def write_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set ``key`` in the store's ``meta`` table (inside the caller's transaction)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value)
    )


def integrity_problem(path: Path, *, empty_is_truncated: bool = False) -> str | None:
    """What ``PRAGMA integrity_check`` (or opening) says is wrong with the SQLite file ``path``;
    None when it is sound, absent, or cannot be read now (disk full, I/O error, locked: no verdict
    on its contents). ``empty_is_truncated``: an empty file is a problem (SQLite reads one as an
    empty database)."""
    if not path.exists():
        return None
    if path.stat().st_size == 0:
        return "the file is empty (truncated)" if empty_is_truncated else None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return None
    except sqlite3.DatabaseError as exc:
        return f"{type(exc).__name__}: {exc}"
    if rows != ["ok"]:
        return "; ".join(str(r) for r in rows[:3])
    return None

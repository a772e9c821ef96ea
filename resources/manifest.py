"""The index manifest: what is indexed, at which content hash, and what still needs a vector.

A SQLite database (WAL) under the state dir. A file's row is committed only after its points
and its subgraph are written, and the file is recorded as in flight before them, so a run killed
in the middle leaves the old hash and the record in place and the next run redoes (or deletes)
that file; cross-file edges about to change in the graph are recorded as unsettled the same way
(every store write is idempotent): the index converges.

A file's references (JSON) are its largest column (37 MB for Linux's ``fs/``, a third of the
manifest): they are stored zlib-compressed (``pack``: 7.8× smaller, ~0.2 s for all of ``fs/``); a
row written before as text is read as it is (``unpack``). Embedding texts stay plain: each is
short (~340 bytes), so zlib saves 1.6× for ~1 s of the main thread's time on ``fs/``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resources.sqlite import immediate_transaction, open_database, read_meta, write_meta

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    language TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    indexed_at TEXT NOT NULL,
    symbol_count INTEGER NOT NULL,
    error_count INTEGER NOT NULL,
    refs TEXT NOT NULL,
    design_digest TEXT,
    calls BLOB
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
    has_dense INTEGER NOT NULL DEFAULT 0,
    path_qualified_name TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS symbols_path ON symbols(path);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_qualified ON symbols(qualified_name);
CREATE INDEX IF NOT EXISTS symbols_pending ON symbols(has_dense);
CREATE TABLE IF NOT EXISTS resolved_edges (
    source TEXT NOT NULL,
    type TEXT NOT NULL,
    target TEXT NOT NULL,
    properties TEXT NOT NULL,
    PRIMARY KEY (source, type, target)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS dirty (id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS in_flight (path TEXT NOT NULL, ids TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS in_flight_path ON in_flight(path);
CREATE TABLE IF NOT EXISTS ref_names (
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    PRIMARY KEY (path, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ref_names_name ON ref_names(name);
CREATE TABLE IF NOT EXISTS changed_names (name TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skipped (
    path TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    reason TEXT NOT NULL,
    lasting INTEGER NOT NULL DEFAULT 1,
    seen INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS unsettled_edges (
    source TEXT NOT NULL,
    type TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (source, type, target)
);
"""


@dataclass(slots=True, frozen=True)
class FileState:
    """What the manifest knows of an indexed file."""

    path: str
    language: str
    content_hash: str
    size: int
    mtime_ns: int
    indexed_at: str
    symbol_count: int
    error_count: int
    design_digest: str | None = None
    """What the design derivation reads of the file (``pipelines.design.digest``); written with the
    file's row, not read back by ``files()``/``file()`` (``design_signature`` reads it)."""


@dataclass(slots=True, frozen=True)
class SkippedState:
    """A file the parsers could not index (binary, over the parser's time limit), at the content
    it had then: it is not read again until that content changes (or a forced run: ``codemem repair``,
    a full reindex)."""

    path: str
    content_hash: str
    size: int
    mtime_ns: int
    reason: str
    lasting: bool = True
    """The content alone decides (a binary file); else another run may succeed (a parse over the
    time limit on a busy machine)."""
    seen: int = 1
    """Runs in a row that skipped it at this content."""

    @property
    def settled(self) -> bool:
        """True when it is not worth reading again at this content: binary, or skipped twice."""
        return self.lasting or self.seen >= 2

    def matches(self, size: int, mtime_ns: int, content_hash: str | None = None) -> bool:
        """True when the file is still what was skipped: by its content hash when given, else by
        its size and modification time."""
        if content_hash is not None:
            return content_hash == self.content_hash
        return size == self.size and mtime_ns == self.mtime_ns


@dataclass(slots=True)
class SymbolRow:
    """A symbol as the manifest keeps it (for resolution and the dense backlog)."""

    id: str
    path: str
    name: str
    local_name: str
    qualified_name: str
    kind: str
    container: str | None
    language: str
    embed_text: str
    has_dense: bool
    path_qualified_name: str = ""
    """The path-based name of earlier releases (``pipelines.qualified_names``), still looked up."""


REF_NAMES_COMPLETE = "ref_names_complete"
"""Meta key set once ``ref_names`` holds every indexed file's names (a manifest of an earlier
release gets them at its next whole-repository resolution)."""
FILES_WRITTEN = "files_written"
"""Meta key counting the transactions that replaced files' rows (and so their graph nodes): a
derived layer that wrote edges to those nodes compares it to know whether they may be gone."""
RESOLVE_EVERYTHING = "resolve_everything"
"""Meta key set when a change can affect the resolution of any file (see ``resolution_scope``)."""

PACK_LEVEL = 3
"""zlib level of the packed column: on Linux's ``fs/`` refs, 1 gives 7.3×, 3 7.8× in less time, 6 8.7× in 2.7× the time."""


def pack(text: str) -> bytes:
    """A packed column's value as stored: the text, zlib-compressed (a BLOB, told apart from older TEXT rows)."""
    return zlib.compress(text.encode("utf-8"), PACK_LEVEL)


def unpack(value: str | bytes) -> str:
    """A packed column's text (a row written before packing holds the text itself)."""
    return value if isinstance(value, str) else zlib.decompress(value).decode("utf-8")


def _refs(refs: str | bytes, calls: bytes | None) -> dict[str, Any]:
    """A file's references as stored: its calls (most of them by size) are a column of their own,
    read only where they are wanted; a row of an earlier release keeps them in ``refs``."""
    found: dict[str, Any] = json.loads(unpack(refs))
    if calls is not None:
        found["calls"] = json.loads(unpack(calls))
    return found


_PATH_QUALIFIED = "CREATE INDEX IF NOT EXISTS symbols_path_qualified ON symbols(path_qualified_name)"


def _files_written(conn: sqlite3.Connection) -> int:
    """The ``FILES_WRITTEN`` count (0 before the first write)."""
    value = read_meta(conn, FILES_WRITTEN)
    return int(value) if value and value.isdigit() else 0


MANIFEST_FILE = "index.db"
"""The manifest's file in the project's state directory."""


class Manifest:
    """Thread-safe access to the manifest database."""

    def __init__(self, path: Path) -> None:
        """Open (creating if needed) the manifest at ``path``."""
        self._conn = open_database(path, synchronous="NORMAL")
        self._conn.executescript(SCHEMA)
        self._add_path_qualified_name()
        self._add_column("files", "design_digest", "TEXT")
        self._add_column("files", "calls", "BLOB")
        self._add_column("skipped", "lasting", "INTEGER NOT NULL DEFAULT 1")
        self._add_column("skipped", "seen", "INTEGER NOT NULL DEFAULT 1")
        if self._add_column("files", "written_seq", "INTEGER"):
            # rows of an earlier release: written at or before now, as far as anyone can tell
            self._conn.execute("UPDATE files SET written_seq = ? WHERE written_seq IS NULL", (_files_written(self._conn),))
        self._lock = threading.RLock()
        if self.get_meta(REF_NAMES_COMPLETE) is None and not self._conn.execute("SELECT 1 FROM files LIMIT 1").fetchone():
            self.set_meta(REF_NAMES_COMPLETE, "1")  # empty: every file written from now on records its names

    def _add_path_qualified_name(self) -> None:
        """Give a manifest from before issue 19 its ``path_qualified_name`` column (filled when
        its files are parsed again: the extraction version changed with it)."""
        self._add_column("symbols", "path_qualified_name", "TEXT NOT NULL DEFAULT ''")
        self._conn.execute(_PATH_QUALIFIED)

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

    def written_after(self, seq: int) -> list[str]:
        """The files written (their rows and graph nodes replaced) after ``FILES_WRITTEN`` was ``seq``."""
        with self._lock:
            return [row[0] for row in self._conn.execute("SELECT path FROM files WHERE written_seq > ? ORDER BY path", (seq,))]

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write transaction."""
        with immediate_transaction(self._conn, self._lock) as conn:
            yield conn

    def files(self) -> dict[str, FileState]:
        """Every indexed file by path."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, error_count FROM files"
            ).fetchall()
        return {row[0]: FileState(*row) for row in rows}

    def file(self, path: str) -> FileState | None:
        """One file's state, or None."""
        with self._lock:
            row = self._conn.execute(
                "SELECT path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, error_count "
                "FROM files WHERE path = ?",
                (path,),
            ).fetchone()
        return FileState(*row) if row else None

    def symbol_ids_of(self, paths: Iterable[str]) -> dict[str, list[str]]:
        """Symbol ids per path that the stores may hold: the indexed symbols, plus the points of
        writes still in flight (written by a run that was interrupted before its manifest commit)."""
        found: dict[str, list[str]] = {}
        with self._lock:
            for path in paths:
                ids = [r[0] for r in self._conn.execute("SELECT id FROM symbols WHERE path = ?", (path,))]
                for (written,) in self._conn.execute("SELECT ids FROM in_flight WHERE path = ?", (path,)):
                    ids += json.loads(written)
                found[path] = list(dict.fromkeys(ids))
        return found

    def begin_writes(self, ids_by_path: dict[str, list[str]]) -> None:
        """Record, before any store write or deletion, the files about to change there (and the
        point ids about to be written).

        Committed first, so a run interrupted before the files' manifest commit leaves them named:
        the next run redoes them even when their content is back to the indexed hash, and removes
        every point the interrupted run wrote (``symbol_ids_of``), the file deleted meanwhile
        included. The records go with the commit (``replace_files``, ``remove_files``).
        """
        with self.transaction() as conn:  # one row per file and attempt: repeated interruptions add up
            conn.executemany(
                "INSERT INTO in_flight(path, ids) VALUES (?, ?)", [(path, json.dumps(ids)) for path, ids in ids_by_path.items()]
            )

    def in_flight(self) -> set[str]:
        """Paths whose store writes have no manifest commit yet (an interrupted run's)."""
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT DISTINCT path FROM in_flight")}

    def replace_files(self, conn: sqlite3.Connection, entries: Sequence[tuple[FileState, dict[str, Any], list[SymbolRow]]]) -> None:
        """Inside a transaction: replace the rows of these files (state, refs, symbols).

        ``has_dense`` is taken from the rows as given: the points were just rewritten, so a
        symbol has a dense vector only if the indexer attached one (from the embedding cache).
        """
        seq = None
        if entries:  # the files' graph nodes are replaced with their edges: derived layers may have edges to restore
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                (FILES_WRITTEN,),
            )
            seq = _files_written(conn)
        for state, refs, symbols in entries:
            conn.execute("DELETE FROM symbols WHERE path = ?", (state.path,))
            conn.execute("DELETE FROM in_flight WHERE path = ?", (state.path,))
            conn.execute("DELETE FROM skipped WHERE path = ?", (state.path,))
            lookups = {key: value for key, value in refs.items() if key != "calls"}
            conn.execute(
                "INSERT OR REPLACE INTO files (path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, "
                "error_count, refs, design_digest, calls, written_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.path, state.language, state.content_hash, state.size, state.mtime_ns,
                    state.indexed_at, state.symbol_count, state.error_count, pack(json.dumps(lookups)), state.design_digest,
                    pack(json.dumps(refs.get("calls", []))), seq,
                ),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO symbols (id, path, name, local_name, qualified_name, kind, container, "
                "language, embed_text, has_dense, path_qualified_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.id, s.path, s.name, s.local_name, s.qualified_name, s.kind, s.container, s.language,
                        s.embed_text, int(s.has_dense), s.path_qualified_name,
                    )
                    for s in symbols
                ],
            )

    @staticmethod
    def mark_dirty(conn: sqlite3.Connection, ids: Iterable[str]) -> None:
        """Record (inside the caller's transaction) node ids whose subgraph was replaced or
        deleted: their cross-file edges went with them and must be resolved again."""
        conn.executemany("INSERT OR IGNORE INTO dirty(id) VALUES (?)", [(i,) for i in ids])

    def dirty(self) -> set[str]:
        """Node ids waiting for cross-file resolution (left by this run or an interrupted one)."""
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT id FROM dirty")}

    def clear_dirty(self, conn: sqlite3.Connection, ids: Iterable[str]) -> None:
        """Forget resolved ids (inside the transaction that records the resolution)."""
        conn.executemany("DELETE FROM dirty WHERE id = ?", [(i,) for i in ids])

    # -- the scope of the next cross-file resolution -------------------------------------------

    @staticmethod
    def set_ref_names(conn: sqlite3.Connection, names_by_path: dict[str, Iterable[str]]) -> None:
        """Inside a transaction: the names each of these files' references mention (replacing theirs)."""
        for path, names in names_by_path.items():
            conn.execute("DELETE FROM ref_names WHERE path = ?", (path,))
            conn.executemany("INSERT OR IGNORE INTO ref_names VALUES (?, ?)", [(path, n) for n in sorted(names)])

    def fill_ref_names(self, names_by_path: dict[str, Iterable[str]]) -> None:
        """Every indexed file's referenced names at once (a manifest of an earlier release)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM ref_names")
            self.set_ref_names(conn, names_by_path)
            write_meta(conn, REF_NAMES_COMPLETE, "1")

    def paths_mentioning(self, names: Iterable[str]) -> set[str]:
        """Files whose references mention any of ``names``."""
        found: set[str] = set()
        wanted = sorted(set(names))
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in self._conn.execute(f"SELECT DISTINCT path FROM ref_names WHERE name IN ({marks})", chunk))
        return found

    def refs_of(self, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored references of these files (a file not indexed is absent)."""
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for path in paths:
                row = self._conn.execute("SELECT refs, calls FROM files WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    found[path] = _refs(*row)
        return found

    @staticmethod
    def note_changed_names(conn: sqlite3.Connection, names: Iterable[str], everything: bool = False) -> None:
        """Inside the transaction of a write: names whose definitions changed (the next resolution
        re-resolves the files that mention them), or that any file's resolution may have changed."""
        conn.executemany("INSERT OR IGNORE INTO changed_names VALUES (?)", [(n,) for n in sorted(set(names))])
        if everything:
            write_meta(conn, RESOLVE_EVERYTHING, "1")

    def resolution_scope(self) -> tuple[bool, set[str]]:
        """(whether the next resolution must cover every file, the names changed since the last one)."""
        with self._lock:
            everything = read_meta(self._conn, RESOLVE_EVERYTHING) == "1" or read_meta(self._conn, REF_NAMES_COMPLETE) != "1"
            return everything, {r[0] for r in self._conn.execute("SELECT name FROM changed_names")}

    def skipped_files(self) -> dict[str, SkippedState]:
        """The files the parsers could not index, by path, at the content they had then."""
        with self._lock:
            rows = self._conn.execute("SELECT path, content_hash, size, mtime_ns, reason, lasting, seen FROM skipped").fetchall()
        return {row[0]: SkippedState(*row[:5], lasting=bool(row[5]), seen=row[6]) for row in rows}

    @staticmethod
    def remember_skipped(conn: sqlite3.Connection, states: Iterable[SkippedState]) -> None:
        """Inside a transaction: record files the parsers could not index (replacing earlier records;
        one skipped again at the same content counts one more run)."""
        conn.executemany(
            "INSERT INTO skipped (path, content_hash, size, mtime_ns, reason, lasting, seen) VALUES (?, ?, ?, ?, ?, ?, 1) "
            "ON CONFLICT (path) DO UPDATE SET seen = CASE WHEN skipped.content_hash = excluded.content_hash "
            "THEN skipped.seen + 1 ELSE 1 END, content_hash = excluded.content_hash, size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, reason = excluded.reason, lasting = excluded.lasting",
            [(s.path, s.content_hash, s.size, s.mtime_ns, s.reason, int(s.lasting)) for s in states],
        )

    @staticmethod
    def forget_skipped(conn: sqlite3.Connection, paths: Iterable[str] | None = None) -> None:
        """Inside a transaction: drop the skip records of ``paths`` (every record when None)."""
        if paths is None:
            conn.execute("DELETE FROM skipped")
        else:
            conn.executemany("DELETE FROM skipped WHERE path = ?", [(path,) for path in paths])

    def touch_file(self, path: str, mtime_ns: int) -> None:
        """Record a new mtime for a file whose content hash did not change."""
        with self.transaction() as conn:
            conn.execute("UPDATE files SET mtime_ns = ? WHERE path = ?", (mtime_ns, path))

    def remove_files(self, conn: sqlite3.Connection, paths: Iterable[str]) -> None:
        """Inside a transaction: forget these files and their symbols."""
        for path in paths:
            conn.execute("DELETE FROM symbols WHERE path = ?", (path,))
            conn.execute("DELETE FROM files WHERE path = ?", (path,))
            conn.execute("DELETE FROM in_flight WHERE path = ?", (path,))
            conn.execute("DELETE FROM ref_names WHERE path = ?", (path,))
            conn.execute("DELETE FROM skipped WHERE path = ?", (path,))

    def find_symbols(self, *, symbol_id: str | None = None, qualified_name: str | None = None) -> list[SymbolRow]:
        """Symbols by id or by global qualified name (overloads share a name); a name no symbol
        has is looked up as a path-based name of earlier releases (``path_qualified_name``)."""
        if symbol_id is not None:
            return self._symbols_where("id", symbol_id)
        return self._symbols_where("qualified_name", qualified_name) or self._symbols_where("path_qualified_name", qualified_name)

    def _symbols_where(self, column: str, value: str | None) -> list[SymbolRow]:
        """Up to 20 symbols whose ``column`` equals ``value``."""
        if not value:
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, path, name, local_name, qualified_name, kind, container, language, '', has_dense, path_qualified_name "
                f"FROM symbols WHERE {column} = ? ORDER BY path, local_name LIMIT 20",
                (value,),
            ).fetchall()
        return [SymbolRow(*row[:9], has_dense=bool(row[9]), path_qualified_name=row[10]) for row in rows]

    def find_symbols_in(self, path: str) -> list[SymbolRow]:
        """The symbols of one file."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, path, name, local_name, qualified_name, kind, container, language, '', has_dense, path_qualified_name "
                "FROM symbols WHERE path = ?",
                (path,),
            ).fetchall()
        return [SymbolRow(*row[:9], has_dense=bool(row[9]), path_qualified_name=row[10]) for row in rows]

    def all_symbols(self) -> list[SymbolRow]:
        """Every symbol (for cross-file resolution)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, path, name, local_name, qualified_name, kind, container, language, '', has_dense, "
                "path_qualified_name FROM symbols"
            ).fetchall()
        return [SymbolRow(*row[:9], has_dense=bool(row[9]), path_qualified_name=row[10]) for row in rows]

    def symbol_ids(self) -> set[str]:
        """The id of every symbol."""
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT id FROM symbols")}

    def declarations(self, paths: Iterable[str]) -> set[str]:
        """The ids of the symbols of these files that only declare a function (C/C++ prototypes and
        in-class declarations, ``refs["declarations"]``)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return set()
        with self._lock:
            rows = self._conn.execute(
                f"SELECT refs FROM files WHERE path IN ({', '.join('?' * len(wanted))})", wanted
            ).fetchall()
        return {symbol_id for (refs,) in rows for symbol_id in json.loads(unpack(refs)).get("declarations", [])}

    def all_refs(self, calls_of: Iterable[str] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
        """Per file: (language, refs) where refs holds imports, calls and inheritance; with
        ``calls_of``, the calls of those files only (what a resolution scoped to them reads: the
        calls of every file are ~90% of the references)."""
        wanted = None if calls_of is None else set(calls_of)
        with self._lock:
            rows = self._conn.execute("SELECT path, language, refs, calls FROM files").fetchall()
        return {path: (language, _refs(refs, calls if wanted is None or path in wanted else None))
                for path, language, refs, calls in rows}

    def pending_dense(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` (id, embed_text) pairs that have no dense vector yet."""
        with self._lock:
            return self._conn.execute(
                "SELECT id, embed_text FROM symbols WHERE has_dense = 0 ORDER BY path, id LIMIT ?", (limit,)
            ).fetchall()

    def still_pending(self, pairs: Sequence[tuple[str, str]]) -> set[str]:
        """Ids of ``(id, embed_text)`` pairs whose symbol still exists with that text and no vector.

        A re-index may replace a symbol while its vector is being computed; a vector of an old
        text must not be attached to the new one.
        """
        found: set[str] = set()
        wanted = dict(pairs)
        with self._lock:
            ids = list(wanted)
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for sid, text in self._conn.execute(
                    f"SELECT id, embed_text FROM symbols WHERE has_dense = 0 AND id IN ({marks})", chunk
                ):
                    if wanted[sid] == text:
                        found.add(sid)
        return found

    def mark_dense(self, ids: Sequence[str]) -> None:
        """Record that these symbols have their dense vector."""
        with self.transaction() as conn:
            conn.executemany("UPDATE symbols SET has_dense = 1 WHERE id = ?", [(i,) for i in ids])

    def reset_dense(self) -> None:
        """Forget every dense vector (after a model change)."""
        with self.transaction() as conn:
            conn.execute("UPDATE symbols SET has_dense = 0")

    def dense_counts(self) -> tuple[int, int]:
        """(symbols with a dense vector, all symbols)."""
        with self._lock:
            done, total = self._conn.execute(
                "SELECT COALESCE(SUM(has_dense), 0), COUNT(*) FROM symbols"
            ).fetchone()
        return int(done), int(total)

    def resolved_edges(self) -> set[tuple[str, str, str]]:
        """The cross-file edges currently in the graph as (source, type, target)."""
        with self._lock:
            return {tuple(r) for r in self._conn.execute("SELECT source, type, target FROM resolved_edges")}  # type: ignore[misc]

    def begin_edge_changes(self, edges: Iterable[tuple[str, str, str]]) -> None:
        """Record, before the graph changes, the edges about to be added to or removed from it.

        ``replace_resolved_edges`` forgets them; an interrupted resolution leaves them behind, and
        the next one treats their state in the graph as unknown (``unsettled_edges``).
        """
        with self.transaction() as conn:  # in key order: a B-tree filled in order writes each page once
            conn.executemany("INSERT OR IGNORE INTO unsettled_edges VALUES (?, ?, ?)", sorted(edges))

    def unsettled_edges(self) -> set[tuple[str, str, str]]:
        """Edges an interrupted resolution may or may not have added or removed in the graph."""
        with self._lock:
            return {tuple(r) for r in self._conn.execute("SELECT source, type, target FROM unsettled_edges")}  # type: ignore[misc]

    def replace_resolved_edges(
        self,
        added: Sequence[tuple[str, str, str, dict[str, Any]]],
        removed: Sequence[tuple[str, str, str]],
        resolved_ids: Iterable[str] = (),
    ) -> None:
        """Apply a diff to the resolved edge set (and forget the dirty ids it resolved, the edges
        recorded as unsettled and the changed names: the graph now holds the set)."""
        with self.transaction() as conn:
            self.clear_dirty(conn, resolved_ids)
            conn.execute("DELETE FROM unsettled_edges")
            conn.execute("DELETE FROM changed_names")
            conn.execute("DELETE FROM meta WHERE key = ?", (RESOLVE_EVERYTHING,))
            conn.executemany("DELETE FROM resolved_edges WHERE source = ? AND type = ? AND target = ?", sorted(removed))
            conn.executemany(  # in key order, as in begin_edge_changes
                "INSERT OR REPLACE INTO resolved_edges VALUES (?, ?, ?, ?)",
                sorted((s, t, d, json.dumps(p)) for s, t, d, p in added),
            )

    def forget_content_hashes(self) -> int:
        """Make every indexed file look changed (its next index parses it again, writing its
        symbols, points and subgraph over the old ones); returns how many files."""
        with self.transaction() as conn:
            self.forget_skipped(conn)  # new parsers may read what the old ones skipped
            return conn.execute("UPDATE files SET content_hash = ''").rowcount

    def get_meta(self, key: str) -> str | None:
        """A metadata value."""
        with self._lock:
            return read_meta(self._conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value."""
        with self.transaction() as conn:
            write_meta(conn, key, value)

    def design_signature(self, globs_tag: str) -> str:
        """A digest of every indexed file's path and design digest (``pipelines.design.digest``):
        it changes with a file added or removed, or with what the design derivation reads of one.
        A file without a digest of these globs (indexed before digests, or with other doc globs)
        counts by its content hash and index time, as any change of it."""
        digest = hashlib.sha1()
        prefix = f"{globs_tag}:"
        with self._lock:
            for path, design, content_hash, indexed_at in self._conn.execute(
                "SELECT path, design_digest, content_hash, indexed_at FROM files ORDER BY path"
            ):
                known = design if design and design.startswith(prefix) else f"{content_hash}\0{indexed_at}"
                digest.update(f"{path}\0{known}\n".encode())
        return digest.hexdigest()

    def content_hashes(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The content hash of each of ``paths`` (None when it is not indexed)."""
        found: dict[str, str | None] = {}
        with self._lock:
            for path in sorted(set(paths)):
                row = self._conn.execute("SELECT content_hash FROM files WHERE path = ?", (path,)).fetchone()
                found[path] = row[0] if row else None
        return found

    def defining_hashes(self, qualified_names: Iterable[str]) -> dict[str, list[str]]:
        """For each qualified name (the language's own or the path-based one), the sorted content
        hashes of the files that define it (none when no indexed file does)."""
        found: dict[str, list[str]] = {}
        with self._lock:
            for name in sorted(set(qualified_names)):
                rows = self._conn.execute(
                    "SELECT DISTINCT f.content_hash FROM symbols s JOIN files f ON f.path = s.path "
                    "WHERE s.qualified_name = ? OR s.path_qualified_name = ?", (name, name),
                ).fetchall()
                found[name] = sorted(r[0] for r in rows)
        return found

    def has_files(self) -> bool:
        """True when at least one file is indexed (cheap at any size)."""
        with self._lock:
            return self._conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None

    def counts(self) -> dict[str, int]:
        """Files, symbols and resolved edges indexed."""
        with self._lock:
            files = self._conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            symbols = self._conn.execute("SELECT COUNT(*) FROM symbols").fetchone()[0]
            edges = self._conn.execute("SELECT COUNT(*) FROM resolved_edges").fetchone()[0]
        return {"files": files, "symbols": symbols, "resolved_edges": edges}

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()

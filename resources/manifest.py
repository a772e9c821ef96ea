"""The index manifest: what is indexed, at which content hash, and what still needs a vector.

A SQLite database (WAL) under the state dir. A file is recorded as in flight before its points
are written, its row is committed once they are durable, and it leaves flight only once its
subgraph is written too (``hold_in_flight``, ``settle_in_flight``), so a run killed in the middle
leaves the record in place and the next run redoes (or deletes) that file whatever hash its row
holds; cross-file edges about to change in the graph are recorded as unsettled the same way
(every store write is idempotent): the index converges.

A file's references (JSON) are its largest column (37 MB for Linux's ``fs/``, a third of the
manifest): they are stored zlib-compressed (``manifest_store.pack``: 7.8× smaller, ~0.2 s for all of ``fs/``); a
row written before as text is read as it is (``unpack``). Embedding texts (~320 bytes a symbol,
342 MB of the kernel's 1.5 GB manifest while no dense vector is computed) are packed too in SQLite
(1.6× smaller), by the parse workers (``SymbolRow.embed_packed``), not the writing thread;
PostgreSQL keeps them as text (its column is TEXT).

The rows live in a store (``resources.manifest_store``): the SQLite file, or in server mode a
schema of the shared PostgreSQL database, which every replica and indexing worker writes directly.
The SQL here is written once, in what both engines take. A write transaction (``transaction()``)
hands out a connection that the static methods below take as ``conn``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from resources.manifest_store import FILES_WRITTEN as FILES_WRITTEN  # (where the derived layers import it from)
from resources.manifest_store import ManifestStore, SqliteManifestStore, files_written, pack, unpack
from resources.sqlite import read_meta, write_meta

if TYPE_CHECKING:
    from resources.settings import Settings

log = structlog.get_logger(__name__)


_SYMBOL_COLUMNS = (
    "path", "name", "local_name", "qualified_name", "kind", "container", "language", "embed_text", "has_dense", "path_qualified_name",
)
_SYMBOL_UPDATE = ", ".join(f"{c} = excluded.{c}" for c in _SYMBOL_COLUMNS)
_SYMBOL_DIFFERS = " OR ".join(
    f"symbols.{c} <> excluded.{c} OR (symbols.{c} IS NULL) <> (excluded.{c} IS NULL)" for c in _SYMBOL_COLUMNS
)
"""A symbol row written again only where a value differs (NULL against a value too, in SQL both
SQLite before 3.39 and PostgreSQL run): a file rewritten with one function added leaves its other
rows (and their five indexes) as they were."""


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
    """What the dense model reads of the symbol; kept only until its vector is stored (a stored
    vector's text is never read again: ~0.34 KB a symbol, 18 MB on Linux's ``fs/``)."""
    has_dense: bool
    path_qualified_name: str = ""
    """The path-based name of earlier releases (``pipelines.qualified_names``), still looked up."""
    embed_packed: bytes | None = None
    """``embed_text`` packed (``manifest_store.pack``) where it was made: what a SQLite manifest
    stores (packed on write when None)."""


COMPACT_FROM_BYTES = 64 << 20
"""A manifest under this size is not compacted after a large run (a few MB at most to gain)."""
REF_NAMES_COMPLETE = "ref_names_complete_v2"
"""Meta key set once ``ref_names`` holds every indexed file's names (a manifest of an earlier
release gets them at its next whole-repository resolution; v2: identifiers in any script, not
ASCII only)."""
INDEX_RUN = "index run"
"""What one process of a project does at a time (``Manifest.alone``): index runs and design refreshes
(and the background embedding's writes of doc chunks' vectors)."""
RESOLVE_EVERYTHING = "resolve_everything"
"""Meta key set when a change can affect the resolution of any file (see ``resolution_scope``)."""

def _refs(refs: str | bytes, calls: bytes | None) -> dict[str, Any]:
    """A file's references as stored: its calls (most of them by size) are a column of their own,
    read only where they are wanted; a row of an earlier release keeps them in ``refs``."""
    found: dict[str, Any] = json.loads(unpack(refs))
    if calls is not None:
        found["calls"] = json.loads(unpack(calls))
    return found


def _chunks(items: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    """``items`` in parts of at most ``size`` (a statement's parameters are bounded)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


_TARGETS_AT_ONCE = 30_000
"""Targets looked up per scan of the resolved edges (keyed by source: each part reads them all,
~0.6 s on the Linux kernel's 2.5 million; a 1% change touches ~11,000 ids). Under SQLite's
default bound on a statement's parameters (32,766) and PostgreSQL's (65,535)."""


def _select_symbols(conn: Any, where: str, params: Sequence[Any]) -> list[SymbolRow]:
    """The symbols matching ``where``, without their embedding text. Values repeated across rows
    (paths, names, kinds, containers) share one string each: a whole repository's resolution
    holds every symbol (1.07 million for the Linux kernel)."""
    rows = conn.execute(  # read as built (a million rows fetched at once held ~0.5 GB beside them)
        "SELECT id, path, name, local_name, qualified_name, kind, container, language, '', has_dense, "
        f"path_qualified_name FROM symbols WHERE {where}", params,
    )
    shared: dict[str | None, str | None] = {}
    one = shared.setdefault
    return [
        SymbolRow(symbol_id, one(path, path), one(name, name), one(local, local), qualified, one(kind, kind),  # type: ignore[arg-type]
                  one(container, container), one(language, language), "", has_dense=bool(dense), path_qualified_name=path_qualified)
        for symbol_id, path, name, local, qualified, kind, container, language, _, dense, path_qualified in rows
    ]


def _symbols_in(conn: Any, column: str, values: Sequence[str]) -> list[SymbolRow]:
    """The symbols whose ``column`` is one of ``values`` (an indexed column: id, path, name)."""
    return [row for part in _chunks(values) for row in _select_symbols(conn, f"{column} IN ({','.join('?' * len(part))})", part)]


def _last_of_each_id(symbols: Sequence[SymbolRow]) -> list[SymbolRow]:
    """One row per id, the last one given, in the order of those last rows (what the rows of
    SQLite's ``INSERT OR REPLACE`` were: a repeated id's row deleted and added again)."""
    last: dict[str, int] = {s.id: i for i, s in enumerate(symbols)}
    return [s for i, s in enumerate(symbols) if last[s.id] == i]


JOBS_KEPT = 100
"""Finished background jobs kept for ``job_status`` (the oldest go first)."""
INTERRUPTED_JOBS_KEPT_S = 7 * 86_400
"""How long a job that never finished (its process stopped) stays recorded after its last record."""
MANIFEST_FILE = "index.db"
"""The manifest's file in the project's state directory."""


class Manifest:
    """Thread-safe access to the manifest.

    Args:
        path: The SQLite file (embedded mode), opened or created; or
        store: where the rows live (``resources.manifest_store``; ``open_manifest`` picks it).
    """

    def __init__(self, path: Path | None = None, *, store: ManifestStore | None = None) -> None:
        if store is None:
            if path is None:
                raise TypeError("Manifest needs a path or a store")
            store = SqliteManifestStore(path)
        self.store = store
        self._held = threading.local()  # per thread: the locks its writes check (``alone(guard=True)``)
        self._dense_counts: tuple[object, tuple[int, int]] | None = None  # (the store's change marker, the counts)
        if self.get_meta(REF_NAMES_COMPLETE) is None and not self.has_files():
            self.set_meta(REF_NAMES_COMPLETE, "1")  # empty: every file written from now on records its names

    def written_after(self, seq: int) -> list[str]:
        """The files whose rows were written (their graph nodes replaced then, or, while they are in
        flight, still to be) after ``FILES_WRITTEN`` was ``seq``."""
        with self.store.reading() as conn:
            return [row[0] for row in conn.execute("SELECT path FROM files WHERE written_seq > ? ORDER BY path", (seq,))]

    @contextmanager
    def alone(self, what: str, *, wait: bool = True, stop: Any = None, guard: bool = False) -> Iterator[None]:
        """Wait until no other process of the project does ``what`` (an index run), and keep it so
        for the block (in server mode, where replicas and workers share the manifest; in embedded
        mode the state dir's one owner already is alone). ``wait=False``: ``ManifestError`` at once
        when another process does it; ``stop`` (an event): give up waiting once it is set.
        ``guard``: this thread's write transactions meanwhile first check that the lock is still
        held (``transaction``: the work it keeps to one process must not go on without it)."""
        with self.store.alone(what, wait=wait, stop=stop) as held:
            if held is None or not guard:
                yield
                return
            guards = self._guards()
            guards.append(held)
            try:
                yield
            finally:
                guards.remove(held)

    def _guards(self) -> list[Any]:
        """The locks this thread's write transactions check (``alone(guard=True)``)."""
        held = getattr(self._held, "locks", None)
        if held is None:
            held = self._held.locks = []
        return held

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One atomic write transaction, alone among the manifest's writers (in every process); a
        ``ManifestError`` before it starts when a lock ``alone`` holds was lost (another process may
        be running the same work: this one must stop before it writes)."""
        for lock in self._guards():
            lock.check()
        with self.store.writing() as conn:
            yield conn

    def files(self) -> dict[str, FileState]:
        """Every indexed file by path."""
        with self.store.reading() as conn:
            rows = conn.execute(
                "SELECT path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, error_count FROM files"
            ).fetchall()
        return {row[0]: FileState(*row) for row in rows}

    def paths(self) -> list[str]:
        """Every indexed file's path, in no set order (``files()``' keys without building each
        file's state: a tenth of its time on a large tree)."""
        with self.store.reading() as conn:
            return [row[0] for row in conn.execute("SELECT path FROM files")]

    def stats(self) -> dict[str, tuple[int, int, str]]:
        """Every indexed file's (size, mtime_ns, content_hash) by path, as last seen."""
        with self.store.reading() as conn:
            return {row[0]: (row[1], row[2], row[3]) for row in conn.execute("SELECT path, size, mtime_ns, content_hash FROM files")}

    def languages(self) -> dict[str, str]:
        """Every indexed file's language by path."""
        with self.store.reading() as conn:
            return dict(conn.execute("SELECT path, language FROM files").fetchall())

    def file(self, path: str) -> FileState | None:
        """One file's state, or None."""
        with self.store.reading() as conn:
            row = conn.execute(
                "SELECT path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, error_count "
                "FROM files WHERE path = ?",
                (path,),
            ).fetchone()
        return FileState(*row) if row else None

    def symbol_ids_of(self, paths: Iterable[str]) -> dict[str, list[str]]:
        """Symbol ids per path that the stores may hold: the indexed symbols, plus the points of
        writes still in flight (written by a run that was interrupted before its manifest commit)."""
        found: dict[str, list[str]] = {}
        with self.store.reading() as conn:
            for path in paths:
                ids = [r[0] for r in conn.execute("SELECT id FROM symbols WHERE path = ?", (path,))]
                for (written,) in conn.execute("SELECT ids FROM in_flight WHERE path = ?", (path,)):
                    ids += json.loads(written)
                found[path] = list(dict.fromkeys(ids))
        return found

    def dense_flags(self, paths: Iterable[str]) -> dict[str, bool]:
        """Whether each symbol of these files has a dense vector stored, by id."""
        found: dict[str, bool] = {}
        with self.store.reading() as conn:
            for path in paths:
                found.update((i, bool(dense)) for i, dense in conn.execute("SELECT id, has_dense FROM symbols WHERE path = ?", (path,)))
        return found

    def begin_writes(self, ids_by_path: dict[str, list[str]]) -> None:
        """Record, before any store write or deletion, the files about to change there (and the
        point ids about to be written).

        Committed first, so a run interrupted before the files' manifest commit leaves them named:
        the next run redoes them even when their content is back to the indexed hash, and removes
        every point the interrupted run wrote (``symbol_ids_of``), the file deleted meanwhile
        included. The records go with the commit (``replace_files``, ``remove_files``), which may
        keep one back until the file's subgraph is written (``hold_in_flight``).
        """
        with self.transaction() as conn:  # one row per file and attempt: repeated interruptions add up
            conn.executemany(
                "INSERT INTO in_flight(path, ids) VALUES (?, ?)", [(path, json.dumps(ids)) for path, ids in ids_by_path.items()]
            )

    @staticmethod
    def hold_in_flight(conn: Any, paths: Iterable[str]) -> None:
        """Inside the transaction that commits these files' rows: keep them in flight until
        ``settle_in_flight`` (their subgraphs are written after the commit: ``pipelines.
        index_graph_writer``), so that a run interrupted in between has the next one redo them."""
        conn.executemany("INSERT INTO in_flight(path, ids) VALUES (?, '[]')", [(path,) for path in paths])

    def settle_in_flight(self, paths: Iterable[str]) -> None:
        """These files' writes are complete in every store: they are no longer in flight."""
        with self.transaction() as conn:
            conn.executemany("DELETE FROM in_flight WHERE path = ?", [(path,) for path in paths])

    def in_flight(self) -> set[str]:
        """Paths whose writes are not complete in every store (an interrupted run's, or a run's
        whose graph write failed): the next run redoes them."""
        with self.store.reading() as conn:
            return {row[0] for row in conn.execute("SELECT DISTINCT path FROM in_flight")}

    def compact_after_rewrite(self, symbols_written: int) -> bool:
        """Compact a SQLite manifest (``SqliteManifestStore.compact``) that a run just wrote at
        least half of (a first index, a rebuild), once it is ``COMPACT_FROM_BYTES`` or more; True
        when it was compacted."""
        store = self.store
        if not isinstance(store, SqliteManifestStore) or symbols_written <= 0:
            return False
        try:
            large = store.path.stat().st_size >= COMPACT_FROM_BYTES
        except OSError:
            return False
        return large and symbols_written * 2 >= self.counts()["symbols"] and store.compact()

    def _stored_text(self, symbol: SymbolRow) -> str | bytes:
        """A symbol's embedding text as this store keeps it: packed in SQLite, text in PostgreSQL."""
        if not isinstance(self.store, SqliteManifestStore):
            return symbol.embed_text
        return symbol.embed_packed if symbol.embed_packed is not None else pack(symbol.embed_text)

    def replace_files(self, conn: Any, entries: Sequence[tuple[FileState, dict[str, Any], list[SymbolRow]]]) -> None:
        """Inside a transaction: replace the rows of these files (state, refs, symbols).

        ``has_dense`` is taken from the rows as given: a rewritten point has a dense vector only
        if the indexer attached one (from the embedding cache); a point held as it was keeps its
        own, and its row says so (``pipelines.index_writes.write_vectors``).
        """
        seq = None
        if entries:  # the files' graph nodes are replaced with their edges: derived layers may have edges to restore
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = CAST(meta.value AS INTEGER) + 1",
                (FILES_WRITTEN,),
            )
            seq = files_written(conn)
        for state, refs, symbols in entries:
            rows = _last_of_each_id(symbols)
            kept = {s.id for s in rows}
            conn.executemany(  # (a symbol still there keeps its row: only what differs is written below)
                "DELETE FROM symbols WHERE id = ?",
                [(i,) for (i,) in conn.execute("SELECT id FROM symbols WHERE path = ?", (state.path,)).fetchall() if i not in kept],
            )
            conn.execute("DELETE FROM in_flight WHERE path = ?", (state.path,))
            conn.execute("DELETE FROM skipped WHERE path = ?", (state.path,))
            conn.execute("DELETE FROM files WHERE path = ?", (state.path,))  # a new rowid: the newest row (ManifestReader)
            lookups = {key: value for key, value in refs.items() if key != "calls"}
            conn.execute(
                "INSERT INTO files (path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, "
                "error_count, refs, design_digest, calls, written_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.path, state.language, state.content_hash, state.size, state.mtime_ns,
                    state.indexed_at, state.symbol_count, state.error_count, pack(json.dumps(lookups)), state.design_digest,
                    pack(json.dumps(refs.get("calls", []))), seq,
                ),
            )
            conn.executemany(
                "INSERT INTO symbols (id, path, name, local_name, qualified_name, kind, container, language, "
                "embed_text, has_dense, path_qualified_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) "
                f"DO UPDATE SET {_SYMBOL_UPDATE} WHERE {_SYMBOL_DIFFERS}",
                [
                    (
                        s.id, s.path, s.name, s.local_name, s.qualified_name, s.kind, s.container, s.language,
                        "" if s.has_dense else self._stored_text(s), int(s.has_dense), s.path_qualified_name,
                    )
                    for s in rows
                ],
            )

    @staticmethod
    def mark_dirty(conn: Any, ids: Iterable[str]) -> None:
        """Record (inside the caller's transaction) node ids whose subgraph was replaced or
        deleted: their cross-file edges went with them and must be resolved again."""
        conn.executemany("INSERT INTO dirty(id) VALUES (?) ON CONFLICT DO NOTHING", [(i,) for i in ids])

    def dirty(self) -> set[str]:
        """Node ids waiting for cross-file resolution (left by this run or an interrupted one)."""
        with self.store.reading() as conn:
            return {row[0] for row in conn.execute("SELECT id FROM dirty")}

    def clear_dirty(self, conn: Any, ids: Iterable[str]) -> None:
        """Forget resolved ids (inside the transaction that records the resolution)."""
        conn.executemany("DELETE FROM dirty WHERE id = ?", [(i,) for i in ids])

    @staticmethod
    def mark_rewritten(conn: Any, paths: Iterable[str]) -> None:
        """Record (inside the caller's transaction) files whose subgraph was written over the
        graph's (``pipelines.index_writes``): their nodes kept their edges, which the next
        resolution checks, the files in its scope."""
        conn.executemany("INSERT INTO rewritten(path) VALUES (?) ON CONFLICT DO NOTHING", [(p,) for p in paths])

    def rewritten(self) -> set[str]:
        """Files written over since the last resolution (``mark_rewritten``)."""
        with self.store.reading() as conn:
            return {row[0] for row in conn.execute("SELECT path FROM rewritten")}

    def resolution_pending(self) -> bool:
        """Whether a write left anything for cross-file resolution (``dirty``, ``rewritten``)."""
        with self.store.reading() as conn:
            return any(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in ("dirty", "rewritten"))

    # -- the scope of the next cross-file resolution -------------------------------------------

    @staticmethod
    def set_ref_names(conn: Any, names_by_path: dict[str, Iterable[str]]) -> None:
        """Inside a transaction: the names each of these files' references mention (replacing
        theirs: the names that came and went are written, not the file's every name again)."""
        for path, names in names_by_path.items():
            wanted = set(names)
            held = {name for (name,) in conn.execute("SELECT name FROM ref_names WHERE path = ?", (path,)).fetchall()}
            conn.executemany("DELETE FROM ref_names WHERE path = ? AND name = ?", [(path, n) for n in sorted(held - wanted)])
            conn.executemany("INSERT INTO ref_names VALUES (?, ?) ON CONFLICT DO NOTHING", [(path, n) for n in sorted(wanted - held)])

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
        with self.store.reading() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in conn.execute(f"SELECT DISTINCT path FROM ref_names WHERE name IN ({marks})", chunk))
        return found

    def refs_of(self, paths: Iterable[str], *, calls: bool = True) -> dict[str, dict[str, Any]]:
        """The stored references of these files (a file not indexed is absent); without their
        calls when ``calls`` is False (a row of an earlier release may still hold them)."""
        found: dict[str, dict[str, Any]] = {}
        columns = "refs, calls" if calls else "refs, NULL"
        with self.store.reading() as conn:
            for path in paths:
                row = conn.execute(f"SELECT {columns} FROM files WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    found[path] = _refs(*row)
        return found

    @staticmethod
    def note_changed_names(conn: Any, names: Iterable[str], everything: bool = False) -> None:
        """Inside the transaction of a write: names whose definitions changed (the next resolution
        re-resolves the files that mention them), or that any file's resolution may have changed."""
        conn.executemany("INSERT INTO changed_names VALUES (?) ON CONFLICT DO NOTHING", [(n,) for n in sorted(set(names))])
        if everything:
            write_meta(conn, RESOLVE_EVERYTHING, "1")

    @staticmethod
    def note_changed_paths(conn: Any, paths: dict[str, str], *, existed: bool) -> None:
        """Inside the transaction of a write: files (path → language) that came into the index
        (``existed`` False) or left it (imports and includes resolve to paths: the next resolution
        re-resolves the files whose imports name other files). A file noted again keeps its first
        note: whether it was indexed at the last resolution."""
        conn.executemany("INSERT INTO changed_paths VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                         [(path, language, int(existed)) for path, language in sorted(paths.items())])

    def resolution_scope(self) -> tuple[bool, set[str]]:
        """(whether the next resolution must cover every file, the names changed since the last one)."""
        with self.store.reading() as conn:
            everything = read_meta(conn, RESOLVE_EVERYTHING) == "1" or read_meta(conn, REF_NAMES_COMPLETE) != "1"
            return everything, {r[0] for r in conn.execute("SELECT name FROM changed_names")}

    @staticmethod
    def member_owners(conn: Any, language: str, kinds: Iterable[str]) -> set[str]:
        """Inside a transaction: the qualified names that own a symbol of ``language`` and one of
        ``kinds`` inside a container (``ns::A`` for ``ns::A::f``: a C++ class's member functions)."""
        wanted = sorted(kinds)
        rows = conn.execute(
            f"SELECT DISTINCT qualified_name FROM symbols WHERE language = ? AND container <> '' AND kind IN ({','.join('?' * len(wanted))})",
            (language, *wanted))
        return {name.rpartition("::")[0] for (name,) in rows if "::" in name}

    def changed_paths(self) -> dict[str, tuple[str, bool]]:
        """The files that came or went since the last resolution: path → (language, whether it
        was indexed at that resolution)."""
        with self.store.reading() as conn:
            return {path: (language, bool(existed))
                    for path, language, existed in conn.execute("SELECT path, language, existed FROM changed_paths")}

    def names_defined_in(self, paths: Iterable[str], languages: Iterable[str]) -> set[str]:
        """The names of the symbols of these files that are in one of ``languages``."""
        kinds = sorted(set(languages))
        found: set[str] = set()
        with self.store.reading() as conn:
            for part in _chunks(sorted(set(paths))):
                found.update(r[0] for r in conn.execute(
                    f"SELECT DISTINCT name FROM symbols WHERE path IN ({','.join('?' * len(part))}) "
                    f"AND language IN ({','.join('?' * len(kinds))})", [*part, *kinds]))
        return found

    def skipped_files(self) -> dict[str, SkippedState]:
        """The files the parsers could not index, by path, at the content they had then."""
        with self.store.reading() as conn:
            rows = conn.execute("SELECT path, content_hash, size, mtime_ns, reason, lasting, seen FROM skipped").fetchall()
        return {row[0]: SkippedState(*row[:5], lasting=bool(row[5]), seen=row[6]) for row in rows}

    @staticmethod
    def remember_skipped(conn: Any, states: Iterable[SkippedState]) -> None:
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
    def forget_skipped(conn: Any, paths: Iterable[str] | None = None) -> None:
        """Inside a transaction: drop the skip records of ``paths`` (every record when None)."""
        if paths is None:
            conn.execute("DELETE FROM skipped")
        else:
            conn.executemany("DELETE FROM skipped WHERE path = ?", [(path,) for path in paths])

    def touch_files(self, checked: Sequence[tuple[str, int, int]], checked_at: str) -> None:
        """Record the stats (path, size, mtime_ns) of files read again and found unchanged, in one
        transaction, with ``checked_at`` (a time before they were read) as their ``indexed_at``:
        what ``pipelines.index_prepare.stats_vouch`` compares their mtime with next time."""
        if not checked:
            return
        with self.transaction() as conn:
            conn.executemany("UPDATE files SET size = ?, mtime_ns = ?, indexed_at = ? WHERE path = ?",
                             [(size, mtime_ns, checked_at, path) for path, size, mtime_ns in checked])

    def remove_files(self, conn: Any, paths: Iterable[str]) -> None:
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
        with self.store.reading() as conn:
            return _select_symbols(conn, f"{column} = ? ORDER BY path, local_name LIMIT 20", (value,))

    def find_symbols_in(self, path: str) -> list[SymbolRow]:
        """The symbols of one file."""
        with self.store.reading() as conn:
            return _select_symbols(conn, "path = ?", (path,))

    def all_symbols(self) -> list[SymbolRow]:
        """Every symbol (for cross-file resolution)."""
        with self.store.reading() as conn:
            return _select_symbols(conn, "1 = 1", ())

    def resolution_symbols(
        self, paths: Iterable[str], names: Iterable[str], kinds: Iterable[str], *,
        ids: Iterable[str] = (), kinds_by_name_only_in: Iterable[str] = (),
    ) -> list[SymbolRow]:
        """The symbols a cross-file resolution scoped to ``paths`` can reach (``pipelines.resolution_scope``):
        those of the files, every symbol of ``kinds`` (the types: hierarchies are walked through any
        file) but those of the languages ``kinds_by_name_only_in``, every symbol named like a name
        the files' references mention (``ref_names``) or one of ``names``, and those of ``ids``."""
        wanted_paths = sorted(set(paths))
        wanted_kinds = sorted(set(kinds))
        skipped_languages = sorted(set(kinds_by_name_only_in))
        found: dict[str, SymbolRow] = {}
        with self.store.reading() as conn:
            wanted_names = set(names)
            for part in _chunks(wanted_paths):
                marks = ",".join("?" * len(part))
                wanted_names.update(r[0] for r in conn.execute(f"SELECT DISTINCT name FROM ref_names WHERE path IN ({marks})", part))
            found.update((row.id, row) for row in _symbols_in(conn, "path", wanted_paths))
            if wanted_kinds:
                where = f"kind IN ({','.join('?' * len(wanted_kinds))})"
                if skipped_languages:
                    where += f" AND language NOT IN ({','.join('?' * len(skipped_languages))})"
                found.update((row.id, row) for row in _select_symbols(conn, where, [*wanted_kinds, *skipped_languages]))
            found.update((row.id, row) for row in _symbols_in(conn, "name", sorted(wanted_names)))
            found.update((row.id, row) for row in _symbols_in(conn, "id", sorted(set(ids))))
        return list(found.values())

    def symbols_by(self, *, ids: Iterable[str] = (), names: Iterable[str] = ()) -> list[SymbolRow]:
        """The symbols with one of these ids or one of these names, in id order."""
        found: dict[str, SymbolRow] = {}
        with self.store.reading() as conn:
            found.update((row.id, row) for row in _symbols_in(conn, "id", sorted(set(ids))))
            found.update((row.id, row) for row in _symbols_in(conn, "name", sorted(set(names))))
        return [found[key] for key in sorted(found)]

    def present_symbol_ids(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that are symbols of the index (their ids read alone: a pull's check on
        the Linux kernel asks about a million)."""
        found: set[str] = set()
        with self.store.reading() as conn:
            for part in _chunks(sorted(set(ids))):
                found.update(row[0] for row in conn.execute(f"SELECT id FROM symbols WHERE id IN ({','.join('?' * len(part))})", part))
        return found

    def symbol_ids(self) -> set[str]:
        """The id of every symbol."""
        with self.store.reading() as conn:
            return {row[0] for row in conn.execute("SELECT id FROM symbols")}

    def declarations(self, paths: Iterable[str]) -> set[str]:
        """The ids of the symbols of these files that only declare a function (C/C++ prototypes and
        in-class declarations, ``refs["declarations"]``)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return set()
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT refs FROM files WHERE path IN ({', '.join('?' * len(wanted))})", wanted
            ).fetchall()
        return {symbol_id for (refs,) in rows for symbol_id in json.loads(unpack(refs)).get("declarations", [])}

    def all_refs(self, calls_of: Iterable[str] | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
        """Per file: (language, refs) where refs holds imports, calls and inheritance; with
        ``calls_of``, the calls of those files only (what a resolution scoped to them reads: the
        calls of every file are ~90% of the references)."""
        wanted = None if calls_of is None else set(calls_of)
        if wanted is not None and not wanted:  # the structure only: no file's calls read at all
            with self.store.reading() as conn:
                return {path: (language, _refs(refs, None)) for path, language, refs in conn.execute("SELECT path, language, refs FROM files")}
        with self.store.reading() as conn:
            return {path: (language, _refs(refs, calls if wanted is None or path in wanted else None))
                    for path, language, refs, calls in conn.execute("SELECT path, language, refs, calls FROM files")}

    def calls_by_file(self, paths: Iterable[str] | None = None, chunk: int = 500) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Each file's calls (of ``paths``, or of every file), read ``chunk`` files at a time: a
        whole-repository resolution holds one chunk's calls at once, not every file's (on the
        Linux kernel ~2 GB decoded)."""
        if paths is None:
            with self.store.reading() as conn:
                paths = [row[0] for row in conn.execute("SELECT path FROM files ORDER BY path")]
        wanted = sorted(set(paths))
        for start in range(0, len(wanted), chunk):
            part = wanted[start:start + chunk]
            with self.store.reading() as conn:
                rows = conn.execute(f"SELECT path, refs, calls FROM files WHERE path IN ({', '.join('?' * len(part))}) ORDER BY path", part).fetchall()
            for path, refs, calls in rows:
                yield path, json.loads(unpack(calls)) if calls is not None else json.loads(unpack(refs)).get("calls", [])

    def pending_dense(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` (id, embed_text) pairs that have no dense vector yet."""
        with self.store.reading() as conn:
            rows = conn.execute(
                "SELECT id, embed_text FROM symbols WHERE has_dense = 0 ORDER BY path, id LIMIT ?", (limit,)
            ).fetchall()
        return [(symbol_id, unpack(text)) for symbol_id, text in rows]

    def still_pending(self, pairs: Sequence[tuple[str, str]]) -> set[str]:
        """Ids of ``(id, embed_text)`` pairs whose symbol still exists with that text and no vector.

        A re-index may replace a symbol while its vector is being computed; a vector of an old
        text must not be attached to the new one.
        """
        found: set[str] = set()
        wanted = dict(pairs)
        with self.store.reading() as conn:
            ids = list(wanted)
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for sid, text in conn.execute(
                    f"SELECT id, embed_text FROM symbols WHERE has_dense = 0 AND id IN ({marks})", chunk
                ):
                    if wanted[sid] == unpack(text):
                        found.add(sid)
        return found

    def mark_dense(self, ids: Sequence[str]) -> None:
        """Record that these symbols have their dense vector (their text is no longer kept: a
        model change rebuilds the index from the files, ``pipelines.index_stores.reset_index``)."""
        with self.transaction() as conn:
            conn.executemany("UPDATE symbols SET has_dense = 1, embed_text = '' WHERE id = ?", [(i,) for i in ids])

    def dense_counts(self) -> tuple[int, int]:
        """(symbols with a dense vector, all symbols): counted again only when the manifest may have
        changed since the last count (a scan of every symbol: ~85 ms at a million, which every
        ``code_search`` asks for), where the store can tell (SQLite); always counted otherwise."""
        marker = getattr(self.store, "change_marker", None)
        before = marker() if marker is not None else None
        cached = self._dense_counts
        if before is not None and cached is not None and cached[0] == before:
            return cached[1]
        with self.store.reading() as conn:
            done, total = conn.execute(
                "SELECT COALESCE(SUM(has_dense), 0), COUNT(*) FROM symbols"
            ).fetchone()
        counts = (int(done), int(total))
        self._dense_counts = (before, counts) if before is not None else None
        return counts

    def resolved_edges(self) -> set[tuple[str, str, str]]:
        """The cross-file edges currently in the graph as (source, type, target)."""
        with self.store.reading() as conn:
            return {tuple(r) for r in conn.execute("SELECT source, type, target FROM resolved_edges")}  # type: ignore[misc]

    def edges_touching(self, sources: Iterable[str], targets: Iterable[str]) -> set[tuple[str, str, str]]:
        """The cross-file edges in the graph that start in ``sources`` or end in ``targets`` (those
        by target read the whole set in the store: it is keyed by source)."""
        found: set[tuple[str, str, str]] = set()
        with self.store.reading() as conn:
            for part in _chunks(sorted(set(sources))):
                found.update(conn.execute(  # type: ignore[arg-type]
                    f"SELECT source, type, target FROM resolved_edges WHERE source IN ({','.join('?' * len(part))})", part))
            for part in _chunks(sorted(set(targets)), _TARGETS_AT_ONCE):
                found.update(conn.execute(  # type: ignore[arg-type]
                    f"SELECT source, type, target FROM resolved_edges WHERE target IN ({','.join('?' * len(part))})", part))
        return {tuple(edge) for edge in found}  # type: ignore[misc]

    def import_targets(self, targets: Iterable[str]) -> set[tuple[str, str, str]]:
        """The IMPORTS edges in the graph that end in one of ``targets``."""
        found: set[tuple[str, str, str]] = set()
        with self.store.reading() as conn:
            for part in _chunks(sorted(set(targets)), _TARGETS_AT_ONCE):
                found.update(tuple(edge) for edge in conn.execute(  # type: ignore[misc]
                    f"SELECT source, type, target FROM resolved_edges WHERE type = 'IMPORTS' AND target IN ({','.join('?' * len(part))})", part))
        return found

    def begin_edge_changes(self, edges: Iterable[tuple[str, str, str]]) -> None:
        """Record, before the graph changes, the edges about to be added to or removed from it.

        ``replace_resolved_edges`` forgets them; an interrupted resolution leaves them behind, and
        the next one treats their state in the graph as unknown (``unsettled_edges``).
        """
        with self.transaction() as conn:  # in key order: a B-tree filled in order writes each page once
            conn.executemany("INSERT INTO unsettled_edges VALUES (?, ?, ?) ON CONFLICT DO NOTHING", sorted(edges))

    def resolved_edge_properties(self, edges: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], dict[str, Any]]:
        """The properties of these cross-file edges, as recorded (an edge not recorded is absent)."""
        wanted = set(edges)
        sources = sorted({source for source, _, _ in wanted})
        found: dict[tuple[str, str, str], dict[str, Any]] = {}
        with self.store.reading() as conn:
            for start in range(0, len(sources), 500):
                part = sources[start:start + 500]
                rows = conn.execute(
                    f"SELECT source, type, target, properties FROM resolved_edges WHERE source IN ({', '.join('?' * len(part))})", part)
                for source, edge_type, target, properties in rows:
                    if (source, edge_type, target) in wanted:
                        found[(source, edge_type, target)] = json.loads(properties)
        return found

    def resolved_edges_of_type(self, edge_type: str) -> list[tuple[str, str, dict[str, Any]]]:
        """(source, target, properties) of every cross-file edge of ``edge_type`` in the graph."""
        with self.store.reading() as conn:
            rows = conn.execute("SELECT source, target, properties FROM resolved_edges WHERE type = ?", (edge_type,)).fetchall()
        return [(source, target, json.loads(properties)) for source, target, properties in rows]

    def resolved_pairs(self, edge_type: str) -> list[tuple[str, str]]:
        """(source, target) of every cross-file edge of ``edge_type`` in the graph."""
        with self.store.reading() as conn:
            return [(source, target) for source, target in conn.execute("SELECT source, target FROM resolved_edges WHERE type = ?", (edge_type,))]

    @staticmethod
    def forget_resolved_edges(conn: Any, edges: Iterable[tuple[str, str, str]] | None = None) -> None:
        """Inside a transaction: drop these (source, type, target) edges from the resolved set (every
        one, and every edge recorded as unsettled, when None: the graph holds none of them)."""
        if edges is None:
            conn.execute("DELETE FROM resolved_edges")
            conn.execute("DELETE FROM unsettled_edges")
        else:
            conn.executemany("DELETE FROM resolved_edges WHERE source = ? AND type = ? AND target = ?", list(edges))

    def unsettled_edges(self) -> set[tuple[str, str, str]]:
        """Edges an interrupted resolution may or may not have added or removed in the graph."""
        with self.store.reading() as conn:
            return {tuple(r) for r in conn.execute("SELECT source, type, target FROM unsettled_edges")}  # type: ignore[misc]

    def replace_resolved_edges(
        self,
        added: Iterable[tuple[str, str, str, dict[str, Any]]],
        removed: Sequence[tuple[str, str, str]],
        resolved_ids: Iterable[str] = (),
        resolved_paths: Iterable[str] = (),
    ) -> None:
        """Apply a diff to the resolved edge set (and forget the dirty ids and rewritten files it
        resolved, the edges recorded as unsettled and the changed names and paths: the graph now
        holds the set). ``added`` is written as it comes (in key order it writes each page once:
        give it sorted)."""
        with self.transaction() as conn:
            self.clear_dirty(conn, resolved_ids)
            conn.executemany("DELETE FROM rewritten WHERE path = ?", [(p,) for p in resolved_paths])
            conn.execute("DELETE FROM unsettled_edges")
            conn.execute("DELETE FROM changed_names")
            conn.execute("DELETE FROM changed_paths")
            conn.execute("DELETE FROM meta WHERE key = ?", (RESOLVE_EVERYTHING,))
            conn.executemany("DELETE FROM resolved_edges WHERE source = ? AND type = ? AND target = ?", sorted(removed))
            conn.executemany(
                "INSERT INTO resolved_edges VALUES (?, ?, ?, ?) "
                "ON CONFLICT (source, type, target) DO UPDATE SET properties = excluded.properties",
                ((s, t, d, json.dumps(p)) for s, t, d, p in added),
            )

    def forget_content_hashes(self) -> int:
        """Make every indexed file look changed (its next index parses it again, writing its
        symbols, points and subgraph over the old ones); returns how many files."""
        with self.transaction() as conn:
            self.forget_skipped(conn)  # new parsers may read what the old ones skipped
            return conn.execute("UPDATE files SET content_hash = ''").rowcount

    def get_meta(self, key: str) -> str | None:
        """A metadata value."""
        with self.store.reading() as conn:
            return read_meta(conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value."""
        with self.transaction() as conn:
            write_meta(conn, key, value)

    @staticmethod
    def read_meta(conn: Any, key: str) -> str | None:
        """Inside a transaction: a metadata value."""
        return read_meta(conn, key)

    @staticmethod
    def write_meta(conn: Any, key: str, value: str | None) -> None:
        """Inside a transaction: set a metadata value (remove it: None)."""
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            write_meta(conn, key, value)

    def design_signature(self, globs_tag: str) -> str:
        """A digest of every indexed file's path and design digest (``pipelines.design.digest``):
        it changes with a file added or removed, or with what the design derivation reads of one.
        A file without a digest of these globs (indexed before digests, or with other doc globs)
        counts by its content hash and index time, as any change of it."""
        digest = hashlib.sha1()
        prefix = f"{globs_tag}:"
        with self.store.reading() as conn:
            for path, design, content_hash, indexed_at in conn.execute(
                "SELECT path, design_digest, content_hash, indexed_at FROM files ORDER BY path"
            ):
                known = design if design and design.startswith(prefix) else f"{content_hash}\0{indexed_at}"
                digest.update(f"{path}\0{known}\n".encode())
        return digest.hexdigest()

    def content_hashes(self, paths: Iterable[str]) -> dict[str, str | None]:
        """The content hash of each of ``paths`` (None when it is not indexed)."""
        found: dict[str, str | None] = {}
        with self.store.reading() as conn:
            for path in sorted(set(paths)):
                row = conn.execute("SELECT content_hash FROM files WHERE path = ?", (path,)).fetchone()
                found[path] = row[0] if row else None
        return found

    def defining_hashes(self, qualified_names: Iterable[str]) -> dict[str, list[str]]:
        """For each qualified name (the language's own or the path-based one), the sorted content
        hashes of the files that define it (none when no indexed file does)."""
        found: dict[str, list[str]] = {}
        with self.store.reading() as conn:
            for name in sorted(set(qualified_names)):
                rows = conn.execute(
                    "SELECT DISTINCT f.content_hash FROM symbols s JOIN files f ON f.path = s.path "
                    "WHERE s.qualified_name = ? OR s.path_qualified_name = ?", (name, name),
                ).fetchall()
                found[name] = sorted(r[0] for r in rows)
        return found

    def has_files(self) -> bool:
        """True when at least one file is indexed (cheap at any size)."""
        with self.store.reading() as conn:
            return conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None

    # -- background index jobs (any replica answers for any job) -----------------------------

    def save_job(self, job_id: str, state: str, *, finished: bool, at: float) -> None:
        """Record a job's state (JSON) at the time ``at`` (its heartbeat); a finished job is kept
        with the ``JOBS_KEPT`` newest finished ones."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs(job_id, state, finished, heartbeat_at) VALUES (?, ?, ?, ?) ON CONFLICT (job_id) "
                "DO UPDATE SET state = excluded.state, finished = excluded.finished, heartbeat_at = excluded.heartbeat_at",
                (job_id, state, int(finished), at),
            )
            if finished:
                conn.execute(
                    "DELETE FROM jobs WHERE finished = 1 AND job_id NOT IN "
                    "(SELECT job_id FROM jobs WHERE finished = 1 ORDER BY heartbeat_at DESC, job_id LIMIT ?)",
                    (JOBS_KEPT,),
                )
                # jobs whose process stopped before their end, a week on (interrupted: never finished)
                conn.execute("DELETE FROM jobs WHERE finished = 0 AND heartbeat_at < ?", (at - INTERRUPTED_JOBS_KEPT_S,))

    def job(self, job_id: str) -> tuple[str, bool, float] | None:
        """A recorded job: (its state as JSON, whether it finished, its last heartbeat), or None."""
        with self.store.reading() as conn:
            row = conn.execute("SELECT state, finished, heartbeat_at FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else (row[0], bool(row[1]), float(row[2]))

    def recently_indexed(self, limit: int) -> list[tuple[str, int, str]]:
        """(path, mtime_ns, indexed_at) of the ``limit`` files written last, newest first."""
        with self.store.reading() as conn:
            return [tuple(row) for row in conn.execute(  # type: ignore[misc]
                "SELECT path, mtime_ns, indexed_at FROM files ORDER BY written_seq DESC NULLS LAST, indexed_at DESC, path "
                "LIMIT ?", (limit,)
            )]

    def file_count(self) -> int:
        """How many files are indexed."""
        with self.store.reading() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM files").fetchone()[0])

    def parsed_symbols(self) -> int:
        """The files' symbol counts added up (what their parses found)."""
        with self.store.reading() as conn:
            return int(conn.execute("SELECT COALESCE(SUM(symbol_count), 0) FROM files").fetchone()[0])

    def counts(self) -> dict[str, int]:
        """Files, symbols and resolved edges indexed."""
        with self.store.reading() as conn:
            files = conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            symbols = conn.execute("SELECT COUNT(*) FROM symbols").fetchone()[0]
            edges = conn.execute("SELECT COUNT(*) FROM resolved_edges").fetchone()[0]
        return {"files": files, "symbols": symbols, "resolved_edges": edges}

    def close(self) -> None:
        """Release the store (close the file, or the pool)."""
        self.store.close()


MOVED_SUFFIX = ".moved-to-postgres-"
"""What ``index.db`` is renamed to (with the time) once its rows are in PostgreSQL."""


def _move_into(store: Any, local: Path) -> None:
    """Load the SQLite manifest ``local`` into the PostgreSQL ``store`` (when it holds no file yet),
    keep a copy of the file beside it and remove it."""
    import os
    import time

    from resources.sqlite import copy_database, remove_sidecars

    SqliteManifestStore(local).close()  # (the columns of this release, for a file of an earlier one)
    loaded = store.load_from(local)
    moved = local.with_name(f"{MANIFEST_FILE}{MOVED_SUFFIX}{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    copy_database(local, moved)  # (its write-ahead log included: another reader may keep it from being folded in)
    local.unlink()
    remove_sidecars(local)
    if loaded:
        log.warning("the project's index manifest moved into PostgreSQL", manifest=store.location, kept=str(moved))
    else:
        log.warning("the shared index manifest holds files already: this state dir's index.db was not loaded",
                    manifest=store.location, kept=str(moved))


def manifest_namespace(settings: Settings) -> str:
    """The PostgreSQL schema of the project's manifest in server mode."""
    from resources.postgres import project_namespace

    return f"{project_namespace(settings)}_index"


def open_manifest(settings: Settings) -> Manifest:
    """The project's manifest: in PostgreSQL when ``CODEMEM_DATABASE_URL`` is set (shared by every
    replica and indexing worker of the project), else ``<state>/index.db``.

    A project moving to server mode takes its index along: an ``index.db`` is copied into a
    PostgreSQL manifest that holds no file yet (what the vector and graph stores hold matches it),
    kept as ``index.db.moved-to-postgres-<time>-<pid>`` and removed, so that it is not read again.
    Processes opening the manifest meanwhile wait for that move (``alone``).

    Raises:
        ManifestError: the database cannot be used (the message says what to do).
    """
    from resources.manifest_reader import SERVER_MARKER

    state = settings.resolved_state_dir()
    local, marker = state / MANIFEST_FILE, state / SERVER_MARKER
    url = settings.shared_database_url()
    if not url:
        marker.unlink(missing_ok=True)
        return Manifest(local)
    from resources.manifest_store import PostgresManifestStore
    from resources.private_files import make_private_dir

    store = PostgresManifestStore(url, namespace=manifest_namespace(settings))
    try:
        with store.alone("migration"):  # one process moves an index.db in; the others open after it
            if local.is_file() and local.stat().st_size > 0:
                _move_into(store, local)
        make_private_dir(state)
        marker.write_text(f"{store.location}\n")  # what a hook run alone reports instead of index.db's facts
        return Manifest(store=store)
    except BaseException:
        store.close()
        raise


class HookManifestReader:
    """``resources.manifest_reader.ManifestReader``'s queries answered from the project's manifest,
    for the hook relay of a server whose manifest is in PostgreSQL (``KeptConnections.manifest``):
    the server's own manifest, from ``source`` (None until its stores are open: the hooks then
    say where the index is, as a hook run alone does); ``close`` leaves it open."""

    def __init__(self, source: Callable[[], Manifest | None]) -> None:
        self._source = source

    def available(self) -> bool:
        """True once the server's manifest is open."""
        return self._source() is not None

    def _open(self) -> Manifest:
        manifest = self._source()
        if manifest is None:
            raise LookupError("the server's manifest is not open yet")
        return manifest

    def file_count(self) -> int:
        """How many files are indexed."""
        return self._open().file_count()

    def recently_indexed(self, limit: int) -> list[tuple[str, int, str]]:
        """(path, mtime_ns, indexed_at) of the ``limit`` files written last, newest first."""
        return self._open().recently_indexed(limit)

    def qualified_names(self, path: str, limit: int) -> list[str]:
        """Up to ``limit`` qualified names of the symbols of ``path``: their own, then their path-based ones."""
        symbols = self._open().find_symbols_in(path)
        names = dict.fromkeys(s.qualified_name for s in symbols)
        names |= dict.fromkeys(s.path_qualified_name for s in symbols if s.path_qualified_name)
        return list(names)[:limit]

    def close(self) -> None:
        """Nothing: the manifest is the server's."""

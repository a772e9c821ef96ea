"""Incremental indexing of a project: the plain functions behind ``codemem index``.

Per run: discover files → for each file, a stat and a SHA-256; unchanged files stop there →
changed files are parsed, their points (sparse vectors at once, dense vectors from the cache
when present) and their subgraph replaced → deleted files vanish from every store → cross-file
edges are re-resolved and the graph receives only the difference → dense vectors are filled for
whatever still lacks one (resumable; search fuses whatever exists meanwhile).

Crash safety: a file's manifest row is committed after its points and subgraph are written, and
the files (with their point ids) are recorded as in flight before the first store write, so an
interrupted run leaves them named and the next run redoes or deletes them whatever they became
meanwhile; cross-file edges about to change are recorded the same way (writes are idempotent,
ids are deterministic). A complete run ends with the stores a clean index of the tree builds.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pathspec

from pipelines.discovery import Discovery, SkippedFile, SourceFile, discover, resolve_project_root
from resources.manifest import FileState, Manifest, SymbolRow
from pipelines.parsing import ParseTimeout, parse_source
from pipelines.records import EMBEDDING_TEXT_VERSION, build_symbol_records, file_id, graph_label
from pipelines.resolution import resolve
from resources.vectors import sparse
from resources.faults import fault_point
from resources.graph.store import GraphEdge, GraphNode, GraphStore
from resources.settings import Settings
from resources.vectors.store import VectorPoint, VectorStore

CODE_COLLECTION = "code"
BATCH_FILES = 64
PARALLEL_THRESHOLD = 200  # below this many changed files, worker start-up costs more than it saves
MAX_WORKERS = 4
MAX_IN_FLIGHT = 4 * BATCH_FILES
OPTIMIZE_MIN_REWRITES = 5_000
DENSE_BATCH = 64

RUN_FAILED = "(index run)"
"""The path of a ``failed`` entry about the run as a whole rather than one file."""
STOPPED_BEFORE = "the run was stopped before this file: the next run indexes it"
"""The skip reason of the changed files a stopped run did not reach."""

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total): phases are discover, parse, resolve, embed."""


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


@dataclass(slots=True)
class IndexReport:
    """What an index run did; printed as the summary and returned by the index tools."""

    root: str = ""
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Paths not indexed, with the reason (an unreadable folder is one entry, its path ending in /)."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    """Files listed at the start of the run and gone when it came to read them."""
    files_with_syntax_errors: list[str] = field(default_factory=list)
    symbols_written: int = 0
    symbols_total: int = 0
    edges_added: int = 0
    edges_removed: int = 0
    edges_total: int = 0
    dense_done: int = 0
    dense_total: int = 0
    seconds: float = 0.0
    git_aware: bool = False
    notes: list[str] = field(default_factory=list)
    design: dict[str, Any] | None = None
    """What the design step (documents, links, patterns, anchors) did after the run."""

    @property
    def ok(self) -> bool:
        """True when nothing failed (skips with a reason are fine)."""
        return not self.failed

    @property
    def unaccounted(self) -> int:
        """Files seen minus those the report accounts for; 0 in every run, for the invariant
        seen = indexed + unchanged + skipped + failed + vanished."""
        failed = sum(1 for path, _ in self.failed if path != RUN_FAILED)
        return self.files_seen - (
            self.files_indexed + self.files_unchanged + len(self.skipped) + failed + len(self.vanished)
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "root": self.root,
            "files_seen": self.files_seen,
            "files_indexed": self.files_indexed,
            "files_unchanged": self.files_unchanged,
            "files_deleted": self.files_deleted,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "failed": [{"path": p, "error": e} for p, e in self.failed],
            "vanished": self.vanished,
            "files_with_syntax_errors": self.files_with_syntax_errors,
            "symbols_written": self.symbols_written,
            "symbols_total": self.symbols_total,
            "edges_added": self.edges_added,
            "edges_removed": self.edges_removed,
            "edges_total": self.edges_total,
            "dense_done": self.dense_done,
            "dense_total": self.dense_total,
            "seconds": round(self.seconds, 3),
            "git_aware": self.git_aware,
            "notes": self.notes,
            "design": self.design,
        }


@dataclass
class IndexContext:
    """The stores one project is indexed into."""

    settings: Settings
    vectors: VectorStore
    graph: GraphStore
    manifest: Manifest
    embedder: Any  # resources.embeddings.Embedder, created lazily by the caller
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def root(self) -> Path:
        """The resolved project root."""
        return self.settings.resolved_root()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class _Prepared:
    state: FileState
    refs: dict[str, Any]
    symbols: list[SymbolRow]
    points: list[VectorPoint]
    nodes: list[GraphNode]
    edges: list[GraphEdge]


def prepare_file(source: SourceFile, data: bytes, content_hash: str, timeout_s: float) -> _Prepared:
    """Parse one file and build everything the stores need for it (no store is touched).

    Raises:
        ParseTimeout: when the parser exceeds the per-file time limit.
    """
    indexed_at = _now()
    parsed = parse_source(source.path, data, source.language, timeout_s=timeout_s)  # type: ignore[arg-type]
    records = build_symbol_records(parsed, content_hash, indexed_at)
    fid = file_id(source.path)
    local_to_id = {}
    for record in records:
        local_to_id.setdefault(record.symbol.qualified_name, record.id)

    points = []
    nodes = [
        GraphNode(
            id=fid,
            label="File",
            properties={
                "path": source.path, "language": source.language, "content_hash": content_hash,
                "indexed_at": indexed_at, "file_path": source.path,
            },
        )
    ]
    edges = []
    symbols = []
    types = []
    for record in records:
        symbol = record.symbol
        points.append(VectorPoint(id=record.id, payload=record.payload, sparse=sparse.document_vector(record.sparse_text)))
        label = graph_label(symbol.kind)
        props = {
            "memory_id": record.id, "name": symbol.name, "qualified_name": record.qualified_name,
            "file_path": source.path, "language": source.language, "kind": symbol.kind,
            "start_line": symbol.start_line, "end_line": symbol.end_line, "signature": symbol.signature,
        }
        nodes.append(GraphNode(id=record.id, label=label, properties=props))  # type: ignore[arg-type]
        container_id = local_to_id.get(symbol.container or "") if symbol.container else None
        edges.append(GraphEdge(source_id=container_id or fid, target_id=record.id, type="CONTAINS", properties={}))
        symbols.append(
            SymbolRow(
                id=record.id, path=source.path, name=symbol.name, local_name=record.local_name,
                qualified_name=record.qualified_name, kind=symbol.kind, container=symbol.container,
                language=source.language, embed_text=record.embed_text, has_dense=False,
            )
        )
        if symbol.extends or symbol.implements:
            types.append({"id": record.id, "extends": symbol.extends, "implements": symbol.implements})
    refs = {
        "imports": [imp.model_dump() for imp in parsed.imports],
        "calls": [
            {
                "caller_id": local_to_id.get(call.caller) if call.caller else None,
                "callee": call.callee,
                "callee_name": call.callee_name,
                "line": call.line,
            }
            for call in parsed.calls
        ],
        "types": types,
    }
    state = FileState(
        path=source.path, language=source.language, content_hash=content_hash, size=source.size,
        mtime_ns=source.mtime_ns, indexed_at=indexed_at, symbol_count=len(records),
        error_count=parsed.error_count,
    )
    return _Prepared(state, refs, symbols, points, nodes, edges)


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


Outcome = tuple[str, Any]  # ("ok", _Prepared) | ("skip", reason) | ("fail", message) | ("vanished", None)


def _prepare_safely(source: SourceFile, timeout_s: float) -> Outcome:
    """Read, re-hash and prepare one file; never raises (runs in worker processes too)."""
    try:
        data = source.absolute_path.read_bytes()
    except FileNotFoundError:
        return ("vanished", None)
    except OSError as exc:
        return ("fail", f"cannot read: {exc.strerror or exc}")
    if b"\0" in data[:8192]:
        return ("skip", "binary file")
    try:
        # hash what is parsed: the file may have changed since the first pass
        return ("ok", prepare_file(source, data, _sha256(data), timeout_s))
    except ParseTimeout:
        return ("skip", f"parser exceeded the {timeout_s:g}s time limit")
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the run
        return ("fail", f"{type(exc).__name__}: {exc}")


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: leave when the indexing process is gone (a SIGKILLed parent cannot shut
    the pool down, and its workers would otherwise wait on their queue forever)."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                continue

    threading.Thread(target=watch, name="codemem-parent-watch", daemon=True).start()


def _prepare_all(changed: Sequence[tuple[SourceFile, str]], timeout_s: float) -> Iterator[tuple[SourceFile, Outcome]]:
    """Prepare changed files, in worker processes when there are many (results in order).

    Parsing, extraction and sparse vectors are CPU-bound Python; the store writes stay in this
    process, so the workers prepare the next files while the current batch is written.
    """
    workers = min(os.cpu_count() or 1, MAX_WORKERS)
    if len(changed) < PARALLEL_THRESHOLD or workers < 2:
        for source, _ in changed:
            yield source, _prepare_safely(source, timeout_s)
        return
    context = multiprocessing.get_context("forkserver")
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_exit_with_parent, initargs=(os.getpid(),)
    )
    try:
        in_flight: deque[tuple[SourceFile, Future[Outcome]]] = deque()
        for source, _ in changed:
            in_flight.append((source, pool.submit(_prepare_safely, source, timeout_s)))
            if len(in_flight) >= MAX_IN_FLIGHT:
                head, future = in_flight.popleft()
                yield head, future.result()
        while in_flight:
            head, future = in_flight.popleft()
            yield head, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _attach_cached_dense(ctx: IndexContext, prepared: list[_Prepared]) -> None:
    """Give points their dense vector now when the embedding cache already has it."""
    cache_lookup = getattr(ctx.embedder, "cached_documents", None)
    if cache_lookup is None:
        return
    texts = [s.embed_text for p in prepared for s in p.symbols]
    if not texts:
        return
    found = cache_lookup(texts)
    index = 0
    for p in prepared:
        for symbol, point in zip(p.symbols, p.points, strict=True):
            vector = found[index]
            index += 1
            if vector is not None:
                point.dense = vector
                symbol.has_dense = True


def write_vectors(ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]]) -> int:
    """Stage 1 of a write: the files' points (sparse, plus dense from the cache) into the vector
    store, and the points of symbols that no longer exist out of it. Returns points written.

    The files and their point ids are recorded as in flight first (``Manifest.begin_writes``), so
    an interruption before their manifest commit is undone by the next run whatever the files
    become meanwhile."""
    ctx.manifest.begin_writes({p.state.path: [s.id for s in p.symbols] for p in prepared})
    _attach_cached_dense(ctx, prepared)
    points = [pt for p in prepared for pt in p.points]
    ctx.vectors.upsert(CODE_COLLECTION, points)
    stale: list[str] = []
    for p in prepared:
        new_ids = {s.id for s in p.symbols}
        stale += [i for i in previous_ids.get(p.state.path, []) if i not in new_ids]
    ctx.vectors.delete(CODE_COLLECTION, stale)
    return len(points)


def write_graph_and_manifest(ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]]) -> None:
    """Stage 2 of a write: the files' subgraphs replaced, then the manifest rows committed (last,
    so an interrupted write is redone by the next run), with the replaced node ids marked dirty
    for cross-file resolution in the same transaction."""
    fault_point("index:before_graph")
    ctx.graph.replace_files(
        [p.state.path for p in prepared],
        [n for p in prepared for n in p.nodes],
        [e for p in prepared for e in p.edges],
    )
    fault_point("index:before_manifest")
    destroyed = {i for ids in previous_ids.values() for i in ids} | {file_id(p.state.path) for p in prepared}
    with ctx.manifest.transaction() as conn:
        ctx.manifest.replace_files(conn, [(p.state, p.refs, p.symbols) for p in prepared])
        ctx.manifest.mark_dirty(conn, destroyed)


def _write_batch(ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]]) -> int:
    """Write a batch of prepared files to every store, manifest last."""
    written = write_vectors(ctx, prepared, previous_ids)
    write_graph_and_manifest(ctx, prepared, previous_ids)
    return written


def delete_files(ctx: IndexContext, paths: Sequence[str]) -> None:
    """Remove files from every store (vectors, graph, manifest), the manifest last: the files are
    in flight until then, so an interrupted deletion is finished, or the file redone, next run."""
    if not paths:
        return
    ids = ctx.manifest.symbol_ids_of(paths)
    ctx.manifest.begin_writes({path: [] for path in paths})
    ctx.vectors.delete(CODE_COLLECTION, [i for group in ids.values() for i in group])
    fault_point("index:deleting")
    ctx.graph.delete_files(list(paths))
    with ctx.manifest.transaction() as conn:
        ctx.manifest.remove_files(conn, paths)
        ctx.manifest.mark_dirty(conn, {i for group in ids.values() for i in group} | {file_id(p) for p in paths})


def resolve_edges(ctx: IndexContext, touched_ids: set[str]) -> tuple[int, int]:
    """Re-resolve cross-file edges and apply the difference to the graph.

    Args:
        touched_ids: Ids of nodes whose subgraph was replaced or deleted in this run: their
            edges were removed from the graph with them, so they are re-added when still valid.

    Returns:
        (edges added, edges removed).
    """
    resolution = resolve(ctx.manifest.all_symbols(), ctx.manifest.all_refs())
    current = ctx.manifest.resolved_edges()
    destroyed = {e for e in current if e[0] in touched_ids or e[2] in touched_ids}
    unsettled = ctx.manifest.unsettled_edges()  # an interrupted resolution's: in the graph or not
    still_in_graph = current - destroyed - unsettled
    wanted = set(resolution.edges)
    to_add = wanted - still_in_graph
    to_remove = (still_in_graph | unsettled) - wanted
    ctx.manifest.begin_edge_changes(to_add | to_remove)
    if resolution.external_modules:
        ctx.graph.merge_nodes(
            [
                GraphNode(id=mid, label="Module", properties={"name": name, "language": lang, "file_path": ""})
                for mid, (name, lang) in resolution.external_modules.items()
            ]
        )
    created_at = _now()
    ctx.graph.remove_edges(
        [GraphEdge(source_id=s, target_id=d, type=t, properties={}) for s, t, d in to_remove]  # type: ignore[arg-type]
    )
    ctx.graph.add_edges(
        [
            GraphEdge(source_id=s, target_id=d, type=t, properties={**resolution.edges[(s, t, d)], "created_at": created_at})  # type: ignore[arg-type]
            for s, t, d in to_add
        ]
    )
    # Module nodes stand for external imports, shared by every file that makes them: the graph
    # holds exactly those some file still imports (a deleted file, or one that stopped importing a
    # module, leaves no orphan, as a clean index of the same tree would have none).
    unreferenced = ctx.graph.node_ids("Module") - resolution.external_modules.keys()
    ctx.graph.delete_nodes("Module", sorted(unreferenced))
    fault_point("index:resolving")
    ctx.manifest.replace_resolved_edges(
        [(s, t, d, resolution.edges[(s, t, d)]) for s, t, d in to_add], list(destroyed | to_remove), touched_ids
    )
    return len(to_add), len(to_remove)


def resolve_pending(ctx: IndexContext) -> tuple[int, int]:
    """Resolve cross-file edges for every dirty node id (this run's, or an interrupted run's)."""
    touched = ctx.manifest.dirty()
    if not touched:
        return 0, 0
    fault_point("index:before_resolve")
    return resolve_edges(ctx, touched)


def embed_pending(
    ctx: IndexContext,
    progress: Progress = _no_progress,
    stop: threading.Event | None = None,
    batch_size: int = DENSE_BATCH,
) -> tuple[int, int]:
    """Fill dense vectors for every symbol that lacks one; resumable and interruptible.

    Returns:
        (symbols with a dense vector, all symbols) when it stops.
    """
    done, total = ctx.manifest.dense_counts()
    progress("embed", done, total)
    while stop is None or not stop.is_set():
        pending = ctx.manifest.pending_dense(batch_size)
        if not pending:
            break
        ids = [row[0] for row in pending]
        vectors = ctx.embedder.embed_documents([row[1] for row in pending])
        with ctx.write_lock:
            # A concurrent re-index may have replaced these symbols: write only those still there.
            current = ctx.manifest.still_pending(pending)
            live = {i: v for i, v in zip(ids, vectors, strict=True) if i in current}
            ctx.vectors.set_dense(CODE_COLLECTION, live)
            ctx.manifest.mark_dense(list(live))
        done += len(live)
        progress("embed", done, total)
    return ctx.manifest.dense_counts()


def reset_index(ctx: IndexContext) -> None:
    """Forget the whole code index (vectors, graph subgraphs, manifest) so the next run rebuilds it.

    Used by ``codemem index --reembed`` and automatically when the embedding model changed:
    vectors of two models are never mixed in one collection.
    """
    known = sorted(set(ctx.manifest.files()) | ctx.manifest.in_flight())
    ctx.vectors.clear_collection(CODE_COLLECTION, ctx.embedder.dimension)  # never missing for a concurrent search
    if known:
        ctx.graph.delete_files(known)
    with ctx.manifest.transaction() as conn:
        ctx.manifest.remove_files(conn, known)
        conn.execute("DELETE FROM resolved_edges")
        conn.execute("DELETE FROM unsettled_edges")
        conn.execute("DELETE FROM meta WHERE key = 'embedding_model'")


def _check_embedding_model(ctx: IndexContext, report: IndexReport) -> None:
    """Rebuild the index when the active embedding model is not the one that made its vectors."""
    model = f"{getattr(ctx.embedder, 'model_id', 'unknown')} text-v{EMBEDDING_TEXT_VERSION}"
    previous = ctx.manifest.get_meta("embedding_model")
    if previous is not None and previous != model:
        reset_index(ctx)
        report.notes.append(f"embedding model or text recipe changed from {previous} to {model}: the index was rebuilt")
    ctx.manifest.set_meta("embedding_model", model)


def prepare_stores(ctx: IndexContext, report: IndexReport, *, reembed: bool = False) -> None:
    """Before writing: rebuild on a model or text-recipe change (or ``reembed``), make sure the
    code collection and the graph schema exist."""
    if reembed:
        reset_index(ctx)
        report.notes.append("--reembed: the index was rebuilt from scratch")
    _check_embedding_model(ctx, report)
    ctx.vectors.ensure_collection(CODE_COLLECTION, ctx.embedder.dimension)
    ctx.graph.ensure_schema()


def index_project(
    ctx: IndexContext,
    *,
    progress: Progress = _no_progress,
    embed: bool = True,
    only_paths: Sequence[str] | None = None,
    reembed: bool = False,
    stop: threading.Event | None = None,
    force: bool = False,
    extensions: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> IndexReport:
    """Index the project incrementally; see the module docstring for the steps.

    Args:
        ctx: Stores and settings of the project.
        progress: Called with (phase, done, total) as work advances.
        embed: Also fill the dense vectors before returning (else they stay pending).
        only_paths: Restrict the run to these repo-relative files or directories (the rest of
            the index is left as it is, deletions included only under these paths).
        reembed: Rebuild the whole index (vectors included) from scratch.
        stop: When set, the run stops after the current batch (what was written stays
            consistent; deletions and the rest wait for the next run).
        force: Re-process the files in scope even when their content is unchanged.
        extensions: Only files with these extensions this run (others stay as indexed).
        exclude: Gitignore-style patterns of files this run leaves alone (they stay as indexed).

    Returns:
        The run's report. Per-file failures are collected, never raised.
    """
    started = time.perf_counter()
    root = resolve_project_root(ctx.root)
    report = IndexReport(root=str(root))
    progress("discover", 0, 0)
    found: Discovery = discover(
        root, extensions=ctx.settings.extensions, max_file_bytes=ctx.settings.max_file_bytes
    )
    progress("discover", 1, 1)
    files = found.files
    skipped = found.skipped
    on_disk = {f.path for f in files}  # before the run's filters: indexed files not in it leave the index
    if only_paths is not None:
        files = [f for f in files if _in_scope(f.path, only_paths)]
        skipped = [s for s in skipped if _in_scope(s.path, only_paths)]
    if extensions:
        wanted_suffixes = {e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions}
        files = [f for f in files if PurePosixPath(f.path).suffix.lower() in wanted_suffixes]
    if exclude:
        excluded = pathspec.GitIgnoreSpec.from_lines(list(exclude))
        skipped = skipped + [SkippedFile(f.path, "excluded by the request") for f in files if excluded.match_file(f.path)]
        files = [f for f in files if not excluded.match_file(f.path)]
    report.git_aware = found.git_aware
    report.skipped = [(s.path, s.reason) for s in skipped]
    report.files_seen = len(files) + len(skipped)

    with ctx.write_lock:
        prepare_stores(ctx, report, reembed=reembed)
        known = ctx.manifest.files()
        in_flight = ctx.manifest.in_flight()  # written by an interrupted run: redone whatever their hash
        touched: set[str] = set()
        rewritten = 0  # points replaced or deleted (tombstones in the embedded collection)
        progress("parse", 0, len(files))
        changed: list[tuple[SourceFile, str]] = []
        for source in files:
            state = known.get(source.path)
            try:
                content_hash = _hash_file(source.absolute_path)
            except FileNotFoundError:
                report.vanished.append(source.path)
                continue
            except OSError as exc:
                report.failed.append((source.path, f"cannot read: {exc.strerror or exc}"))
                continue
            if state is not None and state.content_hash == content_hash and not force and source.path not in in_flight:
                report.files_unchanged += 1
                if state.mtime_ns != source.mtime_ns:
                    ctx.manifest.touch_file(source.path, source.mtime_ns)
            else:
                changed.append((source, content_hash))
        done = len(files) - len(changed)
        progress("parse", done, len(files))
        batch: list[_Prepared] = []
        interrupted = False
        reached: set[str] = set()
        prepared_files = _prepare_all(changed, ctx.settings.parse_timeout_s)
        for source, outcome in prepared_files:
            if stop is not None and stop.is_set():
                interrupted = True
                prepared_files.close()  # cancels the work not yet started
                break
            done += 1
            reached.add(source.path)
            kind, value = outcome
            if kind == "skip":  # not indexable now (binary, parser time limit): out of the index
                report.skipped.append((source.path, value))
                on_disk.discard(source.path)
            elif kind == "fail":  # a failure keeps what was indexed
                report.failed.append((source.path, value))
            elif kind == "vanished":
                report.vanished.append(source.path)
            else:
                if value.state.error_count:
                    report.files_with_syntax_errors.append(source.path)
                batch.append(value)
                touched.add(file_id(source.path))
            if len(batch) >= BATCH_FILES:
                replaced = _flush(ctx, batch, report)
                rewritten += len(replaced)
                touched |= replaced
                batch = []
            if done % 25 == 0 or done == len(files):
                progress("parse", done, len(files))
        if batch:
            replaced = _flush(ctx, batch, report)
            rewritten += len(replaced)
            touched |= replaced
        progress("parse", len(files), len(files))

        if interrupted:
            report.notes.append("stopped before the end: run `codemem index` again to finish")
            report.skipped += [(s.path, STOPPED_BEFORE) for s, _ in changed if s.path not in reached]
        on_disk -= set(report.vanished)
        deleted = [] if interrupted else [
            p for p in sorted(known.keys() | in_flight) if p not in on_disk and (only_paths is None or _in_scope(p, only_paths))
        ]
        if deleted:
            old_ids = ctx.manifest.symbol_ids_of(deleted)
            rewritten += sum(len(group) for group in old_ids.values())
            touched |= {i for group in old_ids.values() for i in group} | {file_id(p) for p in deleted}
            delete_files(ctx, deleted)
        report.files_deleted = len([p for p in deleted if p in known])
        if touched or ctx.manifest.dirty():
            progress("resolve", 0, 1)
            report.edges_added, report.edges_removed = resolve_pending(ctx)
            progress("resolve", 1, 1)
        ctx.vectors.flush()
        _maybe_optimize(ctx, rewritten)

    return finish_report(ctx, report, started, embed=embed, progress=progress, stop=stop)


def finish_report(
    ctx: IndexContext,
    report: IndexReport,
    started: float,
    *,
    embed: bool,
    progress: Progress = _no_progress,
    stop: threading.Event | None = None,
) -> IndexReport:
    """The end of every index run: fill pending dense vectors (with ``embed``), then the totals."""
    if report.files_seen == 0:
        extensions = ", ".join(ctx.settings.extensions)
        report.notes.append(
            f"no source files found under {report.root} (indexed extensions: {extensions}) — check the path, "
            "or set CODEMEM_EXTENSIONS"
        )
    if embed and ctx.settings.dense_embeddings:
        embed_pending(ctx, progress, stop=stop)
    report.dense_done, report.dense_total = ctx.manifest.dense_counts()
    counts = ctx.manifest.counts()
    report.symbols_total = counts["symbols"]
    report.edges_total = counts["resolved_edges"]
    report.seconds = time.perf_counter() - started
    if report.unaccounted:
        report.notes.append(f"the counts miss {report.unaccounted} file(s): seen != indexed + unchanged + skipped + "
                            "failed + vanished (a codemem bug; please report it)")
    return report


def _in_scope(path: str, only_paths: Sequence[str]) -> bool:
    """True when ``path`` is one of ``only_paths`` or lies under one of them ("" or "." is all)."""
    for scope in only_paths:
        scope = scope.rstrip("/")
        if scope in ("", ".") or path == scope or path.startswith(scope + "/"):
            return True
    return False


def _maybe_optimize(ctx: IndexContext, rewritten: int) -> None:
    """Compact the embedded collection once replaced or deleted points reach a tenth of it.

    qdrant-edge runs no background optimizer: replaced and deleted points stay as tombstones
    until ``optimize`` merges segments (measured: ~4 s for 50k points), so it runs only when
    enough has changed, not after every small incremental run.
    """
    pending = int(ctx.manifest.get_meta("rewrites_since_optimize") or 0) + rewritten
    total = ctx.manifest.counts()["symbols"]
    if pending and pending >= max(OPTIMIZE_MIN_REWRITES, total // 10):
        ctx.vectors.optimize(CODE_COLLECTION)
        pending = 0
    ctx.manifest.set_meta("rewrites_since_optimize", str(pending))


def _flush(ctx: IndexContext, batch: list[_Prepared], report: IndexReport) -> set[str]:
    """Write a batch; returns the ids whose graph edges were destroyed by the replacement.

    A store failure fails the batch's files (reported, manifest untouched, so the next run
    redoes them) instead of aborting the whole run.
    """
    previous = ctx.manifest.symbol_ids_of([p.state.path for p in batch])
    destroyed = {i for ids in previous.values() for i in ids}
    try:
        report.symbols_written += _write_batch(ctx, batch, previous)
    except Exception as exc:  # noqa: BLE001 - reported per file; the run goes on
        for p in batch:
            report.failed.append((p.state.path, f"store write failed: {type(exc).__name__}: {exc}"))
        return destroyed
    report.files_indexed += len(batch)
    return destroyed


__all__ = [
    "CODE_COLLECTION",
    "IndexContext",
    "IndexReport",
    "RUN_FAILED",
    "delete_files",
    "embed_pending",
    "finish_report",
    "index_project",
    "prepare_file",
    "prepare_stores",
    "reset_index",
    "resolve_edges",
]

"""Incremental indexing of a project: the plain functions behind ``codemem index``.

Per run: discover files → for each file, a stat and a SHA-256; unchanged files stop there →
changed files are parsed, their points (sparse vectors at once, dense vectors from the cache
when present) and manifest rows written and their subgraph replaced (by a thread while a graph
still starts: ``index_graph_writer``) → deleted files vanish from every store → cross-file edges
are re-resolved from the manifest (meanwhile) and the graph receives only the difference → dense
vectors are filled for whatever still lacks one (resumable; search fuses whatever exists meanwhile).

Crash safety: the files (with their point ids) are recorded as in flight before the first store
write, and leave flight only once their points, manifest rows and subgraph are all written, so
an interrupted run leaves them named and the next run redoes or deletes them whatever they
became meanwhile; cross-file edges about to change are recorded the same way (writes are
idempotent, ids are deterministic). A complete run ends with the stores a clean index of the
tree builds.

The steps live by job: what a run works with and reports (``index_context``), preparing files
(``index_prepare``: read, hash, parse, in worker processes when there are many), writing them,
deleting them and resolving cross-file edges (``index_writes``; the subgraphs by a thread:
``index_graph_writer``), and the stores as a whole (``index_stores``: get ready, reset, fill dense
vectors). Here: the run itself (``index_project``, ``finish_report``). The public names of those
modules stay importable from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

import pathspec
import structlog

from pipelines.bucket_records import BucketRecord, BucketTracker
from pipelines.buckets import bucket_of
from pipelines.discovery import Discovery, SkippedFile, SourceFile, discover, resolve_project_root
from pipelines.index_context import (
    CODE_COLLECTION,
    RUN_FAILED,
    EdgeScope,
    STOPPED_BEFORE,
    IndexContext,
    IndexReport,
    Progress,
    _no_progress,
    total_report,
)
from pipelines.index_prepare import (
    BATCH_FILES,
    ParseLimits,
    _hash_file,
    _now,
    _prepare_all,
    _Prepared,
    prepare_file,
    record_skipped,
    skip_records,
    stats_vouch,
    still_skipped,
)
from pipelines.index_stores import embed_pending, prepare_stores, reset_index
from pipelines.index_graph_writer import GraphWriter, WrittenBatch
from pipelines.index_writes import (
    FileSubgraph,
    apply_edge_plan,
    commit_deletion,
    commit_manifest,
    delete_files,
    plan_pending,
    resolve_edges,
    write_vectors,
)
from pipelines.records import file_id
from resources.manifest import SkippedState

OPTIMIZE_MIN_REWRITES = 5_000

log = structlog.get_logger("codemem.index")


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
    on_bucket: Callable[[BucketRecord], None] | None = None,
) -> IndexReport:
    """Index the project incrementally; see the module docstring for the steps.

    Args:
        ctx: Stores and settings of the project.
        progress: Called with (phase, done, total) as work advances.
        embed: Also fill the dense vectors before returning (else they stay pending).
        only_paths: Restrict the run to these repo-relative files or directories (the rest of
            the index is left as it is, deletions included only under these paths).
        reembed: Rebuild the whole index (vectors included) from scratch.
        stop: When set, the run stops after the current batch and the subgraphs queued for the
            graph (what was written stays consistent; deletions and the rest wait for the next
            run).
        force: Re-process the files in scope even when their content is unchanged.
        extensions: Only files with these extensions this run (others stay as indexed).
        exclude: Gitignore-style patterns of files this run leaves alone (they stay as indexed).
        on_bucket: Receives the record of each bucket the run touched, as soon as the bucket is
            complete (``pipelines.bucket_records``): what the Dagster UI shows per partition.

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
        limits = ParseLimits.of(ctx.settings)
        skipped_before = skip_records(ctx.manifest, limits)
        in_flight = ctx.manifest.in_flight()  # written by an interrupted run: redone whatever their hash
        tracker = BucketTracker(on_bucket, known.keys() | in_flight) if on_bucket is not None else None
        if tracker is not None:
            tracker.hold((known.keys() | in_flight) - on_disk)
            for path, reason in report.skipped:
                tracker.skipped(path, reason, changed=False)
        touched: set[str] = set()
        rewritten = 0  # points replaced or deleted (tombstones in the embedded collection)
        progress("parse", 0, len(files))
        changed: list[tuple[SourceFile, str]] = []
        checked: list[tuple[str, int, int]] = []  # files read and found unchanged whose stats cannot vouch for them yet
        checked_at = _now()  # (before any of them is read: what their stats are compared with next time)
        for source in files:
            state = known.get(source.path)
            if tracker is not None:
                tracker.listed(source.path)
            if not force and source.path not in in_flight and stats_vouch(state, source):
                report.files_unchanged += 1
                if tracker is not None:
                    tracker.unchanged(source.path)
                continue
            try:
                content_hash = _hash_file(source.absolute_path)
            except FileNotFoundError:
                report.vanished.append(source.path)
                if tracker is not None:
                    tracker.vanished(source.path, changed=False)
                continue
            except OSError as exc:
                report.failed.append((source.path, f"cannot read: {exc.strerror or exc}"))
                if tracker is not None:
                    tracker.failed(source.path, report.failed[-1][1], changed=False)
                continue
            if state is not None and state.content_hash == content_hash and not force and source.path not in in_flight:
                report.files_unchanged += 1
                if tracker is not None:
                    tracker.unchanged(source.path)
                if not force:
                    checked.append((source.path, source.size, source.mtime_ns))
            elif (reason := still_skipped(skipped_before, source, state, content_hash, force or source.path in in_flight)) is not None:
                report.skipped.append((source.path, reason))
                if tracker is not None:
                    tracker.skipped(source.path, reason, changed=False)
            else:
                changed.append((source, content_hash))
                if tracker is not None:
                    tracker.changed(source.path, source.language, content_hash)
        ctx.manifest.touch_files(checked, checked_at)
        if changed or (known.keys() | in_flight) - on_disk:
            start_graph = getattr(ctx.graph, "start_in_background", None)  # a lazily started graph
            if start_graph is not None:
                start_graph()  # starts while the files are parsed
        prefetching = None if force else _prefetch_stored_points(
            ctx, [s.path for s, _ in changed if s.path in known and s.path not in in_flight], stop)
        if tracker is not None:  # bucket by bucket, so each is complete (and recorded) as early as it can be
            changed.sort(key=lambda item: bucket_of(item[0].path))
        done = len(files) - len(changed)
        progress("parse", done, len(files))
        batch: list[_Prepared] = []
        newly_skipped: list[SkippedState] = []
        interrupted = False
        reached: set[str] = set()
        # a graph still starting (FalkorDB loading a large graph) gets the subgraphs in a thread,
        # while the run writes the other stores and computes the cross-file resolution
        graph = GraphWriter(ctx, background=not getattr(ctx.graph, "started", True))
        try:
            prepared_files = _prepare_all(changed, limits, tuple(ctx.settings.doc_globs))
            for source, outcome in prepared_files:
                if stop is not None and stop.is_set():
                    interrupted = True
                    prepared_files.close()  # cancels the work not yet started
                    break
                done += 1
                reached.add(source.path)
                kind, value = outcome
                if kind == "skip":  # not indexable now (binary, parser time limit): out of the index
                    report.skipped.append((source.path, value.reason))
                    newly_skipped.append(value.state(source.path))
                    on_disk.discard(source.path)
                    if tracker is not None:
                        tracker.skipped(source.path, value.reason, changed=True)
                elif kind == "fail":  # a failure keeps what was indexed
                    report.failed.append((source.path, value))
                    if tracker is not None:
                        tracker.failed(source.path, value, changed=True)
                elif kind == "vanished":
                    report.vanished.append(source.path)
                    if tracker is not None:
                        tracker.vanished(source.path, changed=True)
                else:
                    if value.state.error_count:
                        report.files_with_syntax_errors.append(source.path)
                    batch.append(value)
                    touched.add(file_id(source.path))
                if len(batch) >= BATCH_FILES:
                    replaced, tombstones = _flush(ctx, batch, report, tracker, graph, force=force)
                    rewritten += tombstones
                    touched |= replaced
                    batch = []
                if done % 25 == 0 or done == len(files):
                    progress("parse", done, len(files))
            if batch:
                replaced, tombstones = _flush(ctx, batch, report, tracker, graph, force=force)
                rewritten += tombstones
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
                old_ids = commit_deletion(ctx, deleted)
                rewritten += sum(len(group) for group in old_ids.values())
                touched |= {i for group in old_ids.values() for i in group} | {file_id(p) for p in deleted}
                graph.submit_deletion(deleted)  # after the subgraphs queued before it, while the resolution is planned
            gone = skipped_before.keys() - on_disk - {s.path for s in newly_skipped} if only_paths is None else set()
            # after the deletions, which drop a deleted file's record
            record_skipped(ctx.manifest, newly_skipped, limits, gone=gone)
            report.resolved_scope = EdgeScope()  # no edge changed unless a resolution runs
            resolving = bool(touched) or ctx.manifest.resolution_pending()
            if resolving:
                progress("resolve", 0, 1)
            plan = plan_pending(ctx) if resolving else None  # from the manifest alone, while the subgraphs are written
            _settle(ctx, graph.drain(), report, tracker)
        finally:
            graph.close()
            if prefetching is not None:
                prefetching.join()
        if tracker is not None:
            tracker.finish()
        if plan is not None and graph.failed:  # resolved against files the graph lacks: the next run redoes both
            report.notes.append("cross-file edges not resolved: a graph write failed; the next `codemem index` resolves them")
        elif plan is not None:
            changes = apply_edge_plan(ctx, plan)
            report.edges_added, report.edges_removed, report.resolved_scope = changes.added, changes.removed, changes.scope
            ctx.graph.compact_in_background()  # the run's graph writes are over: beside its checks, not in its close
        del plan  # a whole repository's resolution holds every edge: not through the dense vectors' fill
        if resolving:
            progress("resolve", 1, 1)
        ctx.vectors.flush()
        _maybe_optimize(ctx, rewritten)
        if not interrupted:
            compacted = time.monotonic()
            if ctx.manifest.compact_after_rewrite(report.symbols_written):
                log.info("index manifest compacted", seconds=round(time.monotonic() - compacted, 1))

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
    if embed and ctx.settings.dense_embeddings:
        embed_pending(ctx, progress, stop=stop)
    return total_report(ctx.settings, ctx.manifest, report, started)


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


PREFETCH_FROM_POINTS = 1_000
"""Stored points of the changed files from which a run reads them ahead (``_prefetch_stored_points``)."""


def _prefetch_stored_points(ctx: IndexContext, paths: list[str], stop: threading.Event | None) -> threading.Thread | None:
    """Read the stored points of the changed files (``paths``: those indexed before) in a thread
    while they are parsed, so that their comparison with what the run writes (``write_vectors``'
    held points) finds them in memory: on the Linux kernel, the first read of a 1% change's
    ~10,000 points waits 2–3 s on the disk. None when there are too few to matter. It stops with
    the run (``stop``); a failure only costs that time."""
    ids = [i for group in ctx.manifest.symbol_ids_of(paths).values() for i in group]
    if len(ids) < PREFETCH_FROM_POINTS:
        return None

    def prefetch() -> None:
        try:
            for start in range(0, len(ids), PREFETCH_FROM_POINTS):
                if stop is not None and stop.is_set():
                    return
                ctx.vectors.prefetch(CODE_COLLECTION, ids[start:start + PREFETCH_FROM_POINTS])
        except Exception as exc:  # noqa: BLE001 - a read ahead, never the run's failure
            log.info("stored points not read ahead", error=f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=prefetch, name="codemem-prefetch-points", daemon=True)
    thread.start()
    return thread


def _flush(
    ctx: IndexContext, batch: list[_Prepared], report: IndexReport, tracker: BucketTracker | None, graph: GraphWriter,
    *, force: bool = False,
) -> tuple[set[str], int]:
    """Write a batch's points and manifest rows and hand its subgraphs to ``graph``; returns the
    ids whose graph edges the replacement destroys, and how many stored points it replaced or
    deleted (every point written again with ``force``).

    A store failure fails the batch's files (reported; its files stay in flight or keep their
    rows, so the next run redoes them) instead of aborting the whole run.
    """
    previous = ctx.manifest.symbol_ids_of([p.state.path for p in batch])
    destroyed = {i for ids in previous.values() for i in ids}
    try:
        written = write_vectors(ctx, batch, previous, rewrite_all=force)
        commit_manifest(ctx, batch, previous)
    except Exception as exc:  # noqa: BLE001 - reported per file; the run goes on
        _settle(ctx, [WrittenBatch(batch, 0, f"store write failed: {type(exc).__name__}: {exc}")], report, tracker)
        return destroyed, len(destroyed)
    graph.submit([FileSubgraph.of(p) for p in batch], written.points)
    _settle(ctx, graph.done(), report, tracker)
    return destroyed, written.replaced


def _settle(ctx: IndexContext, written: list[WrittenBatch], report: IndexReport, tracker: BucketTracker | None) -> None:
    """Account for batches the graph writer handled: files written are settled (out of flight)
    and counted; a failed batch's files are reported (they stay in flight for the next run)."""
    for batch in written:
        if batch.deleted:  # removed subgraphs (``GraphWriter.submit_deletion``)
            if batch.error is not None:  # in flight: the next run finishes the deletion, and counts it
                report.failed += [(path, batch.error) for path in batch.deleted]
                if tracker is not None:
                    for path in batch.deleted:
                        tracker.failed(path, batch.error, changed=False)
                continue
            ctx.manifest.settle_in_flight(batch.deleted)
            report.files_deleted += len(batch.deleted)
            if tracker is not None:
                tracker.deleted(batch.deleted)
            continue
        if batch.error is not None:
            report.failed += [(f.state.path, batch.error) for f in batch.files]
            if tracker is not None:
                tracker.write_failed(batch.files, batch.error)
            continue
        ctx.manifest.settle_in_flight(f.state.path for f in batch.files)
        report.symbols_written += batch.points
        report.files_indexed += len(batch.files)
        if tracker is not None:
            tracker.written(batch.files)


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

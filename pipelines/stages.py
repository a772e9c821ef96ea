"""The indexing stages per hash bucket: what the Dagster assets run, built from the indexer's
functions (the same ones ``index_project`` runs, so both produce the same stores).

plan (discover + hash, diff against the manifest) → prepare (parse, records, sparse vectors) →
vectors (points into the vector store, dense vectors computed or taken from the cache) → graph
(manifest rows committed, subgraphs replaced, deleted files removed) → normalize (cross-file
edges re-resolved for every dirty node, collection compacted when enough changed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.buckets import bucket_of
from pipelines.discovery import SourceFile, discover, resolve_project_root
from pipelines.index_context import CODE_COLLECTION, EdgeScope, IndexContext
from pipelines.index_prepare import (
    ParseLimits,
    _hash_file,
    _prepare_all,
    _Prepared,
    record_skipped,
    skip_records,
    stats_vouch,
    still_skipped,
)
from pipelines.index_writes import delete_files, resolve_pending, write_graph_and_manifest, write_vectors
from pipelines.resolution_scope import existing_nodes
from pipelines.indexer import _maybe_optimize
from resources.manifest import FileState, Manifest, SkippedState
from resources.settings import Settings


@dataclass
class BucketPlan:
    """What one bucket's run has to do."""

    bucket: str
    changed: list[tuple[SourceFile, str]] = field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    """Files listed and gone before they could be hashed."""
    listed: list[str] = field(default_factory=list)
    """Every file of the bucket that discovery listed (changed, unchanged, failed or vanished)."""
    force: bool = False
    """A forced run's: every file written again whole (its points and its subgraph)."""

    @property
    def seen(self) -> int:
        """Files of the bucket the report counts as seen."""
        return self.unchanged + len(self.changed) + len(self.skipped) + len(self.failed) + len(self.vanished)

    @property
    def digest(self) -> str:
        """A fingerprint of the pending work (the sensor's cursor compares it)."""
        text = "\n".join(sorted(f"{s.path}:{h}" for s, h in self.changed) + sorted(f"-{p}" for p in self.deleted))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def pending(self) -> bool:
        """True when the bucket has files to (re)index or delete."""
        return bool(self.changed or self.deleted)


@dataclass
class PreparedBucket:
    """A bucket's parsed files, ready to write."""

    bucket: str
    prepared: list[_Prepared] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    """Files listed and gone before they could be hashed or read."""
    newly_skipped: list[SkippedState] = field(default_factory=list)
    """The changed files the parsers could not index: recorded, so that they are not read again
    until they change."""
    unchanged: int = 0
    points_written: int = 0
    dense_computed: int = 0
    force: bool = False
    """See ``BucketPlan.force`` (a bucket pickled by an earlier release has the default)."""


def plan_buckets(
    settings: Settings,
    manifest: Manifest,
    buckets: Iterable[str] | None = None,
    *,
    force: bool = False,
    trust_mtime: bool = False,
) -> dict[str, BucketPlan]:
    """Diff the tree against the manifest, per bucket.

    Args:
        settings: The project.
        manifest: What is indexed.
        buckets: Only these buckets (all when None).
        force: Treat every file as changed, and write it again whole (``BucketPlan.force``).
        trust_mtime: Skip hashing every file whose size and mtime match the manifest (the
            sensor's cheap tick); otherwise only those whose stats vouch for their content
            (``stats_vouch``: out of the racy window), as ``codemem index`` and the assets do.

    Returns:
        A plan per bucket that has files on disk or in the manifest.
    """
    wanted = set(buckets) if buckets is not None else None
    root = resolve_project_root(settings.resolved_root())
    found = discover(root, extensions=settings.extensions, max_file_bytes=settings.max_file_bytes)
    known: dict[str, FileState] = manifest.files()
    skipped_before = skip_records(manifest, ParseLimits.of(settings))
    in_flight = manifest.in_flight()  # written by an interrupted run: redone whatever their hash or mtime
    plans: dict[str, BucketPlan] = {}

    def plan_of(path: str) -> BucketPlan | None:
        key = bucket_of(path)
        if wanted is not None and key not in wanted:
            return None
        return plans.setdefault(key, BucketPlan(bucket=key, force=force))

    for skipped in found.skipped:
        plan = plan_of(skipped.path)
        if plan is not None:
            plan.skipped.append((skipped.path, skipped.reason))
    on_disk = set()
    for source in found.files:
        on_disk.add(source.path)
        plan = plan_of(source.path)
        if plan is None:
            continue
        plan.listed.append(source.path)
        state = known.get(source.path)
        redo = force or source.path in in_flight
        if not redo and (stats_vouch(state, source) or trust_mtime and state is not None
                         and state.mtime_ns == source.mtime_ns and state.size == source.size):
            plan.unchanged += 1
            continue
        if trust_mtime and (reason := still_skipped(skipped_before, source, state, None, redo)) is not None:
            plan.skipped.append((source.path, reason))
            continue
        try:
            content_hash = _hash_file(source.absolute_path)
        except FileNotFoundError:
            plan.vanished.append(source.path)
            on_disk.discard(source.path)
            continue
        except OSError as exc:
            plan.failed.append((source.path, f"cannot read: {exc.strerror or exc}"))
            continue
        if state is not None and state.content_hash == content_hash and not redo:
            plan.unchanged += 1
        elif (reason := still_skipped(skipped_before, source, state, content_hash, redo)) is not None:
            plan.skipped.append((source.path, reason))
        else:
            plan.changed.append((source, content_hash))
    for path in sorted(known.keys() | in_flight):
        if path not in on_disk:
            plan = plan_of(path)
            if plan is not None:
                plan.deleted.append(path)
    return plans


def stats_match(settings: Settings, manifest: Manifest) -> bool:
    """Whether every file listed has the size and mtime the manifest (or a settled skip record)
    holds for it, or else its indexed content, every indexed file is listed and no write is in
    flight: an index's first, cheap look for work (``plan_buckets`` with ``trust_mtime`` says the
    same, at several times the cost: each file's whole state, and its bucket)."""
    if manifest.in_flight():
        return False
    root = resolve_project_root(settings.resolved_root())
    found = discover(root, extensions=settings.extensions, max_file_bytes=settings.max_file_bytes)
    held = manifest.stats()
    skipped_before = skip_records(manifest, ParseLimits.of(settings))
    listed = 0
    for source in found.files:
        stats = held.get(source.path)
        if stats is None:
            if still_skipped(skipped_before, source, None, None, False) is None:
                return False
            continue
        if stats[:2] != (source.size, source.mtime_ns):  # moved: read, and compared with its indexed hash
            try:
                if _hash_file(source.absolute_path) != stats[2]:
                    return False
            except OSError:
                return False
        listed += 1
    return listed == len(held)


def prepare_bucket(plan: BucketPlan, limits: ParseLimits, doc_globs: tuple[str, ...] = ()) -> PreparedBucket:
    """Parse a bucket's changed files (in worker processes when there are many)."""
    return prepare_buckets([plan], limits, doc_globs)[plan.bucket]


def prepare_buckets(plans: Sequence[BucketPlan], limits: ParseLimits, doc_globs: tuple[str, ...] = ()) -> dict[str, PreparedBucket]:
    """Parse the changed files of several buckets in one pass, so a run over many buckets (a first
    index) keeps the worker processes busy instead of parsing bucket by bucket (``doc_globs``: the
    project's, for the files' design digests)."""
    results = {
        plan.bucket: PreparedBucket(
            bucket=plan.bucket, deleted=list(plan.deleted), skipped=list(plan.skipped), failed=list(plan.failed),
            vanished=list(plan.vanished), unchanged=plan.unchanged, force=plan.force,
        )
        for plan in plans
    }
    changed = [(source, digest) for plan in plans for source, digest in plan.changed]
    for source, (kind, value) in _prepare_all(changed, limits, doc_globs):
        result = results[bucket_of(source.path)]
        if kind == "ok":
            result.prepared.append(value)
        elif kind == "skip":
            result.skipped.append((source.path, value.reason))
            result.newly_skipped.append(value.state(source.path))
        elif kind == "vanished":
            result.vanished.append(source.path)
        else:
            result.failed.append((source.path, value))
    return results


def stale_on_disk(root: Path, bucket: PreparedBucket) -> list[str]:
    """Paths of ``bucket`` whose prepared state is not the disk's now: a parsed file whose content
    changed or is gone, a deleted file that exists again. An asset launched alone from the Dagster
    UI reads its upstream's output of an earlier run, which may be such a bucket."""
    stale: list[str] = []
    for prepared in bucket.prepared:
        try:
            if _hash_file(root / prepared.state.path) != prepared.state.content_hash:
                stale.append(prepared.state.path)
        except OSError:
            stale.append(prepared.state.path)
    stale += [path for path in bucket.deleted if (root / path).exists()]
    return stale


def reread_bucket(ctx: IndexContext, key: str, *, force: bool = False) -> PreparedBucket:
    """Bucket ``key`` planned and parsed again from the disk as it is now (``force``: as a forced run plans it)."""
    plan = plan_buckets(ctx.settings, ctx.manifest, [key], force=force).get(key, BucketPlan(bucket=key, force=force))
    return prepare_buckets([plan], ParseLimits.of(ctx.settings), tuple(ctx.settings.doc_globs))[key]


def write_bucket_vectors(ctx: IndexContext, bucket: PreparedBucket, *, embed: bool) -> PreparedBucket:
    """Points of a bucket's files into the vector store; with ``embed``, dense vectors are
    computed now for symbols the embedding cache does not have (else they stay pending for the
    background filler, as with ``codemem index --no-embed``)."""
    if not bucket.prepared:
        return bucket
    if embed and ctx.settings.dense_embeddings:
        lacking = [(symbol, point) for p in bucket.prepared for symbol, point in zip(p.symbols, p.points, strict=True)]
        texts = [symbol.embed_text for symbol, _ in lacking]
        for start in range(0, len(texts), 64):
            vectors = ctx.embedder.embed_documents(texts[start : start + 64])
            for (symbol, point), vector in zip(lacking[start : start + 64], vectors, strict=True):
                point.dense = vector
                symbol.has_dense = True
        bucket.dense_computed = len(texts)
    previous = ctx.manifest.symbol_ids_of([p.state.path for p in bucket.prepared])
    with ctx.write_lock:
        bucket.points_written = write_vectors(ctx, bucket.prepared, previous, rewrite_all=getattr(bucket, "force", False)).points
    return bucket


def load_bucket_graph(ctx: IndexContext, bucket: PreparedBucket) -> PreparedBucket:
    """Subgraphs of a bucket's files replaced, its deleted files removed from every store (those
    that vanished while the run read them, or that cannot be indexed any more, included), and
    the manifest committed first with the files in flight until their subgraphs are written."""
    with ctx.write_lock:
        gone = [*bucket.vanished, *(path for path, _ in bucket.skipped)]
        if gone:
            in_flight = ctx.manifest.in_flight()
            bucket.deleted += [
                p for p in dict.fromkeys(gone)
                if p not in bucket.deleted and (p in in_flight or ctx.manifest.file(p) is not None)
            ]
        if bucket.prepared:
            previous = ctx.manifest.symbol_ids_of([p.state.path for p in bucket.prepared])
            write_graph_and_manifest(ctx, bucket.prepared, previous)
        if bucket.deleted:
            delete_files(ctx, bucket.deleted)
        # after the deletions, which drop a deleted file's record (a bucket pickled by an earlier release has none)
        record_skipped(ctx.manifest, getattr(bucket, "newly_skipped", []), ParseLimits.of(ctx.settings))
    return bucket


def normalize_index(ctx: IndexContext, rewritten: int = 0) -> tuple[int, int]:
    """Re-resolve cross-file edges for every dirty node; compact the collection when needed."""
    with ctx.write_lock:
        changes = resolve_pending(ctx)
        ctx.vectors.flush()
        _maybe_optimize(ctx, rewritten)
    return changes.added, changes.removed


def stored_symbol_ids(ctx: IndexContext) -> tuple[set[str], set[str]]:
    """Every symbol id the vector store holds, and every one the graph holds."""
    return ctx.vectors.ids(CODE_COLLECTION), ctx.graph.node_ids("Function") | ctx.graph.node_ids("Class")


def store_consistency(ctx: IndexContext) -> dict[str, list[str]]:
    """Symbol ids one store has and another lacks (empty lists when the stores agree)."""
    manifest_ids = ctx.manifest.symbol_ids()
    vector_ids, graph_ids = stored_symbol_ids(ctx)
    return {
        "missing_in_vectors": sorted(manifest_ids - vector_ids)[:50],
        "extra_in_vectors": sorted(vector_ids - manifest_ids)[:50],
        "missing_in_graph": sorted(manifest_ids - graph_ids)[:50],
        "extra_in_graph": sorted(graph_ids - manifest_ids)[:50],
    }


def dangling_edges(ctx: IndexContext, scope: EdgeScope | None = None) -> list[tuple[str, str, str]]:
    """Resolved edges whose endpoint is no longer an indexed symbol, file or external module: of
    the edges a run can have changed (``scope``), or of every edge."""
    from pipelines.records import file_id

    modules = ctx.graph.node_ids("Module")
    if scope is None:
        known = ctx.manifest.symbol_ids() | {file_id(p) for p in ctx.manifest.paths()}
        edges: Iterable[tuple[str, str, str]] = ctx.manifest.resolved_edges()
    else:
        # an edge into a node that still exists dangles only by its source: one a run can have
        # changed starts in scope (a resolution re-adds edges from its scope, and puts back those
        # from untouched nodes), so only the nodes that are gone are looked up by target (the
        # edges are keyed by source: that lookup reads them all, ~1.5 s on the Linux kernel)
        targets = set(scope.targets) - modules
        present = existing_nodes(ctx.manifest, targets)
        edges = ctx.manifest.edges_touching(scope.sources, targets - present)
        known = present | existing_nodes(ctx.manifest, {node for s, _, d in edges for node in (s, d)} - modules - targets)
    return sorted(
        (s, t, d) for s, t, d in edges if s not in known or (d not in known and d not in modules)
    )[:50]


def hash_mismatches(ctx: IndexContext, paths: Sequence[str]) -> list[str]:
    """Indexed files (among ``paths``) whose content on disk differs from the indexed hash."""
    root = ctx.settings.resolved_root()
    wrong: list[str] = []
    for path in paths:
        state = ctx.manifest.file(path)
        if state is None:
            continue
        try:
            if _hash_file(Path(root, path)) != state.content_hash:
                wrong.append(path)
        except OSError:
            wrong.append(path)
    return wrong


def repair_index(ctx: IndexContext) -> dict[str, int]:
    """Drop what the manifest does not know from the vector store and the graph, forget resolved
    edges whose endpoints vanished, and mark every node dirty; the caller then re-indexes with
    ``force`` so every file is written again from disk."""
    from pipelines.records import file_id

    with ctx.write_lock:
        manifest_ids = ctx.manifest.symbol_ids()
        stray_points = sorted(ctx.vectors.ids(CODE_COLLECTION) - manifest_ids)
        ctx.vectors.delete(CODE_COLLECTION, stray_points)
        stray_nodes = 0
        for label in ("Function", "Class"):
            extra = sorted(ctx.graph.node_ids(label) - manifest_ids)  # type: ignore[arg-type]
            stray_nodes += ctx.graph.delete_nodes(label, extra)  # type: ignore[arg-type]
        dangling = dangling_edges(ctx)
        everything = manifest_ids | {file_id(p) for p in ctx.manifest.paths()}
        with ctx.manifest.transaction() as conn:
            ctx.manifest.forget_resolved_edges(conn, dangling)
            ctx.manifest.mark_dirty(conn, everything)
    return {"stray_points": len(stray_points), "stray_nodes": stray_nodes, "dangling_edges": len(dangling)}

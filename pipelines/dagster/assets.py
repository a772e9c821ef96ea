"""The code-index assets: thin wrappers over ``pipelines.stages``, partitioned by path-hash bucket.

source_files → parsed_files → embedded_symbols → graph_loaded → normalized_graph. The per-file
assets are partitioned into 256 buckets (``pipelines.buckets``) with a single-run backfill
policy, so a first index is one run over every bucket and a sensor-triggered update is one run
per touched bucket. Every materialization carries its numbers and a preview table; graph_loaded
records each written file's content hash and indexing time (which version of a file is indexed,
and when) and checks the bucket against the disk before normalized_graph may run.
"""


import time
import warnings
from collections import defaultdict
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    BackfillPolicy,
    BetaWarning,
    Failure,
    MetadataValue,
    Output,
    ResourceParam,
    StaticPartitionsDefinition,
    asset,
    asset_check,
)

from pipelines.bucket_records import markdown_table
from pipelines.buckets import ALL_BUCKETS, bucket_of
from pipelines.dagster.index_job import IndexRunConfig, metadata_values
from pipelines.dagster.project import ProjectStores
from pipelines.index_checks import WHOLE_INDEX_CHECKS, files_match_disk
from pipelines.index_prepare import ParseLimits
from pipelines.indexer import IndexReport, prepare_stores
from pipelines.stages import (
    BucketPlan,
    PreparedBucket,
    load_bucket_graph,
    normalize_index,
    plan_buckets,
    prepare_buckets,
    reread_bucket,
    stale_on_disk,
    write_bucket_vectors,
)
from resources.schemas.tools import IndexInput

warnings.filterwarnings("ignore", category=BetaWarning)  # backfill_policy is beta in Dagster 1.13
BUCKETS = StaticPartitionsDefinition(list(ALL_BUCKETS))
SINGLE_RUN = BackfillPolicy.single_run()


def _table(headers: list[str], rows: list[list[Any]]) -> MetadataValue:
    return MetadataValue.md(markdown_table(headers, rows))


def _per_bucket(context: AssetExecutionContext, metadata: dict[str, dict[str, Any]]) -> None:
    """Each bucket's own metadata on its own partition's materialization: a run over a range of
    buckets (a backfill from the UI) records each bucket's files, not the run's totals."""
    for key, values in metadata.items():
        context.add_asset_metadata(values, partition_key=key)


def _plan_metadata(plan: BucketPlan) -> dict[str, Any]:
    return {
        "files": plan.unchanged + len(plan.changed),
        "changed": len(plan.changed),
        "unchanged": plan.unchanged,
        "deleted": len(plan.deleted),
        "skipped": len(plan.skipped),
        "changed_files": _table(["path", "language", "sha256"], [[s.path, s.language, h[:12]] for s, h in plan.changed]),
        "skipped_files": _table(["path", "reason"], [list(r) for r in plan.skipped]),
    }


def _parsed_metadata(bucket: PreparedBucket) -> dict[str, Any]:
    rows = [[p.state.path, p.state.symbol_count, p.state.error_count] for p in bucket.prepared]
    return {
        "files_parsed": len(rows),
        "symbols": sum(r[1] for r in rows),
        "files_with_syntax_errors": sum(1 for r in rows if r[2]),
        "failed": len(bucket.failed),
        "parsed": _table(["path", "symbols", "syntax errors"], rows),
        "failures": _table(["path", "error"], [list(f) for f in bucket.failed]),
    }


def _loaded_metadata(bucket: PreparedBucket | None, indexed: list[Any], reread: list[str]) -> dict[str, Any]:
    """graph_loaded's record of one bucket; ``indexed``: the manifest's states of the bucket's
    files after the run, so a bucket the run left as it was keeps showing what is indexed."""
    prepared = bucket.prepared if bucket is not None else []
    written = {p.state.path for p in prepared}
    return {
        "files_written": len(prepared),
        "files_unchanged": sum(1 for state in indexed if state.path not in written),
        "files_deleted": len(bucket.deleted) if bucket is not None else 0,
        "nodes": sum(len(p.nodes) for p in prepared),
        "edges": sum(len(p.edges) for p in prepared),
        "indexed_versions": _table(
            ["path", "sha256", "indexed_at", "symbols", "this run"],
            [[s.path, s.content_hash[:12], s.indexed_at, s.symbol_count, "written" if s.path in written else "unchanged"]
             for s in sorted(indexed, key=lambda state: (state.path not in written, state.path))],
        ),
        "reread_from_disk": _table(["path"], [[path] for path in reread]),
    }


@asset(
    partitions_def=BUCKETS, backfill_policy=SINGLE_RUN, io_manager_key="bucket_io", group_name="code_index",
    description="Files of the bucket on disk, diffed by SHA-256 against what is indexed.",
)
def source_files(
    context: AssetExecutionContext, config: IndexRunConfig, codemem: ResourceParam[ProjectStores]
) -> Output[dict[str, BucketPlan]]:
    """Plan each bucket: changed, unchanged, deleted and skipped files."""
    started = time.perf_counter()
    keys = list(context.partition_keys)
    ctx = codemem.index_context()
    if ctx is not None:
        with ctx.write_lock:
            prepare_stores(ctx, IndexReport(root=str(ctx.root)))
    plans = plan_buckets(codemem.settings(), codemem.manifest(), keys, force=config.force)
    out = {key: plans.get(key, BucketPlan(bucket=key)) for key in keys}
    delegated = None
    if ctx is None:  # another process owns the stores: it indexes the bucket's files for us
        paths = [s.path for p in out.values() for s, _ in p.changed] + [d for p in out.values() for d in p.deleted]
        if paths:
            delegated = codemem.index_on_owner(IndexInput(paths=paths, embed=config.embed))
        for plan in out.values():
            plan.changed, plan.deleted = [], []
    _per_bucket(context, {key: _plan_metadata(plan) for key, plan in out.items()})
    metadata: dict[str, Any] = {"run_buckets": len(keys), "seconds": round(time.perf_counter() - started, 3)}
    if delegated is not None:
        metadata["delegated_to_owner"] = MetadataValue.json(delegated)
    return Output(out, metadata=metadata)


@asset(
    partitions_def=BUCKETS, backfill_policy=SINGLE_RUN, io_manager_key="bucket_io", group_name="code_index",
    description="Changed files parsed with tree-sitter: symbols, imports, calls, inheritance, sparse vectors.",
)
def parsed_files(
    context: AssetExecutionContext, codemem: ResourceParam[ProjectStores], source_files: dict[str, BucketPlan]
) -> Output[dict[str, PreparedBucket]]:
    """Parse each bucket's changed files."""
    started = time.perf_counter()
    settings = codemem.settings()
    out = prepare_buckets([plan or BucketPlan(bucket=key) for key, plan in source_files.items()], ParseLimits.of(settings),
                          tuple(settings.doc_globs))
    _per_bucket(context, {key: _parsed_metadata(bucket) for key, bucket in out.items()})
    return Output(out, metadata={"run_buckets": len(out), "seconds": round(time.perf_counter() - started, 3)})


@asset(
    partitions_def=BUCKETS, backfill_policy=SINGLE_RUN, io_manager_key="bucket_io", group_name="code_index",
    description="Symbols' sparse and dense vectors written to the vector store (embedding cache first).",
)
def embedded_symbols(
    context: AssetExecutionContext, config: IndexRunConfig, codemem: ResourceParam[ProjectStores],
    parsed_files: dict[str, PreparedBucket],
) -> Output[dict[str, PreparedBucket]]:
    """Write each bucket's points (launched without source_files: a bucket whose files changed
    since it was planned is read again from disk first)."""
    started = time.perf_counter()
    ctx = codemem.index_context()
    out: dict[str, PreparedBucket] = {}
    reread: dict[str, list[str]] = {}
    for key, bucket in parsed_files.items():
        bucket = bucket or PreparedBucket(bucket=key)
        if ctx is not None:
            bucket, reread[key] = _current(context, ctx, key, bucket)
            bucket.force = getattr(bucket, "force", False) or config.force  # (a bucket an earlier release pickled)
            bucket = write_bucket_vectors(ctx, bucket, embed=config.embed)
        out[key] = bucket
    _per_bucket(context, {key: {
        "points_written": bucket.points_written, "dense_vectors": bucket.dense_computed,
        "reread_from_disk": _table(["path"], [[p] for p in reread.get(key, [])]),
    } for key, bucket in out.items()})
    return Output(out, metadata={"run_buckets": len(out), "seconds": round(time.perf_counter() - started, 3)})


def _in_run(context: AssetExecutionContext, asset: str) -> bool:
    """True when ``asset`` is materialized in this run (not launched without it from the UI)."""
    selection = context.run.asset_selection
    return selection is None or AssetKey(asset) in selection


def _current(context: AssetExecutionContext, ctx: Any, key: str, bucket: PreparedBucket) -> tuple[PreparedBucket, list[str]]:
    """``bucket`` and no stale paths when its plan is this run's (``source_files`` in the run).
    Else the run was launched without it from the UI and the bucket comes from an earlier run's
    plan: when a file of it changed on disk since (a parsed file's content, a deleted file that
    exists again), the bucket read again from disk, and the stale paths; writing the old version
    of a file into the stores is what this prevents. Within one run, ``bucket_matches_disk``
    catches a file changed meanwhile."""
    if _in_run(context, "source_files"):
        return bucket, []
    stale = stale_on_disk(ctx.root, bucket)
    if not stale:
        return bucket, []
    context.log.warning(f"bucket {key}: {len(stale)} file(s) changed on disk since the bucket was planned "
                        f"({', '.join(stale[:5])}); reading the bucket again from disk")
    return reread_bucket(ctx, key, force=getattr(bucket, "force", False)), stale


@asset(
    partitions_def=BUCKETS, backfill_policy=SINGLE_RUN, io_manager_key="bucket_io", group_name="code_index",
    description="Each file's subgraph replaced in the graph, deleted files removed; a file stays in flight in the manifest until its subgraph is written.",
    check_specs=[AssetCheckSpec("bucket_matches_disk", asset="graph_loaded", blocking=True,
                                description="Every file written has the hash that is on disk and its parsed symbol count.")],
)
def graph_loaded(
    context: AssetExecutionContext, codemem: ResourceParam[ProjectStores], embedded_symbols: dict[str, PreparedBucket]
) -> Any:
    """Commit each bucket's manifest rows and load its subgraphs, then check the written files
    against the disk: a failed check fails the run before the partition is recorded as
    materialized. Launched without source_files, a bucket whose files changed since it was planned
    is read again from disk first; without embedded_symbols (or read again), its points are
    written again."""
    started = time.perf_counter()
    ctx = codemem.index_context()
    loaded: dict[str, PreparedBucket] = {}
    reread: dict[str, list[str]] = {}
    for key, bucket in embedded_symbols.items():
        if bucket is None or ctx is None:
            loaded[key] = bucket
            continue
        bucket, reread[key] = _current(context, ctx, key, bucket)
        if reread[key] or not _in_run(context, "embedded_symbols"):  # the store's points may be another version's
            bucket = write_bucket_vectors(ctx, bucket, embed=False)  # dense vectors: the background filler's
        load_bucket_graph(ctx, bucket)
        loaded[key] = bucket
    passed, metadata = True, {"note": "stores owned by another process; checked there"}
    if ctx is not None:
        passed, metadata = files_match_disk(ctx, [(p.state.path, p.state.content_hash, len(p.symbols))
                                                  for b in loaded.values() if b for p in b.prepared])
    yield AssetCheckResult(check_name="bucket_matches_disk", passed=passed, metadata=metadata_values(metadata))
    if not passed:
        raise Failure(description="the files written do not match the disk (a file changed during the run): "
                                  "nothing is recorded as materialized; the next run indexes the new version")
    indexed: dict[str, list[Any]] = defaultdict(list)
    for state in (codemem.manifest().files().values() if ctx is not None else []):
        if bucket_of(state.path) in loaded:
            indexed[bucket_of(state.path)].append(state)
    _per_bucket(context, {key: _loaded_metadata(bucket, indexed[key], reread.get(key, [])) for key, bucket in loaded.items()})
    yield Output(loaded, metadata={"run_buckets": len(loaded), "seconds": round(time.perf_counter() - started, 3)})


@asset(deps=[graph_loaded], group_name="code_index", description="Cross-file CALLS/IMPORTS/EXTENDS/IMPLEMENTS edges re-resolved for every changed node.")
def normalized_graph(context: AssetExecutionContext, codemem: ResourceParam[ProjectStores]) -> Output[None]:
    """Resolve cross-file edges (whatever the buckets left dirty, including interrupted runs)."""
    started = time.perf_counter()
    ctx = codemem.index_context()
    added = removed = 0
    if ctx is not None:
        added, removed = normalize_index(ctx)
    counts = ctx.manifest.counts() if ctx is not None else {}
    return Output(None, metadata={
        "edges_added": added, "edges_removed": removed, "files": counts.get("files", 0),
        "symbols": counts.get("symbols", 0), "resolved_edges": counts.get("resolved_edges", 0),
        "seconds": round(time.perf_counter() - started, 3),
    })


def _whole_index_check(name: str, description: str) -> Any:
    """An asset check on normalized_graph that runs ``pipelines.index_checks``' check ``name``."""

    @asset_check(asset=normalized_graph, name=name, description=description)
    def check(context: AssetCheckExecutionContext, codemem: ResourceParam[ProjectStores]) -> AssetCheckResult:
        ctx = codemem.index_context()
        if ctx is None:
            return AssetCheckResult(passed=True, metadata={"note": "stores owned by another process; checked there"})
        passed, metadata = WHOLE_INDEX_CHECKS[name](ctx)
        return AssetCheckResult(passed=passed, severity=AssetCheckSeverity.ERROR, metadata=metadata_values(metadata))

    return check


stores_agree = _whole_index_check("stores_agree", "The vector store, the graph and the manifest hold the same symbol ids.")
no_dangling_edges = _whole_index_check("no_dangling_edges", "Every resolved edge joins symbols, files or modules that exist.")
counts_match_parse = _whole_index_check(
    "counts_match_parse", "The manifest's per-file symbol counts add up to its symbols and the vector store's points.")


CODE_INDEX_ASSETS = [source_files, parsed_files, embedded_symbols, graph_loaded, normalized_graph]
CODE_INDEX_CHECKS = [stores_agree, no_dangling_edges, counts_match_parse]

"""The index's checks as plain functions: what the Dagster asset checks evaluate, for the asset
runs (``pipelines.dagster.assets``) and for the recorded ``codemem index`` run alike.

Each returns ``(passed, metadata)`` with JSON metadata (``{"md": text}`` is Markdown,
``{"json": value}`` JSON), which ``pipelines.dagster.index_job.metadata_values`` turns into
Dagster's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipelines.index_context import CODE_COLLECTION, EdgeScope, IndexContext
from pipelines.stages import dangling_edges, hash_mismatches, store_consistency, stored_symbol_ids
from resources.graph.cypher import locate_ids_query

REPAIR_HINT = "run `codemem index --repair` to re-index the named files and drop stray entries"

CheckResult = tuple[bool, dict[str, Any]]
WHOLE_SET_SHARE = 8
"""A check whose run wrote at least 1/8 of the index's symbols reads every id of a store (one
scan) rather than looking the written ones up by id."""


def files_match_disk(ctx: IndexContext, written: Iterable[tuple[str, str, int]]) -> CheckResult:
    """Every file written (path, sha256, parsed symbol count) still has that hash on disk and
    that many symbols in the manifest (check ``bucket_matches_disk``)."""
    written = list(written)
    problems = [f"{p}: changed on disk since it was parsed" for p in hash_mismatches(ctx, [w[0] for w in written])]
    for path, content_hash, symbols in written:
        stored = ctx.manifest.file(path)
        if stored is not None and stored.content_hash == content_hash and stored.symbol_count != symbols:
            problems.append(f"{path}: {stored.symbol_count} symbols indexed, {symbols} parsed")
    return not problems, {
        "problems": {"md": "\n".join(f"- {x}" for x in problems[:50]) or "none"},
        "files_checked": len(written),
        "fix": "the next run re-indexes changed files; " + REPAIR_HINT,
    }


def stores_agree(ctx: IndexContext) -> CheckResult:
    """The vector store, the graph and the manifest hold the same symbol ids."""
    bad = {k: v for k, v in store_consistency(ctx).items() if v}
    return not bad, {**{k: {"json": v[:20]} for k, v in bad.items()}, "fix": REPAIR_HINT}


def touched_stores_agree(ctx: IndexContext, paths: Iterable[str]) -> CheckResult:
    """``stores_agree`` at the cost of the change: the symbols of the files a run wrote are in
    the vector store and the graph, and the three stores hold as many symbols as each other
    (a file the run deleted that left a symbol behind shows in the counts). The full comparison
    of every id (``stores_agree``) stays the asset check of a run launched from the UI."""
    ids = sorted({i for group in ctx.manifest.symbol_ids_of(list(paths)).values() for i in group})
    manifest_symbols = ctx.manifest.counts()["symbols"]
    if len(ids) * WHOLE_SET_SHARE >= manifest_symbols:  # most of the index: reading every id is cheaper
        in_vectors, in_graph = stored_symbol_ids(ctx)
    else:
        in_vectors = {hit.id for hit in ctx.vectors.retrieve(CODE_COLLECTION, ids)} if ids else set()
        in_graph = set()
        for label in ("Function", "Class"):
            for start in range(0, len(ids), 1000):
                chunk = ids[start:start + 1000]
                _, rows, _ = ctx.graph.read_query(locate_ids_query(label), {"ids": chunk}, limit=len(chunk) + 1)
                in_graph |= {row["id"] for row in rows}
    counts = ctx.graph.counts()
    totals = {"manifest_symbols": manifest_symbols, "vector_points": ctx.vectors.count(CODE_COLLECTION),
              "graph_symbols": counts.get("Function", 0) + counts.get("Class", 0)}
    bad = {"missing_in_vectors": [i for i in ids if i not in in_vectors][:20], "missing_in_graph": [i for i in ids if i not in in_graph][:20]}
    bad = {k: v for k, v in bad.items() if v}
    passed = not bad and len(set(totals.values())) == 1
    return passed, {**{k: {"json": v} for k, v in bad.items()}, **totals, "symbols_checked": len(ids), "fix": REPAIR_HINT}


def no_dangling_edges(ctx: IndexContext, scope: EdgeScope | None = None) -> CheckResult:
    """Every resolved edge joins symbols, files or modules that exist: every edge of the index, or
    (at the cost of the change) those a run can have changed (``IndexReport.resolved_scope``; the
    whole check stays the asset check of a run launched from the UI)."""
    dangling = dangling_edges(ctx, scope)
    checked = "every edge" if scope is None else f"the edges of the {len(scope.sources)} nodes the run resolved"
    return not dangling, {"dangling": {"json": [list(e) for e in dangling[:20]]}, "checked": checked, "fix": REPAIR_HINT}


def counts_match_parse(ctx: IndexContext) -> CheckResult:
    """The manifest's per-file symbol counts add up to its symbols and the vector store's points."""
    parsed = ctx.manifest.parsed_symbols()
    symbols = ctx.manifest.counts()["symbols"]
    points = ctx.vectors.count(CODE_COLLECTION)
    return parsed == symbols == points, {
        "parsed_symbols": parsed, "manifest_symbols": symbols, "vector_points": points, "fix": REPAIR_HINT,
    }


WHOLE_INDEX_CHECKS = {"stores_agree": stores_agree, "no_dangling_edges": no_dangling_edges, "counts_match_parse": counts_match_parse}
"""The checks on ``normalized_graph``, by check name."""

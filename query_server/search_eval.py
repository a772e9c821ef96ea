"""``codemem eval``: how well code search works on the user's own repository.

Queries are mined from the project's docstrings (``pipelines.eval_corpus``); the indexable files
are copied with every docstring stripped into a temporary directory, that copy is indexed by the
real indexer with the project's settings (embedding model, fusion, ...) into a fresh state dir,
and each query runs through the real ``code_search``, in-process. BM25 over the same stripped
functions is measured in the same run. The project's own ``.codemem`` (and any Qdrant or Neo4j
server the project is configured with) is never opened: the copy always gets embedded stores.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.eval_corpus import (
    BM25,
    CUTOFF,
    MIN_DOCUMENTED,
    GoldMatcher,
    Query,
    evaluate,
    mine_project,
    sample_queries,
    write_copy,
)
from resources.settings import Settings

Progress = Callable[[str, int, int], None]
DEFAULT_MAX_QUERIES = 200
SEED = 0


class NotEnoughDocumented(ValueError):
    """The project has too few documented functions for the figures to mean anything."""

    def __init__(self, found: int, needed: int = MIN_DOCUMENTED) -> None:
        super().__init__(f"not enough documented functions to evaluate (found {found}; need {needed})")
        self.found = found
        self.needed = needed


@dataclass
class CodememRun:
    """What one codemem index + search pass produced."""

    rankings: list[list[int | None]]
    index_report: dict[str, Any]
    index_seconds: float
    search_seconds: float
    search_modes: list[str]
    indexed_gold: int  # gold functions that exist as symbols in codemem's index
    gold_total: int
    embedder: str = ""


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


def index_and_search(
    settings: Settings,
    queries: Sequence[Query],
    matcher: GoldMatcher,
    *,
    limit: int = CUTOFF,
    search: Callable[[Any, str, int], list[Any]] | None = None,
    progress: Progress | None = None,
) -> CodememRun:
    """Index ``settings.project_root`` into ``settings.state_dir``, then run every query.

    Args:
        settings: Settings of the (stripped) copy, with its own state dir.
        queries: The queries; their gold ids are ``matcher``'s function ids.
        matcher: Maps a hit to a function id.
        limit: Results per query.
        search: Optional replacement of ``svc.code_search`` (bench experiments):
            ``search(svc, query, limit)`` returning hits with ``file_path``, ``start_line``,
            ``qualified_name``, ``kind``.
        progress: Called with (phase, done, total): the index phases, then ``search``.
    """
    from pipelines.indexer import CODE_COLLECTION
    from resources.schemas.tools import CodeSearchInput, IndexInput

    from query_server.service import CodeMemService

    progress = progress or _no_progress
    svc = CodeMemService(settings)
    try:
        started = time.perf_counter()
        report = svc.index(IndexInput(embed=True), progress)
        index_seconds = time.perf_counter() - started
        points = svc.vectors.retrieve(CODE_COLLECTION, [s.id for s in svc.manifest.all_symbols()])
        indexed = {
            matcher.match(p.payload.get("file_path", ""), int(p.payload.get("start_line", -1)),
                          p.payload.get("qualified_name", ""), p.payload.get("kind", ""))
            for p in points
        }
        gold = {g for q in queries for g in q.gold}
        rankings: list[list[int | None]] = []
        modes: list[str] = []
        started = time.perf_counter()
        progress("search", 0, len(queries))
        for done, q in enumerate(queries, 1):
            if search is not None:
                hits = search(svc, q.text, limit)
                modes.append("custom")
            else:
                result = svc.code_search(CodeSearchInput(query=q.text[:100_000], limit=limit))
                hits = result.results
                modes.append(result.search_mode)
            rankings.append([matcher.match(h.file_path, h.start_line, h.qualified_name, h.kind) for h in hits])
            progress("search", done, len(queries))
        search_seconds = time.perf_counter() - started
        embedder = svc.embedder_status.message
    finally:
        svc.close()
    return CodememRun(
        rankings=rankings, index_report=report, index_seconds=index_seconds, search_seconds=search_seconds,
        search_modes=modes, indexed_gold=len(gold & indexed), gold_total=len(gold), embedder=embedder,
    )


def copy_settings(project: Settings, copy_root: Path, state_dir: Path) -> Settings:
    """The project's settings for the stripped copy: its own state dir, embedded stores only."""
    return project.model_copy(update={
        "project_root": copy_root, "state_dir": state_dir,
        "qdrant_url": None, "qdrant_host": None, "neo4j_uri": None,
    })


def evaluate_project(
    settings: Settings,
    *,
    max_queries: int = DEFAULT_MAX_QUERIES,
    seed: int = SEED,
    work_dir: Path | None = None,
    keep: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate ``code_search`` against BM25 on the project of ``settings``.

    Args:
        settings: The project's settings (``project_root`` is the repository).
        max_queries: At most this many queries (a fixed-seed sample when there are more).
        seed: The sample's seed.
        work_dir: Where the temporary copy and its state go (default: the system's temp dir).
        keep: Leave the copy and its index on disk (the report's ``work_dir`` says where).
        progress: Called with (phase, done, total): ``strip``, the index phases, ``search``, ``bm25``.

    Returns:
        The report (JSON-able): exact metrics of both methods, their MRR ratio, counts, timings.

    Raises:
        NotEnoughDocumented: fewer than ``MIN_DOCUMENTED`` functions carry a usable docstring.
    """
    progress = progress or _no_progress
    started = time.perf_counter()
    root = settings.resolved_root()
    mined = mine_project(
        root, extensions=settings.extensions, max_file_bytes=settings.max_file_bytes,
        progress=lambda done, total: progress("strip", done, total),
    )
    if mined.documented < MIN_DOCUMENTED:
        raise NotEnoughDocumented(mined.documented)
    queries = sample_queries(mined.queries, max_queries, seed)
    golds = [q.gold for q in queries]
    tmp = Path(tempfile.mkdtemp(prefix="codemem-eval-", dir=work_dir))
    try:
        copy_root = write_copy(mined.stripped, tmp / (root.name or "project"))
        run = index_and_search(
            copy_settings(settings, copy_root, tmp / "state"), queries, GoldMatcher(mined.functions), progress=progress
        )
        progress("bm25", 0, len(queries))
        bm25 = BM25([f.text for f in mined.functions])
        bm25_rankings = [bm25.rank(q.text, CUTOFF) for q in queries]
        progress("bm25", len(queries), len(queries))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    codemem = evaluate(run.rankings, golds)
    baseline = evaluate(bm25_rankings, golds)
    report = run.index_report
    return {
        "project": str(root),
        "files": len(mined.stripped),
        "files_left_out": [{"path": p, "reason": r} for p, r in mined.left_out],
        "functions": len(mined.functions),
        "documented_functions": mined.documented,
        "queries_available": len(mined.queries),
        "queries": len(queries),
        "max_queries": max_queries,
        "seed": seed,
        "cutoff": CUTOFF,
        "codemem": codemem.as_dict(digits=None),
        "bm25": baseline.as_dict(digits=None),
        "mrr_ratio": codemem.mrr / baseline.mrr if baseline.mrr else None,
        "codemem_info": {
            "embedder": run.embedder,
            "search_modes": sorted(set(run.search_modes)),
            "symbols": report.get("symbols_total"),
            "dense_vectors": f"{report.get('dense_done')}/{report.get('dense_total')}",
            "gold_indexed": f"{run.indexed_gold}/{run.gold_total}",
            "failed_files": len(report.get("failed", [])),
            "index_seconds": round(run.index_seconds, 2),
            "search_ms_per_query": round(1000 * run.search_seconds / max(1, len(queries)), 1),
        },
        "work_dir": str(tmp) if keep else None,
        "seconds": round(time.perf_counter() - started, 2),
    }

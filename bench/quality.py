"""Retrieval quality: codemem's ``code_search`` vs BM25, raw MiniLM and their plain RRF.

Metrics (all at cutoff 10, over the corpus's queries; computed by ``pipelines.eval_corpus``, as
``codemem eval`` computes them on a user's repository):
* R@1 — share of queries whose first result is a gold function;
* R@10 — share with a gold function in the first 10;
* MRR — mean of 1/rank of the first gold function in the first 10 (0 when absent).

A codemem hit counts as a gold function when its ``file_path`` matches and its ``start_line``
is between the function's first decorator line and its ``def`` line, or when its qualified name
ends with the function's file-local qualified name (``Session.request``).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.baselines import BM25, RawMiniLM, VectorCache, dense_rank, rrf
from bench.corpora import Corpus, fresh_copy
from pipelines.eval_corpus import CUTOFF, Metrics, evaluate, first_gold_rank
from pipelines.eval_corpus import GoldMatcher as _GoldMatcher
from query_server.search_eval import CodememRun

__all__ = ["CodememRun", "GoldMatcher", "Metrics", "codemem_rankings", "evaluate", "first_gold_rank", "run_quality"]

TARGET_VS_BM25 = 1.3
TARGET_VS_RRF = 1.1


# -- baselines -----------------------------------------------------------------------------

def baseline_rankings(
    corpus: Corpus, model: RawMiniLM | None, cache: VectorCache | None, depth: int = 100
) -> tuple[dict[str, list[list[int]]], dict[str, Any]]:
    """Rankings of BM25, MiniLM and RRF(BM25, MiniLM) for every query of ``corpus``."""
    texts = [f.text for f in corpus.functions]
    queries = [q.text for q in corpus.queries]
    info: dict[str, Any] = {}
    started = time.perf_counter()
    bm25 = BM25(texts)
    bm = [bm25.rank(q, depth) for q in queries]
    info["bm25_seconds"] = round(time.perf_counter() - started, 3)
    out: dict[str, list[list[int]]] = {"BM25": bm}
    if model is not None:
        started = time.perf_counter()
        if cache is not None:
            doc_vecs, computed_docs = cache.embed(model, texts)
            query_vecs, computed_q = cache.embed(model, queries)
        else:
            doc_vecs, query_vecs = model.embed(texts), model.embed(queries)
            computed_docs, computed_q = len(texts), len(queries)
        info["minilm_seconds"] = round(time.perf_counter() - started, 3)
        info["minilm_computed"] = computed_docs + computed_q
        dense = [dense_rank(doc_vecs, query_vecs[i], depth) for i in range(len(queries))]
        out["MiniLM"] = dense
        out["RRF(BM25,MiniLM)"] = [rrf([b, d])[:depth] for b, d in zip(bm, dense, strict=True)]
    return out, info


# -- codemem -------------------------------------------------------------------------------

class GoldMatcher(_GoldMatcher):
    """Maps a codemem hit to the corpus function it is (or None)."""

    def __init__(self, corpus: Corpus) -> None:
        super().__init__(corpus.functions)


def codemem_rankings(
    corpus: Corpus,
    work_dir: Path | None = None,
    limit: int = CUTOFF,
    search: Callable[[Any, str, int], list[Any]] | None = None,
) -> CodememRun:
    """Index a fresh copy of ``corpus`` with a fresh (empty) state dir, then query it.

    Args:
        search: Optional replacement of ``svc.code_search`` (experiments): ``search(svc, query, limit)``
            returning hits with ``file_path``, ``start_line``, ``qualified_name``, ``kind``.
    """
    from query_server.search_eval import index_and_search
    from resources.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix=f"codemem-bench-{corpus.name}-", dir=work_dir))
    project = fresh_copy(corpus, tmp / corpus.name)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = Settings(project_root=project, state_dir=tmp / "state", dense_embeddings=True)
    return index_and_search(settings, corpus.queries, GoldMatcher(corpus), limit=limit, search=search)


# -- report --------------------------------------------------------------------------------

def run_quality(corpora: Sequence[Corpus], with_codemem: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every method on every corpus; returns the JSON-able results (tables printed via ``log``)."""
    model = RawMiniLM()
    cache = VectorCache()
    results: dict[str, Any] = {}
    for corpus in corpora:
        log(f"\n== {corpus.name} {corpus.version}: {len(corpus.files)} files, {len(corpus.functions)} functions, "
            f"{len(corpus.queries)} queries")
        golds = [q.gold for q in corpus.queries]
        rankings, info = baseline_rankings(corpus, model, cache)
        entry: dict[str, Any] = {
            "version": corpus.version, "files": len(corpus.files), "functions": len(corpus.functions),
            "queries": len(corpus.queries), "baseline_info": info, "methods": {},
        }
        for name, ranks in rankings.items():
            entry["methods"][name] = evaluate(ranks, golds).as_dict()
        if with_codemem:
            try:
                run = codemem_rankings(corpus)
            except Exception as exc:  # noqa: BLE001 - report and keep the baselines
                import traceback

                log(f"codemem failed on {corpus.name}: {type(exc).__name__}: {exc}")
                entry["codemem_error"] = traceback.format_exc()
            else:
                entry["methods"]["codemem"] = evaluate(run.rankings, golds).as_dict()
                modes = sorted(set(run.search_modes))
                entry["codemem_info"] = {
                    "index_seconds": round(run.index_seconds, 2),
                    "search_ms_per_query": round(1000 * run.search_seconds / max(1, len(corpus.queries)), 1),
                    "search_modes": modes,
                    "gold_indexed": f"{run.indexed_gold}/{run.gold_total}",
                    "symbols_total": run.index_report.get("symbols_total"),
                    "dense": f"{run.index_report.get('dense_done')}/{run.index_report.get('dense_total')}",
                    "failed_files": run.index_report.get("failed"),
                }
                if modes != ["hybrid"]:
                    log(f"WARNING: codemem search mode was {modes}, not hybrid")
        results[corpus.name] = entry
        log(format_table(corpus.name, entry))
    return results


def targets(entry: dict[str, Any]) -> list[tuple[str, float | None, float, bool | None]]:
    """(label, ratio, target, passed) for the two MRR targets of one corpus."""
    methods = entry["methods"]
    cm = methods.get("codemem")
    out = []
    for base, target in (("BM25", TARGET_VS_BM25), ("RRF(BM25,MiniLM)", TARGET_VS_RRF)):
        ratio = cm["mrr"] / methods[base]["mrr"] if cm and base in methods and methods[base]["mrr"] else None
        out.append((f"codemem MRR / {base} MRR", ratio, target, None if ratio is None else ratio >= target))
    return out


def format_table(name: str, entry: dict[str, Any]) -> str:
    lines = [f"{'method':<20} {'MRR@10':>7} {'R@1':>7} {'R@10':>7}"]
    for method, m in entry["methods"].items():
        lines.append(f"{method:<20} {m['mrr']:>7.3f} {m['r1']:>7.3f} {m['r10']:>7.3f}")
    if "codemem_info" in entry:
        lines.append(f"codemem: {entry['codemem_info']}")
    for label, ratio, target, passed in targets(entry):
        verdict = "n/a" if passed is None else ("PASS" if passed else "FAIL")
        shown = "  -  " if ratio is None else f"{ratio:.3f}"
        lines.append(f"{label:<40} {shown:>6}  target >= {target:.2f}  {verdict}")
    return "\n".join(lines)


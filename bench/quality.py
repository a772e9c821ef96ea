"""Retrieval quality: codemem's ``code_search`` vs BM25, raw MiniLM and their plain RRF.

Metrics (all at cutoff 10, over the corpus's queries):
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.baselines import BM25, RawMiniLM, VectorCache, dense_rank, rrf
from bench.corpora import Corpus, fresh_copy

CUTOFF = 10
TARGET_VS_BM25 = 1.3
TARGET_VS_RRF = 1.1


@dataclass
class Metrics:
    """R@1, R@10 and MRR@10 of one method on one corpus."""

    mrr: float
    r1: float
    r10: float
    n: int

    def as_dict(self) -> dict[str, float]:
        return {"mrr": round(self.mrr, 4), "r1": round(self.r1, 4), "r10": round(self.r10, 4), "queries": self.n}


def first_gold_rank(ranking: Sequence[int | None], gold: Sequence[int], cutoff: int = CUTOFF) -> int | None:
    """1-based rank of the first gold id in the top ``cutoff``, or None."""
    wanted = set(gold)
    for r, doc in enumerate(ranking[:cutoff], 1):
        if doc is not None and doc in wanted:
            return r
    return None


def evaluate(rankings: Sequence[Sequence[int | None]], golds: Sequence[Sequence[int]]) -> Metrics:
    """Metrics of rankings (one per query, best first) against gold id sets."""
    ranks = [first_gold_rank(r, g) for r, g in zip(rankings, golds, strict=True)]
    n = len(ranks)
    if not n:
        return Metrics(0.0, 0.0, 0.0, 0)
    return Metrics(
        mrr=sum(1.0 / r for r in ranks if r) / n,
        r1=sum(1 for r in ranks if r == 1) / n,
        r10=sum(1 for r in ranks if r) / n,
        n=n,
    )


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

class GoldMatcher:
    """Maps a codemem hit to the corpus function it is (or None)."""

    def __init__(self, corpus: Corpus) -> None:
        self.by_line: dict[tuple[str, int], int] = {}
        self.by_name: dict[tuple[str, str], int] = {}
        seen: dict[tuple[str, str], int] = {}
        for fn in corpus.functions:
            for line in range(fn.first_line, fn.def_line + 1):
                self.by_line.setdefault((fn.path, line), fn.idx)
            key = (fn.path, fn.local_qualified_name)
            seen[key] = seen.get(key, 0) + 1
            self.by_name.setdefault(key, fn.idx)
        # A name defined twice in a file (overloads, redefinitions) is matched by line only.
        self.by_name = {k: v for k, v in self.by_name.items() if seen[k] == 1}
        self.names_by_path: dict[str, list[tuple[str, int]]] = {}
        for (path, name), idx in self.by_name.items():
            self.names_by_path.setdefault(path, []).append((name, idx))

    def match(self, file_path: str, start_line: int, qualified_name: str = "", kind: str = "") -> int | None:
        """The corpus function a hit is: by (file, line) first, else by a name unique in its file."""
        if kind and kind not in ("function", "method"):
            return None
        idx = self.by_line.get((file_path, start_line))
        if idx is not None:
            return idx
        best: tuple[int, int] | None = None  # (len(name), idx): the longest matching suffix wins
        for name, idx in self.names_by_path.get(file_path, []):
            if (qualified_name == name or qualified_name.endswith("." + name)) and (best is None or len(name) > best[0]):
                best = (len(name), idx)
        return best[1] if best else None


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
    from query_server.service import CodeMemService
    from resources.schemas.tools import CodeSearchInput, IndexInput
    from resources.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix=f"codemem-bench-{corpus.name}-", dir=work_dir))
    project = fresh_copy(corpus, tmp / corpus.name)
    state = tmp / "state"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = Settings(project_root=project, state_dir=state, dense_embeddings=True)
    svc = CodeMemService(settings)
    try:
        started = time.perf_counter()
        report = svc.index(IndexInput(embed=True))
        index_seconds = time.perf_counter() - started
        matcher = GoldMatcher(corpus)
        from pipelines.indexer import CODE_COLLECTION

        points = svc.vectors.retrieve(CODE_COLLECTION, [s.id for s in svc.manifest.all_symbols()])
        indexed = {
            matcher.match(p.payload.get("file_path", ""), int(p.payload.get("start_line", -1)),
                          p.payload.get("qualified_name", ""), p.payload.get("kind", ""))
            for p in points
        }
        gold = {g for q in corpus.queries for g in q.gold}
        rankings: list[list[int | None]] = []
        modes: list[str] = []
        started = time.perf_counter()
        for q in corpus.queries:
            if search is not None:
                hits = search(svc, q.text, limit)
                modes.append("custom")
            else:
                result = svc.code_search(CodeSearchInput(query=q.text[:100_000], limit=limit))
                hits = result.results
                modes.append(result.search_mode)
            rankings.append([matcher.match(h.file_path, h.start_line, h.qualified_name, h.kind) for h in hits])
        search_seconds = time.perf_counter() - started
    finally:
        svc.close()
    return CodememRun(
        rankings=rankings, index_report=report, index_seconds=index_seconds, search_seconds=search_seconds,
        search_modes=modes, indexed_gold=len(gold & indexed), gold_total=len(gold),
    )


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


"""Why codemem's MRR is where it is: variants of what it embeds / indexes and how it fuses.

``python -m bench.experiments [--corpora requests flask] [--variants NAME ...]``

Each variant re-creates codemem's search index for the benchmark corpora with the real pieces
(``pipelines.parsing.parse_source``, ``pipelines.records.build_symbol_records``,
``resources.vectors.sparse``, ``resources.vectors.edge.EdgeVectorStore``) but a different
``embedding_text`` and/or ``sparse_text`` (monkeypatched functions of this process only; no
project file is edited), then ranks every query by dense only, sparse only, and weighted RRF
of the two candidate lists, for several (dense, sparse) weights, RRF k and candidate depths.
``--check`` also compares the default fusion with ``EdgeVectorStore.hybrid_query`` to make sure
the re-implemented fusion equals the store's.

Dense vectors come from the benchmark's raw MiniLM (the same numpy forward pass and weights as
codemem's local embedder) through the bench vector cache, so variants that embed the same text
cost nothing the second time.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.baselines import RawMiniLM, VectorCache, rrf
from bench.corpora import Corpus, load_corpus
from bench.quality import GoldMatcher, evaluate
from resources.text.identifiers import IDENTIFIER, identifier_words

EmbedFn = Callable[[Any, Any, str], str]
SparseFn = Callable[[Any, Any], str]


# -- text variants ---------------------------------------------------------------------------

def _records():  # noqa: ANN202
    from pipelines import records

    return records


def _body(symbol: Any) -> str:
    body = symbol.code
    if body.startswith(symbol.signature[:20]):
        body = body[len(symbol.signature):]
    return body


def _squeeze(text: str) -> str:
    """Blank lines and trailing spaces removed (stripped docstrings leave many)."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def _ident_words(text: str) -> str:
    """Every identifier of ``text`` split into lower-case words (order kept, repeats dropped)."""
    seen: dict[str, None] = {}
    for word in IDENTIFIER.findall(text):
        for part in identifier_words(word):
            seen.setdefault(part, None)
    return " ".join(seen)


def embed_current(parsed: Any, symbol: Any, qualified: str) -> str:
    return _records().embedding_text(parsed, symbol, qualified)


def embed_raw_code(parsed: Any, symbol: Any, qualified: str) -> str:
    """What the plain baseline embeds: the symbol's source."""
    return symbol.code


def embed_squeezed(parsed: Any, symbol: Any, qualified: str) -> str:
    """Current layout with blank lines squeezed out of the body (more code fits in 256 pieces)."""
    split = _records().split_identifier
    words = split(symbol.name)
    container = f" of {split(symbol.container.split('.')[-1])}" if symbol.container else ""
    lines = [f"{symbol.kind} {words}{container}"]
    if symbol.docstring:
        lines.append(symbol.docstring[:600])
    lines.append(symbol.signature)
    lines.append(_squeeze(_body(symbol))[:1200])
    lines.append(f"in {parsed.path}")
    return "\n".join(lines)


def embed_no_path(parsed: Any, symbol: Any, qualified: str) -> str:
    """Current layout without the trailing ``in <path>`` line."""
    text = embed_squeezed(parsed, symbol, qualified)
    return text.rsplit("\nin ", 1)[0]


def embed_words_header(parsed: Any, symbol: Any, qualified: str) -> str:
    """Header in words: name, container and module as words, then signature and squeezed body."""
    split = _records().split_identifier
    from pipelines.qualified_names import module_name

    module = module_name(parsed.path).split(".")
    module_words = " ".join(split(m) for m in module[-2:])
    container = f" of {split(symbol.container.split('.')[-1])}" if symbol.container else ""
    lines = [f"{split(symbol.name)}{container} ({symbol.kind} in {module_words})"]
    if symbol.docstring:
        lines.append(symbol.docstring[:600])
    lines.append(symbol.signature)
    lines.append(_squeeze(_body(symbol))[:1200])
    return "\n".join(lines)


def embed_code_words(parsed: Any, symbol: Any, qualified: str) -> str:
    """Header, signature, then the body's identifiers as words (natural-language-ish view of code)."""
    split = _records().split_identifier
    container = f" of {split(symbol.container.split('.')[-1])}" if symbol.container else ""
    lines = [f"{symbol.kind} {split(symbol.name)}{container}"]
    if symbol.docstring:
        lines.append(symbol.docstring[:600])
    lines.append(symbol.signature)
    lines.append(_ident_words(_body(symbol))[:1200])
    return "\n".join(lines)


def sparse_current(parsed: Any, symbol: Any) -> str:
    return _records().sparse_text(parsed, symbol)


def sparse_code_only(parsed: Any, symbol: Any) -> str:
    """What the BM25 baseline indexes: the symbol's source."""
    return symbol.code or symbol.signature


def sparse_name_once(parsed: Any, symbol: Any) -> str:
    """Current fields with the name once and no path."""
    parts = [symbol.name]
    if symbol.container:
        parts.append(symbol.container)
    if symbol.docstring:
        parts.append(symbol.docstring)
    parts.append(symbol.code or symbol.signature)
    return "\n".join(parts)


def sparse_no_path(parsed: Any, symbol: Any) -> str:
    """Current fields without the path."""
    return sparse_current(parsed, symbol).rsplit("\n", 1)[0]


def class_outline(parsed: Any, symbol: Any) -> str:
    """A class's code with its methods' bodies cut out (their signature lines kept)."""
    lines = symbol.code.splitlines()
    keep = [True] * len(lines)
    for other in parsed.symbols:
        if other.container == symbol.qualified_name and other.kind == "method":
            sig_lines = max(1, other.signature.count("\n") + 1)
            body_from = other.start_line - symbol.start_line + sig_lines
            for ln in range(body_from, other.end_line - symbol.start_line + 1):
                if 0 <= ln < len(keep):
                    keep[ln] = False
            # decorators + def line(s) stay; a multi-line signature is collapsed in .signature,
            # so keep up to the line that ends with ':' as well
            ln = other.start_line - symbol.start_line
            while 0 <= ln < len(lines) and not lines[ln].rstrip().endswith(":") and ln < other.end_line - symbol.start_line:
                keep[ln] = True
                ln += 1
            if 0 <= ln < len(keep):
                keep[ln] = True
    return "\n".join(line for line, k in zip(lines, keep, strict=True) if k and line.strip())


def sparse_class_outline(parsed: Any, symbol: Any) -> str:
    """Current fields, but a class contributes its outline, not all of its methods' bodies."""
    if symbol.kind not in ("class", "interface", "struct", "trait", "enum"):
        return sparse_current(parsed, symbol)
    parts = [symbol.name, symbol.name, symbol.name]
    if symbol.container:
        parts.append(symbol.container)
    if symbol.docstring:
        parts.append(symbol.docstring)
    parts.append(class_outline(parsed, symbol))
    parts.append(parsed.path)
    return "\n".join(parts)


def embed_class_outline(parsed: Any, symbol: Any, qualified: str) -> str:
    """Current layout, but a class shows its outline (fields + method signatures) as the body."""
    if symbol.kind not in ("class", "interface", "struct", "trait", "enum"):
        return embed_current(parsed, symbol, qualified)
    split = _records().split_identifier
    container = f" of {split(symbol.container.split('.')[-1])}" if symbol.container else ""
    lines = [f"{symbol.kind} {split(symbol.name)}{container}"]
    if symbol.docstring:
        lines.append(symbol.docstring[:600])
    lines.append(class_outline(parsed, symbol)[:1200 + len(symbol.signature)])
    lines.append(f"in {parsed.path}")
    return "\n".join(lines)


def _embed_body_limit(limit: int) -> EmbedFn:
    def fn(parsed: Any, symbol: Any, qualified: str) -> str:
        records = _records()
        old = records.MAX_EMBED_BODY_CHARS
        records.MAX_EMBED_BODY_CHARS = limit
        try:
            return records.embedding_text(parsed, symbol, qualified)
        finally:
            records.MAX_EMBED_BODY_CHARS = old

    fn.__doc__ = f"Current layout with the body cut at {limit} characters."
    return fn


EMBED_VARIANTS: dict[str, EmbedFn] = {
    "current": embed_current,
    "raw_code": embed_raw_code,
    "squeezed": embed_squeezed,
    "no_path": embed_no_path,
    "words_header": embed_words_header,
    "code_words": embed_code_words,
    "class_outline": embed_class_outline,
    "body150": _embed_body_limit(150),
    "body300": _embed_body_limit(300),
    "body600": _embed_body_limit(600),
}
SPARSE_VARIANTS: dict[str, SparseFn] = {
    "current": sparse_current,
    "code_only": sparse_code_only,
    "name_once": sparse_name_once,
    "no_path": sparse_no_path,
    "class_outline": sparse_class_outline,
}


# -- index build ------------------------------------------------------------------------------

@dataclass
class Symbols:
    """Parsed symbols of a corpus with their records (payload, texts)."""

    parsed: list[tuple[Any, Any, str, dict[str, Any]]]  # (parsed file, symbol, qualified, payload)


def parse_corpus(corpus: Corpus) -> Symbols:
    from pipelines.parsing import language_for_path, parse_source

    records = _records()
    out = []
    for path in corpus.files:
        language = language_for_path(path)
        if language is None:
            continue
        data = (corpus.root / path).read_bytes()
        parsed = parse_source(path, data, language)
        for rec in records.build_symbol_records(parsed):
            out.append((parsed, rec.symbol, rec.qualified_name, rec.payload))
    return Symbols(out)


class VariantIndex:
    """An EdgeVectorStore holding one (embed, sparse) variant of a corpus."""

    def __init__(self, corpus: Corpus, symbols: Symbols, embed_fn: EmbedFn, sparse_fn: SparseFn,
                 model: RawMiniLM, cache: VectorCache, avg_len: float | str | None = None,
                 k1: float | None = None, query_tf: bool = False) -> None:
        from resources.vectors import sparse
        from resources.vectors.edge import EdgeVectorStore
        from resources.vectors.store import VectorPoint

        self.tmp = Path(tempfile.mkdtemp(prefix="codemem-exp-"))
        self.store = EdgeVectorStore(self.tmp)
        self.store.ensure_collection("code", model.dimension)
        texts = [embed_fn(p, s, q) for p, s, q, _ in symbols.parsed]
        vecs, computed = cache.embed(model, texts)
        self.computed = computed
        old_avg, old_k1 = sparse.AVERAGE_LENGTH, sparse.K1
        self.query_tf = query_tf
        if avg_len == "corpus":
            lengths = [len(sparse.tokenize(sparse_fn(p, s))) for p, s, _, _ in symbols.parsed]
            avg_len = sum(lengths) / max(1, len(lengths))
        if avg_len is not None:
            sparse.AVERAGE_LENGTH = float(avg_len)
        if k1 is not None:
            sparse.K1 = k1
        try:
            points = [
                VectorPoint(id=payload["id"], payload=payload, dense=vecs[i].tolist(),
                            sparse=sparse.document_vector(sparse_fn(p, s)))
                for i, (p, s, q, payload) in enumerate(symbols.parsed)
            ]
        finally:
            sparse.AVERAGE_LENGTH, sparse.K1 = old_avg, old_k1
        self.store.upsert("code", points)
        self.store.flush()
        self.texts = texts

    def lists(self, query_vec: np.ndarray, query: str, candidates: int):  # noqa: ANN201
        from resources.vectors import sparse
        if self.query_tf:  # repeated query words count (as in classic BM25), not once each
            from collections import Counter

            qv = sparse._merge(Counter(sparse.tokenize(query)), float)
        else:
            qv = sparse.query_vector(query)
        return self.store.ranked_lists("code", dense=query_vec, sparse=qv, candidates=candidates)

    def hybrid(self, query_vec: np.ndarray, query: str, limit: int, candidates: int = 100, weights=(1.0, 1.0)):  # noqa: ANN001, ANN201
        from resources.vectors import sparse
        return self.store.hybrid_query("code", dense=query_vec, sparse=sparse.query_vector(query), limit=limit,
                                       candidates=candidates, weights=weights)

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- evaluation --------------------------------------------------------------------------------

Ranked = list[tuple[str, float]]  # (point id, store score), best first


def fuse_rrf(dense: Ranked, sparse: Ranked, weights: tuple[float, float] = (1.0, 1.0), k: int = 60) -> list[str]:
    """Weighted reciprocal-rank fusion (what the store's ``Fusion.Rrf`` computes)."""
    return rrf([[i for i, _ in dense], [i for i, _ in sparse]], k=k, weights=list(weights))


def _minmax(hits: Ranked) -> dict[str, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    lo, hi = min(scores), max(scores)
    return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in hits}


def _dbsf(hits: Ranked) -> dict[str, float]:
    """Qdrant's distribution-based score fusion normalization: (s - (mu - 3 sd)) / 6 sd."""
    if not hits:
        return {}
    scores = np.asarray([s for _, s in hits], dtype=np.float64)
    mu, sd = scores.mean(), scores.std()
    if sd == 0:
        return {i: 0.5 for i, _ in hits}
    return {i: float(np.clip((s - (mu - 3 * sd)) / (6 * sd), 0, 1)) for i, s in hits}


def fuse_scores(dense: Ranked, sparse: Ranked, alpha: float = 0.5, norm: str = "minmax") -> list[str]:
    """Convex combination alpha * dense + (1 - alpha) * sparse of per-query normalized scores."""
    f = _minmax if norm == "minmax" else _dbsf
    d, s = f(dense), f(sparse)
    ids = list(dict.fromkeys([*d, *s]))
    return sorted(ids, key=lambda i: -(alpha * d.get(i, 0.0) + (1 - alpha) * s.get(i, 0.0)))


_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_test\.py$")


def demote_tests(fused: list[str], payloads: dict[str, dict[str, Any]], factor: float = 0.5) -> list[str]:
    """Re-rank a fused list, multiplying a test file's reciprocal rank by ``factor``."""
    scored = [
        (1.0 / (r + 1)) * (factor if _TEST_PATH.search(payloads[i]["file_path"]) else 1.0)
        for r, i in enumerate(fused)
    ]
    order = sorted(range(len(fused)), key=lambda j: -scored[j])
    return [fused[j] for j in order]


FUSIONS: dict[str, Callable[[Ranked, Ranked], list[str]]] = {
    "rrf 1:1 k60 (current)": lambda d, s: fuse_rrf(d, s),
    "rrf 1.5:1 k60": lambda d, s: fuse_rrf(d, s, (1.5, 1.0)),
    "rrf 2:1 k60": lambda d, s: fuse_rrf(d, s, (2.0, 1.0)),
    "rrf 1:1.5 k60": lambda d, s: fuse_rrf(d, s, (1.0, 1.5)),
    "rrf 1:1 k20": lambda d, s: fuse_rrf(d, s, k=20),
    "rrf 1:1 k5": lambda d, s: fuse_rrf(d, s, k=5),
    "dbsf 1:1 (qdrant Fusion.Dbsf)": lambda d, s: fuse_scores(d, s, 0.5, "dbsf"),
    "minmax a=.3": lambda d, s: fuse_scores(d, s, 0.3),
    "minmax a=.4": lambda d, s: fuse_scores(d, s, 0.4),
    "minmax a=.5": lambda d, s: fuse_scores(d, s, 0.5),
    "minmax a=.6": lambda d, s: fuse_scores(d, s, 0.6),
    "minmax a=.7": lambda d, s: fuse_scores(d, s, 0.7),
}


def reciprocal_ranks(rankings: list[list[int | None]], golds: list[list[int]], cutoff: int = 10) -> np.ndarray:
    """Per-query 1/rank of the first gold in the top ``cutoff`` (0 when absent)."""
    out = np.zeros(len(rankings))
    for q, (ranking, gold) in enumerate(zip(rankings, golds, strict=True)):
        for r, doc in enumerate(ranking[:cutoff], 1):
            if doc is not None and doc in gold:
                out[q] = 1.0 / r
                break
    return out


def evaluate_variant(corpus: Corpus, symbols: Symbols, index: VariantIndex, model: RawMiniLM, cache: VectorCache,
                     candidates_list=(100,), check: bool = False, fusions: dict | None = None,  # noqa: ANN001
                     demote: bool = False,
                     ) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """Metrics and per-query reciprocal ranks of dense, sparse and every fusion."""
    fusions = fusions or FUSIONS
    matcher = GoldMatcher(corpus)
    qvecs, _ = cache.embed(model, [q.text for q in corpus.queries])
    golds = [q.gold for q in corpus.queries]
    by_id = {payload["id"]: payload for _, _, _, payload in symbols.parsed}

    def ids_to_idx(ids: list[str]) -> list[int | None]:
        return [matcher.match(by_id[i]["file_path"], by_id[i]["start_line"], by_id[i]["qualified_name"],
                              by_id[i]["kind"]) for i in ids]

    out: dict[str, dict[str, float]] = {}
    rrs: dict[str, np.ndarray] = {}

    def record(name: str, rankings: list[list[str]]) -> None:
        mapped = [ids_to_idx(r[:10]) for r in rankings]
        out[name] = evaluate(mapped, golds).as_dict()
        rrs[name] = reciprocal_ranks(mapped, golds)

    for candidates in candidates_list:
        dense_r, sparse_r = [], []
        for i, q in enumerate(corpus.queries):
            d, s = index.lists(qvecs[i], q.text, candidates)
            dense_r.append([(h.id, h.score) for h in d])
            sparse_r.append([(h.id, h.score) for h in s])
        suffix = "" if candidates == 100 else f" c{candidates}"
        if candidates == candidates_list[0]:
            record("dense only", [[i for i, _ in r] for r in dense_r])
            record("sparse only", [[i for i, _ in r] for r in sparse_r])
        for name, fuse in fusions.items():
            record(name + suffix, [fuse(d, s) for d, s in zip(dense_r, sparse_r, strict=True)])
        if demote:
            for name in ("rrf 1:1 k60 (current)", "minmax a=.5"):
                fused = [fusions[name](d, s) for d, s in zip(dense_r, sparse_r, strict=True)]
                record(f"{name} + tests x0.5{suffix}", [demote_tests(f, by_id) for f in fused])
    if check:
        hyb = [[h.id for h in index.hybrid(qvecs[i], q.text, 10)] for i, q in enumerate(corpus.queries)]
        record("store hybrid_query (check)", hyb)
    return out, rrs


def paired_se(a: np.ndarray, b: np.ndarray) -> float:
    """Standard error of mean(a - b) over queries (paired)."""
    diff = a - b
    return float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0


def run_grid(corpora: list[str], embeds: list[str], sparses: list[str], avg_lens: list[str] = ["default"],  # noqa: B006
             k1s: list[str] = ["default"], query_tf: bool = False, candidates: tuple[int, ...] = (100,),  # noqa: B006
             drop_kinds: list[str] = [], check: bool = False, demote: bool = False,  # noqa: B006
             quiet: bool = False) -> dict[str, Any]:
    """Every combination of the given variants on every corpus; returns metrics and per-query RRs."""
    model, cache = RawMiniLM(), VectorCache()
    results: dict[str, Any] = {}
    reference: dict[str, np.ndarray] = {}
    for name in corpora:
        corpus = load_corpus(name)
        symbols = parse_corpus(corpus)
        if drop_kinds:
            symbols = Symbols([t for t in symbols.parsed if t[1].kind not in drop_kinds])
        for e in embeds:
            for s in sparses:
                for avg_raw, k1_raw in [(a, k) for a in avg_lens for k in k1s]:
                    avg = None if avg_raw == "default" else avg_raw if avg_raw == "corpus" else float(avg_raw)
                    k1 = None if k1_raw == "default" else float(k1_raw)
                    label = f"{name} embed={e} sparse={s}" + (f" avg_len={avg}" if avg else "") + (
                        f" k1={k1}" if k1 else "") + (" query_tf" if query_tf else "") + (
                        f" without {','.join(drop_kinds)}" if drop_kinds else "")
                    started = time.perf_counter()
                    index = VariantIndex(corpus, symbols, EMBED_VARIANTS[e], SPARSE_VARIANTS[s], model, cache, avg, k1,
                                         query_tf)
                    try:
                        res, rrs = evaluate_variant(corpus, symbols, index, model, cache, candidates, check, demote=demote)
                    finally:
                        index.close()
                    results[label] = {"metrics": res, "rr": {k: v.round(4).tolist() for k, v in rrs.items()}}
                    if quiet:
                        continue
                    print(f"\n== {label} ({len(symbols.parsed)} symbols, {index.computed} embedded, "
                          f"{time.perf_counter() - started:.0f} s)")
                    # Deltas are against the first variant run for this corpus with the current
                    # fusion (run --embed current --sparse current first to compare with codemem).
                    ref = reference.setdefault(name, rrs["rrf 1:1 k60 (current)"])
                    for method, m in res.items():
                        se = paired_se(rrs[method], ref)
                        print(f"  {method:<32} MRR {m['mrr']:.3f} ({m['mrr'] - ref.mean():+.3f} ±{se:.3f})  "
                              f"R@1 {m['r1']:.3f}  R@10 {m['r10']:.3f}")
    return results


# The report: (row label, variant label suffix, method) — variant labels as run_grid writes them.
REPORT_ROWS: list[tuple[str, str, str]] = [
    ("codemem as it is (RRF 1:1, k=60)", "embed=current sparse=current", "rrf 1:1 k60 (current)"),
    ("dense list only", "embed=current sparse=current", "dense only"),
    ("sparse list only", "embed=current sparse=current", "sparse only"),
    ("RRF weights dense 1.5 : sparse 1", "embed=current sparse=current", "rrf 1.5:1 k60"),
    ("RRF weights 2 : 1", "embed=current sparse=current", "rrf 2:1 k60"),
    ("RRF weights 1 : 1.5", "embed=current sparse=current", "rrf 1:1.5 k60"),
    ("RRF k=20", "embed=current sparse=current", "rrf 1:1 k20"),
    ("RRF k=5", "embed=current sparse=current", "rrf 1:1 k5"),
    ("DBSF (qdrant Fusion.Dbsf)", "embed=current sparse=current", "dbsf 1:1 (qdrant Fusion.Dbsf)"),
    ("min-max convex, dense weight .4", "embed=current sparse=current", "minmax a=.4"),
    ("min-max convex, dense weight .5", "embed=current sparse=current", "minmax a=.5"),
    ("min-max convex, dense weight .6", "embed=current sparse=current", "minmax a=.6"),
    ("min-max convex, dense weight .7", "embed=current sparse=current", "minmax a=.7"),
    ("test files demoted (x0.5) after RRF", "embed=current sparse=current", "rrf 1:1 k60 (current) + tests x0.5"),
    ("embed body cut at 300 chars, RRF", "embed=body300 sparse=current", "rrf 1:1 k60 (current)"),
    ("embed body cut at 300 chars, dense only", "embed=body300 sparse=current", "dense only"),
    ("class outline in sparse, RRF", "embed=current sparse=class_outline", "rrf 1:1 k60 (current)"),
    ("class outline in sparse, sparse only", "embed=current sparse=class_outline", "sparse only"),
    ("query term frequency, sparse only", "embed=current sparse=current query_tf", "sparse only"),
    ("query tf + k1 1.5, sparse only", "embed=current sparse=current k1=1.5 query_tf", "sparse only"),
    ("body300 + min-max .5", "embed=body300 sparse=current", "minmax a=.5"),
    ("body300 + min-max .6", "embed=body300 sparse=current", "minmax a=.6"),
    ("body300 + RRF k=5", "embed=body300 sparse=current", "rrf 1:1 k5"),
    ("body300 + class outline + min-max .5", "embed=body300 sparse=class_outline", "minmax a=.5"),
    ("body300 + outline + query tf + k1 1.5 + min-max .5", "embed=body300 sparse=class_outline k1=1.5 query_tf",
     "minmax a=.5"),
    ("body300 + outline + query tf + k1 1.5 + min-max .6", "embed=body300 sparse=class_outline k1=1.5 query_tf",
     "minmax a=.6"),
    ("body300 + outline + min-max .5 + tests x0.5", "embed=body300 sparse=class_outline", "minmax a=.5 + tests x0.5"),
]


def report_table(results: dict[str, Any], corpora: list[str]) -> str:
    """Markdown table: MRR of each row per corpus, with the paired difference to codemem as it is."""
    refs = {c: np.asarray(results[f"{c} embed=current sparse=current"]["rr"]["rrf 1:1 k60 (current)"]) for c in corpora}
    lines = ["| variant | " + " | ".join(corpora) + " |", "|---|" + "---|" * len(corpora)]
    for i, (label, variant, method) in enumerate(REPORT_ROWS):
        cells = []
        for c in corpora:
            entry = results.get(f"{c} {variant}")
            if entry is None or method not in entry["rr"]:
                cells.append("-")
                continue
            rr = np.asarray(entry["rr"][method])
            diff = rr - refs[c]
            cells.append(f"**{rr.mean():.3f}**" if i == 0 else f"{rr.mean():.3f} ({diff.mean():+.3f} ±{paired_se(rr, refs[c]):.3f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true",
                        help="run the grid behind docs/benchmarks.md on requests, flask (tuning) and click, httpx "
                             "(held out) and print its markdown table")
    parser.add_argument("--corpora", nargs="+", default=None)
    parser.add_argument("--embed", nargs="+", default=["current"], choices=sorted(EMBED_VARIANTS))
    parser.add_argument("--sparse", nargs="+", default=["current"], choices=sorted(SPARSE_VARIANTS))
    parser.add_argument("--avg-len", nargs="+", default=["default"],
                        help="sparse average length: 'default' (codemem's), a number, or 'corpus'")
    parser.add_argument("--k1", nargs="+", default=["default"], help="sparse k1: 'default' (codemem's) or a number")
    parser.add_argument("--query-tf", action="store_true", help="count repeated query words in the sparse query")
    parser.add_argument("--candidates", type=int, nargs="+", default=[100])
    parser.add_argument("--drop-kinds", nargs="*", default=[], help="diagnostic: leave these kinds out of the index")
    parser.add_argument("--check", action="store_true", help="also rank with the store's own hybrid_query")
    parser.add_argument("--demote-tests", action="store_true", help="also rank with test files demoted")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    if args.report:
        corpora = args.corpora or ["requests", "flask", "click", "httpx"]
        results = run_grid(corpora, ["current", "body300"], ["current", "class_outline"], demote=True, quiet=True)
        results.update(run_grid(corpora, ["current", "body300"], ["current", "class_outline"], k1s=["default", "1.5"],
                                query_tf=True, quiet=True))
        print(report_table(results, corpora))
    else:
        results = run_grid(args.corpora or ["requests", "flask"], args.embed, args.sparse, args.avg_len, args.k1,
                           args.query_tf, tuple(args.candidates), args.drop_kinds, args.check, args.demote_tests)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

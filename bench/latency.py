"""Query latency of the service at 10k and 100k indexed symbols (issue "query server", item 7).

Usage: ``python -m bench.latency [--sizes 10000 100000] [--queries 200]``.

The corpus is real code: copies of the Python standard library's ``.py`` files, repeated in
numbered directories until the index holds the wanted number of symbols, indexed by the real
pipeline (parser, sparse vectors, qdrant-edge, FalkorDB, resolution). Dense vectors: computing
100k real embeddings takes about an hour on 2 cores, so the symbols get random unit vectors
instead — exact search time does not depend on the values, and the query is embedded by the real
local model inside the timed call. Queries are first lines of real stdlib docstrings.

Prints p50/p95 of ``code_search`` (query embedding included), ``get_related`` (3 hops of CALLS
from random functions) and ``find_duplicates``, against the targets: code_search p95 ≤ 50 ms,
get_related p95 ≤ 20 ms, find_duplicates p95 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"


def _stdlib_files() -> list[Path]:
    return sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts and p.stat().st_size < 500_000)


def _queries(files: list[Path], count: int, rng: random.Random) -> list[str]:
    lines: list[str] = []
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc.split()) >= 4:
                    lines.append(doc.strip().splitlines()[0])
        if len(lines) > count * 5:
            break
    rng.shuffle(lines)
    return lines[:count]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.95) - 1] * 1000


_DEFINITION = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]", re.MULTILINE)


def _build(size: int, work: Path) -> Path:
    """A project of stdlib copies holding about ``size`` symbols (definitions counted per file)."""
    files = _stdlib_files()
    root = work / f"corpus_{size}"
    symbols = 0
    copy = 0
    while symbols < size:
        for path in files:
            data = path.read_bytes()
            target = root / f"copy{copy}" / path.relative_to(STDLIB)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            symbols += len(_DEFINITION.findall(data))
            if symbols >= size:
                break
        copy += 1
    return root


def run_size(size: int, queries: list[str], work: Path, rng: random.Random) -> dict[str, float]:
    """Index a corpus of ``size`` symbols and time the tools; returns p50/p95 in ms."""
    import numpy as np

    from pipelines.indexer import CODE_COLLECTION
    from query_server.service import CodeMemService
    from resources.schemas.tools import CodeSearchInput, FindDuplicatesInput, GetRelatedInput, IndexInput
    from resources.settings import Settings

    root = _build(size, work)
    service = CodeMemService(Settings(project_root=root, state_dir=work / f"state_{size}", dense_embeddings=False))
    try:
        started = time.perf_counter()
        report = service.index(IndexInput(embed=False))
        index_s = time.perf_counter() - started
        symbols = service.manifest.all_symbols()
        dim = service.embedder.dimension
        for start in range(0, len(symbols), 2000):
            chunk = symbols[start : start + 2000]
            vectors = rng_vectors(np, len(chunk), dim, rng)
            service.vectors.set_dense(CODE_COLLECTION, {s.id: v for s, v in zip(chunk, vectors, strict=True)})
            service.manifest.mark_dense([s.id for s in chunk])
        service.embedder.embed_query("warm up the model")
        search = []
        for query in queries:
            t0 = time.perf_counter()
            service.code_search(CodeSearchInput(query=query, limit=10))
            search.append(time.perf_counter() - t0)
        functions = [s for s in symbols if s.kind in ("function", "method")]
        related = []
        for sym in rng.sample(functions, min(len(queries), len(functions))):
            t0 = time.perf_counter()
            service.get_related(GetRelatedInput(entity_id=sym.id, relationship_types=["CALLS"], direction="both", depth=3))
            related.append(time.perf_counter() - t0)
        duplicates = []
        for sym in rng.sample(functions, min(50, len(functions))):
            code = f"def {sym.name}(self, value):\n    return value\n"
            t0 = time.perf_counter()
            service.find_duplicates(FindDuplicatesInput(code=code, threshold=0.9))
            duplicates.append(time.perf_counter() - t0)
        counts = service.graph.counts()
        nodes = sum(v for k, v in counts.items() if k[0].isupper() and not k.isupper())
        edges = sum(v for k, v in counts.items() if k.isupper())
        result = {
            "symbols": len(symbols), "files": report["files_indexed"], "index_s": round(index_s, 1),
            "graph_nodes": nodes, "graph_edges": edges,
        }
        for name, samples in (("code_search", search), ("get_related_3hop", related), ("find_duplicates", duplicates)):
            p50, p95 = _percentiles(samples)
            result[f"{name}_p50_ms"] = round(p50, 2)
            result[f"{name}_p95_ms"] = round(p95, 2)
        return result
    finally:
        service.close()


def rng_vectors(np, count: int, dim: int, rng: random.Random):  # noqa: ANN001, ANN201
    """Random unit vectors (latency only; see the module docstring)."""
    generator = np.random.default_rng(rng.randrange(1 << 30))
    vectors = generator.standard_normal((count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


TARGETS = {"code_search_p95_ms": 50.0, "get_related_3hop_p95_ms": 20.0, "find_duplicates_p95_ms": 100.0}


def main(argv: list[str] | None = None) -> int:
    """Run the latency benchmark and print the percentiles against the targets."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    rng = random.Random(11)
    queries = _queries(_stdlib_files(), args.queries, rng)
    failed = False
    with tempfile.TemporaryDirectory(prefix="codemem-latency-") as tmp:
        for size in args.sizes:
            result = run_size(size, queries, Path(tmp), rng)
            print(f"== {size:,} target symbols: {result['symbols']:,} symbols in {result['files']:,} files "
                  f"(indexed in {result['index_s']} s); graph {result['graph_nodes']:,} nodes / {result['graph_edges']:,} edges")
            for key, target in TARGETS.items():
                value = result[key]
                verdict = "PASS" if value <= target else "FAIL"
                failed |= value > target
                p50 = result[key.replace("p95", "p50")]
                print(f"   {key.replace('_p95_ms', ''):18s} p50 {p50:7.2f} ms  p95 {value:7.2f} ms  (target p95 <= {target:g} ms) {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Measure the local embedding runtimes on ~200 real code snippets (functions of the stdlib).

Prints, for each runtime that can run here (onnx, numpy, and torch via sentence-transformers
when it happens to be installed): documents per second (wall and CPU time, so a busy machine
can be told apart), query latency (wall median and p95, CPU mean), and the worst cosine
against the first runtime.

Measured on the 2-core dev machine, 1 thread, CPU-time figures (wall ones depend on load):
onnx 26-27 docs/s and 3.1-3.7 ms a query; numpy 20-21 docs/s and 7.6-8.5 ms; torch 2.13 CPU via
sentence-transformers (Python 3.11 venv) 15-17 docs/s and 11-14 ms. All agree to cosine >= 0.9999998.

Usage::

    python bench/embed_runtime.py [--threads 1] [--snippets 200] [--queries 50]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never let a library reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from resources.embeddings._model_files import candidate_sources  # noqa: E402
from resources.embeddings.local import LocalMiniLMEmbedder, onnx_available  # noqa: E402

MODULES = (
    "json/__init__.py",
    "json/decoder.py",
    "textwrap.py",
    "shutil.py",
    "argparse.py",
    "csv.py",
    "heapq.py",
    "bisect.py",
    "functools.py",
    "pathlib.py",
    "tempfile.py",
    "string.py",
    "fnmatch.py",
    "glob.py",
    "difflib.py",
    "calendar.py",
    "configparser.py",
    "ipaddress.py",
    "statistics.py",
)
QUERIES = (
    "parse a json document",
    "read a config file",
    "sort a list of numbers",
    "compute the median",
    "copy a directory tree",
    "split text into lines",
    "match file names against a pattern",
    "create a temporary file",
    "compare two sequences",
    "format a calendar month",
)


def stdlib_functions(limit: int) -> list[str]:
    """Source of the first ``limit`` stdlib functions of 200 to 2000 characters."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[str] = []
    for rel in MODULES:
        path = root / rel
        if not path.exists():
            continue
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                segment = ast.get_source_segment(source, node)
                if segment and 200 <= len(segment) <= 2000:
                    found.append(segment)
                    if len(found) >= limit:
                        return found
    return found


def torch_runtime(threads: int) -> tuple[Callable[[list[str]], np.ndarray], Callable[[str], np.ndarray]] | None:
    """sentence-transformers on torch, when both are importable (not a codemem runtime)."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except Exception:
        return None
    sources = candidate_sources()
    if not sources:
        return None
    source = sources[0]
    if source.suffix == ".zip":
        target = Path(tempfile.mkdtemp(prefix="minilm-"))
        with zipfile.ZipFile(source) as zf:
            zf.extractall(target)
        source = target
    torch.set_num_threads(threads)
    model = SentenceTransformer(str(source), device="cpu")

    def docs(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=32, normalize_embeddings=True)

    def query(text: str) -> np.ndarray:
        return model.encode([text], normalize_embeddings=True)[0]

    return docs, query


def measure(name: str, docs: Callable, query: Callable, snippets: list[str], n_queries: int) -> np.ndarray:
    """Time one runtime and print a line; returns its document vectors."""
    docs(snippets[:4])  # warm up (lazy load, first-call allocations)
    query(QUERIES[0])
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = np.asarray(docs(snippets))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    latencies = []
    query_cpu = time.process_time()
    for i in range(n_queries):
        start = time.perf_counter()
        query(QUERIES[i % len(QUERIES)])
        latencies.append(time.perf_counter() - start)
    query_cpu = (time.process_time() - query_cpu) / n_queries * 1000
    lat = np.array(latencies) * 1000
    print(
        f"{name:8s} {len(snippets) / wall:7.1f} docs/s wall {len(snippets) / cpu:7.1f} docs/s cpu   "
        f"query {np.median(lat):6.2f} ms median {np.percentile(lat, 95):6.2f} ms p95 {query_cpu:6.2f} ms cpu"
    )
    return vectors


def main() -> None:
    """Run the benchmark and print one line per runtime."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--snippets", type=int, default=200)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--no-torch", action="store_true", help="skip sentence-transformers even if installed")
    args = parser.parse_args()

    snippets = stdlib_functions(args.snippets)
    probe = LocalMiniLMEmbedder(runtime="numpy")
    probe.load()
    tokens = [len(t) for t in probe._token_ids(snippets)]
    print(
        f"{len(snippets)} stdlib functions, {np.mean(tokens):.0f} tokens mean (max {max(tokens)}), "
        f"threads={args.threads}, cpus={os.cpu_count()}, load average {os.getloadavg()[0]:.2f}"
    )
    runtimes: list[tuple[str, Callable, Callable]] = []
    if onnx_available():
        e = LocalMiniLMEmbedder(runtime="onnx", threads=args.threads)
        runtimes.append(("onnx", e.embed_documents, e.embed_query))
    e = LocalMiniLMEmbedder(runtime="numpy", threads=args.threads)
    runtimes.append(("numpy", e.embed_documents, e.embed_query))
    if not args.no_torch and (torch := torch_runtime(args.threads)) is not None:
        runtimes.append(("torch", *torch))
    baseline = None
    for name, docs, query in runtimes:
        vectors = measure(name, docs, query, snippets, args.queries)
        if baseline is None:
            baseline = vectors
        else:
            print(f"{'':8s} min cosine vs {runtimes[0][0]}: {float((vectors * baseline).sum(axis=1).min()):.7f}")


if __name__ == "__main__":
    main()

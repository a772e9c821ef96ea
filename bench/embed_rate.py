"""What the dense vectors' rate can buy on CPU (issue 21, item 3), and what each choice costs in
search quality.

    python -m bench.embed_rate                        # rates on C and Python symbols, then MRR
    python -m bench.embed_rate --no-quality           # rates only (~2 minutes)
    python -m bench.embed_rate --quality click httpx  # the corpora whose MRR is compared (held out)

Variants of the local model (all-MiniLM-L6-v2, onnx runtime, 1 thread):

* ``fp32`` — what codemem ran before: the published weights, texts batched by token count;
* ``fp32 unsorted`` — the same batches of 32 texts in the order they come (what batching by
  length buys);
* ``fp32 one/call`` — one text per encoder call (no padding at all);
* ``int8`` — the matrix multiplications quantized per output channel (``CODEMEM_EMBED_PRECISION``),
  one text per call (dynamic quantization scales a call's activations together: batched, a
  text's vector would depend on its neighbours);
* ``fp32 128`` / ``int8 128`` — less text per symbol: 128 word pieces instead of 256.

Rates are symbols per CPU second of this process (the machine may be busy: wall rates are printed
beside them) on the texts the indexer embeds (``pipelines.records.embedding_text``) of real
symbols: C from the Linux kernel's ``fs/`` (``bench.scale``'s download) and Python from the click
sdist. Cosines are against ``fp32``'s vectors of the same texts.

Quality: codemem's MRR@10 (``bench.quality``, the real index and ``code_search``) on held-out
corpora, each variant in a fresh state and a fresh embedding cache. A variant is **kept** only
when its MRR stays within 1% of fp32's on every corpus (the issue's rule).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MRR_TOLERANCE = 0.01


@dataclass(frozen=True)
class Variant:
    """One way of running the local model."""

    name: str
    precision: str = "fp32"
    max_tokens: int = 256
    sorted_batches: bool = True
    batch_size: int = 32


VARIANTS = (
    Variant("fp32"),
    Variant("fp32 unsorted", sorted_batches=False),
    Variant("fp32 one/call", batch_size=1),
    Variant("int8", precision="int8"),
    Variant("fp32 128", max_tokens=128),
    Variant("int8 128", precision="int8", max_tokens=128),
)
QUALITY_VARIANTS = ("fp32", "int8", "fp32 128", "int8 128")


def symbol_texts(root: Path, suffixes: tuple[str, ...], limit: int, seed: int = 1) -> list[str]:
    """The embedding texts of up to ``limit`` symbols (a fixed-seed sample) of the files under ``root``."""
    from pipelines.parsing.engine import parse_source
    from pipelines.parsing.languages import language_for_path
    from pipelines.records import embedding_text

    texts: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in suffixes and p.is_file()):
        language = language_for_path(str(path))
        if language is None:
            continue
        try:
            parsed = parse_source(path.relative_to(root).as_posix(), path.read_bytes(), language)
        except Exception:  # noqa: BLE001 - a file the parser refuses is not a symbol
            continue
        texts.extend(embedding_text(parsed, symbol, symbol.qualified_name) for symbol in parsed.symbols)
        if len(texts) >= limit * 4:
            break
    random.Random(seed).shuffle(texts)
    return texts[:limit]


def _embedder(variant: Variant) -> Any:
    from resources.embeddings.local import LocalMiniLMEmbedder

    return LocalMiniLMEmbedder(threads=1, runtime="onnx", precision=variant.precision,  # type: ignore[arg-type]
                               max_tokens=variant.max_tokens, batch_size=variant.batch_size)


def _embed(embedder: Any, texts: list[str], sorted_batches: bool) -> np.ndarray:
    if sorted_batches:
        return embedder.embed_documents(texts)
    from resources.embeddings.base import l2_normalize

    embedder.load()
    ids = embedder._token_ids(texts)  # noqa: SLF001 - the unsorted baseline batches by hand
    out = [embedder._encoder.encode(ids[i : i + embedder.batch_size]) for i in range(0, len(ids), embedder.batch_size)]  # noqa: SLF001
    return l2_normalize(np.concatenate(out))


def measure_rates(corpora: dict[str, list[str]], log: Callable[[str], None] = print) -> dict[str, Any]:
    """Rate and cosine against fp32 of every variant on every text set."""
    results: dict[str, Any] = {}
    for label, texts in corpora.items():
        chars = np.mean([len(t) for t in texts]) if texts else 0
        log(f"\n== {label}: {len(texts)} symbols, {chars:.0f} characters on average")
        log(f"{'variant':<15} {'sym/s cpu':>9} {'sym/s wall':>10} {'× fp32':>7} {'cos mean':>9} {'cos p5':>7}")
        reference: np.ndarray | None = None
        base_rate = 0.0
        rows: dict[str, Any] = {}
        for variant in VARIANTS:
            embedder = _embedder(variant)
            _embed(embedder, texts[:8], variant.sorted_batches)  # load, warm up
            cpu, wall = time.process_time(), time.perf_counter()
            vectors = _embed(embedder, texts, variant.sorted_batches)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            rate = len(texts) / cpu
            if reference is None:
                reference, base_rate = vectors, rate
            cosines = (vectors * reference).sum(axis=1)
            rows[variant.name] = {
                "symbols_per_cpu_s": round(rate, 1), "symbols_per_wall_s": round(len(texts) / wall, 1),
                "vs_fp32": round(rate / base_rate, 2), "cosine_mean": round(float(cosines.mean()), 4),
                "cosine_p5": round(float(np.percentile(cosines, 5)), 4),
            }
            row = rows[variant.name]
            log(f"{variant.name:<15} {row['symbols_per_cpu_s']:>9} {row['symbols_per_wall_s']:>10} "
                f"{row['vs_fp32']:>6}× {row['cosine_mean']:>9} {row['cosine_p5']:>7}")
        results[label] = rows
    return results


@contextlib.contextmanager
def _variant_in_the_index(variant: Variant, home: Path) -> Iterator[None]:
    """The index and ``code_search`` of this process embed with ``variant``, caches under ``home``."""
    from resources.embeddings import factory

    real = factory._local_embedder  # noqa: SLF001
    old_home = os.environ.get("HOME")

    def configured(settings: object) -> Any:
        from resources.embeddings.local import LocalMiniLMEmbedder

        base = real(settings)
        return LocalMiniLMEmbedder(threads=base.threads, runtime=base.requested_runtime, model_path=base.model_path,
                                   batch_size=base.batch_size, max_tokens=variant.max_tokens,
                                   precision=variant.precision)  # type: ignore[arg-type]

    factory._local_embedder = configured  # noqa: SLF001
    os.environ["HOME"] = str(home)  # the embedding cache keys by model id, not by max_tokens: one per variant
    try:
        yield
    finally:
        factory._local_embedder = real  # noqa: SLF001
        if old_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = old_home


def measure_quality(names: list[str], log: Callable[[str], None] = print) -> dict[str, Any]:
    """codemem's MRR@10 on each corpus for each quality variant, and whether it stays within 1%."""
    from bench.corpora import load_corpus
    from bench.quality import codemem_rankings
    from pipelines.eval_corpus import evaluate

    corpora = [load_corpus(name) for name in names]
    variants = [v for v in VARIANTS if v.name in QUALITY_VARIANTS]
    mrr: dict[str, dict[str, float]] = {}
    for variant in variants:
        with tempfile.TemporaryDirectory(prefix="codemem-embed-rate-") as home, _variant_in_the_index(variant, Path(home)):
            for corpus in corpora:
                started = time.perf_counter()
                run = codemem_rankings(corpus)
                metrics = evaluate(run.rankings, [q.gold for q in corpus.queries])
                mrr.setdefault(variant.name, {})[corpus.name] = round(metrics.mrr, 4)
                log(f"{variant.name:<10} {corpus.name:<10} MRR@10 {metrics.mrr:.4f}  (indexed in {run.index_seconds:.0f} s, "
                    f"{time.perf_counter() - started:.0f} s with the queries)")
    base = mrr["fp32"]
    verdicts = {}
    log(f"\n{'variant':<10} " + " ".join(f"{c.name:>16}" for c in corpora) + "  within 1% of fp32")
    for variant in variants:
        ratios = {c.name: mrr[variant.name][c.name] / base[c.name] if base[c.name] else 1.0 for c in corpora}
        kept = all(r >= 1 - MRR_TOLERANCE for r in ratios.values())
        verdicts[variant.name] = kept
        cells = " ".join(f"{mrr[variant.name][c.name]:.3f} ({ratios[c.name]:.3f})".rjust(16) for c in corpora)
        log(f"{variant.name:<10} {cells}  {'KEEP' if kept else 'DROP'}")
    return {"mrr": mrr, "kept": verdicts}


def main(argv: list[str] | None = None) -> int:
    """Print the rates and the quality table; optionally write them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--symbols", type=int, default=600, help="symbols per language for the rates (default 600)")
    parser.add_argument("--kernel-cache", type=Path, default=Path(tempfile.gettempdir()) / "codemem-bench-linux",
                        help="bench.scale's download of the kernel source (fs/ is used)")
    parser.add_argument("--quality", nargs="*", default=["click", "httpx"], help="held-out corpora for MRR (default click httpx)")
    parser.add_argument("--no-quality", action="store_true", help="rates only")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from bench.corpora import PINNED, _extract_py_files, download_sdist
    from bench.scale import kernel_tree

    with tempfile.TemporaryDirectory(prefix="codemem-embed-rate-click-") as click:
        for name, data in _extract_py_files(download_sdist("click", PINNED["click"])).items():  # docstrings kept
            (Path(click) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(click) / name).write_bytes(data)
        texts = {
            "C (Linux 6.1 fs/)": symbol_texts(kernel_tree(args.kernel_cache, "fs"), (".c", ".h"), args.symbols),
            f"Python (click {PINNED['click']})": symbol_texts(Path(click), (".py",), args.symbols),
        }
    results: dict[str, Any] = {"rates": measure_rates(texts)}
    if not args.no_quality and args.quality:
        print("\n== codemem MRR@10 per variant (held-out corpora; fresh index and cache each)")
        results["quality"] = measure_quality(args.quality)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

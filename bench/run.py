"""Run the codemem benchmarks: ``python -m bench.run [--quick] [--only quality|throughput]``.

Prints the quality tables (codemem vs BM25, raw MiniLM and their RRF on the requests and flask
sdists) and the throughput summary (index vs raw parse / raw embedding, no-change re-index,
peak RSS), with ratios and PASS/FAIL per target, and writes ``bench/results/latest.json``.
See docs/benchmarks.md for what each number means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="requests only, 300-file throughput, small embed subset")
    parser.add_argument("--only", choices=["quality", "throughput"], help="run one part only")
    parser.add_argument("--corpora", nargs="+", help="packages for the quality part (default requests flask)")
    parser.add_argument("--query-mode", choices=["paragraph", "line"], default="paragraph",
                        help="query = the docstring's first paragraph (default) or its first line")
    parser.add_argument("--files", type=int, help="throughput corpus size (default 1000; 300 with --quick)")
    parser.add_argument("--embed-symbols", type=int, help="symbols in the embedding-throughput subset (default 1500; 400 with --quick)")
    parser.add_argument("--no-codemem", action="store_true", help="baselines only (quality)")
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    started = time.perf_counter()
    results: dict = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
    }
    failed = False
    if args.only in (None, "quality"):
        from bench.corpora import load_corpus
        from bench.quality import run_quality, targets

        names = args.corpora or (["requests"] if args.quick else ["requests", "flask"])
        corpora = [load_corpus(n, query_mode=args.query_mode) for n in names]
        quality = run_quality(corpora, with_codemem=not args.no_codemem)
        results["quality"] = quality
        print("\n== quality summary (MRR@10; ratios are codemem / baseline, same run)")
        for name, entry in quality.items():
            for label, ratio, target, passed in targets(entry):
                verdict = "n/a" if passed is None else ("PASS" if passed else "FAIL")
                failed |= passed is False
                shown = "-" if ratio is None else f"{ratio:.3f}"
                print(f"{name:<10} {label:<40} {shown:>6} (target >= {target}) {verdict}")
    if args.only in (None, "throughput"):
        from bench.throughput import run_throughput

        n_files = args.files or (300 if args.quick else 1000)
        embed_symbols = args.embed_symbols or (400 if args.quick else 1500)
        results["throughput"] = run_throughput(n_files=n_files, embed_symbols=embed_symbols)
        summary = results["throughput"].get("summary", {})
        failed |= any(isinstance(v, dict) and v.get("pass") is False for v in summary.values())
    results["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nwrote {args.out} ({results['seconds']} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

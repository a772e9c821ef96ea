"""What the benchmarks with a development and a held-out split share (``bench.validate_fix``,
``bench.memory_extract``): their command line, the misses listed for development items only
(held-out ones are counted, so that nobody tunes on them by accident), the results file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def share(hits: int, n: int) -> float | None:
    """``hits / n`` to three places, None when there is nothing to count."""
    return round(hits / n, 3) if n else None


def fmt(value: float | None) -> str:
    """A figure as the reports print it."""
    return "-" if value is None else f"{value:.3f}"


def split_parser(name: str, description: str, items: str) -> argparse.ArgumentParser:
    """The command line of ``python -m bench.<name>``: --split, --json, --verbose,
    --show-heldout-misses, --output (a bench adds its own options to it)."""
    parser = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=description)
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    parser.add_argument("--json", action="store_true", help="print the figures and every outcome as JSON")
    parser.add_argument("--verbose", action="store_true", help=f"list the misses (of dev {items}; see --show-heldout-misses)")
    parser.add_argument("--show-heldout-misses", action="store_true", help="with --verbose, list held-out misses too")
    parser.add_argument("--output", type=Path, help=f"default bench/results/{name}[-SPLIT].json")
    return parser


def report_log(as_json: bool) -> Callable[[str], None]:
    """Where the report goes: stdout, or stderr when stdout carries the JSON (the service's log
    lines go to stderr either way)."""
    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    return (lambda line: print(line, file=sys.stderr)) if as_json else print


def finish(
    args: argparse.Namespace, name: str, out: dict[str, Any], passed: bool, items: list[dict[str, Any]],
    label: Callable[[dict[str, Any]], str], misses: Callable[[dict[str, Any]], list[str]], log: Callable[[str], None],
) -> int:
    """List the misses (``--verbose``), print the JSON (``--json``), write the results file, and
    return the exit status (1 when a target failed)."""
    if args.verbose:
        for item in items:
            lines = misses(item)
            if item["split"] == "heldout" and not args.show_heldout_misses:
                log(f"\n{label(item)} (heldout): {len(lines)} misses (not listed: --show-heldout-misses)")
                continue
            log(f"\n{label(item)} ({item['split']}): {len(lines)} misses")
            for line in lines:
                log(f"  {line}")
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    path = args.output or RESULTS / (f"{name}.json" if args.split == "all" else f"{name}-{args.split}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    log(f"\nwrote {path} ({out['seconds']} s)")
    return 0 if passed else 1

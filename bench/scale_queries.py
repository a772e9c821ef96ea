"""Query latency on an index the size of a large repository (issue 21, item 4), on its real code.

    python -m bench.scale_queries PROJECT [--queries 200]

``PROJECT`` is a tree indexed by ``codemem index`` (its state in ``PROJECT/.codemem``); ``bench.scale``
calls this after its first index. The service is opened in this process on that state, as a
session's server opens it (the time to open it is printed: a session's first call waits for it),
and the graph's first query (the graph server loads it then), and then, warm:

* ``code_search`` — queries in words: kernel-doc summaries (``name - what it does``, the part after
  the dash) or docstring first lines sampled from the tree's own files; the search mode is printed
  (``sparse`` while dense vectors are pending, as after ``codemem index --no-embed``);
* ``get_related`` — 3 hops of CALLS, both directions, from random functions (the default page).

Targets: code_search p95 ≤ 50 ms and get_related (3 hops) p95 ≤ 50 ms with ≥ 500k symbols.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import time
from pathlib import Path
from typing import Any

TARGET_P95_MS = 50.0
MIN_SYMBOLS = 500_000
_KERNEL_DOC = re.compile(rb"^/\*\*\s*\n\s*\*\s*(?:struct\s+|enum\s+|union\s+)?[A-Za-z_]\w*(?:\(\))?\s+-\s+(.{12,120})$", re.MULTILINE)
_DOCSTRING = re.compile(rb'^\s+(?:def|class)\s.*:\s*\n\s+"""(.{12,120})$', re.MULTILINE)


def word_queries(project: Path, count: int, rng: random.Random) -> list[str]:
    """Up to ``count`` one-line descriptions written in the tree's own comments (fixed seed)."""
    files = sorted(p for p in project.rglob("*") if p.suffix in (".c", ".h", ".py") and ".codemem" not in p.parts)
    rng.shuffle(files)
    found: list[str] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        pattern = _DOCSTRING if path.suffix == ".py" else _KERNEL_DOC
        for match in pattern.finditer(data):
            text = match.group(1).decode("utf-8", "replace").strip().rstrip("*/. ").strip()
            if len(text.split()) >= 3:
                found.append(text)
                break  # one per file: queries spread over the tree
        if len(found) >= count:
            break
    return found


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2)}


def measure(project: Path, queries: int = 200, seed: int = 7) -> dict[str, Any]:
    """Open the indexed ``project``'s service here and time the queries; returns the figures."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import CodeSearchInput, GetRelatedInput
    from resources.settings import Settings

    rng = random.Random(seed)
    texts = word_queries(project, queries, rng)
    started = time.perf_counter()
    service = CodeMemService(Settings(project_root=project))
    try:
        service.code_search(CodeSearchInput(query="open the stores", limit=10))  # opens and warms what a first call opens
        search_open_s = time.perf_counter() - started
        with service.manifest.store.reading() as conn:
            first = conn.execute("SELECT id FROM symbols WHERE kind = 'function' LIMIT 1").fetchone()[0]
        started = time.perf_counter()
        service.get_related(GetRelatedInput(entity_id=first, relationship_types=["CALLS"], direction="both", depth=3))
        graph_open_s = time.perf_counter() - started  # the graph server loads the graph on its first query
        symbols = service.manifest.counts()["symbols"]
        search, modes = [], []
        for text in texts:
            t0 = time.perf_counter()
            result = service.code_search(CodeSearchInput(query=text, limit=10))
            search.append(time.perf_counter() - t0)
            modes.append(result.search_mode)
        functions = [s.id for s in service.manifest.all_symbols() if s.kind in ("function", "method")]
        related, reached = [], []
        for symbol_id in rng.sample(functions, min(len(texts), len(functions))):
            t0 = time.perf_counter()
            out = service.get_related(GetRelatedInput(entity_id=symbol_id, relationship_types=["CALLS"], direction="both", depth=3))
            related.append(time.perf_counter() - t0)
            reached.append(len(out.results))
        return {
            "symbols": symbols, "open_s": round(search_open_s, 1), "graph_open_s": round(graph_open_s, 1), "queries": len(texts),
            "search_modes": sorted(set(map(str, modes))),
            "code_search": _ms(search), "get_related_3hop": {**_ms(related), "reached_median": statistics.median(reached) if reached else 0},
        }
    finally:
        service.close()


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures against the targets (a target holds only at ≥ 500k symbols)."""
    big = result["symbols"] >= MIN_SYMBOLS
    out = []
    for name in ("code_search", "get_related_3hop"):
        p95 = result[name]["p95_ms"]
        out.append({
            "row": f"{name} p95 at {result['symbols']:,} symbols ({', '.join(result['search_modes'])})" if name == "code_search"
            else f"{name} p95 at {result['symbols']:,} symbols",
            "measured": f"{p95} ms (p50 {result[name]['p50_ms']} ms, {result['queries']} queries)",
            "target": f"≤ {TARGET_P95_MS:g} ms at ≥ 500k symbols",
            "pass": (p95 <= TARGET_P95_MS) if big else None,
        })
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the latency rows of an indexed project."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.project.resolve(), args.queries)
    print(f"opened the service on {result['symbols']:,} symbols: the first code_search after {result['open_s']} s, "
          f"the first get_related {result['graph_open_s']} s more (the graph server loads the graph)")
    for row in rows(result):
        verdict = {True: "PASS", False: "FAIL", None: "below 500k symbols"}[row["pass"]]
        print(f"  {row['row']}: {row['measured']}  target {row['target']}  {verdict}")
    if args.json:
        args.json.write_text(json.dumps({**result, "rows": rows(result)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

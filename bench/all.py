"""Every codemem benchmark, one table: ``python -m bench.all [--quick] [--only NAME ...] [--skip NAME ...]``.

Runs each benchmark of ``bench/`` through its own entry point (its ``main`` with smaller sizes in
``--quick`` mode, or its ``run_*`` function), each in a child process of its own (a crash, a leak
or a stuck store of one cannot touch the next; ``--timeout`` per benchmark; each child gets its own
``TMPDIR``, and graph servers a crashed child leaves there are stopped), then prints one
table: figure, value, the baseline measured in the same run where the benchmark has one, their
ratio, the target written in the issues, PASS/FAIL. Writes ``bench/results/all.json`` (or
``all-quick.json``) and each benchmark's own JSON under ``bench/results/all/`` (the benchmarks'
usual result files are left as they are).

``--quick`` (~14 min on a 2-core machine) shrinks the sizes, so a figure whose target is
stated at a size (e.g. 100k symbols or memories) is measured at a smaller one: its row names the
size. Not run here: ``bench.hnsw_recall`` (needs an indexed project's state dir),
``bench.embed_runtime`` and ``bench.experiments`` (diagnostics without targets), ``bench.ui_screenshot``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results"
OUT_DIR = RESULTS / "all"

Row = dict[str, Any]  # figure, value, baseline, ratio, target, pass (True/False/None = reported)


def _row(figure: str, value: Any, target: str = "reported", passed: bool | None = None,
         baseline: Any = None, ratio: float | None = None, unit: str = "") -> Row:
    if ratio is None and isinstance(value, int | float) and isinstance(baseline, int | float) and baseline:
        ratio = value / baseline
    return {"figure": figure, "value": value, "unit": unit, "baseline": baseline,
            "ratio": None if ratio is None else round(ratio, 3), "target": target, "pass": passed}


# -- one function per benchmark: runs it through its entry point, returns rows ----------------------

def b_quality(quick: bool) -> list[Row]:
    from bench.corpora import load_corpus
    from bench.quality import run_quality, targets

    names = ["requests"] if quick else ["requests", "flask"]
    result = run_quality([load_corpus(n) for n in names], with_codemem=True)
    rows = []
    for name, entry in result.items():
        methods = entry["methods"]
        for (_label, ratio, target, passed), base in zip(targets(entry), ("BM25", "RRF(BM25,MiniLM)"), strict=True):
            rows.append(_row(f"quality {name}: codemem MRR@10 vs {base}", round(methods["codemem"]["mrr"], 3),
                             f">= {target}x", passed, round(methods[base]["mrr"], 3), ratio))
    _save("quality", result)
    return rows


def b_throughput(quick: bool) -> list[Row]:
    from bench.throughput import run_throughput

    result = run_throughput(n_files=200 if quick else 1000, embed_symbols=200 if quick else 1500)
    _save("throughput", result)
    s = result.get("summary", {})
    rows = []
    if item := s.get("index_vs_raw_parse"):
        rows.append(_row("throughput: index files/min (no dense vectors)",
                         round(item["codemem_files_per_min"]), f">= {item['target']}x raw parse", item["pass"],
                         round(item["raw_files_per_min"]), item["ratio"]))
    if item := s.get("index_embed_vs_raw_embed"):
        rows.append(_row("throughput: index files/min (local model)", round(item["codemem_files_per_min"], 1),
                         f">= {item['target']}x raw embedding", item["pass"], round(item["raw_embed_files_per_min"], 1),
                         item["ratio"]))
    if item := s.get("noop_reindex"):
        rows.append(_row(f"throughput: no-change re-index of {item['files']} files, s", item["seconds"],
                         f"<= {item['target_seconds']} s", item["pass"]))
    for phase, mem in s.get("peak_rss_mb", {}).items():
        rows.append(_row(f"throughput: peak RSS {phase}, MB (process tree)", mem["tree"]))
    for phase in s.get("errors", {}):
        rows.append(_row(f"throughput: {phase} ran", "error", "no error", False))
    return rows


def b_latency(quick: bool) -> list[Row]:
    from bench.latency import TARGETS, _queries, _stdlib_files, run_size

    sizes, count = ([10_000], 50) if quick else ([10_000, 100_000], 200)
    rng = random.Random(11)
    queries = _queries(_stdlib_files(), count, rng)
    rows, result = [], {}
    with tempfile.TemporaryDirectory(prefix="codemem-bench-all-latency-") as tmp:
        for size in sizes:
            result[size] = r = run_size(size, queries, Path(tmp), rng)
            for key, target in TARGETS.items():
                note = "" if size >= 100_000 or key != "code_search_p95_ms" else " (target stated at 100k)"
                rows.append(_row(f"latency {r['symbols']:,} symbols: {key.removesuffix('_p95_ms')} p95 ms{note}",
                                 r[key], f"<= {target:g} ms", r[key] <= target))
    _save("latency", result)
    return rows


def b_mcp_overhead(quick: bool) -> list[Row]:
    import bench.mcp_overhead as bench

    bench.RESULTS = OUT_DIR / "mcp_overhead.json"
    _check(bench.main(["--calls", "30" if quick else "200"]), "mcp_overhead")
    result = json.loads(bench.RESULTS.read_text())
    rows = []
    for tool in bench.TOOLS:
        direct = result["latency"]["direct"][tool]["p50_ms"]
        stdio = result["latency"]["stdio"][tool]["p50_ms"]
        rows.append(_row(f"mcp_overhead: {tool} p50 ms over stdio (baseline: direct call)", stdio,
                         "reported (no target)", None, direct))
    return rows


def b_memory(quick: bool) -> list[Row]:
    import bench.memory as bench

    out = OUT_DIR / "memory.json"
    argv = ["--sizes", "2000", "--queries", "50", "--adds", "50"] if quick else []
    bench.main([*argv, "--out", str(out)])  # its exit status only sums the rows below
    result = json.loads(out.read_text())
    rows = []
    for size, r in result["sizes"].items():
        n = int(size)
        add = r["add_cached"]["p95_ms"]
        rows.append(_row(f"memory {n:,}: memory_add p95 ms (embedding cached)", add,
                         f"<= {bench.TARGETS['add_cached']:g} ms", add <= bench.TARGETS["add_cached"]))
        search = r["search_all"]["p95_ms"]
        at_100k = n >= 100_000
        rows.append(_row(f"memory {n:,}: memory_search p95 ms" + ("" if at_100k else " (target stated at 100k)"),
                         search, f"<= {bench.TARGETS['search_all']:g} ms", search <= bench.TARGETS["search_all"]))
    return rows


def b_normalization(quick: bool) -> list[Row]:
    import bench.normalization as bench

    bench.RESULTS = OUT_DIR
    argv = ["--size", "5000", "--real", "300"] if quick else []
    _check(bench.main(argv), "normalization")
    r = json.loads((OUT_DIR / "normalization.json").read_text())["scale"]
    n = f"{r['memories']:,}"
    return [
        _row(f"normalization {n} memories: seconds", r["normalize_s"]),
        _row(f"normalization {n}: recall of planted duplicates", r["recall"], ">= 0.95", r["recall"] >= 0.95),
        _row(f"normalization {n}: precision of merges", r["precision"], ">= 0.99", r["precision"] >= 0.99),
    ]


def b_pipeline(quick: bool) -> list[Row]:
    import bench.pipeline as bench

    bench.RESULTS = OUT_DIR
    files = 300 if quick else 5000
    # One Dagster run per bucket (256 runs) takes ~45 min at 5,000 files on 2 cores and has no
    # target: `python -m bench.pipeline` measures it.
    _check(bench.main(["--files", str(files), "--skip-per-bucket"]), "pipeline")
    r = json.loads((OUT_DIR / "pipeline.json").read_text())
    base = r["plain"]["seconds"]
    rows = [_row(f"pipeline: first index of {files} files, Dagster single run, s (baseline: plain indexer)",
                 r["dagster_single_run"]["seconds"], "reported", None, base)]
    if "dagster_per_bucket" in r:
        rows.append(_row(f"pipeline: first index of {files} files, one run per bucket, s",
                         r["dagster_per_bucket"]["seconds"], "reported", None, base))
    return rows


def b_freshness(quick: bool) -> list[Row]:
    import bench.freshness as bench

    bench.RESULTS = OUT_DIR
    _check(bench.main(["--saves", "3" if quick else "10"]), "freshness")
    r = json.loads((OUT_DIR / "freshness.json").read_text())
    interval = r["sensor_interval_s"]
    return [
        _row("freshness: save -> searchable via codemem watch, p95 s", r["watch"]["p95_s"], "<= 2 s",
             r["watch"]["p95_s"] <= 2),
        _row("freshness: save -> searchable via the sensor, p95 s", r["sensor"]["p95_s"], f"<= {interval} + 2 s",
             r["sensor"]["p95_s"] <= interval + 2),
    ]


def b_duplicate_accuracy(quick: bool) -> list[Row]:
    import bench.duplicate_accuracy as bench

    out = OUT_DIR / "duplicate_accuracy.json"
    bench.main(["--output", str(out)])
    r = json.loads(out.read_text())
    cm, raw = r["codemem"]["all"], r["baselines"]["raw_cosine"]["all"]
    return [
        _row("duplicates: precision at the default threshold (baseline: raw cosine)", cm["precision"],
             f">= {bench.TARGET_PRECISION}", (cm["precision"] or 0) >= bench.TARGET_PRECISION, raw["precision"]),
        _row("duplicates: recall at the default threshold (baseline: raw cosine)", cm["recall"],
             f">= {bench.TARGET_RECALL}", (cm["recall"] or 0) >= bench.TARGET_RECALL, raw["recall"]),
        _row("duplicates: find_duplicates p95 ms", r["find_duplicates_ms"]["p95"], "<= 100 ms",
             r["find_duplicates_ms"]["p95"] <= 100),
    ]


def b_duplicates(quick: bool) -> list[Row]:
    import bench.duplicates as bench

    out = OUT_DIR / "duplicates.json"
    bench.main(["--output", str(out)] + (["--per-kind", "10", "--pad", "0"] if quick else []))
    r = json.loads(out.read_text())
    rows = []
    for name, target, figure, passed in bench.verdicts(r["codemem"]):
        group = name.split(", ", 1)[1]
        metric = "recall" if name.startswith("recall") else "false_flags"
        base = r["baseline_raw_code"].get(group, {}).get("all", {}).get(metric)
        rows.append(_row(f"duplicates of edited clones: {name} (baseline: raw-code scoring)", figure, target, passed, base))
    for size, p95 in r["p95_ms"].items():
        rows.append(_row(f"duplicates of edited clones: p95 ms at {int(size):,} symbols", p95, f"<= {bench.P95_MS:g} ms",
                         p95 <= bench.P95_MS))
    return rows


def b_hooks(quick: bool) -> list[Row]:
    import bench.hooks as bench

    bench.RESULTS = OUT_DIR / "hooks.json"
    argv = ["--memories", "2000", "--files", "500", "--runs", "15"] if quick else []
    bench.main(argv)
    r = json.loads(bench.RESULTS.read_text())
    base = r["results"]["python -c pass (baseline)"]["p95"]
    rows = []
    for name, stats in r["results"].items():
        if "baseline" in name:
            continue
        rows.append(_row(f"hooks: {name} p95 ms (baseline: python -c pass)", stats["p95"], f"<= {bench.TARGET_MS:g} ms",
                         stats["p95"] <= bench.TARGET_MS, base))
    foreign = {k: v for k, v in r["foreign_imports"].items() if v}
    rows.append(_row("hooks: non-stdlib imports in hook processes", len(foreign), "0", not foreign))
    return rows


def b_load(quick: bool) -> list[Row]:
    from bench.load import run_load

    if quick:
        result = run_load(seconds=20, clients=30, procs=2, think=3.0, memories=150, idle_calls=15, warmup=10)  # ~10 calls/s, as 100 at 10 s
    else:
        result = run_load(seconds=60, clients=100, procs=4, stdio=8, stdio_seconds=20)
    _save("load", result)
    rows = []
    clients = result["config"]["clients"]
    for t in result["targets"]:
        figure = t["figure"].replace("load:", f"load {clients} HTTP clients:", 1)
        rows.append(_row(figure, t["value"], t["target"], t["pass"], t.get("baseline"), t.get("ratio")))
    return rows


def b_validate_fix(quick: bool) -> list[Row]:
    import bench.validate_fix as bench

    result = bench.run_validate_fix("all")  # ~10 s: the same sets in --quick
    _save("validate_fix", result)
    return [_row(f"validate_fix: {row}", figure, target, passed)
            for row, target, figure, passed in bench.verdicts(result["summary"])]


def b_memory_extract(quick: bool) -> list[Row]:
    import bench.memory_extract as bench

    result = bench.run_memory_extract("all")  # the same 28 documents in --quick
    _save("memory_extract", result)
    return [_row(f"memory_extract: {row}", figure, target, passed)
            for row, target, figure, passed in bench.verdicts(result["summary"])]


BENCHMARKS: dict[str, Callable[[bool], list[Row]]] = {
    "quality": b_quality, "throughput": b_throughput, "latency": b_latency, "mcp_overhead": b_mcp_overhead,
    "memory": b_memory, "normalization": b_normalization, "pipeline": b_pipeline, "freshness": b_freshness,
    "duplicate_accuracy": b_duplicate_accuracy, "duplicates": b_duplicates, "hooks": b_hooks, "load": b_load,
    "validate_fix": b_validate_fix, "memory_extract": b_memory_extract,
}


def _save(name: str, result: Any) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")


def _check(status: int | None, name: str) -> None:
    if status not in (0, None):
        raise RuntimeError(f"{name} exited with {status}")


# -- driver ------------------------------------------------------------------------------------------

def _child(name: str, quick: bool, out: Path) -> int:
    """Runs one benchmark in this (child) process; its rows go to ``out`` as JSON."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    sys.stdout = sys.stderr  # the benchmark's own printing goes to the log, not into the table
    try:
        rows = BENCHMARKS[name](quick)
        error = None
    except BaseException as exc:  # noqa: BLE001 - reported as a FAIL row, the next benchmark still runs
        import traceback

        traceback.print_exc()
        rows, error = [], f"{type(exc).__name__}: {exc}"[:500]
    out.write_text(json.dumps({"rows": rows, "error": error, "seconds": round(time.perf_counter() - started, 1)},
                              default=str))
    return 0


def _graph_servers_under(root: Path) -> list[int]:
    """Embedded graph servers (redis-server) whose working directory is under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if "redis-server" in (entry / "cmdline").read_text() and os.readlink(entry / "cwd").startswith(str(root)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _stop_leftovers(root: Path) -> list[int]:
    """Stops the graph servers a crashed or killed benchmark left under its temporary dir."""
    import signal

    leftovers = _graph_servers_under(root)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _graph_servers_under(root):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while _graph_servers_under(root) and time.monotonic() < deadline:
            time.sleep(0.2)
    return leftovers


def run_one(name: str, quick: bool, timeout: float, log: Path) -> dict[str, Any]:
    import shutil

    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = Path(handle.name)
    scratch = Path(tempfile.mkdtemp(prefix=f"codemem-bench-all-{name}-"))  # the child's TMPDIR
    started = time.perf_counter()
    try:
        with log.open("a") as sink:
            sink.write(f"\n===== {name} ({'quick' if quick else 'full'}) {datetime.now(UTC).isoformat()}\n")
            sink.flush()
            proc = subprocess.run(
                [sys.executable, "-m", "bench.all", "--child", name, "--child-out", str(out)] + (["--quick"] if quick else []),
                cwd=REPO_ROOT, stdout=sink, stderr=sink, timeout=timeout, check=False,
                env={**os.environ, "TMPDIR": str(scratch)},
            )
        data = json.loads(out.read_text() or "{}") if out.stat().st_size else {}
        if not data:
            data = {"rows": [], "error": f"child exited with {proc.returncode} and no result"}
    except subprocess.TimeoutExpired:
        data = {"rows": [], "error": f"timed out after {timeout:.0f} s"}
    finally:
        out.unlink(missing_ok=True)
        leftovers = _stop_leftovers(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
    if leftovers:
        data["leftover_graph_servers_stopped"] = leftovers
    data["seconds"] = round(time.perf_counter() - started, 1)
    if data.get("error"):
        data["rows"].append(_row(f"{name}: ran", "error", "no error", False) | {"error": data["error"]})
    return data


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """One Markdown table (it reads in a terminal too) of every benchmark's rows."""
    lines = ["| figure | value | baseline (same run) | ratio | target | result |", "|---|---:|---:|---:|---|---|"]
    for data in results.values():
        for r in data["rows"]:
            verdict = "PASS" if r["pass"] is True else "FAIL" if r["pass"] is False else "—"
            lines.append(f"| {r['figure']} | {_fmt(r['value'])} | {_fmt(r['baseline'])} | {_fmt(r['ratio'])} | "
                         f"{r['target']} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.all", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (~14 min on 2 cores)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these")
    parser.add_argument("--skip", nargs="+", choices=sorted(BENCHMARKS), default=[], help="leave these out")
    parser.add_argument("--timeout", type=float, help="seconds per benchmark (default 900 quick, 7200 full)")
    parser.add_argument("--out", type=Path, help="default bench/results/all.json (all-quick.json with --quick)")
    parser.add_argument("--child", choices=sorted(BENCHMARKS), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.quick, args.child_out)

    names = [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    timeout = args.timeout or (900 if args.quick else 7200)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    log = OUT_DIR / (("quick" if args.quick else "full") + ("-partial" if args.only or args.skip else "") + ".log")
    log.write_text("")
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        print(f"[bench.all] {name} ... (log: {log.relative_to(REPO_ROOT)})", file=sys.stderr, flush=True)
        results[name] = run_one(name, args.quick, timeout, log)
        data = results[name]
        verdicts = [r["pass"] for r in data["rows"]]
        print(f"[bench.all] {name}: {data['seconds']} s, {verdicts.count(True)} PASS, {verdicts.count(False)} FAIL"
              + (f" — {data['error']}" if data.get("error") else ""), file=sys.stderr, flush=True)
    total = round(time.perf_counter() - started, 1)
    table = format_table(results)
    print(f"\ncodemem benchmarks ({'quick' if args.quick else 'full'}), {total / 60:.1f} min, "
          f"{os.cpu_count()} CPUs, {datetime.now(UTC).isoformat(timespec='seconds')}\n")
    print(table)
    out = args.out or RESULTS / ("all-quick.json" if args.quick else "all.json")
    out.write_text(json.dumps({"quick": args.quick, "seconds": total, "cpus": os.cpu_count(),
                               "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                               "benchmarks": results, "table": table}, indent=2, default=str) + "\n")
    print(f"\nwrote {out}; per-benchmark output in {log.relative_to(REPO_ROOT)}")
    return 1 if any(r["pass"] is False for d in results.values() for r in d["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

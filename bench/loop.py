"""The everyday loop against its targets: every row of issue 18's table in one command.

Usage: ``python -m bench.loop [--quick] [--json]`` (~6 min on 2 cores; ``--quick`` ~3 min).

Each row is measured the way Claude Code and a user meet it, with its baseline measured in the
same run on the same machine:

| row | how | target |
|---|---|---|
| index after N files changed | ``codemem index`` (the Dagster path) in a fresh process, ``bench.index_loop``; ``--plain`` beside it | ≤ 2 s |
| index, nothing changed | the same | ≤ 1 s |
| first index, default ÷ ``--plain`` | the same, on 244 standard-library files | ≤ 1.2× |
| MCP initialize | spawn of ``codemem mcp`` to its answer, ``bench.startup`` | ≤ 300 ms |
| first call of every tool | memory_search, code_search, get_symbol, memory_add right after tools/list | ≤ 1 s each |
| warm call | the same four again | ≤ 50 ms each |
| SessionStart / PostToolUse | p95 of each hook command init writes (``<python> -S …/run_hook.py <Event>`` with paths, bare ``codemem hook <Event>`` on PATH) ÷ p95 of ``python -c pass`` of a regular (not editable) install, ``bench.hooks``: SessionStart with no server yet, read ahead at the last session's end (a session's start), PostToolUse with the project's server answering (during a session); the other combinations beside them, informational | ≤ 1.2× |
| session end | Claude Code's sequence (SIGINT, SIGTERM 0.1 s later, SIGKILL 0.4 s after) to ``codemem mcp``: exit time, exit status, processes left | ≤ 300 ms, not killed, none left |
| init by full path | ``<venv>/bin/codemem init`` with codemem off PATH: the written commands resolve | resolves |

Prints one line per row with PASS/FAIL and writes ``bench/results/loop.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "loop.json"
CLAUDE_CODE_STOP = ((signal.SIGINT, 0.0), (signal.SIGTERM, 0.1), (signal.SIGKILL, 0.5))
"""Claude Code's end of a session: (signal, seconds after the first)."""


def index_rows(files: int, changed: int, repeat: int) -> list[dict[str, Any]]:
    """Rows 1-3: ``codemem index`` on the default path against ``--plain``."""
    from bench.index_loop import TARGETS, run_loop

    rows = run_loop(files, changed, repeat)
    d, p = rows["default"], rows["plain"]
    return [
        _row(f"index after {changed} files changed", d["changed_s"], "s", TARGETS["changed_s"], f"--plain {p['changed_s']:.2f} s"),
        _row("index, nothing changed", d["no_change_s"], "s", TARGETS["no_change_s"], f"--plain {p['no_change_s']:.2f} s"),
        _row(f"first index ({d['files']} files), default ÷ --plain", rows["first_ratio"], "×", TARGETS["first_ratio"],
             f"default {d['first_s']:.1f} s, --plain {p['first_s']:.1f} s"),
    ]


def startup_rows(project: Path, work: Path, runs: int) -> list[dict[str, Any]]:
    """Rows 4-6: ``codemem mcp`` from spawn to initialize, the first and the warm call of each tool."""
    from bench.startup import CALLS, one_run

    measured = [one_run(project, 0.0, work / f"server-{i}.log", i) for i in range(runs)]
    median = {key: statistics.median(run[key] for run in measured) for key in measured[0]}
    rows = [_row("MCP initialize (from spawn)", median["initialize"], "ms", 300.0,
                 f"tools/list {median['tools_list']:.0f} ms after it")]
    rows += [_row(f"first {name}", median[f"first_{name}"], "ms", 1000.0) for name in CALLS]
    rows += [_row(f"warm {name}", median[f"warm_{name}"], "ms", 50.0) for name in CALLS]
    return rows


def hook_rows(memories: int, files: int, runs: int) -> list[dict[str, Any]]:
    """Row 7: SessionStart and PostToolUse p95 against a bare interpreter's p95, same run."""
    from bench.hooks import READ_AHEAD, REGULAR_BASELINE, SERVED
    from bench.hooks import run as run_hooks

    result = run_hooks(argparse.Namespace(memories=memories, files=files, runs=runs, nice=0, keep=False))
    stats = result["results"]
    base = stats[REGULAR_BASELINE]["p95"]
    editable = stats["python -c pass (baseline)"]["p95"]
    targets = {  # as Claude Code meets them: a session starts before its server, tools run beside it
        READ_AHEAD: "-S form, no server yet",
        f"{READ_AHEAD} by the console script": "`codemem hook`, no server yet",
        f"PostToolUse Read (mentioned file) {SERVED}": "-S form, server running",
        f"PostToolUse by the console script {SERVED}": "`codemem hook`, server running",
        f"PostToolUse Read (no memory) {SERVED}": "-S form, server running",
    }
    informational = {
        "SessionStart": "-S form, stores changed since the last end",
        "SessionStart by the console script": "`codemem hook`, stores changed since the last end",
        f"SessionStart {SERVED}": "-S form, server running",
        f"SessionStart by the console script {SERVED}": "`codemem hook`, server running",
        "PostToolUse Read (mentioned file)": "-S form, no server",
    }
    rows = []
    for names, shown in ((targets, False), (informational, True)):
        for name, how in names.items():
            row = _row(f"{name.replace(SERVED, '').strip()} ({how}) p95 ÷ python -c pass", stats[name]["p95"] / base, "×",
                       1.2, f"{stats[name]['p95']:.1f} ms against {base:.1f} ms (editable checkout's python -c pass "
                       f"{editable:.1f} ms)")
            rows.append({**row, "informational": True} if shown else row)
    return rows


def _processes_naming(text: str) -> list[str]:
    """Running processes whose command line contains ``text`` (this one excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


def session_end_row(project: Path, work: Path, runs: int) -> list[dict[str, Any]]:
    """Row 8: Claude Code's stop sequence sent to a ``codemem mcp`` that served a few calls."""
    from bench.startup import Server

    exits: list[float] = []
    killed = 0
    left: list[str] = []
    for i in range(runs):
        server = Server(project, work / f"stop-{i}.log")
        server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "bench.loop", "version": "0"}})
        server.notify("notifications/initialized")
        server.tool("memory_add", {"memory_type": "session", "content": f"bench.loop stop run {i}"})
        server.tool("code_search", {"query": "parse a header", "limit": 3})
        started = time.perf_counter()
        for sig, at in CLAUDE_CODE_STOP:
            while time.perf_counter() - started < at and server.proc.poll() is None:
                time.sleep(0.002)
            if server.proc.poll() is not None:
                break
            server.proc.send_signal(sig)
        status = server.proc.wait()
        exits.append((time.perf_counter() - started) * 1000)
        killed += status == -signal.SIGKILL
        server.close()
        time.sleep(1.0)  # a graph server stopping on its own gets a second
        left += _processes_naming(str(project))
    exit_ms = statistics.median(exits)
    row = _row("session end: exit after SIGINT", exit_ms, "ms", 300.0,
               f"{killed}/{runs} SIGKILLed, {len(left)} processes left" + (f": {left[:2]}" if left else ""))
    row["passed"] = row["passed"] and killed == 0 and not left
    return [row]


def init_row(work: Path) -> list[dict[str, Any]]:
    """Row 9: ``codemem init`` run by its full path with codemem off PATH writes commands that run."""
    script = Path(sys.executable).with_name("codemem")
    project = work / "init-project"
    project.mkdir()
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(script), "init", "--project", str(project)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["codemem"] if done.returncode == 0 else {}
    command = [server.get("command", ""), *server.get("args", [])]
    runs = subprocess.run([*command[:-3], "--help"], capture_output=True, env=env, timeout=120, check=False) \
        if command[0] else None
    resolves = bool(runs is not None and runs.returncode == 0 and Path(command[0]).is_absolute())
    return [{"row": "init by full path, codemem off PATH", "value": command[0] or done.stderr.strip()[:200], "unit": "",
             "target": "a command that runs", "passed": resolves, "baseline": ""}]


def _row(name: str, value: float, unit: str, target: float, baseline: str = "") -> dict[str, Any]:
    return {"row": name, "value": round(value, 3), "unit": unit, "target": target, "passed": value <= target,
            "baseline": baseline}


def _verdict(row: dict[str, Any]) -> str:
    verdict = "PASS" if row["passed"] else "FAIL"
    return f"({verdict.lower()})" if row.get("informational") else verdict


def main(argv: list[str] | None = None) -> int:
    """Measure every row, print it against its target; exit 1 when one fails."""
    parser = argparse.ArgumentParser(prog="python -m bench.loop", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer repeats and runs (noisier).")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON too.")
    args = parser.parse_args(argv)
    # hooks: a p95 of 40 ~20 ms process starts is the second slowest of them (one scheduling hiccup
    # moved a row by 0.1-0.2x between runs); of 100, the fifth
    repeat, runs, hook_runs = (1, 1, 15) if args.quick else (3, 3, 100)
    with tempfile.TemporaryDirectory(prefix="codemem-loop-") as tmp:
        work = Path(tmp)
        from bench.startup import make_project

        print("indexing a copy of stdlib json, email and http for the MCP rows …", file=sys.stderr)
        project = make_project(work / "project")
        rows = init_row(work)
        rows += startup_rows(project, work, runs)
        rows += session_end_row(project, work, runs)
        rows += hook_rows(2_000, 400, hook_runs)
        rows += index_rows(244, 5, repeat)
    print(f"\n{'row':48} {'measured':>12}  {'target':>10}  verdict  baseline (same run)")
    for row in rows:
        value = f"{row['value']:.2f} {row['unit']}" if isinstance(row["value"], float) else str(row["value"])[-40:]
        target = f"≤ {row['target']:g} {row['unit']}" if isinstance(row["target"], float) else row["target"]
        print(f"{row['row']:48} {value:>12}  {target:>10}  {_verdict(row):7}  {row['baseline']}")
    result = {"rows": rows, "load_average": os.getloadavg(), "cpus": os.cpu_count(), "quick": args.quick}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    return 0 if all(row["passed"] for row in rows if not row.get("informational")) else 1


if __name__ == "__main__":
    sys.exit(main())

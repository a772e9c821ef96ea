"""Start-up of ``codemem mcp``: how soon Claude Code gets its answers (issue 18, item 2).

Usage: ``python -m bench.startup [--project PATH] [--runs N] [--pause S] [--importtime]``.

The project is real code: by default a copy of the standard library's ``json``, ``email`` and
``http`` packages in a temporary directory, indexed once (``codemem index``, dense vectors from the
local model) with its stores in the copy's own state dir; the runs start once that index's Dagster
recording, which goes on in the background for a few seconds, has ended. ``--project PATH`` uses that tree as it
is (index it first).

Each run spawns ``codemem mcp --project PROJECT`` (the console script next to this interpreter, as
Claude Code launches it from ``.mcp.json``) and speaks newline-delimited JSON-RPC over its pipes:

* ``initialize``: from the spawn to its answer (what Claude Code's version probe waits for);
* ``tools/list``: from the spawn to its answer, and the call alone;
* after ``--pause`` seconds (0: at once, as a client that calls a tool straight away), the first
  call of ``memory_search``, ``code_search``, ``get_symbol`` (a symbol the code_search found)
  and ``memory_add``, each timed alone, in that order;
* ``warm``: the same four calls again.

Targets: initialize ≤ 300 ms, the first call of each tool ≤ 1 s, warm ≤ 50 ms. Prints the median
over the runs of each figure (and every run with ``--verbose``); writes
``bench/results/startup.json``. ``--importtime`` also prints the ten costliest top-level imports
of ``python -X importtime -m query_server.cli mcp`` and whether dagster, fastapi, uvicorn or
onnxruntime were imported before the first answer (the server is given an initialize and closed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "startup.json"
STDLIB_PACKAGES = ("json", "email", "http")
CALLS = ("memory_search", "code_search", "get_symbol", "memory_add")
HEAVY = ("dagster", "fastapi", "uvicorn", "onnxruntime")
ANSWER_TIMEOUT_S = 120.0


def codemem_command() -> list[str]:
    """The console script beside this interpreter (as ``.mcp.json`` runs it), else ``-m query_server.entry``."""
    script = Path(sys.executable).with_name("codemem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "query_server.entry"]


def child_env() -> dict[str, str]:
    """This environment, the repository importable and the model hub offline, bytecode caches
    written as on a user's machine (this machine's shell sets ``PYTHONDONTWRITEBYTECODE``, which
    would recompile codemem's own modules at every start)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def make_project(dest: Path) -> Path:
    """A copy of a few standard-library packages at ``dest``, indexed."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for name in STDLIB_PACKAGES:
        shutil.copytree(stdlib / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "test*"))
    subprocess.run([*codemem_command(), "index", str(dest), "--json"], check=True, env=child_env(), cwd=str(dest),
                   stdout=subprocess.DEVNULL, timeout=1800)
    from bench.index_loop import settle  # here: bench.index_loop imports this module

    settle(dest)  # the index's Dagster recording ends first: the runs measure a server starting on a machine at rest
    return dest


class Server:
    """One ``codemem mcp`` child and a bare JSON-RPC client over its pipes."""

    def __init__(self, project: Path, log: Path) -> None:
        """Spawn the server; ``self.started`` is the moment of the spawn."""
        self._log = log.open("w")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [*codemem_command(), "mcp", "--project", str(project)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, env=child_env(), cwd=str(project),
        )
        self._next = 0
        self._buffer = b""

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """The reply to one request and the moment it arrived."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                reply = json.loads(line)
                if reply.get("id") == self._next:
                    return reply, time.perf_counter()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method}: no answer within {ANSWER_TIMEOUT_S:g} s")
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"{method}: the server exited ({self.proc.wait()}); see {self._log.name}")
                self._buffer += chunk

    def notify(self, method: str) -> None:
        """A notification (no answer)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.proc.stdin.flush()

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """A tool's structured answer and how long the call took (s); a tool error raises."""
        sent = time.perf_counter()
        reply, answered = self.request("tools/call", {"name": name, "arguments": arguments})
        result = reply.get("result") or {}
        if "error" in reply or result.get("isError"):
            raise RuntimeError(f"{name}: {reply.get('error') or result.get('content')}")
        return result.get("structuredContent") or json.loads(result["content"][0]["text"]), answered - sent

    def close(self) -> None:
        """Close stdin (the client went away) and wait for the exit."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def one_run(project: Path, pause: float, log: Path, run: int) -> dict[str, float]:
    """The figures of one server start, in ms."""
    server = Server(project, log)
    figures: dict[str, float] = {}
    try:
        _, at = server.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "bench.startup", "version": "0"}})
        figures["initialize"] = (at - server.started) * 1000
        server.notify("notifications/initialized")
        sent = time.perf_counter()
        reply, at = server.request("tools/list", {})
        assert reply["result"]["tools"], reply
        figures["tools_list"] = (at - sent) * 1000
        figures["tools_list_since_spawn"] = (at - server.started) * 1000
        time.sleep(pause)
        symbol = ""
        for phase in ("first", "warm"):
            for name in CALLS:
                if name == "memory_search":
                    args: dict[str, Any] = {"query": "how are headers parsed"}
                elif name == "code_search":
                    args = {"query": "parse an email header into its parts", "limit": 5}
                elif name == "get_symbol":
                    args = {"symbol": symbol}
                else:
                    args = {"memory_type": "session", "content": f"bench.startup run {run} {phase}: a note"}
                result, took = server.tool(name, args)
                if name == "code_search":
                    symbol = result["results"][0]["qualified_name"]
                figures[f"{phase}_{name}"] = took * 1000
        figures["ready_since_spawn"] = (time.perf_counter() - server.started) * 1000
    finally:
        server.close()
    return figures


def import_costs(project: Path, log: Path) -> dict[str, Any]:
    """``python -X importtime`` of ``codemem mcp`` up to its answer to initialize."""
    env = child_env()
    err_file = log.open("w")  # a file: a pipe would fill up and stall the child before it answers
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "query_server.cli", "mcp", "--project", str(project)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_file, env=env, cwd=str(project),
    )
    assert proc.stdin is not None and proc.stdout is not None
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench.startup", "version": "0"}}}
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    answered_at = log.stat().st_size  # the imports done before the answer (the rest load in the background)
    proc.stdin.close()
    proc.wait(timeout=60)
    err_file.close()
    text = log.read_bytes()[:answered_at].decode(errors="replace")
    top: list[tuple[int, str]] = []
    seen: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not match:
            continue
        seen.add(match.group(4).split(".")[0])
        if len(match.group(3)) == 1:
            top.append((int(match.group(2)), match.group(4)))
    top.sort(reverse=True)
    return {"top_ms": {name: round(us / 1000, 1) for us, name in top[:10]},
            "heavy_imported": [name for name in HEAVY if name in seen]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns (and writes) its results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, help="An indexed project (default: a copy of stdlib packages, indexed).")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.0, help="Seconds between tools/list and the first call.")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="codemem-startup-") as tmp:
        project = args.project.resolve() if args.project else make_project(Path(tmp) / "project")
        runs = [one_run(project, args.pause, Path(tmp) / f"server-{i}.log", i) for i in range(args.runs)]
        costs = import_costs(project, Path(tmp) / "importtime.log") if args.importtime else None
    medians = {key: round(statistics.median(run[key] for run in runs), 1) for key in runs[0]}
    if args.verbose:
        for i, run in enumerate(runs):
            print(f"run {i}: " + ", ".join(f"{k} {v:.0f}" for k, v in run.items()))
    print(f"median of {len(runs)} runs (ms), pause {args.pause:g} s:")
    for key, value in medians.items():
        print(f"  {key:<26} {value:>9.1f}")
    if costs is not None:
        print("costliest top-level imports before initialize (ms): "
              + ", ".join(f"{name} {ms:g}" for name, ms in costs["top_ms"].items()))
        print("heavy packages imported: " + (", ".join(costs["heavy_imported"]) or "none"))
    results = {"median_ms": medians, "runs_ms": runs, "pause_s": args.pause, "imports": costs,
               "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()

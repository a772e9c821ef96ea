"""Many concurrent MCP clients against one ``codemem serve`` (issue 9, item 6).

Usage: ``python -m bench.load [--seconds 60] [--clients 100] [--think 10] [--stdio 0]``.

The project is a fresh copy of a real corpus (the stripped ``requests`` sdist of
``bench.corpora`` by default), indexed with real dense vectors (local model) in a temporary state
dir, seeded with ``--memories`` memories (``bench.memory.MemoryGenerator``). Then one
``codemem serve`` subprocess owns the stores, and the clients talk to it the way a Claude Code
session configured with ``"type": "http"`` does: the official ``mcp`` SDK ``Client`` over
streamable HTTP at ``/mcp``, one MCP session per client.

1. **Idle**: one client calls each tool ``--idle-calls`` times (default 60), sequentially (after one untimed
   pass) — the baseline latency of the same server, measured in the same run.
2. **Connect burst**: ``--clients`` sessions opened in the same instant, one call each (a server
   restart with every client reconnecting): wall time and p95, reported without a target.
3. **Load**: ``--clients`` clients, spread over ``--procs`` worker processes (the client side has
   its own CPU cost; one event loop for 100 sessions would measure itself), for ``--seconds``.
   Sessions open first, spread over 0.05 s per client, and make one untimed call (a session's
   first call pays its set-up, as in the idle phase's untimed pass; the connect burst measures
   it); the window starts once every one has (no session set-up inside it). Each client then makes its first call after an exponential
   time of mean ``--think`` (the rest of a think under way: steady state from the first second)
   and loops: pick a tool (code_search 30 %,
   memory_search 25 %, get_related 15 %, find_duplicates 10 %, memory_add 10 %, memory_update
   10 % of its own memories with ``expected_version``), call it, then think for an exponentially
   distributed time of mean ``--think`` seconds. The default, 10 s, is an agent's pace: a Claude
   Code session calls a tool once per model turn (seconds of generation each) and codemem's tools
   are a share of its calls, so 100 sessions offer ~10 calls/s. ``--think 2`` (50 calls/s offered,
   more than 2 cores serve) and ``--think 0`` (closed loop) measure saturation instead. At 30 % of
   the window one more client edits 5 files and starts a ``reindex`` job (scope ``changed``),
   polling ``index_status(job_id)`` until it ends. The server's RSS, its anonymous part (heap:
   what a leak would grow) and its embedded graph server's RSS are sampled from ``/proc`` every
   0.5 s; the heap trims the server logged are counted (``query_server.heap_trim``); a per-second timeline names the slowest
   seconds.
4. **stdio** (``--stdio N``): N ``codemem mcp`` processes — what N Claude Code sessions launch —
   which find the running owner and forward to it over loopback; each runs the same client loop.

Reports calls/s, p50/p95/p99 per tool under load against idle p95 (target: zero errors, p95 ≤ 3×
idle) and the RSS growth after the first 20 % of the window (target: no growth after warm-up,
at most 1 % of the server's RSS: the data the window writes);
writes ``bench/results/load.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "load.json"
MIX = (("code_search", 30), ("memory_search", 25), ("get_related", 15), ("find_duplicates", 10),
       ("memory_add", 10), ("memory_update", 10))
TOOLS = tuple(name for name, _ in MIX)
RSS_GROWTH_TARGET = 0.01
""""No memory growth after warm-up", measured: the server's RSS may grow by at most 1 % over the
window after its first 20 % (~9 MB of ~940). The window writes data (~100 memories, their
vectors, cached embeddings, a reindex): ~1 MB. The allocator's kept memory, before the heap
trimmer, was 17 to 57 MB."""
OPEN_SPREAD_S_PER_CLIENT = 0.05
"""Sessions open spread over this many seconds per client (5 s for 100) before the window."""
OPEN_TIMEOUT_S = 180.0
"""The window starts at the latest this long after the client processes start."""
P95_RATIO_TARGET = 3.0


# -- workload ------------------------------------------------------------------------------------

def _workload(service: Any, root: Path, queries: list[str], rng: random.Random) -> dict[str, list]:
    """The arguments the clients draw from: queries, symbols, snippets, memories."""
    from bench.memory import MemoryGenerator

    queries = queries or ["send an HTTP request"]
    symbols = service.manifest.all_symbols()
    counts: dict[str, int] = {}
    for sym in symbols:
        counts[sym.qualified_name] = counts.get(sym.qualified_name, 0) + 1
    functions = [s for s in symbols if getattr(s, "kind", "") in ("function", "method")] or symbols
    names = sorted({s.qualified_name for s in functions if counts[s.qualified_name] == 1})  # overloads are ambiguous
    snippets: list[str] = []
    for path in sorted(p for p in root.rglob("*.py") if ".codemem" not in p.parts)[:200]:
        lines = path.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("def ") and len(snippets) < 300:
                snippets.append("\n".join(lines[i:i + 12]))
    gen = MemoryGenerator(rng)
    return {
        "queries": queries, "symbols": names, "snippets": snippets or ["def f(x):\n    return x + 1\n"],
        "memories": [list(m) for m in gen.items(400)], "memory_queries": gen.queries(200, set()),
    }


def _args_for(tool: str, work: dict[str, list], rng: random.Random, own: list[dict[str, Any]]) -> dict[str, Any]:
    if tool == "code_search":
        return {"query": rng.choice(work["queries"]), "limit": 10}
    if tool == "memory_search":
        return {"query": rng.choice(work["memory_queries"]), "limit": 10}
    if tool == "get_related":
        return {"entity_id": rng.choice(work["symbols"]), "direction": "both", "depth": 2}
    if tool == "find_duplicates":
        return {"code": rng.choice(work["snippets"]), "language": "python"}
    if tool == "memory_update" and own:
        memory = rng.choice(own)
        return {"memory_id": memory["memory_id"], "memory_type": memory["memory_type"],
                "content": f"{memory['content']} Revised {rng.randrange(10**6)}.",
                "expected_version": memory["version"]}
    memory_type, content, metadata = rng.choice(work["memories"])
    return {"memory_type": memory_type, "content": f"{content} ({rng.randrange(10**9)})", "metadata": metadata}


def _describe(exc: BaseException) -> str:
    """The innermost exception of a (nested) exception group, with its type."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]


async def _call(client: Any, tool: str, args: dict[str, Any]) -> tuple[Any, str | None]:
    """(structured result, error text or None)."""
    try:
        result = await client.call_tool(tool, args)
    except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
        return None, _describe(exc)
    if result.is_error:
        return None, "".join(getattr(c, "text", "") for c in result.content)[:300]
    return result.structured_content, None


def _client(target: dict[str, Any]) -> Any:
    from mcp import Client

    if target["kind"] == "http":
        return Client(target["url"])
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CODEMEM_STATE_DIR": target["state"]}
    script = Path(sys.executable).with_name("codemem")
    command, argv = (str(script), []) if script.exists() else (sys.executable, ["-m", "query_server.cli"])
    return Client(StdioServerParameters(command=command, args=[*argv, "mcp", "--project", target["root"]],
                                        env=env, cwd=str(REPO_ROOT)))


async def _one_client(index: int, target: dict[str, Any], work: dict[str, list], gate: dict[str, Any],
                      think: float, seed: int, out: list[tuple[str, float, float, str | None]]) -> None:
    """One MCP session: opens (at a random point of the opening spread), reports it open, waits
    for the window, then calls tools at the think-time pace until the window ends."""
    import anyio

    rng = random.Random(seed * 1000 + index)
    tools, weights = zip(*MIX, strict=True)
    own: list[dict[str, Any]] = []
    # Sessions open before the window, spread over ``open_spread_s`` (a hundred opening in the
    # same instant is the connect burst, measured apart in ``_connect_burst``). The window starts
    # once every session of every process is open, so no session set-up lands in it. Each client
    # then waits an exponentially distributed time of mean ``think`` before its first call: the
    # time left of a think under way, which for exponential thinks has the same distribution
    # (memoryless), so the offered load is the steady state's from the window's first second.
    # (A uniform first delay over one think made the first 10 s ~40 % busier than the rest.)
    await anyio.sleep(rng.random() * gate["open_spread_s"])
    reported = False
    try:
        async with _client(target) as client:
            # One untimed call first, as in the idle phase: a session's first call pays its set-up
            # (the connect burst measures that); the window measures sessions in use.
            await _call(client, "code_search", {"query": rng.choice(work["queries"]), "limit": 5})
            gate["opened"]()
            reported = True
            await gate["started"].wait()
            start_at, end_at = gate["window"]
            first = min(rng.expovariate(1 / think), 10 * think) if think else rng.random() * 0.2
            await anyio.sleep(max(0.0, start_at - time.time()) + first)
            while time.time() < end_at:
                tool = rng.choices(tools, weights)[0]
                if tool == "memory_update" and not own:
                    tool = "memory_add"
                args = _args_for(tool, work, rng, own)
                began = time.time()
                t0 = time.perf_counter()
                result, error = await _call(client, tool, args)
                out.append((tool, began, time.perf_counter() - t0, error))
                if error is None and tool in ("memory_add", "memory_update"):
                    if tool == "memory_add":
                        own.append({"memory_id": result["memory_id"], "memory_type": result["memory_type"],
                                    "content": args["content"], "version": result["version"]})
                    else:
                        for memory in own:
                            if memory["memory_id"] == result["memory_id"]:
                                memory["version"], memory["content"] = result["version"], args["content"]
                if think:
                    await anyio.sleep(min(rng.expovariate(1 / think), 10 * think))
    except Exception as exc:  # noqa: BLE001 - a session that cannot open or dies is an error too
        if not reported:
            gate["opened"]()  # the window must not wait for a session that will never open
        out.append(("session", time.time(), 0.0, _describe(exc)))


def _worker(spec: dict[str, Any], all_open: Any, go: Any, window_start: Any, results: Any) -> None:
    """One process: its share of the clients, each an MCP session; puts every call it made on
    ``results``. Releases ``all_open`` once its sessions are open, then waits for ``go``."""
    import anyio
    import anyio.to_thread

    out: list[tuple[str, float, float, str | None]] = []

    async def main() -> None:
        left = len(spec["clients"])
        started = anyio.Event()
        gate: dict[str, Any] = {"open_spread_s": spec["open_spread_s"], "started": started, "window": None}

        def opened() -> None:
            nonlocal left
            left -= 1
            if left == 0:
                all_open.release()

        async def wait_for_go() -> None:
            await anyio.to_thread.run_sync(go.wait)
            gate["window"] = (window_start.value, window_start.value + spec["seconds"])
            started.set()

        gate["opened"] = opened
        async with anyio.create_task_group() as group:
            group.start_soon(wait_for_go)
            for index in spec["clients"]:
                group.start_soon(_one_client, index, spec["target"], spec["work"], gate, spec["think"], spec["seed"], out)

    try:
        anyio.run(main)
    finally:
        results.put(out)


# -- server, RSS, reindex --------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status_kb(pid: int, *fields: str) -> tuple[int, ...]:
    """Memory figures of ``/proc/<pid>/status`` in kB, one read: VmRSS (all resident memory),
    RssAnon (heap and other private memory), RssFile (pages of mapped files); 0 when unreadable."""
    found = dict.fromkeys(fields, 0)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name = line.split(":", 1)[0]
            if name in found:
                found[name] = int(line.split()[1])
    except OSError:
        pass
    return tuple(found[field] for field in fields)


def _rss_kb(pid: int) -> int:
    return _status_kb(pid, "VmRSS")[0]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (its threads included), from ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _graph_servers(state: Path) -> list[int]:
    """Pids of the embedded graph servers (redis-server + FalkorDB) running in ``state``."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "redis-server" in (entry / "cmdline").read_text() and str(state) in os.readlink(entry / "cwd"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


class RssSampler(threading.Thread):
    """VmRSS of the server and of its embedded graph server, every ``interval`` s."""

    def __init__(self, pid: int, state: Path, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.state, self.interval, self.samples = pid, state, interval, []
        self._graph: list[int] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            graph = sum(_rss_kb(c) for c in self._graph)
            if not graph:
                self._graph = _graph_servers(self.state)
                graph = sum(_rss_kb(c) for c in self._graph)
            rss, anon = _status_kb(self.pid, "VmRSS", "RssAnon")
            self.samples.append((time.time(), rss, graph, anon))
            self._stop_event.wait(self.interval)

    def stop(self) -> list[tuple[float, int, int, int]]:
        self._stop_event.set()
        self.join()
        return self.samples


def _slope_mb_per_min(points: list[tuple[float, float]]) -> float | None:
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return None if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var * 60 / 1024


def _growth_mb(kb_series: list[int], ends: int = 5) -> float | None:
    """Last minus first of a series of kB samples, in MB, each end the median of ``ends``
    samples (one sample at an end would make a heap trim or a page-in there the whole answer)."""
    if len(kb_series) < 2 * ends:
        return None
    return round((statistics.median(kb_series[-ends:]) - statistics.median(kb_series[:ends])) / 1024, 1)


def rss_summary(samples: list[tuple[float, int, int, int]], start: float, end: float) -> dict[str, Any]:
    window = [s for s in samples if start <= s[0] <= end]
    if not window:
        return {}
    warm = start + 0.2 * (end - start)
    after = [s for s in window if s[0] >= warm]
    second_half = [s for s in window if s[0] >= start + 0.5 * (end - start)]
    return {
        "server_start_mb": round(window[0][1] / 1024, 1), "server_peak_mb": round(max(s[1] for s in window) / 1024, 1),
        "server_end_mb": round(window[-1][1] / 1024, 1),
        "graph_start_mb": round(window[0][2] / 1024, 1), "graph_end_mb": round(window[-1][2] / 1024, 1),
        "server_slope_mb_per_min_after_20pct": _round(_slope_mb_per_min([(s[0], s[1]) for s in after])),
        "graph_slope_mb_per_min_after_20pct": _round(_slope_mb_per_min([(s[0], s[2]) for s in after])),
        "server_slope_mb_per_min_second_half": _round(_slope_mb_per_min([(s[0], s[1]) for s in second_half])),
        "server_growth_mb_after_20pct": _growth_mb([s[1] for s in after]),
        "server_growth_mb_second_half": _growth_mb([s[1] for s in second_half]),
        "server_anon_start_mb": round(window[0][3] / 1024, 1), "server_anon_end_mb": round(window[-1][3] / 1024, 1),
        "server_anon_slope_mb_per_min_after_20pct": _round(_slope_mb_per_min([(s[0], s[3]) for s in after])),
        "server_anon_growth_mb_after_20pct": _growth_mb([s[3] for s in after]),
        "samples": len(window),
    }


def heap_trims(server_log: str) -> dict[str, Any]:
    """How often the server trimmed its heap and how long the trims took, from its log lines."""
    took = []
    for line in server_log.splitlines():
        if "heap trimmed" in line:
            try:  # `codemem serve` logs JSON lines
                took.append(float(json.loads(line)["ms"]))
            except (ValueError, KeyError, TypeError):
                continue
    return {"count": len(took), "total_ms": round(sum(took), 1), "max_ms": round(max(took), 2) if took else None}


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


async def _reindex(url: str, root: Path, at: float) -> dict[str, Any]:
    """Edit 5 files at ``at`` and run a ``reindex`` job (scope changed) through MCP until it ends."""
    import anyio
    from mcp import Client

    await anyio.sleep(max(0.0, at - time.time()))
    files = sorted(p for p in root.rglob("*.py") if ".codemem" not in p.parts)[:5]
    for i, path in enumerate(files):
        path.write_text(path.read_text() + f"\n\ndef load_bench_added_{i}(value):\n    return value * {i + 2}\n")
    started = time.perf_counter()
    async with Client(url) as client:
        job, error = await _call(client, "reindex", {"directory_path": ".", "scope": "changed"})
        if error:
            return {"status": "error", "error": error}
        while True:
            status, error = await _call(client, "index_status", {"job_id": job["job_id"]})
            if error:
                return {"status": "error", "error": error}
            state = status.get("job") or {}
            if state.get("status") in ("done", "failed"):
                report = state.get("report") or {}
                return {"status": state["status"], "seconds": round(time.perf_counter() - started, 2),
                        "files_indexed": report.get("files_indexed"), "error": state.get("error")}
            await anyio.sleep(0.5)


async def _idle(url: str, work: dict[str, list], calls: int, seed: int) -> dict[str, list[float]]:
    """Each tool ``calls`` times from one client, sequentially, after one untimed pass."""
    from mcp import Client

    rng = random.Random(seed)
    own: list[dict[str, Any]] = []
    samples: dict[str, list[float]] = {tool: [] for tool in TOOLS}
    errors: list[str] = []
    async with Client(url) as client:
        for rnd in range(calls + 1):
            for tool in TOOLS:
                args = _args_for(tool if own or tool != "memory_update" else "memory_add", work, rng, own)
                name = tool if own or tool != "memory_update" else "memory_add"
                t0 = time.perf_counter()
                result, error = await _call(client, name, args)
                elapsed = time.perf_counter() - t0
                if error:
                    errors.append(f"{name}: {error}")
                    continue
                if name == "memory_add":
                    own.append({"memory_id": result["memory_id"], "memory_type": result["memory_type"],
                                "content": args["content"], "version": result["version"]})
                elif name == "memory_update":
                    own[:] = [m for m in own if m["memory_id"] != result["memory_id"]]
                    own.append({**args, "version": result["version"]})
                if rnd and name == tool:
                    samples[tool].append(elapsed)
    if errors:
        raise RuntimeError(f"idle phase failed: {errors[:3]}")
    return samples


async def _connect_burst(url: str, clients: int, query: str) -> dict[str, Any]:
    """``clients`` sessions opened in the same instant (a server restart with every client
    reconnecting), each making one ``code_search``: the wall time until all have an answer, and
    p50/p95 of open + first call. Reported, no target: the steady state is what ``load`` times."""
    import anyio
    from mcp import Client

    latencies: list[float] = []
    errors: list[str] = []

    async def one() -> None:
        t0 = time.perf_counter()
        try:
            async with Client(url) as client:
                _, error = await _call(client, "code_search", {"query": query, "limit": 5})
        except Exception as exc:  # noqa: BLE001 - counted
            error = _describe(exc)
        if error:
            errors.append(error)
        else:
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one)
    return {"sessions": clients, "wall_s": round(time.perf_counter() - started, 2), "errors": len(errors),
            **{k: v for k, v in latency_stats(latencies).items() if k != "n"}}


async def _seed_memories(url: str, work: dict[str, list], count: int) -> None:
    from mcp import Client

    async with Client(url) as client:
        for start in range(0, count, 100):
            batch = [{"memory_type": t, "content": c, "metadata": m}
                     for t, c, m in work["memories"][start:start + 100][: count - start]]
            _, error = await _call(client, "memory_bulk_add", {"memories": batch})
            if error:
                raise RuntimeError(f"memory_bulk_add failed: {error}")


async def _wait_ready(url: str, server: subprocess.Popen, timeout: float = 180) -> None:
    import anyio
    from mcp import Client

    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"codemem serve exited with {server.returncode}")
        try:
            async with Client(url) as client:
                status, error = await _call(client, "index_status", {})
                if not error and status["search_mode"] == "hybrid" and status["dense_coverage"] >= 1.0:
                    return
        except Exception:  # noqa: BLE001 - not listening yet
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("codemem serve did not become ready")
        await anyio.sleep(0.5)


# -- statistics ----------------------------------------------------------------------------------

def _pct(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))] * 1000


def latency_stats(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    return {"n": len(ordered), "p50_ms": round(_pct(ordered, 0.50), 2), "p95_ms": round(_pct(ordered, 0.95), 2),
            "p99_ms": round(_pct(ordered, 0.99), 2), "max_ms": round(ordered[-1] * 1000, 2)}


def timeline(calls: list[tuple[str, float, float, str | None]], start: float) -> list[dict[str, Any]]:
    """Per second of the window (by when a call began): calls, median and worst latency, and the
    tool of the worst, so a stall (a burst of sessions, the reindex) shows where it happened."""
    seconds: dict[int, list[tuple[float, str]]] = {}
    for tool, began, elapsed, error in calls:
        if error is None and tool != "session":
            seconds.setdefault(int(began - start), []).append((elapsed, tool))
    rows = []
    for second in sorted(seconds):
        items = sorted(seconds[second])
        rows.append({"s": second, "calls": len(items), "p50_ms": round(items[len(items) // 2][0] * 1000, 1),
                     "max_ms": round(items[-1][0] * 1000, 1), "worst": items[-1][1]})
    return rows


def _phase(calls: list[tuple[str, float, float, str | None]], start: float, end: float,
           idle: dict[str, dict[str, float]] | None) -> dict[str, Any]:
    errors = [c for c in calls if c[3] is not None]
    by_tool: dict[str, list[float]] = {}
    for tool, _began, elapsed, error in calls:
        if error is None and tool != "session":
            by_tool.setdefault(tool, []).append(elapsed)
    per_tool = {}
    for tool in TOOLS:
        stats = latency_stats(by_tool.get(tool, []))
        if idle and stats.get("n") and idle.get(tool, {}).get("p95_ms"):
            stats["idle_p95_ms"] = idle[tool]["p95_ms"]
            stats["p95_vs_idle"] = round(stats["p95_ms"] / idle[tool]["p95_ms"], 2)
        per_tool[tool] = stats
    done = sum(1 for c in calls if c[3] is None and c[0] != "session")
    error_texts: dict[str, int] = {}
    for tool, _, _, error in errors:
        key = f"{tool}: {error[:160]}"
        error_texts[key] = error_texts.get(key, 0) + 1
    ratios = [s["p95_vs_idle"] for s in per_tool.values() if "p95_vs_idle" in s]
    return {
        "timeline": timeline(calls, start),
        "seconds": round(end - start, 1), "calls": done, "calls_per_s": round(done / max(end - start, 1e-9), 1),
        "errors": len(errors), "error_kinds": dict(sorted(error_texts.items(), key=lambda kv: -kv[1])[:10]),
        "per_tool": per_tool, "worst_p95_vs_idle": max(ratios) if ratios else None,
    }


# -- driver ----------------------------------------------------------------------------------------

def _run_clients(target: dict[str, Any], work: dict[str, list], clients: int, procs: int, seconds: float,
                 think: float, seed: int, extra: Any = None) -> tuple[list, float, float, Any]:
    """``clients`` clients over ``procs`` processes for ``seconds``; ``extra(start, end)`` runs here meanwhile.

    The window starts one second after every session is open (or has failed to open), at most
    ``OPEN_TIMEOUT_S`` after the processes start; the processes start and import first."""
    procs = max(1, min(procs, clients))
    ctx = multiprocessing.get_context("spawn")
    all_open, go, window_start, results = ctx.Semaphore(0), ctx.Event(), ctx.Value("d", 0.0), ctx.Queue()
    specs = [{"clients": list(range(p, clients, procs)), "target": target, "work": work, "seconds": seconds,
              "open_spread_s": OPEN_SPREAD_S_PER_CLIENT * clients, "think": think, "seed": seed} for p in range(procs)]
    workers = [ctx.Process(target=_worker, args=(spec, all_open, go, window_start, results), daemon=True)
               for spec in specs]
    for worker in workers:
        worker.start()
    deadline = time.time() + OPEN_TIMEOUT_S
    for _ in workers:
        if not all_open.acquire(timeout=max(0.1, deadline - time.time())):
            break  # start anyway: the sessions that did not open count as errors
    start_at = time.time() + 1.0
    end_at = start_at + seconds
    window_start.value = start_at
    go.set()
    extra_result = extra(start_at, end_at) if extra else None
    calls: list[tuple[str, float, float, str | None]] = []
    for _ in workers:
        calls.extend(results.get(timeout=seconds + 600))
    for worker in workers:
        worker.join(timeout=60)
    return calls, start_at, end_at, extra_result


def children_cpu_seconds() -> float:
    """User + system CPU of this process's ended and waited-for children so far (the client
    processes, once joined): what the load generator itself took from the machine's cores."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_load(seconds: float = 60, clients: int = 100, procs: int = 4, think: float = 10.0, corpus: str = "requests",
             memories: int = 300, idle_calls: int = 60, stdio: int = 0, stdio_seconds: float = 30,
             seed: int = 7, log: Any = None, project: Path | None = None, warmup: float = 20) -> dict[str, Any]:
    """The whole benchmark; returns the result dict (see the module docstring).

    ``project``: index a copy of this tree instead of the ``corpus`` sdist (no download; the tests
    use it), with queries from its docstrings. ``warmup``: seconds of the same load (and one
    reindex) before the measured window, so that caches, pools and the embedder's memory arena
    reach their working size first (0: none)."""
    import anyio

    from bench.corpora import fresh_copy, load_corpus
    from query_server.ownership import ProjectHandle
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rng = random.Random(seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="codemem-load-") as tmp:
        work_dir = Path(tmp)
        if project is None:
            source = load_corpus(corpus)
            root = fresh_copy(source, work_dir / corpus)
            queries = [q.text.splitlines()[0][:200] for q in source.queries]
            corpus_name, corpus_version = corpus, source.version
        else:
            from bench.latency import _queries

            root = work_dir / "project"
            shutil.copytree(project, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".codemem"))
            queries = _queries(sorted(root.rglob("*.py")), 200, random.Random(seed))
            corpus_name, corpus_version = str(project), None
        state = work_dir / "state"
        settings = Settings(project_root=root, state_dir=state)
        handle = ProjectHandle(settings)
        try:
            if not handle.is_owner:
                raise RuntimeError(f"another process owns {state}")
            t0 = time.perf_counter()
            report = handle.call("index", IndexInput(embed=True))
            index_s = time.perf_counter() - t0
            service = handle.backend
            status = service.index_status()
            work = _workload(service, root, queries, rng)
        finally:
            handle.close()
        log(f"indexed {report['files_indexed']} files, {status.symbols} symbols in {index_s:.1f} s")

        port = _free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CODEMEM_STATE_DIR": str(state)}
        server_log = work_dir / "serve.log"
        with server_log.open("w") as sink:
            server = subprocess.Popen(
                [sys.executable, "-m", "query_server.cli", "serve", "--project", str(root), "--port", str(port)],
                env=env, cwd=str(REPO_ROOT), stdout=sink, stderr=subprocess.STDOUT,
            )
        sampler = RssSampler(server.pid, state)
        result: dict[str, Any] = {}
        try:
            anyio.run(_wait_ready, url, server)
            anyio.run(_seed_memories, url, work, memories)
            sampler.start()
            log(f"codemem serve (pid {server.pid}) ready on {url}; idle phase")
            cpu_before = cpu_seconds(server.pid)
            idle_samples = anyio.run(_idle, url, work, idle_calls, seed)
            idle_cpu_s = cpu_seconds(server.pid) - cpu_before
            idle = {tool: latency_stats(v) for tool, v in idle_samples.items()}
            log("idle p95 ms: " + ", ".join(f"{t} {s.get('p95_ms')}" for t, s in idle.items()))

            burst = anyio.run(_connect_burst, url, clients, work["queries"][0])
            log(f"connect burst: {burst}")
            result["connect_burst"] = burst

            def reindex_meanwhile(start: float, end: float) -> dict[str, Any]:
                return anyio.run(_reindex, url, root, start + 0.3 * (end - start))

            if warmup:
                log(f"warm-up: {clients} HTTP clients for {warmup:.0f} s with a reindex, not measured")
                w_calls, _, _, w_reindex = _run_clients(
                    {"kind": "http", "url": url}, work, clients, procs, warmup, think, seed + 2, reindex_meanwhile)
                result["warmup"] = {"seconds": warmup, "calls": len(w_calls),
                                    "errors": sum(1 for c in w_calls if c[3]), "reindex": w_reindex}
                log(f"warm-up: {result['warmup']}")
            log(f"load: {clients} HTTP clients over {procs} processes for {seconds:.0f} s (think {think} s)")
            load_average_before = [round(x, 2) for x in os.getloadavg()]

            cpu_before, clients_cpu_before = cpu_seconds(server.pid), children_cpu_seconds()
            calls, start_at, end_at, reindex = _run_clients(
                {"kind": "http", "url": url}, work, clients, procs, seconds, think, seed, reindex_meanwhile)
            load_cpu_s = cpu_seconds(server.pid) - cpu_before
            load = _phase(calls, start_at, max(end_at, max((c[1] + c[2] for c in calls), default=end_at)), idle)
            load["reindex"] = reindex
            idle_calls_made = (idle_calls + 1) * len(TOOLS)  # the untimed pass included
            load["server_cpu"] = {  # what the server spent per call: machine speed, not contention
                "idle_ms_per_call": round(1000 * idle_cpu_s / max(1, idle_calls_made), 2),
                "load_s": round(load_cpu_s, 2),
                "load_ms_per_call": round(1000 * load_cpu_s / max(1, len(calls)), 2),
                # the client processes share the machine's cores with the server
                "clients_s": round(children_cpu_seconds() - clients_cpu_before, 2),
            }
            load["load_average_before"] = load_average_before
            load["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
            load["rss"] = rss_summary(sampler.samples, start_at, end_at)
            result.update(idle=idle, load=load)
            log(f"load: {load['calls']} calls, {load['calls_per_s']} calls/s, {load['errors']} errors; "
                f"reindex {reindex}")

            if stdio:
                log(f"stdio: {stdio} `codemem mcp` processes forwarding to the owner, {stdio_seconds:.0f} s")
                target = {"kind": "stdio", "root": str(root), "state": str(state)}
                calls, s_start, s_end, _ = _run_clients(target, work, stdio, min(procs, stdio), stdio_seconds,
                                                        think, seed + 1)
                phase = _phase(calls, s_start, s_end, idle)
                phase["rss"] = rss_summary(sampler.samples, s_start, s_end)
                result["stdio"] = {"processes": stdio, **phase}
                log(f"stdio: {phase['calls']} calls, {phase['calls_per_s']} calls/s, {phase['errors']} errors")
        finally:
            samples = sampler.stop() if sampler.is_alive() else sampler.samples
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
            server_output = server_log.read_text(errors="replace")
            tail = server_output[-3000:]
        result["heap_trims"] = heap_trims(server_output)
        if server.returncode not in (0, -15):
            result["server_log_tail"] = tail
        result["rss_series_mb"] = [  # (s since the first sample, server RSS, graph server RSS, server RssAnon)
            (round(t - samples[0][0], 1), round(a / 1024, 1), round(b / 1024, 1), round(c / 1024, 1))
            for t, a, b, c in samples[:: max(1, len(samples) // 200)]] if samples else []
    result.update(
        config={"seconds": seconds, "warmup_s": warmup, "clients": clients, "procs": procs, "think_s": think, "memories": memories,
                "idle_calls": idle_calls, "stdio": stdio, "mix": dict(MIX)},
        corpus={"name": corpus_name, "version": corpus_version, "files": status.files, "symbols": status.symbols,
                "index_s": round(index_s, 1), "search_mode": status.search_mode},
        machine={"cpus": os.cpu_count(), "python": platform.python_version(), "mcp": version("mcp"),
                 "platform": platform.platform()},
        seconds=round(time.perf_counter() - started, 1),
    )
    result["targets"] = targets(result)
    return result


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """(figure, value, baseline, ratio, target, pass) rows for bench.all."""
    load = result["load"]
    rows = [{"figure": "load: errors", "value": load["errors"], "target": "0", "pass": load["errors"] == 0},
            {"figure": "load: calls/s", "value": load["calls_per_s"], "target": "reported", "pass": None}]
    for tool in TOOLS:
        stats = load["per_tool"].get(tool, {})
        if stats.get("n"):
            rows.append({"figure": f"load: {tool} p95 ms", "value": stats["p95_ms"],
                         "baseline": stats.get("idle_p95_ms"), "ratio": stats.get("p95_vs_idle"),
                         "target": f"<= {P95_RATIO_TARGET:g}x idle p95",
                         "pass": None if stats.get("p95_vs_idle") is None else stats["p95_vs_idle"] <= P95_RATIO_TARGET})
    rss = load.get("rss", {})
    start_mb = rss.get("server_start_mb")
    for key, label in (("after_20pct", "after the first 20% of the window"), ("second_half", "over the second half")):
        growth = rss.get(f"server_growth_mb_{key}")
        rows.append({
            "figure": f"load: server RSS growth MB {label} (baseline: server RSS)", "value": growth,
            "baseline": start_mb, "ratio": None if growth is None or not start_mb else round(growth / start_mb, 4),
            "target": f"<= {RSS_GROWTH_TARGET:.0%} of RSS",
            "pass": None if growth is None or not start_mb else growth <= RSS_GROWTH_TARGET * start_mb})
    slope = rss.get("server_slope_mb_per_min_after_20pct")
    rows.append({"figure": "load: server RSS slope MB/min after the first 20% of the window", "value": slope,
                 "target": "reported", "pass": None})
    reindex = load.get("reindex") or {}
    rows.append({"figure": "load: reindex job under load", "value": reindex.get("status"), "target": "done",
                 "pass": reindex.get("status") == "done"})
    if "warmup" in result:
        rows.append({"figure": "load: errors in the warm-up", "value": result["warmup"]["errors"], "target": "0",
                     "pass": result["warmup"]["errors"] == 0})
    if "stdio" in result:
        rows.append({"figure": f"load stdio x{result['stdio']['processes']}: errors", "value": result["stdio"]["errors"],
                     "target": "0", "pass": result["stdio"]["errors"] == 0})
    return rows


def _print(result: dict[str, Any]) -> None:
    load = result["load"]
    print(f"\n== load: {result['config']['clients']} MCP clients over streamable HTTP, {load['seconds']} s, "
          f"think {result['config']['think_s']} s — {load['calls']} calls, {load['calls_per_s']} calls/s, "
          f"{load['errors']} errors")
    print(f"{'tool':<16} {'n':>6} {'p50':>8} {'p95':>8} {'p99':>8} {'idle p95':>9} {'x idle':>7}")
    for tool, stats in load["per_tool"].items():
        if stats.get("n"):
            print(f"{tool:<16} {stats['n']:>6} {stats['p50_ms']:>8.1f} {stats['p95_ms']:>8.1f} {stats['p99_ms']:>8.1f} "
                  f"{stats.get('idle_p95_ms', 0):>9.1f} {stats.get('p95_vs_idle', 0):>7.2f}")
    for kind, count in load["error_kinds"].items():
        print(f"  error x{count}: {kind}")
    print(f"reindex: {load.get('reindex')}")
    if "connect_burst" in result:
        print(f"connect burst (every session opened at once, one call each): {result['connect_burst']}")
    slow = sorted(load.get("timeline", []), key=lambda row: -row["max_ms"])[:5]
    if slow:
        print("slowest seconds of the window: " + "; ".join(
            f"s{row['s']} {row['calls']} calls, p50 {row['p50_ms']:.0f} ms, max {row['max_ms']:.0f} ms ({row['worst']})"
            for row in slow))
    print(f"load average (1/5/15 min) before {load.get('load_average_before')}, after {load.get('load_average_after')} "
          f"on {result['machine']['cpus']} CPUs")
    print(f"server CPU: {load.get('server_cpu')} (the load figure includes the reindex)")
    print(f"rss: {load.get('rss')}")
    print(f"heap trims (whole run): {result.get('heap_trims')}")
    if "stdio" in result:
        s = result["stdio"]
        print(f"stdio x{s['processes']}: {s['calls']} calls, {s['calls_per_s']} calls/s, {s['errors']} errors; "
              + ", ".join(f"{t} p95 {v['p95_ms']:.1f}" for t, v in s["per_tool"].items() if v.get("n")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--procs", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--think", type=float, default=10.0,
                        help="mean think time between a client's calls, s (default 10: an agent's pace; 0: closed loop)")
    parser.add_argument("--corpus", default="requests")
    parser.add_argument("--memories", type=int, default=300, help="memories seeded before the run")
    parser.add_argument("--idle-calls", type=int, default=60,
                        help="sequential calls per tool for the idle baseline (default 60: its p95 is the ratio's denominator)")
    parser.add_argument("--stdio", type=int, default=0, help="also run N `codemem mcp` stdio processes")
    parser.add_argument("--stdio-seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=20,
                        help="seconds of the same load and one reindex before the measured window (default 20)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result = run_load(seconds=args.seconds, clients=args.clients, procs=args.procs, think=args.think,
                      corpus=args.corpus, memories=args.memories, idle_calls=args.idle_calls, stdio=args.stdio,
                      stdio_seconds=args.stdio_seconds, warmup=args.warmup)
    _print(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    failed = any(row["pass"] is False for row in result["targets"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

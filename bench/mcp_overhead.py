"""MCP round-trip overhead over the direct service call (issue "query server"; reported, no target).

Usage: ``python -m bench.mcp_overhead [--calls N] [--project PATH]``.

The corpus is real code: by default a snapshot of this repository's own packages (``pipelines``,
``query_server``, ``resources``) copied to a temporary directory; ``--project PATH`` indexes
another tree in place. Either way the stores live in a temporary state dir (the project's own
``.codemem`` is never touched), indexed with real dense vectors (local model), so ``code_search``
runs in hybrid mode.

The same fixed calls — ``code_search`` (first lines of the corpus' docstrings, limit 10),
``get_symbol`` (qualified names of indexed symbols) and ``index_status`` — are timed, per call,
through five paths:

* ``direct``: ``CodeMemService`` methods in this process (the baseline);
* ``memory``: ``mcp.Client(build_mcp_server(handle))`` as the tests drive it — the SDK's
  in-process path (direct dispatch, no JSON-RPC framing);
* ``memory-legacy``: the same with ``mode="legacy"`` — the SDK's ``InMemoryTransport``, JSON-RPC
  messages over in-memory streams after the initialize handshake;
* ``stdio``: a real ``codemem mcp --project`` subprocess (the console script, as Claude Code
  launches it from ``.mcp.json``) and the official client over its stdin/stdout;
* ``stdio-legacy``: the same with the initialize handshake (``mode="legacy"``), the protocol
  version today's clients negotiate.

``direct`` and the two in-memory paths run interleaved in one process (the order rotates per
call). Only one process can own the embedded stores, so this process closes them before each
stdio server starts (the server must own them; otherwise it would forward every call over
loopback HTTP to this process), and re-opens them afterwards for a second ``direct`` pass; the
baseline pools both passes (their p50s are reported as a drift check). Every path gets one
untimed pass of the whole workload first (model load, caches); query embeddings then come from
the embedding cache, so ``code_search`` times exclude model inference in every path alike.

Prints p50 / p95 / mean per tool and path, and the overhead over ``direct`` (p50 and mean
difference in ms, p50 ratio); writes ``bench/results/mcp_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.latency import _percentiles, _queries

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "mcp_overhead.json"
SOURCE_PACKAGES = ("pipelines", "query_server", "resources")
TOOLS = ("code_search", "get_symbol", "index_status")
IN_PROCESS = ("direct", "memory", "memory-legacy")
STDIO = ("stdio", "stdio-legacy")

Workload = dict[str, list[dict[str, Any]]]
Samples = dict[str, dict[str, list[float]]]


def _corpus(work: Path, project: str | None) -> Path:
    """The tree to index: ``project`` as is, or a snapshot of this repository's packages."""
    if project is not None:
        return Path(project).expanduser().resolve()
    root = work / "codemem-src"
    for package in SOURCE_PACKAGES:
        shutil.copytree(REPO_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def _workload(service: Any, root: Path, calls: int, rng: random.Random) -> Workload:
    """``calls`` arguments per tool, the same for every path."""
    files = sorted(p for p in root.rglob("*.py") if ".codemem" not in p.parts and ".venv" not in p.parts)
    queries = _queries(files, calls, rng) or ["parse a source file into symbols"]
    symbols = service.manifest.all_symbols()
    counts: dict[str, int] = {}
    for sym in symbols:
        counts[sym.qualified_name] = counts.get(sym.qualified_name, 0) + 1
    names = sorted({s.qualified_name for s in symbols if counts[s.qualified_name] == 1})
    rng.shuffle(names)
    if not names:
        raise SystemExit(f"no symbols indexed under {root} — pick a project with source code")
    return {
        "code_search": [{"query": queries[i % len(queries)], "limit": 10} for i in range(calls)],
        "get_symbol": [{"symbol": names[i % len(names)]} for i in range(calls)],
        "index_status": [{} for _ in range(calls)],
    }


def _direct(service: Any, tool: str, args: dict[str, Any]) -> Any:
    """One tool call on the service itself, its input validated as the MCP tool validates it."""
    from resources.schemas.tools import CodeSearchInput, GetSymbolInput

    if tool == "code_search":
        return service.code_search(CodeSearchInput(**args))
    if tool == "get_symbol":
        return service.get_symbol(GetSymbolInput(**args))
    return service.index_status()


def _direct_caller(service: Any) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
    async def call(tool: str, args: dict[str, Any]) -> Any:
        return _direct(service, tool, args)

    return call


def _mcp_caller(client: Any) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
    async def call(tool: str, args: dict[str, Any]) -> Any:
        result = await client.call_tool(tool, args)
        if result.is_error:
            text = "".join(getattr(c, "text", "") for c in result.content)
            raise RuntimeError(f"{tool}({args}) failed: {text}")
        return result

    return call


async def _run(
    callers: dict[str, Callable[[str, dict[str, Any]], Awaitable[Any]]], workload: Workload, samples: Samples
) -> None:
    """One untimed pass per path, then every call timed, the paths' order rotating per call."""
    modes = list(callers)
    for mode in modes:
        for tool in TOOLS:
            for args in workload[tool]:
                await callers[mode](tool, args)
    for i in range(len(workload[TOOLS[0]])):
        for tool in TOOLS:
            args = workload[tool][i]
            shift = i % len(modes)
            for mode in modes[shift:] + modes[:shift]:
                started = time.perf_counter()
                await callers[mode](tool, args)
                samples.setdefault(mode, {}).setdefault(tool, []).append(time.perf_counter() - started)


def _server_params(project: Path, state: Path) -> Any:
    """``codemem mcp --project PROJECT`` with this run's state dir, as Claude Code launches it."""
    from mcp.client.stdio import StdioServerParameters

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CODEMEM_STATE_DIR": str(state)}
    script = Path(sys.executable).with_name("codemem")
    if script.exists():
        command, args = str(script), ["mcp", "--project", str(project)]
    else:
        command, args = sys.executable, ["-m", "query_server.cli", "mcp", "--project", str(project)]
    return StdioServerParameters(command=command, args=args, env=env, cwd=str(REPO_ROOT))


async def _stdio(mode: str, project: Path, state: Path, workload: Workload, samples: Samples) -> dict[str, Any]:
    """Time the workload through a fresh ``codemem mcp`` subprocess; returns its start-up facts."""
    import anyio
    from mcp import Client

    from query_server.ownership import OWNER_FILE

    client = Client(_server_params(project, state), mode="legacy" if mode == "stdio-legacy" else "auto")
    started = time.perf_counter()
    async with client:
        connected = time.perf_counter() - started
        first = await client.call_tool("index_status", {})
        first_s = time.perf_counter() - started
        deadline = time.monotonic() + 120
        status = first.structured_content
        while status["search_mode"] != "hybrid" or status["dense_coverage"] < 1.0:  # start-up index of changes
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stdio server did not settle: {status['search_mode']}")
            await anyio.sleep(0.2)
            status = (await client.call_tool("index_status", {})).structured_content
        owner = json.loads((state / OWNER_FILE).read_text())
        if owner["pid"] == os.getpid():
            raise RuntimeError("this process still owns the stores; the stdio server would forward over loopback")
        await _run({mode: _mcp_caller(client)}, workload, samples)
        after = (await client.call_tool("index_status", {})).structured_content["search_mode"]
    return {"connect_s": round(connected, 3), "first_call_s": round(first_s, 3), "search_mode_after": after}


def _stats(samples: list[float]) -> dict[str, float]:
    p50, p95 = _percentiles(samples)
    return {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "mean_ms": round(statistics.fmean(samples) * 1000, 3),
            "n": len(samples)}


def _print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"MCP overhead over the direct service call ({result['calls']} calls per tool and path)")
    for column in ("tool", "path", "p50 ms", "p95 ms", "mean ms", "+p50 ms", "+mean ms", "x p50"):
        table.add_column(column, justify="left" if column in ("tool", "path") else "right")
    for tool in TOOLS:
        for mode in ("direct", *IN_PROCESS[1:], *STDIO):
            stats = result["latency"][mode][tool]
            over = result["overhead"].get(mode, {}).get(tool)
            table.add_row(
                tool if mode == "direct" else "", mode, f"{stats['p50_ms']:.2f}", f"{stats['p95_ms']:.2f}",
                f"{stats['mean_ms']:.2f}",
                f"{over['p50_ms']:+.2f}" if over else "", f"{over['mean_ms']:+.2f}" if over else "",
                f"{over['ratio_p50']:.2f}" if over else "",
                end_section=mode == STDIO[-1],
            )
    console = Console()
    if console.width < 100:
        console = Console(width=100)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """Index the corpus, time the tools through every path, print and save the overhead."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool and path (default 200)")
    parser.add_argument("--project", default=None, help="index this tree instead of a copy of codemem's packages")
    args = parser.parse_args(argv)

    import anyio
    from mcp import Client

    from query_server.mcp_server import build_mcp_server
    from query_server.ownership import ProjectHandle
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    rng = random.Random(7)
    samples: Samples = {}
    with tempfile.TemporaryDirectory(prefix="codemem-mcp-overhead-") as tmp:
        work = Path(tmp)
        root = _corpus(work, args.project)
        state = work / "state"
        settings = Settings(project_root=root, state_dir=state)

        handle = ProjectHandle(settings)
        try:
            if not handle.is_owner:
                raise RuntimeError(f"another process owns {state}; the direct path must own the stores")
            started = time.perf_counter()
            report = handle.call("index", IndexInput(embed=True))
            index_s = time.perf_counter() - started
            service = handle.backend
            status = service.index_status()
            print(f"indexed {report['files_indexed']} files, {status.symbols} symbols in {index_s:.1f} s "
                  f"({status.search_mode}); {root}", file=sys.stderr)
            workload = _workload(service, root, args.calls, rng)
            sizes = {tool: int(statistics.median(len(_direct(service, tool, a).model_dump_json()) for a in workload[tool]))
                     for tool in TOOLS}

            async def in_process() -> None:
                async with Client(build_mcp_server(handle)) as memory, \
                        Client(build_mcp_server(handle), mode="legacy") as legacy:
                    callers = {"direct": _direct_caller(service), "memory": _mcp_caller(memory),
                               "memory-legacy": _mcp_caller(legacy)}
                    await _run(callers, workload, samples)

            anyio.run(in_process)
        finally:
            handle.close()
        direct_first = samples.pop("direct")

        servers = {}
        for mode in STDIO:
            servers[mode] = anyio.run(_stdio, mode, root, state, workload, samples)
            print(f"{mode}: connected in {servers[mode]['connect_s']} s, first answer after "
                  f"{servers[mode]['first_call_s']} s", file=sys.stderr)

        handle = ProjectHandle(settings)
        try:
            if not handle.is_owner:
                raise RuntimeError("a stdio server still owns the stores")
            service = handle.backend
            anyio.run(_run, {"direct": _direct_caller(service)}, workload, samples)
        finally:
            handle.close()
        direct_second = samples.pop("direct")
        samples["direct"] = {tool: direct_first[tool] + direct_second[tool] for tool in TOOLS}

    latency = {mode: {tool: _stats(values) for tool, values in by_tool.items()} for mode, by_tool in samples.items()}
    overhead: dict[str, dict[str, dict[str, float]]] = {}
    for mode in (*IN_PROCESS[1:], *STDIO):
        for tool in TOOLS:
            base, other = latency["direct"][tool], latency[mode][tool]
            overhead.setdefault(mode, {})[tool] = {
                "p50_ms": round(other["p50_ms"] - base["p50_ms"], 3),
                "mean_ms": round(other["mean_ms"] - base["mean_ms"], 3),
                "ratio_p50": round(other["p50_ms"] / base["p50_ms"], 3),
            }
    result = {
        "calls": args.calls,
        "corpus": {"root": str(root) if args.project else "copy of " + ", ".join(SOURCE_PACKAGES),
                   "files": status.files, "symbols": status.symbols, "index_s": round(index_s, 1),
                   "search_mode": status.search_mode},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "mcp": version("mcp"),
                    "platform": platform.platform()},
        "direct_response_bytes_median": sizes,
        "direct_passes_p50_ms": {tool: [round(_percentiles(p)[0], 3) for p in (direct_first[tool], direct_second[tool])]
                                 for tool in TOOLS},
        "stdio_servers": servers,
        "latency": latency,
        "overhead": overhead,
    }
    _print_table(result)
    print("result size (direct, JSON, median): " + ", ".join(f"{t} {n:,} B" for t, n in result["direct_response_bytes_median"].items()))
    print("direct p50 in the two passes (drift check): "
          + ", ".join(f"{t} {a:.2f} / {b:.2f} ms" for t, (a, b) in result["direct_passes_p50_ms"].items()))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

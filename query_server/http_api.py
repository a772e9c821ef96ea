"""HTTP face of the service: ``POST /tools/<name>``, ``/health``, ``/metrics``, OpenAPI at ``/docs``,
and the MCP streamable-HTTP endpoint mounted at ``/mcp``.

Every route is a few lines over ``ProjectHandle.call``. Binding beyond loopback requires a
bearer token (``CODEMEM_API_TOKEN``); when a token is set, every route but ``/health`` checks it.
"""

from __future__ import annotations

import contextlib
import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import structlog
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from resources.schemas.tools import (
    CodeSearchInput,
    CodeSearchResult,
    FindDuplicatesInput,
    FindDuplicatesResult,
    GetRelatedInput,
    GetRelatedResult,
    GetSymbolInput,
    GetSymbolResult,
    GraphQueryInput,
    GraphQueryResult,
    HealthResult,
    IndexDirectoryInput,
    IndexFileInput,
    IndexFileResult,
    IndexStatusResult,
    JobState,
    JobStatusInput,
    ReindexInput,
)

from .mcp_server import build_mcp_server
from .ownership import ProjectHandle
from .service import ToolError

log = structlog.get_logger("codemem.http")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class Metrics:
    """Prometheus metrics of one HTTP server (its own registry, so tests can build several)."""

    def __init__(self) -> None:
        """Create the metric families."""
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "codemem_tool_seconds", "Tool call latency", ["tool"], registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
        )
        self.calls = Counter("codemem_tool_calls_total", "Tool calls by outcome", ["tool", "status"], registry=self.registry)
        self.symbols = Gauge("codemem_indexed_symbols", "Symbols in the code index", registry=self.registry)
        self.files = Gauge("codemem_indexed_files", "Files in the code index", registry=self.registry)
        self.dense = Gauge("codemem_dense_coverage", "Share of symbols with a dense vector", registry=self.registry)
        self.cache_hit_rate = Gauge("codemem_embedding_cache_hit_rate", "Embedding cache hit rate", registry=self.registry)


def build_http_app(handle: ProjectHandle, *, token: str | None = None) -> FastAPI:
    """The FastAPI application for the project behind ``handle``.

    Args:
        handle: The project (its own stores or the owner's).
        token: Bearer token required on every route but ``/health`` (None: no check).
    """
    metrics = Metrics()
    mcp = build_mcp_server(handle)
    mcp_app = mcp.streamable_http_app(streamable_http_path="/mcp")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):
            yield

    app = FastAPI(
        title="codemem",
        description="Code search and code graph for Claude Code. The same tools as the MCP server.",
        version="0.1.0",
        lifespan=lifespan,
    )

    @app.middleware("http")
    async def authorize(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if token is not None and request.url.path not in {"/health"}:
            given = request.headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return JSONResponse(
                    {"error": "missing or wrong bearer token — send 'Authorization: Bearer $CODEMEM_API_TOKEN'"},
                    status_code=401,
                )
        return await call_next(request)

    async def run_tool(tool: str, method: str, *args: Any) -> Any:
        started = time.perf_counter()
        status = "ok"
        try:
            return await anyio.to_thread.run_sync(lambda: handle.call(method, *args))
        except ToolError as exc:
            status = "error"
            return JSONResponse({"error": str(exc)}, status_code=400)
        except Exception as exc:  # noqa: BLE001 - the boundary: log it, answer with what to do
            status = "error"
            log.exception("tool failed", tool=tool)
            return JSONResponse(
                {"error": f"{type(exc).__name__}: {exc} — see the server log; GET /health shows each store"},
                status_code=500,
            )
        finally:
            elapsed = time.perf_counter() - started
            metrics.latency.labels(tool).observe(elapsed)
            metrics.calls.labels(tool, status).inc()
            log.info("tool call", tool=tool, status=status, duration_ms=round(elapsed * 1000, 2))

    @app.post("/tools/code_search", response_model=CodeSearchResult, tags=["tools"])
    async def code_search(request: CodeSearchInput) -> Any:
        """Find functions, methods and classes by meaning and by name (see the MCP tool)."""
        return await run_tool("code_search", "code_search", request)

    @app.post("/tools/graph_query", response_model=GraphQueryResult, tags=["tools"])
    async def graph_query(request: GraphQueryInput) -> Any:
        """Read-only Cypher over the code graph; writes are refused."""
        return await run_tool("graph_query", "graph_query", request)

    @app.post("/tools/find_duplicates", response_model=FindDuplicatesResult, tags=["tools"])
    async def find_duplicates(request: FindDuplicatesInput) -> Any:
        """Existing functions similar to the given code, with a reuse recommendation."""
        return await run_tool("find_duplicates", "find_duplicates", request)

    @app.post("/tools/get_symbol", response_model=GetSymbolResult, tags=["tools"])
    async def get_symbol(request: GetSymbolInput) -> Any:
        """A symbol with its callers and callees (and its code with include_code)."""
        return await run_tool("get_symbol", "get_symbol", request)

    @app.post("/tools/get_related", response_model=GetRelatedResult, tags=["tools"])
    async def get_related(request: GetRelatedInput) -> Any:
        """The graph neighbourhood of a symbol or file, nearest first."""
        return await run_tool("get_related", "get_related", request)

    @app.post("/tools/index_status", response_model=IndexStatusResult, tags=["tools"])
    async def index_status(request: JobStatusInput | None = None) -> Any:
        """Overall index statistics; with ``job_id`` also that background job's state."""
        status = await run_tool("index_status", "index_status")
        if request is None or request.job_id is None or isinstance(status, JSONResponse):
            return status
        job = await run_tool("index_status", "job_status", request)
        if isinstance(job, JSONResponse):
            return job
        status.job = job
        return status

    @app.post("/tools/index_file", response_model=IndexFileResult, tags=["tools"])
    async def index_file(request: IndexFileInput) -> Any:
        """Index one file now and report what it extracted."""
        return await run_tool("index_file", "index_file", request)

    @app.post("/tools/index_directory", response_model=JobState, tags=["tools"])
    async def index_directory(request: IndexDirectoryInput) -> Any:
        """Start indexing a directory in the background; poll index_status with the job id."""
        return await run_tool("index_directory", "index_directory", request)

    @app.post("/tools/reindex", response_model=JobState, tags=["tools"])
    async def reindex(request: ReindexInput) -> Any:
        """Start a re-index (changed or full) in the background."""
        return await run_tool("reindex", "reindex", request)

    @app.get("/health", response_model=HealthResult)
    async def health() -> Any:
        """Each dependency's state; HTTP 503 when one does not work."""
        try:
            result: HealthResult = await anyio.to_thread.run_sync(lambda: handle.call("health"))
        except Exception as exc:  # noqa: BLE001 - health must answer
            return JSONResponse({"status": "error", "components": {"service": {"status": "error", "error": str(exc)}}}, status_code=503)
        return JSONResponse(result.model_dump(mode="json"), status_code=503 if result.status == "error" else 200)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus metrics: tool latency and outcomes, index size, cache hit rate."""
        try:
            status: IndexStatusResult = await anyio.to_thread.run_sync(lambda: handle.call("index_status"))
            metrics.symbols.set(status.symbols)
            metrics.files.set(status.files)
            metrics.dense.set(status.dense_coverage)
            health_result: HealthResult = await anyio.to_thread.run_sync(lambda: handle.call("health"))
            rate = health_result.components.get("embedder", {}).get("cache_hit_rate")
            if rate is not None:
                metrics.cache_hit_rate.set(rate)
        except Exception:  # noqa: BLE001 - the counters still answer
            log.exception("metrics refresh failed")
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.mount("/", mcp_app)  # last: serves /mcp (the routes above match first)
    return app

"""HTTP face of the service: ``POST /tools/<name>``, ``/health``, ``/metrics``, OpenAPI at ``/docs``,
and the MCP streamable-HTTP endpoint mounted at ``/mcp``.

The tool routes are generated from the registry (``query_server.tools``): each tool with a
route takes its input model as the body and answers with its result model; errors are mapped by
``query_server.errors``. Binding beyond loopback requires a
bearer token (``CODEMEM_API_TOKEN``); when a token is set, every route but ``/health`` checks it.
In front of every route, ``RequestGuard`` refuses a foreign Host (421) or Origin (403) and a body
over ``CODEMEM_MAX_REQUEST_BYTES`` (413); ``/mcp`` checks the same allow-list (``request_guard``).
"""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Optional

import anyio
import structlog
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from resources.schemas.memory import MemoryStatisticsResult
from resources.schemas.tools import HealthResult, IndexStatusResult

from query_server.errors import http_error
from query_server.mcp_server import build_mcp_server
from query_server.ownership import ProjectHandle
from query_server.request_guard import LOOPBACK_NAMES, RequestGuard, transport_security
from query_server.telemetry import Metrics, ToolTelemetry
from query_server.tools import TOOLS, Tool, routed_tools

log = structlog.get_logger("codemem.http")

LOOPBACK = frozenset(LOOPBACK_NAMES)
"""Bind addresses that need no bearer token (``codemem serve --host``)."""
KEEP_ALIVE_S = 95
"""Seconds an idle HTTP connection stays open. Longer than any common client keeps one (httpx,
which the MCP SDK uses, 5 s; Node 4-5 s; Go 90 s), so the client always closes first: equal
timeouts race, and a request sent on a connection the server is closing fails with a dropped
stream (``httpx.ReadError``, seen under load in ``bench.load``)."""


def build_http_app(handle: ProjectHandle, *, token: str | None = None, bind_host: str | None = None) -> FastAPI:
    """The FastAPI application for the project behind ``handle``.

    Args:
        handle: The project (its own stores or the owner's); its settings give the Host/Origin
            allow-list and the body limit.
        token: Bearer token required on every route but ``/health`` (None: no check).
        bind_host: The address the server listens on; allowed as a Host unless it is a wildcard.
    """
    metrics = Metrics()
    telemetry = ToolTelemetry(metrics)
    mcp = build_mcp_server(handle, telemetry)
    security = transport_security(handle.settings, bind_host)
    max_body = handle.settings.max_request_bytes
    mcp_app = mcp.streamable_http_app(  # with shared stores, replicas behind one port: any of them answers any request
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=max_body,
        stateless_http=handle.settings.shared_stores,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):
            yield

    _quiet_request_alias_warning()
    app = FastAPI(
        title="codemem",
        description="Code search, code graph and project memory for Claude Code. The same tools as the MCP server.",
        version="0.1.0",
        lifespan=lifespan,
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}" for e in exc.errors()
        )
        detail = [{k: v for k, v in e.items() if k not in ("input", "ctx", "url")} for e in exc.errors()]
        return JSONResponse({"error": f"invalid input — {problems}", "detail": jsonable_encoder(detail)}, status_code=422)

    @app.exception_handler(RecursionError)
    async def too_deep(request: Request, exc: RecursionError) -> JSONResponse:
        # JSON nested ~1000 deep overflows the decoder or the validator before any tool runs
        return JSONResponse(
            {"error": "invalid input — the JSON body is nested too deeply; flatten it (metadata values are best kept "
                      "a few levels deep)"},
            status_code=422,
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

    async def run_tool(tool: Tool, *args: Any) -> Any:
        try:
            with telemetry.call(tool.name, args[0] if args else None, face="http"):
                return await anyio.to_thread.run_sync(lambda: handle.call(tool, *args))
        except Exception as exc:  # noqa: BLE001 - the boundary: the mapper logs a bug and says what to do
            status, body, headers = http_error(tool.name, exc)
            return JSONResponse(body, status_code=status, headers=headers)

    def add_tool_route(tool: Tool) -> None:
        if tool.input is None:
            async def route() -> Any:
                return await run_tool(tool)
        else:
            async def route(request: Any = None) -> Any:
                return await run_tool(tool, *([request] if request is not None else []))

            route.__annotations__["request"] = Optional[tool.input] if tool.optional_input else tool.input  # noqa: UP045
            if not tool.optional_input:
                route.__defaults__ = None
        route.__doc__ = tool.route
        route.__name__ = tool.name
        app.post(f"/tools/{tool.name}", response_model=tool.result, tags=["tools"])(route)

    for tool in routed_tools():
        add_tool_route(tool)

    @app.post("/tools/{name}", include_in_schema=False)
    async def unknown_tool(name: str) -> JSONResponse:
        known = ", ".join(sorted(tool.name for tool in routed_tools()))
        return JSONResponse({"error": f"unknown tool {name!r} — the tools are: {known}"}, status_code=404)

    @app.get("/health", response_model=HealthResult)
    async def health() -> Any:
        """Each dependency's state; HTTP 503 when one does not work."""
        try:
            result: HealthResult = await anyio.to_thread.run_sync(lambda: handle.call(TOOLS["health"]))
        except Exception as exc:  # noqa: BLE001 - health must answer
            return JSONResponse({"status": "error", "components": {"service": {"status": "error", "error": str(exc)}}}, status_code=503)
        return JSONResponse(result.model_dump(mode="json"), status_code=503 if result.status == "error" else 200)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus metrics: tool latency and outcomes, index size, cache hit rate."""
        try:
            status: IndexStatusResult = await anyio.to_thread.run_sync(lambda: handle.call(TOOLS["index_status"]))
            metrics.symbols.set(status.symbols)
            metrics.files.set(status.files)
            metrics.dense.set(status.dense_coverage)
            health_result: HealthResult = await anyio.to_thread.run_sync(lambda: handle.call(TOOLS["health"]))
            rate = health_result.components.get("embedder", {}).get("cache_hit_rate")
            if rate is not None:
                metrics.cache_hit_rate.set(rate)
            stats: MemoryStatisticsResult = await anyio.to_thread.run_sync(lambda: handle.call(TOOLS["memory_statistics"]))
            for memory_type, counts in stats.memory_counts.items():
                metrics.memories.labels(memory_type, "active").set(counts.get("active", 0))
                metrics.memories.labels(memory_type, "deleted").set(counts.get("deleted", 0))
            metrics.outbox.set(stats.outbox.get("pending", 0))
        except Exception:  # noqa: BLE001 - the counters still answer
            log.exception("metrics refresh failed")
        return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.mount("/", mcp_app)  # last: serves /mcp (the routes above match first)
    app.add_middleware(RequestGuard, security=security, max_body_bytes=max_body)  # outermost: before auth
    return app


def _quiet_request_alias_warning() -> None:
    """FastAPI gives each route's body the alias ``request`` and silences pydantic's warning that
    the alias has no effect there, in the block where it builds the body's model; codemem's models
    are built on first use (``resources.schemas.base``), so that build, and the warning, come at a
    route's first request, outside that block. This filter keeps the same warning quiet then."""
    import warnings

    from pydantic.warnings import UnsupportedFieldAttributeWarning

    warnings.filterwarnings("ignore", message=r"The 'alias' attribute with value 'request'",
                            category=UnsupportedFieldAttributeWarning)

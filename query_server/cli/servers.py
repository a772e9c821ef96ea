"""The server commands: ``codemem mcp`` (stdio, what Claude Code launches) and ``codemem serve``
(HTTP). Their own module, light to import: ``codemem mcp`` starts loading the embedding model as
soon as it has its settings, before the rest of its imports (``query_server.warm_start``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click

from query_server.cli import common
from query_server.cli.common import configure_logging, main, open_handle, route_log_lines, settings_for, structure_log_lines


IMPORTS_WAIT_S = 10.0
"""How long ``codemem mcp`` waits for the stores' opening and the model's loading to finish their
imports before it imports the MCP SDK (past it, it goes on: a stuck opening must not stall it)."""
GRAPH_START_WAIT_S = 2.0
"""At the shutdown deadline, how long to wait for a graph server still starting (to stop it)."""


def hook_manifest(settings: Any, handle: Any) -> object | None:
    """What the hook relay reads of the index in server mode: the manifest in PostgreSQL that
    ``handle`` opened (none until then); None when the hooks read ``index.db``."""
    if not settings.shared_database_url():
        return None
    from resources.manifest import HookManifestReader

    return HookManifestReader(lambda: handle.backend.manifest if handle.is_owner else None)


def owned_graph_dir(handle: Any) -> Path | None:
    """The embedded graph's directory when this process owns the project's stores (None otherwise,
    or with a Neo4j graph)."""
    if not handle.is_owner:
        return None
    db_dir = getattr(handle.backend.graph, "db_dir", None)
    return Path(db_dir) if db_dir is not None else None


def stop_owned_graph(handle: Any) -> None:
    """The shutdown deadline's last resort: no graph start from now on (one in progress is waited
    for, the graph starting on first use), then the owned graph server is stopped."""
    from query_server.shutdown import stop_graph_server

    db_dir = owned_graph_dir(handle)
    settle = getattr(handle.backend.graph, "settle", None) if db_dir is not None else None
    if settle is not None:
        settle(GRAPH_START_WAIT_S)
    stop_graph_server(db_dir)


@main.command()
@click.option("--project", default=".", help="The repository to serve.")
def mcp(project: str) -> None:
    """Serve the MCP tools over stdio (what Claude Code launches from .mcp.json). The log goes to
    .codemem/logs/mcp.log; stderr carries errors only."""
    from query_server.import_phase import begin_import_phase

    begin_import_phase()  # (begun already when started as `codemem mcp`, not as `python -m query_server.cli mcp`)
    settings = settings_for(project)
    # configure_logging in two halves: what the model's loading logs goes to the file too, and
    # structlog's import waits until the model is loading
    level = route_log_lines("INFO", settings.resolved_state_dir() / "logs" / "mcp.log")
    from resources.embeddings.factory import preload_local_model

    preload_local_model(settings)  # loads beside the imports below: a first search finds it ready
    structure_log_lines(level)
    from resources.embeddings.local import LocalMiniLMEmbedder
    from query_server import ownership  # noqa: F401 - imported here, not by the opening thread
    from query_server.early_calls import serve_early_calls
    from query_server.hooks.relay_server import HookRelay
    from query_server.import_phase import end_import_phase
    from query_server.mcp_front import active_front
    from query_server.shutdown import Shutdown
    from query_server.telemetry import ToolTelemetry
    from query_server.warm_start import OpeningHandle, start_first_build, warm_up

    # the stores open (and the embedding model and the index warm up) in the background; a tool
    # call waits for what it needs (query_server.warm_start)
    handle = OpeningHandle(lambda: start_first_build(open_handle(project, settings)), warm=warm_up)
    shutdown = Shutdown()
    hooks = HookRelay(settings.resolved_state_dir(), settings.resolved_root(), hook_manifest(settings, handle))
    try:
        shutdown.on_deadline(lambda: stop_owned_graph(handle))
        shutdown.install()
        hooks.start()  # Claude Code's hooks are answered here while the session runs
        handle.start()
        telemetry = ToolTelemetry()
        front = active_front()
        if front is not None:  # the calls sent so far are answered before the MCP SDK loads
            front.on_early_close(shutdown.begin)  # stdin closed while the SDK loads: the same bounded close
            serve_early_calls(front, handle, telemetry, stop=shutdown.requested)
        if not shutdown.requested.is_set():
            # the MCP SDK last, in this thread, once the opening and the model's loading are done
            # importing (two threads importing at once can see a module half-initialized, or none;
            # warming and the index wait for the end of the phase); the calls sent meanwhile wait in
            # the front for the server
            handle.wait_opened(IMPORTS_WAIT_S)
            LocalMiniLMEmbedder.wait_for_preloads(IMPORTS_WAIT_S)
            from query_server.mcp_server import run_stdio

            end_import_phase()
            run_stdio(handle, stop=shutdown.requested, telemetry=telemetry,  # type: ignore[arg-type]
                      serving=front.release_early_calls if front is not None else None)
        shutdown.begin()  # the stream ended: the same bounded close
    finally:
        hooks.close()
        handle.close()
    shutdown.exit()


@main.command()
@click.option("--project", default=".", help="The repository to serve.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (loopback by default).")
@click.option("--port", default=8765, show_default=True)
def serve(project: str, host: str, port: int) -> None:
    """Serve HTTP: MCP at /mcp, POST /tools/<name>, /health, /metrics, /docs."""
    configure_logging("INFO")
    import uvicorn

    from query_server.hooks.relay_server import HookRelay
    from query_server.http_api import KEEP_ALIVE_S, LOOPBACK, build_http_app
    from query_server.import_phase import settle_heap
    from query_server.request_guard import WILDCARD_BINDS
    from query_server.shutdown import GRACEFUL_SHUTDOWN_S, Shutdown, serve_http

    settings = settings_for(project)
    token = settings.api_token.get_secret_value() if settings.api_token else None
    if host not in LOOPBACK and not token:
        raise click.ClickException(
            f"refusing to bind {host} without a bearer token — set CODEMEM_API_TOKEN, or keep the "
            "default 127.0.0.1"
        )
    shutdown = Shutdown()
    handle = open_handle(project)
    hooks = HookRelay(settings.resolved_state_dir(), settings.resolved_root(), hook_manifest(settings, handle))
    try:
        hooks.start()  # Claude Code's hooks are answered here while it serves
        if handle.is_owner:
            handle.backend.start_background_index()  # type: ignore[union-attr]
        app = build_http_app(handle, token=token, bind_host=host)
        settle_heap()  # the stores, the app and their modules: out of the collector's walks for good
        common.console.print(f"codemem on http://{host}:{port} — MCP at /mcp, API docs at /docs; Ctrl-C to stop")
        if host in WILDCARD_BINDS:
            common.console.print(
                "listening on every address: requests must name 127.0.0.1, localhost or a host in "
                "CODEMEM_ALLOWED_HOSTS (others get 421, DNS-rebinding protection)"
            )
        shutdown.on_deadline(lambda: stop_owned_graph(handle))
        # at the stop signal, beside uvicorn's graceful shutdown (~0.1 s): the hook relay and the
        # owner's loopback server stop polling, so that closing after it waits for neither
        shutdown.on_request(hooks.request_stop)
        shutdown.on_request(lambda: threading.Thread(target=handle.stop_serving, name="codemem-stop-serving",
                                                     daemon=True).start())
        shutdown.install()
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
        serve_http(config, shutdown)
    except KeyboardInterrupt:
        pass
    finally:
        hooks.close()
        handle.close()
    if shutdown.signum is not None:
        shutdown.exit()

"""The ``codemem`` command line: thin commands over the service (through the project's owner)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from pipelines.discovery import DiscoveryError, resolve_project_root
from resources.settings import Settings

from .service import ToolError

console = Console(stderr=True)
PHASES = {
    "discover": "Discovering files",
    "parse": "Parsing & writing",
    "resolve": "Resolving cross-file edges",
    "embed": "Computing dense vectors",
}


def _settings_for(project: str) -> Settings:
    try:
        root = resolve_project_root(Path(project))
    except DiscoveryError as exc:
        raise click.ClickException(str(exc)) from exc
    return Settings(project_root=root)


def _handle(project: str):  # noqa: ANN202 - lazy import keeps `codemem --help` fast
    from .ownership import ProjectHandle

    settings = _settings_for(project)
    try:
        return ProjectHandle(settings)
    except ToolError as exc:
        raise click.ClickException(str(exc)) from exc


def _configure_logging() -> None:
    import logging

    import structlog

    level = os.environ.get("CODEMEM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
    )


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """Turn SIGTERM into a normal exit so the stores close (the embedded graph server included)."""
    raise SystemExit(128 + signum)


@click.group()
@click.version_option(package_name="codemem")
def main() -> None:
    """codemem — long-term memory and codebase intelligence for Claude Code."""
    _configure_logging()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def print_summary(report: dict[str, Any]) -> None:
    """A human summary of an index run."""
    table = Table(title=f"codemem index — {report['root']}", show_header=False)
    table.add_row("files seen", str(report["files_seen"]))
    table.add_row("indexed (new or changed)", str(report["files_indexed"]))
    table.add_row("unchanged", str(report["files_unchanged"]))
    table.add_row("deleted from the index", str(report["files_deleted"]))
    table.add_row("skipped", str(len(report["skipped"])))
    table.add_row("failed", str(len(report["failed"])))
    table.add_row("files with syntax errors (indexed what parsed)", str(len(report["files_with_syntax_errors"])))
    table.add_row("symbols (written / total)", f"{report['symbols_written']} / {report['symbols_total']}")
    table.add_row("cross-file edges (+added / -removed / total)", f"+{report['edges_added']} / -{report['edges_removed']} / {report['edges_total']}")
    table.add_row("dense vectors", f"{report['dense_done']} / {report['dense_total']}")
    table.add_row("time", f"{report['seconds']:.2f} s")
    console.print(table)
    reasons: dict[str, int] = {}
    for item in report["skipped"]:
        reasons[item["reason"]] = reasons.get(item["reason"], 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        console.print(f"  skipped {count:>5} × {reason}")
    for note in report.get("notes", []):
        console.print(f"[yellow]  note: {note}[/yellow]")
    for item in report["failed"]:
        console.print(f"[red]  FAILED {item['path']}: {item['error']}[/red]")


@main.command()
@click.argument("path", default=".", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--no-embed", is_flag=True, help="Write sparse vectors and the graph only; dense vectors later.")
@click.option("--reembed", is_flag=True, help="Rebuild the whole index, vectors included (after a model change).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def index(path: str, no_embed: bool, reembed: bool, as_json: bool) -> None:
    """Index the repository at PATH (default: the current directory), incrementally."""
    from resources.schemas.tools import IndexInput

    handle = _handle(path)
    try:
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, transient=False, disable=as_json,
        ) as bar:
            tasks: dict[str, Any] = {}

            def on_progress(phase: str, done: int, total: int) -> None:
                if phase not in tasks:
                    tasks[phase] = bar.add_task(PHASES.get(phase, phase), total=total or None)
                bar.update(tasks[phase], completed=done, total=total or None)

            report = handle.call("index", IndexInput(embed=not no_embed, reembed=reembed), on_progress)
    except ToolError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        console.print("[yellow]interrupted — the index stays consistent; run `codemem index` again to finish[/yellow]")
        sys.exit(130)
    finally:
        handle.close()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_summary(report)
    if report["failed"]:
        names = ", ".join(item["path"] for item in report["failed"][:10])
        raise click.ClickException(f"{len(report['failed'])} file(s) failed: {names}")


@main.command()
@click.option("--project", default=".", help="The repository to serve.")
def mcp(project: str) -> None:
    """Serve the MCP tools over stdio (what Claude Code launches from .mcp.json)."""
    from .mcp_server import run_stdio

    handle = _handle(project)
    try:
        if handle.is_owner:
            handle.backend.start_background_index()  # type: ignore[union-attr]
        run_stdio(handle)
    finally:
        handle.close()


@main.command()
@click.option("--project", default=".", help="The repository to serve.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (loopback by default).")
@click.option("--port", default=8765, show_default=True)
def serve(project: str, host: str, port: int) -> None:
    """Serve HTTP: MCP at /mcp, POST /tools/<name>, /health, /metrics, /docs."""
    import uvicorn

    from .http_api import LOOPBACK, build_http_app

    settings = _settings_for(project)
    token = settings.api_token.get_secret_value() if settings.api_token else None
    if host not in LOOPBACK and not token:
        raise click.ClickException(
            f"refusing to bind {host} without a bearer token — set CODEMEM_API_TOKEN, or keep the "
            "default 127.0.0.1"
        )
    handle = _handle(project)
    try:
        if handle.is_owner:
            handle.backend.start_background_index()  # type: ignore[union-attr]
        app = build_http_app(handle, token=token)
        console.print(f"codemem on http://{host}:{port} — MCP at /mcp, API docs at /docs; Ctrl-C to stop")
        uvicorn.run(app, host=host, port=port, log_level="warning")
    except KeyboardInterrupt:
        pass
    finally:
        handle.close()


def _call(project: str, method: str, request: BaseModel | None = None) -> Any:
    """Run one service method for the project (through its owner) with CLI-friendly errors."""
    handle = _handle(project)
    try:
        return handle.call(method, *([request] if request is not None else []))
    except ToolError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        handle.close()


def _request(model: type[BaseModel], **fields: Any) -> BaseModel:
    """Build a tool input, turning validation errors into one clear line."""
    from resources.schemas.tools import describe_validation_error

    try:
        return model(**fields)
    except ValidationError as exc:
        raise click.ClickException(describe_validation_error(exc)) from exc


def _echo_json(result: BaseModel) -> None:
    click.echo(result.model_dump_json(indent=2))


@main.command()
@click.option("--project", default=".", help="The indexed repository.")
def health(project: str) -> None:
    """Show each dependency's state (exit 1 when one does not work)."""
    result = _call(project, "health")
    _echo_json(result)
    if result.status == "error":
        sys.exit(1)


@main.command()
@click.argument("query")
@click.option("--project", default=".", help="The indexed repository.")
@click.option("--language", default=None)
@click.option("--path-prefix", default=None)
@click.option("--kind", default=None)
@click.option("--limit", default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def search(query: str, project: str, language: str | None, path_prefix: str | None, kind: str | None, limit: int, as_json: bool) -> None:
    """Search the indexed code by meaning and words."""
    from resources.schemas.tools import CodeSearchInput

    request = _request(CodeSearchInput, query=query, language=language, path_prefix=path_prefix, kind=kind, limit=limit)
    result = _call(project, "code_search", request)
    if as_json:
        _echo_json(result)
        return
    console.print(f"[dim]{result.search_mode}[/dim]")
    for hit in result.results:
        stale = " [yellow](stale)[/yellow]" if hit.provenance.stale else ""
        console.print(f"[bold]{hit.score:.4f}[/bold] {hit.kind} [cyan]{hit.qualified_name}[/cyan] {hit.file_path}:{hit.start_line}{stale}")
        console.print(f"    {hit.signature}")


@main.command()
@click.option("--project", default=".", help="The indexed repository.")
def status(project: str) -> None:
    """Show how complete and current the index is."""
    _echo_json(_call(project, "index_status"))


@main.command(name="graph")
@click.argument("cypher")
@click.option("--project", default=".", help="The indexed repository.")
@click.option("--limit", default=100, show_default=True)
def graph_command(cypher: str, project: str, limit: int) -> None:
    """Run a read-only Cypher query over the code graph."""
    from resources.schemas.tools import GraphQueryInput

    _echo_json(_call(project, "graph_query", _request(GraphQueryInput, cypher=cypher, limit=limit)))


@main.command()
@click.argument("symbol")
@click.option("--project", default=".", help="The indexed repository.")
@click.option("--code", "include_code", is_flag=True, help="Also print the symbol's source.")
def symbol(symbol: str, project: str, include_code: bool) -> None:
    """Show a symbol (id or qualified name) with its callers and callees."""
    from resources.schemas.tools import GetSymbolInput

    _echo_json(_call(project, "get_symbol", _request(GetSymbolInput, symbol=symbol, include_code=include_code)))


@main.command()
@click.argument("entity")
@click.option("--project", default=".", help="The indexed repository.")
@click.option("--type", "types", multiple=True, help="Relationship type to follow (repeatable): CALLS, IMPORTS, EXTENDS, IMPLEMENTS, CONTAINS.")
@click.option("--direction", type=click.Choice(["outgoing", "incoming", "both"]), default="both", show_default=True)
@click.option("--depth", default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def related(entity: str, project: str, types: tuple[str, ...], direction: str, depth: int, as_json: bool) -> None:
    """Walk the code graph from a symbol or file (callers, callees, imports, bases)."""
    from resources.schemas.tools import GetRelatedInput

    request = _request(GetRelatedInput, entity_id=entity, relationship_types=list(types) or None, direction=direction, depth=depth)
    result = _call(project, "get_related", request)
    if as_json:
        _echo_json(result)
        return
    table = Table(title=f"related to {result.entity.get('qualified_name') or result.entity.get('file_path')}")
    for column in ("hops", "via", "kind", "name", "location"):
        table.add_column(column)
    for row in result.results:
        table.add_row(str(row.distance), " > ".join(row.via), row.kind or row.label, row.qualified_name or row.name or "", f"{row.file_path}:{row.start_line or ''}")
    console.print(table)


@main.command()
@click.argument("file", type=click.File("r"))
@click.option("--project", default=".", help="The indexed repository.")
@click.option("--language", default=None)
@click.option("--threshold", type=float, default=None, help="0.70-0.95 (default 0.85).")
def duplicates(file, project: str, language: str | None, threshold: float | None) -> None:  # noqa: ANN001
    """Check code (a file, or - for stdin) against the functions the repository already has."""
    from resources.schemas.tools import FindDuplicatesInput

    request = _request(FindDuplicatesInput, code=file.read(), language=language, threshold=threshold)
    _echo_json(_call(project, "find_duplicates", request))


if __name__ == "__main__":
    main()

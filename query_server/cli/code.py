"""The code commands: ``codemem index``, ``mcp``, ``serve``, ``health``, ``search``, ``status``,
``query``, ``symbol``, ``related``, ``duplicates`` and ``hook`` — thin over the code tools (through
the project's owner)."""

from __future__ import annotations

import copy
import gc
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, NoReturn

import click
from rich.console import RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from resources.schemas.tools import (
    CodeSearchInput,
    FindDuplicatesInput,
    GetRelatedInput,
    GetSymbolInput,
    GraphQueryInput,
    IndexInput,
)
from resources.settings import Settings

from query_server.cli.common import (
    PHASES,
    InputError,
    cell,
    console,
    failure,
    field_help,
    key_values,
    location,
    main,
    make_input,
    open_handle,
    parse_params,
    query_options,
    result_table,
    settings_for,
    show,
)
from query_server.cli.state_files import describe_broken_state
from query_server.paging import ToolError


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True}, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def hook(args: tuple[str, ...]) -> None:
    """Run a Claude Code hook: EVENT (SessionStart, PostToolUse, PreToolUse, PreCompact, SessionEnd)
    with the event's JSON on stdin; `codemem hook --help` for details. Claude Code calls it (see
    `codemem init`); the `codemem` script answers it without loading this CLI."""
    from query_server.hooks.dispatch import main as hook_main

    sys.exit(hook_main(list(args)))


def _names(paths: list[str], shown: int = 5) -> str:
    """The first ``shown`` paths, and how many more (``--json`` lists them all)."""
    more = f" and {len(paths) - shown} more (--json lists all)" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def print_summary(report: dict[str, Any]) -> None:
    """A human summary of an index run."""
    table = Table(title=f"codemem index — {report['root']}", show_header=False)
    table.add_row("files seen", str(report["files_seen"]))
    table.add_row("indexed (new or changed)", str(report["files_indexed"]))
    table.add_row("unchanged", str(report["files_unchanged"]))
    table.add_row("deleted from the index", str(report["files_deleted"]))
    table.add_row("skipped", str(len(report["skipped"])))
    table.add_row("failed", str(len(report["failed"])))
    table.add_row("vanished during the run", str(len(report.get("vanished", []))))
    table.add_row("files with syntax errors (indexed what parsed)", str(len(report["files_with_syntax_errors"])))
    table.add_row("symbols (written / total)", f"{report['symbols_written']} / {report['symbols_total']}")
    table.add_row("cross-file edges (+added / -removed / total)", f"+{report['edges_added']} / -{report['edges_removed']} / {report['edges_total']}")
    table.add_row("dense vectors", f"{report['dense_done']} / {report['dense_total']}")
    design = report.get("design")
    if design and design.get("chunks_dense_pending"):
        table.add_row("doc chunks searched by words only", f"{design['chunks_dense_pending']} (dense vectors: the server computes them, or `codemem index`)")
    if design:
        table.add_row(
            "design layer",
            f"{design.get('documents_changed', 0)}/{design.get('documents_seen', 0)} documents read: "
            f"{design.get('requirements', 0)} requirements, {design.get('designs', 0)} designs, {design.get('chunks_written', 0)} doc chunks; "
            + ("links, patterns, components and anchors unchanged (no code, requirement or anchored memory changed)"
               if design.get("derivation_skipped") else
               f"{design.get('requirement_links', 0)} requirement links, {design.get('patterns', 0)} patterns, "
               f"{design.get('components', 0)} components; {design.get('anchors_stale', 0)} stale anchored memories"),
        )
    table.add_row("time", f"{report['seconds']:.2f} s")
    console.print(table)
    reasons: dict[str, list[str]] = {}
    for item in report["skipped"]:
        reasons.setdefault(item["reason"], []).append(item["path"])
    for reason, paths in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        console.print(f"  skipped {len(paths):>5} × {reason}: {_names(paths)}", markup=False)
    if report.get("vanished"):
        console.print(f"  vanished {len(report['vanished']):>4} × listed, then deleted before they were read: "
                      f"{_names(report['vanished'])}", markup=False)
    for note in report.get("notes", []):
        console.print(f"[yellow]  note: {note}[/yellow]")
    for item in report["failed"]:
        console.print(f"[red]  FAILED {item['path']}: {item['error']}[/red]")


@main.command()
@click.argument("path", default=".", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--no-embed", is_flag=True, help="Write sparse vectors and the graph only; dense vectors later.")
@click.option("--reembed", is_flag=True, help=field_help(IndexInput, "reembed"))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
@click.option("--repair", is_flag=True, help="Drop stray entries from the stores and re-index every file from disk.")
@click.option("--plain", is_flag=True, help="Run the indexing functions directly instead of as a Dagster run.")
def index(path: str, no_embed: bool, reembed: bool, as_json: bool, repair: bool, plain: bool) -> None:
    """Index the repository at PATH (default: the current directory), incrementally.

    When this process owns the project's stores, the run is the Dagster asset run the UI shows
    (`codemem ui`); when a codemem server owns them, that server indexes.
    """
    from pipelines.discovery import one_listing

    with one_listing():  # the tree listed once for the command (the checks for nothing to do and the run)
        _index(path, no_embed, reembed, as_json, repair, plain)


def _index(path: str, no_embed: bool, reembed: bool, as_json: bool, repair: bool, plain: bool) -> None:
    """``codemem index``'s work (see ``index``)."""
    settings = settings_for(path)
    if not (plain or reembed or repair):
        from query_server.code.unchanged import answer_unchanged

        try:
            unchanged = answer_unchanged(settings, embed=not no_embed)  # nothing to do: no store opened
        except KeyboardInterrupt:
            _interrupted()
        except Exception:  # noqa: BLE001 - a damaged state file, say: the full run below names it
            unchanged = None
        if unchanged is not None:
            _read_ahead(settings)
            _show_report(unchanged, as_json)
            return
    from query_server.tools import TOOLS

    handle = open_handle(path, settings)
    gc.freeze()  # the modules and the open stores: out of the collector's walks while the run allocates
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

            if handle.is_owner and not plain and not reembed:
                report = handle.call(TOOLS["index"], IndexInput(embed=not no_embed), on_progress, through_dagster=True, repair=repair)
            elif repair:
                raise InputError("--repair needs the stores: stop the codemem server of this project, then run it again")
            else:
                report = handle.call(TOOLS["index"], IndexInput(embed=not no_embed, reembed=reembed), on_progress)
    except ToolError as exc:
        raise InputError(str(exc)) from exc
    except KeyboardInterrupt:
        _interrupted()
    except click.ClickException:
        raise
    except Exception as exc:  # a corrupted state file names itself; anything else is one line, no traceback
        broken = describe_broken_state(handle.state_dir)
        if broken:
            raise click.ClickException(f"indexing failed: {broken}") from exc
        raise failure("indexing", exc) from exc
    finally:
        handle.close()
    if handle.is_owner:  # no server up
        _read_ahead(settings)
    _show_report(report, as_json)


def _interrupted() -> NoReturn:
    console.print("[yellow]interrupted — the index stays consistent; run `codemem index` again to finish[/yellow]")
    sys.exit(130)


def _read_ahead(settings: Settings) -> None:
    """Read the stores for the next session's SessionStart hook (this process owned them)."""
    from query_server.hooks.session_start import read_ahead

    read_ahead(str(settings.resolved_root()), str(settings.resolved_state_dir()))


def _show_report(report: dict[str, Any], as_json: bool) -> None:
    """An index run's report, as JSON or as its summary; a failed file fails the command."""
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        print_summary(report)
    if report["failed"]:
        from pipelines.index_context import failure_line

        raise click.ClickException(failure_line(report["failed"]))


@main.command()
@query_options
def health(project: str, as_json: bool) -> None:
    """Show each dependency's state (exit 1 when one does not work)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        colour = {"ok": "green", "degraded": "yellow", "error": "red"}
        table = result_table("component", "status", "details", title=f"codemem health: [{colour[result.status]}]{result.status}[/]")
        for name, state in result.components.items():
            details = ", ".join(f"{k}={v}" for k, v in state.items() if k not in ("status", "ok"))
            table.add_row(name, Text(state.get("status", "?"), style=colour.get(state.get("status"), "")), Text(details))
        yield table

    result = show(project, TOOLS["health"], None, as_json, render)
    if result.status == "error":
        sys.exit(1)


@main.command()
@click.argument("query")
@query_options
@click.option("--language", default=None, help=field_help(CodeSearchInput, "language"))
@click.option("--path-prefix", default=None, help=field_help(CodeSearchInput, "path_prefix"))
@click.option("--kind", default=None, help="Only this kind: function, method, class, ...")
@click.option("--limit", default=10, show_default=True)
@click.option("--cursor", default=None, help=field_help(CodeSearchInput, "cursor", "See --json."))
@click.option("--full", is_flag=True, help="Whole docstrings and 30-line snippets in --json (default: summaries).")
def search(query: str, project: str, as_json: bool, language: str | None, path_prefix: str | None, kind: str | None, limit: int, cursor: str | None, full: bool) -> None:
    """Search the indexed code by meaning and words."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        table = result_table("score", "kind", "name", "location", "signature", title=Text(f"search: {query}"), caption=Text(result.search_mode + (" — more with --cursor (see --json)" if result.next_cursor else "")))
        for hit in result.results:
            where = location(hit.file_path, hit.start_line)
            if hit.provenance.stale:
                where.append(" (stale)", style="yellow")
            table.add_row(f"{hit.score:.4f}", hit.kind, Text(hit.qualified_name), where, Text(hit.signature))
        yield table if result.results else Text(f"no results ({result.search_mode})")

    request = make_input(CodeSearchInput, query=query, language=language, path_prefix=path_prefix, kind=kind, limit=limit, cursor=cursor, detail="full" if full else "summary")
    show(project, TOOLS["code_search"], request, as_json, render)


@main.command()
@query_options
def status(project: str, as_json: bool) -> None:
    """Show how complete and current the index is."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        last = result.last_index
        rows = [
            ("project", result.project_root),
            ("files", result.files),
            ("symbols", result.symbols),
            ("cross-file edges", result.resolved_edges),
            ("dense vectors", f"{result.dense_vectors} ({result.dense_coverage:.0%})"),
            ("search mode", result.search_mode),
            ("embedder", result.embedder),
            ("vector store", result.vector_store),
            ("graph store", result.graph_store),
            ("graph", ", ".join(f"{k} {v}" for k, v in result.graph_counts.items())),
            ("last index run", (
                f"{last.get('files_indexed', 0)} indexed, {last.get('files_unchanged', 0)} unchanged, "
                f"{len(last.get('failed', []))} failed in {last.get('seconds', 0):.2f} s" if last else "never"
            )),
        ]
        yield key_values("codemem status", rows)

    show(project, TOOLS["index_status"], None, as_json, render)


@main.command(name="query")
@click.argument("cypher")
@query_options
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="A query parameter $KEY (repeatable); VALUE is JSON when it parses, else a string.")
@click.option("--limit", default=100, show_default=True, help=field_help(GraphQueryInput, "limit"))
def query_command(cypher: str, project: str, as_json: bool, params: tuple[str, ...], limit: int) -> None:
    """Run a read-only Cypher query over the code graph (labels File, Module, Class, Function)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        if not result.results:
            yield Text("no rows")
            return
        caption = f"{len(result.results)} row(s)" + (f" — truncated (raise --limit, now {limit})" if result.truncated else "")
        table = result_table(*result.columns, caption=caption)
        for row in result.results:
            table.add_row(*(cell(row.get(column)) for column in result.columns))
        yield table

    request = make_input(GraphQueryInput, cypher=cypher, parameters=parse_params(params) or None, limit=limit)
    show(project, TOOLS["graph_query"], request, as_json, render)


graph_command = copy.copy(query_command)
graph_command.hidden = True
main.add_command(graph_command, name="graph")  # the earlier name of `query`, kept for scripts


@main.command()
@click.argument("symbol")
@query_options
@click.option("--code", "include_code", is_flag=True, help=field_help(GetSymbolInput, "include_code"))
def symbol(symbol: str, project: str, as_json: bool, include_code: bool) -> None:
    """Show a symbol (id or qualified name) with its callers and callees."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        hit = result.symbol
        where = location(hit.file_path, hit.start_line)
        if hit.provenance.stale:
            where.append(" (stale: changed since indexed)", style="yellow")
        yield key_values(f"{hit.kind} {hit.qualified_name}", [
            ("signature", hit.signature), ("location", where), ("language", hit.language),
            ("docstring", hit.docstring), ("id", hit.id),
        ])
        for role, rows in (("callers", result.callers), ("callees", result.callees)):
            if not rows:
                yield Text(f"no {role} in the index")
                continue
            table = result_table("name", "location", "call line", title=f"{role} ({len(rows)})")
            for row in rows:
                table.add_row(cell(row.get("qualified_name")), location(row.get("file_path"), row.get("start_line")), cell(row.get("line_number")))
            yield table
        if result.code is not None:
            yield Text(result.code, no_wrap=True, overflow="ignore")

    show(project, TOOLS["get_symbol"], make_input(GetSymbolInput, symbol=symbol, include_code=include_code), as_json, render)


@main.command()
@click.argument("entity")
@query_options
@click.option("--type", "types", multiple=True, help=field_help(GetRelatedInput, "relationship_types", "Repeatable."))
@click.option("--direction", type=click.Choice(["outgoing", "incoming", "both"]), default="both", show_default=True)
@click.option("--depth", default=1, show_default=True, help=field_help(GetRelatedInput, "depth"))
@click.option("--limit", default=50, show_default=True)
def related(entity: str, project: str, as_json: bool, types: tuple[str, ...], direction: str, depth: int, limit: int) -> None:
    """Walk the code graph from a symbol or file (callers, callees, imports, bases)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        start = result.entity.get("qualified_name") or result.entity.get("file_path")
        if not result.results:
            yield Text(f"nothing related to {start} ({direction}, depth {depth})")
            return
        table = result_table("hops", "via", "kind", "name", "location", title=Text(f"related to {start}"), caption="truncated — raise --limit" if result.truncated else None)
        for row in result.results:
            table.add_row(str(row.distance), " > ".join(row.via), row.kind or row.label, Text(row.qualified_name or row.name or ""), location(row.file_path, row.start_line))
        yield table

    request = make_input(GetRelatedInput, entity_id=entity, relationship_types=[t.upper() for t in types] or None, direction=direction, depth=depth, limit=limit)
    show(project, TOOLS["get_related"], request, as_json, render)


@main.command()
@click.argument("file", type=click.File("r", encoding="utf-8"), required=False)
@query_options
@click.option("--code", default=None, help="The code to check, instead of FILE.")
@click.option("--language", default=None, help="Its language (default: from FILE's extension, else python).")
@click.option("--threshold", type=float, default=None, help=field_help(FindDuplicatesInput, "threshold"))
@click.option("--limit", default=10, show_default=True)
def duplicates(file: IO[str] | None, project: str, as_json: bool, code: str | None, language: str | None, threshold: float | None, limit: int) -> None:
    """Check code (FILE, - for stdin, or --code) against the functions the repository already has."""
    from pipelines.parsing import EXTENSIONS

    from query_server.tools import TOOLS

    if (file is None) == (code is None):
        raise InputError("give the code to check as FILE, - (stdin) or --code TEXT (exactly one of them)")
    if file is not None:
        code = file.read()
        if language is None:
            language = EXTENSIONS.get(Path(file.name).suffix.lower())

    def render(result: Any) -> Iterable[RenderableType]:
        if not result.duplicates:
            yield Text(f"no existing function above the threshold ({result.threshold:.2f})")
            return
        table = result_table("similarity", "location", "signature", "recommendation", title=f"{result.duplicate_count} existing function(s) at or above {result.threshold:.2f}")
        for hit in result.duplicates:
            table.add_row(f"{hit.similarity:.4f}", location(hit.file_path, hit.start_line), Text(hit.signature), Text(hit.recommendation))
        yield table

    request = make_input(FindDuplicatesInput, code=code, language=language, threshold=threshold, limit=limit)
    show(project, TOOLS["find_duplicates"], request, as_json, render)

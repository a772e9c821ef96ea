"""``codemem eval``: recall@10 and MRR of code search on the user's own repository, against BM25.

See ``query_server.search_eval``: docstrings become the queries and are stripped from a temporary
copy, which is indexed with the project's settings; the project's own index is never touched.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

import query_server.cli.common as common
from query_server.cli.common import PHASES, InputError, failure, main, settings_for

EVAL_PHASES = {
    "strip": "Mining queries, stripping docstrings",
    **{phase: f"{label} (stripped copy)" for phase, label in PHASES.items()},
    "search": "Searching with codemem",
    "bm25": "Ranking with BM25",
}


def _figures(m: dict[str, Any]) -> tuple[str, str, str]:
    return f"{m['r1']:.3f}", f"{m['r10']:.3f}", f"{m['mrr']:.3f}"


def render_report(report: dict[str, Any]) -> list[Any]:
    """The report as rich renderables: the metrics table, then what was measured."""
    table = Table(title=f"codemem eval — {report['project']}", title_justify="left")
    for column in ("method", "queries", "R@1", "R@10", f"MRR@{report['cutoff']}"):
        table.add_column(column, justify="left" if column == "method" else "right")
    table.add_row("codemem", str(report["codemem"]["queries"]), *_figures(report["codemem"]), style="bold")
    table.add_row("BM25", str(report["bm25"]["queries"]), *_figures(report["bm25"]))
    ratio = report["mrr_ratio"]
    ratio_text = f"codemem MRR / BM25 MRR = {ratio:.2f}×" if ratio is not None else "codemem MRR / BM25 MRR: n/a (BM25 found nothing)"
    info = report["codemem_info"]
    sampled = (f"{report['queries']} of {report['queries_available']} queries (seed {report['seed']})"
               if report["queries"] < report["queries_available"] else f"{report['queries']} queries")
    lines = [
        Text(ratio_text, style="bold"),
        Text(f"{sampled} from {report['documented_functions']} documented of {report['functions']} functions "
             f"in {report['files']} files; docstrings hidden from both methods"),
        Text(f"index of the stripped copy: {info['symbols']} symbols, dense vectors {info['dense_vectors']}, "
             f"{info['index_seconds']:.1f} s; {info['embedder']}"),
        Text(f"search: {', '.join(info['search_modes'])}, {info['search_ms_per_query']} ms per query; "
             f"answers indexed as symbols: {info['gold_indexed']}"),
    ]
    if report["files_left_out"]:
        lines.append(Text(f"{len(report['files_left_out'])} file(s) left out (could not be stripped): "
                          + ", ".join(item["path"] for item in report["files_left_out"][:5]), style="yellow"))
    if any(not mode.startswith("hybrid") for mode in info["search_modes"]):
        lines.append(Text("note: search did not run in hybrid mode (dense vectors off or unavailable)", style="yellow"))
    return [table, *lines]


@main.command(name="eval")
@click.option("--project", default=".", show_default=True, help="The repository to evaluate.")
@click.option("--max-queries", default=200, show_default=True, type=click.IntRange(min=1),
              help="At most this many queries (a fixed-seed sample when the project has more).")
@click.option("--json", "as_json", is_flag=True, help="Print the exact figures as JSON on stdout.")
def eval_command(project: str, max_queries: int, as_json: bool) -> None:
    """Measure code search on this repository: its docstrings are the queries, hidden from the index.

    The indexable files are copied with every docstring stripped into a temporary directory,
    indexed there with the project's settings (the project's own index is not touched), and
    each docstring's first paragraph is searched for its function. Reports R@1, R@10 and
    MRR@10 of codemem and of BM25 over the same stripped functions, measured in the same run.
    """
    from query_server.search_eval import NotEnoughDocumented, evaluate_project

    settings = settings_for(project)
    try:
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=common.console, transient=False, disable=as_json,
        ) as bar:
            tasks: dict[str, Any] = {}

            def on_progress(phase: str, done: int, total: int) -> None:
                if phase not in tasks:
                    tasks[phase] = bar.add_task(EVAL_PHASES.get(phase, phase), total=total or None)
                bar.update(tasks[phase], completed=done, total=total or None)

            report = evaluate_project(settings, max_queries=max_queries, progress=on_progress)
    except NotEnoughDocumented as exc:
        raise InputError(str(exc)) from exc
    except KeyboardInterrupt:
        common.console.print("[yellow]interrupted — the temporary copy was removed; the project's index is untouched[/yellow]")
        sys.exit(130)
    except click.ClickException:
        raise
    except Exception as exc:
        raise failure("evaluating", exc) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for renderable in render_report(report):
        common.out.print(renderable)

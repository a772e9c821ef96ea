"""``codemem notes …`` (git notes as a live memory store) and ``codemem review …`` (code review
findings on the reviewed commit): thin commands over the memory service (through the owner)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType
from rich.text import Text

from query_server.cli.common import (
    InputError,
    cell,
    field_help,
    key_values,
    main,
    make_input,
    query_options,
    result_table,
    show,
)
from resources.schemas.memory import MemoryUpdateInput
from resources.schemas.memory.notes import (
    NotesCaptureInput,
    NotesSyncInput,
    RecordReviewInput,
    ReviewFindingsInput,
)


def _errors(errors: list[dict[str, Any]]) -> Iterable[RenderableType]:
    for error in errors[:20]:
        where = error.get("memory_id") or error.get("note") or ""
        yield Text(f"{where}: {error['error']}" if where else error["error"], style="yellow")


@main.group()
def notes() -> None:
    """Git notes as a live memory store (refs/notes/cs/<namespace>; `codemem init --git-notes` turns it on)."""


@notes.command(name="sync")
@query_options
@click.option("--rebuild", is_flag=True, help=field_help(NotesSyncInput, "rebuild"))
def notes_sync(project: str, as_json: bool, rebuild: bool) -> None:
    """Merge fetched notes, import their memories (searchable at once), write the ledger's changes as notes.
    `codemem index` does the same after every run."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield key_values("git notes synced", [
            ("fetched refs merged", ", ".join(result.merged_refs) or "none"), ("memories imported", result.imported),
            ("memories updated", result.updated), ("notes written", result.notes_written),
            *((f"namespace {name}", count) for name, count in result.namespaces.items()),
        ])
        yield from _errors(result.errors)

    show(project, TOOLS["notes_sync"], make_input(NotesSyncInput, rebuild=rebuild), as_json, render)


@notes.command(name="capture")
@click.argument("commit", default="HEAD")
@query_options
@click.option("--since", default=None, help=field_help(NotesCaptureInput, "since"))
def notes_capture(commit: str, project: str, as_json: bool, since: str | None) -> None:
    """Attach the decisions recorded since COMMIT's parent to COMMIT (default HEAD) — what the post-commit hook does."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield Text(f"{len(result.captured)} decision(s) attached to {result.commit[:12]} ({result.note_ref})")
        yield from _errors(result.errors)

    show(project, TOOLS["notes_capture"], make_input(NotesCaptureInput, commit=commit, since=since), as_json, render)


@main.group()
def review() -> None:
    """Code review findings, stored on the reviewed commit (notes namespace cs/reviews)."""


@review.command(name="record")
@click.argument("findings_file", type=click.File("r", encoding="utf-8"), metavar="FILE")
@click.option("--commit", default="HEAD", show_default=True, help=field_help(RecordReviewInput, "commit"))
@click.option("--spec", default=None, help=field_help(RecordReviewInput, "spec"))
@query_options
def review_record(findings_file: Any, commit: str, spec: str | None, project: str, as_json: bool) -> None:
    """Store the findings in FILE (JSON: a list of {severity, category, summary, details, file, line}, or
    {"findings": [...]}; - for stdin) on the reviewed commit."""
    from query_server.tools import TOOLS

    try:
        data = json.load(findings_file)
    except ValueError as exc:
        raise InputError(f"{findings_file.name} is not JSON ({exc}) — pass a list of findings, each "
                         '{"severity": "high", "category": "security", "summary": "..."}') from exc
    findings = data.get("findings") if isinstance(data, dict) else data
    request = make_input(RecordReviewInput, commit=commit, findings=findings, spec=spec)

    def render(result: Any) -> Iterable[RenderableType]:
        yield Text(f"{result.summary} — stored on {result.commit[:12]}"
                   + (f" ({result.note_ref})" if result.note_written else " (git notes are off: `codemem init --git-notes`)"))

    show(project, TOOLS["record_review"], request, as_json, render)


@review.command(name="show")
@click.argument("commit", required=False)
@click.option("--status", type=click.Choice(["open", "resolved", "all"]), default="open", show_default=True)
@click.option("--limit", default=50, show_default=True)
@query_options
def review_show(commit: str | None, status: str, limit: int, project: str, as_json: bool) -> None:
    """The findings on COMMIT (all reviewed commits when omitted), most severe first — what to fix."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        if not result.results:
            yield Text(f"no {status if status != 'all' else ''} review findings".replace("  ", " "))
            return
        table = result_table("severity", "category", "finding", "where", "status", "commit", "id",
                             title=f"review findings ({result.total})")
        for f in result.results:
            where = f"{f.file}:{f.line}" if f.file and f.line else f.file
            table.add_row(f.severity, f.category, Text(f.summary), cell(where), f.status, (f.commit or "")[:12], f.id)
        yield table

    show(project, TOOLS["review_findings"], make_input(ReviewFindingsInput, commit=commit, status=status, limit=limit), as_json, render)


@review.command(name="resolve")
@click.argument("finding_id")
@click.argument("resolution")
@query_options
def review_resolve(finding_id: str, resolution: str, project: str, as_json: bool) -> None:
    """Mark a finding resolved, saying how (its note on the reviewed commit is rewritten)."""
    from query_server.tools import TOOLS

    request = make_input(MemoryUpdateInput, memory_id=finding_id, memory_type="session",
                         metadata={"status": "resolved", "resolution": resolution})
    show(project, TOOLS["memory_update"], request, as_json, lambda r: [Text(f"finding {r.memory_id} resolved (version {r.version})")])

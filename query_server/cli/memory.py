"""``codemem memory …``, ``normalize``, ``export``, ``import``, ``backup``, ``restore``, ``stats`` and
``rebuild-projections``: the memory commands, thin over the memory service (through the owner)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import click
from rich.console import RenderableType
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from resources.schemas.memory import (
    DEFAULT_NOTES_REF,
    MEMORY_SCOPES,
    MEMORY_TYPES,
    BackupInput,
    ExportMemoryInput,
    ImportMemoryInput,
    MemoryAddInput,
    MemoryContextInput,
    MemoryDeleteInput,
    MemoryExtractInput,
    MemoryGetInput,
    MemoryListInput,
    MemorySearchInput,
    NormalizeMemoryInput,
    NormalizeStatusInput,
    RestoreInput,
)

from query_server.cli.common import (
    InputError,
    call,
    cell,
    console,
    failure,
    field_help,
    key_values,
    main,
    make_input,
    open_handle,
    parse_params,
    query_options,
    result_table,
    ToolCall,
    show,
    tool_calls,
)
from query_server.paging import ToolError

TYPE_CHOICE = click.Choice([str(t) for t in MEMORY_TYPES], case_sensitive=False)
SCOPE_CHOICE = click.Choice(list(MEMORY_SCOPES), case_sensitive=False)
SCOPE_HELP = ("project (default: shared with the team through exports), local (personal, never shared), global (yours, in every "
              "project) or enterprise (your organisation's, when it turned that scope on).")


def _hits_table(title: str, hits: Any, *, scored: bool) -> RenderableType:
    if not hits:
        return Text("no memories")
    columns = (["score"] if scored else []) + ["type", "memory", "updated", "id"]
    table = result_table(*columns, title=Text(title))
    for hit in hits:
        name = hit.metadata.get("title") or hit.metadata.get("pattern_name") or hit.metadata.get("key")
        text = Text(f"{name}: " if name else "", style="bold")
        text.append(hit.content[:300] + ("…" if len(hit.content) > 300 else ""))
        if hit.provenance.stale:
            text.append(" (stale)", style="yellow")
        kind = hit.memory_type if hit.scope == "project" else f"{hit.memory_type} ({hit.scope})"
        cells = ([f"{hit.score:.3f}"] if scored else []) + [kind, text, hit.updated_at[:19], hit.id]
        table.add_row(*cells)
    return table


@main.group()
def memory() -> None:
    """Add, read, search, list and delete project memories."""


@memory.command(name="add")
@click.argument("memory_type", type=TYPE_CHOICE)
@click.argument("content")
@query_options
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="A metadata field (repeatable); VALUE is JSON when it parses.")
@click.option("--importance", type=float, default=None, help=field_help(MemoryAddInput, "importance_score"))
@click.option("--link", "links", multiple=True, metavar="TYPE=TARGET", help="A relationship, e.g. ADDRESSES=REQ-AUTH-001 (repeatable).")
@click.option("--scope", type=SCOPE_CHOICE, default=None,
              help=SCOPE_HELP + " Default: project; global for a user_preference whose metadata says scope=Global.")
def memory_add(memory_type: str, content: str, project: str, as_json: bool, meta: tuple[str, ...], importance: float | None, links: tuple[str, ...], scope: str | None) -> None:
    """Store a memory, e.g. `codemem memory add design "Use JWTs" --meta title="ADR-7" --meta design_type=ADR --meta status=Accepted`."""
    from query_server.tools import TOOLS

    relationships = [{"type": k, "target_id": v} for k, v in parse_params(links).items()]
    request = make_input(MemoryAddInput, memory_type=memory_type, content=content, metadata=parse_params(meta), relationships=relationships, importance_score=importance, scope=scope)

    def render(result: Any) -> Iterable[RenderableType]:
        yield key_values("memory stored", [("id", result.memory_id), ("type", result.memory_type), ("scope", result.scope), ("sync", result.sync_status)])
        if result.conflicts:
            table = result_table("kind", "similarity", "existing memory", "what to do", title="possible conflicts")
            for c in result.conflicts:
                table.add_row(c.kind, cell(c.similarity), Text(f"{c.memory_id}: {c.content_preview}"), Text(c.detail))
            yield table

    show(project, TOOLS["memory_add"], request, as_json, render)


@memory.command(name="get")
@click.argument("memory_id")
@click.option("--type", "memory_type", type=TYPE_CHOICE, required=True, help=field_help(MemoryGetInput, "memory_type"))
@query_options
@click.option("--relationships", is_flag=True, help=field_help(MemoryGetInput, "include_relationships"))
@click.option("--files", is_flag=True, help=field_help(MemoryGetInput, "include_files"))
def memory_get(memory_id: str, memory_type: str, project: str, as_json: bool, relationships: bool, files: bool) -> None:
    """Show one memory in full (with --files: the files it concerns, as they were at its commit)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        rows = [("id", result.id), ("type", result.memory_type), ("scope", result.scope), ("version", result.version),
                ("created", result.created_at), ("updated", result.updated_at), ("importance", result.importance_score),
                ("accessed", result.access_count), ("sync", result.sync_status)]
        if result.deleted:
            rows.append(("deleted", result.deleted_at))
        rows += [(f"metadata.{k}", v) for k, v in result.metadata.items()]
        yield key_values("memory", rows)
        yield Text(result.content)
        if result.relationships:
            table = result_table("type", "direction", "other end", "kind", title="relationships")
            for r in result.relationships:
                table.add_row(r.type, r.direction, Text(r.target_name or r.target_id), cell(r.target_label))
            yield table
        for item in result.files or ():
            yield Text(f"── {item.path} @ {item.commit[:12]}" + (" (cut)" if item.truncated else ""), style="bold")
            yield Text(item.content if item.content is not None else item.error or "", style="" if item.content is not None else "yellow")

    request = make_input(MemoryGetInput, memory_id=memory_id, memory_type=memory_type, include_relationships=relationships, include_files=files)
    show(project, TOOLS["memory_get"], request, as_json, render)


def _memory_start(result: Any, memory_id: str) -> dict[str, Any]:
    """The start of a ``get_related`` walk, which must be a memory."""
    if result.entity.get("kind") != "memory":
        raise click.ClickException(f"{memory_id} is not a memory id — memory search or memory list shows the ids")
    return result.entity


def _locate_memory(run: ToolCall, memory_id: str) -> dict[str, Any]:
    """The memory ``memory_id`` as ``get_related`` finds it: its id, type and title, in any scope."""
    from resources.schemas.tools import GetRelatedInput

    from query_server.tools import TOOLS

    return _memory_start(run(TOOLS["get_related"], make_input(GetRelatedInput, entity_id=memory_id, limit=1)), memory_id)


@memory.command(name="link")
@click.argument("source_id")
@click.argument("target")
@click.option("--type", "rel_type", default="RELATES_TO", show_default=True,
              help="The relationship: RELATES_TO, DEPENDS_ON, ADDRESSES, IMPLEMENTS_REQ, FOLLOWS_DESIGN, USES_PATTERN, TESTS …")
@query_options
def memory_link(source_id: str, target: str, rel_type: str, project: str, as_json: bool) -> None:
    """Link a memory to another memory, a requirement id or code (shown from both ends)."""
    from resources.schemas.memory import MemoryUpdateInput, RelationshipSpec

    from query_server.tools import TOOLS

    spec = make_input(RelationshipSpec, type=rel_type, target_id=target)
    with tool_calls(project) as run:
        start = _locate_memory(run, source_id)
        result = run(TOOLS["memory_update"], make_input(MemoryUpdateInput, memory_id=start["id"], memory_type=start["memory_type"],
                                                        relationships=[spec]))
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        click.echo(f"linked {result.memory_id} -[{spec.type}]-> {target} (version {result.version})")


@memory.command(name="edges")
@click.argument("memory_id")
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 5))
@query_options
def memory_edges(memory_id: str, depth: int, project: str, as_json: bool) -> None:
    """The memories and code linked to a memory, with the relationship of each (both directions)."""
    from resources.schemas.tools import GetRelatedInput

    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        if not result.results:
            yield Text(f"{memory_id} is linked to nothing (an orphan): memory link adds a link")
            return
        table = result_table("relationship", "direction", "hops", "kind", "other end", "id", title=Text(f"links of {result.entity.get('title')}"))
        for item in result.results:
            table.add_row(item.edge or "", item.edge_direction or "", str(item.distance), item.memory_type or item.node_kind or "",
                          Text(item.title or item.qualified_name or item.id), item.id)
        yield table

    show(project, TOOLS["get_related"], make_input(GetRelatedInput, entity_id=memory_id, depth=depth, limit=200), as_json, render)


def _linked_record(run: ToolCall, start: dict[str, Any]) -> Any:
    """The memory ``start`` (an id and a type) in full, with its relationships."""
    from query_server.tools import TOOLS

    return run(TOOLS["memory_get"], make_input(MemoryGetInput, memory_id=start["id"], memory_type=start["memory_type"],
                                               include_relationships=True))


def _linked_ids(record: Any) -> list[str]:
    return [r.target_id for r in record.relationships or ()]


@memory.command(name="quality")
@click.argument("memory_id")
@query_options
def memory_quality(memory_id: str, project: str, as_json: bool) -> None:
    """A memory's quality score (0-100: content, metadata, links, freshness) and how to raise it."""
    from query_server.memory.curation import quality

    with tool_calls(project) as run:
        record = _linked_record(run, _locate_memory(run, memory_id))
    score, advice = quality(str(record.memory_type), record.content, record.metadata, len(_linked_ids(record)), bool(record.stale_anchors))
    if as_json:
        click.echo(json.dumps({"memory_id": record.id, "memory_type": str(record.memory_type), "score": score, "advice": advice}, indent=2))
        return
    click.echo(f"{record.id} ({record.memory_type}): quality {score}/100")
    for line in advice:
        click.echo(f"  - {line}")


@memory.command(name="suggest-links")
@click.argument("memory_id", required=False)
@click.option("--limit", default=3, show_default=True, type=click.IntRange(1, 20), help="Suggestions per memory.")
@click.option("--scan", default=100, show_default=True, type=click.IntRange(1, 100),
              help="Without MEMORY_ID: the most recently updated memories checked for orphans.")
@query_options
def memory_suggest_links(memory_id: str | None, limit: int, scan: int, project: str, as_json: bool) -> None:
    """Links a memory should have (without MEMORY_ID: for each orphan among the recent memories),
    its nearest memories by content; `memory link` makes one."""
    from query_server.memory.curation import UNLINKED_TYPES, suggested_links
    from query_server.tools import TOOLS

    suggestions: list[dict[str, Any]] = []
    with tool_calls(project) as run:
        if memory_id:
            starts = [_locate_memory(run, memory_id)]
        else:
            page = run(TOOLS["memory_list"], make_input(MemoryListInput, limit=scan))
            starts = [{"id": hit.id, "memory_type": str(hit.memory_type)} for hit in page.results if hit.memory_type not in UNLINKED_TYPES]
        for start in starts:
            record = _linked_record(run, start)
            linked = _linked_ids(record)
            if linked and not memory_id:
                continue  # not an orphan
            hits = run(TOOLS["memory_search"], make_input(MemorySearchInput, query=record.content[:400], limit=limit + 5))
            suggestions += suggested_links(start, linked, hits.results, limit)
    if as_json:
        click.echo(json.dumps(suggestions, indent=2, ensure_ascii=False))
        return
    if not suggestions:
        click.echo("no link to suggest" + ("" if memory_id else ": no orphan among the recent memories, or nothing near them"))
    for item in suggestions:
        click.echo(f"{item['source_id']} -[{item['type']}]-> {item['target_id']} ({item['target_type']}: {item['target']})\n"
                   f"  codemem memory link {item['source_id']} {item['target_id']} --type {item['type']}")


@memory.command(name="graph")
@click.argument("memory_id")
@click.option("--depth", default=2, show_default=True, type=click.IntRange(1, 5))
@click.option("--project", default=".", help="The project.")
def memory_graph(memory_id: str, depth: int, project: str) -> None:
    """A memory and its neighbourhood as a Mermaid flowchart (paste it into Markdown)."""
    from resources.schemas.tools import GetRelatedInput

    from query_server.memory.graph_view import memory_graph as render_graph
    from query_server.tools import TOOLS

    result = call(project, TOOLS["get_related"], make_input(GetRelatedInput, entity_id=memory_id, depth=depth, limit=200))
    click.echo(render_graph(_memory_start(result, memory_id), result.results), nl=False)


@memory.command(name="search")
@click.argument("query")
@query_options
@click.option("--type", "types", multiple=True, type=TYPE_CHOICE, help=field_help(MemorySearchInput, "memory_types", "Repeatable."))
@click.option("--filter", "filters", multiple=True, metavar="KEY=VALUE", help="Exact match on a metadata field (repeatable).")
@click.option("--limit", default=10, show_default=True)
@click.option("--cursor", default=None, help=field_help(MemorySearchInput, "cursor", "See --json."))
@click.option("--scope", "scopes", multiple=True, type=SCOPE_CHOICE, help=field_help(MemorySearchInput, "scopes", "Repeatable."))
@click.option("--full", is_flag=True, help="Up to 4,000 characters per memory in --json (default: ~300-character summaries).")
def memory_search(query: str, project: str, as_json: bool, types: tuple[str, ...], filters: tuple[str, ...], limit: int, cursor: str | None, scopes: tuple[str, ...], full: bool) -> None:
    """Find memories by meaning (project, local, global and enterprise)."""
    from query_server.tools import TOOLS

    request = make_input(MemorySearchInput, query=query, memory_types=list(types) or None, metadata_filters=parse_params(filters) or None, limit=limit, cursor=cursor, scopes=list(scopes) or None, detail="full" if full else "summary")
    show(project, TOOLS["memory_search"], request, as_json, lambda r: [_hits_table(f"memories: {query} ({r.search_mode})", r.results, scored=True)])


@memory.command(name="list")
@query_options
@click.option("--type", "types", multiple=True, type=TYPE_CHOICE, help=field_help(MemoryListInput, "memory_types", "Repeatable."))
@click.option("--deleted", is_flag=True, help=field_help(MemoryListInput, "include_deleted"))
@click.option("--limit", default=20, show_default=True)
@click.option("--cursor", default=None)
@click.option("--scope", "scopes", multiple=True, type=SCOPE_CHOICE, help=field_help(MemoryListInput, "scopes", "Repeatable."))
def memory_list(project: str, as_json: bool, types: tuple[str, ...], deleted: bool, limit: int, cursor: str | None, scopes: tuple[str, ...]) -> None:
    """List memories of every scope, most recently updated first."""
    from query_server.tools import TOOLS

    request = make_input(MemoryListInput, memory_types=list(types) or None, include_deleted=deleted, limit=limit, cursor=cursor, scopes=list(scopes) or None)
    show(project, TOOLS["memory_list"], request, as_json, lambda r: [_hits_table("memories", r.results, scored=False)])


@memory.command(name="context")
@click.argument("topic")
@query_options
@click.option("--type", "types", multiple=True, type=TYPE_CHOICE, help=field_help(MemoryContextInput, "memory_types", "Repeatable."))
@click.option("--scope", "scopes", multiple=True, type=SCOPE_CHOICE, help=field_help(MemoryContextInput, "scopes", "Repeatable."))
@click.option("--max-tokens", default=4_000, show_default=True, help=field_help(MemoryContextInput, "max_tokens"))
def memory_context(topic: str, project: str, as_json: bool, types: tuple[str, ...], scopes: tuple[str, ...], max_tokens: int) -> None:
    """A topic's memories grouped by type, most relevant first, with token estimates (what /codemem:context shows)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        if not result.groups:
            yield Text(f"no memories about {topic!r} ({result.search_mode})")
            return
        for group in result.groups:
            table = result_table("score", "memory", "importance", "id", title=Text(f"{group.memory_type} — {group.count} memories, ≈ {group.tokens} tokens"))
            for entry in group.memories:
                text = Text(f"{entry.title}: " if entry.title else "", style="bold")
                text.append(entry.content)
                if entry.scope != "project":
                    text.append(f" ({entry.scope})", style="cyan")
                if entry.stale:
                    text.append(" (stale)", style="yellow")
                table.add_row(f"{entry.score:.3f}", text, f"{entry.importance_score:.2f}", entry.id)
            yield table
        yield Text(f"≈ {result.total_tokens} tokens in total (budget {result.max_tokens})" + (f"; {result.next}" if result.next else ""))

    request = make_input(MemoryContextInput, topic=topic, memory_types=list(types) or None, scopes=list(scopes) or None, max_tokens=max_tokens)
    show(project, TOOLS["memory_context"], request, as_json, render)


@memory.command(name="extract")
@click.argument("source_file", type=click.File("r", encoding="utf-8", errors="replace"), metavar="FILE")
@query_options
@click.option("--source", "source_kind", type=click.Choice(["auto", "transcript", "diff", "commit", "text"]), default="auto",
              show_default=True, help=field_help(MemoryExtractInput, "source"))
@click.option("--commit", "store", is_flag=True, help=field_help(MemoryExtractInput, "commit"))
@click.option("--min-confidence", type=float, default=None, help=field_help(MemoryExtractInput, "min_confidence"))
@click.option("--max", "max_candidates", type=int, default=None, help=field_help(MemoryExtractInput, "max_candidates"))
@click.option("--scope", type=SCOPE_CHOICE, default="project", show_default=True, help=SCOPE_HELP)
def memory_extract(source_file: Any, project: str, as_json: bool, source_kind: str, store: bool, min_confidence: float | None,
                   max_candidates: int | None, scope: str) -> None:
    """Propose typed memories from a transcript, a diff, a commit message or notes (FILE, or - for
    stdin), e.g. `git show HEAD | codemem memory extract -`; nothing is stored without --commit."""
    from query_server.tools import TOOLS

    optional = {"min_confidence": min_confidence, "max_candidates": max_candidates}
    request = make_input(MemoryExtractInput, text=source_file.read(), source=source_kind, commit=store, scope=scope,
                         **{k: v for k, v in optional.items() if v is not None})

    def render(result: Any) -> Iterable[RenderableType]:
        table = result_table("type", "confidence", "memory", "stored / duplicate of", title=f"candidates ({result.source})")
        for c in result.candidates:
            table.add_row(str(c.memory_type), cell(c.confidence), Text(c.title or c.content[:120]),
                          Text(c.stored_id or (f"duplicate of {c.duplicate_of}" if c.duplicate_of else "")))
        yield table
        yield Text(f"stored {result.stored}, duplicates skipped {result.skipped_duplicates}"
                   + (" (dry run: add --commit to store them)" if result.dry_run else ""))

    show(project, TOOLS["memory_extract"], request, as_json, render)


@memory.command(name="delete")
@click.argument("memory_id")
@click.option("--type", "memory_type", type=TYPE_CHOICE, required=True, help=field_help(MemoryDeleteInput, "memory_type"))
@query_options
@click.option("--hard", is_flag=True, help=field_help(MemoryDeleteInput, "hard_delete"))
def memory_delete(memory_id: str, memory_type: str, project: str, as_json: bool, hard: bool) -> None:
    """Delete a memory (soft by default)."""
    from query_server.tools import TOOLS

    request = make_input(MemoryDeleteInput, memory_id=memory_id, memory_type=memory_type, hard_delete=hard)
    show(project, TOOLS["memory_delete"], request, as_json, lambda r: [Text(
        f"{r.memory_id} {r.status}" + (f" (restorable until {r.retention_until})" if r.retention_until else "")
    )])


@main.command()
@query_options
def stats(project: str, as_json: bool) -> None:
    """Memory counts per type, sync state, stores and cache."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        table = result_table("type", "active", "deleted", title="memories")
        for memory_type, counts in result.memory_counts.items():
            table.add_row(memory_type, str(counts["active"]), str(counts["deleted"]))
        yield table
        yield key_values("sync", [*result.sync_status.items(), ("outbox", result.outbox.get("pending")),
                                   ("last error", result.outbox.get("last_error"))])
        yield key_values("cache", list(result.cache.items()))
        if set(result.scopes) != {"project"}:
            table = result_table("scope", "active", "deleted", "ledger", title="scopes")
            for name, scope in result.scopes.items():
                counts = scope.get("memory_counts", {}).values()
                table.add_row(name, str(sum(c["active"] for c in counts)), str(sum(c["deleted"] for c in counts)), Text(str(scope.get("ledger"))))
            yield table

    show(project, TOOLS["memory_statistics"], None, as_json, render)


@main.command()
@query_options
@click.option("--dry-run", is_flag=True, help=field_help(NormalizeMemoryInput, "dry_run"))
@click.option("--phase", "phases", multiple=True, help="Only this phase (repeatable): snapshot, deduplication, orphan_detection, embedding_refresh, cleanup, validation, swap.")
@click.option("--restore-links", "restore_links", metavar="ID", default=None, help=field_help(NormalizeMemoryInput, "restore_links"))
def normalize(project: str, as_json: bool, dry_run: bool, phases: tuple[str, ...], restore_links: str | None) -> None:
    """Deduplicate, clean up and rebuild the memory store (a job; progress until it ends)."""
    from query_server.tools import TOOLS

    request = make_input(NormalizeMemoryInput, phases=list(phases) or None, dry_run=dry_run, restore_links=restore_links)
    handle = open_handle(project)  # one handle for the whole job: without a server, this process owns the job
    try:
        job = handle.call(TOOLS["normalize_memory"], request)
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("normalizing", total=100)
            while job.status == "running":
                time.sleep(0.5)
                job = handle.call(TOOLS["normalize_status"], NormalizeStatusInput(job_id=job.job_id))
                bar.update(task, completed=job.percent, description=f"normalizing: {job.phase}")
    except ToolError as exc:
        raise InputError(str(exc)) from exc
    except Exception as exc:
        raise failure("normalize_memory", exc) from exc
    finally:
        handle.close()
    if as_json:
        click.echo(json.dumps(job.model_dump(mode="json"), indent=2))
    elif job.report and "links_restored" in job.report:
        console.print(key_values("links restored", [("restored", job.report["links_restored"]),
                                                    ("from", job.report["restored_from"])]))
    else:
        report = job.report or {}
        console.print(key_values(f"normalization {job.status}" + (" (dry run)" if job.dry_run else ""), [
            ("duplicates", f"{report.get('duplicates', 0)} in {report.get('duplicate_groups', 0)} groups"),
            ("orphan links", report.get("orphan_link_count", 0)),
            ("orphan links removed", (f"{report['orphan_links_removed']} (undo: codemem normalize --restore-links "
                                      f"{report['restore_links']})") if report.get("orphan_links_removed") else None),
            ("stale embeddings", report.get("embeddings_refreshed", 0)),
            ("expired soft-deletes", report.get("cleanup", 0)),
            ("applied", report.get("applied") or "nothing"),
            ("snapshot", report.get("snapshot_path")),
            ("errors", "; ".join(job.errors) or None),
        ]))
    if job.status == "failed":
        raise click.ClickException("normalization failed: " + "; ".join(job.errors) + " — nothing was applied")


def _one_format(markdown: str | None, git_notes: bool, other: str | None, other_name: str) -> str:
    chosen = [name for name, given in ((other_name, other), ("--markdown", markdown), ("--git-notes", git_notes)) if given]
    if len(chosen) > 1:
        raise InputError(f"pass one of {', '.join(chosen)}, not several")
    return "markdown" if markdown else "git_notes" if git_notes else "jsonl"


def _where(error: dict[str, Any]) -> str:
    if "file" in error:
        return str(error["file"])
    if "note" in error:
        return f"note on {str(error['note'])[:12]}"
    if "memory_id" in error:
        return f"memory {error['memory_id']}"
    return f"line {error.get('line')}"


@main.command(name="export")
@click.option("--project", default=".", show_default=True)
@click.option("--type", "types", multiple=True, type=TYPE_CHOICE, help=field_help(ExportMemoryInput, "memory_types", "Repeatable."))
@click.option("--output", default=None, help="File inside the project (default: JSONL on stdout).")
@click.option("--markdown", "markdown_dir", default=None, metavar="DIR", help="Write one Markdown file per memory (YAML front matter) to DIR/<type>/<slug>-<id>.md, inside the project.")
@click.option("--git-notes", "git_notes", is_flag=True, help="Attach session and design memories to commits as git notes (the commit in their metadata, else HEAD).")
@click.option("--ref", "notes_ref", default=DEFAULT_NOTES_REF, show_default=True, help=field_help(ExportMemoryInput, "notes_ref"))
@click.option("--deleted", is_flag=True, help=field_help(ExportMemoryInput, "include_deleted"))
@click.option("--scope", "scopes", multiple=True, type=SCOPE_CHOICE, help=field_help(ExportMemoryInput, "scopes", "Repeatable."))
@click.option("--overwrite", is_flag=True, help="Replace an existing --output file (or a file in the --markdown directory that is not an earlier export of its memory).")
def export_command(project: str, types: tuple[str, ...], output: str | None, markdown_dir: str | None, git_notes: bool, notes_ref: str, deleted: bool, scopes: tuple[str, ...], overwrite: bool) -> None:
    """Export memories as JSONL, as Markdown files (--markdown DIR) or as git notes (--git-notes)."""
    from query_server.tools import TOOLS

    fmt = _one_format(markdown_dir, git_notes, output, "--output")
    result = call(project, TOOLS["export_memory"], make_input(
        ExportMemoryInput, memory_types=list(types) or None, output_path=markdown_dir or output, include_deleted=deleted,
        format=fmt, notes_ref=notes_ref, scopes=list(scopes) or None, overwrite=overwrite,
    ))
    if result.data is not None:
        click.echo(result.data, nl=False)
    removed = ""
    if result.removed_count:
        removed = f" (removed {result.removed_count} " + ("stale files)" if fmt == "markdown" else "deleted memories from the notes)")
    console.print(f"exported {result.exported_count} memories" + (f" to {result.output_path}" if result.output_path else "") + removed)
    for error in result.errors[:20]:
        console.print(Text(f"{_where(error)}: {error['error']}", style="yellow"))


@main.command(name="import")
@click.argument("path", required=False)
@click.option("--markdown", "markdown_dir", default=None, metavar="DIR", help="Read the Markdown memory files under DIR (as `export --markdown` writes them).")
@click.option("--git-notes", "git_notes", is_flag=True, help="Read the memories in the git notes of --ref.")
@click.option("--ref", "notes_ref", default=DEFAULT_NOTES_REF, show_default=True, help=field_help(ImportMemoryInput, "notes_ref"))
@click.option("--on-conflict", type=click.Choice(["skip", "overwrite", "error"]), default="skip", show_default=True)
@click.option("--scope", type=SCOPE_CHOICE, default=None, help=field_help(ImportMemoryInput, "scope"))
@query_options
def import_command(path: str | None, markdown_dir: str | None, git_notes: bool, notes_ref: str, on_conflict: str, scope: str | None, project: str, as_json: bool) -> None:
    """Import memories from a JSONL file inside the project, Markdown files (--markdown DIR) or git notes (--git-notes)."""
    from query_server.tools import TOOLS

    fmt = _one_format(markdown_dir, git_notes, path, "PATH")
    if fmt == "jsonl" and not path:
        raise InputError("pass PATH (a JSONL file inside the project), --markdown DIR or --git-notes")
    request = make_input(ImportMemoryInput, input_path=markdown_dir or path, conflict_resolution=on_conflict, format=fmt, notes_ref=notes_ref, scope=scope)
    result = show(project, TOOLS["import_memory"], request, as_json, lambda r: [key_values("import", [
        ("imported", r.imported), ("skipped", r.skipped), ("overwritten", r.overwritten), ("errors", len(r.errors)),
    ])] + [Text(f"{_where(e)}: {e['error']}", style="red") for e in r.errors[:20]])
    if result.errors and on_conflict == "error":
        raise InputError(f"{len(result.errors)} {'line(s)' if fmt == 'jsonl' else 'memories'} refused — nothing was imported")


@main.command()
@click.argument("directory")
@query_options
def backup(directory: str, project: str, as_json: bool) -> None:
    """Write a consistent online backup of the memories (ledger + embedding cache) to DIRECTORY."""
    from query_server.tools import TOOLS

    show(project, TOOLS["backup"], make_input(BackupInput, path=directory), as_json, lambda r: [key_values(
        f"backup in {r.path}", [("memories", r.memories), *((name, f"{size} bytes") for name, size in r.files.items())]
    )])


@main.command()
@click.argument("directory")
@query_options
def restore(directory: str, project: str, as_json: bool) -> None:
    """Replace the memories with a backup's (the current ledger is kept) and rebuild the indexes."""
    from query_server.tools import TOOLS

    show(project, TOOLS["restore"], make_input(RestoreInput, path=directory), as_json, lambda r: [key_values("restored", [
        ("memories", r.restored_memories), ("previous ledger kept at", r.previous_ledger), ("projection", r.projection),
    ])])


@main.command(name="rebuild-projections")
@click.option("--project", default=".", show_default=True)
def rebuild_projections(project: str) -> None:
    """Rebuild the memory search collections and graph nodes from the ledger."""
    from query_server.tools import TOOLS

    result = call(project, TOOLS["rebuild_projections"])
    console.print(f"projected {result['projected']} memories" + (f"; failed: {result['last_error']}" if result.get("failed") else ""))
    if result.get("failed"):
        raise click.ClickException("some projections failed — they stay queued; `codemem stats` shows the outbox")

"""``codemem check``, ``validate-fix``, ``trace``, ``design-context``, ``impact``, ``record-tests``
and ``memory health``: the design-alignment commands, thin over the design service (through the
project's owner)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click
from rich.console import RenderableType
from rich.text import Text

from resources.schemas.design import (
    CheckConsistencyInput,
    DesignContextInput,
    ImpactOfChangeInput,
    RecordTestRunInput,
    TraceRequirementsInput,
    ValidateFixInput,
)

from query_server.cli.common import (
    InputError,
    field_help,
    key_values,
    location,
    main,
    make_input,
    query_options,
    result_table,
    show,
)
from query_server.cli.memory import memory


def _read_text(value: str | None, what: str) -> str | None:
    """A file's text, or stdin for '-'."""
    if value is None:
        return None
    if value == "-":
        return sys.stdin.read()
    path = Path(value)
    if not path.is_file():
        raise InputError(f"{what} not found: {value} — pass a file path, or '-' to read it from stdin")
    return path.read_text(encoding="utf-8", errors="replace")


@main.command(name="check")
@click.argument("component_id")
@query_options
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["Template", "Convention"]), help=field_help(CheckConsistencyInput, "pattern_types", "Repeatable."))
def check(component_id: str, project: str, as_json: bool, kinds: tuple[str, ...]) -> None:
    """Check a class, file, directory or component against its patterns (check_consistency)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        if result.note:
            yield Text(result.note)
        for pattern in result.matching_patterns:
            contract = "; ".join(m["signature"] or m["name"] for m in pattern.contract)
            yield Text(f"pattern: {pattern.pattern_name} ({pattern.implementations} implementations of {pattern.base_class}) — {contract}")
        if not result.potential_deviations:
            yield Text(f"consistent: no deviation in {len(result.checked_classes)} class(es), score {result.consistency_score:.2f}")
            return
        table = result_table("class", "deviation", "expected", "actual", "example", title=Text(f"{len(result.potential_deviations)} deviation(s), score {result.consistency_score:.2f}"))
        for d in result.potential_deviations:
            example = f"{d.example.name} ({d.example.file_path}:{d.example.start_line})" if d.example else ""
            table.add_row(location(d.file_path, d.line), Text(f"{d.kind}: {d.message}"), Text(d.expected), Text(d.actual), Text(example))
        yield table

    show(project, TOOLS["check_consistency"], make_input(CheckConsistencyInput, component_id=component_id, pattern_types=list(kinds) or None), as_json, render)


@main.command(name="validate-fix")
@click.argument("description")
@query_options
@click.option("--component", default=None, help=field_help(ValidateFixInput, "affected_component"))
@click.option("--diff", "diff_path", default=None, help="A unified diff of the fix (a file, or '-' for stdin).")
def validate_fix(description: str, project: str, as_json: bool, component: str | None, diff_path: str | None) -> None:
    """Check a proposed fix against the ADRs, designs and requirements (validate_fix); exit 1 on a conflict."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield key_values("validate_fix", [
            ("verdict", result.verdict), ("overall", f"{result.overall_alignment_score:.2f}"),
            ("design", f"{result.design_alignment_score:.2f}"), ("requirements", f"{result.requirements_alignment_score:.2f}"),
            ("recommendation", result.recommendation),
        ])
        if result.conflicts:
            table = result_table("source", "statement", "why", title=Text("conflicts"))
            for c in result.conflicts:
                table.add_row(Text(f"{c.source} ({c.source_document or c.memory_type})"), Text(c.statement), Text(c.reason or ""))
            yield table

    request = make_input(ValidateFixInput, fix_description=description, affected_component=component, diff=_read_text(diff_path, "diff"))
    result = show(project, TOOLS["validate_fix"], request, as_json, render)
    if result.verdict == "conflicts":
        raise SystemExit(1)


@main.command(name="trace")
@click.argument("requirement_id")
@query_options
def trace(requirement_id: str, project: str, as_json: bool) -> None:
    """A requirement's implementing code, tests (with latest results) and designs (trace_requirements)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        req = result.requirement
        yield Text(f"{req.get('requirement_id')}: {req.get('title') or req.get('note', '')} [{req.get('priority', '')}, {req.get('status', '')}]")
        table = result_table("role", "symbol", "location", "latest result")
        for role, items in (("implements", result.implementing_components), ("tests", result.verifying_tests)):
            for s in items:
                latest = (s.latest_result or {}).get("status", "")
                table.add_row(role, Text(s.qualified_name), location(s.file_path, s.start_line), Text(latest))
        for d in result.related_designs:
            table.add_row("design", Text(d.get("title") or ""), location(d.get("source_document"), None), "")
        yield table
        yield Text(", ".join(f"{k}: {v}" for k, v in result.coverage.items()))

    show(project, TOOLS["trace_requirements"], make_input(TraceRequirementsInput, requirement_id=requirement_id), as_json, render)


@main.command(name="design-context")
@query_options
@click.option("--component", default=None, help=field_help(DesignContextInput, "component_id"))
@click.option("--query", default=None, help=field_help(DesignContextInput, "query"))
@click.option("--limit", default=5, show_default=True)
def design_context(project: str, as_json: bool, component: str | None, query: str | None, limit: int) -> None:
    """Designs, requirements, patterns, components and docs for a component or a feature."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        table = result_table("group", "title", "source", "score", title=Text(f"design context (~{result.token_estimate} tokens)"))
        for group in ("designs", "requirements", "patterns", "components", "documents"):
            for item in getattr(result, group):
                table.add_row(group, Text(item.title + (" (stale)" if item.stale else "")), Text(item.source_document or ""), f"{item.score:.2f}")
        yield table

    show(project, TOOLS["get_design_context"], make_input(DesignContextInput, component_id=component, query=query, limit=limit), as_json, render)


@main.command(name="impact")
@click.argument("files", nargs=-1)
@query_options
@click.option("--diff", "diff_path", default=None, help="A unified diff (a file, or '-' for stdin: `git diff | codemem impact --diff -`).")
@click.option("--depth", default=2, show_default=True, help=field_help(ImpactOfChangeInput, "depth"))
def impact(files: tuple[str, ...], project: str, as_json: bool, diff_path: str | None, depth: int) -> None:
    """What a change affects: callers, tests, requirements, designs, patterns (impact_of_change)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield Text(result.summary)
        table = result_table("kind", "what", "where")
        for s in result.tests:
            table.add_row("test", Text(s["qualified_name"]), location(s["file_path"], s["start_line"]))
        for s in result.affected_callers[:30]:
            table.add_row("caller", Text(s.get("qualified_name") or ""), location(s.get("file_path"), s.get("start_line")))
        for r in result.requirements:
            table.add_row("requirement", Text(f"{r['requirement_id']} {r.get('title') or ''}"), "")
        for d in result.designs:
            table.add_row("design", Text(d.get("title") or ""), Text(d.get("source_document") or ""))
        for p in result.patterns:
            table.add_row("pattern", Text(f"{p['pattern_name']}: {p['why']}"), "")
        for m in result.anchored_memories:
            table.add_row("memory", Text(m["preview"]), Text(m["memory_id"]))
        yield table

    request = make_input(ImpactOfChangeInput, diff=_read_text(diff_path, "diff"), files=list(files) or None, depth=depth)
    show(project, TOOLS["impact_of_change"], request, as_json, render)


@main.command(name="record-tests")
@click.argument("report")
@query_options
@click.option("--commit", default=None, help=field_help(RecordTestRunInput, "commit"))
def record_tests(report: str, project: str, as_json: bool, commit: str | None) -> None:
    """Record a JUnit XML report (pytest --junitxml) as test history (record_test_run)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield Text(f"{result.tests} tests: {result.passed} passed, {result.failed} failed, {result.errors} errors, {result.skipped} skipped; "
                   f"{result.linked_to_code} linked to indexed tests, {result.memories_written} memories written")
        for f in result.failures:
            yield Text(f"  {f['status']}: {f['test']} — {f['message'].splitlines()[0] if f['message'] else ''}")
        if result.unmatched_tests:
            yield Text(f"  not in the index: {', '.join(result.unmatched_tests[:10])}")

    show(project, TOOLS["record_test_run"], make_input(RecordTestRunInput, junit_xml_path=report, commit=commit), as_json, render)


@memory.command(name="health")
@query_options
def memory_health(project: str, as_json: bool) -> None:
    """Stale, orphaned, broken-linked and duplicated memories (memory_health)."""
    from query_server.tools import TOOLS

    def render(result: Any) -> Iterable[RenderableType]:
        yield key_values(f"memory health: {result.status}", [
            ("memories", ", ".join(f"{k} {v}" for k, v in result.totals.items())),
            ("stale", len(result.stale)), ("links to code gone", len(result.orphans)), ("broken links", len(result.broken_links)),
            ("hubs", result.hubs), ("orphan memories", result.orphan_memory_count),
            ("duplicate groups", len(result.duplicates)), ("sync", result.sync),
        ])
        for line in result.recommendations:
            yield Text(f"- {line}")
        if result.orphan_memories:
            table = result_table("orphan", "type", "memory", "link it to", title="orphan memories")
            for item in result.orphan_memories:
                hubs = item.get("suggested_hubs") or []
                advice = "\n".join(f"{h['hub']} ({h['similarity']}): {h['command']}" for h in hubs) or item.get("suggestion", "")
                table.add_row(item["memory_id"], item["memory_type"], Text(item["preview"]), Text(advice))
            yield table

    show(project, TOOLS["memory_health"], None, as_json, render)

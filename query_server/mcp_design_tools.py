"""MCP face of the design-alignment tools: keep code consistent with its patterns, fixes
aligned with the ADRs and requirements, and requirements traced to code and tests.

Each tool is one line over the shared tool-call path of ``query_server.mcp_server``; the service
is ``query_server.design.service.DesignService``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from resources.schemas.design import (
    CheckConsistencyInput,
    CheckConsistencyResult,
    DesignContextInput,
    DesignContextResult,
    ImpactOfChangeInput,
    ImpactOfChangeResult,
    MemoryHealthResult,
    RecordTestRunInput,
    RecordTestRunResult,
    TraceRequirementsInput,
    TraceRequirementsResult,
    ValidateFixInput,
    ValidateFixResult,
)

COMPONENT_HELP = "A class name or qualified name, a repo-relative file or directory, or a component id (e.g. 'agents')."


def register_design_tools(server: MCPServer, call: Callable[..., Awaitable[Any]]) -> None:
    """Add the design-alignment tools to ``server``; ``call`` is the shared tool-call path."""

    @server.tool(name="check_consistency")
    async def check_consistency(
        component_id: Annotated[str, Field(description=COMPONENT_HELP)],
        pattern_types: Annotated[
            list[Literal["Template", "Convention"]] | None,
            Field(description="Template (methods and signatures of the base class contract), Convention (naming, location); default both."),
        ] = None,
    ) -> CheckConsistencyResult:
        """Check a class or component against the patterns of its family (e.g. twelve agents on one
        BaseAgent): missing or extra overrides, signature drift, naming and location deviations,
        each citing a conforming example, and a consistency score. Run it after writing or fixing
        a class that has siblings."""
        return await call("check_consistency", CheckConsistencyInput, component_id=component_id, pattern_types=pattern_types)

    @server.tool(name="validate_fix")
    async def validate_fix(
        fix_description: Annotated[str, Field(description="What the fix does, in words.")],
        affected_component: Annotated[str | None, Field(description=COMPONENT_HELP)] = None,
        diff: Annotated[str | None, Field(description="Optional unified diff of the fix.")] = None,
    ) -> ValidateFixResult:
        """Before applying a fix (especially to make a failing test pass), check it against the
        project's ADR decisions, designs and requirements: alignment scores, and each statement it
        conflicts with, quoted with its source. Revise the fix when verdict is 'conflicts'."""
        return await call("validate_fix", ValidateFixInput, fix_description=fix_description, affected_component=affected_component, diff=diff)

    @server.tool(name="get_design_context")
    async def get_design_context(
        component_id: Annotated[str | None, Field(description=COMPONENT_HELP + " One of component_id or query is required.")] = None,
        query: Annotated[str | None, Field(description="A feature or area in words.")] = None,
        limit: Annotated[int, Field(description="Items per group, 1-50.")] = 5,
    ) -> DesignContextResult:
        """The designs (ADRs), requirements, code patterns, components and document sections that
        govern a component or a feature, grouped, with a token estimate. Read it before changing
        unfamiliar code."""
        return await call("get_design_context", DesignContextInput, component_id=component_id, query=query, limit=limit)

    @server.tool(name="trace_requirements")
    async def trace_requirements(
        requirement_id: Annotated[str, Field(description="Requirement id, e.g. REQ-MEM-FN-001.")],
    ) -> TraceRequirementsResult:
        """A requirement with the code that implements it, the tests that verify it (and their latest
        results), the designs that address it, and coverage counts."""
        return await call("trace_requirements", TraceRequirementsInput, requirement_id=requirement_id)

    @server.tool(name="record_test_run")
    async def record_test_run(
        junit_xml_path: Annotated[str | None, Field(description="Repo-relative path of a JUnit XML report (pytest --junitxml).")] = None,
        junit_xml: Annotated[str | None, Field(description="The report's XML, when it is not a file.")] = None,
        commit: Annotated[str | None, Field(description="The commit the run tested.")] = None,
    ) -> RecordTestRunResult:
        """Record a test run (JUnit XML) as test history linked to the tests, the code and the
        requirements they verify; trace_requirements then shows the latest results."""
        return await call("record_test_run", RecordTestRunInput, junit_xml_path=junit_xml_path, junit_xml=junit_xml, commit=commit)

    @server.tool(name="impact_of_change")
    async def impact_of_change(
        diff: Annotated[str | None, Field(description="A unified diff (git diff output).")] = None,
        files: Annotated[list[str] | None, Field(description="Changed repo-relative files.")] = None,
        symbols: Annotated[list[str] | None, Field(description="Changed symbols (ids or qualified names).")] = None,
        depth: Annotated[int, Field(description="Caller hops, 1-4.")] = 2,
    ) -> ImpactOfChangeResult:
        """What a change affects before you commit it: the changed symbols, their callers, the tests
        to run, the requirements, designs and patterns involved, and memories anchored to them."""
        return await call("impact_of_change", ImpactOfChangeInput, diff=diff, files=files, symbols=symbols, depth=depth)

    @server.tool(name="memory_health")
    async def memory_health() -> MemoryHealthResult:
        """The memory store's health: memories whose anchored code changed (stale), links to code or
        memories that are gone, identical duplicates, projection sync, and what to do about each."""
        return await call("memory_health")

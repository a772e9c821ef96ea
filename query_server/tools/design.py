"""The design-alignment tools: keep code consistent with its patterns, fixes aligned with the ADRs
and requirements, and requirements traced to code and tests
(``query_server.design.service.DesignService``, the service's ``design`` part)."""

from __future__ import annotations

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

from query_server.tools.registry import KEYED, READ, Tool, describe, on_design

DESIGN_TOOLS: tuple[Tool, ...] = (
    Tool(
        "check_consistency", on_design("check_consistency"), CheckConsistencyInput, CheckConsistencyResult, READ,
        route="A class or component against its patterns: deviations and a score.",
        description=describe("""
            Check a class or component against the patterns of its family (e.g. twelve agents on one
            BaseAgent): missing or extra overrides, signature drift, naming and location deviations,
            each citing a conforming example, and a consistency score. Run it after writing or fixing
            a class that has siblings.
        """),
    ),
    Tool(
        "validate_fix", on_design("validate_fix"), ValidateFixInput, ValidateFixResult, READ,
        route="A proposed fix against the ADRs, designs and requirements.",
        description=describe("""
            Before applying a fix (especially to make a failing test pass), check it against the
            project's ADR decisions, designs and requirements: alignment scores, and each statement it
            conflicts with, quoted with its source. Revise the fix when verdict is 'conflicts'.
        """),
    ),
    Tool(
        "get_design_context", on_design("get_design_context"), DesignContextInput, DesignContextResult, READ,
        route="Designs, requirements, patterns and docs for a component or feature.",
        description=describe("""
            The designs (ADRs), requirements, code patterns, components and document sections that
            govern a component or a feature, grouped, with a token estimate. Read it before changing
            unfamiliar code.
        """),
    ),
    Tool(
        "trace_requirements", on_design("trace_requirements"), TraceRequirementsInput, TraceRequirementsResult, READ,
        route="A requirement's implementing code, tests (with results) and designs.",
        description=describe("""
            A requirement with the code that implements it, the tests that verify it (and their latest
            results), the designs that address it, and coverage counts.
        """),
    ),
    Tool(
        "record_test_run", on_design("record_test_run"), RecordTestRunInput, RecordTestRunResult, KEYED,
        route="Record a JUnit XML report as test history.",
        description=describe("""
            Record a test run (JUnit XML) as test history linked to the tests, the code and the
            requirements they verify; trace_requirements then shows the latest results.
        """),
    ),
    Tool(
        "impact_of_change", on_design("impact_of_change"), ImpactOfChangeInput, ImpactOfChangeResult, READ,
        route="What a diff or file list affects: callers, tests, requirements, designs.",
        description=describe("""
            What a change affects before you commit it: the changed symbols, their callers, the tests
            to run, the requirements, designs and patterns involved, and memories anchored to them.
        """),
    ),
    Tool(
        "memory_health", on_design("memory_health"), None, MemoryHealthResult, READ,
        route="Stale, orphaned, broken and duplicated memories.",
        description=describe("""
            The memory store's health: memories whose anchored code changed (stale), links to code or
            memories that are gone, orphan memories (no hub reaches them; hubs are memories with
            metadata role=hub) with the hub each should join, identical duplicates, projection sync,
            and what to do about each.
        """),
    ),
)

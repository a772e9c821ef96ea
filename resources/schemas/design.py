"""Inputs and results of the design-alignment tools: check_consistency, validate_fix,
get_design_context, trace_requirements, record_test_run, impact_of_change, memory_health."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from resources.schemas.base import Schema
from resources.schemas.limits import MAX_DIFF_CHARS, MAX_DOCUMENT_CHARS, ToolInput

PatternKind = Literal["Template", "Convention"]
COMPONENT_HELP = "A class name or qualified name, a repo-relative file or directory, or a component id (e.g. 'agents')."
"""What names a component, for the fields that take one."""


class CheckConsistencyInput(ToolInput):
    """Check a component (class, file, directory or component id) against its patterns."""

    component_id: str = Field(min_length=1, max_length=500, description=COMPONENT_HELP)
    pattern_types: list[PatternKind] | None = Field(default=None, description="Which checks: 'Template' (methods and signatures of the base class contract) and/or 'Convention' (naming, location); default both.")


class PatternExample(Schema):
    """A conforming implementation the deviation is compared with."""

    name: str
    file_path: str
    start_line: int
    signature: str | None = None


class Deviation(Schema):
    """One way a class departs from its pattern."""

    kind: Literal["missing_override", "signature_drift", "extra_public_method", "naming", "location"]
    pattern_type: PatternKind
    class_name: str
    file_path: str
    line: int
    member: str | None = None
    expected: str
    actual: str
    message: str
    example: PatternExample | None = Field(default=None, description="The pattern's example implementation of the same member or convention.")


class PatternMatch(Schema):
    """A pattern a checked class follows (or should)."""

    pattern_id: str | None = Field(description="The code_pattern memory's id (None until the pipeline has recorded it).")
    pattern_name: str
    base_class: str
    base_file: str
    implementations: int
    contract: list[dict[str, Any]]
    naming: dict[str, str] | None = None


class CheckConsistencyResult(Schema):
    """Patterns the component follows, its deviations, and a score (1 = fully consistent)."""

    component_id: str
    checked_classes: list[str]
    matching_patterns: list[PatternMatch]
    potential_deviations: list[Deviation]
    checks: int = Field(description="How many rules were checked.")
    consistency_score: float = Field(description="1 - deviations / checks (1.0 when nothing deviates).")
    note: str | None = None


class ValidateFixInput(ToolInput):
    """A proposed fix, checked against the designs (ADRs) and requirements that govern it."""

    fix_description: str = Field(min_length=1, max_length=20_000, description="What the fix does, in words.")
    affected_component: str | None = Field(default=None, max_length=500, description="The component being fixed. " + COMPONENT_HELP)
    diff: str | None = Field(default=None, max_length=200_000, description="Optional unified diff of the fix; added and removed lines are checked too.")


class AlignmentStatement(Schema):
    """A design or requirement statement the fix was checked against."""

    memory_id: str
    memory_type: Literal["design", "requirements", "code_pattern"]
    source: str = Field(description="ADR or design title, or the requirement id.")
    source_document: str | None = None
    statement: str = Field(description="The statement, quoted from the memory.")
    relevance: float
    verdict: Literal["conflicts", "supports", "related"]
    reason: str | None = None
    kind: Literal["changed_value", "negated_modality", "forbidden_name", "removed_step"] | None = Field(
        default=None, description="For a conflict found by the statement check: how the fix contradicts the statement.")
    differs: str | None = Field(default=None, description="For such a conflict: what differs (the statement's value, name or step and the fix's).")


class ValidateFixResult(Schema):
    """How well the fix fits the design; the statements it conflicts with, quoted."""

    design_alignment_score: float
    requirements_alignment_score: float
    overall_alignment_score: float
    verdict: Literal["aligned", "conflicts", "no_design_context"]
    conflicts: list[AlignmentStatement]
    related_designs: list[AlignmentStatement]
    related_requirements: list[AlignmentStatement]
    recommendation: str


class DesignContextInput(ToolInput):
    """Design context for a component or a feature: give component_id, query or both."""

    component_id: str | None = Field(default=None, max_length=500, description=COMPONENT_HELP + " One of component_id or query is required.")
    query: str | None = Field(default=None, max_length=5_000, description="A feature or area in words.")
    limit: int = Field(default=5, ge=1, le=50, description="Items per group, 1-50.")

    @model_validator(mode="after")
    def _one_of(self) -> DesignContextInput:
        if not (self.component_id or (self.query or "").strip()):
            raise ValueError("one of component_id or query is required — name a component (class, file or directory) or describe the feature")
        return self


class ContextItem(Schema):
    """A memory or document chunk in a design context."""

    id: str
    kind: str
    title: str
    content: str
    score: float
    source_document: str | None = None
    stale: bool = False


class DesignContextResult(Schema):
    """Designs, requirements, patterns, components and doc chunks around a component or feature."""

    component: dict[str, Any] | None
    designs: list[ContextItem]
    requirements: list[ContextItem]
    patterns: list[ContextItem]
    components: list[ContextItem]
    documents: list[ContextItem]
    token_estimate: int


class TraceRequirementsInput(ToolInput):
    """Trace a requirement to its implementations, tests and designs."""

    requirement_id: str = Field(min_length=1, max_length=200, description="Requirement id, e.g. REQ-MEM-FN-001.")


class TracedSymbol(Schema):
    """Code or a test that cites the requirement."""

    id: str
    kind: str
    name: str
    qualified_name: str
    file_path: str
    start_line: int
    latest_result: dict[str, Any] | None = Field(default=None, description="Tests: the latest recorded outcome (record_test_run).")


class TraceRequirementsResult(Schema):
    """The requirement, what implements and verifies it, its designs, and coverage counts."""

    requirement: dict[str, Any]
    implementing_components: list[TracedSymbol]
    verifying_tests: list[TracedSymbol]
    related_designs: list[dict[str, Any]]
    coverage: dict[str, int]


class RecordTestRunInput(ToolInput):
    """A JUnit XML report to record as test history: a project file or the XML itself."""

    junit_xml_path: str | None = Field(default=None, max_length=1_000, description="Repo-relative path of a JUnit XML report (pytest --junitxml), inside the project.")
    junit_xml: str | None = Field(default=None, max_length=MAX_DOCUMENT_CHARS, description="The report's XML, when it is not a file.")
    commit: str | None = Field(default=None, max_length=64, description="Commit the run tested (recorded on failures).")

    @model_validator(mode="after")
    def _one_of(self) -> RecordTestRunInput:
        if not self.junit_xml_path and not self.junit_xml:
            raise ValueError("one of junit_xml_path or junit_xml is required — pass the report's path in the project or its XML")
        return self


class RecordTestRunResult(Schema):
    """What the report held and how it was linked."""

    tests: int
    passed: int
    failed: int
    errors: int
    skipped: int
    memories_written: int
    linked_to_code: int
    unmatched_tests: list[str]
    failures: list[dict[str, Any]]


class ImpactOfChangeInput(ToolInput):
    """A change to assess: a unified diff, changed files, or changed symbols."""

    diff: str | None = Field(default=None, max_length=MAX_DIFF_CHARS, description="A unified diff (git diff output).")
    files: list[str] | None = Field(default=None, max_length=1_000, description="Changed repo-relative files.")
    symbols: list[str] | None = Field(default=None, max_length=1_000, description="Changed symbols (ids or qualified names).")
    depth: int = Field(default=2, ge=1, le=4, description="Caller hops to follow, 1-4.")

    @model_validator(mode="after")
    def _one_of(self) -> ImpactOfChangeInput:
        if not (self.diff or self.files or self.symbols):
            raise ValueError("one of diff, files or symbols is required — pass `git diff` output or the changed paths")
        return self


class ImpactOfChangeResult(Schema):
    """What to re-check before committing the change."""

    changed_symbols: list[dict[str, Any]]
    affected_callers: list[dict[str, Any]]
    tests: list[dict[str, Any]]
    requirements: list[dict[str, Any]]
    designs: list[dict[str, Any]]
    patterns: list[dict[str, Any]]
    anchored_memories: list[dict[str, Any]]
    summary: str
    truncated: bool = False


class MemoryHealthResult(Schema):
    """The memory store's health: stale, orphaned, broken and duplicated memories, sync state."""

    status: Literal["healthy", "attention"]
    totals: dict[str, int]
    stale: list[dict[str, Any]]
    orphans: list[dict[str, Any]] = Field(description="Links from memories to code that is no longer indexed.")
    broken_links: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    sync: dict[str, Any]
    recommendations: list[str]
    hubs: int = Field(default=0, description="Hub memories (metadata role=hub): the navigation nodes of topics.")
    orphan_memory_count: int = Field(default=0, description="Memories no hub reaches through links (before any hub exists: memories linked to nothing); session summaries and preferences excluded.")
    orphan_memories: list[dict[str, Any]] = Field(default_factory=list, description="The most recently updated orphans, each with the nearest hubs to link it to (suggested_hubs, with the command) or, without hubs, how to find links.")

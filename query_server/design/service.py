"""The design-alignment tools as plain methods: check_consistency, validate_fix,
get_design_context, trace_requirements, record_test_run, impact_of_change and memory_health.

They read what the pipeline derives (``pipelines.design.derive``: requirement citations in the code
payloads, code_pattern and component memories, ADR and requirement memories, anchors) and the
live code index, so a result reflects the code as last indexed.

``DesignService`` is the facade the tool registry and the other faces call; each tool method hands
the work to the module that does that job: ``consistency`` (check_consistency), ``tracing``
(trace_requirements), ``junit_reports`` (record_test_run), ``guidance`` (get_design_context,
validate_fix), ``impact`` (impact_of_change) and ``health`` (memory_health), all over the shared
``lookups``.
"""

from __future__ import annotations

from typing import Any

from pipelines.design.derive import run_design_step
from pipelines.design.memories import DesignReport, DesignStores
from query_server.design.consistency import ConsistencyCheck
from query_server.design.guidance import DesignGuidance
from query_server.design.health import HealthCheck
from query_server.design.impact import ChangeImpact
from query_server.design.junit_reports import JunitRecorder
from query_server.design.lookups import DesignLookups
from query_server.design.tracing import RequirementTrace
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


class DesignService(DesignLookups):
    """Design alignment over the code index and the project memories of one project."""

    def __init__(self, service: Any) -> None:
        """Use the stores of ``service`` (a ``CodeMemService``)."""
        super().__init__(service)
        self.consistency = ConsistencyCheck(service)
        self.tracing = RequirementTrace(service)
        self.test_runs = JunitRecorder(service)
        self.guidance = DesignGuidance(service)
        self.impact = ChangeImpact(service)
        self.health = HealthCheck(service)

    def stores(self) -> DesignStores:
        """The stores the pipeline's design step writes to."""
        local = self.memory.scopes.store("local")
        return DesignStores(
            settings=self.settings, vectors=self.vectors, graph=self.graph, ledger=self.ledger,
            projector=self.memory.projector, embedder=self.embedder, local_ledger=local.ledger if local else None,
            manifest=self.service.manifest,
        )

    def refresh(self, *, force: bool = False, embed: bool = True) -> DesignReport:
        """Run the pipeline's design step (documents, links, anchors) on this process's stores;
        without ``embed`` the doc chunks' dense vectors are left to the background embedding."""
        return run_design_step(self.stores(), force=force, embed=embed)

    # -- the tools ---------------------------------------------------------------------------------
    def check_consistency(self, request: CheckConsistencyInput) -> CheckConsistencyResult:
        """Check classes against the patterns of their families (Template and Convention)."""
        return self.consistency.check_consistency(request)

    def trace_requirements(self, request: TraceRequirementsInput) -> TraceRequirementsResult:
        """The requirement with the code that implements it, the tests that verify it (with their
        latest results), the designs that address it, and coverage counts."""
        return self.tracing.trace_requirements(request)

    def record_test_run(self, request: RecordTestRunInput, *, request_id: str | None = None) -> RecordTestRunResult:
        """Record a JUnit XML report as test history, linked to the test code and requirements. A
        repeated ``request_id`` records no run twice."""
        return self.test_runs.record_test_run(request, request_id=request_id)

    def get_design_context(self, request: DesignContextInput) -> DesignContextResult:
        """Designs, requirements, patterns, components and doc chunks for a component or a feature."""
        return self.guidance.get_design_context(request)

    def validate_fix(self, request: ValidateFixInput) -> ValidateFixResult:
        """Check a proposed fix against the ADR decisions, designs and requirements that govern it."""
        return self.guidance.validate_fix(request)

    def impact_of_change(self, request: ImpactOfChangeInput) -> ImpactOfChangeResult:
        """Symbols a change touches and what depends on them: callers, tests, requirements,
        designs, patterns and memories anchored to them."""
        return self.impact.impact_of_change(request)

    def memory_health(self) -> MemoryHealthResult:
        """Stale (anchored code changed), orphaned, broken-linked and duplicated memories, and sync."""
        return self.health.memory_health()

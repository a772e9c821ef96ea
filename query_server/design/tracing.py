"""trace_requirements: a requirement with the code that implements it, the tests that verify it
(with their latest results) and the designs that address it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.design.patterns import requirement_citations
from query_server.design.lookups import MAX_ITEMS, DesignLookups
from query_server.paging import ToolError, cut_text
from resources.schemas.design import (
    TracedSymbol,
    TraceRequirementsInput,
    TraceRequirementsResult,
)


class RequirementTrace(DesignLookups):
    """A requirement traced to its code, tests and designs."""

    def _latest_results(self, symbols: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        results = {}
        for symbol in symbols:
            for row in self.ledger.find_by_metadata("test_history", "symbol_id", symbol["id"]):
                results[symbol["id"]] = {
                    "status": row.metadata.get("status"), "execution_time": row.metadata.get("execution_time"),
                    "failure_message": (row.metadata.get("failure_message") or None) and cut_text(row.metadata["failure_message"], 500, "memory_get returns the whole")[0],
                    "memory_id": row.id,
                }
        return results

    def trace_requirements(self, request: TraceRequirementsInput) -> TraceRequirementsResult:
        """The requirement with the code that implements it, the tests that verify it (with their
        latest results), the designs that address it, and coverage counts."""
        requirement_id = request.requirement_id.strip().upper()
        row = self._requirement(requirement_id)
        cited = requirement_citations(self.vectors, [requirement_id])
        if row is None and not cited:
            raise ToolError(
                f"Requirement not found: {requirement_id} — no requirements memory and no code cites it; "
                "requirements come from the project's documents (codemem index) or memory_add(memory_type='requirements')"
            )
        symbols = sorted((h.payload for h in cited), key=lambda p: (p["file_path"], p["start_line"]))
        tests = [p for p in symbols if p.get("is_test")]
        code = [p for p in symbols if not p.get("is_test")]
        latest = self._latest_results(tests)

        def traced(p: dict[str, Any]) -> TracedSymbol:
            return TracedSymbol(
                id=p["id"], kind=p["kind"], name=p["name"], qualified_name=p["qualified_name"], file_path=p["file_path"],
                start_line=p["start_line"], latest_result=latest.get(p["id"]),
            )

        designs = self._designs_for([requirement_id], [row.id] if row else [])
        passing = sum(1 for t in tests if (latest.get(t["id"]) or {}).get("status") == "Passed")
        failing = sum(1 for t in tests if (latest.get(t["id"]) or {}).get("status") in ("Failed", "Error"))
        requirement = (
            {"memory_id": row.id, **{k: row.metadata.get(k) for k in ("requirement_id", "title", "priority", "status", "source_document", "line")}, "description": row.metadata.get("description") or row.content}
            if row else {"requirement_id": requirement_id, "note": "cited in code but not defined in a document or memory"}
        )
        return TraceRequirementsResult(
            requirement=requirement, implementing_components=[traced(p) for p in code[:MAX_ITEMS]],
            verifying_tests=[traced(p) for p in tests[:MAX_ITEMS]], related_designs=designs,
            coverage={
                "implementation_count": len(code), "test_count": len(tests), "design_count": len(designs),
                "tests_passing": passing, "tests_failing": failing, "tests_without_result": len(tests) - passing - failing,
            },
        )

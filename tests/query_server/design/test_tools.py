"""The design-alignment tools on the evaluation fixture (tests/fixtures/design_project), through a
real ``codemem mcp`` stdio session: check_consistency flags exactly the planted deviations,
trace_requirements returns exactly the implementing and testing symbols, record_test_run links
the JUnit results, validate_fix classifies the fix scenarios, anchored memories go stale when
their code changes, and the other design tools answer on the same project."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from pipelines.parsing import language_for_path
from pipelines.qualified_names import file_module
from query_server.ownership import ProjectHandle
from resources.schemas.tools import IndexInput
from resources.settings import Settings
from tests.query_server.test_every_tool import TIMEOUT_S, StdioSession, _text, _wait

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "design_project"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
VALIDATE_FIX_TARGET = 0.90


@pytest.fixture(scope="module")
def design_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the fixture, indexed (code, documents, links) by an owner that then lets go."""
    root = tmp_path_factory.mktemp("design") / "project"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__", ".codemem"))
    handle = ProjectHandle(Settings(project_root=root))
    try:
        report = handle.call("index", IndexInput())
        assert report["failed"] == [], report
        assert report["design"]["requirements"] == 12 and report["design"]["patterns"] == 1, report["design"]
    finally:
        handle.close()
    return root


@pytest.fixture(scope="module")
def mcp(design_project: Path) -> Iterator[StdioSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "query_server.cli", "mcp", "--project", str(design_project)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=str(REPO_ROOT),
    )
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(params, read_timeout_seconds=TIMEOUT_S)) as client:
        session = StdioSession(portal, client)
        _wait(session.ok, "the start-up index", lambda s: s.get("dense_coverage") == 1.0)
        yield session


def _local(item: dict[str, Any]) -> str:
    """``file::LocalQualifiedName`` (the fixture truth's form) of a traced symbol (the fixture
    declares no Java/C# namespace, Rust module or go.mod: the module is the path's)."""
    module = file_module(item["file_path"], language_for_path(item["file_path"]) or "python")
    name = item["qualified_name"].removeprefix(module + ".") if module else item["qualified_name"]
    return f"{item['file_path']}::{name}"


def test_check_consistency_flags_exactly_the_planted_deviations(mcp: StdioSession) -> None:
    result = mcp.ok("check_consistency", {"component_id": "agents"})
    found = sorted((d["class_name"], d["kind"], d["member"]) for d in result["potential_deviations"])
    planted = sorted((d["class"], d["kind"], d["member"]) for d in EXPECTED["deviations"])
    assert found == planted
    assert [p["base_class"] for p in result["matching_patterns"]] == ["agents.base.BaseAgent"]
    assert result["matching_patterns"][0]["implementations"] == 12
    assert 0.9 < result["consistency_score"] < 1.0
    for deviation in result["potential_deviations"]:  # each cites a conforming example of the pattern
        assert deviation["example"] and deviation["example"]["name"].split(".")[0] in EXPECTED["conforming_classes"], deviation
    drift = next(d for d in result["potential_deviations"] if d["kind"] == "signature_drift")
    assert "timeout" in drift["actual"] and "timeout" not in drift["expected"]
    one = mcp.ok("check_consistency", {"component_id": "SearchAgent"})
    assert one["potential_deviations"] == [] and one["consistency_score"] == 1.0 and one["checked_classes"] == ["agents.search_agent.SearchAgent"]
    naming_only = mcp.ok("check_consistency", {"component_id": "agents/archive_worker.py", "pattern_types": ["Convention"]})
    assert [d["kind"] for d in naming_only["potential_deviations"]] == ["naming"]
    missing = mcp.call("check_consistency", {"component_id": "NoSuchThing"})
    assert missing.is_error and "Component not found" in _text(missing)


def test_trace_requirements_returns_exactly_the_implementing_and_testing_symbols(mcp: StdioSession) -> None:
    for requirement_id, truth in EXPECTED["requirements"].items():
        result = mcp.ok("trace_requirements", {"requirement_id": requirement_id})
        assert result["requirement"]["requirement_id"] == requirement_id
        assert result["requirement"]["title"] == truth["title"], requirement_id
        assert result["requirement"]["priority"] == truth["priority"] and result["requirement"]["status"] == truth["status"]
        assert sorted(_local(s) for s in result["implementing_components"]) == sorted(truth["implemented_by"]), requirement_id
        assert sorted(_local(s) for s in result["verifying_tests"]) == sorted(truth["tested_by"]), requirement_id
        assert sorted(d["source_document"] for d in result["related_designs"]) == sorted(truth["designs"]), requirement_id
        assert result["coverage"]["implementation_count"] == len(truth["implemented_by"])
        assert result["coverage"]["test_count"] == len(truth["tested_by"])
    missing = mcp.call("trace_requirements", {"requirement_id": "REQ-NOPE-999"})
    assert missing.is_error and "Requirement not found" in _text(missing)


def test_record_test_run_links_results_to_tests_and_requirements(mcp: StdioSession) -> None:
    junit = EXPECTED["junit"]
    result = mcp.ok("record_test_run", {"junit_xml_path": "reports/junit.xml", "commit": "abc123"})
    assert (result["passed"], result["failed"], result["skipped"]) == (junit["passed"], junit["failed"], junit["skipped"])
    assert result["unmatched_tests"] == [] and result["linked_to_code"] == result["tests"]
    failed = sorted(f["test"].rsplit(".", 1)[-1] for f in result["failures"])
    assert failed == sorted(t.split("::")[-1] for t in junit["failed_tests"])
    trace = mcp.ok("trace_requirements", {"requirement_id": "REQ-AGT-006"})  # its only test is a failing one
    assert trace["coverage"]["tests_failing"] == 1
    assert trace["verifying_tests"][0]["latest_result"]["status"] == "Failed"
    again = mcp.ok("record_test_run", {"junit_xml_path": "reports/junit.xml"})  # history grows, memories do not
    assert again["memories_written"] == again["tests"]
    stats = mcp.ok("memory_statistics")
    assert stats["memory_counts"]["test_history"]["active"] == junit["passed"] + junit["failed"] + junit["skipped"]
    outside = mcp.call("record_test_run", {"junit_xml_path": "../outside.xml"})
    assert outside.is_error and "outside" in _text(outside).lower()
    junk = mcp.call("record_test_run", {"junit_xml": "<not xml"})
    assert junk.is_error and "not valid XML" in _text(junk)


def test_validate_fix_classifies_the_scenarios(mcp: StdioSession) -> None:
    """REQ-MEM-VER-004: ≥ 90% of the fix scenarios classified (conforming vs violating an ADR or a
    requirement) with the local model. fix_scenarios.json (26) was used to develop the rules;
    fix_scenarios_holdout.json (34) and fix_scenarios_blind.json (30) were written afterwards by
    people who saw neither the rules nor the other sets (the rules were then corrected on
    generic grounds where they failed; docs/design.md and the issue note give the first figures)."""
    figures = {}
    for name in ("fix_scenarios.json", "fix_scenarios_holdout.json", "fix_scenarios_blind.json"):
        scenarios = json.loads((FIXTURE / name).read_text())
        right = 0
        for scenario in scenarios:
            args = {"fix_description": scenario["fix_description"], "affected_component": scenario.get("affected_component")}
            if scenario.get("diff"):
                args["diff"] = scenario["diff"]
            result = mcp.ok("validate_fix", args)
            right += (result["verdict"] == "conflicts") == (scenario["expected"] == "conflicts")
            if result["verdict"] == "conflicts":
                assert result["conflicts"][0]["statement"] and result["overall_alignment_score"] < 0.5
        figures[name] = (right, len(scenarios))
    independent = [figures["fix_scenarios_holdout.json"], figures["fix_scenarios_blind.json"]]
    print(f"validate_fix: {figures}")
    development = figures["fix_scenarios.json"][0] / figures["fix_scenarios.json"][1]
    assert development >= VALIDATE_FIX_TARGET, figures
    assert sum(r for r, _ in independent) / sum(n for _, n in independent) >= 0.85, figures
    conflict = mcp.ok("validate_fix", {"fix_description": "Wrap EnrichAgent.run in try/except Exception: pass so odd payloads stop the noise."})
    assert conflict["verdict"] == "conflicts" and "swallow" in conflict["conflicts"][0]["statement"].lower()
    assert conflict["conflicts"][0]["source_document"] == "docs/adr/0004-report-errors-as-agent-results.md"


def test_design_context_impact_and_health(mcp: StdioSession, design_project: Path) -> None:
    context = mcp.ok("get_design_context", {"component_id": "agents/dedupe_agent.py"})
    assert context["component"]["classes"] == ["agents.dedupe_agent.DedupeAgent"]
    assert any(d["source_document"] == "docs/adr/0002-persistence-through-task-repository.md" for d in context["designs"])
    assert context["patterns"] and context["token_estimate"] > 0
    by_query = mcp.ok("get_design_context", {"query": "retrying outbound HTTP calls"})
    assert any("0005" in (d["source_document"] or "") for d in by_query["designs"][:3])
    assert by_query["documents"], "prose chunks of README/docs are searchable"
    neither = mcp.call("get_design_context", {})
    assert neither.is_error and "component_id or query" in _text(neither)
    impact = mcp.ok("impact_of_change", {"files": ["agents/repository.py"]})
    assert any(s["name"] == "status_of" for s in impact["changed_symbols"])
    assert {"REQ-AGT-006", "REQ-API-003"} <= {r["requirement_id"] for r in impact["requirements"]}
    assert any(t["name"] == "test_status_reported_after_dispatch" for t in impact["tests"])
    diff = (
        "--- a/agents/base.py\n+++ b/agents/base.py\n@@ -1,3 +1,3 @@\n"
        + "".join(f" line {i}\n" for i in range(3))
    )
    base = mcp.ok("impact_of_change", {"diff": diff.replace("-1,3 +1,3", "-40,80 +40,80")})
    assert any(p["base_class"] == "agents.base.BaseAgent" for p in base["patterns"]), base["summary"]
    health = mcp.ok("memory_health")
    assert health["totals"]["requirements"] == 12 and health["totals"]["design"] >= 5
    assert set(health) >= {"stale", "orphans", "broken_links", "duplicates", "sync", "recommendations"}


def test_anchored_memory_goes_stale_when_its_code_changes(mcp: StdioSession, design_project: Path) -> None:
    added = mcp.ok("memory_add", {
        "memory_type": "code_pattern", "content": "SearchAgent.run must cap results at 20 before returning them.",
        "metadata": {"pattern_name": "result cap", "pattern_type": "Convention", "language": "python", "code_template": "results[:20]",
                     "usage_context": "search agents", "anchors": [{"qualified_name": "agents.search_agent.SearchAgent.run"}]},
    })
    stored = mcp.ok("memory_get", {"memory_id": added["memory_id"], "memory_type": "code_pattern"})
    anchor = stored["metadata"]["anchors"][0]
    assert anchor["content_hash"] and stored["stale_anchors"] is None
    source = design_project / "agents" / "search_agent.py"
    source.write_text(source.read_text().replace("def run(self, task: Task) -> AgentResult:", "def run(self, task: Task) -> AgentResult:\n        # capped below\n", 1))
    job = mcp.ok("reindex", {"directory_path": ".", "scope": "changed"})
    _wait(mcp.ok, "the re-index", lambda s: s["job"]["status"] in ("done", "failed"), {"job_id": job["job_id"]})
    hits = mcp.ok("memory_search", {"query": "cap search results at 20", "memory_types": ["code_pattern"]})
    hit = next(h for h in hits["results"] if h["id"] == added["memory_id"])
    assert hit["provenance"]["stale"] and "agents.search_agent.SearchAgent.run" in hit["provenance"]["stale_reason"]
    health = mcp.ok("memory_health")
    assert any(s["memory_id"] == added["memory_id"] for s in health["stale"]) and health["status"] == "attention"
    confirmed = mcp.ok("memory_update", {"memory_id": added["memory_id"], "memory_type": "code_pattern", "confirm_anchors": True})
    assert confirmed["status"] == "updated"
    hits = mcp.ok("memory_search", {"query": "cap search results at 20", "memory_types": ["code_pattern"]})
    assert not next(h for h in hits["results"] if h["id"] == added["memory_id"])["provenance"]["stale"]
    unknown = mcp.call("memory_add", {
        "memory_type": "session", "content": "x", "metadata": {"anchors": [{"qualified_name": "no.such.symbol"}]},
    })
    assert unknown.is_error and "not in the code index" in _text(unknown)


def test_record_test_run_repeated_with_its_request_id_records_each_run_once(project: Path, service_factory) -> None:  # noqa: ANN001
    """The retry of a record_test_run whose owner died after recording (issue 25, item 3) returns
    the first counts and adds no run to any test's history; parametrized cases of one test, which
    share its memory, each still count."""
    from resources.schemas.design import RecordTestRunInput

    junit = (
        '<testsuite timestamp="2026-01-01T00:00:00"><testcase classname="pkg.test_mod" name="test_a[1]"/>'
        '<testcase classname="pkg.test_mod" name="test_a[2]"><failure message="boom"/></testcase>'
        '<testcase classname="pkg.test_mod" name="test_b"/></testsuite>'
    )
    (project / "pkg").mkdir()
    (project / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    svc = service_factory(project)
    svc.index(IndexInput(embed=False))
    first = svc.design.record_test_run(RecordTestRunInput(junit_xml=junit), request_id="run-1")
    again = svc.design.record_test_run(RecordTestRunInput(junit_xml=junit), request_id="run-1")
    assert again == first and first.memories_written == 3

    def runs(test: str) -> list[str]:
        (row,) = svc.memory.ledger.find_by_metadata("test_history", "test_key", f"pkg.test_mod.{test}")
        return [run["status"] for run in row.metadata["runs"]]

    assert runs("test_a") == ["Passed", "Failed"] and runs("test_b") == ["Passed"]
    svc.design.record_test_run(RecordTestRunInput(junit_xml=junit), request_id="run-2")
    assert runs("test_a") == ["Passed", "Failed", "Passed", "Failed"] and runs("test_b") == ["Passed", "Passed"]

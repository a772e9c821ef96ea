"""The scenario sets of ``bench.validate_fix`` are well formed (no index, no model, no network):
every violation has a conforming twin of the same kind and cites an accepted ADR file of its
project, and the sets are as large and as varied as issue 20 asks."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.validate_fix import (
    PAIRED_KINDS,
    adr_files,
    check_project,
    figures,
    load_projects,
)

PROJECTS = load_projects()


@pytest.mark.parametrize("project", PROJECTS, ids=[p["project"] for p in PROJECTS])
def test_scenario_set_is_well_formed(project: dict) -> None:
    assert check_project(project) == []
    kinds = Counter(s["kind"] for s in project["scenarios"] if s["label"] == "violation")
    assert all(kinds[k] >= 2 for k in PAIRED_KINDS), kinds  # several scenarios of each contradiction kind
    assert any(s["kind"] == "unrelated" for s in project["scenarios"])
    assert (project["root"] / "README.md").is_file() and any(project["root"].rglob("*.py"))  # it indexes as a project


def test_scenario_sets_cover_the_issue() -> None:
    assert len(PROJECTS) >= 3
    splits = Counter(p["split"] for p in PROJECTS)
    assert splits["dev"] >= 1 and splits["heldout"] >= 2, splits
    scenarios = [s for p in PROJECTS for s in p["scenarios"]]
    pairs = {s["pair"] for s in scenarios if s.get("pair")}
    assert len(pairs) >= 40
    assert sum(s["kind"] == "unrelated" for s in scenarios) >= 10
    assert 0.3 <= sum(bool(s.get("diff")) for s in scenarios) / len(scenarios) <= 0.7  # about half carry a diff
    cited = {(p["project"], s["expected_citation"]) for p in PROJECTS for s in p["scenarios"] if s["label"] == "violation"}
    assert len(cited) >= 5 * len(PROJECTS)  # violations spread over the ADRs, not all on one
    for project in PROJECTS:
        for adr in adr_files(project["root"]):
            assert "## Decision" in adr.read_text(), adr


def test_figures_order_ties_and_citations() -> None:
    def outcome(sid: str, label: str, score: float, verdict: str, cited: bool = False) -> dict:
        return {"id": sid, "kind": "changed_value", "label": label, "pair": sid[:-2], "score": score, "verdict": verdict, "cited": cited}

    f = figures([
        outcome("a-v", "violation", 0.3, "conflicts", cited=True), outcome("a-c", "conforming", 0.8, "aligned"),
        outcome("b-v", "violation", 0.75, "aligned"), outcome("b-c", "conforming", 0.75, "aligned"),  # a tie is a miss
        outcome("c-v", "violation", 0.8, "aligned"), outcome("c-c", "conforming", 0.4, "conflicts"),
    ])
    assert (f["pairs"], f["pairs_ordered"], f["pair_ties"]) == (3, 1, 1)
    assert f["cited"] == round(1 / 3, 3) and f["flagged"] == round(1 / 3, 3)
    assert f["false_conflicts"] == round(1 / 3, 3)

"""Normalization on real stores: dry run changes nothing; a run merges duplicates (audited,
relationships re-pointed), purges expired soft-deletes, and swaps in a rebuilt generation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from resources.memory.projection import collection_name
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryDeleteInput,
    MemoryGetInput,
    MemorySearchInput,
    NormalizeMemoryInput,
    NormalizeStatusInput,
)


@pytest.fixture
def svc(project: Path, service_factory):  # noqa: ANN001, ANN201
    return service_factory(project)


def _wait(svc, job_id: str, timeout: float = 120.0):  # noqa: ANN001, ANN202
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = svc.memory.normalize_status(NormalizeStatusInput(job_id=job_id))
        if job.status != "running":
            return job
        time.sleep(0.1)
    raise AssertionError("normalization did not finish")


def _seed(svc) -> dict[str, str]:  # noqa: ANN001
    add = lambda t, c, **kw: svc.memory.memory_add(MemoryAddInput(memory_type=t, content=c, **kw)).memory_id  # noqa: E731
    ids = {
        "pattern": add("code_pattern", "Repositories wrap their SQL in a unit of work.",
                       metadata={"pattern_name": "Unit of work", "pattern_type": "Convention", "language": "python",
                                 "code_template": "with uow: ...", "usage_context": "data access"}),
        "pattern_copy": add("code_pattern", "Repositories wrap their SQL in a unit of work",
                            metadata={"pattern_name": "Unit of work", "pattern_type": "Convention", "language": "python",
                                      "code_template": "with uow: ...", "usage_context": "data access",
                                      "example_implementations": ["repo/users.py"]}),
        "session": add("session", "Paired on the billing export; chose CSV over XLSX."),
        "old": add("session", "A session from long ago"),
    }
    ids["design"] = add(
        "design", "Billing exports are CSV files written by a nightly job.",
        metadata={"design_type": "Specification", "title": "Billing export", "status": "Accepted"},
        relationships=[{"type": "USES_PATTERN", "target_id": ids["pattern"]}],
    )
    svc.memory.memory_delete(MemoryDeleteInput(memory_id=ids["old"], memory_type="session"))
    with svc.memory.ledger._transaction() as conn:  # backdate the soft delete past its 30-day retention
        conn.execute("UPDATE memories SET deleted_at='2020-01-01T00:00:00+00:00' WHERE id=?", (ids["old"],))
    return ids


def test_dry_run_reports_and_changes_nothing(svc) -> None:  # noqa: ANN001
    ids = _seed(svc)
    before = svc.memory.memory_statistics()
    job = _wait(svc, svc.memory.normalize_memory(NormalizeMemoryInput(dry_run=True)).job_id)
    assert job.status == "done", job.errors
    report = job.report
    assert report["duplicates"] == 1 and report["cleanup"] == 1
    assert {ids["pattern"], ids["pattern_copy"]} == {report["merges"][0]["keeper"], *report["merges"][0]["merged"]}
    after = svc.memory.memory_statistics()
    assert after.memory_counts == before.memory_counts
    assert svc.memory.projector.generation == 0


def test_normalization_merges_cleans_and_swaps(svc) -> None:  # noqa: ANN001
    ids = _seed(svc)
    job = _wait(svc, svc.memory.normalize_memory(NormalizeMemoryInput()).job_id)
    assert job.status == "done", job.errors
    report = job.report
    assert report["applied"]["merged"] == 1 and report["applied"]["cleaned"] == 1
    assert report["generation"] == 1 and Path(report["snapshot_path"]).exists()
    # the more complete copy (it has example_implementations) is kept, the other merged into it
    assert report["merges"][0]["keeper"] == ids["pattern_copy"]
    svc.memory.sync()
    kept = svc.memory.memory_get(MemoryGetInput(memory_id=ids["pattern_copy"], memory_type="code_pattern", include_relationships=True))
    assert kept.version == 2 and not kept.deleted
    assert [(r.type, r.direction, r.target_id) for r in kept.relationships] == [("USES_PATTERN", "incoming", ids["design"])]
    merged = svc.memory.memory_get(MemoryGetInput(memory_id=ids["pattern"], memory_type="code_pattern"))
    assert merged.deleted
    trail = svc.memory.ledger.audit_of(ids["pattern"])
    assert trail[-1]["operation"] == "merged_into" and trail[-1]["current"]["merged_into"] == ids["pattern_copy"]
    assert svc.memory.ledger.get(ids["old"]) is None
    assert svc.memory.ledger.audit_of(ids["old"])[-1]["operation"] == "cleanup"
    # the new generation serves searches; the old collections are gone
    hits = svc.memory.memory_search(MemorySearchInput(query="unit of work for SQL repositories"))
    assert [h.id for h in hits.results][:1] == [ids["pattern_copy"]]
    assert ids["pattern"] not in [h.id for h in hits.results]
    state = svc.settings.resolved_state_dir()
    assert (state / "qdrant" / collection_name("code_pattern", 1)).is_dir()
    assert not (state / "qdrant" / collection_name("code_pattern", 0)).exists()
    # the graph follows: the merged-away node is gone, the edge points at the keeper
    _, rows, _ = svc.graph.read_query("MATCH (d:Design)-[:USES_PATTERN]->(p:Pattern) RETURN p.id AS id", {}, 10)
    assert rows == [{"id": ids["pattern_copy"]}]
    # a second run converges: nothing more to merge or clean
    again = _wait(svc, svc.memory.normalize_memory(NormalizeMemoryInput()).job_id)
    assert again.status == "done" and again.report["duplicates"] == 0 and again.report["cleanup"] == 0
    assert svc.memory.projector.generation == 2


def test_one_normalization_at_a_time_and_unknown_job(svc) -> None:  # noqa: ANN001
    from query_server.service import ToolError

    with pytest.raises(ToolError, match="no normalization has run yet"):
        svc.memory.normalize_status(NormalizeStatusInput())
    with pytest.raises(ToolError, match="unknown normalization job"):
        svc.memory.normalize_status(NormalizeStatusInput(job_id="nope"))


def test_merged_texts_that_differ_stay_on_the_keeper() -> None:
    from resources.memory.ledger import MemoryRow
    from resources.memory.normalization import merged_metadata

    def row(content: str, **metadata: object) -> MemoryRow:
        return MemoryRow(id=content, memory_type="session", content=content, metadata=dict(metadata), content_hash="",
                         importance_score=0.5, access_count=0, last_accessed_at=None, version=1,
                         created_at="2026-01-01T00:00:00+00:00", updated_at="2026-01-01T00:00:00+00:00",
                         deleted=False, deleted_at=None, sync_status="synced")

    keeper = row("Return the x coordinate of the pointer.", tags=["ui"])
    same = row("return the X coordinate of the pointer", tags=["pointer"])
    other = row("Return the y coordinate of the pointer.", owner="ana")
    merged = merged_metadata(keeper, [same, other])
    assert merged["merged_contents"] == ["Return the y coordinate of the pointer."]
    assert merged["tags"] == ["ui", "pointer"] and merged["owner"] == "ana"

"""The memory tools over real stores (ledger, qdrant-edge, FalkorDB, the local model)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from query_server.service import ToolError
from resources.schemas.memory import (
    ExportMemoryInput,
    ImportMemoryInput,
    MemoryAddInput,
    MemoryBulkAddInput,
    MemoryDeleteInput,
    MemoryGetInput,
    MemorySearchInput,
    MemoryUpdateInput,
)
from resources.schemas.tools import IndexInput
from tests.conftest import write_files

CODE = {
    "session.py": textwrap.dedent(  # at the root: no directory, so the pipeline derives no component memory
        '''
        def issue_token(user):
            """Create a signed session token for the user."""
            return sign(user.id)


        def sign(value):
            return f"signed:{value}"
        '''
    ),
}


@pytest.fixture
def svc(project: Path, service_factory):  # noqa: ANN001, ANN201
    write_files(project, CODE)
    service = service_factory(project)
    service.index(IndexInput())
    return service


def _add(svc, memory_type: str, content: str, **fields):  # noqa: ANN001, ANN202
    return svc.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content, **fields))


def test_add_get_search_round_trip(svc) -> None:  # noqa: ANN001
    req = _add(
        svc, "requirements", "Login sessions expire after 30 minutes of inactivity",
        metadata={"requirement_id": "REQ-AUTH-001", "title": "Session expiry", "priority": "high", "status": "Approved"},
    )
    assert req.status == "created" and req.sync_status == "synced" and req.conflicts == []
    design = _add(
        svc, "design", "Sessions are JWTs signed with a rotating key; expiry is enforced by the gateway",
        metadata={"design_type": "ADR", "title": "ADR-7 session tokens", "status": "Accepted"},
        relationships=[{"type": "ADDRESSES", "target_id": "REQ-AUTH-001"}, {"type": "RELATES_TO", "target_id": "session.issue_token"}],
    )
    _add(svc, "user_preference", "Use pytest fixtures rather than setUp methods",
         metadata={"category": "Tool", "key": "test_style", "value": "pytest fixtures", "scope": "Project"})

    record = svc.memory.memory_get(MemoryGetInput(memory_id=design.memory_id, memory_type="design", include_relationships=True))
    assert record.metadata["title"] == "ADR-7 session tokens" and record.version == 1
    links = {(r.type, r.direction, r.target_label) for r in record.relationships}
    assert links == {("ADDRESSES", "outgoing", "requirements"), ("RELATES_TO", "outgoing", "Function")}
    back = svc.memory.memory_get(MemoryGetInput(memory_id=req.memory_id, memory_type="requirements", include_relationships=True))
    assert [(r.type, r.direction, r.target_id) for r in back.relationships] == [("ADDRESSES", "incoming", design.memory_id)]

    found = svc.memory.memory_search(MemorySearchInput(query="how long does a login session last before it expires"))
    assert found.results[0].id == req.memory_id and found.search_mode == "hybrid"
    only_design = svc.memory.memory_search(MemorySearchInput(query="session token signing", memory_types=["design"]))
    assert [h.id for h in only_design.results] == [design.memory_id]
    filtered = svc.memory.memory_search(MemorySearchInput(query="session", metadata_filters={"priority": "High"}))
    assert [h.id for h in filtered.results] == [req.memory_id]
    # retrieval is counted
    again = svc.memory.memory_get(MemoryGetInput(memory_id=req.memory_id, memory_type="requirements"))
    assert again.access_count >= 3

    # the graph holds the memory nodes and the link to the code
    _, rows, _ = svc.graph.read_query(
        "MATCH (d:Design)-[:RELATES_TO]->(f:Function) RETURN d.title AS title, f.qualified_name AS fn", {}, 10
    )
    assert rows == [{"title": "ADR-7 session tokens", "fn": "session.issue_token"}]


def test_conflicts_duplicates_and_contradictions(svc) -> None:  # noqa: ANN001
    first = _add(svc, "code_pattern", "Every repository class wraps its SQL in a unit of work",
                 metadata={"pattern_name": "Unit of work", "pattern_type": "Convention", "language": "python",
                           "code_template": "with uow: ...", "usage_context": "data access"})
    same = _add(svc, "code_pattern", "Every repository class wraps its SQL in a unit of work",
                metadata={"pattern_name": "Unit of work", "pattern_type": "Convention", "language": "python",
                          "code_template": "with uow: ...", "usage_context": "data access"})
    assert [(c.memory_id, c.kind, c.similarity) for c in same.conflicts] == [(first.memory_id, "similar", 1.0)]
    pref = {"category": "Naming", "key": "test_files", "scope": "Project"}
    _add(svc, "user_preference", "Name test files test_<module>.py", metadata={**pref, "value": "test_<module>.py"})
    other = _add(svc, "user_preference", "Name test files <module>_test.py", metadata={**pref, "value": "<module>_test.py"})
    assert [c.kind for c in other.conflicts] == ["contradiction"]
    assert "test_<module>.py" in other.conflicts[0].detail


def test_update_with_optimistic_concurrency_and_audit(svc) -> None:  # noqa: ANN001
    added = _add(svc, "session", "Refactored the token signer")
    updated = svc.memory.memory_update(MemoryUpdateInput(
        memory_id=added.memory_id, memory_type="session", content="Refactored the token signer and its tests",
        expected_version=1,
    ))
    assert updated.status == "updated" and updated.version == 2
    with pytest.raises(ToolError, match="now at version 2"):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=added.memory_id, memory_type="session", content="x", expected_version=1))
    with pytest.raises(ToolError, match="memory_type='session'"):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=added.memory_id, memory_type="design", content="x"))
    with pytest.raises(ToolError, match="metadata.start_time: must be an ISO 8601"):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=added.memory_id, memory_type="session", metadata={"start_time": "yesterday"}))
    hit = svc.memory.memory_search(MemorySearchInput(query="token signer tests")).results[0]
    assert hit.content.endswith("and its tests") and hit.provenance.version == 2
    trail = svc.memory.ledger.audit_of(added.memory_id)
    assert [e["operation"] for e in trail] == ["create", "update"]


def test_soft_and_hard_delete(svc) -> None:  # noqa: ANN001
    added = _add(svc, "session", "Investigated flaky checkout test")
    gone = svc.memory.memory_delete(MemoryDeleteInput(memory_id=added.memory_id, memory_type="session"))
    assert gone.status == "deleted" and gone.retention_until
    assert svc.memory.memory_search(MemorySearchInput(query="flaky checkout test")).results == []
    kept = svc.memory.memory_search(MemorySearchInput(query="flaky checkout test", include_deleted=True))
    assert [h.id for h in kept.results] == [added.memory_id]
    assert svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session")).deleted
    svc.memory.memory_delete(MemoryDeleteInput(memory_id=added.memory_id, memory_type="session", hard_delete=True))
    with pytest.raises(ToolError, match="Memory not found"):
        svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session"))
    assert svc.memory.memory_search(MemorySearchInput(query="flaky checkout test", include_deleted=True)).results == []


def test_bulk_add_is_all_or_nothing(svc) -> None:  # noqa: ANN001
    bad = svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=[
        {"memory_type": "session", "content": "fine"},
        {"memory_type": "requirements", "content": "no title", "metadata": {"priority": "High"}},
    ]))
    assert bad.added_count == 0 and bad.errors[0]["index"] == 1 and "title" in bad.errors[0]["error"]
    assert svc.memory.memory_statistics().memory_counts["session"]["total"] == 0
    good = svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=[{"memory_type": "session", "content": f"s{i}"} for i in range(20)]))
    assert good.added_count == 20
    stats = svc.memory.memory_statistics()
    assert stats.memory_counts["session"] == {"total": 20, "active": 20, "deleted": 0}
    assert stats.sync_status["synced"] == 20 and stats.outbox["pending"] == 0


def test_pagination_and_bad_inputs(svc) -> None:  # noqa: ANN001
    svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=[
        {"memory_type": "session", "content": f"Worked on the payment retry queue, part {i}"} for i in range(25)
    ]))
    seen: list[str] = []
    cursor = None
    for _ in range(3):
        page = svc.memory.memory_search(MemorySearchInput(query="payment retry queue", limit=10, cursor=cursor))
        seen += [h.id for h in page.results]
        cursor = page.next_cursor
    assert len(seen) == 25 == len(set(seen)) and cursor is None
    with pytest.raises(ToolError, match="another query"):
        svc.memory.memory_search(MemorySearchInput(query="something else", cursor=page.next_cursor or _first_cursor(svc)))
    with pytest.raises(ToolError, match="relationship target"):
        _add(svc, "design", "x", metadata={"design_type": "ADR", "title": "t", "status": "Accepted"},
             relationships=[{"type": "ADDRESSES", "target_id": "REQ-NOPE-999"}])
    with pytest.raises(ToolError, match="Memory not found"):
        svc.memory.memory_get(MemoryGetInput(memory_id="00000000-0000-4000-8000-000000000000", memory_type="session"))


def _first_cursor(svc) -> str:  # noqa: ANN001
    return svc.memory.memory_search(MemorySearchInput(query="payment retry queue", limit=1)).next_cursor


def test_export_import_round_trip_and_path_confinement(svc, project: Path, tmp_path: Path) -> None:  # noqa: ANN001
    a = _add(svc, "requirements", "Exports are JSONL", metadata={"requirement_id": "REQ-EXP-001", "title": "Export", "priority": "Low", "status": "Draft"})
    _add(svc, "design", "JSONL keeps one memory per line", metadata={"design_type": "Specification", "title": "Export format", "status": "Accepted"},
         relationships=[{"type": "ADDRESSES", "target_id": a.memory_id}])
    result = svc.memory.export_memory(ExportMemoryInput(output_path="backup/memories.jsonl"))
    assert result.exported_count == 2
    lines = [json.loads(x) for x in (project / "backup/memories.jsonl").read_text().splitlines()]
    assert {x["memory_type"] for x in lines} == {"requirements", "design"}
    with pytest.raises(ToolError, match="Path must be within project directory"):
        svc.memory.export_memory(ExportMemoryInput(output_path="../outside.jsonl"))
    with pytest.raises(ToolError, match="Path must be within project directory"):
        svc.memory.import_memory(ImportMemoryInput(input_path=str(tmp_path / "x.jsonl")))

    skipped = svc.memory.import_memory(ImportMemoryInput(input_path="backup/memories.jsonl"))
    assert (skipped.imported, skipped.skipped) == (0, 2)
    refused = svc.memory.import_memory(ImportMemoryInput(input_path="backup/memories.jsonl", conflict_resolution="error"))
    assert refused.imported == 0 and len(refused.errors) == 2

    svc.memory.memory_delete(MemoryDeleteInput(memory_id=a.memory_id, memory_type="requirements", hard_delete=True))
    restored = svc.memory.import_memory(ImportMemoryInput(input_path="backup/memories.jsonl"))
    assert (restored.imported, restored.skipped) == (1, 1)
    back = svc.memory.memory_get(MemoryGetInput(memory_id=a.memory_id, memory_type="requirements"))
    assert back.content == "Exports are JSONL" and back.created_at == lines[0]["created_at"]
    junk = svc.memory.import_memory(ImportMemoryInput(data='{"memory_type": "nonsense", "content": "x"}\nnot json\n'))
    assert junk.imported == 0 and [e["line"] for e in junk.errors] == [1, 2]
    assert "Unknown memory type" in junk.errors[0]["error"]
    worse = svc.memory.import_memory(ImportMemoryInput(data=(
        '{"memory_type": "session"\n5\n{"memory_type": "session", "content": "x", "importance_score": "high"}\n'
        '{"memory_type": "session", "content": "x", "id": "abc"}\n'
    )))
    assert worse.imported == 0 and [e["line"] for e in worse.errors] == [1, 2, 3, 4]
    messages = [e["error"] for e in worse.errors]
    assert messages[0].startswith("not valid JSON") and "JSON object" in messages[1]
    assert "importance_score must be a number from 0 to 1" in messages[2] and "is not a UUID" in messages[3]


def test_search_ranks_as_if_it_read_every_candidate(svc, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """Rows are read best candidate first until none left can enter the page: the ranking is the one
    of reading them all (weights from importance and age included)."""
    import random

    from bench.memory import MemoryGenerator

    gen = MemoryGenerator(random.Random(3))
    items = [{"memory_type": t, "content": c, "metadata": m, "importance_score": random.Random(i).random()}
             for i, (t, c, m) in enumerate(gen.items(120))]
    svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=items))
    memory = svc.memory
    read: list[int] = []
    real_get_many = memory.scopes.get_many

    def counting(ids, scopes=None):  # noqa: ANN001, ANN202
        read.append(len(ids))
        return real_get_many(ids, scopes)

    monkeypatch.setattr(memory.scopes, "get_many", counting)
    saved = 0
    for query in gen.queries(12, set()):
        request = MemorySearchInput(query=query, limit=5)
        ranked, _ = memory.reads.ranked(request, 6)
        read_pruned = sum(read)
        read.clear()
        monkeypatch.setattr("query_server.memory.reads.MAX_RANK_WEIGHT", float("inf"))  # never stops early
        everything, _ = memory.reads.ranked(request, 6)
        monkeypatch.setattr("query_server.memory.reads.MAX_RANK_WEIGHT", 1.0)
        read_all = sum(read)
        read.clear()
        assert [r.id for _, r in ranked[:6]] == [r.id for _, r in everything[:6]], query  # (scores move with the clock)
        assert read_pruned <= read_all
        saved += read_all - read_pruned
    assert saved > 0  # the early stop did happen


def test_updates_cannot_pile_metadata_past_the_limit(svc) -> None:  # noqa: ANN001
    """Each update's metadata is within the 64 KiB cap on input; merged into the stored metadata, an
    update that grows it past the cap is refused, and the memory keeps its last good version."""
    added = _add(svc, "session", "Long refactoring session")
    chunk = "x" * 20_000
    version = added.version
    for n in range(3):
        version = svc.memory.memory_update(MemoryUpdateInput(
            memory_id=added.memory_id, memory_type="session", metadata={f"notes_{n}": chunk},
        )).version
    with pytest.raises(ToolError, match="metadata after this update"):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=added.memory_id, memory_type="session", metadata={"notes_3": chunk}))
    stored = svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session"))
    assert stored.version == version and "notes_3" not in stored.metadata
    shrunk = svc.memory.memory_update(MemoryUpdateInput(memory_id=added.memory_id, memory_type="session", metadata={"notes_0": "done"}))
    assert shrunk.status == "updated"


def test_summary_hits_stay_short_for_every_memory_type(svc) -> None:  # noqa: ANN001
    """A summary hit is ~600 characters of content and metadata whatever the memory carries (a
    code_pattern's whole class body, a long rationale, hundreds of files); full mode and memory_get
    return everything."""
    from tests.resources.test_memory_schemas import GOOD_EXAMPLES

    body = "\n".join(f"    def method_{i}(self, value):\n        return value * {i}" for i in range(120))
    heavy = {"code_template": "class Repository:\n" + body, "rationale": "Because " + "it scales " * 300,
             "files_touched": [f"src/module_{i}.py" for i in range(400)], "notes": {"long": "x" * 2_000}}
    ids = {}
    for memory_type, example in GOOD_EXAMPLES.items():
        content = f"Big {memory_type.value} memory about the invoice ledger. " + "Details follow. " * 200
        ids[memory_type.value] = _add(svc, memory_type.value, content, metadata={**example, **heavy}).memory_id
    found = svc.memory.memory_search(MemorySearchInput(query="big memory about the invoice ledger", limit=20)).results
    assert {hit.id for hit in found} >= set(ids.values())
    for hit in found:
        if hit.id not in ids.values():
            continue
        size = len(hit.content) + len(json.dumps(hit.metadata, ensure_ascii=False))
        assert size <= 650, (hit.memory_type, size)
        assert {"code_template", "rationale", "files_touched", "notes"} <= set(hit.metadata_elided), hit.metadata_elided
        assert hit.next and "memory_get" in hit.next
        whole = svc.memory.memory_get(MemoryGetInput(memory_id=hit.id, memory_type=hit.memory_type))
        assert whole.metadata["files_touched"] == heavy["files_touched"] and whole.metadata["notes"] == heavy["notes"]
        assert all(whole.metadata[key] == value for key, value in hit.metadata.items() if key not in hit.metadata_elided)
    full = svc.memory.memory_search(MemorySearchInput(query="big memory about the invoice ledger", limit=20, detail="full")).results
    for hit in full:
        if hit.id in ids.values():
            assert hit.metadata_elided == [] and hit.metadata["code_template"] == heavy["code_template"]

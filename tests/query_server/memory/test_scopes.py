"""Memory scopes (seed 002, US-6 / FR-006..011 / SC-007): project, local and global memories on real
stores — two projects sharing one global directory, no leakage between them, and the local scope
kept out of git."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from query_server.claude_setup import apply_plan, plan_init
from query_server.service import ToolError
from resources.memory.ledger import Ledger
from resources.memory.projection import COLLECTIONS
from resources.schemas.memory import (
    ExportMemoryInput,
    ImportMemoryInput,
    MemoryAddInput,
    MemoryBulkAddInput,
    MemoryDeleteInput,
    MemoryGetInput,
    MemoryListInput,
    MemorySearchInput,
    MemoryUpdateInput,
)
from tests.conftest import git_init

A_PROJECT = "The billing service retries a failed card charge three times with exponential backoff"
A_LOCAL = "Personal note: ask Dana whether the card charge retry backoff is too aggressive"
B_PROJECT = "The search page debounces keystrokes for 250 milliseconds before querying"
GLOBAL_PREF = "Always write tests with pytest fixtures rather than unittest setUp methods"
PREF_META = {"category": "Tool", "key": "tests.style", "value": "pytest fixtures", "scope": "Global"}
QUERIES = (
    "card charge retries and backoff", "billing retry policy", "ask Dana about retries",
    "search page keystroke debounce", "pytest fixtures or setUp", "notes",
)


@pytest.fixture
def shared_global(tmp_path: Path) -> Path:
    return tmp_path / "global"


@pytest.fixture
def two_projects(tmp_path: Path, shared_global: Path, service_factory):  # noqa: ANN001, ANN201
    roots = []
    for name in ("a", "b"):
        root = tmp_path / name
        root.mkdir()
        roots.append(root)
    return [service_factory(root, global_dir=shared_global) for root in roots]


def _add(svc, memory_type: str, content: str, **fields):  # noqa: ANN001, ANN202
    return svc.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content, **fields))


def _search_ids(svc, query: str, **fields) -> dict[str, str]:  # noqa: ANN001
    """id → scope of every hit (all pages of up to 100)."""
    found = svc.memory.memory_search(MemorySearchInput(query=query, limit=100, **fields))
    return {hit.id: hit.scope for hit in found.results}


def test_sc007_no_leakage_across_projects_and_global_shared(two_projects, shared_global: Path) -> None:  # noqa: ANN001
    a, b = two_projects
    a_project = _add(a, "design", A_PROJECT, metadata={"title": "Charge retries", "design_type": "ADR", "status": "Accepted"})
    a_local = _add(a, "session", A_LOCAL, scope="local")
    pref = _add(a, "user_preference", GLOBAL_PREF, metadata=PREF_META, scope="global")
    b_project = _add(b, "design", B_PROJECT, metadata={"title": "Search debounce", "design_type": "ADR", "status": "Accepted"})
    assert (a_project.scope, a_local.scope, pref.scope, b_project.scope) == ("project", "local", "global", "project")
    assert pref.sync_status == "synced" and a_local.sync_status == "synced"

    # where each one is kept: A's ledgers, the shared global ledger; B's own ledger holds only B's
    assert (shared_global / "memory.db").is_file()
    assert (a.settings.resolved_state_dir() / "local" / "memory.db").is_file()
    assert not (b.settings.resolved_state_dir() / "local").exists()

    a_only = {a_project.memory_id, a_local.memory_id}
    for query in QUERIES:
        in_b = _search_ids(b, query)
        assert not a_only & set(in_b), (query, in_b)  # SC-007: nothing of project A in project B
        in_a = _search_ids(a, query)
        assert b_project.memory_id not in in_a, query
    # the global memory is found from both projects, marked global; the local one stays in A
    assert _search_ids(b, "pytest fixtures or setUp")[pref.memory_id] == "global"
    assert _search_ids(a, "pytest fixtures or setUp")[pref.memory_id] == "global"
    assert _search_ids(a, "ask Dana about the retry backoff")[a_local.memory_id] == "local"
    assert _search_ids(a, "card charge retries")[a_project.memory_id] == "project"

    # the other faces of reading: get, list, export, statistics
    for memory_id, memory_type in ((a_project.memory_id, "design"), (a_local.memory_id, "session")):
        with pytest.raises(ToolError, match="Memory not found"):
            b.memory.memory_get(MemoryGetInput(memory_id=memory_id, memory_type=memory_type))
    got = b.memory.memory_get(MemoryGetInput(memory_id=pref.memory_id, memory_type="user_preference"))
    assert got.scope == "global" and got.content == GLOBAL_PREF and got.sync_status == "synced"
    assert a.memory.memory_get(MemoryGetInput(memory_id=a_local.memory_id, memory_type="session")).scope == "local"
    listed_b = {h.id: h.scope for h in b.memory.memory_list(MemoryListInput(limit=100)).results}
    assert listed_b == {b_project.memory_id: "project", pref.memory_id: "global"}
    listed_a = {h.id: h.scope for h in a.memory.memory_list(MemoryListInput(limit=100)).results}
    assert listed_a == {a_project.memory_id: "project", a_local.memory_id: "local", pref.memory_id: "global"}
    assert [h.id for h in a.memory.memory_list(MemoryListInput(scopes=["local"])).results] == [a_local.memory_id]
    exported_b = [json.loads(line) for line in (b.memory.export_memory(ExportMemoryInput()).data or "").splitlines()]
    assert {(r["id"], r["scope"]) for r in exported_b} == {(b_project.memory_id, "project"), (pref.memory_id, "global")}
    stats_b = b.memory.memory_statistics()
    assert set(stats_b.scopes) == {"project", "global"}
    assert stats_b.memory_counts["user_preference"]["active"] == 1 and stats_b.memory_counts["session"]["total"] == 0
    assert stats_b.sync_status == {"synced": 2, "pending": 0, "failed": 0}
    stats_a = a.memory.memory_statistics()
    assert stats_a.scopes["local"]["memory_counts"] == {"session": {"total": 1, "active": 1, "deleted": 0}}
    assert stats_a.storage["vector_store"]["points_per_type"]["session"] == 1

    # B's own projections hold B's and the global memories, never A's
    in_b_vectors: set[str] = set()
    for store in b.memory.scopes.opened():
        for memory_type in COLLECTIONS:
            in_b_vectors |= b.vectors.ids(store.projector.collection(memory_type))
    assert in_b_vectors == {b_project.memory_id, pref.memory_id}

    # a global memory changed in one project is current in the other; a delete reaches both
    updated = b.memory.memory_update(MemoryUpdateInput(
        memory_id=pref.memory_id, memory_type="user_preference", content=GLOBAL_PREF + " (and parametrize them)",
        expected_version=1,
    ))
    assert updated.scope == "global" and updated.version == 2
    hit = a.memory.memory_search(MemorySearchInput(query="pytest fixtures parametrize", scopes=["global"])).results[0]
    assert hit.id == pref.memory_id and hit.content.endswith("(and parametrize them)") and hit.provenance.version == 2
    deleted = a.memory.memory_delete(MemoryDeleteInput(memory_id=pref.memory_id, memory_type="user_preference"))
    assert deleted.scope == "global"
    assert pref.memory_id not in _search_ids(b, "pytest fixtures or setUp")
    assert pref.memory_id in _search_ids(b, "pytest fixtures or setUp", include_deleted=True)


def test_scope_rules_for_links_anchors_and_batches(two_projects) -> None:  # noqa: ANN001
    a, _ = two_projects
    project_memory = _add(a, "design", A_PROJECT, metadata={"title": "Charge retries", "design_type": "ADR", "status": "Accepted"})
    with pytest.raises(ToolError, match="a global memory can link only to global memories"):
        _add(a, "session", "A global note", scope="global", relationships=[{"type": "RELATES_TO", "target_id": project_memory.memory_id}])
    with pytest.raises(ToolError, match="not a global memory"):
        _add(a, "session", "A global note", scope="global", relationships=[{"type": "RELATES_TO", "target_id": "billing.charge"}])
    with pytest.raises(ToolError, match="cannot be anchored to code"):
        _add(a, "session", "A global note", scope="global", metadata={"anchors": ["billing.charge"]})
    pref = _add(a, "user_preference", GLOBAL_PREF, metadata=PREF_META, scope="GLOBAL")  # scope names are case-insensitive
    # project and local memories may link to global ones; the link shows from both ends
    local = _add(a, "session", A_LOCAL, scope="local", relationships=[{"type": "RELATES_TO", "target_id": pref.memory_id}])
    back = a.memory.memory_get(MemoryGetInput(memory_id=pref.memory_id, memory_type="user_preference", include_relationships=True))
    assert [(r.direction, r.target_id) for r in back.relationships] == [("incoming", local.memory_id)]

    with pytest.raises(ToolError, match="one memory_bulk_add writes one scope"):
        a.memory.memory_bulk_add(MemoryBulkAddInput(memories=[
            MemoryAddInput(memory_type="session", content="one", scope="local"),
            MemoryAddInput(memory_type="session", content="two"),
        ]))
    batch = a.memory.memory_bulk_add(MemoryBulkAddInput(scope="local", memories=[
        MemoryAddInput(memory_type="session", content=f"Local session note {i}") for i in range(3)
    ]))
    assert batch.scope == "local" and batch.added_count == 3
    assert {h.id for h in a.memory.memory_list(MemoryListInput(scopes=["local"], limit=100)).results} == {*batch.added_ids, local.memory_id}
    assert a.memory.memory_statistics().scopes["local"]["sync_status"] == {"synced": 4, "pending": 0, "failed": 0}


def test_jsonl_round_trip_keeps_scopes_and_markdown_exports_the_project_only(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    source_root, target_root = tmp_path / "source", tmp_path / "target"
    source_root.mkdir()
    target_root.mkdir()
    source = service_factory(source_root, global_dir=tmp_path / "g1")
    ids = {
        "project": _add(source, "design", A_PROJECT, metadata={"title": "Charge retries", "design_type": "ADR", "status": "Accepted"}).memory_id,
        "local": _add(source, "session", A_LOCAL, scope="local").memory_id,
        "global": _add(source, "user_preference", GLOBAL_PREF, metadata=PREF_META, scope="global").memory_id,
    }
    source.memory.export_memory(ExportMemoryInput(output_path="all.jsonl"))
    markdown = source.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    assert markdown.exported_count == 1 and len(list((source_root / "memories").rglob("*.md"))) == 1
    (target_root / "all.jsonl").write_text((source_root / "all.jsonl").read_text())

    target = service_factory(target_root, global_dir=tmp_path / "g2")
    result = target.memory.import_memory(ImportMemoryInput(input_path="all.jsonl"))
    assert (result.imported, result.errors) == (3, [])
    for scope, memory_id in ids.items():
        row = target.memory.scopes.locate(memory_id)
        assert row is not None and row.scope == scope
    assert _search_ids(target, "pytest fixtures or setUp")[ids["global"]] == "global"
    again = target.memory.import_memory(ImportMemoryInput(input_path="all.jsonl", scope="local"))
    assert (again.imported, again.skipped) == (0, 3)  # an id is known in whichever scope holds it
    bad = target.memory.import_memory(ImportMemoryInput(data=json.dumps({"memory_type": "session", "content": "x", "scope": "team"})))
    assert "scope 'team' is not one of project, local, global" in bad.errors[0]["error"]


def test_global_replica_rebuilds_from_the_global_ledger(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """The replica is derived data: written by another process, or deleted, it is caught up from the
    shared ledger's audit sequence."""
    global_dir = tmp_path / "global"
    other = Ledger(global_dir / "memory.db", scope="global")
    from resources.memory.ledger import NewMemory

    [written] = other.add([NewMemory(memory_type="session", content="Global note written by another project's process", metadata={})])
    other.close()
    root = tmp_path / "p"
    root.mkdir()
    svc = service_factory(root, global_dir=global_dir)
    hits = svc.memory.memory_search(MemorySearchInput(query="note written by another project"))
    assert [(h.id, h.scope, h.provenance.sync_status) for h in hits.results] == [(written.id, "global", "synced")]
    svc.close()
    (root / ".codemem" / "global_replica.db").unlink()
    again = service_factory(root, global_dir=global_dir)
    assert [h.id for h in again.memory.memory_search(MemorySearchInput(query="note written by another project")).results] == [written.id]
    assert again.memory.rebuild_projections()["failed"] == 0
    assert [h.id for h in again.memory.memory_search(MemorySearchInput(query="note written by another project")).results] == [written.id]


def test_local_scope_is_never_committed(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    root = tmp_path / "repo"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    git_init(root)
    svc = service_factory(root)
    _add(svc, "session", A_LOCAL, scope="local")
    svc.close()

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "-C", str(root), "check-ignore", "-q", path], check=False).returncode == 0

    # ignored by the directory's own .gitignore, whatever the project's .gitignore says ...
    assert ignored(".codemem/local/memory.db") and not ignored("main.py")
    # ... and by the .codemem/ entry `codemem init` adds
    apply_plan(plan_init(root))
    assert ".codemem/" in (root / ".gitignore").read_text().splitlines()
    (root / ".codemem" / "local" / ".gitignore").unlink()
    assert ignored(".codemem/local/memory.db")
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True, check=True)
    assert ".codemem" not in status.stdout


def test_us6_6_without_a_scope_a_personal_preference_goes_global_and_team_context_to_the_project(
    tmp_path: Path, service_factory,  # noqa: ANN001
) -> None:
    """Seed 002 US6-6: "the default scope is used (global for personal, project for team context)"."""
    root = tmp_path / "p"
    root.mkdir()
    svc = service_factory(root, global_dir=tmp_path / "global")
    assert _add(svc, "user_preference", GLOBAL_PREF, metadata=PREF_META).scope == "global"
    project_pref = {**PREF_META, "key": "tests.layout", "scope": "Project"}
    assert _add(svc, "user_preference", "Tests live beside the code in this repository", metadata=project_pref).scope == "project"
    assert _add(svc, "session", A_LOCAL).scope == "project"
    # a scope given wins
    named = {**PREF_META, "key": "tests.runner"}
    assert _add(svc, "user_preference", "Run tests with pytest -x", metadata=named, scope="project").scope == "project"
    # one batch writes one scope, the project unless it names one: a batch is not split by type
    batch = [{"memory_type": "user_preference", "content": "Prefer f-strings", "metadata": {**PREF_META, "key": "py.format"}},
             {"memory_type": "session", "content": "Reviewed the formatting rules"}]
    assert svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=batch)).scope == "project"

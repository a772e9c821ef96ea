"""``codemem mcp`` warms up right after its stores open (issue 18, item 2): the local model and
every vector collection a first search reads are loaded before the first call needs them, and
a call sent while the stores open waits for them and is answered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from query_server.ownership import ProjectHandle
from query_server.tools import TOOLS
from query_server.warm_start import OpeningHandle, start_first_build, warm_up
from resources.schemas.memory.kinds import MEMORY_TYPES
from resources.settings import Settings
from tests.conftest import FIXTURE_REPOS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    return root


def test_warm_up_loads_the_model_and_the_collections_without_error(project: Path) -> None:
    handle = ProjectHandle(Settings(project_root=project))
    try:
        service = handle.backend
        warm_up(handle)  # raises on any failure (the server only logs it)
        embedder = getattr(service.embedder, "inner", service.embedder)
        if hasattr(embedder, "loaded"):
            assert embedder.loaded
        held = [t for store in service.memory.scopes.opened() for t in MEMORY_TYPES if t in store.projected.memory_types(MEMORY_TYPES)]
        assert service.memory.open_collections() == len(held)
    finally:
        handle.close()


def test_only_the_collections_of_held_memory_types_are_opened_and_searched(project: Path) -> None:
    handle = ProjectHandle(Settings(project_root=project))
    try:
        service = handle.backend
        call = lambda name, **fields: handle.call(TOOLS[name], TOOLS[name].input(**fields))
        kept = call("memory_add", memory_type="test_history", content="The flaky checkout test waits on a real clock.",
                    metadata={"test_name": "test_checkout", "test_file": "tests/test_checkout.py", "status": "Failed"})
        gone = call("memory_add", memory_type="session", content="Switched the Makefile to tabs for indentation.")
        call("memory_delete", memory_id=gone.memory_id, memory_type="session")
        service.vectors.close()  # nothing open: a search opens what it reads
        found = call("memory_search", query="which test is flaky and why")
        assert [hit.id for hit in found.results][:1] == [kept.memory_id]
        opened = set(service.vectors._shards)  # which shards the search loaded
        assert "test_history" in opened and "session_history" not in opened, opened  # its only memory is deleted
        assert not {"function_index", "user_preferences"} & opened  # types nobody wrote
        with_deleted = call("memory_search", query="tabs in the Makefile", include_deleted=True)
        assert gone.memory_id in [hit.id for hit in with_deleted.results]
    finally:
        handle.close()


def test_a_call_sent_while_the_stores_open_is_answered(project: Path) -> None:
    opening = OpeningHandle(lambda: ProjectHandle(Settings(project_root=project)), warm=warm_up)
    opening.start()
    try:
        added = opening.call(TOOLS["memory_add"], TOOLS["memory_add"].input(
            memory_type="session", content="Order totals are computed in cents to avoid float rounding."))
        found = opening.call(TOOLS["memory_search"], TOOLS["memory_search"].input(query="how is the order total computed"))
        assert found.results and found.results[0].id == added.memory_id
    finally:
        opening.close()


def test_a_run_that_finds_nothing_changed_never_says_indexing_is_in_progress(project: Path, service_factory) -> None:  # noqa: ANN001
    """codemem mcp starts an index run at every start; on a current index it only compares files
    with the manifest, and index_status/code_search must not say "indexing in progress" meanwhile
    (a first build and a run writing a changed file do)."""
    from resources.schemas.tools import IndexInput

    svc = service_factory(project)
    seen: list[object] = []
    record = lambda phase, done, total: seen.append(svc.background_index_progress)  # noqa: E731
    svc.index(IndexInput(embed=False), progress=record)
    assert any(value is not None for value in seen)  # the first build
    seen.clear()
    svc.index(IndexInput(embed=False), progress=record)
    assert seen and all(value is None for value in seen), seen
    changed = next(project.rglob("*.py"))
    changed.write_text(changed.read_text() + "\n\ndef added_for_the_status_test():\n    return 1\n")
    seen.clear()
    svc.index(IndexInput(embed=False), progress=record)
    assert any(value is not None and value[0] == "parse" for value in seen), seen
    assert svc.background_index_progress is None


def test_a_code_search_sent_during_the_first_build_of_a_small_project_waits_for_its_first_symbols(project: Path) -> None:
    """codemem mcp on a project never indexed starts the first build at once; a code_search sent
    meanwhile waits for its first written symbols (briefly) instead of "retry in a moment"."""
    opening = OpeningHandle(lambda: start_first_build(ProjectHandle(Settings(project_root=project))), warm=warm_up)
    opening.start()
    try:
        found = opening.call(TOOLS["code_search"], TOOLS["code_search"].input(query="merge request and session settings", limit=5))
        assert "merge_settings" in [hit.name for hit in found.results], found
    finally:
        opening.close()


def test_a_process_that_forwards_to_the_owner_drops_the_model_it_preloaded() -> None:
    from types import SimpleNamespace

    from resources.embeddings import local

    local.LocalMiniLMEmbedder(max_tokens=96).preload()
    try:
        warm_up(SimpleNamespace(is_owner=False))  # forwards every call: never embeds
        assert not local._preloads
    finally:
        local.LocalMiniLMEmbedder.discard_preloaded()

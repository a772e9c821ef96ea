"""Subgraphs written in a thread while the graph starts (``pipelines.index_graph_writer``).

A run whose embedded graph is still starting commits each batch's points and manifest rows at
once and queues its subgraphs; a thread writes them, in order, once the graph is up, while the run
computes the cross-file resolution from the manifest. Everything is real: files on disk, the
embedded FalkorDB (its start held back a second, as loading a large graph holds it), qdrant-edge
and the manifest.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import pipelines.indexer as indexer
from pipelines.index_graph_writer import GraphWriter
from resources.faults import FaultInjected, raising_at
from tests.conftest import write_files
from tests.pipelines.test_incremental_equivalence import assert_equal_indexes, code_index, open_service, plain_index
from tests.reliability.graph_servers import stop_graph_servers

FILES = 150
"""Three batches of the indexer (``BATCH_FILES`` = 64)."""


def _tree(root: Path) -> None:
    """Modules that import and call one another, so cross-file edges join the batches."""
    files = {}
    for n in range(FILES):
        callee = (n + 1) % FILES
        files[f"pkg/m{n}.py"] = (
            f"from pkg.m{callee} import f{callee}\n\n"
            f"def f{n}(x):\n    return f{callee}(x) + {n}\n\n"
            f"class C{n}:\n    def run(self):\n        return f{n}(1)\n"
        )
    write_files(root, files)


class _Recording(GraphWriter):
    """The run's writer, recording how it ran (the writer itself unchanged)."""

    made: list[_Recording] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.background_mode = kwargs["background"]
        self.most_queued = 0
        _Recording.made.append(self)

    def submit(self, prepared: Any, points: int) -> None:
        super().submit(prepared, points)
        with self._changed:
            self.most_queued = max(self.most_queued, len(self._queue) + self._busy)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> list[_Recording]:
    _Recording.made = []
    monkeypatch.setattr(indexer, "GraphWriter", _Recording)
    return _Recording.made


def _slow_start(svc: Any, seconds: float) -> None:
    """Hold the graph's start back, as FalkorDB loading a large graph does."""
    start = svc.graph._factory

    def slow() -> Any:
        time.sleep(seconds)
        return start()

    svc.graph._factory = slow


def _clean(root: Path, scratch: Path) -> dict[str, Any]:
    """The index of a copy of ``root`` written batch by batch with the graph started first."""
    fresh = scratch / "clean"
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(".codemem"))
    svc = open_service(fresh, dense=False)
    try:
        assert svc.graph.store is not None  # started now: the run writes each subgraph in its own thread
        assert plain_index(svc, False)["failed"] == []
        return code_index(svc)
    finally:
        svc.close()


def _assert_builds_clean(got: dict[str, Any], root: Path, scratch: Path) -> None:
    """``got`` is the index ``_clean`` builds of ``root`` (the graph servers under ``scratch``
    stopped after, whatever the outcome)."""
    try:
        assert_equal_indexes(got, _clean(root, scratch))
    finally:
        stop_graph_servers(scratch)


def test_subgraphs_queued_while_the_graph_starts_give_the_index_one_written_in_order_gives(
    tmp_path: Path, recording: list[_Recording],
) -> None:
    root = tmp_path / "repo"
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        assert not svc.graph.started
        _slow_start(svc, 1.5)
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == FILES
        assert report["edges_added"] > 0
        assert svc.manifest.in_flight() == set()
        got = code_index(svc)
    finally:
        svc.close()
    (queued,) = recording
    assert queued.background_mode and queued.most_queued >= 2, "the batches did not wait for the graph together"
    _assert_builds_clean(got, root, tmp_path)
    assert not recording[1].background_mode


def test_a_run_stopped_with_subgraphs_queued_leaves_them_for_the_next_run(tmp_path: Path, recording: list[_Recording]) -> None:
    """A fault in the writer (as a kill before a queued subgraph is written) stops the run; the
    files whose rows were committed stay in flight, and the next run redoes them."""
    root = tmp_path / "repo"
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        _slow_start(svc, 1.0)
        with raising_at("index:before_graph"), pytest.raises(FaultInjected):
            plain_index(svc, False)
        left = svc.manifest.in_flight()
        committed = set(svc.manifest.files())
        assert committed and committed <= left, "a file recorded without its subgraph is not in flight"
    finally:
        svc.close()
    assert recording[0].background_mode
    svc = open_service(root, dense=False)
    try:
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == FILES
        got = code_index(svc)
    finally:
        svc.close()
    _assert_builds_clean(got, root, tmp_path)


def test_a_graph_write_that_fails_in_the_thread_fails_its_files_and_the_next_run_redoes_them(
    tmp_path: Path, recording: list[_Recording],
) -> None:
    root = tmp_path / "repo"
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        real = svc.graph.store  # the lazy store's own start, then the failing write in its place
        original = real.replace_files
        calls = [0]

        def second_fails(paths: Any, nodes: Any, edges: Any, gone: Any = None) -> Any:
            calls[0] += 1
            if calls[0] == 2:
                raise ConnectionError("graph went away")
            return original(paths, nodes, edges, gone=gone)

        real.replace_files = second_fails
        svc.graph._store = None  # started again lazily (the same server), in the run's writer thread
        svc.graph._factory = lambda: real
        _slow_start(svc, 0.5)  # the run finds it still starting and writes its subgraphs in a thread
        report = plain_index(svc, False)
        failed = {item["path"] for item in report["failed"]}
        assert len(failed) == 64 and all("graph went away" in item["error"] for item in report["failed"])
        assert report["files_indexed"] == FILES - 64
        assert svc.manifest.in_flight() == failed
        # no resolution applied over files the graph lacks: the next run resolves with them
        assert report["edges_added"] == 0 and any("a graph write failed" in n for n in report["notes"])
        assert svc.manifest.unsettled_edges() == set() and svc.manifest.dirty()
        real.replace_files = original
        healed = plain_index(svc, False)
        assert healed["failed"] == [] and healed["files_indexed"] == 64
        got = code_index(svc)
    finally:
        svc.close()
    assert recording[0].background_mode
    _assert_builds_clean(got, root, tmp_path)


def test_the_queue_keeps_to_its_bound(tmp_path: Path, recording: list[_Recording], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_QUEUED_ITEMS`` nodes and edges queued, the run waits for the graph before it
    queues more (one batch at a time here)."""
    import pipelines.index_graph_writer as writer

    monkeypatch.setattr(writer, "MAX_QUEUED_ITEMS", 1)
    root = tmp_path / "repo"
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        _slow_start(svc, 0.5)
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == FILES
    finally:
        svc.close()
        stop_graph_servers(tmp_path)
    (run,) = recording
    assert run.background_mode and run.most_queued == 1


def test_a_graph_that_cannot_start_fails_the_files_and_raises_nothing(tmp_path: Path, recording: list[_Recording]) -> None:
    """The run reports every file failed (as when its graph writes fail one by one), leaves no edge
    unsettled (a whole-repository resolution next time), and the run after it, with the graph
    back, builds what a clean index does."""
    from resources.graph.model import GraphUnavailable

    root = tmp_path / "repo"
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        start = svc.graph._factory

        def unavailable() -> Any:
            raise GraphUnavailable("the embedded FalkorDB cannot start here")

        svc.graph._factory = unavailable
        report = plain_index(svc, False)
        assert len(report["failed"]) == FILES and all("cannot start" in item["error"] for item in report["failed"])
        assert report["files_indexed"] == 0
        assert svc.manifest.unsettled_edges() == set()
        assert svc.manifest.in_flight() == {f"pkg/m{n}.py" for n in range(FILES)}
        svc.graph._factory = start
        healed = plain_index(svc, False)
        assert healed["failed"] == [] and healed["files_indexed"] == FILES
        got = code_index(svc)
    finally:
        svc.close()
    assert recording[0].background_mode
    _assert_builds_clean(got, root, tmp_path)


def _pull(root: Path) -> None:
    """One file deleted beside three changed (each now also multiplies)."""
    (root / "pkg/m5.py").unlink()
    write_files(root, {f"pkg/m{n}.py": f"from pkg.m{n + 1} import f{n + 1}\n\n\ndef f{n}(x):\n    return f{n + 1}(x) * {n}\n"
                       for n in (10, 70, 130)})


def _indexed_once(root: Path) -> None:
    _tree(root)
    svc = open_service(root, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
    finally:
        svc.close()


def test_a_deleted_files_subgraph_is_removed_by_the_writer_after_the_queued_ones(tmp_path: Path, recording: list[_Recording]) -> None:
    """A pull while the graph starts: the deleted file leaves the manifest at once (in flight), its
    subgraph is removed in the writer after the changed files' subgraphs, and the run's index is
    the one a clean run builds."""
    root = tmp_path / "repo"
    _indexed_once(root)
    _pull(root)
    svc = open_service(root, dense=False)
    try:
        _slow_start(svc, 0.5)
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == 3 and report["files_deleted"] == 1
        assert svc.manifest.in_flight() == set() and "pkg/m5.py" not in svc.manifest.paths()
        got = code_index(svc)
    finally:
        svc.close()
    assert recording[1].background_mode
    _assert_builds_clean(got, root, tmp_path)


def test_a_deleted_files_subgraph_that_cannot_be_removed_stays_in_flight_and_the_next_run_removes_it(
    tmp_path: Path, recording: list[_Recording],
) -> None:
    """The graph fails the removal: the file is reported failed and stays in flight, no resolution
    is applied over a graph that still holds it, and the next run finishes the deletion (and counts
    it)."""
    root = tmp_path / "repo"
    _indexed_once(root)
    _pull(root)
    svc = open_service(root, dense=False)
    try:
        real = svc.graph.store
        original = real.delete_files

        def fails(paths: Any) -> Any:
            raise ConnectionError("graph went away")

        real.delete_files = fails
        svc.graph._store = None  # started again lazily (the same server), in the run's writer thread
        svc.graph._factory = lambda: real
        _slow_start(svc, 0.5)
        report = plain_index(svc, False)
        assert [item["path"] for item in report["failed"]] == ["pkg/m5.py"] and "graph went away" in report["failed"][0]["error"]
        assert report["files_indexed"] == 3 and report["files_deleted"] == 0  # counted by the run that finishes it
        assert svc.manifest.in_flight() == {"pkg/m5.py"} and "pkg/m5.py" not in svc.manifest.paths()
        assert report["edges_added"] == 0 and any("a graph write failed" in n for n in report["notes"])
        real.delete_files = original
        healed = plain_index(svc, False)
        assert healed["failed"] == [] and healed["files_deleted"] == 1 and svc.manifest.in_flight() == set()
        got = code_index(svc)
    finally:
        svc.close()
    assert recording[1].background_mode
    _assert_builds_clean(got, root, tmp_path)

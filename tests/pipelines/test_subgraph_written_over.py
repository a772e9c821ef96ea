"""A rewritten file's subgraph written over the graph's (``pipelines.index_writes.write_subgraphs``).

An edit keeps the file's nodes that still exist (its file node too), with their cross-file edges:
only the nodes that went are dirty for the resolution, the file in its scope, so an edge into a kept function from a
file the edit does not concern is never removed and put back. A file an interrupted run left in
flight is replaced whole (the graph may hold either write). Everything is real: files on disk, the
embedded FalkorDB, qdrant-edge and the manifest.
"""

from __future__ import annotations

import pickle
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import pipelines.index_writes as index_writes
from pipelines.records import file_id, symbol_id
from resources.faults import FaultInjected, raising_at
from tests.conftest import write_files
from tests.pipelines.test_incremental_equivalence import assert_equal_indexes, clean_index, code_index, open_service, plain_index
from tests.reliability.graph_servers import stop_graph_servers

BEFORE = {
    "a.py": "def f():\n    return 1\n\n\ndef g():\n    return 2\n\n\ndef h():\n    return 3\n\n\nclass K:\n    pass\n",
    "b.py": "from a import f, g, h\n\n\ndef use():\n    return f() + g() + h()\n",
    "c.py": "from a import K\n\n\ndef make():\n    return K()\n",
}
AFTER = (  # e added above f (every line moves), g's body changed, h deleted, K now a function
    "def e():\n    return f()\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2 + 2\n\n\ndef K():\n    return 0\n"
)


def _edges(svc: Any) -> dict[tuple[str, str, str], str]:
    """The graph's relationships between code nodes, with their ``created_at``."""
    _, rows, _ = svc.graph.read_query(
        "MATCH (a)-[r]->(b) WHERE a:File OR a:Function OR a:Class "
        "RETURN a.id AS a, type(r) AS t, b.id AS b, r.created_at AS at", {}, 10_000)
    return {(row["a"], row["t"], row["b"]): row["at"] for row in rows}


@pytest.fixture
def repo(tmp_path: Path):  # noqa: ANN201
    root = tmp_path / "repo"
    write_files(root, BEFORE)
    yield root
    stop_graph_servers(tmp_path)


def _killed_after_an_edit(repo: Path, text: str, fault: str) -> None:
    """Index the tree, write ``text`` to a.py, and index again, the run killed at ``fault``."""
    svc = open_service(repo, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
        write_files(repo, {"a.py": text})
        with raising_at(fault), pytest.raises(FaultInjected):
            plain_index(svc, False)
    finally:
        svc.close()


def _spy_on_touched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[set[str], set[str]]]:
    """The dirty ids and the files written over that each resolution of the run starts from (the
    real ``plan_edges`` runs)."""
    seen: list[tuple[set[str], set[str]]] = []
    plan = index_writes.plan_edges

    def recording(ctx: Any, touched_ids: set[str], rewritten: set[str] | None = None) -> Any:
        seen.append((set(touched_ids), set(rewritten or ())))
        return plan(ctx, touched_ids, rewritten)

    monkeypatch.setattr(index_writes, "plan_edges", recording)
    return seen


def test_an_edit_keeps_the_files_nodes_and_their_edges_and_ends_as_a_clean_index(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = open_service(repo, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
        before = _edges(svc)
        time.sleep(1.1)  # an edge written again would have a later created_at (seconds)
        write_files(repo, {"a.py": AFTER})
        touched = _spy_on_touched(monkeypatch)
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == 1
        after = _edges(svc)
        _, nodes, _ = svc.graph.read_query("MATCH (n:Function {id: $id}) RETURN n.start_line AS line", {"id": symbol_id("a.py", "f")}, 1)
        got = code_index(svc)
    finally:
        svc.close()
    f, g, h, k = (symbol_id("a.py", name) for name in ("f", "g", "h", "K"))
    use = symbol_id("b.py", "use")
    # only the nodes that went (h; K, now a Function) are dirty; the file is in scope, written over
    assert touched == [({h, k}, {"a.py"})]
    # the edges into the kept functions from b.py, which mentions no name whose definition changed, stayed
    imports_of_a = [edge for edge in before if edge[1] == "IMPORTS" and edge[2] == file_id("a.py")]
    assert imports_of_a  # (b.py's and c.py's imports of a.py: into the file's node, kept too)
    for kept in ((use, "CALLS", f), (use, "CALLS", g), *imports_of_a):
        assert after[kept] == before[kept]
    assert (use, "CALLS", h) not in after and (symbol_id("c.py", "make"), "CALLS", k) in after
    assert nodes == [{"line": 5}]  # the kept node's properties are this write's
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))


def test_a_file_left_in_flight_by_a_killed_run_is_replaced_whole(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the manifest took the edit and before the graph did: the graph still holds the
    last write (h among it), which the next run replaces whole, every node of the file dirty."""
    _killed_after_an_edit(repo, AFTER, "index:before_graph")
    svc = open_service(repo, dense=False)
    try:
        assert svc.manifest.in_flight() == {"a.py"}
        touched = _spy_on_touched(monkeypatch)
        assert plain_index(svc, False)["failed"] == []
        got = code_index(svc)
    finally:
        svc.close()
    e, f, g = (symbol_id("a.py", name) for name in ("e", "f", "g"))
    assert {file_id("a.py"), e, f, g} <= touched[0][0]
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))
    shutil.rmtree(tmp_path / "clean", ignore_errors=True)


def test_a_dagster_step_run_again_after_its_commit_replaces_the_subgraph_whole(repo: Path, tmp_path: Path) -> None:
    """The graph step of a bucket fails after its manifest commit, and is run again from the bucket
    as Dagster stored it: the rows already hold the write, so the graph may hold either; the
    subgraph is replaced whole (h, which the first attempt never removed, goes)."""
    from pipelines.index_prepare import ParseLimits
    from pipelines.stages import load_bucket_graph, plan_buckets, prepare_bucket, write_bucket_vectors

    svc = open_service(repo, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
        write_files(repo, {"a.py": AFTER})
        ctx = svc.ctx
        plan = next(p for p in plan_buckets(ctx.settings, ctx.manifest).values() if p.changed)
        bucket = write_bucket_vectors(ctx, prepare_bucket(plan, ParseLimits.of(ctx.settings)), embed=False)
        stored = pickle.dumps(bucket)
        real = svc.graph.replace_files

        def failing(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("graph went away")

        svc.graph.replace_files = failing
        with pytest.raises(ConnectionError):
            load_bucket_graph(ctx, bucket)
        svc.graph.replace_files = real
        load_bucket_graph(ctx, pickle.loads(stored))  # (re-executed from the failure)
        index_writes.resolve_pending(ctx)
        got = code_index(svc)
    finally:
        svc.close()
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))


def test_a_kept_functions_call_that_moved_has_its_new_line(repo: Path, tmp_path: Path) -> None:
    """A function added above a kept one moves its calls: the call edge it keeps is written again
    with its new line, in the graph and in the manifest's record (as a clean index has it)."""
    write_files(repo, {"a.py": "from b import x\n\n\ndef f():\n    return x()\n", "b.py": "def x():\n    return 1\n"})
    svc = open_service(repo, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
        write_files(repo, {"a.py": "from b import x\n\n\ndef e():\n    return 0\n\n\ndef f():\n    return x()\n"})
        assert plain_index(svc, False)["failed"] == []
        call = (symbol_id("a.py", "f"), "CALLS", symbol_id("b.py", "x"))
        recorded = svc.manifest.resolved_edge_properties([call])
        in_graph = _edges_with(svc, call)
        got = code_index(svc)
    finally:
        svc.close()
    assert recorded[call]["line_number"] == 9 and in_graph == 9
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))


def _edges_with(svc: Any, edge: tuple[str, str, str]) -> Any:
    """The graph's ``line_number`` of one relationship."""
    _, rows, _ = svc.graph.read_query(
        f"MATCH (a {{id: $a}})-[r:{edge[1]}]->(b {{id: $b}}) RETURN r.line_number AS line", {"a": edge[0], "b": edge[2]}, 1)
    return rows[0]["line"]


def test_a_resolution_killed_after_a_write_over_is_finished_by_the_next_run(repo: Path, tmp_path: Path) -> None:
    """Killed while the resolution changed the graph, after an edit that deleted no node (nothing
    dirty, the file only recorded as written over): the next run, with nothing changed on disk,
    still resolves, and ends as a clean index."""
    _killed_after_an_edit(repo, BEFORE["a.py"] + "\n\ndef m():\n    return f() + g()\n", "index:resolving")
    svc = open_service(repo, dense=False)
    try:
        assert svc.manifest.dirty() == set() and svc.manifest.rewritten() == {"a.py"}
        report = plain_index(svc, False)
        assert report["failed"] == [] and report["files_indexed"] == 0
        assert svc.manifest.rewritten() == set()
        got = code_index(svc)
    finally:
        svc.close()
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))


def test_a_forced_bucket_job_writes_its_changed_files_whole(repo: Path, tmp_path: Path) -> None:
    """A forced run of the bucket assets rewrites every file whole, as `codemem index --force`
    does, the changed ones too (a repair: the graph may hold them otherwise than the rows say)."""
    from pipelines.index_prepare import ParseLimits
    from pipelines.stages import load_bucket_graph, plan_buckets, prepare_bucket, write_bucket_vectors

    svc = open_service(repo, dense=False)
    try:
        assert plain_index(svc, False)["failed"] == []
        write_files(repo, {"a.py": AFTER})
        ctx = svc.ctx
        plans = plan_buckets(ctx.settings, ctx.manifest, force=True)
        buckets = [pickle.loads(pickle.dumps(prepare_bucket(plan, ParseLimits.of(ctx.settings))))
                   for plan in plans.values() if plan.changed]
        for bucket in buckets:
            write_bucket_vectors(ctx, bucket, embed=False)
            load_bucket_graph(ctx, bucket)
        written = {p.state.path: p.replace_whole for bucket in buckets for p in bucket.prepared}
        assert written == {"a.py": True, "b.py": True, "c.py": True}
        assert file_id("a.py") in ctx.manifest.dirty() and ctx.manifest.rewritten() == set()
        index_writes.resolve_pending(ctx)
        got = code_index(svc)
    finally:
        svc.close()
    assert_equal_indexes(got, clean_index(repo, tmp_path, dense=False))

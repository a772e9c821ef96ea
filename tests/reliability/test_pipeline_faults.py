"""The Dagster index pipeline under faults (issue "Dagster pipeline", item 6): a ``codemem index``
run SIGKILLed in the middle of a stage leaves stores that the next run repairs into exactly the
stores a clean index builds, the run after that has nothing to do, and re-materializing a bucket
(``index_buckets`` with ``force``) twice changes nothing.

Everything is real: a subprocess running ``pipelines.dagster.run.materialize_index`` (the
``codemem_index`` job run ``codemem index`` makes: the plain index, recorded per touched bucket) on
a tree of 220 files, SIGKILLed by the test; the project's SQLite Dagster instance, qdrant-edge, the
embedded FalkorDB and the manifest. The run is in-process (``instance=``, the index inside the
job's op), or, in one case, the default path: the index in the subprocess and a recorder child
(``pipelines.dagster.recorder``) recording the run, which must fail the run and exit when its
parent dies. The subprocess only wraps the step functions the index calls (``pipelines.indexer``'s,
from ``pipelines.index_writes``, and the checks of ``pipelines.dagster.run``) so that it prints a line
when it enters one (no fault point in the code); the test waits for the line of the step it aims
at and kills, then checks from the stores that the kill landed where intended. Where the step is
short, the wrapper holds the aimed call at its entry until the kill lands (``hold``), so the kill
lands at that point whatever the machine's speed; the function itself is unchanged.
The embedded FalkorDB's ``redis-server`` is daemonized and outlives its SIGKILLed owner: the test
either stops it (SIGTERM) or lets the next open reuse it, and stops whatever is left under its
tmp dir at the end (matching the server's working directory, as the memory fault tests do).

Found here and fixed: a killed run stayed STARTED in the project's Dagster instance, holding the
daemon's single run slot (now every sensor tick and ``codemem index`` mark such runs failed); and
a run killed while its parser pool worked left the pool's processes running (workers now leave
when the indexing process is gone).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pipelines.buckets import bucket_of
from tests.conftest import FIXTURE_REPOS
from tests.pipelines.dagster.test_dagster import _snapshot
from tests.reliability.children import child_env, session_members
from tests.reliability.graph_servers import graph_servers_under, stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
SIGKILLED = -signal.SIGKILL
GENERATED_MODULES = 200  # + 10 __init__.py + 10 fixture files: 220 ≥ PARALLEL_THRESHOLD, so a first index parses in a pool
RUN_TIMEOUT_S = 240.0


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _write_tree(root: Path, modules: int) -> None:
    """Every fixture repository plus ``modules`` generated Python modules whose functions and
    classes call and import each other across files (so across buckets)."""
    shutil.copytree(FIXTURE_REPOS, root)
    for i in range(modules):
        pkg = root / "gen" / f"pkg{i % 10}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").touch()
        j, k = (i + 1) % modules, (i * 7 + 3) % modules
        lines = [
            f"from gen.pkg{j % 10}.mod{j} import func_{j}_0",
            f"from gen.pkg{k % 10}.mod{k} import Model{k}",
            "",
        ]
        for f in range(5):
            body = f"func_{j}_0(x) + {f}" if f else f"x + {i}"
            lines += [
                f"def func_{i}_{f}(x):",
                f'    """Step {f} of the module {i} pipeline."""',
                f"    y = {body}",
                f"    return Model{k}(y).value()",
                "",
            ]
        lines += [
            f"class Model{i}:",
            f'    """A value of stage {i}."""',
            "",
            "    def __init__(self, v):",
            "        self.v = v",
            "",
            "    def value(self):",
            f"        return func_{i}_1(self.v) if self.v > {i} else self.v",
            "",
        ]
        (pkg / f"mod{i}.py").write_text("\n".join(lines), encoding="utf-8")


def _without_times(value: Any) -> Any:
    """``value`` with every ``*_at`` key (at any depth) left out."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not k.endswith("_at")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def _strict_snapshot(svc: Any) -> dict[str, Any]:
    """``_snapshot`` plus what it leaves out: every manifest column but mtimes and times, the
    symbols' full rows, the references kept for resolution, the dirty set, and every property of
    graph nodes and edges except the ``*_at`` times."""
    ctx = svc.ctx
    snap = _snapshot(svc)
    snap["file_rows"] = {
        p: {k: v for k, v in asdict(s).items() if k not in ("mtime_ns", "indexed_at")} for p, s in ctx.manifest.files().items()
    }
    snap["symbol_rows"] = sorted((asdict(s) for s in ctx.manifest.all_symbols()), key=lambda r: r["id"])
    snap["refs"] = ctx.manifest.all_refs()
    snap["dirty"] = sorted(ctx.manifest.dirty())
    snap["rewritten"] = sorted(ctx.manifest.rewritten())
    # code nodes and edges in full; the design layer's memory nodes get fresh UUIDs per project
    # (``_snapshot`` compares their counts per label)
    code = "(n:File OR n:Module OR n:Class OR n:Function)"
    _, nodes, truncated = ctx.graph.read_query(f"MATCH (n) WHERE {code} RETURN n ORDER BY n.id", {}, 100_000)
    assert not truncated
    snap["node_props"] = [_without_times(row["n"]) for row in nodes]
    _, edges, truncated = ctx.graph.read_query(
        f"MATCH (a)-[r]->(n) WHERE {code} AND (a:File OR a:Module OR a:Class OR a:Function) "
        "RETURN a.id AS a, type(r) AS t, n.id AS b, r ORDER BY a, t, b", {}, 100_000
    )
    assert not truncated
    snap["edge_props"] = sorted(((row["a"], row["t"], row["b"], _without_times(row["r"])) for row in edges), key=repr)
    return snap


def _disk_hashes(root: Path) -> dict[str, str]:
    """Every indexable file of the tree with its SHA-256 (what the manifest must hold)."""
    from pipelines.discovery import discover, resolve_project_root
    from pipelines.index_prepare import _hash_file
    from resources.settings import Settings

    settings = Settings(project_root=root)
    found = discover(resolve_project_root(settings.resolved_root()), extensions=settings.extensions,
                     max_file_bytes=settings.max_file_bytes)
    return {s.path: _hash_file(s.absolute_path) for s in found.files}


def _check_results(instance: Any, run_id: str) -> dict[str, bool]:
    """The asset checks a run evaluated: {check name: passed}."""
    from dagster import DagsterEventType

    records = instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
    return {r.dagster_event.event_specific_data.check_name: r.dagster_event.event_specific_data.passed for r in records}


def _assert_consistent(handle: Any, root: Path) -> None:
    """The three stores agree, no edge dangles, nothing is left dirty, and the manifest holds
    every file on disk with its disk hash (and nothing else)."""
    from pipelines.indexer import CODE_COLLECTION
    from pipelines.stages import dangling_edges, store_consistency

    ctx = handle.backend.ctx
    diff = store_consistency(ctx)
    assert diff == {k: [] for k in diff}, diff
    assert dangling_edges(ctx) == []
    assert ctx.manifest.dirty() == set() and ctx.manifest.rewritten() == set()
    indexed = {p: s.content_hash for p, s in ctx.manifest.files().items()}
    assert indexed == _disk_hashes(root)
    symbols = ctx.manifest.counts()["symbols"]
    assert sum(s.symbol_count for s in ctx.manifest.files().values()) == symbols == ctx.vectors.count(CODE_COLLECTION)


# --------------------------------------------------------------------------------------------
# 1. SIGKILL during a `codemem index` Dagster run
# --------------------------------------------------------------------------------------------

_INDEX_RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import time

    import pipelines.dagster.run as run
    import pipelines.index_graph_writer as index_graph_writer
    import pipelines.indexer as indexer
    from pipelines.dagster.run import materialize_index, project_instance
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    held = sys.argv[2]  # "name call": the call that waits at its entry for the kill ("" none)
    recorded = sys.argv[3] == "recorder"  # the default path: a recorder child records the run

    def mark(*words):
        print("MARK", *words, flush=True)

    def traced(module, name):  # announce each call of a step function of the index (no behaviour change)
        inner = getattr(module, name)
        calls = [0]

        def wrapper(*args, **kwargs):
            calls[0] += 1
            mark(name, calls[0])
            if held == f"{name} {calls[0]}":
                time.sleep(120)  # the kill lands here, before the call
            return inner(*args, **kwargs)

        setattr(module, name, wrapper)

    for module, name in ((run, "_nothing_to_do"), (indexer, "_prepare_all"), (indexer, "write_vectors"),
                         (indexer, "commit_manifest"), (index_graph_writer, "write_subgraphs"), (indexer, "delete_files"),
                         (indexer, "plan_pending"), (run, "files_match_disk")):
        traced(module, name)
    root = Path(sys.argv[1])
    handle = ProjectHandle(Settings(project_root=root))
    mark("owner", handle.is_owner)
    if recorded:
        report = materialize_index(handle.backend.owned_stores(), embed=False)
    else:
        with project_instance(handle.state_dir) as instance:
            report = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance)
    mark("done", report.ok, report.files_indexed)
    handle.close()
    mark("closed")
    """
)


def _marks(stdout: Path) -> list[str]:
    try:
        text = stdout.read_text()
    except OSError:
        return []
    return [line.removeprefix("MARK ") for line in text.splitlines() if line.startswith("MARK ")]


def _kill_run_at(
    root: Path, logs: Path, stage: str, call: int, delay_s: float, *, hold: bool = False, recorder: bool = False,
) -> tuple[int, list[str]]:
    """Start the index run, SIGKILL it ``delay_s`` after it enters the ``call``-th call of
    ``stage`` (``hold``: that call waits at its entry for the kill; ``recorder``: the run is
    recorded by a recorder child, the default ``codemem index`` path); returns its pid and marks.
    Skips (never passes silently) when the run ended first."""
    out, err = logs / "stdout.txt", logs / "stderr.txt"
    held = f"{stage} {call}" if hold else ""
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", _INDEX_RUN, str(root), held, "recorder" if recorder else "in-process"],
            stdout=stdout, stderr=stderr, env=child_env(drop=["CODEMEM_PROJECT_ROOT"]),
            cwd=str(REPO_ROOT), start_new_session=True,
        )
    wanted = f"{stage} {call}"
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while wanted not in _marks(out):
            if proc.poll() is not None:
                raise AssertionError(f"the run ended (rc {proc.returncode}) before {wanted!r}: {_marks(out)[-5:]}\n"
                                     f"{err.read_text()[-3000:]}")
            assert time.monotonic() < deadline, f"no {wanted!r} in {RUN_TIMEOUT_S} s: {_marks(out)[-5:]}"
            time.sleep(0.01)
        time.sleep(delay_s)
        finished_first = proc.poll() is not None
        if not finished_first:
            os.kill(proc.pid, signal.SIGKILL)
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    marks = _marks(out)
    if finished_first or any(m.startswith("done") for m in marks):
        pytest.skip(f"the run finished before the kill ({stage} #{call} + {delay_s} s): nothing was interrupted")
    assert rc == SIGKILLED, (rc, marks[-5:], err.read_text()[-3000:])
    return proc.pid, marks


@pytest.fixture(scope="module")
def kill_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree every kill test indexes (copied per test): 220 files, so a first index parses in a
    pool and writes four batches (``BATCH_FILES``) across about 150 buckets."""
    root = tmp_path_factory.mktemp("kill-tree") / "tree"
    _write_tree(root, GENERATED_MODULES)
    return root


@pytest.fixture(scope="module")
def clean_index(kill_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The stores a clean, uninterrupted ``codemem index`` (Dagster, no dense vectors) builds
    from a fresh copy of the tree."""
    from pipelines.dagster.run import materialize_index, project_instance
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    base = tmp_path_factory.mktemp("clean")
    root = base / "tree"
    shutil.copytree(kill_tree, root)
    handle = ProjectHandle(Settings(project_root=root))
    try:
        assert handle.is_owner
        with project_instance(handle.state_dir) as instance:
            report = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance)
        assert report.ok and report.files_indexed == len(_disk_hashes(root)), report.as_dict()
        _assert_consistent(handle, root)
        snap = _strict_snapshot(handle.backend)
    finally:
        handle.close()
    assert stop_graph_servers(base) == []
    return snap


class StrayProcesses(AssertionError):
    """Processes of a SIGKILLed run still alive 10 s after it died."""


def _kill_and_clean_up(
    root: Path, logs: Path, stage: str, call: int, delay_s: float, *, stop_server: bool, hold: bool = False,
    recorder: bool = False,
) -> tuple[list[str], list[str]]:
    """``_kill_run_at``, then what a kill -9 leaves running: the graph server (daemonized, so it
    outlives its owner; stopped with SIGTERM when ``stop_server``, as a clean shutdown would have,
    else left for the next open to reuse), for about a second, Dagster's compute-log ``tail -F``
    mirrors, whose ``watch_orphans.py`` babysitters stop them once they see their parent gone, and
    the recorder child (``recorder``), which fails its run and exits once its stdin closes.
    Whatever else of the run's session is alive 10 s later is SIGKILLed here and
    returned (pid and command line) for the caller to report.

    Returns:
        The run's marks, and the stray processes.
    """
    pid, marks = _kill_run_at(root, logs, stage, call, delay_s, hold=hold, recorder=recorder)
    assert marks[0] == "owner True", marks[:3]
    servers = stop_graph_servers(root) if stop_server else graph_servers_under(root)
    assert len(servers) == 1, f"the killed owner's graph server was expected to outlive it: {servers}"
    deadline = time.monotonic() + 10
    while session_members(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    stray = []
    for other in session_members(pid):
        try:
            stray.append(f"{other}: {Path(f'/proc/{other}/cmdline').read_text().replace(chr(0), ' ')[:100]}")
            os.kill(other, signal.SIGKILL)
        except OSError:
            continue
    return marks, stray


def _leftover(ctx: Any) -> dict[str, int]:
    """What the killed run left in the stores (before anything repairs them)."""
    from pipelines.stages import store_consistency

    diff = store_consistency(ctx)
    return {"files": len(ctx.manifest.files()), "dirty": len(ctx.manifest.dirty()),
            "in_flight": len(ctx.manifest.in_flight()), **{k: len(v) for k, v in diff.items()}}


KILL_POINTS = [
    # (step entered, its call number, seconds after, the leftover graph server, held at the entry,
    # recorded by a recorder child): where the run dies and what that leaves. The leftover server
    # is stopped (SIGTERM: it flushes and exits) in some cases and left running for the next open
    # to reuse (what happens after a real kill -9) in the others; both converge.
    # nothing indexed yet; the parser pool runs (the first batch takes longer than 0.2 s to parse)
    pytest.param("_prepare_all", 1, 0.2, "stopped", False, False, id="parsing"),
    # the first batch's points written, no manifest row yet
    pytest.param("commit_manifest", 1, 0.0, "reused", True, False, id="writing-vectors", marks=pytest.mark.soak),
    # the first batch committed (its subgraphs written or queued), the second's points written
    # (not flushed), its manifest rows not committed
    pytest.param("commit_manifest", 2, 0.0, "stopped", True, False, id="loading-graph"),
    # the same, the run recorded by a recorder child (the default `codemem index` path)
    pytest.param("commit_manifest", 2, 0.0, "stopped", True, True, id="loading-graph-recorded"),
    # the first batch's rows committed (its files in flight), its subgraphs not written: the graph
    # lacks them (held in the writer thread, or in the run's own while the graph was up already)
    pytest.param("write_subgraphs", 1, 0.0, "stopped", True, False, id="writing-subgraphs"),
    # every file committed, edges not resolved
    pytest.param("plan_pending", 1, 0.0, "reused", True, False, id="normalizing", marks=pytest.mark.soak),
    # the index done, during the checks (the run not ended, the design layer not refreshed)
    pytest.param("files_match_disk", 1, 0.0, "stopped", True, False, id="checking", marks=pytest.mark.soak),
]


def _assert_interrupted_where_intended(stage: str, call: int, left: dict[str, int], total: int) -> None:
    """The kill landed inside the step it aimed at (else the case would test something else)."""
    if stage == "_prepare_all":
        assert left["files"] == 0 and left["extra_in_vectors"] == 0, left
    # a batch in flight: its files recorded as such, its points written but not flushed — the code
    # collection keeps no write-ahead log (pipelines.index_context.CODE_WRITE_AHEAD_LOG), so they
    # went with the process, unless qdrant flushed on its own (building its payload indexes)
    elif stage == "commit_manifest" and call == 1:
        assert left["files"] == 0 and left["in_flight"] > 0 and left["missing_in_vectors"] == 0, left
    elif stage == "write_subgraphs":
        assert 0 < left["files"] <= left["in_flight"] and left["missing_in_graph"] > 0 and left["missing_in_vectors"] == 0, left
    elif stage == "commit_manifest":
        assert 0 < left["files"] < total and left["in_flight"] > 0 and left["missing_in_vectors"] == 0, left
    elif stage == "plan_pending":
        assert left["files"] == total and left["dirty"] > 0, left
    else:
        assert left["files"] == total and left["dirty"] == 0 and not any(v for k, v in left.items() if k not in ("files", "dirty")), left


@pytest.mark.slow
@pytest.mark.parametrize(("stage", "call", "delay_s", "server", "hold", "recorder"), KILL_POINTS)
def test_sigkill_during_a_dagster_index_run_converges(
    stage: str, call: int, delay_s: float, server: str, hold: bool, recorder: bool, kill_tree: Path,
    clean_index: dict[str, Any], tmp_path: Path, graph_servers: Path,
) -> None:
    from dagster import DagsterRunStatus

    from pipelines.dagster.run import materialize_index, project_instance
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    root = tmp_path / "tree"
    shutil.copytree(kill_tree, root)
    marks, stray = _kill_and_clean_up(root, tmp_path, stage, call, delay_s, stop_server=server == "stopped", hold=hold,
                                      recorder=recorder)
    leftover_server = graph_servers_under(root)

    handle = ProjectHandle(Settings(project_root=root))
    try:
        assert handle.is_owner  # the dead owner's lock went with it
        if server == "reused":
            assert graph_servers_under(root) == leftover_server  # the next open serves from the live server
        _assert_interrupted_where_intended(stage, call, _leftover(handle.backend.ctx), len(clean_index["files"]))
        if recorder:  # the recorder saw its stdin close before the end: it failed the run, and exited (no stray)
            with project_instance(handle.state_dir) as instance:
                (killed,) = instance.get_runs()
                assert killed.job_name == "codemem_index" and killed.status == DagsterRunStatus.FAILURE, killed
        with project_instance(handle.state_dir) as instance:
            report = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance)
            assert report.ok, report.as_dict()
            # newest first: the recovery run (the code index and the design layer), then the killed one
            runs = [r for r in instance.get_runs() if r.job_name == "codemem_index"]
            assert len(runs) == 2, [(r.run_id, r.status) for r in runs]
            assert runs[0].status == DagsterRunStatus.SUCCESS and runs[1].status == DagsterRunStatus.FAILURE, runs
            checks = _check_results(instance, runs[0].run_id)
        assert checks == {"bucket_matches_disk": True, "stores_agree": True, "no_dangling_edges": True,
                          "counts_match_parse": True}, checks
        _assert_consistent(handle, root)
        assert _strict_snapshot(handle.backend) == clean_index, f"killed after {marks[-1]!r}"

        # converged: the next run finds nothing to do
        with project_instance(handle.state_dir) as instance:
            again = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance)
        assert again.ok and again.files_indexed == 0 and again.files_deleted == 0, again.as_dict()
        assert not any("Dagster run" in n for n in again.notes), again.notes
    finally:
        handle.close()
    if stray:  # checked last, so that the stores are checked whatever this finds
        raise StrayProcesses(f"processes of the run killed in {stage} outlived it by 10 s (killed now): {stray}")


def test_a_killed_index_run_does_not_hold_the_run_queue(tmp_path: Path, graph_servers: Path) -> None:
    from dagster import DagsterRunStatus
    from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.utils import make_new_run_id
    from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

    from pipelines.dagster.run import project_instance
    from resources.settings import Settings

    root = tmp_path / "tree"
    _write_tree(root, 40)
    _, stray = _kill_and_clean_up(root, tmp_path, "_prepare_all", 1, 0.0, stop_server=True, hold=True)
    assert stray == []

    with project_instance(Settings(project_root=root).resolved_state_dir()) as instance:
        (killed,) = instance.get_runs()
        # Each sensor tick (and each `codemem index`) first marks failed the runs whose process is gone.
        from pipelines.dagster.resources import fail_orphaned_runs

        assert fail_orphaned_runs(instance) == [killed.run_id]
        assert instance.get_run_by_id(killed.run_id).status == DagsterRunStatus.FAILURE
        # A run the file-change sensor requested while `codemem ui` runs: queued for the daemon.
        origin = RemoteJobOrigin(RemoteRepositoryOrigin(RegisteredCodeLocationOrigin("codemem"), "__repository__"), "index_buckets")
        queued = DagsterRun(job_name="index_buckets", run_id=make_new_run_id(), status=DagsterRunStatus.QUEUED,
                            remote_job_origin=origin, tags={"dagster/partition": "b00"})
        instance.add_run(queued)
        # One iteration of the daemon's run queue decides what to launch:
        daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
        launch = daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), fixed_iteration_time=None)  # noqa: SLF001
        assert [r.run_id for r in launch] == [queued.run_id], (
            f"the killed run {killed.run_id} is {killed.status.value}; nothing is launched while it holds the only slot"
        )


def test_a_re_executed_run_waiting_for_its_process_is_not_taken_for_an_orphan(tmp_path: Path) -> None:
    """A run re-executed from the UI copies its parent's tags, the parent's pid among them, until
    its own process starts and tags it: while STARTING it is not judged by that pid."""
    import subprocess

    from dagster import DagsterRunStatus
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.utils import make_new_run_id

    from pipelines.dagster.resources import PARENT_RUN_TAG, RUN_PID_TAG, fail_orphaned_runs
    from pipelines.dagster.run import project_instance

    gone = subprocess.Popen(["true"])
    gone.wait()
    tags = {RUN_PID_TAG: str(gone.pid), PARENT_RUN_TAG: make_new_run_id()}
    with project_instance(tmp_path / "state") as instance:
        waiting = DagsterRun(job_name="codemem_index", run_id=make_new_run_id(), status=DagsterRunStatus.STARTING, tags=tags)
        orphan = DagsterRun(job_name="codemem_index", run_id=make_new_run_id(), status=DagsterRunStatus.STARTED, tags=tags)
        instance.add_run(waiting)
        instance.add_run(orphan)
        assert fail_orphaned_runs(instance) == [orphan.run_id]
        assert instance.get_run_by_id(waiting.run_id).status == DagsterRunStatus.STARTING


# --------------------------------------------------------------------------------------------
# 2. Re-materializing a bucket is idempotent
# --------------------------------------------------------------------------------------------


def _busiest_bucket(files: list[str]) -> tuple[str, list[str]]:
    by_bucket: dict[str, list[str]] = {}
    for path in files:
        by_bucket.setdefault(bucket_of(path), []).append(path)
    return max(sorted(by_bucket.items()), key=lambda item: len(item[1]))


@pytest.mark.parametrize("embed", [False, True], ids=["sparse-only", "dense"])
def test_rematerializing_a_bucket_is_idempotent(
    embed: bool, tmp_path: Path, graph_servers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import DagsterInstance

    from pipelines.dagster.run import materialize_index
    from pipelines.records import file_id
    from query_server.dagster_location import defs
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    root = tmp_path / "tree"
    _write_tree(root, 40)
    monkeypatch.setenv("CODEMEM_PROJECT_ROOT", str(root))  # the code location serves this project

    with DagsterInstance.ephemeral() as instance:
        handle = ProjectHandle(Settings(project_root=root))
        try:
            report = materialize_index(handle.backend.owned_stores(), embed=embed, instance=instance)
            assert report.ok, report.as_dict()
            before = _strict_snapshot(handle.backend)
            _assert_consistent(handle, root)
            bucket, paths = _busiest_bucket(sorted(before["file_rows"]))
            # the bucket is worth re-running: several files, symbols, edges into it from other buckets
            ids = {file_id(p) for p in paths} | {s["id"] for s in before["symbol_rows"] if s["path"] in paths}
            incoming = [e for e in before["edges"] if e[2] in ids and e[0] not in ids]
            assert len(paths) >= 2 and incoming, (bucket, paths, len(incoming))
            if embed:
                assert all(s[3] for s in before["symbols"])  # every symbol has its dense vector
        finally:
            handle.close()  # the job's runs own the stores, as a daemon-launched run would

        job = defs.resolve_job_def("index_buckets")
        run_config = {
            "ops": {name: {"config": {"embed": embed, "force": True}} for name in ("source_files", "embedded_symbols")},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        }
        snapshots = []
        for _ in range(2):
            result = job.execute_in_process(partition_key=bucket, run_config=run_config, instance=instance)
            assert result.success
            written = result.asset_materializations_for_node("graph_loaded")[-1].metadata["files_written"].value
            assert written == len(paths)  # forced: every file of the bucket was parsed and written again
            assert all(_check_results(instance, result.run_id).values()), _check_results(instance, result.run_id)
            handle = ProjectHandle(Settings(project_root=root))
            try:
                _assert_consistent(handle, root)
                snapshots.append(_strict_snapshot(handle.backend))
            finally:
                handle.close()

    assert snapshots[0] == before
    assert snapshots[1] == before

"""``codemem index`` recorded as one ``codemem_index`` Dagster run, per touched bucket.

- ``BucketTracker`` (``pipelines.bucket_records``) emits each touched bucket once, as soon as it is
  complete; a bucket with a deletion waits for the end of the run; a bucket with only unchanged
  files is not emitted.
- The default ``materialize_index`` path (no ``instance``): a recorder child process records the
  run in the project's instance while this process indexes; a run over one edited file
  materializes that file's bucket alone.
- A recorder whose parent goes away before the ``end`` message fails the run; a discarded
  recorder records nothing and exits.
- ``codemem index`` from the command line names the run in its notes and leaves no recorder
  process behind; told not to wait for the recording, it returns first and the recorder finishes
  the run it named in the background.

Everything is real: the stores, the Dagster instance under the project's state dir, the
recorder process. The prepared files fed to ``BucketTracker`` are plain test data with the
attributes it reads.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipelines.bucket_records import BucketRecord, BucketTracker
from pipelines.buckets import bucket_of
from pipelines.dagster.recorder import PENDING_FILE, earlier_background_note, leave_pending
from pipelines.dagster.run import dagster_home
from tests.conftest import FIXTURE_REPOS
from tests.pipelines.dagster.test_dagster import check_results, materializations

REPO_ROOT = Path(__file__).resolve().parents[3]
PER_BUCKET = ("source_files", "parsed_files", "embedded_symbols", "graph_loaded")
RECORDED = "(codemem_index) recorded the touched buckets"


# --------------------------------------------------------------------------------------------
# a) BucketTracker
# --------------------------------------------------------------------------------------------


@dataclass
class _State:
    path: str
    content_hash: str = "ab" * 32
    indexed_at: str = "2026-01-01T00:00:00Z"
    symbol_count: int = 2
    error_count: int = 0


@dataclass
class _Prepared:
    """What ``BucketTracker.written`` reads of a written file (``pipelines.index_writes.FileSubgraph``)."""

    state: _State
    nodes: list = field(default_factory=lambda: [1, 2, 3])
    edges: list = field(default_factory=lambda: [1, 2])
    point_count: int = 2


def _paths_in_distinct_buckets(n: int, per_bucket: int = 1) -> list[list[str]]:
    """``n`` groups of ``per_bucket`` paths, each group in one bucket, no two groups in the same."""
    by_bucket: dict[str, list[str]] = {}
    i = 0
    while sum(1 for paths in by_bucket.values() if len(paths) >= per_bucket) < n:
        path = f"pkg/mod_{i}.py"
        by_bucket.setdefault(bucket_of(path), []).append(path)
        i += 1
    groups = [paths[:per_bucket] for paths in by_bucket.values() if len(paths) >= per_bucket][:n]
    assert len({bucket_of(g[0]) for g in groups}) == n
    return groups


def test_a_bucket_is_emitted_once_when_its_last_changed_file_is_written() -> None:
    (a1, a2), (b1, b2), (c1, _), (u1, u2) = _paths_in_distinct_buckets(4, per_bucket=2)
    emitted: list[BucketRecord] = []
    tracker = BucketTracker(emitted.append, known=[a1, a2, b1, u1, u2])
    for path in (a1, a2, b1, b2, c1, u1, u2):
        tracker.listed(path)
    tracker.unchanged(u1)
    tracker.unchanged(u2)
    tracker.changed(a1, "python", "11" * 32)
    tracker.changed(a2, "python", "12" * 32)
    tracker.changed(b1, "python", "21" * 32)
    tracker.unchanged(b2)
    tracker.changed(c1, "python", "31" * 32)

    tracker.written([_Prepared(_State(a1))])
    assert emitted == []  # a2 of the same bucket is not written yet
    tracker.written([_Prepared(_State(a2)), _Prepared(_State(b1, symbol_count=5))])
    assert [r.bucket for r in emitted] == [bucket_of(a1), bucket_of(b1)]  # as soon as each is complete
    tracker.failed(c1, "cannot parse", changed=True)
    assert [r.bucket for r in emitted] == [bucket_of(a1), bucket_of(b1), bucket_of(c1)]
    tracker.deleted([])
    tracker.finish()
    tracker.finish()
    assert [r.bucket for r in emitted] == [bucket_of(a1), bucket_of(b1), bucket_of(c1)]  # once each; u's bucket: unchanged only

    a, b, c = emitted
    assert (a.listed, a.unchanged, [w[0] for w in a.written]) == (2, 0, [a1, a2])
    assert (b.listed, b.unchanged, [w[0] for w in b.written]) == (2, 1, [b1])
    assert c.failed == [(c1, "cannot parse")] and c.written == [] and c.touched
    graph = a.asset_metadata()["graph_loaded"]
    assert (graph["files_written"], graph["files_deleted"], graph["nodes"], graph["edges"]) == (2, 0, 6, 4)
    assert a1 in graph["indexed_versions"]["md"] and a2 in graph["indexed_versions"]["md"]
    assert b1 not in graph["indexed_versions"]["md"]
    parsed = b.asset_metadata()["parsed_files"]
    assert (parsed["files_parsed"], parsed["symbols"], parsed["failed"]) == (1, 5, 0)
    assert a.asset_metadata()["embedded_symbols"] == {"points_written": 4}
    source = b.asset_metadata()["source_files"]
    assert (source["files"], source["changed"], source["unchanged"]) == (2, 1, 1)
    assert c.asset_metadata()["parsed_files"]["failed"] == 1 and c1 in c.asset_metadata()["parsed_files"]["failures"]["md"]


def test_a_changed_file_found_binary_is_counted_as_skipped_not_as_changed() -> None:
    """A changed ``.py`` file that turns out binary when read is one skipped file, not a changed
    and a skipped one (the bucket's counts add up to its files)."""
    ((binary, text),) = _paths_in_distinct_buckets(1, per_bucket=2)
    emitted: list[BucketRecord] = []
    tracker = BucketTracker(emitted.append, known=[])
    for path in (binary, text):
        tracker.listed(path)
        tracker.changed(path, "python", "41" * 32)
    tracker.skipped(binary, "binary file", changed=True)
    tracker.written([_Prepared(_State(text))])
    tracker.finish()
    [record] = emitted
    source = record.asset_metadata()["source_files"]
    assert (source["files"], source["changed"], source["skipped"]) == (2, 1, 1)
    assert binary not in source["changed_files"]["md"] and binary in source["skipped_files"]["md"]


def test_a_bucket_with_a_deletion_waits_for_the_end_of_the_run() -> None:
    (a1, a_gone), (b1, b_skipped), (d_gone, _) = _paths_in_distinct_buckets(3, per_bucket=2)
    emitted: list[BucketRecord] = []
    known = [a1, a_gone, b1, b_skipped, d_gone]
    tracker = BucketTracker(emitted.append, known=known)
    on_disk = {a1, b1, b_skipped}
    tracker.hold(set(known) - on_disk)  # a_gone and d_gone are deleted at the end
    for path in sorted(on_disk):
        tracker.listed(path)
    tracker.changed(a1, "python", "11" * 32)
    tracker.changed(b1, "python", "21" * 32)
    tracker.changed(b_skipped, "python", "22" * 32)
    tracker.written([_Prepared(_State(a1)), _Prepared(_State(b1))])
    tracker.skipped(b_skipped, "binary file", changed=True)  # indexed before: leaves the index at the end
    assert emitted == []  # every touched bucket has a deletion to wait for
    tracker.deleted([a_gone, b_skipped, d_gone])
    tracker.finish()
    assert sorted(r.bucket for r in emitted) == sorted({bucket_of(a1), bucket_of(b1), bucket_of(d_gone)})
    by_bucket = {r.bucket: r for r in emitted}
    assert by_bucket[bucket_of(a1)].deleted == [a_gone] and [w[0] for w in by_bucket[bucket_of(a1)].written] == [a1]
    assert by_bucket[bucket_of(b1)].skipped == [(b_skipped, "binary file")] and by_bucket[bucket_of(b1)].deleted == [b_skipped]
    gone = by_bucket[bucket_of(d_gone)].asset_metadata()["graph_loaded"]
    assert (gone["files_written"], gone["files_deleted"]) == (0, 1) and d_gone in gone["deleted_files"]["md"]


def test_a_stopped_run_emits_its_incomplete_buckets_at_the_finish_and_untouched_ones_never() -> None:
    (a1, a2), (u1, _) = _paths_in_distinct_buckets(2, per_bucket=2)
    emitted: list[BucketRecord] = []
    tracker = BucketTracker(emitted.append, known=[u1])
    for path in (a1, a2, u1):
        tracker.listed(path)
    tracker.unchanged(u1)
    tracker.skipped("docs/big.bin", "too large", changed=False)  # a skip of a file never indexed: nothing to record
    tracker.changed(a1, "python", "11" * 32)
    tracker.changed(a2, "python", "12" * 32)
    tracker.written([_Prepared(_State(a1))])
    assert emitted == []
    tracker.finish()  # the run stopped before a2
    assert [(r.bucket, [w[0] for w in r.written]) for r in emitted] == [(bucket_of(a1), [a1])]


# --------------------------------------------------------------------------------------------
# b) the default path: a recorder process records the run
# --------------------------------------------------------------------------------------------


@pytest.fixture
def python_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    return root


def _newest_run(state_dir: Path):  # noqa: ANN202
    from pipelines.dagster.run import project_instance

    with project_instance(state_dir) as instance:
        runs = list(instance.get_runs())
        newest = runs[0]
        return len(runs), newest, materializations(instance, newest.run_id), check_results(instance, newest.run_id)


@pytest.mark.slow
def test_the_recorder_records_each_touched_bucket_of_an_index(python_repo: Path) -> None:
    from dagster import DagsterRunStatus

    from pipelines.dagster.run import NOTHING_CHANGED, materialize_index
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    handle = ProjectHandle(Settings(project_root=python_repo, dense_embeddings=False))
    try:
        assert handle.is_owner
        report = materialize_index(handle.backend.owned_stores(), embed=False)
        assert report.ok and report.files_indexed > 0, report.as_dict()
        assert any(RECORDED in n for n in report.notes), report.notes
        files = sorted(handle.backend.manifest.files())
        count, run, recorded, checks = _newest_run(handle.state_dir)
        assert count == 1 and run.job_name == "codemem_index" and run.status == DagsterRunStatus.SUCCESS, run
        assert any(run.run_id in n for n in report.notes)
        assert run.tags["codemem/trigger"] == "codemem index" and run.tags["codemem/pid"].isdigit()
        for asset in PER_BUCKET:
            assert sorted(m.partition for m in recorded if m.asset == asset) == sorted({bucket_of(p) for p in files}), asset
        assert {m.asset for m in recorded if m.partition is None} == {"normalized_graph", "design_documents", "design_links"}
        assert checks == {"bucket_matches_disk": True, "stores_agree": True, "no_dangling_edges": True,
                          "counts_match_parse": True}, checks
        normalized = next(m for m in recorded if m.asset == "normalized_graph")
        assert normalized.metadata["buckets_touched"] == len({bucket_of(p) for p in files})
        assert normalized.metadata["files"] == report.files_seen

        # one edited file: its bucket's four assets, nothing else partitioned
        edited = files[-1]
        with (python_repo / edited).open("a") as out:
            out.write("\n\ndef added_by_the_test(y):\n    return y\n")
        report = materialize_index(handle.backend.owned_stores(), embed=False)
        assert report.ok and report.files_indexed == 1 and any(RECORDED in n for n in report.notes), report.as_dict()
        count, run, recorded, checks = _newest_run(handle.state_dir)
        assert count == 2 and run.job_name == "codemem_index" and run.status == DagsterRunStatus.SUCCESS, run
        partitioned = [m for m in recorded if m.partition is not None]
        assert sorted((m.asset, m.partition) for m in partitioned) == sorted((a, bucket_of(edited)) for a in PER_BUCKET)
        graph = next(m for m in partitioned if m.asset == "graph_loaded")
        assert graph.metadata["files_written"] == 1 and edited in graph.metadata["indexed_versions"]
        assert not any(p in graph.metadata["indexed_versions"] for p in files if p != edited)
        assert all(checks.values()) and checks, checks

        # a deleted file: its bucket records the deletion
        (python_repo / edited).unlink()
        report = materialize_index(handle.backend.owned_stores(), embed=False)
        assert report.ok and report.files_deleted == 1, report.as_dict()
        count, run, recorded, checks = _newest_run(handle.state_dir)
        assert count == 3 and run.status == DagsterRunStatus.SUCCESS
        graph = [m for m in recorded if m.asset == "graph_loaded"]
        assert [m.partition for m in graph] == [bucket_of(edited)]
        assert graph[0].metadata["files_deleted"] == 1 and edited in graph[0].metadata["deleted_files"]
        assert all(checks.values()) and checks, checks

        # nothing changed: no run, and the recorder started for it is let go
        again = materialize_index(handle.backend.owned_stores(), embed=False)
        assert NOTHING_CHANGED in again.notes and not any("Dagster run" in n for n in again.notes)
        assert _newest_run(handle.state_dir)[0] == 3
    finally:
        handle.close()


# --------------------------------------------------------------------------------------------
# c) a recorder whose parent went away; a discarded recorder
# --------------------------------------------------------------------------------------------


def _bucket_message(bucket: str, path: str) -> dict:
    record = BucketRecord(bucket=bucket, listed=1, changed=[(path, "python", "ab" * 32)],
                          written=[(path, "ab" * 32, "2026-01-01T00:00:00Z", 2, 0, 3, 2)], points_written=2)
    return {"kind": "bucket", "bucket": bucket, "assets": record.asset_metadata()}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def test_a_recorder_whose_stream_ends_before_the_end_fails_its_run(tmp_path: Path) -> None:
    from dagster import DagsterRunStatus

    from pipelines.dagster.recorder import Recorder
    from pipelines.dagster.run import dagster_home, project_instance

    state_dir = tmp_path / "state"
    recorder = Recorder.start()
    pid = recorder._process.pid  # noqa: SLF001
    _assert_yields_the_cpu(pid)
    path = "pkg/killed.py"
    recorder.send({"kind": "start", "dagster_home": str(dagster_home(state_dir)),
                   "tags": {"codemem/trigger": "codemem index"}, "embed": False, "force": False})
    recorder.send(_bucket_message(bucket_of(path), path))
    result = recorder.finish(timeout_s=120)  # the stream closes without "end"
    assert result["success"] is False and result["run_id"], result
    assert "stopped before its end" in result["error"], result
    assert not _alive(pid)
    with project_instance(state_dir) as instance:
        (run,) = instance.get_runs()
        assert run.run_id == result["run_id"] and run.job_name == "codemem_index"
        assert run.status == DagsterRunStatus.FAILURE
        assert run.tags["codemem/pid"] == str(pid)
        recorded = materializations(instance, run.run_id)
    # what was recorded before the stream ended stays: the bucket's four assets
    assert sorted((m.asset, m.partition) for m in recorded) == sorted((a, bucket_of(path)) for a in PER_BUCKET)


def _assert_yields_the_cpu(pid: int) -> None:
    """The recorder runs at ``RECORDER_NICE`` above this process (the index the user waits for goes first)."""
    from pipelines.dagster.recorder import RECORDER_NICE

    wanted = os.getpriority(os.PRIO_PROCESS, 0) + RECORDER_NICE
    deadline = time.monotonic() + 30
    while os.getpriority(os.PRIO_PROCESS, pid) != min(wanted, 19) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(wanted, 19)


_KILLED_PARENT = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pipelines.dagster.recorder import Recorder
    from pipelines.dagster.run import dagster_home
    from pathlib import Path

    recorder = Recorder.start()
    recorder.send({"kind": "start", "dagster_home": str(dagster_home(Path(sys.argv[1]))), "tags": {}, "embed": False,
                   "force": False})
    recorder.send(json.loads(sys.argv[2]))
    print(recorder._process.pid, flush=True)
    time.sleep(0.5)  # the writer thread hands the lines over
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.slow
def test_a_sigkilled_parent_leaves_a_failed_run_and_no_recorder(tmp_path: Path) -> None:
    from dagster import DagsterRunStatus

    from pipelines.dagster.run import project_instance

    state_dir = tmp_path / "state"
    path = "pkg/orphan.py"
    done = subprocess.run([sys.executable, "-c", _KILLED_PARENT, str(state_dir), json.dumps(_bucket_message(bucket_of(path), path))],
                          capture_output=True, text=True, cwd=str(REPO_ROOT), env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    recorder_pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _alive(recorder_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(recorder_pid), "the recorder outlived its killed parent by 60 s"
    with project_instance(state_dir) as instance:
        (run,) = instance.get_runs()
        assert run.job_name == "codemem_index" and run.status == DagsterRunStatus.FAILURE, run
        assert [m.partition for m in materializations(instance, run.run_id) if m.asset == "graph_loaded"] == [bucket_of(path)]


@pytest.mark.parametrize("settled_s", [0.0, 4.0], ids=["at-once", "after-start-up"])
def test_a_discarded_recorder_records_nothing_and_exits(settled_s: float, tmp_path: Path) -> None:
    from pipelines.dagster.recorder import Recorder
    from pipelines.dagster.run import project_instance

    recorder = Recorder.start()
    pid = recorder._process.pid  # noqa: SLF001
    time.sleep(settled_s)  # after start-up it waits on its first line, Dagster loaded
    recorder.discard()
    assert not _alive(pid)
    state_dir = tmp_path / "state"
    with project_instance(state_dir) as instance:
        assert list(instance.get_runs()) == []


# --------------------------------------------------------------------------------------------
# d) the command line
# --------------------------------------------------------------------------------------------


def _processes_with(marker: str) -> list[str]:
    """Live processes whose environment holds ``marker`` (set for one test's children alone)."""
    wanted = marker.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not _alive(int(entry.name)):
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {command[:120]}")
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_codemem_index_names_its_run_and_leaves_no_recorder(python_repo: Path) -> None:
    from resources.settings import Settings
    from tests.reliability.graph_servers import stop_graph_servers

    marker = f"CODEMEM_TEST_RUN={uuid.uuid4().hex}"
    env = {**os.environ, "CODEMEM_DENSE_EMBEDDINGS": "false", marker.split("=")[0]: marker.split("=")[1]}
    env.pop("CODEMEM_PROJECT_ROOT", None)
    codemem = str(Path(sys.executable).parent / "codemem")
    try:
        for expected in (RECORDED, "nothing changed"):
            done = subprocess.run([codemem, "index", str(python_repo), "--no-embed", "--json"], capture_output=True, text=True,
                                  cwd=str(python_repo), env=env, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            report = json.loads(done.stdout)
            assert any(expected in n for n in report["notes"]), report["notes"]
            assert report["failed"] == []
            recorders = [p for p in _processes_with(marker) if "pipelines.dagster.recorder" in p]
            assert recorders == [], recorders
        from pipelines.dagster.run import project_instance

        with project_instance(Settings(project_root=python_repo).resolved_state_dir()) as instance:
            runs = list(instance.get_runs())
        assert [(r.job_name, r.status.value) for r in runs] == [("codemem_index", "SUCCESS")]  # the second: nothing to run
    finally:
        stop_graph_servers(python_repo)


@pytest.mark.slow
def test_codemem_index_leaves_a_slow_recording_to_finish_in_the_background(
    python_repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no wait for the recorder (``CODEMEM_DAGSTER_RECORD_WAIT_S=0``), ``codemem index``
    returns once its index is done, its report names the run it left recording, and that run is
    then written, successful, under that id, by a recorder that exits on its own."""
    from dagster import DagsterRunStatus

    from pipelines.dagster.run import project_instance
    from resources.settings import Settings
    from tests.reliability.graph_servers import stop_graph_servers

    monkeypatch.setenv("CODEMEM_DAGSTER_RECORD_WAIT_S", "0")
    marker = f"CODEMEM_TEST_RUN={uuid.uuid4().hex}"
    env = {**os.environ, "CODEMEM_DENSE_EMBEDDINGS": "false", marker.split("=")[0]: marker.split("=")[1]}
    env.pop("CODEMEM_PROJECT_ROOT", None)
    codemem = str(Path(sys.executable).parent / "codemem")
    try:
        done = subprocess.run([codemem, "index", str(python_repo), "--no-embed", "--json"], capture_output=True, text=True,
                              cwd=str(python_repo), env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
        assert report["failed"] == [] and report["files_indexed"] > 0
        (note,) = [n for n in report["notes"] if "Dagster run" in n]
        assert "finishes in the background" in note, note
        run_id = note.split()[2]
        deadline = time.monotonic() + 120
        while [p for p in _processes_with(marker) if "pipelines.dagster.recorder" in p] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in _processes_with(marker) if "pipelines.dagster.recorder" in p], "the recorder never finished"
        with project_instance(Settings(project_root=python_repo).resolved_state_dir()) as instance:
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.job_name == "codemem_index" and run.status == DagsterRunStatus.SUCCESS, run
            recorded = materializations(instance, run_id)
        assert {m.asset for m in recorded} >= {*PER_BUCKET, "normalized_graph", "design_links"}
        home = dagster_home(Settings(project_root=python_repo).resolved_state_dir())
        assert (home / PENDING_FILE).exists() and earlier_background_note(home) is None  # recorded: nothing to say
        assert not (home / PENDING_FILE).exists()
    finally:
        stop_graph_servers(python_repo)


def test_a_recording_left_to_the_background_that_fails_is_said_by_the_next_index(tmp_path: Path) -> None:
    """A run left to its recorder that then fails (here its stream ends before its end) is named,
    with the reason, by the next index's notes, once; one still being recorded is not."""
    from pipelines.dagster.recorder import Recorder

    home = dagster_home(tmp_path / "state")
    recorder = Recorder.start()
    recorder.begin(str(home), {"codemem/trigger": "codemem index"}, embed=False, force=False)
    path = "pkg/left.py"
    recorder.send(_bucket_message(bucket_of(path), path))
    outcome = recorder.finish(wait_s=0)  # the stream closes without "end", the recorder still loading
    assert outcome["background"] and outcome["run_id"] == recorder.run_id, outcome
    deadline = time.monotonic() + 120
    while _alive(recorder.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    recorder._process.wait()  # noqa: SLF001 - reaped, as the parent that left would have been

    class _Live:  # a recorder still at work (this process): its run is not said yet, and stays pending
        pid = os.getpid()

    leave_pending(home, {"run_id": "still-recording"}, _Live())  # type: ignore[arg-type]
    assert earlier_background_note(home) is None and (home / PENDING_FILE).exists()
    leave_pending(home, outcome, recorder)
    note = earlier_background_note(home)
    assert note and recorder.run_id in note and "stopped before its end" in note, note
    assert earlier_background_note(home) is None  # said once


def test_a_short_wait_does_not_wait_for_a_recorder_still_importing_dagster_and_a_ready_one_is_waited_for(tmp_path: Path) -> None:
    """A recorder that has not imported Dagster yet cannot finish within a short wait: ``finish``
    leaves its run to the background at once. One that wrote its ready line is waited for."""
    from pipelines.dagster.recorder import DAGSTER_IMPORT_S, Recorder

    home = dagster_home(tmp_path / "state")
    wait_s = DAGSTER_IMPORT_S - 0.01
    importing = Recorder.start()
    importing.begin(str(home), {"codemem/trigger": "codemem index"}, embed=False, force=False)
    importing.send({"kind": "end", "error": None})
    started = time.monotonic()
    outcome = importing.finish(wait_s=wait_s)  # at once: its Dagster import takes seconds
    assert outcome["background"] and time.monotonic() - started < wait_s, outcome
    importing._process.communicate(timeout=120)  # noqa: SLF001 - let it finish its run, reaped

    ready = Recorder.start()
    deadline = time.monotonic() + 120
    while not ready._imported() and time.monotonic() < deadline:  # noqa: SLF001 - its ready line
        time.sleep(0.05)
    ready.begin(str(home), {"codemem/trigger": "codemem index"}, embed=False, force=False)
    ready.send({"kind": "end", "error": None})
    outcome = ready.finish(wait_s=600)
    assert outcome.get("success") and outcome["run_id"] == ready.run_id, outcome

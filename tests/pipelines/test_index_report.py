"""The index report names every skip with its reason and its counts add up (issue 25, item 6):
files seen = indexed + unchanged + skipped + failed + vanished, on the plain and the Dagster path.

Real files, real stores. An unreadable folder is a folder with mode 000; as root (where modes do
not deny reads) the indexing process runs without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH
(``setpriv``), so the folder really cannot be listed. Files vanish during a run because the test
deletes them from the run's own progress callback: between listing and hashing and between
hashing and parsing (plain), between the run's listing and its hashing inside ``materialize_index``
(the ``codemem index`` path: the plan that decides there is work, then the plain index).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git_init, write_files
from tests.reliability.children import CODEMEM, REPO_ROOT, child_env
from tests.reliability.graph_servers import stop_graph_servers

FILES = {f"pkg/mod{i}.py": f"import os\n\n\ndef work_{i}(x):\n    return os.path.join(x, '{i}')\n" for i in range(6)}


def assert_counts_add_up(report: dict[str, Any]) -> None:
    """seen = indexed + unchanged + skipped + failed + vanished (the run-level failure entry of a
    failed Dagster run is not a file)."""
    failed = [f for f in report["failed"] if f["path"] != "(index run)"]
    accounted = report["files_indexed"] + report["files_unchanged"] + len(report["skipped"]) + len(failed) + len(report["vanished"])
    assert report["files_seen"] == accounted, report
    assert not any("counts miss" in note for note in report["notes"]), report["notes"]


@pytest.fixture
def unreadable(tmp_path: Path) -> Iterator[Callable[[Path], list[str]]]:
    """Make a folder or file unreadable (mode 000); returns the command prefix under which the
    indexing process cannot list or read it. Restores the mode at the end (so the tmp dir can be
    removed)."""
    made: list[Path] = []

    def make(folder: Path) -> list[str]:
        folder.chmod(0)
        made.append(folder)
        prefix: list[str] = []
        if os.geteuid() == 0:  # root reads anything: drop the capabilities that let it
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root, where mode 000 does not deny reads, and setpriv (util-linux) is missing")
            prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]
        look = f"open({str(folder)!r}).close()" if folder.is_file() else f"import os; os.listdir({str(folder)!r})"
        probe = subprocess.run([*prefix, sys.executable, "-c", look],
                               capture_output=True, text=True, check=False)
        if probe.returncode == 0 or "PermissionError" not in probe.stderr:
            pytest.skip(f"cannot make a path unreadable on this machine: {probe.stderr.strip()[-300:]}")
        return prefix

    yield make
    for folder in made:
        folder.chmod(0o755)


@pytest.mark.parametrize(("use_git", "plain"), [(True, True), (False, False)], ids=["git-plain", "walk-dagster"])
def test_an_unreadable_folder_is_named_with_its_reason(
    use_git: bool, plain: bool, project: Path, unreadable: Callable[[Path], list[str]], tmp_path: Path
) -> None:
    write_files(project, {**FILES, "secret/tracked.py": "def hidden():\n    return 1\n"})
    if use_git:
        git_init(project)  # secret/tracked.py is tracked: git lists it from its index
    write_files(project, {"secret/untracked.py": "def other():\n    return 2\n"})
    prefix = unreadable(project / "secret")
    try:
        done = subprocess.run(
            [*prefix, *CODEMEM, "index", str(project), "--json", "--no-embed", *(["--plain"] if plain else [])],
            capture_output=True, text=True, env=child_env(), cwd=REPO_ROOT, timeout=300, check=False,
        )
    finally:
        stop_graph_servers(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    skipped = {item["path"]: item["reason"] for item in report["skipped"]}
    assert skipped["secret/"] == "unreadable folder: Permission denied"
    if use_git:  # the tracked file is listed, and cannot be looked at
        assert skipped["secret/tracked.py"] == "cannot stat: Permission denied"
    assert report["files_indexed"] == len(FILES) and report["failed"] == [] and report["vanished"] == []
    assert_counts_add_up(report)


def test_a_file_that_cannot_be_read_fails_the_index_with_its_reason(
    project: Path, unreadable: Callable[[Path], list[str]], tmp_path: Path
) -> None:
    """The command's error names each failed file with its error, not only its path."""
    write_files(project, {**FILES, "pkg/locked.py": "def locked():\n    return 1\n"})
    prefix = unreadable(project / "pkg" / "locked.py")
    try:
        done = subprocess.run(
            [*prefix, *CODEMEM, "index", str(project), "--json", "--no-embed"],
            capture_output=True, text=True, env=child_env(), cwd=REPO_ROOT, timeout=300, check=False,
        )
    finally:
        stop_graph_servers(tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "1 file(s) failed: pkg/locked.py (cannot read: Permission denied)" in done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == [{"path": "pkg/locked.py", "error": "cannot read: Permission denied"}]
    assert report["files_indexed"] == len(FILES)
    assert_counts_add_up(report)


def _deleting(root: Path, when: dict[tuple[str, int], list[str]]) -> Callable[[str, int, int], None]:
    """A progress callback that deletes files at the n-th call of a phase: ``{(phase, n): paths}``."""
    calls: dict[str, int] = {}

    def progress(phase: str, done: int, total: int) -> None:
        calls[phase] = calls.get(phase, 0) + 1
        for path in when.get((phase, calls[phase]), []):
            (root / path).unlink()

    return progress


def test_files_deleted_during_a_plain_run_are_reported_as_vanished(project: Path, service_factory: Any) -> None:
    from resources.schemas.tools import IndexInput

    write_files(project, FILES)
    git_init(project)
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    write_files(project, {path: text + "\n# edited\n" for path, text in FILES.items()} | {"pkg/new.py": "def new():\n    return 0\n"})
    # after listing, before hashing: an indexed file and a new one; after hashing, before parsing: another
    progress = _deleting(project, {("discover", 2): ["pkg/mod0.py", "pkg/new.py"], ("parse", 2): ["pkg/mod1.py"]})
    report = svc.index(IndexInput(embed=False), progress=progress)
    assert sorted(report["vanished"]) == ["pkg/mod0.py", "pkg/mod1.py", "pkg/new.py"]
    assert report["files_seen"] == 7 and report["files_indexed"] == 4 and report["failed"] == []
    assert_counts_add_up(report)
    # the indexed files that vanished are gone from the index in the same run
    assert report["files_deleted"] == 2 and sorted(svc.manifest.files()) == [f"pkg/mod{i}.py" for i in range(2, 6)]
    again = svc.index(IndexInput(embed=False))
    assert (again["files_unchanged"], again["files_indexed"], again["files_deleted"], again["vanished"]) == (4, 0, 0, [])
    assert_counts_add_up(again)


def test_files_deleted_during_a_dagster_run_are_reported_as_vanished(project: Path) -> None:
    from dagster import DagsterInstance

    from pipelines.dagster.run import materialize_index
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    write_files(project, FILES)
    handle = ProjectHandle(Settings(project_root=project, dense_embeddings=False))
    try:
        with DagsterInstance.ephemeral() as instance:
            assert materialize_index(handle.backend.owned_stores(), embed=False, instance=instance).ok
            write_files(project, {path: text + "\n# edited\n" for path, text in FILES.items()})
            # hashed by the plan that decides there is work, listed by the index run, then deleted before
            # it hashes them (discover calls: materialize_index's, the run's start, the run's listing done)
            progress = _deleting(project, {("discover", 3): ["pkg/mod0.py", "pkg/mod3.py"]})
            report = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance, progress=progress).as_dict()
            assert sorted(report["vanished"]) == ["pkg/mod0.py", "pkg/mod3.py"]
            assert report["files_seen"] == 6 and report["files_indexed"] == 4 and report["failed"] == []
            assert_counts_add_up(report)
            assert report["files_deleted"] == 2 and len(handle.backend.manifest.files()) == 4
            again = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance).as_dict()
            assert (again["files_unchanged"], again["files_indexed"], again["files_deleted"]) == (4, 0, 0)
            assert_counts_add_up(again)
    finally:
        handle.close()


def test_a_stopped_run_names_the_files_it_did_not_reach(project: Path, service_factory: Any) -> None:
    import threading

    from resources.schemas.tools import IndexInput

    write_files(project, FILES)
    svc = service_factory(project, dense_embeddings=False)
    stop = threading.Event()
    report = svc.index(IndexInput(embed=False), progress=lambda phase, done, total: phase == "parse" and stop.set(), stop=stop)
    assert report["files_indexed"] == 0
    assert {item["path"] for item in report["skipped"]} == set(FILES)
    assert {item["reason"] for item in report["skipped"]} == {"the run was stopped before this file: the next run indexes it"}
    assert_counts_add_up(report)

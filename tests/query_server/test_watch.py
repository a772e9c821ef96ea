"""``codemem watch``: a real watchdog Observer on a tmp project indexes saved files through the
project's handle (new → searchable, deleted → gone, renamed → moved), batches bursts, ignores
the state dir, excluded and git-ignored paths, and the command stops cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_REPOS, git_init, write_files

WAIT_S = 15.0

NEW_FUNCTION = '''
def reconcile_ledger_entries(entries):
    """Pair debit and credit ledger entries and return the unmatched ones."""
    return [e for e in entries if not e.get("matched")]
'''


def _wait_for(condition: Callable[[], bool], timeout_s: float = WAIT_S, interval_s: float = 0.02) -> float:
    """Poll until ``condition()``; the seconds it took (fails after ``timeout_s``)."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout_s:
            raise AssertionError(f"condition not met within {timeout_s} s")
        time.sleep(interval_s)
    return time.perf_counter() - started


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    return root


@pytest.fixture
def handle(repo: Path) -> Iterator:
    """The project's handle (this process owns the stores), indexed once."""
    from query_server.ownership import ProjectHandle
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    h = ProjectHandle(Settings(project_root=repo))
    try:
        assert h.is_owner
        h.call("index", IndexInput())
        yield h
    finally:
        h.close()


@pytest.fixture
def watcher(handle) -> Iterator:  # noqa: ANN001
    from query_server.watch import Watcher

    batches: list = []
    lock = threading.Lock()

    def record(batch) -> None:  # noqa: ANN001
        with lock:
            batches.append(batch)

    w = Watcher(handle, debounce_s=0.3, on_batch=record)
    w.recorded = batches  # type: ignore[attr-defined]
    w.start()
    try:
        yield w
    finally:
        w.stop()


def _hits(handle, query: str, name: str) -> list:  # noqa: ANN001
    from resources.schemas.tools import CodeSearchInput

    return [h for h in handle.call("code_search", CodeSearchInput(query=query, limit=20)).results if h.name == name]


def _indexed(handle) -> set[str]:  # noqa: ANN001
    return set(handle.backend.ctx.manifest.files())


# -- the plain parts ------------------------------------------------------------------------------


def test_filter_keeps_indexable_paths_only(repo: Path) -> None:
    from query_server.watch import WHOLE_PROJECT, PathFilter
    from resources.settings import Settings

    f = PathFilter(Settings(project_root=repo))
    assert f.relative(str(repo / "client" / "a.py")) == "client/a.py"
    assert f.relative(str(repo / ".codemem" / "index.db")) is None
    assert f.relative("/elsewhere/a.py") is None
    assert f.relevant("client/a.py", False) == "client/a.py"
    assert f.relevant("client/README.md", False) is None  # extension outside the filter
    for skipped in (".git/HEAD.py", "node_modules/x/index.js", ".venv/lib/site.py", "pkg/__pycache__/m.py"):
        assert f.relevant(skipped, False) is None, skipped
    assert f.relevant("node_modules", True) is None and f.relevant("src/new", True) == "src/new"
    assert f.relevant(".gitignore", False) == WHOLE_PROJECT and f.relevant("sub/.gitignore", False) == WHOLE_PROJECT


def test_scopes_replace_vanished_paths_by_their_nearest_directory(repo: Path) -> None:
    from query_server.watch import index_scopes

    (repo / "client" / "deep").mkdir()
    assert index_scopes(repo, ["client/session.py"]) == ["client/session.py"]
    assert index_scopes(repo, ["client/gone.py", "client/session.py"]) == ["client"]  # covered by 'client'
    assert index_scopes(repo, ["client/deep/x/y/gone.py"]) == ["client/deep"]
    assert index_scopes(repo, ["gone_at_root.py"]) is None  # only the whole project contains it
    assert index_scopes(repo, [""]) is None


def test_ignore_rules_follow_git_and_codememignore(repo: Path) -> None:
    from query_server.watch import ignored_paths, in_git_tree

    write_files(repo, {".gitignore": "generated/\n*.tmp.py\n", ".codememignore": "client/legacy_*.py\n"})
    assert not in_git_tree(repo)
    assert ignored_paths(repo, ["client/legacy_a.py", "generated/x.py"], git=False) == {"client/legacy_a.py"}
    git_init(repo)
    assert in_git_tree(repo)
    got = ignored_paths(repo, ["generated/x.py", "a.tmp.py", "client/session.py", "client/legacy_b.py", "generated/"], git=True)
    assert got == {"generated/x.py", "a.tmp.py", "client/legacy_b.py", "generated/"}


def test_buffer_waits_for_the_events_to_pause() -> None:
    from query_server.watch import ChangeBuffer

    buffer, stop = ChangeBuffer(), threading.Event()
    got: list = []
    taker = threading.Thread(target=lambda: got.append(buffer.take(0.2, 5.0, stop)))
    taker.start()
    started = time.monotonic()
    for i in range(5):  # a burst longer than the debounce interval, no pause as long as it
        buffer.add([f"f{i}.py"])
        time.sleep(0.1)
    taker.join(5)
    assert got == [[f"f{i}.py" for i in range(5)]]
    assert time.monotonic() - started >= 0.6  # 4 × 0.1 s of burst + 0.2 s quiet
    stop.set()
    buffer.wake()
    assert buffer.take(0.2, 5.0, stop) is None


# -- a real Observer ------------------------------------------------------------------------------


def test_saved_file_becomes_searchable_and_deleted_file_disappears(repo: Path, handle, watcher) -> None:  # noqa: ANN001
    path = repo / "client" / "ledger.py"
    saved = time.perf_counter()
    path.write_text(NEW_FUNCTION, encoding="utf-8")
    latency = _wait_for(lambda: bool(_hits(handle, "reconcile ledger entries debit credit", "reconcile_ledger_entries")))
    print(f"\nsave → searchable: {latency * 1000:.0f} ms (debounce 300 ms)")
    assert time.perf_counter() - saved < WAIT_S
    # The points are written (searchable) just before the manifest commits the file.
    _wait_for(lambda: "client/ledger.py" in _indexed(handle))

    path.unlink()
    gone = _wait_for(lambda: not _hits(handle, "reconcile ledger entries debit credit", "reconcile_ledger_entries"))
    print(f"delete → gone from search: {gone * 1000:.0f} ms")
    _wait_for(lambda: "client/ledger.py" not in _indexed(handle))
    assert not any(b.error for b in watcher.recorded), [b.line() for b in watcher.recorded]
    for batch in watcher.recorded:
        print(batch.line())


def test_edit_rename_and_burst(repo: Path, handle, watcher) -> None:  # noqa: ANN001
    session = repo / "client" / "session.py"
    session.write_text(session.read_text(encoding="utf-8") + "\n\ndef close_idle_sessions(pool):\n    return pool\n", encoding="utf-8")
    _wait_for(lambda: bool(_hits(handle, "close idle sessions", "close_idle_sessions")))

    session.rename(repo / "client" / "sessions_v2.py")
    _wait_for(lambda: "client/sessions_v2.py" in _indexed(handle) and "client/session.py" not in _indexed(handle))
    hits = _hits(handle, "close idle sessions", "close_idle_sessions")
    assert [h.file_path for h in hits] == ["client/sessions_v2.py"]

    before = len(watcher.recorded)
    burst = {f"client/burst_{i}.py": f"def burst_function_{i}():\n    return {i}\n" for i in range(3)}
    write_files(repo, burst)
    _wait_for(lambda: set(burst) <= _indexed(handle))
    _wait_for(lambda: any(set(burst) & set(b.paths) for b in watcher.recorded[before:]))
    new = watcher.recorded[before:]
    assert any(set(burst) <= set(b.paths) for b in new), [b.paths for b in new]  # one batch for the burst


def test_state_dir_excluded_and_ignored_paths_start_no_batch(repo: Path, handle) -> None:  # noqa: ANN001
    from query_server.watch import Watcher

    write_files(repo, {".gitignore": "generated/\n"})
    git_init(repo)
    batches: list = []
    with Watcher(handle, debounce_s=0.1, on_batch=batches.append) as w:
        assert "node_modules" not in w._watches and "client" in w._watches
        write_files(repo, {
            ".codemem/scratch.py": "x = 1\n", "node_modules/pkg/index.js": "module.exports = 1\n",
            "generated/out.py": "def generated():\n    pass\n", "client/notes.md": "# notes\n",
        })
        time.sleep(1.0)
        assert batches == []
        write_files(repo, {"client/real.py": "def real_function():\n    return 1\n"})
        _wait_for(lambda: "client/real.py" in _indexed(handle))
        _wait_for(lambda: len(batches) >= 1)
    assert [b.paths for b in batches] == [["client/real.py"]]
    assert "generated/out.py" not in _indexed(handle)


def test_new_top_level_directory_is_watched(repo: Path, handle, watcher) -> None:  # noqa: ANN001
    (repo / "services").mkdir()
    write_files(repo, {"services/billing.py": NEW_FUNCTION})
    _wait_for(lambda: "services/billing.py" in _indexed(handle))
    _wait_for(lambda: "services" in watcher._watches)
    write_files(repo, {"services/deeper/more.py": "def more_function():\n    return 1\n"})
    _wait_for(lambda: "services/deeper/more.py" in _indexed(handle))


def test_watcher_indexes_through_a_remote_owner(repo: Path, handle) -> None:  # noqa: ANN001
    """Another process (here: another handle) owns the stores, as a Claude Code session's MCP
    server does: the watcher's batches are indexed by that owner."""
    from query_server.ownership import ProjectHandle
    from query_server.watch import Watcher
    from resources.settings import Settings

    client = ProjectHandle(Settings(project_root=repo))
    try:
        assert not client.is_owner
        batches: list = []
        with Watcher(client, debounce_s=0.1, on_batch=batches.append):
            write_files(repo, {"client/ledger.py": NEW_FUNCTION})
            _wait_for(lambda: bool(_hits(client, "reconcile ledger entries", "reconcile_ledger_entries")))
            _wait_for(lambda: "client/ledger.py" in _indexed(handle))  # written by the owner
            (repo / "client" / "ledger.py").unlink()
            _wait_for(lambda: "client/ledger.py" not in _indexed(handle))
        assert batches and not any(b.error for b in batches), [b.line() for b in batches]
    finally:
        client.close()


# -- the command ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_watch_command_indexes_and_stops_cleanly(repo: Path, sig: int) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from query_server.cli import main; main()", "watch", "--project", str(repo), "--debounce", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=Path(__file__).parents[2],
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        _wait_for(lambda: any("] project:" in line for line in lines), timeout_s=60)  # the catch-up batch
        write_files(repo, {"client/ledger.py": NEW_FUNCTION})
        _wait_for(lambda: any("client/ledger.py" in line for line in lines), timeout_s=30)
        proc.send_signal(sig)
        rc = proc.wait(timeout=90)  # a clean stop, not a time bound: 30 s ran out once on a loaded 2-core run
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    stderr = proc.stderr.read()
    assert rc == 0, stderr
    assert "stopped watching" in stderr
    assert any("1 indexed" in line and "client/ledger.py" in line for line in lines), lines
    assert not (repo / ".codemem" / "owner.json").exists()  # the stores were closed and released

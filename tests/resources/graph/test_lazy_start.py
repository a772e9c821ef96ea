"""The embedded graph starts on first use (issue 18): a process that never touches the graph
(``codemem index`` with nothing changed) starts no ``redis-server`` and has none to stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from resources.graph.factory import create_graph_store
from resources.graph.model import GraphNode
from resources.settings import Settings
from tests.reliability.graph_servers import graph_servers_under

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_nothing_starts_until_the_graph_is_used_and_the_schema_waits_for_it(tmp_path: Path) -> None:
    store = create_graph_store(Settings(project_root=tmp_path))
    try:
        store.ensure_schema()  # recorded, run right after the start
        assert not store.started and graph_servers_under(tmp_path) == []
        store.merge_nodes([GraphNode(id="m1", label="Module", properties={"name": "json", "language": "python", "file_path": ""})])
        assert store.started and len(graph_servers_under(tmp_path)) == 1
        assert store.counts().get("Module") == 1
    finally:
        store.close()
    assert graph_servers_under(tmp_path) == []


def test_a_store_never_used_closes_without_starting(tmp_path: Path) -> None:
    store = create_graph_store(Settings(project_root=tmp_path))
    store.close()
    assert not store.started and graph_servers_under(tmp_path) == []


def test_start_in_background_starts_it_before_the_first_use(tmp_path: Path) -> None:
    store = create_graph_store(Settings(project_root=tmp_path))
    try:
        store.start_in_background()
        deadline = time.monotonic() + 30
        while not store.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.started and len(graph_servers_under(tmp_path)) == 1
    finally:
        store.close()
    assert graph_servers_under(tmp_path) == []


def test_settle_waits_for_a_start_in_progress_and_refuses_new_ones(tmp_path: Path) -> None:
    """The shutdown deadline settles the graph before it stops the project's server: a start in
    progress (a background thread) finishes first, so its server is there to stop."""
    import pytest

    store = create_graph_store(Settings(project_root=tmp_path))
    try:
        store.start_in_background()
        time.sleep(0.01)
        assert store.settle(30)
        assert len(graph_servers_under(tmp_path)) == (1 if store.started else 0)
        fresh = create_graph_store(Settings(project_root=tmp_path / "other"))
        assert fresh.settle(1) and not fresh.started
        with pytest.raises(RuntimeError, match="closed"):
            fresh.counts()
    finally:
        store.close()
    assert graph_servers_under(tmp_path) == []


def test_the_graph_engine_s_import_leaves_sys_path_alone() -> None:
    """Importing the embedded graph engine (redislite) in a background thread must not take
    site-packages off ``sys.path`` while the index parses in the main thread: stop 37's CI failed a
    file with ``No module named 'tree_sitter_python'`` in that window. A fresh interpreter records
    every assignment to ``sys.path`` during the imports codemem makes of it."""
    probe = (
        "import sys\n"
        "class Recording(list):\n"
        "    changes = []\n"
        "    def __setitem__(self, key, value):\n"
        "        Recording.changes.append(key)\n"
        "        super().__setitem__(key, value)\n"
        "sys.path = Recording(sys.path)\n"
        "from resources.graph.falkor_server import forget_failed_clients, import_falkordblite, start_errors\n"
        "import_falkordblite(); start_errors(); forget_failed_clients(__import__('pathlib').Path('/nonexistent'))\n"
        "import redislite\n"
        "print(len(Recording.changes))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0", "sys.path was reassigned while importing redislite"


def test_a_background_start_imports_the_engine_in_the_callers_thread(tmp_path: Path) -> None:
    """``start_in_background`` returns with the graph client imported: its thread only waits for
    the server (an import there was held up by the caller's GIL-bound work, and could race it)."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from resources.graph.factory import create_graph_store\n"
        "from resources.settings import Settings\n"
        f"store = create_graph_store(Settings(project_root=Path({str(tmp_path)!r})))\n"
        "assert 'redislite.falkordb_client' not in sys.modules\n"
        "store.start_in_background()\n"
        "print('redislite.falkordb_client' in sys.modules and 'resources.graph.falkor' in sys.modules)\n"
        "store.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
    assert graph_servers_under(tmp_path) == []

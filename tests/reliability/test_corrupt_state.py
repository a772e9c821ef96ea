"""Corrupted state files (issue 9, item 4): the memory ledger, the index manifest, the embedding
cache, a qdrant-edge segment, the graph's AOF and Dagster's storage. Every command fails with one
line naming the damaged file and ``codemem repair`` (never a traceback), and ``codemem repair``
restores the ledger from the latest backup or salvages it (the damaged file kept aside), rebuilds
what is derived, and leaves a project whose next check finds nothing."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.children import codemem
from tests.reliability.graph_servers import stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = "def checkout(cart):\n    return total(cart)\n\n\ndef total(cart):\n    return sum(cart)\n"
MEMORIES = ["Moved the billing export to a nightly job", "Checkout totals are computed in cents, never floats"]


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (done.args, done.stdout[-2000:], done.stderr[-4000:])
    return done


def _clear_failure(done: subprocess.CompletedProcess[str], name: str) -> str:
    """The command failed with a one-line error naming the damaged file and the repair, no traceback."""
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-4000:]
    assert name in done.stderr and "codemem repair" in done.stderr, done.stderr[-2000:]
    return done.stderr


def _garble(path: Path, start: int = 0, length: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[start:start + length] = b"\xa5" * min(length, max(0, len(data) - start))
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project indexed by `codemem index` (a Dagster run: every state file exists) with two memories."""
    root = tmp_path_factory.mktemp("corrupt-base") / "project"
    root.mkdir()
    (root / "shop.py").write_text(SOURCE)
    _ok(codemem(root, "index", "."))
    for content in MEMORIES:
        _ok(codemem(root, "memory", "add", "session", content))
    stop_graph_servers(root.parent)
    return root


@pytest.fixture
def project(base: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(base, root)
    return root


def _state(root: Path) -> Path:
    return root / ".codemem"


def _repair(root: Path, *args: str) -> dict[str, Any]:
    done = _ok(codemem(root, "repair", "--json", *args))
    return json.loads(done.stdout)


def _memories(root: Path) -> list[str]:
    done = _ok(codemem(root, "memory", "list", "--json"))
    data = json.loads(done.stdout)
    items = data["results"] if isinstance(data, dict) else data
    return sorted(item["content"] for item in items)


def _clean_after(root: Path) -> None:
    check = codemem(root, "repair", "--check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["broken"] == [], check.stdout[-3000:]


def test_corrupt_ledger_is_restored_from_the_latest_backup(project: Path, graph_servers: Path) -> None:
    _ok(codemem(project, "backup", "backups/first"))
    ledger = _state(project) / "memory.db"
    _garble(ledger)
    _clear_failure(codemem(project, "memory", "list"), "memory.db")
    _clear_failure(codemem(project, "search", "checkout total"), "memory.db")

    report = _repair(project)
    [fixed] = report["broken"]
    assert fixed["store"] == "ledger" and "restored from the backup" in fixed["action"], fixed
    assert Path(fixed["details"]["corrupted_file_kept_at"]).exists()
    assert report["projections_rebuilt"]
    assert _memories(project) == sorted(MEMORIES)
    found = json.loads(_ok(codemem(project, "memory", "search", "how are checkout totals computed", "--json")).stdout)
    assert found["results"][0]["content"] == MEMORIES[1]
    _clean_after(project)


def _index_page(db: Path) -> tuple[int, int]:
    """(page size, first page of an index of the memories table): damaging it breaks the file's
    integrity but leaves every row readable."""
    conn = sqlite3.connect(db)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        rows = conn.execute("SELECT rootpage FROM sqlite_master WHERE type='index' AND tbl_name='memories' AND rootpage > 1").fetchall()
    finally:
        conn.close()
    assert rows, "the memories table has no index"
    return page_size, rows[0][0]


def test_damaged_ledger_without_a_backup_is_salvaged(project: Path, graph_servers: Path) -> None:
    ledger = _state(project) / "memory.db"
    page_size, page = _index_page(ledger)
    _garble(ledger, (page - 1) * page_size, page_size)
    check = codemem(project, "repair", "--check", "--json")
    assert check.returncode == 1 and json.loads(check.stdout)["broken"][0]["store"] == "ledger", check.stdout

    report = _repair(project)
    [fixed] = report["broken"]
    assert "no backup found: salvaged 2 memories" in fixed["action"], fixed
    kept = Path(fixed["details"]["corrupted_file_kept_at"])
    assert kept.exists() and kept.name.startswith("memory.db.corrupt-")
    assert _memories(project) == sorted(MEMORIES)  # nothing dropped
    _clean_after(project)


def test_unreadable_or_truncated_ledger_is_kept_aside_never_replaced_silently(project: Path, graph_servers: Path) -> None:
    ledger = _state(project) / "memory.db"
    ledger.write_bytes(b"")  # truncated to nothing: SQLite alone would read it as a new, empty ledger
    _clear_failure(codemem(project, "memory", "list"), "memory.db")
    report = _repair(project)
    [fixed] = report["broken"]
    assert "salvaged 0 memories" in fixed["action"] and Path(fixed["details"]["corrupted_file_kept_at"]).exists()
    assert _ok(codemem(project, "memory", "list")).returncode == 0
    _clean_after(project)


@pytest.mark.soak  # derived state rebuilt; the ledger cases stay in the default run
def test_corrupt_manifest_is_rebuilt_by_reindexing(project: Path, graph_servers: Path) -> None:
    _garble(_state(project) / "index.db")
    _clear_failure(codemem(project, "status"), "index.db")
    report = _repair(project)
    assert [f["store"] for f in report["broken"]] == ["manifest"] and report["reindexed"]
    again = json.loads(_ok(codemem(project, "index", ".", "--plain", "--json")).stdout)
    assert again["files_indexed"] == 0 and again["files_unchanged"] == 1, again
    hits = _ok(codemem(project, "search", "sum of the cart"))
    assert "total" in hits.stdout
    _clean_after(project)


@pytest.mark.soak  # derived state rebuilt; the ledger cases stay in the default run
def test_corrupt_embedding_cache_is_dropped(project: Path, graph_servers: Path) -> None:
    cache = _state(project) / "embedding_cache.sqlite3"
    _garble(cache)
    done = codemem(project, "search", "sum of the cart")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if done.returncode != 0:  # degrade or fail, but by name
        _clear_failure(done, "embedding_cache.sqlite3")
    report = _repair(project)
    assert [f["store"] for f in report["broken"]] == ["embedding cache"], report
    assert "dropped" in report["broken"][0]["action"]
    _ok(codemem(project, "search", "sum of the cart"))
    _clean_after(project)


@pytest.mark.soak  # derived state rebuilt; the ledger cases stay in the default run
def test_corrupt_vector_segment_is_rebuilt(project: Path, graph_servers: Path) -> None:
    segments = list((_state(project) / "qdrant" / "code" / "segments").rglob("mutable_id_tracker.*"))
    assert segments, "no segment files found"
    for path in segments:
        path.write_bytes(b"garbage!" * 3)
    done = codemem(project, "search", "sum of the cart")
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "qdrant/code" in done.stderr and "codemem repair" in done.stderr, done.stderr[-2000:]
    report = _repair(project)
    assert [f["store"] for f in report["broken"]] == ["vector collection"], report
    assert report["reindexed"] and report["projections_rebuilt"]
    assert "total" in _ok(codemem(project, "search", "sum of the cart")).stdout
    assert _memories(project) == sorted(MEMORIES)
    _clean_after(project)


@pytest.mark.soak  # derived state rebuilt; the ledger cases stay in the default run
def test_corrupt_graph_files_are_rebuilt(project: Path, graph_servers: Path) -> None:
    for path in (_state(project) / "graph" / "appendonlydir").iterdir():
        _garble(path, 0, 64)
    done = codemem(project, "related", "shop.total")
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]
    assert "graph" in done.stderr and "codemem repair" in done.stderr, done.stderr[-2000:]
    report = _repair(project)
    assert [f["store"] for f in report["broken"]] == ["graph"], report
    assert "shop.checkout" in _ok(codemem(project, "related", "shop.total")).stdout
    _clean_after(project)


@pytest.mark.soak  # derived state rebuilt; the ledger cases stay in the default run
def test_corrupt_dagster_storage_is_moved_aside(project: Path, graph_servers: Path) -> None:
    runs = _state(project) / "dagster" / "history" / "runs.db"
    assert runs.exists()
    _garble(runs)
    (project / "shop.py").write_text(SOURCE + "\n\ndef refund(total):\n    return -total\n")  # a run to record
    done = _ok(codemem(project, "index", "."))  # the index itself stands; its run could not be recorded
    said = " ".join((done.stdout + done.stderr).split())
    assert "failed to record this index" in said and "runs.db" in said and "codemem repair" in said, said[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    report = _repair(project)
    assert [f["store"] for f in report["broken"]] == ["dagster storage"], report
    assert not report["reindexed"]
    _clean_after(project)


def test_repair_refuses_while_a_server_owns_the_project(project: Path, graph_servers: Path) -> None:
    from query_server.owner_lock import OwnerLock

    lock = OwnerLock(_state(project))
    assert lock.try_acquire()
    try:
        done = codemem(project, "repair")
        assert done.returncode == 1 and "stop it" in done.stderr and "Traceback" not in done.stderr, done.stderr
    finally:
        lock.release()

"""Disk full on the state dir (issue 9, item 4): the project (and its ``.codemem``) lives on a small
tmpfs that a filler file then fills to ENOSPC. ``codemem memory add`` fails with a clear error and
leaves the ledger intact; ``codemem index`` stops with a clear error; once space returns both
succeed and the stores agree. Needs ``mount -t tmpfs`` (root, as on the CI and dev machines here);
skipped where it is refused."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.children import codemem
from tests.reliability.graph_servers import stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
SIZE = "1g"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        stop_graph_servers(mount)
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(mount: Path) -> Path:
    """Write a filler file until the filesystem is full (ENOSPC)."""
    filler = mount / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            chunk = b"\0" * size
            try:
                while True:
                    os.write(fd, chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def _clear(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    text = done.stderr.lower()
    assert "no space left" in text or "disk" in text and "full" in text, done.stderr[-2000:]
    assert "corrupt" not in text, done.stderr[-2000:]  # a full disk is not damage: no repair advice
    return done.stderr


def _ledger_rows(root: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{root / '.codemem' / 'memory.db'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return sorted(r[0] for r in conn.execute("SELECT content FROM memories"))
    finally:
        conn.close()


@pytest.mark.soak  # needs tmpfs and ~30 s; long suite
def test_disk_full_memory_add_and_index_fail_clearly_then_resume(small_disk: Path, graph_servers: Path) -> None:
    root = small_disk / "project"
    root.mkdir()
    (root / "a.py").write_text("def first():\n    return 1\n")
    assert codemem(root, "index", ".", "--plain").returncode == 0
    assert codemem(root, "memory", "add", "session", "Written before the disk filled up").returncode == 0
    for n in range(40):  # new code to index once the disk is full
        (root / f"mod_{n}.py").write_text("".join(f"def f_{n}_{i}(x):\n    return x + {i}\n\n\n" for i in range(30)))

    filler = _fill(small_disk)
    add = codemem(root, "memory", "add", "session", "Written while the disk is full " + "x" * 20000)
    print("memory add on a full disk:", _clear(add).strip().splitlines()[-1])
    index = codemem(root, "index", ".", "--plain")
    print("index on a full disk:", _clear(index).strip().splitlines()[-1])
    _clear(codemem(root, "repair"))  # refuses: moving files aside on a full disk would make things worse

    filler.unlink()  # space returns
    assert _ledger_rows(root) == ["Written before the disk filled up"]  # intact, nothing half-written
    assert codemem(root, "memory", "add", "session", "Written after space returned").returncode == 0
    assert _ledger_rows(root) == ["Written after space returned", "Written before the disk filled up"]
    done = codemem(root, "index", ".", "--plain", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["failed"] == [] and report["files_seen"] == 41
    again = json.loads(codemem(root, "index", ".", "--plain", "--json").stdout)
    assert again["files_indexed"] == 0, again
    check = codemem(root, "repair", "--check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["broken"] == [], check.stdout[-2000:]
    shutil.rmtree(root / ".codemem", ignore_errors=True)

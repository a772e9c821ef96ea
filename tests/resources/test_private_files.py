"""State files are created 0600 and state folders 0700 whatever the umask (issue 25: the ledger,
manifest and caches were 0644, readable by every local user)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from resources.private_files import make_private_dir, make_private_file
from tests.conftest import write_files

REPO_ROOT = Path(__file__).parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_helpers_ignore_the_umask_and_tighten_what_exists(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        folder = make_private_dir(tmp_path / "state" / "nested")
        created = make_private_file(tmp_path / "new" / "ledger.db")
        loose = tmp_path / "loose.db"
        loose.write_text("kept")
        os.chmod(loose, 0o644)
        make_private_file(loose)
    finally:
        os.umask(old)
    assert _mode(folder) == 0o700
    assert _mode(created) == 0o600 and created.read_bytes() == b""
    assert _mode(created.parent) == 0o700  # a folder it had to create is private too
    assert _mode(loose) == 0o600 and loose.read_text() == "kept"


def test_codemem_state_is_private_under_an_open_umask(project: Path, tmp_path: Path) -> None:
    write_files(project, {"app/billing.py": "def total(lines):\n    return sum(lines)\n"})
    global_dir = tmp_path / "global-memories"
    env = {**os.environ, "CODEMEM_LOG_LEVEL": "ERROR", "CODEMEM_GLOBAL_DIR": str(global_dir)}

    def codemem(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "query_server.entry", *args], cwd=REPO_ROOT, env=env, umask=0o000,
            capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    codemem("index", str(project), "--plain")
    codemem("memory", "add", "session", "Checked file modes", "--project", str(project))
    codemem("memory", "add", "session", "Learnt to check modes everywhere", "--scope", "global", "--project", str(project))
    codemem("memory", "add", "session", "A personal note", "--scope", "local", "--project", str(project))
    codemem("backup", "backups/now", "--project", str(project))

    state = project / ".codemem"
    assert _mode(state) == 0o700  # nothing below it is reachable by another user
    private = [
        state / "memory.db", state / "index.db", state / "embedding_cache.sqlite3", state / "owner.lock", state / "global_replica.db",
        state / "local" / "memory.db", global_dir / "memory.db",
        project / "backups" / "now" / "memory.db", project / "backups" / "now" / "embeddings.db", project / "backups" / "now" / "BACKUP.json",
    ]
    for path in private:
        assert path.is_file(), path
        assert _mode(path) == 0o600, (path, oct(_mode(path)))
    for sidecar in [*state.glob("*.db-wal"), *state.glob("*.db-shm")]:
        assert _mode(sidecar) == 0o600, (sidecar, oct(_mode(sidecar)))
    for folder in (state / "local", state / "graph", state / "qdrant", global_dir, project / "backups" / "now"):
        assert _mode(folder) == 0o700, (folder, oct(_mode(folder)))

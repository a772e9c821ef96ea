"""Scoped writes are as crash-safe as project writes: a process SIGKILLed right after the local,
global or enterprise ledger committed a memory (``CODEMEM_FAULT_POINT=memory_add:after_ledger``, before any
projection or replication) loses nothing — after a restart the memory is read, projected and found
by meaning, and a global or enterprise one is found from another project too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from query_server.service import CodeMemService
from resources.faults import ENV as FAULT_ENV
from resources.memory.ledger import Ledger
from resources.schemas.memory import MemoryAddInput, MemoryGetInput, MemorySearchInput
from resources.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]

_ADD_ONE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1]), global_dir=Path(sys.argv[2])))
    result = svc.memory.memory_add(MemoryAddInput.model_validate_json(sys.argv[3]))
    print("ACK", result.model_dump_json(), flush=True)
    svc.close()
    """
)
CONTENT = "Prefer property-based tests with Hypothesis for parsers and serializers"
QUERY = "which testing style for parsers"


def _open(root: Path, global_dir: Path) -> CodeMemService:
    return CodeMemService(Settings(project_root=root, global_dir=global_dir))


@pytest.mark.parametrize("scope", ["global", "local", "enterprise"])
def test_sigkill_after_scoped_ledger_commit_is_found_after_restart(
    tmp_path: Path, graph_servers: Path, scope: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, other, global_dir, org_dir = tmp_path / "a", tmp_path / "b", tmp_path / "global", tmp_path / "org"
    for folder in (project, other, org_dir):
        folder.mkdir()
    monkeypatch.setenv("CODEMEM_ENTERPRISE_SCOPE", "1")  # this process and the one killed
    monkeypatch.setenv("CLAUDE_MEMORY_ENTERPRISE_PATH", str(org_dir))
    request = MemoryAddInput(
        memory_type="user_preference", content=CONTENT, scope=scope, request_id=f"crash-{scope}",
        metadata={"category": "Tool", "key": "tests.parsers", "value": "hypothesis", "scope": "Global"},
    )
    env = {**{k: v for k, v in os.environ.items() if k != FAULT_ENV}, FAULT_ENV: "memory_add:after_ledger",
           "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    died = subprocess.run(
        [sys.executable, "-c", _ADD_ONE, str(project), str(global_dir), request.model_dump_json()],
        capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=300,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert "ACK" not in died.stdout  # never acknowledged

    # what the crash left: the row committed in the scope's own ledger, nothing in the project's
    path = {"global": global_dir, "enterprise": org_dir, "local": project / ".codemem" / "local"}[scope] / "memory.db"
    ledger = Ledger(path, scope=scope)
    try:
        [row] = list(ledger.iter_memories())
        assert (row.content, row.version, row.scope) == (CONTENT, 1, scope)
    finally:
        ledger.close()
    project_ledger = Ledger(project / ".codemem" / "memory.db")
    try:
        assert list(project_ledger.iter_memories()) == []
    finally:
        project_ledger.close()

    svc = _open(project, global_dir)
    try:
        got = svc.memory.memory_get(MemoryGetInput(memory_id=row.id, memory_type="user_preference"))
        assert got.content == CONTENT and got.scope == scope
        svc.memory.sync()
        found = svc.memory.memory_search(MemorySearchInput(query=QUERY))
        assert found.results and found.results[0].id == row.id and found.results[0].scope == scope
        assert found.results[0].provenance.sync_status == "synced"
        stats = svc.memory.memory_statistics()
        assert stats.scopes[scope]["sync_status"] == {"synced": 1, "pending": 0, "failed": 0} and stats.outbox["pending"] == 0
        again = svc.memory.memory_add(request)  # the client's retry after the crash gets the same memory
        assert again.memory_id == row.id and stats.memory_counts["user_preference"]["total"] == 1
    finally:
        svc.close()

    elsewhere = _open(other, global_dir)
    try:
        ids = [h.id for h in elsewhere.memory.memory_search(MemorySearchInput(query=QUERY)).results]
        assert ids == ([row.id] if scope in ("global", "enterprise") else [])
    finally:
        elsewhere.close()

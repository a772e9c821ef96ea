"""SIGKILL in every normalization phase: after a restart no memory is lost or half-merged, the
live collections answer, and the next normalization converges."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from query_server.service import CodeMemService
from resources.faults import ENV as FAULT_ENV
from resources.memory.projection import COLLECTIONS, collection_name
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryBulkAddInput,
    MemoryDeleteInput,
    MemorySearchInput,
    NormalizeMemoryInput,
    NormalizeStatusInput,
)
from resources.settings import Settings
from tests.reliability.graph_servers import stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[2]
POINTS = ["snapshot", "deduplication", "orphan_detection", "embedding_refresh", "cleanup", "validation", "swap", "after_swap"]

NORMALIZE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.settings import Settings
    from resources.schemas.memory import NormalizeMemoryInput, NormalizeStatusInput
    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    job = svc.memory.normalize_memory(NormalizeMemoryInput())
    while svc.memory.normalize_status(NormalizeStatusInput(job_id=job.job_id)).status == "running":
        time.sleep(0.05)
    print("FINISHED", svc.memory.normalize_status(NormalizeStatusInput(job_id=job.job_id)).status, flush=True)
    svc.close()
    """
)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A project whose ledger holds duplicates, an expired soft delete and ordinary memories."""
    root = tmp_path_factory.mktemp("seed") / "project"
    root.mkdir()
    svc = CodeMemService(Settings(project_root=root))
    try:
        add = lambda t, c, **kw: svc.memory.memory_add(MemoryAddInput(memory_type=t, content=c, **kw)).memory_id  # noqa: E731
        ids = {
            "dup_a": add("session", "Moved the billing export to a nightly job."),
            "dup_b": add("session", "moved the billing export to a nightly job."),  # same tokens (uncased model), other hash
            "old": add("session", "Something from a long time ago"),
            "req": add("requirements", "Exports finish within five minutes",
                       metadata={"requirement_id": "REQ-EXP-001", "title": "Export time", "priority": "High", "status": "Approved"}),
        }
        svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=[
            {"memory_type": "design", "content": f"Design note {i} about queue {i}",
             "metadata": {"design_type": "Specification", "title": f"Note {i}", "status": "Accepted"}} for i in range(30)
        ]))
        svc.memory.memory_delete(MemoryDeleteInput(memory_id=ids["old"], memory_type="session"))
        with svc.memory.ledger._transaction() as conn:
            conn.execute("UPDATE memories SET deleted_at='2020-01-01T00:00:00+00:00' WHERE id=?", (ids["old"],))
    finally:
        svc.close()
    return root, ids


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_in_each_normalization_phase(point: str, seeded: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    source, ids = seeded
    root = tmp_path / "project"
    shutil.copytree(source, root)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), FAULT_ENV: f"normalize:{point}"}
    proc = subprocess.run([sys.executable, "-c", NORMALIZE, str(root)], capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=300)
    stop_graph_servers(root)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    time.sleep(0.2)

    svc = CodeMemService(Settings(project_root=root))
    try:
        ledger = svc.memory.ledger
        swapped = point == "after_swap"
        assert svc.memory.projector.generation == (1 if swapped else 0)
        # nothing lost, nothing half-merged: either the whole normalization applied or none of it
        assert ledger.get(ids["req"]) is not None and not ledger.get(ids["req"]).deleted
        dup_deleted = [ledger.get(ids[k]).deleted for k in ("dup_a", "dup_b")]
        assert dup_deleted.count(True) == (1 if swapped else 0)
        assert (ledger.get(ids["old"]) is None) == swapped
        assert sum(c["active"] for c in ledger.counts().values()) == (32 if swapped else 33)
        svc.memory.sync()
        hit = svc.memory.memory_search(MemorySearchInput(query="how long may an export take", memory_types=["requirements"]))
        assert [h.id for h in hit.results] == [ids["req"]]
        # the next run converges
        job = svc.memory.normalize_memory(NormalizeMemoryInput())
        while (job := svc.memory.normalize_status(NormalizeStatusInput(job_id=job.job_id))).status == "running":
            time.sleep(0.05)
        assert job.status == "done", job.errors
        svc.memory.sync()
        live = svc.memory.projector.generation
        for memory_type in COLLECTIONS:
            expected = ledger.counts().get(memory_type, {}).get("total", 0)
            assert svc.vectors.count(collection_name(memory_type, live)) == expected, memory_type
        again = svc.memory.normalize_memory(NormalizeMemoryInput(dry_run=True))
        while (again := svc.memory.normalize_status(NormalizeStatusInput(job_id=again.job_id))).status == "running":
            time.sleep(0.05)
        assert again.report["duplicates"] == 0 and again.report["cleanup"] == 0
        state = svc.settings.resolved_state_dir() / "qdrant"
        leftovers = sorted(p.name for p in state.iterdir() if p.name.startswith("session_history") and p.name != collection_name("session", live))
        assert leftovers == []
    finally:
        svc.close()
        stop_graph_servers(root)

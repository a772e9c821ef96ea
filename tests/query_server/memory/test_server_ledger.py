"""The project's memory ledger in PostgreSQL (server mode, ``CODEMEM_DATABASE_URL``), through the
memory tools as a user runs them: a real PostgreSQL cluster (``tests/postgres_cluster.py``), the
real embedded vector and graph stores, the hooks' reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from resources.memory.ledger import LedgerError
from resources.memory.ledger_reader import SERVER_COPY_FILE, LedgerReader, ledger_file
from resources.memory.scopes import project_ledger_namespace
from resources.schemas.memory import BackupInput, MemoryAddInput, MemoryGetInput, MemorySearchInput, RestoreInput
from resources.settings import Settings


def _rows_in_postgres(url: str, settings: Settings) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {project_ledger_namespace(settings)}.memories").fetchone()[0]


def _hook_counts(state: Path) -> dict[str, int]:
    reader = LedgerReader.open(ledger_file(str(state)), 5.0, None)
    assert reader is not None
    try:
        return {memory_type: n for memory_type, deleted, n in reader.counts() if not deleted}
    finally:
        reader.close()


def test_memories_live_in_postgres_and_the_hooks_read_a_copy(project: Path, postgres_url: str, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project, database_url=postgres_url)
    added = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Moved invoice rendering to a worker"))
    assert added.status == "created" and added.sync_status == "synced"
    found = svc.memory.memory_search(MemorySearchInput(query="invoice rendering worker"))
    assert [hit.id for hit in found.results][:1] == [added.memory_id]
    state = project / ".codemem"
    assert _rows_in_postgres(postgres_url, svc.settings) == 1 and not (state / "memory.db").exists()
    assert (state / SERVER_COPY_FILE).is_file() and _hook_counts(state) == {"session": 1}
    storage = svc.memory.memory_statistics().storage["ledger"]
    assert "schema codemem_project_" in storage["path"] and storage["bytes"] > 0 and "@" not in storage["path"].split("@")[0][-4:]

    backup = svc.memory.backup(BackupInput(path="backups/one"))
    assert backup.memories == 1 and (project / "backups/one/memory.db").is_file()
    later = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Added retries to the webhook sender"))
    assert _hook_counts(state) == {"session": 2}
    restored = svc.memory.restore(RestoreInput(path="backups/one"))
    assert restored.restored_memories == 1 and Path(restored.previous_ledger).is_file()
    assert _rows_in_postgres(postgres_url, svc.settings) == 1 and _hook_counts(state) == {"session": 1}
    with pytest.raises(Exception, match="not found"):
        svc.memory.memory_get(MemoryGetInput(memory_id=later.memory_id, memory_type="session"))
    again = svc.memory.memory_search(MemorySearchInput(query="webhook sender retries"))
    assert later.memory_id not in [hit.id for hit in again.results]


def test_an_embedded_project_takes_its_memories_into_postgres(tmp_path: Path, postgres_url: str, service_factory) -> None:  # noqa: ANN001
    project = tmp_path / "shop#1"  # (a name a file: URI must escape)
    project.mkdir()
    embedded = service_factory(project)
    kept = embedded.memory.memory_add(MemoryAddInput(memory_type="session", content="Chose SQLite WAL for the ledger"))
    embedded.close()
    svc = service_factory(project, database_url=postgres_url)
    got = svc.memory.memory_get(MemoryGetInput(memory_id=kept.memory_id, memory_type="session"))
    assert got.content == "Chose SQLite WAL for the ledger" and _rows_in_postgres(postgres_url, svc.settings) == 1
    state = project / ".codemem"
    assert not (state / "memory.db").exists() and len(list(state.glob("memory.db.moved-to-postgres-*"))) == 1
    svc.close()
    back = service_factory(project)  # embedded again: a new ledger file, and no stale copy for the hooks
    assert not (state / SERVER_COPY_FILE).exists()
    assert back.memory.memory_statistics().memory_counts["session"]["total"] == 0


def test_a_second_process_with_embedded_stores_is_refused(tmp_path: Path, postgres_url: str, service_factory) -> None:  # noqa: ANN001
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    svc = service_factory(first, database_url=postgres_url, project_id="shop")
    svc.memory.memory_add(MemoryAddInput(memory_type="session", content="one"))
    with pytest.raises(LedgerError, match="Qdrant server and Neo4j"):
        service_factory(second, database_url=postgres_url, project_id="shop").memory.memory_statistics()
    svc.close()
    other = service_factory(second, database_url=postgres_url, project_id="shop")  # the first one stopped
    assert other.memory.memory_statistics().memory_counts["session"]["total"] == 1


def test_a_file_left_by_a_crash_after_its_load_or_written_in_embedded_mode_meanwhile_is_merged(
    project: Path, postgres_url: str, service_factory  # noqa: ANN001
) -> None:
    from resources.memory.ledger import Ledger
    from resources.memory.ledger_postgres import PostgresLedgerStore

    embedded = service_factory(project)
    first = embedded.memory.memory_add(MemoryAddInput(memory_type="session", content="Chose SQLite WAL for the ledger"))
    embedded.close()
    settings = Settings(project_root=project, database_url=postgres_url)
    store = PostgresLedgerStore(postgres_url, namespace=project_ledger_namespace(settings))
    assert store.load_from(project / ".codemem" / "memory.db")  # then the process died before the rename
    store.close()
    later = Ledger(project / ".codemem" / "memory.db")  # and one more memory was written in embedded mode
    from resources.memory.ledger import NewMemory

    (extra,) = later.add([NewMemory(memory_type="session", content="Kept the outbox in the ledger", metadata={})])
    later.close()
    svc = service_factory(project, database_url=postgres_url)
    assert _rows_in_postgres(postgres_url, settings) == 2  # the loaded one once, the newer one merged
    for memory_id in (first.memory_id, extra.id):
        assert svc.memory.memory_get(MemoryGetInput(memory_id=memory_id, memory_type="session")).id == memory_id
    assert not (project / ".codemem" / "memory.db").exists()


def test_a_failed_start_lets_the_next_process_serve(
    tmp_path: Path, postgres_url: str, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    from query_server.memory import stores

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the projector could not start (test)")

    monkeypatch.setattr(stores, "MemoryProjector", broken)
    with pytest.raises(RuntimeError, match="could not start") as caught:
        service_factory(first, database_url=postgres_url, project_id="shop").memory.memory_statistics()
    monkeypatch.undo()
    other = service_factory(second, database_url=postgres_url, project_id="shop")  # the traceback is still held
    assert caught.value is not None and other.memory.memory_statistics().memory_counts["session"]["total"] == 0


def test_a_normalization_runs_in_one_process_of_the_project_and_a_dead_one_shows_as_interrupted(
    project: Path, postgres_url: str, service_factory  # noqa: ANN001
) -> None:
    """Replicas share the ledger: a normalization another process runs (it holds the ledger's
    "normalization" lock) refuses a second one here; its recorded state shows, and once no process
    holds the lock (the one running it died) it shows as interrupted."""
    from query_server.paging import ToolError
    from resources.memory.ledger import Ledger
    from resources.memory.ledger_postgres import PostgresLedgerStore
    from resources.schemas.memory import NormalizationJob, NormalizeMemoryInput, NormalizeStatusInput

    svc = service_factory(project, database_url=postgres_url)
    other = Ledger(store=PostgresLedgerStore(postgres_url, namespace=project_ledger_namespace(svc.settings)))
    elsewhere = NormalizationJob(job_id="elsewhere", status="running", dry_run=False, phase="dedup", started_at="2026-11-28T00:00:00+00:00")
    try:
        with other.alone("normalization", wait=False):  # another replica normalizes
            other.set_meta("last_normalization", elsewhere.model_dump_json())
            with pytest.raises(ToolError, match="another codemem process"):
                svc.memory.normalize_memory(NormalizeMemoryInput(dry_run=True))
            assert svc.memory.normalize_status(NormalizeStatusInput(job_id="elsewhere")).status == "running"
        stopped = svc.memory.normalize_status(NormalizeStatusInput(job_id="elsewhere"))  # its process is gone
        assert stopped.status == "failed" and stopped.errors[-1].startswith("interrupted")
        started = svc.memory.normalize_memory(NormalizeMemoryInput(dry_run=True))
        import time

        deadline = time.monotonic() + 60
        while svc.memory.normalize_status(NormalizeStatusInput(job_id=started.job_id)).status == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with other.alone("normalization", wait=False):  # released when it ended
            assert NormalizationJob.model_validate_json(other.meta("last_normalization") or "{}").job_id == started.job_id
    finally:
        other.close()

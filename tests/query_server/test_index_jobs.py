"""Background index jobs are recorded in the manifest (issue 23: jobs in the shared database): a
job started by one process is polled from another (a replica, or the server after a restart), and
a job whose process stopped mid-run is reported as interrupted, not as running for ever."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from query_server.code import index_jobs
from query_server.paging import ToolError
from resources.schemas.tools import IndexDirectoryInput, JobState, JobStatusInput

FILES = {
    "pkg/util.py": "def helper(x):\n    return x + 1\n",
    "pkg/main.py": "from pkg.util import helper\n\n\ndef run():\n    return helper(2)\n",
}


def _project(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _wait(service, job_id: str) -> JobState:  # noqa: ANN001
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = service.job_status(JobStatusInput(job_id=job_id))
        if job.status in ("done", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(params=["sqlite", "postgres"])
def settings_overrides(request: pytest.FixtureRequest) -> dict:
    overrides: dict = {"dense_embeddings": False}
    if request.param == "postgres":
        overrides["database_url"] = request.getfixturevalue("postgres_url")
    return overrides


def test_a_finished_job_is_answered_by_the_next_process(project: Path, service_factory, settings_overrides: dict) -> None:  # noqa: ANN001
    first = service_factory(_project(project), **settings_overrides)
    started = first.index_directory(IndexDirectoryInput(directory_path="."))
    done = _wait(first, started.job_id)
    assert done.status == "done" and done.report and done.report["files_indexed"] == 2
    first.close()

    second = service_factory(project, **settings_overrides)  # a restart (or another replica)
    again = second.job_status(JobStatusInput(job_id=started.job_id))
    assert again.status == "done" and again.report == done.report and again.finished_at == done.finished_at
    with pytest.raises(ToolError, match="Job not found"):
        second.job_status(JobStatusInput(job_id="nope"))


def test_a_job_whose_process_stopped_is_reported_interrupted(project: Path, service_factory, settings_overrides: dict) -> None:  # noqa: ANN001
    """A recorded job that no process runs any more (none holds its lock) is interrupted; in server
    mode one another process runs (a replica holding its lock) shows its recorded progress."""
    service = service_factory(_project(project), **settings_overrides)
    running = JobState(job_id="j1", kind="reindex", status="running", phase="parse", done=3, total=10,
                       started_at="2026-11-28T00:00:00+00:00")
    service.manifest.save_job("j1", running.model_dump_json(), finished=False, at=time.time())
    if "database_url" in settings_overrides:
        from resources.manifest import Manifest, manifest_namespace
        from resources.manifest_store import PostgresManifestStore

        replica = Manifest(store=PostgresManifestStore(settings_overrides["database_url"], namespace=manifest_namespace(service.settings)))
        try:
            with replica.alone(index_jobs._job_lock_name("j1")):  # another replica runs it
                assert service.job_status(JobStatusInput(job_id="j1")).status == "running"
        finally:
            replica.close()
    stopped = service.job_status(JobStatusInput(job_id="j1"))
    assert stopped.status == "failed" and stopped.error and stopped.error.startswith("interrupted") and stopped.done == 3


def test_only_the_newest_finished_jobs_are_kept(project: Path, service_factory, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    from resources import manifest as manifest_module

    monkeypatch.setattr(manifest_module, "JOBS_KEPT", 3)
    service = service_factory(project, dense_embeddings=False)
    for i in range(5):
        state = JobState(job_id=f"j{i}", kind="reindex", status="done", started_at="2026-11-28T00:00:00+00:00")
        service.manifest.save_job(f"j{i}", state.model_dump_json(), finished=True, at=1000.0 + i)
    service.manifest.save_job("live", JobState(job_id="live", kind="reindex", status="running", started_at="x").model_dump_json(),
                              finished=False, at=0.0)
    kept = [job_id for job_id in ("j0", "j1", "j2", "j3", "j4", "live") if service.manifest.job(job_id) is not None]
    assert kept == ["j2", "j3", "j4", "live"]
    late = JobState(job_id="j5", kind="reindex", status="done", started_at="2026-11-28T00:00:00+00:00")
    service.manifest.save_job("j5", late.model_dump_json(), finished=True, at=manifest_module.INTERRUPTED_JOBS_KEPT_S + 1.0)
    assert service.manifest.job("live") is None  # never finished, recorded over a week before: it stopped

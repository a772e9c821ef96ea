"""Background index work waits for tool calls in flight (query_server.foreground)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from query_server.foreground import ForegroundGate
from query_server.ownership import ProjectHandle
from resources.schemas.tools import CodeSearchInput, IndexInput, JobStatusInput, ReindexInput
from resources.settings import Settings
from tests.conftest import write_files


def test_nothing_in_flight_means_no_wait() -> None:
    gate = ForegroundGate()
    assert gate.pause_for_foreground() == 0.0 and gate.paused_s == 0.0


def test_a_step_waits_until_the_call_is_served() -> None:
    gate = ForegroundGate(max_pause_s=5.0)
    entered, release = threading.Event(), threading.Event()

    def serve() -> None:
        with gate.serving():
            entered.set()
            release.wait()

    worker = threading.Thread(target=serve)
    worker.start()
    entered.wait()
    assert gate.in_flight == 1
    threading.Timer(0.1, release.set).start()
    waited = gate.pause_for_foreground()
    worker.join()
    assert 0.05 <= waited < 5.0 and gate.in_flight == 0


def test_the_wait_is_bounded_so_a_job_is_never_starved() -> None:
    gate = ForegroundGate(max_pause_s=0.05)
    with gate.serving():
        waited = gate.pause_for_foreground()
    assert 0.05 <= waited < 1.0


def test_a_reindex_job_pauses_for_calls_and_calls_are_not_counted_after(project: Path) -> None:
    write_files(project, {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(30)})
    handle = ProjectHandle(Settings(project_root=project))
    try:
        handle.call("index", IndexInput())  # "index" runs index work itself: not counted in flight
        service = handle.backend
        assert service.foreground.in_flight == 0 and service.foreground.paused_s == 0.0
        with service.foreground.serving():  # a call being served while the job runs
            job = handle.call("reindex", ReindexInput(scope="full"))
            time.sleep(0.5)
        deadline = time.monotonic() + 120
        while handle.call("job_status", JobStatusInput(job_id=job.job_id)).status not in ("done", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert handle.call("job_status", JobStatusInput(job_id=job.job_id)).status == "done"
        assert service.foreground.paused_s > 0.0  # its steps waited for the call
        assert handle.call("code_search", CodeSearchInput(query="f7")).results
        assert service.foreground.in_flight == 0  # every counted call was released
    finally:
        handle.close()

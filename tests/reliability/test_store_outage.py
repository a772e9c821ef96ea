"""A store that goes away and comes back (issue 9, item 4).

The embedded graph server (FalkorDB's ``redis-server``, a daemonized child) is SIGKILLed under a
running ``codemem serve``: the owner's graph store starts a new server from the AOF on the next
call (``FalkorGraphStore._revive``), so memory writes keep succeeding, /health stays or comes back
to 200 and the outbox drains. When the server cannot come back (its restart fails), memory writes
still succeed as pending, memory search answers, graph tools and /health name the graph store, and
everything drains once it can start again. The vector store outage (server mode at a dead URL) is
the last test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from query_server.service import ToolError
from resources.graph.falkor import FalkorGraphStore
from resources.graph.store import GraphUnavailable
from resources.schemas.memory import MemoryAddInput, MemoryGetInput, MemorySearchInput
from tests.reliability.children import child_env
from tests.reliability.graph_servers import graph_servers_under

REPO_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_graph_server_killed_under_codemem_serve_is_restarted(project: Path, graph_servers: Path) -> None:
    project.joinpath("app.py").write_text("def main():\n    return helper()\n\n\ndef helper():\n    return 1\n")
    port = _free_port()
    log = project.parent / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "query_server.cli", "serve", "--project", str(project), "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=err, env=child_env(), cwd=str(REPO_ROOT),
        )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=60) as http:
            def up() -> bool:
                try:
                    return http.get("/health").status_code == 200
                except httpx.HTTPError:
                    assert proc.poll() is None, log.read_text()[-3000:]
                    return False

            _wait(up, 180, "codemem serve to answer")
            first = http.post("/tools/memory_add", json={"memory_type": "session", "content": "Split the billing worker in two"})
            assert first.status_code == 200, first.text
            [server] = graph_servers_under(project)
            os.kill(server, signal.SIGKILL)
            _wait(lambda: not Path(f"/proc/{server}").exists(), 10, "the graph server to die")

            # a write right after the kill: acknowledged; the graph comes back on its own
            second = http.post("/tools/memory_add", json={"memory_type": "session", "content": "Moved invoices to the new queue"})
            assert second.status_code == 200, second.text
            mid = second.json()["memory_id"]

            def synced() -> bool:
                got = http.post("/tools/memory_get", json={"memory_id": mid, "memory_type": "session"})
                return got.status_code == 200 and got.json()["sync_status"] == "synced"

            _wait(synced, 30, "the memory written after the kill to be synced")
            health = http.get("/health")
            assert health.status_code == 200, health.text
            graph = health.json()["components"]["graph_store"]
            assert graph["status"] == "ok" and graph["pid"] != server, graph
            rows = http.post("/tools/graph_query", json={"cypher": "MATCH (n:Session) RETURN count(n) AS c"})
            assert rows.status_code == 200 and rows.json()["results"] == [{"c": 2}], rows.text
            stats = http.post("/tools/memory_statistics", json={}).json()
            assert stats["outbox"]["pending"] == 0, stats["outbox"]
        assert "died; starting a new one" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_graph_server_that_cannot_come_back_degrades_then_drains(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    from fastapi.testclient import TestClient

    from query_server.http_api import build_http_app
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    handle = ProjectHandle(Settings(project_root=project))
    try:
        assert handle.is_owner
        svc = handle.backend
        before = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Profiled the slow checkout page"))
        assert before.sync_status == "synced"
        store = svc.graph.store  # the embedded graph starts on first use (resources.graph.lazy)
        assert isinstance(store, FalkorGraphStore)
        pid = store.health()["pid"]

        def cannot_start(self: FalkorGraphStore) -> None:
            raise GraphUnavailable(f"cannot start the embedded FalkorDB in {self.db_dir}: no space left (test)")

        monkeypatch.setattr(FalkorGraphStore, "_start", cannot_start)
        monkeypatch.setattr("resources.graph.falkor.REVIVE_INTERVAL_S", 0.0)
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: not Path(f"/proc/{pid}").exists(), 10, "the graph server to die")

        added = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Moved invoice rendering to a worker process"))
        assert added.status == "created" and added.sync_status == "pending"
        stats = svc.memory.memory_statistics()
        assert stats.outbox["pending"] == 1 and stats.sync_status["pending"] == 1, stats.outbox
        found = svc.memory.memory_search(MemorySearchInput(query="invoice rendering worker process"))
        assert found.results and found.results[0].id == added.memory_id  # vectors were written before the graph failed

        with TestClient(build_http_app(handle, token=None), base_url="http://127.0.0.1:8765") as http:
            health = http.get("/health")
            assert health.status_code == 503, health.text
            graph = health.json()["components"]["graph_store"]
            assert graph["status"] == "error" and "restart codemem" in graph["hint"], graph
            query = http.post("/tools/graph_query", json={"cypher": "MATCH (n:Session) RETURN count(n) AS c"})
            assert query.status_code == 503 and query.headers["retry-after"], query.text  # the store, not the request
            text = query.text.lower()
            assert "graph" in text and "unavailable" in text, query.text
            assert "traceback" not in text

            monkeypatch.undo()  # the server can start again
            _wait(lambda: http.get("/health").status_code == 200, 30, "/health to come back")
        report = svc.memory.sync()
        assert report["failed"] == 0, report
        got = svc.memory.memory_get(MemoryGetInput(memory_id=added.memory_id, memory_type="session"))
        assert got.sync_status == "synced"
        assert added.memory_id in svc.graph.node_ids("Session")
        assert svc.memory.memory_statistics().outbox["pending"] == 0
    finally:
        handle.close()


def test_vector_server_at_a_dead_url_keeps_writes_pending(
    project: Path, graph_servers: Path, service_factory, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    monkeypatch.setenv("CODEMEM_QDRANT_URL", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    try:
        svc = service_factory(project)
    except (ToolError, Exception) as exc:  # noqa: BLE001 - opening may refuse: then the message must name the store
        text = str(exc).lower()
        assert "qdrant" in text or "vector" in text, exc
        return
    added = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Rotated the webhook signing secret"))
    assert added.sync_status == "pending"
    degraded = svc.memory.memory_search(MemorySearchInput(query="webhook signing secret"))
    assert degraded.search_mode.startswith("ledger-keyword") and degraded.results[0].id == added.memory_id
    health = svc.health()
    assert health.status == "error" and health.components["vector_store"]["status"] == "error"


def test_graph_store_restarts_a_killed_server_with_its_data(tmp_path: Path, graph_servers: Path) -> None:
    store = FalkorGraphStore(tmp_path / "graph")
    try:
        store._write("CREATE (:Probe {id: 'kept'})", {})  # noqa: SLF001 - the store's own write path
        time.sleep(1.5)  # appendfsync everysec: the write is on disk
        pid = store.health()["pid"]
        os.kill(pid, signal.SIGKILL)
        _wait(lambda: not Path(f"/proc/{pid}").exists(), 10, "the graph server to die")
        assert store._read("MATCH (n:Probe) RETURN n.id AS id") == [{"id": "kept"}]  # noqa: SLF001
        assert store.restarts == 1 and store.health()["pid"] != pid
        assert len(graph_servers_under(tmp_path)) == 1
    finally:
        store.close()
    assert graph_servers_under(tmp_path) == []


def test_concurrent_calls_after_a_kill_start_one_server_and_a_close_waits_for_it(
    tmp_path: Path, graph_servers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several threads see the dropped connection at once (HTTP requests, the outbox drain): one
    of them restarts the server and every one of them tries its call again on it; a close that
    comes in the middle of a restart waits for it and stops the new server, instead of returning
    at once and leaving it running."""
    import threading

    store = FalkorGraphStore(tmp_path / "graph")
    closed = False
    try:
        starts: list[float] = []
        real_start = FalkorGraphStore._start

        def slow_start(self: FalkorGraphStore) -> None:
            starts.append(time.monotonic())
            time.sleep(0.5)  # the window another thread would slip into
            real_start(self)

        def kill_server() -> None:
            pid = store.health()["pid"]
            os.kill(pid, signal.SIGKILL)
            _wait(lambda: not Path(f"/proc/{pid}").exists(), 10, "the graph server to die")

        monkeypatch.setattr(FalkorGraphStore, "_start", slow_start)
        monkeypatch.setattr("resources.graph.falkor.REVIVE_INTERVAL_S", 0.0)
        kill_server()
        results: list[object] = []
        callers = [threading.Thread(target=lambda: results.append(store._revive())) for _ in range(4)]  # noqa: SLF001
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(30)
        assert len(starts) == 1, f"{len(starts)} restarts for one dead server"
        assert results == [True] * 4, results  # one restarted it, the three that waited retry on it
        assert store._read("RETURN 1 AS one") == [{"one": 1}]  # noqa: SLF001
        assert len(graph_servers_under(tmp_path)) == 1

        kill_server()
        reviver = threading.Thread(target=store._revive)  # noqa: SLF001
        reviver.start()
        time.sleep(0.2)  # a restart is under way
        store.close()  # waits for it, then stops the server it started
        closed = True
        reviver.join(30)
        assert len(starts) == 2
        assert graph_servers_under(tmp_path) == [], "the restarted server outlived the close"
    finally:
        if not closed:
            store.close()


def test_an_unrecorded_orphan_graph_server_is_stopped_on_the_next_open(tmp_path: Path, graph_servers: Path) -> None:
    """An owner killed while its server was starting leaves a server that no registry names (seen
    once in the normalize soak); the next open stops it instead of running a second server on the AOF."""
    db = tmp_path / "graph"
    script = f"from pathlib import Path; from resources.graph.falkor import FalkorGraphStore; s = FalkorGraphStore(Path({str(db)!r})); print('up', flush=True); import time; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=child_env(), cwd=str(REPO_ROOT))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    [orphan] = graph_servers_under(tmp_path)
    (db / "graph.rdb.settings").unlink()  # as if killed before the server was recorded
    store = FalkorGraphStore(db)
    try:
        assert store.recovery == "none"
        assert graph_servers_under(tmp_path) == [store.health()["pid"]] and store.health()["pid"] != orphan
    finally:
        store.close()
    assert graph_servers_under(tmp_path) == []


def test_memories_written_just_before_a_graph_server_crash_are_projected_again(
    project: Path, graph_servers: Path, service_factory  # noqa: ANN001
) -> None:
    """A killed graph server comes back from its AOF without its last second of writes, while the
    ledger said those memories were synced (seen as a missing Session node under a loaded machine).
    The projector queues the memories it wrote within that window again once the server restarted."""
    svc = service_factory(project)
    svc.memory.stop_sync()  # the test drains by hand (the background sync would empty the outbox first)
    first = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Split the billing worker in two"))
    assert first.sync_status == "synced"
    [server] = graph_servers_under(project)
    os.kill(server, signal.SIGKILL)  # at once: its AOF may well lack the first node
    _wait(lambda: not Path(f"/proc/{server}").exists(), 10, "the graph server to die")
    svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Moved invoices to the new queue"))
    assert svc.graph.restarts == 1
    assert svc.memory.ledger.outbox_entry(first.memory_id) is not None  # queued again, whatever the AOF kept
    svc.memory.sync()
    assert svc.memory.ledger.outbox_stats()["pending"] == 0
    assert svc.graph.read_query("MATCH (n:Session) RETURN count(n) AS c", {})[1] == [{"c": 2}]


_GRAPH_CHILD = (
    "import sys, time\n"
    "from resources.graph.falkor import FalkorGraphStore\n"
    "store = FalkorGraphStore(__import__('pathlib').Path(sys.argv[1]))\n"
    "print('STARTED', flush=True)\n"
    "time.sleep(600)\n"
)


def test_codemem_ui_stops_the_graph_server_a_killed_run_left_unless_an_owner_uses_it(project: Path, graph_servers: Path) -> None:
    """Issue 24, item 6: stopping `codemem ui` during a run left the run worker's graph server
    (daemonized, re-parented to PID 1) running. The UI's exit stops it when no codemem process owns
    the project; an owner's server stays."""
    from query_server.cli.ui import stop_orphaned_graph_server
    from query_server.owner_lock import OwnerLock

    state = project / ".codemem"
    worker = subprocess.Popen([sys.executable, "-c", _GRAPH_CHILD, str(state / "graph")], stdout=subprocess.PIPE,
                              env=child_env(), cwd=str(REPO_ROOT), text=True)
    assert worker.stdout is not None and worker.stdout.readline().strip() == "STARTED"
    worker.kill()  # the run worker, killed with the UI's process group
    worker.wait(10)
    [server] = graph_servers_under(project)
    owner = OwnerLock(state)
    assert owner.try_acquire()  # a codemem process owns the project: its server is in use
    try:
        assert stop_orphaned_graph_server(state) == []
        assert graph_servers_under(project) == [server]
    finally:
        owner.release()
    assert stop_orphaned_graph_server(state) == [server]
    _wait(lambda: not graph_servers_under(project), 10, "the orphaned graph server to stop")


def test_a_graph_restart_found_by_a_read_requeues_what_was_written_before_it(
    project: Path, graph_servers: Path, service_factory  # noqa: ANN001
) -> None:
    """The restart may be found by a graph read, with nothing written after it: the background
    drain (an empty outbox) still queues the memories written within the window before the
    restart, however long after the restart it runs."""
    from resources.memory.graph_replay import LOSS_WINDOW_S

    svc = service_factory(project)
    svc.memory.stop_sync()  # the test drains by hand
    written = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Pinned the TLS library version"))
    [server] = graph_servers_under(project)
    os.kill(server, signal.SIGKILL)
    _wait(lambda: not Path(f"/proc/{server}").exists(), 10, "the graph server to die")
    svc.graph.read_query("MATCH (n:Session) RETURN count(n) AS c", {})  # finds it dead: a new server
    assert svc.graph.restarts == 1 and svc.memory.ledger.outbox_stats()["pending"] == 0
    time.sleep(LOSS_WINDOW_S + 0.5)  # longer than the window: what counts is when the server restarted
    assert svc.memory.projector.drain().requeued == 1  # queued again, whatever the AOF kept
    assert svc.memory.ledger.outbox_stats()["pending"] == 0 and svc.memory.ledger.outbox_entry(written.memory_id) is None
    assert svc.memory.memory_get(MemoryGetInput(memory_id=written.memory_id, memory_type="session")).sync_status == "synced"
    assert svc.graph.read_query("MATCH (n:Session {memory_id: $id}) RETURN count(n) AS c", {"id": written.memory_id})[1] == [{"c": 1}]
    assert svc.memory.projector._graph_writes.lost() is None  # noqa: SLF001 - that restart is replayed

"""Two ``codemem serve`` replicas and one indexing worker on one PostgreSQL under 100 HTTP clients,
one replica SIGKILLed mid-write and restarted (issue 23, item 4): 0 acknowledged memories lost,
0 duplicates, 0 5xx from the surviving replica, and the index afterwards equal to a clean rebuild.

Two store setups, the ledger and the manifest in PostgreSQL in both:

- ``postgres-embedded-stores`` (runs here): the replicas and the worker share one state dir, so the
  embedded vector and graph stores have one owner (``query_server.ownership``): the replica that
  owns them is the one killed, and the survivor takes the stores over while it serves.
- ``postgres-qdrant-neo4j``: no owner at all (``Settings.shared_stores``), each process on its own
  state dir. It needs a Qdrant server and Neo4j (``QDRANT_URL``, ``NEO4J_URI``/``NEO4J_USER``/
  ``NEO4J_PASSWORD``), which cannot run on the development machines (no Docker engine):
  ``integration``, skipped with the reason elsewhere.

Each takes ~70 s (``soak``): ``scripts/test.sh -m soak tests/reliability/test_server_replicas.py``.
The ledger's part of the same fault runs in the default run: ``tests/reliability/test_ledger_replicas.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resources.manifest import open_manifest
from resources.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("CODEMEM_REPLICA_TEST_S", "60"))
CLIENTS = 100
TOKEN = "replica-test-token"

pytestmark = pytest.mark.soak

SERVERS = "servers"
STORE_SETUPS = [
    pytest.param("embedded", id="postgres-embedded-stores"),
    pytest.param(SERVERS, id="postgres-qdrant-neo4j", marks=[
        pytest.mark.integration,
        pytest.mark.skipif(
            not (os.environ.get("QDRANT_URL") and os.environ.get("NEO4J_URI")),
            reason="QDRANT_URL and NEO4J_URI not set: replicas without an owner need a Qdrant server and Neo4j, which "
            "cannot run on this machine (no Docker engine); set them to run this setup",
        ),
    ]),
]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(postgres_url: str, state: Path, stores: str) -> dict[str, str]:
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "CODEMEM_STATE_DIR": str(state), "CODEMEM_DATABASE_URL": postgres_url,
        "CODEMEM_PROJECT_ID": "replica-test", "CODEMEM_DENSE_EMBEDDINGS": "false", "CODEMEM_API_TOKEN": TOKEN,
    }
    if stores == SERVERS:
        env.update({
            "CODEMEM_QDRANT_URL": os.environ["QDRANT_URL"], "CODEMEM_NEO4J_URI": os.environ["NEO4J_URI"],
            "CODEMEM_NEO4J_USER": os.environ.get("NEO4J_USER", "neo4j"),
            "CODEMEM_NEO4J_PASSWORD": os.environ.get("NEO4J_PASSWORD", ""),
        })
    return env


def _state(tmp_path: Path, stores: str, name: str) -> Path:
    """A process's state dir: its own with shared servers, the one every process shares otherwise."""
    return tmp_path / (f"state-{name}" if stores == SERVERS else "state")


class Replica:
    """One ``codemem serve`` on its own port."""

    def __init__(self, name: str, project: Path, postgres_url: str, state: Path, stores: str) -> None:
        self.name, self.project, self.postgres_url, self.state, self.stores = name, project, postgres_url, state, stores
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with (self.state.parent / f"replica-{self.name}.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "query_server.cli", "serve", "--project", str(self.project),
                 "--port", str(self.port)],
                env=_env(self.postgres_url, self.state, self.stores), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2).close()
                return
            except OSError:
                assert self.proc.poll() is None, f"replica exited (replica-{self.name}.log)"
                time.sleep(0.3)
        raise AssertionError(f"replica on {self.port} did not answer /health")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def call(self, tool: str, body: dict[str, Any], timeout: float = 30) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON answer) of one tool call; a connection failure raises OSError."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/tools/{tool}", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "repos" / "python", root)
    return root


@pytest.fixture(params=STORE_SETUPS)
def stores(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def replicas(project: Path, postgres_url: str, tmp_path: Path, stores: str) -> Iterator[list[Replica]]:
    started = [Replica(name, project, postgres_url, _state(tmp_path, stores, name), stores) for name in ("a", "b")]
    try:
        for replica in started:
            replica.start()
        yield started
    finally:
        for replica in started:
            replica.stop()


def _index(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "query_server.cli", "index", str(project), "--plain"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _index_worker(project: Path, env: dict[str, str], stop: threading.Event, errors: list[str], runs: list[int]) -> None:
    """An indexing worker: edits a file and runs ``codemem index`` until told to stop (its run count
    appended to ``runs``)."""
    target = project / "replica_worker_edit.py"
    round_ = 0
    while not stop.is_set():
        target.write_text(f"def edited_{round_}(x):\n    return x + {round_}\n")
        done = _index(project, env)
        if done.returncode != 0:
            errors.append(done.stderr[-2000:])
        round_ += 1
    runs.append(round_)


def _victim_and_survivor(replicas: list[Replica], stores: str) -> tuple[Replica, Replica]:
    """The replica to kill: the stores' owner where there is one (the harder case), else the first."""
    a, b = replicas
    if stores == SERVERS:
        return a, b
    owner_pid = json.loads((a.state / "owner.json").read_text())["pid"]
    assert owner_pid in (a.proc.pid, b.proc.pid), "a replica owns the embedded stores"  # type: ignore[union-attr]
    return (a, b) if owner_pid == a.proc.pid else (b, a)  # type: ignore[union-attr]


def test_replicas_under_load_lose_and_duplicate_nothing_when_one_is_killed(
    replicas: list[Replica], project: Path, postgres_url: str, tmp_path: Path, stores: str
) -> None:
    a, b = replicas
    acknowledged: dict[str, str] = {}  # content -> memory id
    server_errors: list[tuple[Replica, str]] = []
    gave_up: list[str] = []
    refused: list[str] = []  # any other answer than 200 or a 5xx: a failure the client cannot retry
    survivor_stalls: list[str] = []  # the survivor's connection failures and timeouts
    acknowledged_at: list[tuple[float, Replica]] = []
    lock = threading.Lock()
    killed: dict[str, Replica] = {}
    stop, worker_errors, worker_runs = threading.Event(), [], []
    worker_env = _env(postgres_url, _state(tmp_path, stores, "worker"), stores)
    worker = threading.Thread(target=_index_worker, args=(project, worker_env, stop, worker_errors, worker_runs))
    worker.start()
    deadline = time.monotonic() + SECONDS

    def client(k: int) -> None:
        n = 0
        while time.monotonic() < deadline:
            content, request_id = f"client {k} call {n} {uuid.uuid4().hex}", f"req-{k}-{n}"
            order = [a, b] if (k + n) % 2 == 0 else [b, a]  # a load balancer's round robin
            for attempt in range(20):  # what a client does when its replica vanishes: the same call elsewhere
                replica = order[attempt % 2]
                try:
                    status, answer = replica.call("memory_add", {
                        "memory_type": "session", "content": content, "metadata": {}, "request_id": request_id})
                except OSError as exc:
                    if replica is killed.get("survivor"):
                        with lock:
                            survivor_stalls.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.2)
                    continue
                if status >= 500:
                    with lock:
                        server_errors.append((replica, f"{status}: {answer}"))
                    time.sleep(0.2)
                    continue
                if status != 200:
                    with lock:
                        refused.append(f"{replica.name} {status}: {answer}")
                    break
                with lock:
                    acknowledged[content] = answer["memory_id"]
                    acknowledged_at.append((time.monotonic(), replica))
                break
            else:
                with lock:
                    gave_up.append(content)
            n += 1

    clients = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    try:
        for thread in clients:
            thread.start()
        time.sleep(SECONDS / 3)
        victim, survivor = _victim_and_survivor(replicas, stores)
        killed["survivor"] = survivor
        victim.kill()  # mid-write: 100 clients are writing
        killed_at = time.monotonic()
        time.sleep(SECONDS / 6)
        restarted_at = time.monotonic()
        victim.start()
    finally:
        for thread in clients:
            thread.join()
        stop.set()
        worker.join()

    survivor_5xx = [error for replica, error in server_errors if replica is survivor]
    while_down = sum(1 for at, replica in acknowledged_at if replica is survivor and killed_at < at < restarted_at)
    print(f"\n{stores}: {len(acknowledged)} memories acknowledged by {CLIENTS} clients in {SECONDS:g} s; replica "
          f"{victim.name} SIGKILLed{' (the stores owner)' if stores != SERVERS else ''} and restarted; "
          f"{len(server_errors) - len(survivor_5xx)} 5xx from it, {len(survivor_5xx)} from {survivor.name}; "
          f"{sum(worker_runs)} index runs by the worker, {len(worker_errors)} failed; {while_down} acknowledged by "
          f"{survivor.name} while {victim.name} was down; first errors: {sorted({e for _, e in server_errors})[:3]}")
    assert gave_up == [] and refused == [] and survivor_5xx == [] and survivor_stalls == [] and worker_errors == []
    assert while_down > CLIENTS  # the survivor served on, not only once the killed replica was back
    import psycopg

    from resources.postgres import project_namespace

    schema = project_namespace(Settings(project_root=project, project_id="replica-test"))
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(f"SELECT content, id FROM {schema}.memories WHERE memory_type = 'session' AND deleted = 0").fetchall()
    stored: dict[str, list[str]] = {}
    for content, memory_id in rows:
        stored.setdefault(content, []).append(memory_id)
    lost = [c for c in acknowledged if c not in stored]
    duplicated = {c: ids for c, ids in stored.items() if len(ids) > 1}
    assert len(acknowledged) > CLIENTS and lost == [] and duplicated == {}
    assert all(stored[c] == [memory_id] for c, memory_id in acknowledged.items())

    # the index: what the replicas and the worker left equals a clean rebuild of the same files
    done = _index(project, worker_env)
    assert done.returncode == 0, done.stderr[-2000:]
    settings = Settings(project_root=project, state_dir=_state(tmp_path, stores, "worker"),
                        database_url=postgres_url, project_id="replica-test")
    manifest = open_manifest(settings)
    try:
        before = (manifest.symbol_ids(), manifest.resolved_edges())
    finally:
        manifest.close()
    assert before[0] and before[1]
    stores_before = _store_contents(survivor)
    status, job = survivor.call("reindex", {"directory_path": ".", "scope": "full"})
    assert status == 200, job
    job_deadline = time.monotonic() + 300
    while job["status"] not in ("done", "failed"):
        assert time.monotonic() < job_deadline, f"the full reindex did not end in 300 s: {job}"
        time.sleep(1)
        status, job = survivor.call("index_status", {"job_id": job["job_id"]})
        job = job.get("job") or job
    assert job["status"] == "done", job
    manifest = open_manifest(settings)
    try:
        assert (manifest.symbol_ids(), manifest.resolved_edges()) == before
    finally:
        manifest.close()
    assert _store_contents(survivor) == stores_before  # the vector and graph stores too, not only the manifest


def _store_contents(replica: Replica) -> dict[str, Any]:
    """What the vector and graph stores hold, as a replica reads them: the graph's nodes by label
    and edges by type, and the vector store's point count."""
    status, nodes = replica.call("graph_query", {
        "cypher": "MATCH (n) RETURN labels(n) AS labels, count(n) AS n ORDER BY n, labels", "limit": 1000})
    assert status == 200 and not nodes["truncated"], nodes
    status, edges = replica.call("graph_query", {
        "cypher": "MATCH ()-[r]->() RETURN type(r) AS type, count(r) AS n ORDER BY type", "limit": 1000})
    assert status == 200 and not edges["truncated"], edges
    with urllib.request.urlopen(f"http://127.0.0.1:{replica.port}/health", timeout=30) as answer:
        points = json.loads(answer.read())["components"]["vector_store"]["points"]
    return {"nodes": nodes["results"], "edges": edges["results"], "points": points}

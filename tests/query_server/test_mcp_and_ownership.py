"""MCP over a real stdio subprocess, the in-memory client, and one owner per project."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from query_server.mcp_server import build_mcp_server
from query_server.ownership import OWNER_FILE, ProjectHandle
from resources.schemas.tools import CodeSearchInput, IndexInput
from resources.settings import Settings
from tests.conftest import write_files

REPO_ROOT = Path(__file__).parents[2]
FILES = {
    "shop/cart.py": (
        "class Cart:\n"
        "    def add_item(self, item, quantity=1):\n"
        "        \"\"\"Put an item in the shopping cart.\"\"\"\n"
        "        self.items.append((item, quantity))\n\n"
        "    def total_price(self):\n"
        "        return sum(price(i) * q for i, q in self.items)\n\n\n"
        "def price(item):\n"
        "    return item.cost\n"
    ),
    "shop/util.ts": "export function formatMoney(cents: number): string {\n  return `$${cents / 100}`;\n}\n",
}


def _stdio_server(project: Path, env: dict[str, str]) -> StdioServerParameters:
    """`codemem mcp --project PROJECT` as Claude Code launches it."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "query_server.cli", "mcp", "--project", str(project)], env=env, cwd=str(REPO_ROOT)
    )


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_mcp_tools_in_memory(project: Path) -> None:
    write_files(project, FILES)
    handle = ProjectHandle(Settings(project_root=project))
    try:
        assert handle.is_owner
        handle.call("index", IndexInput())
        server = build_mcp_server(handle)

        async def scenario() -> None:
            async with Client(server) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"code_search", "graph_query", "index_status", "index_directory"} <= set(tools)
                assert "query" in tools["code_search"].input_schema["properties"]
                found = await client.call_tool("code_search", {"query": "add a product to the basket", "limit": 2})
                assert not found.is_error
                data = found.structured_content
                assert data["results"][0]["qualified_name"] == "shop.cart.Cart.add_item"
                assert data["results"][0]["provenance"]["stale"] is False
                rows = await client.call_tool("graph_query", {"cypher": "MATCH (f:Function)-[:CALLS]->(g:Function) RETURN f.name AS f, g.name AS g"})
                assert rows.structured_content["results"] == [{"f": "total_price", "g": "price"}]
                refused = await client.call_tool("graph_query", {"cypher": "MATCH (n) DETACH DELETE n"})
                assert refused.is_error and "read-only" in _text(refused)
                bad = await client.call_tool("code_search", {"query": "   "})
                assert bad.is_error and "blank" in _text(bad)
                bad_limit = await client.call_tool("code_search", {"query": "x", "limit": 1000})
                assert bad_limit.is_error and "limit" in _text(bad_limit)
                escape = await client.call_tool("index_directory", {"directory_path": "../../etc"})
                assert escape.is_error and "Path must be within project directory" in _text(escape)
                job = (await client.call_tool("reindex", {"scope": "full", "directory_path": "shop"})).structured_content
                while (state := (await client.call_tool("index_status", {"job_id": job["job_id"]})).structured_content["job"])["status"] not in ("done", "failed"):
                    await anyio.sleep(0.1)
                assert state["status"] == "done" and state["report"]["files_indexed"] == 2, state
                single = await client.call_tool("index_file", {"file_path": "shop/util.ts"})
                assert single.structured_content["status"] == "unchanged"
                status = await client.call_tool("index_status", {})
                assert status.structured_content["symbols"] == 5

        anyio.run(scenario)
    finally:
        handle.close()


def test_pagination_cursor(project: Path) -> None:
    write_files(project, {f"m{i}.py": f"def handler_{i}(request):\n    return request\n" for i in range(25)})
    handle = ProjectHandle(Settings(project_root=project, dense_embeddings=False))
    try:
        handle.call("index", IndexInput(embed=False))
        first = handle.call("code_search", CodeSearchInput(query="handler request", limit=10))
        second = handle.call("code_search", CodeSearchInput(query="handler request", limit=10, cursor=first.next_cursor))
        third = handle.call("code_search", CodeSearchInput(query="handler request", limit=10, cursor=second.next_cursor))
        names = [h.name for page in (first, second, third) for h in page.results]
        assert len(names) == len(set(names)) == 25
        assert third.next_cursor is None
    finally:
        handle.close()


@pytest.mark.slow
def test_stdio_server_and_a_second_process_share_the_stores(project: Path) -> None:
    """`codemem mcp` owns the stores; `codemem index` and another handle go through it."""
    write_files(project, FILES)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    params = _stdio_server(project, env)

    async def scenario() -> None:
        async with Client(params) as client:
            tools = await client.list_tools()
            assert "code_search" in {t.name for t in tools.tools}
            # while the MCP server owns the project, the CLI indexes through it
            cli = await anyio.to_thread.run_sync(lambda: subprocess.run(
                [sys.executable, "-m", "query_server.cli", "index", str(project), "--json"],
                capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=300,
            ))
            assert cli.returncode == 0, cli.stderr
            report = json.loads(cli.stdout)
            # the server brings the index up to date at start-up; the CLI run finds the rest
            assert report["files_indexed"] + report["files_unchanged"] == 2 and report["failed"] == []
            found = await client.call_tool("code_search", {"query": "format money as dollars"})
            assert found.structured_content["results"][0]["name"] == "formatMoney"
            owner = json.loads((project / ".codemem" / OWNER_FILE).read_text())
            assert owner["pid"] != os.getpid()
            second = await anyio.to_thread.run_sync(lambda: ProjectHandle(Settings(project_root=project)))
            try:
                assert not second.is_owner
                status = await anyio.to_thread.run_sync(lambda: second.call("index_status"))
                assert status.files == 2
            finally:
                second.close()

    anyio.run(scenario)
    # the server exited with its client: the next process becomes the owner
    deadline = time.monotonic() + 30
    while (project / ".codemem" / OWNER_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    handle = ProjectHandle(Settings(project_root=project))
    try:
        assert handle.is_owner
        assert handle.call("index_status").files == 2
    finally:
        handle.close()


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    missing = subprocess.run(
        [sys.executable, "-m", "query_server.cli", "index", str(tmp_path / "nope")],
        capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=120,
    )
    assert missing.returncode != 0
    assert "path does not exist" in missing.stderr and "codemem index" in missing.stderr


@pytest.mark.slow
def test_stdio_server_indexes_a_new_project_by_itself(project: Path) -> None:
    write_files(project, FILES)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    params = _stdio_server(project, env)

    async def scenario() -> None:
        async with Client(params) as client:
            deadline = time.monotonic() + 120
            while True:
                status = (await client.call_tool("index_status", {})).structured_content
                if status["files"] == 2 and status["dense_coverage"] == 1.0:
                    break
                assert time.monotonic() < deadline, status
                await anyio.sleep(0.5)
            found = await client.call_tool("code_search", {"query": "format money as dollars", "limit": 1})
            assert found.structured_content["results"][0]["name"] == "formatMoney"
            assert found.structured_content["search_mode"] == "hybrid"

    anyio.run(scenario)


def test_closing_during_a_background_index_loses_nothing(project: Path, service_factory) -> None:
    write_files(project, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(300)})
    svc = service_factory(project)
    svc.start_background_index()
    time.sleep(0.5)
    svc.close()  # stops after the current batch
    again = service_factory(project, dense_embeddings=False)
    report = again.index(IndexInput(embed=False))
    assert report["failed"] == [] and report["files_indexed"] + report["files_unchanged"] == 300
    assert again.manifest.counts()["symbols"] == 300


def _graph_servers_of(project: Path) -> list[int]:
    """Pids of embedded graph servers whose working directory is this project's state."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "redis-server" in (entry / "cmdline").read_text() and str(project) in os.readlink(entry / "cwd"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_sigterm_closes_the_stores_and_the_graph_server(project: Path) -> None:
    write_files(project, FILES)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "query_server.cli", "serve", "--project", str(project), "--port", "18765"],
        env=env, cwd=str(REPO_ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (project / ".codemem" / OWNER_FILE).exists() or not _graph_servers_of(project):
            assert server.poll() is None and time.monotonic() < deadline, server.stderr.read() if server.poll() is not None else "timeout"
            time.sleep(0.2)
        async def over_http() -> None:
            deadline = time.monotonic() + 30
            while True:
                try:
                    async with Client("http://127.0.0.1:18765/mcp") as client:
                        status = await client.call_tool("index_status", {})
                        assert not status.is_error
                        return
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await anyio.sleep(0.3)

        anyio.run(over_http)  # the MCP endpoint mounted in the HTTP app answers
        # An idle connection outlives the clients' own keep-alive (httpx: 5 s), so a client never
        # sends a request on a connection the server is closing (a dropped stream under load).
        connection = http.client.HTTPConnection("127.0.0.1", 18765, timeout=10)
        for pause in (0, 6):
            time.sleep(pause)
            connection.request("GET", "/health")
            response = connection.getresponse()
            response.read()
            assert response.status in (200, 503) and not response.will_close
        connection.close()
        server.terminate()
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
    deadline = time.monotonic() + 10
    while _graph_servers_of(project) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _graph_servers_of(project) == [], "the embedded graph server outlived codemem serve"
    assert not (project / ".codemem" / OWNER_FILE).exists()


def test_processes_of_shared_stores_hold_the_state_dir_together_and_keep_repair_out(tmp_path: Path) -> None:
    """With every store a server, the processes of one state dir take its lock shared (no owner):
    any number together, while ``codemem repair``'s exclusive try fails until the last one left."""
    from query_server.owner_lock import OwnerLock

    one, two, repair = OwnerLock(tmp_path), OwnerLock(tmp_path), OwnerLock(tmp_path)
    assert one.try_acquire(shared=True) and two.try_acquire(shared=True)
    assert not repair.try_acquire()
    one.release()
    assert not repair.try_acquire()
    two.release()
    assert repair.try_acquire()
    assert not one.try_acquire(shared=True)  # nor does a server start while repair works
    repair.release()


def test_a_call_in_flight_when_its_owner_closes_is_run_by_the_next_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An owner that stops (``codemem index`` ending, a server's SIGINT) while it runs another process's
    call closes its stores under that call: the call is not answered with the failure, so its caller
    runs it on the next owner with the same idempotency key — one result, one row."""
    import threading

    from query_server import ownership
    from query_server.tools import Tool
    from query_server.tools import tool as registered_tool

    root = tmp_path / "project"
    root.mkdir()
    owner = ProjectHandle(Settings(project_root=root))
    assert owner.is_owner
    caller = ProjectHandle(Settings(project_root=root))  # the lock is taken: it sends its calls to the owner
    assert not caller.is_owner
    memory_add = registered_tool("memory_add")
    entered, release = threading.Event(), threading.Event()
    real_run = Tool.run

    def held_run(self: Tool, service, *args, **kwargs):  # the owner's memory_add waits until its stores are closing
        if self is memory_add and service is owner.backend:
            entered.set()
            release.wait(10)
        return real_run(self, service, *args, **kwargs)

    monkeypatch.setattr(Tool, "run", held_run)  # (a frozen dataclass: patched on the class)
    monkeypatch.setattr(ownership, "OWNER_DRAIN_S", 0.1)
    answers: list = []
    request = memory_add.input.model_validate({"memory_type": "session", "content": "in flight at the owner's close"})
    sending = threading.Thread(target=lambda: answers.append(caller.call(memory_add, request, request_id="req-in-flight")))
    sending.start()
    assert entered.wait(30)
    closing = threading.Thread(target=owner.close)
    closing.start()
    time.sleep(0.3)  # the drain gave up: the stores close under the held call
    release.set()
    closing.join(30)
    sending.join(60)
    try:
        assert len(answers) == 1 and answers[0].memory_id
        assert caller.is_owner  # it took the project over and ran the call itself
    finally:
        caller.close()
    from resources.memory.scopes import open_project_ledger

    ledger = open_project_ledger(Settings(project_root=root))
    try:
        rows = list(ledger.iter_memories(memory_types=["session"]))
    finally:
        ledger.close()
    assert [(row.id, row.content) for row in rows] == [(answers[0].memory_id, "in flight at the owner's close")]


def test_an_owner_stops_serving_before_it_closes_and_its_stores_stay_usable_until_then(tmp_path: Path) -> None:
    """``stop_serving`` (``codemem serve`` starts it at the stop signal, beside uvicorn's shutdown):
    other processes' calls go elsewhere from then on, this process's own calls still run, and
    ``close`` after it (or beside it, from another thread) closes the stores once."""
    import threading

    from query_server.tools import tool as registered_tool

    root = tmp_path / "project"
    root.mkdir()
    owner = ProjectHandle(Settings(project_root=root))
    assert owner.is_owner and (root / ".codemem" / OWNER_FILE).exists()
    port = json.loads((root / ".codemem" / OWNER_FILE).read_text())["port"]
    stoppers = [threading.Thread(target=owner.stop_serving) for _ in range(3)]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join(10)
    assert not (root / ".codemem" / OWNER_FILE).exists()
    with pytest.raises(OSError):  # the loopback server is gone: a caller would take the project over
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).request("GET", "/")
    memory_add = registered_tool("memory_add")
    request = memory_add.input.model_validate({"memory_type": "session", "content": "after stop_serving"})
    added = owner.call(memory_add, request)  # this process's own calls still run on its stores
    closing = threading.Thread(target=owner.close)
    closing.start()
    owner.stop_serving()  # beside close: nothing to do twice
    closing.join(30)
    assert not closing.is_alive()
    second = ProjectHandle(Settings(project_root=root))  # the lock was released
    try:
        assert second.is_owner
        found = second.call(registered_tool("memory_get"), registered_tool("memory_get").input.model_validate(
            {"memory_id": added.memory_id, "memory_type": "session"}))
        assert found.content == "after stop_serving"
    finally:
        second.close()

"""DNS rebinding and body size over HTTP (issue 25, item 2), through the real app and a real ``codemem serve``.

Every route but ``/health`` refuses a Host outside the allow-list (421) and a foreign Origin (403) with a
JSON ``error`` that says what to do; loopback names, configured names and the address ``codemem serve
--host`` binds are accepted; ``/mcp`` answers the same as ``/tools``. A body over the limit
(``CODEMEM_MAX_REQUEST_BYTES``, 2 MiB) is refused with 413 before it is read: from its Content-Length,
or while a chunked body streams; the 10 MB metadata of the issue is not stored.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from query_server.http_api import build_http_app
from query_server.ownership import ProjectHandle
from resources.settings import Settings
from tests.badinput.conftest import assert_clean_error
from tests.conftest import write_files

REPO_ROOT = Path(__file__).parents[2]
LOCAL = "http://127.0.0.1:8765"
REBIND_HOST = "rebind.attacker.example:8716"
FOREIGN_ORIGIN = "http://rebind.attacker.example:8716"
LIMIT = 2 * 1024 * 1024
HUNDRED_MB = 100 * 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def app(handle: ProjectHandle) -> FastAPI:
    return build_http_app(handle)


@pytest.fixture(scope="module")
def local(app: FastAPI) -> Iterator[TestClient]:
    """A client that reaches the server as a local tool does: Host 127.0.0.1:8765, no Origin."""
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        yield client


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every route of the app: the OpenAPI paths, the docs, and the MCP endpoint."""
    routes = [(method.upper(), path) for path, ops in app.openapi()["paths"].items() for method in ops]
    return [*routes, ("GET", "/docs"), ("GET", "/openapi.json"), ("POST", "/mcp"), ("GET", "/mcp")]


def _memories(client: TestClient) -> int:
    """How many memories the project holds (every type, deleted ones included)."""
    stats = client.post("/tools/memory_statistics")
    assert stats.status_code == 200, stats.text[:500]
    return sum(counts.get("total", 0) for counts in stats.json()["memory_counts"].values())


def _request(client: TestClient, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = {"json": {}} if method == "POST" else {}
    return client.request(method, path, headers={"content-type": "application/json", **headers}, **body)


def test_a_rebinding_host_is_refused_on_every_route(app: FastAPI, local: TestClient) -> None:
    routes = [r for r in _routes(app) if r[1] != "/health"]
    assert len(routes) >= 30 and ("POST", "/tools/memory_add") in routes and ("GET", "/metrics") in routes
    for method, path in routes:
        refused = _request(local, method, path, {"host": REBIND_HOST})
        assert refused.status_code == 421, (method, path, refused.status_code, refused.text[:300])
        body = assert_clean_error(refused.status_code, refused.text)
        assert REBIND_HOST in body["error"] and "CODEMEM_ALLOWED_HOSTS" in body["error"], body


def test_a_foreign_origin_is_refused_on_every_route(app: FastAPI, local: TestClient) -> None:
    for method, path in [r for r in _routes(app) if r[1] != "/health"]:
        refused = _request(local, method, path, {"origin": FOREIGN_ORIGIN})
        assert refused.status_code == 403, (method, path, refused.status_code, refused.text[:300])
        body = assert_clean_error(refused.status_code, refused.text)
        assert FOREIGN_ORIGIN in body["error"] and "CODEMEM_ALLOWED_ORIGINS" in body["error"], body


def test_the_rebinding_write_of_the_issue_stores_nothing(local: TestClient) -> None:
    before = _memories(local)
    attack = local.post(
        "/tools/memory_add", json={"memory_type": "session", "content": "planted by a web page"},
        headers={"host": REBIND_HOST, "origin": FOREIGN_ORIGIN},
    )
    assert attack.status_code == 421, attack.text[:300]
    wipe = local.post("/tools/export_memory", json={"output_path": ".codemem/memory.db"}, headers={"host": REBIND_HOST})
    assert wipe.status_code == 421, wipe.text[:300]
    assert _memories(local) == before


def test_health_answers_any_host_for_probes(local: TestClient) -> None:
    """A Kubernetes probe sends the pod's address as Host; /health is read-only and token-free already."""
    probe = local.get("/health", headers={"host": "10.1.2.3:8765"})
    assert probe.status_code in (200, 503) and probe.json()["status"], probe.text[:300]


def test_loopback_hosts_and_origins_are_accepted(local: TestClient) -> None:
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST:8765", "localhost"):
        assert local.post("/tools/index_status", headers={"host": host}).status_code == 200, host
    for origin in ("http://127.0.0.1:8765", "http://localhost:3000", "http://[::1]:8765"):
        assert local.post("/tools/index_status", headers={"origin": origin}).status_code == 200, origin
    assert local.get("/docs", headers={"host": "localhost:8765"}).status_code == 200
    assert local.get("/metrics", headers={"host": "127.0.0.1:8765"}).status_code == 200
    for near_miss in ("localhost.attacker.example:8765", "127.0.0.1.nip.io:8765", "localhost:8765@evil", "evil"):
        assert local.post("/tools/index_status", headers={"host": near_miss}).status_code == 421, near_miss
    assert local.post("/tools/index_status", headers={"origin": "null"}).status_code == 403
    assert local.post("/tools/index_status", headers={"origin": "http://localhost.attacker.example"}).status_code == 403


def test_configured_hosts_and_origins_are_accepted(
    bad_project: Path, handle: ProjectHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMEM_ALLOWED_HOSTS", '["codemem.internal", "10.0.0.5:8765"]')
    monkeypatch.setenv("CODEMEM_ALLOWED_ORIGINS", '["https://tools.example.com"]')
    configured = ProjectHandle(Settings(project_root=bad_project, dense_embeddings=False))  # a client of the owner
    try:
        with TestClient(build_http_app(configured), base_url=LOCAL, raise_server_exceptions=False) as client:
            for host in ("codemem.internal", "codemem.internal:8765", "10.0.0.5:8765", "127.0.0.1:8765"):
                assert client.post("/tools/index_status", headers={"host": host}).status_code == 200, host
            for origin in ("https://tools.example.com", "http://codemem.internal:8765", "https://codemem.internal"):
                assert client.post("/tools/index_status", headers={"origin": origin}).status_code == 200, origin
            for host in ("10.0.0.5:9999", "other.internal:8765", REBIND_HOST):
                assert client.post("/tools/index_status", headers={"host": host}).status_code == 421, host
            assert client.post("/tools/index_status", headers={"origin": "https://evil.example.com"}).status_code == 403
            # /mcp takes the same allow-list: the MCP transport answers the configured name, not 421
            init = client.post("/mcp", headers={"host": "codemem.internal:8765", "accept": "application/json, text/event-stream"},
                               json=_INITIALIZE)
            assert init.status_code == 200, init.text[:300]
    finally:
        configured.close()


_INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


def test_a_10mb_metadata_is_refused_and_not_stored(local: TestClient) -> None:
    before = _memories(local)
    big = local.post("/tools/memory_add", json={"memory_type": "session", "content": "huge metadata",
                                                "metadata": {"blob": "m" * 10_000_000}})
    assert big.status_code == 413, big.status_code
    body = assert_clean_error(big.status_code, big.text)
    assert "CODEMEM_MAX_REQUEST_BYTES" in body["error"] and len(big.text) < 2_000, body
    assert _memories(local) == before


def _asgi_post(app: FastAPI, path: str, chunks: Iterator[bytes], headers: dict[str, str]) -> tuple[int, dict[str, Any], int]:
    """POST a streamed body straight into the ASGI app, as a server does chunk by chunk; returns the
    status, the JSON body and how many body bytes the app pulled from the client."""
    consumed = 0
    status = 0
    body = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal consumed
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        consumed += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json"),
                    *((k.encode(), v.encode()) for k, v in headers.items())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8765),
    }
    anyio.run(app, scope, receive, send)
    return status, json.loads(bytes(body) or b"{}"), consumed


def _hundred_mb() -> Iterator[bytes]:
    yield b'{"memory_type": "session", "content": "'
    for _ in range(HUNDRED_MB // CHUNK):
        yield b"x" * CHUNK


def test_a_100mb_body_is_refused_from_its_content_length_before_a_byte_is_read(app: FastAPI) -> None:
    status, body, consumed = _asgi_post(app, "/tools/memory_add", _hundred_mb(), {"content-length": str(HUNDRED_MB)})
    assert status == 413, (status, body)
    assert consumed == 0, f"the app read {consumed} bytes of a body it had to refuse"
    assert "CODEMEM_MAX_REQUEST_BYTES" in body["error"] and str(HUNDRED_MB) in body["error"], body


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(app: FastAPI) -> None:
    status, body, consumed = _asgi_post(app, "/tools/memory_add", _hundred_mb(), {"transfer-encoding": "chunked"})
    assert status == 413, (status, body)
    assert consumed <= LIMIT + CHUNK, f"the app read {consumed} bytes, past the {LIMIT}-byte limit"
    assert "CODEMEM_MAX_REQUEST_BYTES" in body["error"], body
    mcp_status, mcp_body, mcp_consumed = _asgi_post(app, "/mcp", _hundred_mb(), {"accept": "application/json, text/event-stream"})
    assert mcp_status == 413 and mcp_consumed <= LIMIT + CHUNK, (mcp_status, mcp_body, mcp_consumed)


def test_a_body_under_the_limit_passes_and_the_limit_is_configurable(
    bad_project: Path, local: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    under = local.post("/tools/import_memory", json={"data": "x" * (LIMIT - 1_000)})
    assert under.status_code != 413 and under.status_code < 500, under.text[:300]
    monkeypatch.setenv("CODEMEM_MAX_REQUEST_BYTES", "4096")
    small = ProjectHandle(Settings(project_root=bad_project, dense_embeddings=False))
    try:
        with TestClient(build_http_app(small), base_url=LOCAL, raise_server_exceptions=False) as client:
            refused = client.post("/tools/code_search", json={"query": "q" * 5_000})
            assert refused.status_code == 413 and "4096" in refused.json()["error"], refused.text[:300]
            assert client.post("/tools/code_search", json={"query": "tax"}).status_code == 200
    finally:
        small.close()


# -- a real `codemem serve` ---------------------------------------------------------------------------------------


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _raw(host: str, port: int, head: str, body_chunks: Iterator[bytes] = iter(())) -> tuple[int, int]:
    """Send a request over a plain socket, streaming the body until the server answers; returns the status
    and how many body bytes were sent before the answer (or before the server stopped reading)."""
    sent = 0
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(head.encode())
        sock.setblocking(False)
        answer = b""
        for chunk in body_chunks:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            view = memoryview(chunk)
            while view:
                readable, writable, _ = select.select([sock], [sock], [], 10)
                if readable:
                    break
                if not writable:  # the server stopped reading: the refusal is on its way
                    break
                try:
                    n = sock.send(view)
                except (BrokenPipeError, ConnectionResetError):
                    break
                sent += n
                view = view[n:]
            if view:
                break
        sock.setblocking(True)
        sock.settimeout(30)
        try:
            while b"\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except ConnectionResetError:
            pass
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, sent


def _chunked(chunks: Iterator[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        yield f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    yield b"0\r\n\r\n"


@pytest.mark.slow
def test_codemem_serve_guards_a_real_socket(tmp_path: Path) -> None:
    """The issue's probes against `codemem serve --host 127.0.0.2` (a non-default bind: token required,
    the bound address allowed without configuration)."""
    project = tmp_path / "project"
    write_files(project, {"app.py": "def main():\n    return 1\n"})
    host, port = "127.0.0.2", _free_port("127.0.0.2")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "CODEMEM_API_TOKEN": "t0ken",
           "CODEMEM_DENSE_EMBEDDINGS": "false"}
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "query_server.cli", "serve", "--project", str(project), "--host", host, "--port", str(port)],
            env=env, cwd=str(REPO_ROOT), stdout=subprocess.DEVNULL, stderr=err,
        )
    auth = {"Authorization": "Bearer t0ken"}
    try:
        with httpx.Client(base_url=f"http://{host}:{port}", timeout=60, headers=auth) as http:
            deadline = time.monotonic() + 180
            while True:
                try:
                    if http.get("/health").status_code in (200, 503):
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
            assert http.post("/tools/index_status").status_code == 200  # Host 127.0.0.2:<port>: the bound address
            attack = http.post("/tools/memory_add", json={"memory_type": "session", "content": "planted"},
                               headers={"host": REBIND_HOST, "origin": FOREIGN_ORIGIN})
            assert attack.status_code == 421 and "CODEMEM_ALLOWED_HOSTS" in attack.json()["error"], attack.text[:300]
            foreign = http.post("/tools/index_status", headers={"origin": FOREIGN_ORIGIN})
            assert foreign.status_code == 403, foreign.text[:300]
            assert http.post("/mcp", headers={"host": REBIND_HOST}, json=_INITIALIZE).status_code == 421
            stats = http.post("/tools/memory_statistics").json()["memory_counts"]
            assert sum(c.get("total", 0) for c in stats.values()) == 0, stats

        head = (f"POST /tools/memory_add HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer t0ken\r\n"
                "Content-Type: application/json\r\n")
        started = time.monotonic()
        status, sent = _raw(host, port, head + f"Content-Length: {HUNDRED_MB}\r\n\r\n")
        assert status == 413 and sent == 0 and time.monotonic() - started < 10, (status, sent)
        status, sent = _raw(host, port, head + "Transfer-Encoding: chunked\r\n\r\n", _chunked(_hundred_mb()))
        print(f"chunked over a real socket: status {status}, {sent} bytes sent before the server stopped reading")
        assert status in (413, 0) and sent < HUNDRED_MB // 4, (status, sent)  # 0: reset before the answer was read
        assert status == 413 or sent < 20 * LIMIT, (status, sent)
        assert server.poll() is None, log.read_text()[-3000:]
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()


def test_the_allow_list_takes_the_bound_address_and_refuses_urls() -> None:
    from query_server.request_guard import transport_security

    bound = transport_security(Settings(), "10.0.0.7").allowed_hosts
    assert "10.0.0.7:*" in bound and "127.0.0.1:*" in bound and "[::1]:*" in bound
    assert not any(h.startswith(("0.0.0.0", "[::]")) for h in transport_security(Settings(), "0.0.0.0").allowed_hosts)
    assert "[fe80::1]:*" in transport_security(Settings(), "fe80::1").allowed_hosts
    with pytest.raises(ValueError, match="not a host name"):
        Settings(allowed_hosts=["http://codemem.internal"])
    with pytest.raises(ValueError, match="not an origin"):
        Settings(allowed_origins=["tools.example.com"])

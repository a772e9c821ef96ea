"""The HTTP face over the real service: tools, health, metrics, auth, errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from query_server.http_api import build_http_app
from query_server.ownership import ProjectHandle
from resources.schemas.tools import IndexInput
from resources.settings import Settings
from tests.conftest import write_files

FILES = {
    "billing/invoice.py": (
        "def compute_tax(amount, rate):\n"
        "    \"\"\"Return the tax owed on an amount.\"\"\"\n"
        "    return round(amount * rate, 2)\n\n\n"
        "def invoice_total(lines, rate):\n"
        "    subtotal = sum(lines)\n"
        "    return subtotal + compute_tax(subtotal, rate)\n"
    ),
}


@pytest.fixture
def client(project: Path):
    write_files(project, FILES)
    handle = ProjectHandle(Settings(project_root=project))
    handle.call("index", IndexInput())
    with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as test_client:
        yield test_client
    handle.close()


def test_tools_health_and_metrics(client: TestClient) -> None:
    found = client.post("/tools/code_search", json={"query": "how much tax is owed", "limit": 2})
    assert found.status_code == 200
    assert found.json()["results"][0]["name"] == "compute_tax"
    rows = client.post("/tools/graph_query", json={"cypher": "MATCH (a:Function)-[:CALLS]->(b:Function) RETURN a.name AS a, b.name AS b"})
    assert rows.json()["results"] == [{"a": "invoice_total", "b": "compute_tax"}]
    assert client.post("/tools/index_status").json()["symbols"] == 2
    job = client.post("/tools/index_directory", json={"directory_path": "."}).json()
    assert job["kind"] == "index_directory" and job["job_id"]
    deadline = time.monotonic() + 60
    while (state := client.post("/tools/index_status", json={"job_id": job["job_id"]}).json()["job"])["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert state["status"] == "done" and state["percent"] == 100.0 and state["report"]["files_unchanged"] == 1
    indexed = client.post("/tools/index_file", json={"file_path": "billing/invoice.py", "force": True}).json()
    assert indexed == {"status": "indexed", "file_path": "billing/invoice.py", "functions_extracted": 2,
                       "classes_extracted": 0, "imports_extracted": 0, "reason": None}
    health = client.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "ok"
    assert set(body["components"]) == {"vector_store", "graph_store", "embedder", "index"}
    assert body["components"]["embedder"]["backend"] == "local"
    metrics = client.get("/metrics").text
    assert 'codemem_tool_calls_total{status="ok",tool="code_search"} 1.0' in metrics
    assert "codemem_indexed_symbols 2.0" in metrics
    assert client.get("/openapi.json").json()["paths"]["/tools/code_search"]


def test_bad_inputs_get_actionable_4xx_never_500(client: TestClient) -> None:
    write = client.post("/tools/graph_query", json={"cypher": "MATCH (n) SET n.x = 1"})
    assert write.status_code == 400 and "read-only" in write.json()["error"]
    assert client.post("/tools/code_search", json={"query": "x", "limit": 1000}).status_code == 422
    assert client.post("/tools/code_search", json={}).status_code == 422
    assert client.post("/tools/code_search", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    outside = client.post("/tools/index_directory", json={"directory_path": "../../etc"})
    assert outside.status_code == 400 and "Path must be within project directory" in outside.json()["error"]
    assert client.post("/tools/index_file", json={"file_path": "/etc/passwd"}).status_code == 400
    unknown = client.post("/tools/index_status", json={"job_id": "nope"})
    assert unknown.status_code == 400 and "Job not found" in unknown.json()["error"]
    assert client.post("/tools/reindex", json={"scope": "partial"}).status_code == 422
    cursor = client.post("/tools/code_search", json={"query": "tax", "cursor": "garbage"})
    assert cursor.status_code == 400 and "cursor" in cursor.json()["error"]
    syntax = client.post("/tools/graph_query", json={"cypher": "MATCH (n RETURN n"})
    assert syntax.status_code == 400


def test_bearer_token_is_required_when_set(project: Path) -> None:
    write_files(project, FILES)
    handle = ProjectHandle(Settings(project_root=project, dense_embeddings=False))
    try:
        with TestClient(build_http_app(handle, token="s3cret"), base_url="http://127.0.0.1:8765") as client:
            assert client.get("/health").status_code == 200  # health stays open for probes
            assert client.post("/tools/index_status").status_code == 401
            assert client.get("/metrics").status_code == 401
            ok = client.post("/tools/index_status", headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
    finally:
        handle.close()


def _mcp_post(client: TestClient, body: dict, session: str | None = None):  # noqa: ANN202
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    if session:
        headers["Mcp-Session-Id"] = session
    return client.post("/mcp", json=body, headers=headers)


@pytest.mark.parametrize("shared", [False, True])
def test_with_shared_stores_mcp_needs_no_session_so_any_replica_answers(project: Path, shared: bool) -> None:
    """Replicas behind one port (docker-compose.yml's proxy) each see a client's requests in turn:
    with every store shared, MCP over HTTP is stateless (no session to hold); otherwise it keeps
    its sessions."""
    from pydantic import SecretStr

    handle = ProjectHandle(Settings(project_root=project))
    if shared:  # what the app is built from (the stores stay the embedded ones this machine can run)
        handle.settings = handle.settings.model_copy(update={
            "database_url": SecretStr("postgresql://unused@127.0.0.1/none"), "qdrant_url": "http://qdrant:6333", "neo4j_uri": "bolt://neo4j:7687",
        })
        assert handle.settings.shared_stores
    try:
        with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as client:
            init = _mcp_post(client, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            assert init.status_code == 200
            assert ("mcp-session-id" in init.headers) is not shared
            listed = _mcp_post(client, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # no session id
            if shared:
                assert listed.status_code == 200 and "code_search" in listed.text
            else:
                assert listed.status_code == 400
    finally:
        handle.close()

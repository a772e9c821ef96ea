"""The HTTP face over the real service: tools, health, metrics, auth, errors."""

from __future__ import annotations

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
    with TestClient(build_http_app(handle)) as test_client:
        yield test_client
    handle.close()


def test_tools_health_and_metrics(client: TestClient) -> None:
    found = client.post("/tools/code_search", json={"query": "how much tax is owed", "limit": 2})
    assert found.status_code == 200
    assert found.json()["results"][0]["name"] == "compute_tax"
    rows = client.post("/tools/graph_query", json={"cypher": "MATCH (a:Function)-[:CALLS]->(b:Function) RETURN a.name AS a, b.name AS b"})
    assert rows.json()["results"] == [{"a": "invoice_total", "b": "compute_tax"}]
    assert client.post("/tools/index_status").json()["symbols"] == 2
    assert client.post("/tools/index_directory", json={}).json()["files_unchanged"] == 1
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
    outside = client.post("/tools/index_directory", json={"paths": ["../../etc"]})
    assert outside.status_code == 400 and "outside the project root" in outside.json()["error"]
    cursor = client.post("/tools/code_search", json={"query": "tax", "cursor": "garbage"})
    assert cursor.status_code == 400 and "cursor" in cursor.json()["error"]
    syntax = client.post("/tools/graph_query", json={"cypher": "MATCH (n RETURN n"})
    assert syntax.status_code == 400


def test_bearer_token_is_required_when_set(project: Path) -> None:
    write_files(project, FILES)
    handle = ProjectHandle(Settings(project_root=project, dense_embeddings=False))
    try:
        with TestClient(build_http_app(handle, token="s3cret")) as client:
            assert client.get("/health").status_code == 200  # health stays open for probes
            assert client.post("/tools/index_status").status_code == 401
            assert client.get("/metrics").status_code == 401
            ok = client.post("/tools/index_status", headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
    finally:
        handle.close()

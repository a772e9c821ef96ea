"""Field limits of every tool input (issue 25, item 2): a cap on every string, and on the size and nesting of
``metadata`` and the other free-form JSON objects, each refused with a 422 (an MCP tool error) that says what
to do; JSON nested hundreds or thousands deep is a 4xx on every face, never a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from pydantic import BaseModel, ValidationError

from query_server.http_api import build_http_app
from query_server.mcp_server import build_mcp_server
from query_server.ownership import ProjectHandle
from query_server.tools import TOOLS
from resources.schemas.memory import MemoryAddInput
from tests.badinput.conftest import assert_clean_error

LOCAL = "http://127.0.0.1:8765"
METADATA_BYTES = 64 * 1024
METADATA_DEPTH = 16


@pytest.fixture(scope="module")
def local(handle: ProjectHandle) -> Iterator[TestClient]:
    with TestClient(build_http_app(handle), base_url=LOCAL, raise_server_exceptions=False) as client:
        yield client


def _memories(client: TestClient) -> int:
    stats = client.post("/tools/memory_statistics")
    assert stats.status_code == 200, stats.text[:500]
    return sum(counts.get("total", 0) for counts in stats.json()["memory_counts"].values())


def _nested(depth: int, leaf: Any = "leaf") -> Any:
    """An object ``depth`` levels deep: _nested(1) is {"d": leaf}."""
    value = leaf
    for _ in range(depth):
        value = {"d": value}
    return value


def _nested_list(depth: int) -> list[Any]:
    """Arrays ``depth`` levels deep: [[[]]] for 3."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _unbounded_strings(schema: dict[str, Any], node: Any, where: str, seen: set[str]) -> Iterator[str]:
    """Paths of string schemas without maxLength (enums and constants are bounded already)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref and ref not in seen:
            seen.add(ref)
            yield from _unbounded_strings(schema, schema["$defs"][ref.rsplit("/", 1)[1]], ref, seen)
        if node.get("type") == "string" and "maxLength" not in node and "enum" not in node and "const" not in node:
            yield where
        for key, value in node.items():
            if key != "$defs":
                yield from _unbounded_strings(schema, value, f"{where}.{key}", seen)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _unbounded_strings(schema, value, f"{where}[{i}]", seen)


def _inputs() -> list[type[BaseModel]]:
    return sorted({tool.input for tool in TOOLS.values() if tool.input is not None}, key=lambda m: m.__name__)


@pytest.mark.parametrize("model", _inputs(), ids=lambda m: m.__name__)
def test_every_string_of_every_tool_input_has_a_cap(model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    unbounded = list(_unbounded_strings(schema, schema, model.__name__, set()))
    assert not unbounded, f"strings without maxLength: {unbounded}"


def test_a_string_over_its_cap_is_refused_with_what_to_do() -> None:
    for model, fields in [
        (TOOLS["memory_get"].input, {"memory_id": "i" * 100_001, "memory_type": "session"}),
        (TOOLS["code_search"].input, {"query": "tax", "language": "l" * 100_001}),
        (TOOLS["import_memory"].input, {"data": "d" * 20_000_001}),
    ]:
        with pytest.raises(ValidationError, match="at most"):
            model(**fields)


def test_metadata_over_64k_is_refused_with_422_and_not_stored(local: TestClient) -> None:
    before = _memories(local)
    over = local.post("/tools/memory_add", json={"memory_type": "session", "content": "wide metadata",
                                                 "metadata": {"note": "v" * (METADATA_BYTES + 10)}})
    body = assert_clean_error(over.status_code, over.text)
    assert over.status_code == 422, over.text[:300]
    assert "metadata" in body["error"] and "65536" in body["error"] and "content" in body["error"], body
    assert len(over.text) < 5_000, "the refusal echoes the payload"
    assert _memories(local) == before
    near = local.post("/tools/memory_add", json={"memory_type": "session", "content": "metadata just under the cap",
                                                 "metadata": {"note": "v" * (METADATA_BYTES - 100)}})
    assert near.status_code == 200, near.text[:300]
    assert _memories(local) == before + 1


def test_metadata_deeper_than_the_cap_is_refused_with_422(local: TestClient) -> None:
    before = _memories(local)
    at_cap = local.post("/tools/memory_add", json={"memory_type": "session", "content": "metadata at the depth cap",
                                                   "metadata": _nested(METADATA_DEPTH)})
    assert at_cap.status_code == 200, at_cap.text[:300]
    over = local.post("/tools/memory_add", json={"memory_type": "session", "content": "metadata past the depth cap",
                                                 "metadata": _nested(METADATA_DEPTH + 1)})
    body = assert_clean_error(over.status_code, over.text)
    assert over.status_code == 422 and "nested" in body["error"] and str(METADATA_DEPTH) in body["error"], body
    assert _memories(local) == before + 1


# Each free-form JSON object of a tool input, with a placeholder for the deep value.
DEEP_TARGETS = [
    ("memory_add", lambda deep: {"memory_type": "session", "content": "deep", "metadata": {"k": deep}}),
    ("memory_add", lambda deep: {"memory_type": "session", "content": "deep",
                                 "relationships": [{"type": "RELATES_TO", "target_id": "x", "properties": {"k": deep}}]}),
    ("memory_bulk_add", lambda deep: {"memories": [{"memory_type": "session", "content": "deep", "metadata": {"k": deep}}]}),
    ("memory_update", lambda deep: {"memory_id": "nope", "memory_type": "session", "metadata": {"k": deep}}),
    ("graph_query", lambda deep: {"cypher": "RETURN $k AS k", "parameters": {"k": deep}}),
    ("export_memory", lambda deep: {"filters": {"k": deep}}),
]


@pytest.mark.parametrize("depth", [20, 300, 700, 1_000, 5_000])
def test_deep_json_is_a_4xx_never_a_5xx_over_http(local: TestClient, depth: int) -> None:
    before = _memories(local)
    for tool, body in DEEP_TARGETS:
        for deep in (_nested(depth), _nested_list(depth)):
            raw = _dumps(body(deep))
            answer = local.post(f"/tools/{tool}", content=raw, headers={"content-type": "application/json"})
            assert 400 <= answer.status_code < 500, (tool, depth, answer.status_code, answer.text[:300])
            assert_clean_error(answer.status_code, answer.text)
    assert _memories(local) == before


def _dumps(value: Any) -> bytes:
    """JSON text of a value nested deeper than json.dumps recurses."""
    try:
        return json.dumps(value).encode()
    except RecursionError:
        return _dumps_iter(value)


def _dumps_iter(value: Any) -> bytes:
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item in ("}", "]", ","):
            out.append(item)
        elif isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            out.append("{")
            stack.append("}")
            for i, (key, val) in enumerate(reversed(list(item.items()))):
                stack.append(val)
                stack.append(_Raw(json.dumps(key) + ":"))
                if i < len(item) - 1:
                    stack.append(",")
        elif isinstance(item, list):
            out.append("[")
            stack.append("]")
            for i, val in enumerate(reversed(item)):
                stack.append(val)
                if i < len(item) - 1:
                    stack.append(",")
        else:
            out.append(json.dumps(item))
    return "".join(out).encode()


class _Raw:
    def __init__(self, text: str) -> None:
        self.text = text


def test_1000_deep_json_rpc_on_mcp_is_a_4xx(local: TestClient) -> None:
    deep = "[" * 1_000 + "]" * 1_000
    raw = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_add", "arguments": '
           '{"memory_type": "session", "content": "x", "metadata": {"k": ' + deep + "}}}}")
    answer = local.post("/mcp", content=raw.encode(),
                        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])


def test_the_mcp_face_refuses_the_same_metadata(handle: ProjectHandle) -> None:
    server = build_mcp_server(handle)
    before = sum(c.get("total", 0) for c in handle.call("memory_statistics").memory_counts.values())

    async def scenario() -> list[str]:
        texts = []
        async with Client(server) as client:
            for metadata in ({"k": _nested(100)}, {"note": "v" * (METADATA_BYTES + 10)}):
                result = await client.call_tool("memory_add", {"memory_type": "session", "content": "x", "metadata": metadata})
                assert result.is_error, result
                texts.append("".join(getattr(c, "text", "") for c in result.content))
        return texts

    deep_text, wide_text = anyio.run(scenario)
    assert "nested" in deep_text and "Traceback" not in deep_text, deep_text
    assert "65536" in wide_text, wide_text
    after = sum(c.get("total", 0) for c in handle.call("memory_statistics").memory_counts.values())
    assert after == before


def test_the_models_refuse_what_the_faces_refuse() -> None:
    with pytest.raises(ValidationError, match="nested"):
        MemoryAddInput(memory_type="session", content="x", metadata={"k": _nested(METADATA_DEPTH)})
    with pytest.raises(ValidationError, match="65536"):
        MemoryAddInput(memory_type="session", content="x", metadata={"k": "v" * METADATA_BYTES})
    ok = MemoryAddInput(memory_type="session", content="x", metadata={"k": _nested(METADATA_DEPTH - 2)})
    assert ok.metadata["k"]["d"]

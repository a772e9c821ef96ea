"""Each tool is declared once (issue 17): the registry (``query_server.tools``) is what the MCP tools,
the HTTP routes and the owner's loopback RPC offer, and the generated MCP schemas are at least as
informative as the hand-written ones they replaced (``tests/fixtures/expected/mcp_tools_before_issue17.json``,
dumped from the code before the issue: ``{tool: {description, input, output}}``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from query_server.errors import InvalidInput, OwnerFailure, http_error, raise_rpc_error, rpc_error
from query_server.http_api import build_http_app
from query_server.mcp_server import build_mcp_server
from query_server.ownership import ProjectHandle, RemoteService
from query_server.paging import ToolError
from query_server.tools import TOOLS, mcp_tools, routed_tools
from resources.graph.store import GraphUnavailable
from resources.schemas.tools import JobStatusInput
from resources.settings import Settings

BEFORE = json.loads((Path(__file__).parents[1] / "fixtures" / "expected" / "mcp_tools_before_issue17.json").read_text())


@pytest.fixture(scope="module")
def handle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProjectHandle]:
    """The owner of an empty project."""
    root = tmp_path_factory.mktemp("registry") / "project"
    root.mkdir()
    owner = ProjectHandle(Settings(project_root=root))
    yield owner
    owner.close()


@pytest.fixture(scope="module")
def listed(handle: ProjectHandle) -> dict[str, Any]:
    """The MCP tools as a client lists them: name -> {description, input, output}."""
    tools = anyio.run(build_mcp_server(handle).list_tools)
    return {t.name: {"description": t.description, "input": t.input_schema, "output": t.output_schema} for t in tools}


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = {**root["$defs"][schema["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _json_types(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types a schema accepts (``anyOf`` members, referenced definitions and enums resolved)."""
    schema = _resolve(schema, root)
    if "anyOf" in schema:
        return set().union(*(_json_types(member, root) for member in schema["anyOf"]))
    if "type" in schema:
        return {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {{str: "string", int: "integer", float: "number", bool: "boolean"}.get(type(v), "null") for v in values}
    return {"any"}


def _compatible(old: dict[str, Any], new: dict[str, Any], where: str) -> list[str]:
    """What a new object schema lost against the old: a property, a JSON type it accepted, or an
    optional property that became required."""
    problems = []
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    for name, old_prop in old_props.items():
        if name not in new_props:
            problems.append(f"{where}.{name}: gone")
            continue
        old_types, new_types = _json_types(old_prop, old), _json_types(new_props[name], new)
        if "any" not in new_types and not old_types <= new_types:
            problems.append(f"{where}.{name}: accepted {sorted(old_types)}, now {sorted(new_types)}")
    newly_required = set(new.get("required", [])) - set(old.get("required", []))
    problems += [f"{where}.{name}: newly required" for name in sorted(newly_required)]
    return problems


def test_every_tool_of_before_still_exists_with_a_description(listed: dict[str, Any]) -> None:
    assert set(BEFORE) <= set(listed), f"tools gone: {sorted(set(BEFORE) - set(listed))}"
    for name, tool in listed.items():
        assert tool["description"] and len(tool["description"]) > 40, name


def test_every_input_schema_is_unchanged_or_richer(listed: dict[str, Any]) -> None:
    problems = []
    for name, before in BEFORE.items():
        now = listed[name]["input"]
        problems += _compatible(before["input"], now, name)
        for prop, schema in now.get("properties", {}).items():
            if not schema.get("description"):
                problems.append(f"{name}.{prop}: no description")
    assert not problems, "\n".join(problems)


def test_every_output_schema_keeps_its_fields(listed: dict[str, Any]) -> None:
    problems = []
    for name, before in BEFORE.items():
        now = listed[name]["output"]
        problems += _compatible(before["output"], now, f"{name} (output)")
        assert set(now.get("required", [])) == set(before["output"].get("required", [])), name
    assert not problems, "\n".join(problems)


def test_mcp_tools_and_http_routes_are_the_registry(handle: ProjectHandle, listed: dict[str, Any]) -> None:
    assert list(listed) == [tool.name for tool in mcp_tools()]
    app = build_http_app(handle)
    routes = {path for path in app.openapi()["paths"] if path.startswith("/tools/")}
    assert routes == {f"/tools/{tool.name}" for tool in routed_tools()}
    internal = {"health", "job_status", "index", "refresh_design", "index_run", "memory_list", "backup", "restore", "sync_memory", "rebuild_projections",
                "notes_sync", "notes_capture"}
    assert {name for name, tool in TOOLS.items() if not tool.is_mcp} == internal
    assert {tool.name for tool in routed_tools()} == {tool.name for tool in mcp_tools()}


def test_the_owner_rpc_serves_every_tool_by_its_registry_name(handle: ProjectHandle) -> None:
    address = json.loads((handle.state_dir / "owner.json").read_text())
    remote = RemoteService(address)
    local_status = handle.call("index_status")
    assert remote.call(TOOLS["index_status"]) == local_status
    with pytest.raises(ToolError, match="Job not found"):
        remote.call(TOOLS["index_status"], JobStatusInput(job_id="nope"))
    assert remote.call(TOOLS["memory_statistics"]).memory_counts == handle.call("memory_statistics").memory_counts
    with pytest.raises(ToolError, match="bad request"):
        remote._call("no_such_tool", {})


def test_http_index_status_merges_the_job_like_mcp(handle: ProjectHandle) -> None:
    with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as client:
        assert client.post("/tools/index_status").json()["job"] is None
        missing = client.post("/tools/index_status", json={"job_id": "nope"})
        assert missing.status_code == 400 and "Job not found" in missing.json()["error"]


@pytest.mark.parametrize(("failure", "kind", "status"), [
    (ToolError("no such symbol — pass an id from code_search"), ToolError, 400),
    (GraphUnavailable("the graph server does not answer"), GraphUnavailable, 503),
    (RuntimeError("boom"), OwnerFailure, 500),
])
def test_a_failure_keeps_its_kind_across_the_owner_rpc(failure: Exception, kind: type[Exception], status: int) -> None:
    payload = json.loads(json.dumps(rpc_error("code_search", failure)))
    with pytest.raises(kind) as raised:
        raise_rpc_error(payload)
    assert http_error("code_search", raised.value)[0] == status
    if status == 503:
        assert http_error("code_search", raised.value)[2] == {"Retry-After": "5"}


def test_invalid_input_on_the_owner_stays_a_validation_error() -> None:
    from pydantic import ValidationError

    from resources.schemas.tools import CodeSearchInput

    with pytest.raises(ValidationError) as invalid:
        CodeSearchInput(query="x", limit=1000)
    payload = rpc_error("code_search", invalid.value)
    assert payload["kind"] == "invalid" and payload["error"].startswith("invalid input — limit")
    with pytest.raises(InvalidInput) as raised:
        raise_rpc_error(payload)
    assert http_error("code_search", raised.value)[:2] == (422, {"error": payload["error"]})


def test_every_tool_calls_a_method_of_its_service_part() -> None:
    """Design tools name their method (the design layer's modules load when one first runs, not with
    the registry): every tool's call is a method its part has."""
    from query_server.design.service import DesignService
    from query_server.memory.service import MemoryService
    from query_server.service import CodeMemService

    parts = {"CodeMemService": CodeMemService, "MemoryService": MemoryService, "DesignService": DesignService}
    for tool in TOOLS.values():
        part, _, method = tool.call.__qualname__.rpartition(".")
        assert callable(getattr(parts[part], method, None)), tool.name

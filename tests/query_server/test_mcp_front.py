"""The MCP front (issue 18, item 2): ``initialize`` and ``tools/list`` answered before the server
has loaded, and exactly as the server itself answers them.

Real processes: ``codemem mcp`` over its stdio pipes, once with the front off (the server's own
answers) and once as Claude Code starts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from query_server.mcp_front import (
    ENV_SWITCH,
    PROTOCOL_VERSIONS,
    TOOLS_LIST,
    Front,
    initialize_result,
    server_answers,
)

TOOLS_LIST_REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


@pytest.fixture(scope="module")
def empty_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("front") / "project"
    root.mkdir()
    return root


def test_the_front_answers_only_versions_the_sdk_supports() -> None:
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    assert set(PROTOCOL_VERSIONS) <= set(SUPPORTED_PROTOCOL_VERSIONS)


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
def test_early_answers_equal_the_servers_own(version: str, empty_project: Path) -> None:
    """For each protocol version answered early: the server's own initialize and tools/list
    results are what the front sends (regenerate the snapshot with
    ``python -m query_server.mcp_front --write-tools-list EMPTY_DIR`` when a tool changed)."""
    initialize, tools = server_answers(empty_project, version, [TOOLS_LIST_REQUEST])
    assert initialize["result"] == initialize_result(version)
    assert tools["result"] == json.loads(TOOLS_LIST.read_text()), (
        "query_server/mcp_tools_list.json is stale: run python -m query_server.mcp_front --write-tools-list EMPTY_DIR"
    )


def _session(project: Path, messages: list[dict[str, Any]], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every line ``codemem mcp`` writes for ``messages``, until it exits after the stream closes."""
    process = subprocess.Popen(
        [sys.executable, "-m", "query_server.entry", "mcp", "--project", str(project)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
    )
    answers: list[dict[str, Any]] = []
    assert process.stdin is not None and process.stdout is not None
    ids = [m["id"] for m in messages if "id" in m]
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
    while len(answers) < len(ids):
        line = process.stdout.readline()
        assert line, f"the server closed its output after {answers}; stderr: {process.stderr.read()[-2000:]!r}"
        answers.append(json.loads(line))
    process.stdin.close()
    rest = process.stdout.read()  # anything after the stream closed (there must be nothing)
    process.wait(30)
    answers += [json.loads(line) for line in rest.splitlines() if line.strip()]
    return answers


def _initialize(version: str, request_id: Any = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


def test_each_request_gets_exactly_one_answer_through_the_front(empty_project: Path) -> None:
    """initialize (answered early, the server's own answer dropped), tools/list (from the
    snapshot) and a tool call (the server's): one answer each, in the client's ids."""
    answers = _session(empty_project, [
        _initialize(PROTOCOL_VERSIONS[-1], "a"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {**TOOLS_LIST_REQUEST, "id": "b"},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "index_status", "arguments": {}}},
    ])
    assert [a["id"] for a in answers] == ["a", "b", "c"], answers
    assert answers[0]["result"] == initialize_result(PROTOCOL_VERSIONS[-1])
    assert {t["name"] for t in answers[1]["result"]["tools"]} >= {"code_search", "memory_search", "index_status"}
    assert "error" not in answers[2] and not answers[2]["result"].get("isError"), answers[2]


def test_an_unknown_protocol_version_is_left_to_the_server(empty_project: Path) -> None:
    """A version the front does not answer reaches the server, which negotiates (one answer)."""
    answers = _session(empty_project, [_initialize("1999-01-01"), {**TOOLS_LIST_REQUEST, "id": 2}])
    assert [a["id"] for a in answers] == [0, 2]
    assert answers[0]["result"]["serverInfo"]["name"] == "codemem"
    assert answers[0]["result"]["protocolVersion"] != "1999-01-01"


def test_the_switch_turns_the_front_off(empty_project: Path) -> None:
    answers = _session(empty_project, [_initialize(PROTOCOL_VERSIONS[-1])], env={ENV_SWITCH: "0"})
    assert [a["id"] for a in answers] == [0] and answers[0]["result"] == initialize_result(PROTOCOL_VERSIONS[-1])


class _Pipe:
    """A real OS pipe as two binary files."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.reader = os.fdopen(r, "rb")
        self.writer = os.fdopen(w, "wb")


def test_a_server_answer_that_differs_from_the_early_one_is_reported(capfd: pytest.CaptureFixture[str]) -> None:
    """The front compares the server's own initialize answer with what it sent, and says so on
    stderr when they differ (the stale early answer cannot go unnoticed)."""
    client_in, client_out, server_in, server_out = _Pipe(), _Pipe(), _Pipe(), _Pipe()
    front = Front(client_in.reader, client_out.writer, server_in.writer, server_out.reader)
    front.start()
    client_in.writer.write(json.dumps(_initialize(PROTOCOL_VERSIONS[0], 7)).encode() + b"\n")
    client_in.writer.flush()
    early = json.loads(client_out.reader.readline())
    assert early["id"] == 7 and early["result"] == initialize_result(PROTOCOL_VERSIONS[0])
    assert json.loads(server_in.reader.readline())["method"] == "initialize"  # the server still gets it
    server_out.writer.write(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"other": True}}).encode() + b"\n")
    server_out.writer.write(json.dumps({"jsonrpc": "2.0", "id": 8, "result": {}}).encode() + b"\n")
    server_out.writer.flush()
    assert json.loads(client_out.reader.readline())["id"] == 8  # the server's answer to 7 was dropped
    client_in.writer.close()
    assert server_in.reader.read() == b""  # the client's end closed: so did the server's
    server_out.writer.close()
    assert "differed from the server's" in capfd.readouterr().err


def test_drain_returns_once_the_servers_lines_reached_the_client() -> None:
    client_in, client_out, server_in, server_out = _Pipe(), _Pipe(), _Pipe(), _Pipe()
    front = Front(client_in.reader, client_out.writer, server_in.writer, server_out.reader)
    front.start()
    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "result": {}}).encode() + b"\n" for i in range(200)]
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(client_out.reader.readline() for _ in lines))
    reader.start()
    server_out.writer.write(b"".join(lines))
    server_out.writer.flush()
    front.drain(timeout_s=5)
    reader.join(5)
    assert received == lines


def test_requests_after_an_early_initialize_wait_for_the_servers_own_answer() -> None:
    """The client goes on as soon as the front answered initialize; the server handles requests
    concurrently, so what the client sends meanwhile reaches it only after it answered initialize
    (found with two real Claude Code sessions at once: a tool call overtook the handshake)."""
    client_in, client_out, server_in, server_out = _Pipe(), _Pipe(), _Pipe(), _Pipe()
    front = Front(client_in.reader, client_out.writer, server_in.writer, server_out.reader)
    front.start()
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "index_status", "arguments": {}}}
    for message in (_initialize(PROTOCOL_VERSIONS[-1], 1), {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
        client_in.writer.write(json.dumps(message).encode() + b"\n")
    client_in.writer.flush()
    assert json.loads(client_out.reader.readline())["id"] == 1  # answered here at once
    assert json.loads(server_in.reader.readline())["method"] == "initialize"
    held: list[bytes] = []
    reader = threading.Thread(target=lambda: held.append(server_in.reader.readline()))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and not held  # nothing more before the server answered initialize
    server_out.writer.write(json.dumps({"jsonrpc": "2.0", "id": 1, "result": initialize_result(PROTOCOL_VERSIONS[-1])}).encode() + b"\n")
    server_out.writer.flush()
    reader.join(5)
    assert json.loads(held[0])["method"] == "notifications/initialized"
    front.release_early_calls()  # the call was kept for the command (query_server.early_calls) until now
    assert json.loads(server_in.reader.readline())["id"] == 9
    client_in.writer.close()
    assert server_in.reader.read() == b""


def test_the_discover_probe_is_declined_at_once_and_the_handshake_follows(empty_project: Path) -> None:
    """Claude Code probes with server/discover (the 2026-07-28 protocol) before initialize. The
    front declines it at once and keeps it from the server, whose era the first request it reads
    decides: a probe read late, after the client fell back to initialize, made every later call
    fail ("params._meta is missing the required envelope key(s)")."""
    probe = {"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    answers = _session(empty_project, [
        probe,
        _initialize(PROTOCOL_VERSIONS[-1], "init"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "call", "method": "tools/call", "params": {"name": "index_status", "arguments": {}}},
    ])
    assert [a["id"] for a in answers] == ["probe", "init", "call"], answers
    assert answers[0]["error"]["code"] == -32601
    assert answers[1]["result"] == initialize_result(PROTOCOL_VERSIONS[-1])
    assert "error" not in answers[2] and not answers[2]["result"].get("isError"), answers[2]

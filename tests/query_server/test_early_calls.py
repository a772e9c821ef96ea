"""Tool calls sent before the MCP SDK has loaded (issue 18, item 2): ``codemem mcp`` answers them
itself, and each answer is the one the SDK's server gives for the same call.

Real processes on two copies of one indexed project (a call may change what the next one sees:
access counts, memories): one with the front off (the server answers everything), one as Claude
Code starts it, every call written at once right after the handshake. The SDK's server runs
calls concurrently, so which search sees another's access counts is not fixed: access ranking is
off and ``access_count`` is left out of the comparison."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from query_server.mcp_front import ENV_SWITCH, Front
from query_server.ownership import ProjectHandle
from query_server.tools import TOOLS
from resources.schemas.tools import IndexInput
from resources.settings import Settings
from tests.conftest import FIXTURE_REPOS
from tests.query_server.test_mcp_front import _initialize, _session

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("code_search", {"query": "load the configuration file", "limit": 3}),
    ("memory_search", {"query": "which database do we use"}),
    ("get_symbol", {"symbol": "nothing.here.at_all"}),  # the tool fails: isError
    ("code_search", {"query": "x", "limit": "many"}),  # rejected arguments: the SDK words them
    ("no_such_tool", {}),
    ("memory_search", {"query": "retries", "detail": "full", "limit": 2}),
    ("memory_search", {"query": "retries", "memory_types": "[\"design\"]"}),  # a JSON string for a list: the SDK parses it
    ("code_search", {"query": "parse", "limit": 2, "bogus": 1}),  # an unknown field
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("early") / "project"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    handle = ProjectHandle(Settings(project_root=root))
    try:
        handle.call(TOOLS["index"], IndexInput())
        for content in ("We use PostgreSQL 16 for every service database.", "Retries back off exponentially, 5 at most."):
            memory_add = TOOLS["memory_add"]
            handle.call(memory_add, memory_add.request(memory_type="session", content=content))
    finally:
        handle.close()
    return root


def _answers(project: Path, env: dict[str, str]) -> dict[Any, dict[str, Any]]:
    messages = [_initialize("2025-06-18"), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    messages += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}
                 for i, (name, args) in enumerate(CALLS, start=1)]
    return {answer["id"]: answer for answer in _session(project, messages, env) if "id" in answer}


def _without_access_counts(value: Any) -> Any:
    """``value`` with every ``access_count`` left out, also inside JSON text content."""
    if isinstance(value, dict):
        return {key: _without_access_counts(item) for key, item in value.items() if key != "access_count"}
    if isinstance(value, list):
        return [_without_access_counts(item) for item in value]
    if isinstance(value, str) and value.startswith("{"):
        try:
            return _without_access_counts(json.loads(value))
        except ValueError:
            return value
    return value


def test_calls_answered_before_the_sdk_loads_equal_the_servers_answers(indexed: Path, tmp_path: Path) -> None:
    by_server, early = tmp_path / "server", tmp_path / "early"
    shutil.copytree(indexed, by_server)
    shutil.copytree(indexed, early)
    no_access_ranking = {"CODEMEM_MEMORY_ACCESS_WEIGHT": "0"}
    expected = _answers(by_server, {ENV_SWITCH: "0", **no_access_ranking})
    got = _answers(early, no_access_ranking)
    assert set(got) == set(expected) == {0, *range(1, len(CALLS) + 1)}
    for request_id in range(1, len(CALLS) + 1):
        assert _without_access_counts(got[request_id]) == _without_access_counts(expected[request_id]), CALLS[request_id - 1]
    assert expected[3]["result"]["isError"] and "Entity not found" in expected[3]["result"]["content"][0]["text"]
    assert expected[1]["result"]["structuredContent"]["results"]
    log = [json.loads(line) for line in (early / ".codemem" / "logs" / "mcp.log").read_text().splitlines() if line.startswith("{")]
    early_log = [entry for entry in log if entry.get("event") == "tool calls sent before the MCP server was up"]
    assert early_log and early_log[0]["answered_here"] >= 1, "no call was answered before the SDK loaded"
    answered_here = early_log[0]["answered_here"]
    recorded = [entry for entry in log if entry.get("event") == "tool call" and entry.get("face") == "mcp"]
    assert len(recorded) >= answered_here  # each early call is recorded as an MCP call too


class _Pipe:
    """One end of a relay: lines written, read back in order."""

    def __init__(self, lines: list[bytes] | None = None) -> None:
        self.lines = list(lines or [])
        self.written: list[bytes] = []

    def __iter__(self) -> Any:
        return iter(self.lines)

    def readline(self) -> bytes:
        return self.lines.pop(0) if self.lines else b""

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _call(request_id: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "code_search", "arguments": {"query": "q"}}}).encode() + b"\n"


def test_the_front_keeps_calls_after_an_early_initialize_until_released() -> None:
    init = json.dumps(_initialize("2025-06-18")).encode() + b"\n"
    client_in, client_out, server_in = _Pipe([init, _call(1), _call(2), _call(3)]), _Pipe(), _Pipe()
    front = Front(client_in, client_out, server_in, _Pipe())  # type: ignore[arg-type]
    front._from_client()  # reads every client line, as its thread does
    assert server_in.written == [init]  # the calls were kept, not passed on
    first, second = front.take_early_call(), front.take_early_call()
    assert first is not None and second is not None and first.message["id"] == 1 and second.message["id"] == 2
    front.answer(first, {"content": []})
    assert json.loads(client_out.written[-1]) == {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    front._release()  # the server answered initialize: what was held reaches it
    front.pass_on(second)
    front.release_early_calls()
    assert server_in.written[1:] == [_call(2), _call(3)]  # passed on, then the one still kept, in order
    assert front.take_early_call() is None
    client_in.lines = [_call(4)]
    front._from_client()
    assert server_in.written[-1] == _call(4)  # released: calls go straight to the server


def test_calls_before_any_early_initialize_go_to_the_server() -> None:
    client_in, server_in = _Pipe([_call(1)]), _Pipe()
    front = Front(client_in, _Pipe(), server_in, _Pipe())  # type: ignore[arg-type]
    front._from_client()
    assert server_in.written == [_call(1)] and front.take_early_call() is None


def test_the_end_of_the_clients_stream_is_reported_while_no_server_reads() -> None:
    init = json.dumps(_initialize("2025-06-18")).encode() + b"\n"
    ended: list[str] = []
    front = Front(_Pipe([init, _call(1)]), _Pipe(), _Pipe(), _Pipe())  # type: ignore[arg-type]
    front.on_early_close(lambda: ended.append("before"))
    front._from_client()  # reads to the end of the stream: the client closed it
    assert ended == ["before"]
    front.on_early_close(lambda: ended.append("late"))  # registered after the end: called at once
    assert ended == ["before", "late"]
    released = Front(_Pipe([init]), _Pipe(), _Pipe(), _Pipe())  # type: ignore[arg-type]
    released.on_early_close(lambda: ended.append("released"))
    released.release_early_calls()  # the server reads now: it sees the stream end itself
    released._from_client()
    assert "released" not in ended


def test_calls_go_to_the_server_when_the_stores_do_not_open_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from query_server import early_calls
    from query_server.telemetry import ToolTelemetry
    from query_server.warm_start import OpeningHandle

    monkeypatch.setattr(early_calls, "OPEN_WAIT_S", 0.1)
    init = json.dumps(_initialize("2025-06-18")).encode() + b"\n"
    server_in = _Pipe()
    front = Front(_Pipe([init, _call(1), _call(2)]), _Pipe(), server_in, _Pipe())  # type: ignore[arg-type]
    front._from_client()
    front._release()  # the server answered initialize
    opening = threading.Event()
    handle = OpeningHandle(lambda: opening.wait(5))  # another owner is handing the stores over
    handle.start()
    try:
        assert early_calls.serve_early_calls(front, handle, ToolTelemetry()) == 0
        assert server_in.written[1:] == [_call(1), _call(2)]  # passed on, in order, for the server
    finally:
        opening.set()


def test_calls_on_a_project_never_indexed_go_to_the_server(tmp_path: Path) -> None:
    """Its first build waits for the MCP SDK's import; a code call answered here would wait for it."""
    from query_server.telemetry import ToolTelemetry
    from query_server.warm_start import OpeningHandle

    root = tmp_path / "new"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    init = json.dumps(_initialize("2025-06-18")).encode() + b"\n"
    server_in = _Pipe()
    front = Front(_Pipe([init, _call(1)]), _Pipe(), server_in, _Pipe())  # type: ignore[arg-type]
    front._from_client()
    front._release()
    handle = OpeningHandle(lambda: ProjectHandle(Settings(project_root=root)))
    handle.start()
    try:
        from query_server.early_calls import serve_early_calls

        assert serve_early_calls(front, handle, ToolTelemetry()) == 0
        assert server_in.written[1:] == [_call(1)]
    finally:
        handle.close()


class _Client:
    """A client on real pipes: writes lines to the front, which reads them in its own thread."""

    def __init__(self) -> None:
        import os

        read_end, write_end = os.pipe()
        self.front_in = os.fdopen(read_end, "rb")
        self._out = os.fdopen(write_end, "wb")
        self.answers = _Pipe()

    def send(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message).encode() + b"\n")
        self._out.flush()

    def close(self) -> None:
        self._out.close()

    def answered(self, request_id: int, timeout_s: float = 60.0) -> dict[str, Any]:
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.answers.written):
                answer = json.loads(line)
                if answer.get("id") == request_id:
                    return answer
            time.sleep(0.01)
        raise AssertionError(f"no answer to request {request_id} within {timeout_s} s")


def _tool_call(request_id: int, query: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": query}}}


@pytest.fixture
def served(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A front on real pipes over a copy of the indexed project, its handle opening, and
    ``serve_early_calls`` running in a thread (its count of calls answered in ``result``)."""
    import threading

    from query_server import early_calls
    from query_server.telemetry import ToolTelemetry
    from query_server.warm_start import OpeningHandle

    monkeypatch.setattr(early_calls, "QUIET_S", 60.0)  # only the client's requests end the serving here
    root = tmp_path / "project"
    shutil.copytree(indexed, root)
    client, server_in = _Client(), _Pipe()
    front = Front(client.front_in, client.answers, server_in, _Pipe())  # type: ignore[arg-type]
    front.start()
    client.send(_initialize("2025-06-18"))
    client.answered(0)
    handle = OpeningHandle(lambda: ProjectHandle(Settings(project_root=root)))
    handle.start()
    result: list[int] = []
    serving = threading.Thread(target=lambda: result.append(early_calls.serve_early_calls(front, handle, ToolTelemetry())))
    serving.start()
    try:
        yield client, server_in, serving, result
    finally:
        client.close()
        serving.join(60)
        handle.close()


def test_calls_that_follow_each_other_are_all_answered_before_the_sdk_loads(served: Any) -> None:
    client, server_in, serving, result = served
    client.send(_tool_call(1, "which database do we use"))
    assert client.answered(1)["result"]["isError"] is False
    client.send(_tool_call(2, "retries"))  # after the first answer, as a client calling tools one by one
    assert client.answered(2)["result"]["isError"] is False
    assert serving.is_alive()  # still waiting for the next call: the SDK is not loading
    client.close()  # the client leaves: the serving ends
    serving.join(30)
    assert result == [2]
    assert [json.loads(line).get("method") for line in server_in.written] == ["initialize"]


def test_a_request_only_the_server_answers_starts_the_sdk_at_once(served: Any) -> None:
    client, _, serving, result = served
    client.send(_tool_call(1, "which database do we use"))
    client.answered(1)
    client.send({"jsonrpc": "2.0", "id": 2, "method": "prompts/list", "params": {}})
    serving.join(30)  # long before QUIET_S (60 s): the request needs the server
    assert not serving.is_alive() and result == [1]


def test_calls_past_the_serving_limit_wait_for_the_server(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from query_server import early_calls
    from query_server.telemetry import ToolTelemetry
    from query_server.warm_start import OpeningHandle

    monkeypatch.setattr(early_calls, "SERVING_MAX_S", 0.0)
    init = json.dumps(_initialize("2025-06-18")).encode() + b"\n"
    front = Front(_Pipe([init, _call(1)]), _Pipe(), _Pipe(), _Pipe())  # type: ignore[arg-type]
    front._from_client()
    handle = OpeningHandle(lambda: ProjectHandle(Settings(project_root=indexed)))
    try:
        assert early_calls.serve_early_calls(front, handle, ToolTelemetry()) == 0
        kept = front.take_early_call()
        assert kept is not None and kept.message["id"] == 1  # still kept: released to the server when it reads
    finally:
        handle.close()

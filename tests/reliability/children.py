"""Child processes of the fault tests: the environment they run in, and the codemem CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from resources.faults import ENV as FAULT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
CODEMEM = [sys.executable, "-c", "from query_server.cli import main; main()"]


def child_env(fault: str | None = None, *, drop: Iterable[str] = ()) -> dict[str, str]:
    """This environment for a child: the repository importable, the model hub offline, output
    unbuffered; no fault point unless ``fault`` names one; the ``drop`` variables removed."""
    removed = {FAULT_ENV, *drop}
    env = {k: v for k, v in os.environ.items() if k not in removed}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    if fault is not None:
        env[FAULT_ENV] = fault
    return env


def codemem(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``codemem ARGS`` in ``root``, its output captured."""
    return subprocess.run([*CODEMEM, *args], capture_output=True, text=True, env=child_env(), cwd=str(root), timeout=timeout)


class McpStdioClient:
    """A bare JSON-RPC client of ``codemem mcp`` over its pipes (newline-delimited messages), so a
    test can SIGKILL the server, or the process it forwards to, at any moment without an async
    client in the way."""

    def __init__(self, project: Path, log: Path | None = None) -> None:
        """Start ``codemem mcp --project PROJECT`` (not initialized yet), its log to ``log`` if given."""
        self._log = log.open("w") if log is not None else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "query_server.cli", "mcp", "--project", str(project)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log or subprocess.DEVNULL, env=child_env(), cwd=str(REPO_ROOT), text=True,
            bufsize=1, start_new_session=True,
        )
        self._next = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The result of one call; None when the server died first."""
        self._next += 1
        message = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        try:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    return None
                reply = json.loads(line)
                if reply.get("id") == self._next:
                    if "error" in reply:
                        raise AssertionError(f"{method}: {reply['error']}")
                    return reply["result"]
        except (BrokenPipeError, ValueError, OSError):
            return None

    def notify(self, method: str) -> None:
        """Send a notification (no answer)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def initialize(self) -> bool:
        """The MCP handshake; False when the server died first."""
        result = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                             "clientInfo": {"name": "fault-test", "version": "0"}})
        if result is None:
            return False
        self.notify("notifications/initialized")
        return True

    def tool_result(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The raw ``tools/call`` result (``isError`` and all); None when the server died first."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """A tool's structured answer (a tool error fails the test); None when the server died first."""
        result = self.tool_result(name, arguments)
        if result is None:
            return None
        assert not result.get("isError"), (name, result)
        return result.get("structuredContent") or json.loads(result["content"][0]["text"])

    def close(self) -> None:
        """End the server: EOF on its stdin lets it close its stores; a kill if it does not exit."""
        for pipe in (self.proc.stdin,):
            try:
                if pipe:
                    pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdout:
            self.proc.stdout.close()
        if self._log is not None:
            self._log.close()


def session_members(sid: int, command_part: bytes | None = None) -> list[int]:
    """Live processes of session ``sid`` (a killed run is started as a session leader), those
    whose command line contains ``command_part`` when given (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes() if command_part is not None else b""
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, session, ...
        if int(fields[3]) == sid and fields[0] != "Z" and (command_part is None or command_part in command):
            found.append(int(entry.name))
    return found

"""Answer MCP ``initialize`` and ``tools/list`` before the MCP server has loaded.

Claude Code times its version probe: ``initialize`` must be answered within a few hundred
milliseconds, but ``codemem mcp`` needs ~1 s on a 2-core machine to import the MCP SDK, pydantic
and the tool registry. ``start_front`` (called by ``query_server.entry`` before anything heavy
is imported, standard library only) puts two pipes between the client and the server:

* client → server: each line the client writes is read here and passed on, but for the
  ``server/discover`` probe of the 2026-07-28 protocol, declined here at once (``DISCOVER_DECLINED``)
  so that the client opens with the handshake the front answers. ``initialize`` is
  answered at once (the server still receives it, so its session starts as usual, and its own
  answer is dropped; what the client sends meanwhile is held until that answer, so the server
  sees the usual order); ``tools/list`` without a cursor is answered from the snapshot of the
  server's own answer (``mcp_tools_list.json``, kept equal to it by a test) and not passed on.
* server → client: every line the server writes is passed on, but for those dropped answers.
* ``tools/call`` requests sent after that ``initialize`` are kept here (``take_early_call``) until
  the server is ready for them (``release_early_calls`` passes the rest on, in order): the command
  answers them itself while the MCP SDK is not loaded yet (``query_server.early_calls``), with the
  answer the server would give, or passes one on (``pass_on``) for the server to answer.

What is answered here is exactly what the server answers: a test compares both, and the server's
own ``initialize`` answer is compared at run time (a difference is logged and the server's is
sent, never a stale one). ``CODEMEM_MCP_EARLY_ANSWERS=0`` turns the front off.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from collections.abc import Callable
from typing import Any, BinaryIO, NamedTuple

INSTRUCTIONS = (
    "codemem knows this repository's code: search it by meaning before writing new code "
    "(code_search, find_duplicates), read a symbol with its callers and callees (get_symbol), walk "
    "calls/imports/inheritance (get_related, or read-only Cypher with graph_query), and check how "
    "complete and current the index is (index_status). It also keeps the project's memory across "
    "sessions: recall requirements, designs/ADRs, patterns, test history and preferences before "
    "implementing or fixing (memory_search), and record decisions and learnings when they happen "
    "(memory_add; memory_update when something changes)."
)
"""What the server tells the client about itself (``initialize``'s ``instructions``)."""

SERVER_NAME = "codemem"
CAPABILITIES = {"prompts": {"listChanged": False}, "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False}}
"""The capabilities the MCP SDK's server announces for codemem's server (a test compares)."""
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Protocol versions answered here when the client asks for one of them (a test checks that the SDK
supports each); any other ``initialize`` is left to the server."""
TOOLS_LIST = Path(__file__).with_name("mcp_tools_list.json")
"""The server's ``tools/list`` result, as the SDK serializes it (regenerate with
``python -m query_server.mcp_front --write-tools-list EMPTY_DIR`` after changing a tool; a test
says when)."""
ENV_SWITCH = "CODEMEM_MCP_EARLY_ANSWERS"
DISCOVER_METHOD = "server/discover"
DISCOVER_DECLINED = {"code": -32601, "message": "Method not found: codemem serves MCP over stdio with the initialize handshake"}
"""The answer to the 2026-07-28 protocol's probe: a client then opens with ``initialize`` at once.
The probe is not passed on: the first request the server sees decides its protocol era, and a
probe it read late (a slow start) would open the per-request-envelope era under a client that
had already fallen back to the handshake (Claude Code 2.1.332 waits ~3 s for the probe)."""
DRAIN_S = 0.05
"""How long an exiting process waits for the server's last lines to reach the client."""

_active: Front | None = None


def initialize_result(requested_version: str) -> dict[str, Any]:
    """The ``initialize`` result the server gives a client asking for ``requested_version``."""
    return {"capabilities": CAPABILITIES, "instructions": INSTRUCTIONS, "protocolVersion": requested_version,
            "serverInfo": {"name": SERVER_NAME, "version": ""}}


class KeptCall(NamedTuple):
    """A ``tools/call`` request kept by the front: as parsed, and the line the client wrote."""

    message: dict[str, Any]
    line: bytes


class Front:
    """The two relays between the client's pipes and the server's (see the module docstring)."""

    def __init__(self, client_in: BinaryIO, client_out: BinaryIO, server_in: BinaryIO, server_out: BinaryIO) -> None:
        self._client_in = client_in
        self._client_out = client_out
        self._server_in = server_in
        self._server_out = server_out
        self._write_lock = threading.Lock()
        self._answered: dict[Any, dict[str, Any]] = {}
        """Request id → the result sent here; the server's answer to it is dropped."""
        self._answered_lock = threading.Lock()
        self._forward_lock = threading.Lock()
        self._held: list[bytes] | None = None
        """Client lines held until the server answers the ``initialize`` answered here."""
        self._held_for: Any = None
        self._close_when_released = False
        self._initialized_here = False
        """The session's ``initialize`` was answered here (else the server negotiated it, and
        answers everything)."""
        self._waiting = threading.Event()
        """Set while the server-side relay waits for the server to write (nothing in hand)."""
        self._early: list[KeptCall] | None = []
        """``tools/call`` requests kept for ``take_early_call`` (None once released to the server)."""
        self._early_lock = threading.Lock()
        self._early_changed = threading.Condition(self._early_lock)
        """Notified when a call is kept, a request only the server answers is passed on, or the
        client leaves (``wait_for_early_call``)."""
        self._server_needed = False
        """A request only the server answers was passed on: the SDK must load now."""
        self._client_gone = False
        self._on_early_close: Callable[[], None] | None = None
        """Called when the client closes its stream before the server reads (``on_early_close``)."""
        self._tools_list: dict[str, Any] | None = None
        try:
            self._tools_list = json.loads(TOOLS_LIST.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self._tools_list = None  # no snapshot: tools/list goes to the server

    def start(self) -> None:
        """Start both relays (daemon threads)."""
        threading.Thread(target=self._from_client, name="codemem-mcp-front-in", daemon=True).start()
        threading.Thread(target=self._from_server, name="codemem-mcp-front-out", daemon=True).start()

    def _send(self, line: bytes) -> None:
        with self._write_lock:
            self._client_out.write(line)
            self._client_out.flush()

    def _answer_here(self, message: Any) -> tuple[dict[str, Any] | None, bool]:
        """(the result to send now or None, whether the server must still get the request)."""
        if not isinstance(message, dict) or "id" not in message:
            return None, True
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            self._initialized_here = isinstance(params, dict) and params.get("protocolVersion") in PROTOCOL_VERSIONS
            return (initialize_result(params["protocolVersion"]), True) if self._initialized_here else (None, True)
        if (method == "tools/list" and self._initialized_here and self._tools_list is not None
                and isinstance(params, dict) and not params.get("cursor")):
            return self._tools_list, False
        return None, True

    def _from_client(self) -> None:
        try:
            for line in self._client_in:
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                if isinstance(message, dict) and message.get("method") == DISCOVER_METHOD and "id" in message:
                    self._send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": DISCOVER_DECLINED}).encode() + b"\n")
                    continue  # never reaches the server: it serves the handshake era
                if self._keep_early(message, line):
                    continue
                result, forward = self._answer_here(message)
                if result is not None:
                    with self._answered_lock:
                        self._answered[message["id"]] = result
                    self._send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode() + b"\n")
                if result is not None and message.get("method") == "initialize":
                    # the client goes on at once; the server must finish this first: what follows is
                    # held from the moment the server can see the initialize (set in the same locked
                    # step, so its answer cannot be read before the hold it releases exists)
                    with self._forward_lock:
                        self._server_in.write(line)
                        self._server_in.flush()
                        self._held, self._held_for = [], message["id"]
                elif forward:
                    self._forward(line)
                    if isinstance(message, dict) and "id" in message and "method" in message:
                        self._need_server()
        except (OSError, ValueError):
            pass  # the server's end is gone: the process is exiting
        finally:
            with self._early_lock:
                self._client_gone = True
                self._early_changed.notify_all()
                early_close = self._on_early_close if self._early is not None else None
            if early_close is not None:
                early_close()  # no server reads yet to see the end of the stream
            with self._forward_lock:
                if self._held is not None:
                    self._close_when_released = True  # after the held lines reach the server
                    return
            self._close_server_in()

    def _keep_early(self, message: Any, line: bytes) -> bool:
        """Keep a ``tools/call`` request for ``take_early_call`` (only after an ``initialize``
        answered here, and until ``release_early_calls``)."""
        if not (isinstance(message, dict) and message.get("method") == "tools/call" and "id" in message):
            return False
        with self._early_lock:
            if self._early is None or not self._initialized_here:
                return False
            self._early.append(KeptCall(message, line))
            self._early_changed.notify_all()
            return True

    def take_early_call(self) -> KeptCall | None:
        """The oldest ``tools/call`` request kept here, now this caller's to ``answer`` or to
        ``pass_on``; None when none waits."""
        with self._early_lock:
            return self._early.pop(0) if self._early else None

    def wait_for_early_call(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for a ``tools/call`` request to be kept, a request only the
        server answers to be passed on, or the client to leave."""
        with self._early_lock:
            self._early_changed.wait_for(lambda: self._early or self._server_needed or self._client_gone, timeout_s)

    def server_needed(self) -> bool:
        """True once a request only the server answers was passed on (``prompts/list``, a call
        ``pass_on`` handed over: the SDK must load now) or the client left."""
        with self._early_lock:
            return self._server_needed or self._client_gone

    def _need_server(self) -> None:
        with self._early_lock:
            self._server_needed = True
            self._early_changed.notify_all()

    def answer(self, call: KeptCall, result: dict[str, Any]) -> None:
        """Send the result of a call taken with ``take_early_call`` to the client."""
        self._send(json.dumps({"jsonrpc": "2.0", "id": call.message["id"], "result": result}).encode() + b"\n")

    def pass_on(self, call: KeptCall) -> None:
        """Hand a call taken with ``take_early_call`` to the server, as the client wrote it (the
        SDK must load now to answer it)."""
        self._forward(call.line)
        self._need_server()

    def on_early_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (at once, or from the relay's thread) when the client closes its stream
        before ``release_early_calls``: the server, not reading yet, cannot see it end."""
        with self._early_lock:
            now = self._client_gone and self._early is not None
            if not now:
                self._on_early_close = callback
        if now:
            callback()

    def release_early_calls(self) -> None:
        """The server reads now: pass on the ``tools/call`` requests still kept, in order, and keep
        no more."""
        with self._early_lock:
            kept, self._early = self._early or [], None
            for call in kept:
                self._forward(call.line)

    def _forward(self, line: bytes) -> None:
        """Pass a client line on to the server, or hold it while the server has not yet answered
        an ``initialize`` answered here (the server handles requests concurrently: one sent
        before its own answer would reach a session not yet initialized)."""
        with self._forward_lock:
            if self._held is not None:
                self._held.append(line)
                return
            self._server_in.write(line)
            self._server_in.flush()

    def _release(self) -> None:
        """The server answered ``initialize``: pass on what was held, in order."""
        with self._forward_lock:
            held, self._held, self._held_for = self._held or [], None, None
            try:
                for line in held:
                    self._server_in.write(line)
                self._server_in.flush()
            except (OSError, ValueError):
                return
            if self._close_when_released:
                self._close_server_in()

    def _close_server_in(self) -> None:
        try:
            self._server_in.close()  # the client closed its stream: so does the server's
        except OSError:
            pass

    def _from_server(self) -> None:
        try:
            while True:
                self._waiting.set()
                line = self._server_out.readline()
                self._waiting.clear()
                if not line:
                    return
                if self._answered and self._drop(line):
                    continue
                self._send(line)
        except (OSError, ValueError):
            pass

    def drain(self, timeout_s: float = DRAIN_S) -> None:
        """Wait until what the server wrote has reached the client (the process is about to exit)."""
        import fcntl
        import termios
        import time

        deadline = time.monotonic() + timeout_s
        fd = self._server_out.fileno()
        while time.monotonic() < deadline:
            try:
                unread = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
            except OSError:
                return
            if unread == 0 and self._waiting.is_set():
                return
            time.sleep(0.002)

    def _drop(self, line: bytes) -> bool:
        """True for the server's answer to a request answered here (already sent)."""
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return False
        with self._answered_lock:
            sent = self._answered.pop(message["id"], None)
        if sent is None:
            return False
        with self._forward_lock:
            releases = message["id"] == self._held_for
        if releases:
            self._release()
        if message.get("result") != sent:
            sys.stderr.write(
                "codemem mcp: the early answer to a request differed from the server's; set "
                f"{ENV_SWITCH}=0 and report it (sent {json.dumps(sent)[:300]}, server {line[:300]!r})\n"
            )
        return True


def start_front() -> None:
    """Put the front between this process's stdin/stdout and the MCP server that will read them
    (the server uses fds 0 and 1 as usual; they become pipes to the relays)."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return
    client_in = os.fdopen(os.dup(0), "rb")
    client_out = os.fdopen(os.dup(1), "wb")
    to_server_r, to_server_w = os.pipe()
    from_server_r, from_server_w = os.pipe()
    os.dup2(to_server_r, 0)
    os.dup2(from_server_w, 1)
    os.close(to_server_r)
    os.close(from_server_w)
    global _active
    _active = Front(client_in, client_out, os.fdopen(to_server_w, "wb"), os.fdopen(from_server_r, "rb"))
    _active.start()


def active_front() -> Front | None:
    """The front of this process (None when ``start_front`` was not called or is switched off)."""
    return _active


def drain() -> None:
    """Before this process exits: let the server's last lines reach the client (no front: nothing)."""
    if _active is not None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        _active.drain()


def server_answers(project: Path, protocol_version: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The MCP server's own answers (this front off) to ``initialize`` for ``protocol_version``,
    then to each of ``requests`` (JSON-RPC requests with ids), from a ``codemem mcp`` over stdio."""
    import subprocess

    env = {**os.environ, ENV_SWITCH: "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "query_server.entry", "mcp", "--project", str(project)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
                  "params": {"protocolVersion": protocol_version, "capabilities": {}, "clientInfo": {"name": "codemem", "version": "0"}}}
    answers: list[dict[str, Any]] = []
    try:
        for message in [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *requests]:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            if "id" in message:
                answers.append(json.loads(process.stdout.readline()))
    finally:
        process.stdin.close()
        process.wait(60)
    return answers


def write_tools_list(project: Path) -> Path:
    """Write ``mcp_tools_list.json``: the server's own ``tools/list`` result (served from ``project``)."""
    answers = server_answers(project, PROTOCOL_VERSIONS[-1], [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}])
    TOOLS_LIST.write_text(json.dumps(answers[-1]["result"], indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return TOOLS_LIST


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-tools-list":
        print(write_tools_list(Path(sys.argv[2])))
    else:
        sys.exit("usage: python -m query_server.mcp_front --write-tools-list EMPTY_PROJECT_DIR")

"""One owner per project: the process that holds the embedded stores, and everyone else.

With every store shared (``Settings.shared_stores``: PostgreSQL, a Qdrant server and Neo4j) there
is no owner: each process opens the stores itself, and the database serializes what must be
(writes to the ledger and the manifest, index runs: ``Manifest.alone``).

qdrant-edge and the embedded graph admit one process per directory. The first codemem process
that needs a project's stores takes an exclusive lock (``<state>/owner.lock``), opens them, and
serves the service methods on a loopback port written, with a random token, to
``<state>/owner.json``. Every other process (a second ``codemem mcp``, ``codemem index`` while
the MCP server runs, a Dagster run) sends its calls there. When the owner goes away, the next
caller takes the lock and becomes the owner itself.

Calls name a tool of the registry (``query_server.tools``): the name crosses the process
boundary, and each side runs or sends that tool's entry. A call in flight when its owner dies is
retried on the next owner (``ProjectHandle.call``) under the tool's retry policy
(``query_server.tools.registry``): writes carry an idempotency key that the ledger deduplicates,
so the caller gets one result and the stores change once. The owner answers only after the tool
returned, i.e. after the ledger committed. A failure keeps its kind across the boundary
(``query_server.errors``).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import structlog
from pydantic import BaseModel

from resources.settings import Settings

from query_server.errors import raise_rpc_error, rpc_error
from query_server.heap_trim import HeapTrimmer
from query_server.owner_lock import LOCK_FILE, OwnerLock
from query_server.service import CodeMemService, ToolError
from query_server.tools import KEYED, ONCE, Tool
from query_server.tools import tool as registered_tool

log = structlog.get_logger("codemem.ownership")

OWNER_FILE = "owner.json"
CONNECT_WAIT_S = 60.0
HANDOVER_WAIT_S = 60.0
"""How long a call whose owner went away waits for the next owner (this process or another) to
answer before it reports the failure; retries back off from 50 ms to 1 s."""
RPC_TIMEOUT_S = 3600.0
OWNER_POLL_S = 0.05
"""How often the owner's loopback server checks whether it should stop: ``close`` waits for that
check (the stdlib default, 0.5 s, is past the budget of a shutdown, ``query_server.shutdown``)."""
MAX_REQUEST_ID_CHARS = 200
OWNER_DRAIN_S = 0.25
"""How long an owner that stops waits for the calls it is running for other processes before it
closes the stores (a call cut short by the closing is not answered, so its caller retries it on the
next owner with the same idempotency key)."""


class OwnerGone(ConnectionError):
    """The connection to the owner process failed: it died or is going away.

    Attributes:
        sent: The request had reached the owner (it may have run); False: it surely did not.
        pid: The owner's process id.
    """

    def __init__(self, message: str, *, sent: bool, pid: int) -> None:
        """Record how far the call got."""
        super().__init__(message)
        self.sent = sent
        self.pid = pid


class _Handler(BaseHTTPRequestHandler):
    server: _OwnerHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        if self.headers.get("X-Codemem-Token") != self.server.token:
            self._send(403, {"error": "bad owner token"})
            return
        length = int(self.headers.get("Content-Length", "0"))
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
            tool = registered_tool(request["method"])
            request_id = request.get("request_id")
            if request_id is not None and not (isinstance(request_id, str) and 0 < len(request_id) <= MAX_REQUEST_ID_CHARS):
                raise ValueError("request_id")
        except (ValueError, KeyError, TypeError, AttributeError):
            self._send(400, {"error": "bad request"})
            return
        params = request.get("params") or {}
        service = self.server.service
        with self.server.running() as running:
            if not running:  # stopping: no answer, so the caller sends the call to the next owner
                self.close_connection = True
                return
            try:
                args = (tool.input.model_validate(params),) if tool.input is not None else ()
                if tool.progress:
                    self._stream(service, tool, args)
                    return
                result = tool.run(service, *args, request_id=request_id)
                self._send(200, {"result": result.model_dump(mode="json") if isinstance(result, BaseModel) else result})
            except Exception as exc:  # noqa: BLE001 - the owner must answer, not die
                if self.server.closing:  # maybe cut short by the stores closing: the next owner runs it again
                    self.close_connection = True
                    return
                self._send(200, rpc_error(tool.name, exc))

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, service: CodeMemService, tool: Tool, args: tuple[Any, ...]) -> None:
        """Run a tool that reports progress (``index``): one JSON line per step, then its result."""
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()

        def emit(obj: dict[str, Any]) -> None:
            self.wfile.write((json.dumps(obj) + "\n").encode())
            self.wfile.flush()

        try:
            report = tool.run(service, *args, progress=lambda phase, done, total: emit({"progress": [phase, done, total]}))
            emit({"result": report})
        except Exception as exc:  # noqa: BLE001 - the owner must answer, not die
            if self.server.closing:  # the stream ends without a result: the caller's "owner went away"
                return
            emit(rpc_error(tool.name, exc))


class _OwnerHTTPServer(ThreadingHTTPServer):
    """The owner's loopback server; it counts the calls it runs so that ``drain`` can wait for them."""

    daemon_threads = True

    def __init__(self, service: CodeMemService, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.service = service
        self.token = token
        self.closing = False
        self._running = 0
        self._idle = threading.Condition()

    @contextlib.contextmanager
    def running(self) -> Iterator[bool]:
        """Count a call as running while it runs; yields False once the server is closing."""
        with self._idle:
            if self.closing:
                admitted = False
            else:
                admitted = True
                self._running += 1
        try:
            yield admitted
        finally:
            if admitted:
                with self._idle:
                    self._running -= 1
                    self._idle.notify_all()

    def drain(self, timeout_s: float) -> int:
        """Refuse new calls and wait up to ``timeout_s`` for the running ones; how many still run."""
        with self._idle:
            self.closing = True
            self._idle.wait_for(lambda: self._running == 0, timeout_s)
            return self._running


class RemoteService:
    """The tools of another process that owns the project's stores, called over loopback."""

    def __init__(self, address: dict[str, Any]) -> None:
        """Talk to the owner at ``address`` (the content of owner.json)."""
        self.port = int(address["port"])
        self.token = str(address["token"])
        self.pid = int(address.get("pid", 0))

    def _call(
        self, method: str, params: dict[str, Any] | None, on_line: Callable[[dict[str, Any]], None] | None = None,
        request_id: str | None = None,
    ) -> Any:
        """One call; a broken connection (refused, reset, cut short) raises ``OwnerGone``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=RPC_TIMEOUT_S)
        sent = in_callback = False
        try:
            body = json.dumps({"method": method, "params": params or {}, "request_id": request_id})
            conn.request("POST", "/call", body=body, headers={"X-Codemem-Token": self.token, "Content-Type": "application/json"})
            sent = True
            response = conn.getresponse()
            if on_line is None:
                payload = json.loads(response.read())
            else:
                payload = None
                for raw in response:
                    line = json.loads(raw)
                    if "progress" in line:
                        in_callback = True
                        on_line(line)
                        in_callback = False
                    else:
                        payload = line
        except TimeoutError as exc:
            raise ToolError(
                f"the project's owner process (pid {self.pid}) did not answer {method} within {RPC_TIMEOUT_S:g} s — "
                "`codemem status` shows what it is doing"
            ) from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if in_callback:
                raise
            raise OwnerGone(f"{type(exc).__name__}: {exc}", sent=sent, pid=self.pid) from exc
        finally:
            conn.close()
        if payload is None:
            raise OwnerGone(f"the owner's answer to {method} ended before its result", sent=True, pid=self.pid)
        if "error" in payload:
            raise_rpc_error(payload)
        return payload.get("result")

    def call(
        self, tool: Tool, request: BaseModel | None = None, progress: Callable[[str, int, int], None] | None = None,
        *, request_id: str | None = None,
    ) -> Any:
        """Run ``tool`` on the owner: the input and the result validated by the tool's models, the
        call's idempotency key ``request_id`` sent along (the owner applies it), progress streamed
        back for a tool that reports it (``index``)."""
        params = request.model_dump(mode="json") if request is not None else None
        if tool.progress:
            def forward(line: dict[str, Any]) -> None:
                if progress is not None:
                    progress(*line["progress"])

            return self._call(tool.name, params, on_line=forward)
        result = self._call(tool.name, params, request_id=request_id)
        return tool.result.model_validate(result) if tool.result is not None else result

    def close(self) -> None:
        """Nothing to release: the owner keeps the stores."""


class ProjectHandle:
    """Whatever serves this project to this process: its own stores, or the owner's.

    Calls are forwarded to the current backend; if a remote owner vanishes, the handle takes
    the lock and becomes the owner (so a Claude Code session survives another one closing).
    """

    def __init__(self, settings: Settings) -> None:
        """Become the owner or connect to it."""
        self.settings = settings
        self.state_dir = settings.resolved_state_dir()
        self._lock = OwnerLock(self.state_dir)
        self._server: _OwnerHTTPServer | None = None
        self._trimmer: HeapTrimmer | None = None
        self._reconnecting = threading.Lock()
        self._stopping = threading.Lock()
        self.backend: CodeMemService | RemoteService = self._connect()

    @property
    def is_owner(self) -> bool:
        """True when this process holds the stores."""
        return isinstance(self.backend, CodeMemService)

    def _connect(self, deadline: float | None = None) -> CodeMemService | RemoteService:
        if self.settings.shared_stores:  # no owner: this process uses the shared stores directly
            self._take_shared_lock(deadline)
            try:
                service = CodeMemService(self.settings)
            except BaseException:
                self._lock.release()
                raise
            self._trimmer = HeapTrimmer(service.foreground, self.settings.heap_trim_interval_s)
            self._trimmer.start()
            log.info("serving the project from shared stores (no owner)", operation="own", state_dir=str(self.state_dir))
            return service
        deadline = time.monotonic() + CONNECT_WAIT_S if deadline is None else deadline
        while True:
            if self._lock.try_acquire():
                return self._become_owner()
            address = self._read_address()
            if address is not None and self._reachable(address):
                return RemoteService(address)
            if time.monotonic() > deadline:
                raise ToolError(
                    f"another process holds {self.state_dir / LOCK_FILE} but does not answer — if no "
                    "codemem process runs for this project, delete that lock file and retry"
                )
            time.sleep(0.2)

    def _take_shared_lock(self, deadline: float | None) -> None:
        """With shared stores, every process of the state dir holds its lock shared: together, but
        never while ``codemem repair`` (which takes it alone) works on the state dir's files."""
        deadline = time.monotonic() + CONNECT_WAIT_S if deadline is None else deadline
        while not self._lock.try_acquire(shared=True):
            if time.monotonic() > deadline:
                raise ToolError(f"another process holds {self.state_dir / LOCK_FILE} alone (`codemem repair`?) — "
                                "wait for it to finish, then retry")
            time.sleep(0.2)

    def _become_owner(self) -> CodeMemService:
        try:
            service = CodeMemService(self.settings)
        except BaseException:
            self._lock.release()
            raise
        token = secrets.token_hex(16)
        self._trimmer = HeapTrimmer(service.foreground, self.settings.heap_trim_interval_s)
        self._trimmer.start()
        self._server = _OwnerHTTPServer(service, token)
        threading.Thread(target=self._server.serve_forever, args=(OWNER_POLL_S,), name="codemem-owner", daemon=True).start()
        address = {"pid": os.getpid(), "port": self._server.server_address[1], "token": token}
        tmp = self.state_dir / (OWNER_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(address, handle)
        os.replace(tmp, self.state_dir / OWNER_FILE)
        log.info("owning project stores", operation="own", port=address["port"], state_dir=str(self.state_dir))
        return service

    def _read_address(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.state_dir / OWNER_FILE).read_text())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _reachable(address: dict[str, Any]) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", int(address["port"]), timeout=2)
            conn.connect()
            conn.close()
            return True
        except (OSError, KeyError, ValueError):
            return False

    def call(self, tool: Tool | str, *args: Any, **kwargs: Any) -> Any:
        """Run a tool of the registry (or the one of that name) on the project: ``args`` are its
        input (and, for ``index``, a progress callback); a ``request_id`` keyword is the call's
        idempotency key.

        If a remote owner goes away, wait for the next owner — this process takes the lock when it
        can — and retry under the tool's retry policy (``query_server.tools.registry``), a write with
        the same idempotency key (one is made when the caller gives none), backing off until
        ``HANDOVER_WAIT_S``; then raise a ``ToolError`` that says what happened.
        """
        tool = registered_tool(tool) if isinstance(tool, str) else tool
        method, policy = tool.name, tool.retry
        request_id = kwargs.pop("request_id", None)
        if policy == KEYED:
            request_id = request_id or getattr(args[0] if args else None, "request_id", None) or uuid.uuid4().hex
        deadline: float | None = None
        pause = 0.05
        takeover_error = ""
        while True:
            backend = self.backend
            try:
                return self._invoke(backend, tool, args, kwargs, request_id)
            except OwnerGone as exc:
                gone = exc
            if gone.sent and policy == ONCE:
                raise ToolError(
                    f"the project's owner process (pid {gone.pid}) went away while running {method} ({gone}) — it may "
                    "have completed: check its result before running it again"
                ) from gone
            deadline = deadline if deadline is not None else time.monotonic() + HANDOVER_WAIT_S
            if time.monotonic() >= deadline:
                raise ToolError(
                    f"the project's owner process went away during {method} and no process took over within "
                    f"{HANDOVER_WAIT_S:g} s ({gone}{takeover_error}) — it may or may not have been applied: check before "
                    "repeating it; `codemem status` shows the project's owner"
                ) from gone
            log.info("owner went away; retrying on the next owner", operation=method, error=str(gone), pid=gone.pid, sent=gone.sent)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
            with self._reconnecting:
                if self.backend is backend:  # another thread may have reconnected meanwhile
                    try:
                        self.backend = self._connect(deadline)
                    except Exception as exc:  # noqa: BLE001 - opening the stores may fail while the old owner goes away
                        takeover_error = f"; taking over failed: {type(exc).__name__}: {exc}"
                        log.info("taking over failed; retrying", operation=method, error=takeover_error[2:])

    @staticmethod
    def _invoke(
        backend: CodeMemService | RemoteService, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any], request_id: str | None,
    ) -> Any:
        """The call on ``backend`` with its idempotency key: run here (counted in flight, so
        background index steps wait), or sent to the owner."""
        if isinstance(backend, CodeMemService):
            return tool.run(backend, *args, request_id=request_id, **kwargs)
        return backend.call(tool, *args, request_id=request_id, **kwargs)

    def stop_serving(self) -> None:
        """Stop answering other processes' calls (the owner's loopback server, up to ``OWNER_POLL_S``
        to notice, then up to ``OWNER_DRAIN_S`` for the calls it runs) and the heap trimmer. ``close``
        does it first; a server's shutdown starts it at the stop signal, beside its own stop (``codemem
        serve``: uvicorn's graceful shutdown), so that closing the stores does not wait for it after.
        Once; a second call waits for the first."""
        with self._stopping:
            if self._trimmer is not None:
                self._trimmer.stop()
            server, self._server = self._server, None
            if server is None:
                return
            server.shutdown()
            server.server_close()
            still = server.drain(OWNER_DRAIN_S)
            if still:
                log.info("closing the stores under calls still running; their callers retry them on the next owner",
                         running=still)
            try:
                address = self._read_address()
                if address and address.get("pid") == os.getpid():
                    (self.state_dir / OWNER_FILE).unlink(missing_ok=True)
            except OSError:
                pass

    def close(self) -> None:
        """Stop serving, close the stores and release the lock."""
        self.stop_serving()
        self.backend.close()
        self._lock.release()

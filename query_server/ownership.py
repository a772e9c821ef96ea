"""One owner per project: the process that holds the embedded stores, and everyone else.

qdrant-edge and the embedded graph admit one process per directory. The first codemem process
that needs a project's stores takes an exclusive lock (``<state>/owner.lock``), opens them, and
serves the service methods on a loopback port written, with a random token, to
``<state>/owner.json``. Every other process (a second ``codemem mcp``, ``codemem index`` while
the MCP server runs, a Dagster run) sends its calls there. When the owner goes away, the next
caller takes the lock and becomes the owner itself.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from resources.private_files import make_private_dir
from resources.schemas.tools import IndexInput
from resources.settings import Settings

from .heap_trim import HeapTrimmer
from .methods import METHODS
from .service import CodeMemService, ToolError

log = structlog.get_logger("codemem.ownership")

OWNER_FILE = "owner.json"
LOCK_FILE = "owner.lock"
CONNECT_WAIT_S = 60.0


class OwnerLock:
    """An exclusive, non-blocking flock on the state dir's lock file (released on exit/crash)."""

    def __init__(self, state_dir: Path) -> None:
        """Prepare the lock for ``state_dir`` (nothing is locked yet)."""
        make_private_dir(state_dir)
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Release the lock."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None




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
            method = request["method"]
            input_model = METHODS[method].input
        except (ValueError, KeyError):
            self._send(400, {"error": "bad request"})
            return
        params = request.get("params") or {}
        service = self.server.service
        try:
            if method == "index":
                self._stream_index(service, IndexInput.model_validate(params))
                return
            fn = getattr(service, method)
            with service.foreground.serving_call(method):
                result = fn(input_model.model_validate(params)) if input_model else fn()
            self._send(200, {"result": result.model_dump(mode="json") if isinstance(result, BaseModel) else result})
        except ValidationError as exc:
            self._send(200, {"error": f"invalid input: {exc}"})
        except ToolError as exc:
            self._send(200, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - the owner must answer, not die
            log.exception("owner call failed", operation=method)
            self._send(200, {"error": f"{type(exc).__name__}: {exc} — see the owner's log; `codemem status` shows the stores"})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream_index(self, service: CodeMemService, request: IndexInput) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()

        def emit(obj: dict[str, Any]) -> None:
            self.wfile.write((json.dumps(obj) + "\n").encode())
            self.wfile.flush()

        try:
            report = service.index(request, progress=lambda phase, done, total: emit({"progress": [phase, done, total]}))
            emit({"result": report})
        except ToolError as exc:
            emit({"error": str(exc)})
        except Exception as exc:  # noqa: BLE001
            log.exception("owner index failed", operation="index")
            emit({"error": f"{type(exc).__name__}: {exc}"})


class _OwnerHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, service: CodeMemService, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.service = service
        self.token = token


class RemoteService:
    """The service methods of another process that owns the project's stores."""

    def __init__(self, address: dict[str, Any]) -> None:
        """Talk to the owner at ``address`` (the content of owner.json)."""
        self.port = int(address["port"])
        self.token = str(address["token"])
        self.pid = int(address.get("pid", 0))

    def _call(self, method: str, params: dict[str, Any] | None, on_line: Callable[[dict[str, Any]], None] | None = None) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        try:
            body = json.dumps({"method": method, "params": params or {}})
            conn.request("POST", "/call", body=body, headers={"X-Codemem-Token": self.token, "Content-Type": "application/json"})
            response = conn.getresponse()
            if on_line is None:
                payload = json.loads(response.read())
            else:
                payload = {}
                for raw in response:
                    line = json.loads(raw)
                    if "progress" in line:
                        on_line(line)
                    else:
                        payload = line
        finally:
            conn.close()
        if "error" in payload:
            raise ToolError(payload["error"])
        return payload.get("result")

    def __getattr__(self, method: str) -> Callable[..., Any]:
        """The owner's service method of that name (see ``CodeMemService``), validated both ways."""
        if method not in METHODS or method == "index":
            raise AttributeError(method)
        result_model = METHODS[method].result

        def call(request: BaseModel | None = None) -> Any:
            params = request.model_dump(mode="json") if request is not None else None
            result = self._call(method, params)
            return result_model.model_validate(result) if result_model is not None else result

        return call

    def index(self, request: IndexInput, progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
        """See ``CodeMemService.index`` (progress streams back from the owner)."""
        def forward(line: dict[str, Any]) -> None:
            if progress is not None:
                progress(*line["progress"])

        return self._call("index", request.model_dump(mode="json"), on_line=forward)

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
        self.backend: CodeMemService | RemoteService = self._connect()

    @property
    def is_owner(self) -> bool:
        """True when this process holds the stores."""
        return isinstance(self.backend, CodeMemService)

    def _connect(self) -> CodeMemService | RemoteService:
        deadline = time.monotonic() + CONNECT_WAIT_S
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
        threading.Thread(target=self._server.serve_forever, name="codemem-owner", daemon=True).start()
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

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a service method, taking over ownership if a remote owner has gone away."""
        try:
            return self._invoke(method, *args, **kwargs)
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            if self.is_owner:
                raise
            log.warning("owner unreachable; taking over", operation=method, error=str(exc))
            self.backend = self._connect()
            return self._invoke(method, *args, **kwargs)

    def _invoke(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The call on the backend; on the owner, counted in flight (background index steps wait)."""
        if isinstance(self.backend, CodeMemService):
            with self.backend.foreground.serving_call(method):
                return getattr(self.backend, method)(*args, **kwargs)
        return getattr(self.backend, method)(*args, **kwargs)

    def close(self) -> None:
        """Stop serving, close the stores and release the lock."""
        if self._trimmer is not None:
            self._trimmer.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            try:
                address = self._read_address()
                if address and address.get("pid") == os.getpid():
                    (self.state_dir / OWNER_FILE).unlink(missing_ok=True)
            except OSError:
                pass
        self.backend.close()
        self._lock.release()

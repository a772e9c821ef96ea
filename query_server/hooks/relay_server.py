"""The server side of the hooks' fast path (``query_server.hooks.relay``).

``codemem mcp`` and ``codemem serve`` start a ``HookRelay``: it listens on ``<state>/hooks.sock``
(0600 in the 0700 state dir) and answers each hook a hook process sends it by running the very
function the hook process would (``query_server.hooks.dispatch.run_event``) on the hook's JSON,
with the project found from the hook process's environment and directory. Only one process per
project listens: the one holding ``<state>/hooks.lock`` (released by the kernel when it dies,
and then taken by another running server within ``TAKEOVER_S``); a stale socket file left by a
killed server is replaced. Hooks are answered one at a time, in arrival order, by one thread,
which keeps its connections to the ledger, the manifest and the mentions cache open from one hook
to the next (``resources.sqlite_readonly.KeptConnections``). A hook whose project is not this
server's is refused (the hook then answers by itself). When it stops listening, the relay reads
the stores for the next session's SessionStart (``query_server.hooks.session_start.save_snapshot``).
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from pathlib import Path

# the hooks' modules are imported here, by the starting thread, not by the relay's while the
# server's other threads import theirs
from query_server.hooks import (  # noqa: F401
    post_tool_use,
    pre_tool_use,
    session_start,
    user_prompt_submit,
)
from query_server.hooks.common import Project, json_dumps, log_error, read_payload
from query_server.hooks.dispatch import run_event
from query_server.hooks.relay import ANSWERED, PROTOCOL, RELAYED_EVENTS, SOCKET_FILE
from resources.sqlite_readonly import KeptConnections

LOCK_FILE = "hooks.lock"
TAKEOVER_S = 1.0
"""How often a server that does not listen tries to take the socket over."""
POLL_S = 0.05
"""How often the listening thread checks whether it should stop (``close`` waits for it)."""
MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""Past this a request is refused (a Write's tool input carries the whole file)."""
READ_TIMEOUT_S = 2.0
REFUSED = b"!"


def answer(request: bytes, state_dir: str, kept: KeptConnections | None = None) -> bytes:
    """The reply to one hook request (``relay.request``): ``ANSWERED`` and the hook's stdout, or
    ``REFUSED`` when the request is malformed or its project's state dir is not ``state_dir``.
    ``kept``: the relay's store connections, left open for the next hook.

    A failure of the hook itself is what a hook process does with it: one line in
    ``<state>/logs/hooks.log`` and silence.
    """
    parts = request.split(b"\0", 5)
    if len(parts) != 6 or parts[0] != PROTOCOL:
        return REFUSED
    _, event_raw, project_root, claude_dir, cwd, raw = parts
    event = event_raw.decode("utf-8", "replace")
    if event not in RELAYED_EVENTS:
        return REFUSED
    environ = {name: os.fsdecode(value) for name, value in
               (("CODEMEM_PROJECT_ROOT", project_root), ("CLAUDE_PROJECT_DIR", claude_dir)) if value}
    project: Project | None = None
    try:
        payload = read_payload(raw)
        project = Project(payload, environ=environ, cwd=os.fsdecode(cwd) or None)
        if project.state_dir != state_dir:
            return REFUSED
        project.kept = kept
        output = run_event(event, project, payload)
    except Exception as exc:  # noqa: BLE001 - as dispatch.main: a hook never blocks Claude Code
        if project is None or project.state_dir != state_dir:
            return REFUSED  # not known to be this project's: the hook process decides
        log_error(project, event, exc)
        output = None
    return ANSWERED + (json_dumps(output).encode() if output is not None else b"")


class HookRelay:
    """Answers the project's hooks on ``<state>/hooks.sock`` while this process runs."""

    def __init__(self, state_dir: Path, project_root: Path | None = None, manifest: object | None = None) -> None:
        """Nothing listens until ``start``; ``project_root`` defaults to the state dir's parent;
        ``manifest``: what the hooks read of the index when it is not ``index.db`` (server mode:
        ``resources.manifest.HookManifestReader``)."""
        self.manifest = manifest
        self.state_dir = os.path.realpath(state_dir)
        self.project_root = os.path.realpath(project_root if project_root is not None else os.path.dirname(self.state_dir))
        self.socket_path = os.path.join(self.state_dir, SOCKET_FILE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._listener: socket.socket | None = None
        self._inode: int | None = None

    @property
    def listening(self) -> bool:
        """True while this process answers the project's hooks."""
        return self._listener is not None

    def start(self) -> None:
        """Listen now when no other process does (else keep trying in the background)."""
        if self._thread is not None:
            return
        self._try_listen()
        self._thread = threading.Thread(target=self._run, name="codemem-hook-relay", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the relay's thread to stop at its next poll, without waiting (``close`` waits for it):
        a server's shutdown asks at the stop signal, so the wait is over by the time it closes."""
        self._stop.set()

    def close(self) -> None:
        """Stop answering: the socket file goes (when it is still this process's), the lock is
        released, and the next session's SessionStart is read ahead (``session_start.read_ahead``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(POLL_S * 4)
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                if os.stat(self.socket_path).st_ino == self._inode:
                    os.unlink(self.socket_path)
            except OSError:
                pass
            listener.close()
            session_start.read_ahead(self.project_root, self.state_dir)
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _try_listen(self) -> bool:
        if not os.path.isdir(self.state_dir):
            return False
        fd = os.open(os.path.join(self.state_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        try:
            try:
                os.unlink(self.socket_path)  # a killed server's; the lock says no live one listens
            except FileNotFoundError:
                pass
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(self.socket_path)
                # 0600: only this user's hooks connect (the state dir is 0700 already; not through
                # the umask, which is the whole process's while other threads create files)
                os.chmod(self.socket_path, 0o600)
                listener.listen(16)
                listener.settimeout(POLL_S)
            except OSError:
                listener.close()
                raise
        except OSError:  # a path too long for a socket, a read-only state dir: hooks answer by themselves
            os.close(fd)
            return False
        self._lock_fd = fd
        self._inode = os.stat(self.socket_path).st_ino
        self._listener = listener
        return True

    def _run(self) -> None:
        kept = KeptConnections()  # the ledger's, the manifest's and the mentions cache's, from hook to hook
        kept.manifest = self.manifest
        try:
            self._answer_until_stopped(kept)
        finally:
            kept.close()

    def _answer_until_stopped(self, kept: KeptConnections) -> None:
        while not self._stop.is_set():
            listener = self._listener
            if listener is None:
                if self._stop.wait(TAKEOVER_S) or not self._try_listen():
                    continue
                listener = self._listener
                assert listener is not None
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                self._serve(conn, kept)

    def _serve(self, conn: socket.socket, kept: KeptConnections) -> None:
        try:
            conn.settimeout(READ_TIMEOUT_S)
            chunks, size = [], 0
            while chunk := conn.recv(1 << 20):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_REQUEST_BYTES:
                    conn.sendall(REFUSED)
                    return
            conn.sendall(answer(b"".join(chunks), self.state_dir, kept))
        except OSError:
            pass  # the hook gave up (its timeout): it answers by itself

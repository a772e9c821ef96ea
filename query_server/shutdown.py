"""Ending a server process (``codemem mcp``, ``codemem serve``) promptly and cleanly.

Claude Code ends an MCP server with SIGINT, then SIGTERM 0.1 s later, then SIGKILL 0.4 s after
that; a client that is done may also just close the server's stdin. Either way the process has
half a second: it stops serving, closes the project (the stores: the ledger's transactions are
committed before a call is acknowledged, so closing loses nothing; the embedded graph server is
stopped when this process started it and no other client uses it), ends its own child processes
and exits within ``BUDGET_S``.

The first stop signal starts the shutdown and a deadline: if closing has not finished by then
(a background index step that does not stop in time), the process ends its children and exits
anyway, before the SIGKILL would land; what it leaves (a graph server) is what a killed owner
leaves, and the next owner reuses or cleans it up (``resources.graph.falkor_server``). Further
signals do not cut the close short: Claude Code sends SIGTERM 0.1 s after SIGINT as a matter of
course, and the deadline already bounds the exit.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import structlog

from query_server import mcp_front

log = structlog.get_logger("codemem.shutdown")

BUDGET_S = 0.3
"""From the first stop signal (or the end of the stream) to the exit: well before Claude Code's
SIGKILL, 0.5 s after its SIGINT."""
CLOSE_BUDGET_S = 0.18
"""The part of ``BUDGET_S`` that closing the project may take before the deadline acts."""
GRAPH_STOP_WAIT_S = 0.05
CHILD_WAIT_S = 0.03
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Shutdown:
    """The stop signals of a server process, its deadline and its exit.

    Attributes:
        requested: Set by the first stop signal (or by ``begin``): the server stops serving.
        signum: The first stop signal, None when the stream ended.
    """

    def __init__(self, budget_s: float = CLOSE_BUDGET_S) -> None:
        """Nothing installed yet (see ``install``)."""
        self.budget_s = budget_s
        self.requested = threading.Event()
        self.signum: int | None = None
        self._began: float | None = None
        self._lock = threading.Lock()
        self._on_request: list[Callable[[], None]] = []
        self._on_deadline: list[Callable[[], None]] = []

    def install(self) -> None:
        """Handle SIGINT, SIGTERM and SIGHUP from now on (call it from the main thread)."""
        for sig in STOP_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # nohup: keep ignoring it
            signal.signal(sig, self.handle)

    def on_request(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the signal handler) when the shutdown is requested."""
        self._on_request.append(callback)

    def on_deadline(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the deadline's thread) when closing overran its budget, just
        before the process exits."""
        self._on_deadline.append(callback)

    def handle(self, signum: int, frame: object = None) -> None:
        """A stop signal: the first one starts the shutdown; later ones change nothing."""
        if self.signum is None:
            self.signum = signum
        self.begin()

    def begin(self) -> None:
        """Start the shutdown (once): stop serving, and exit by the deadline whatever happens."""
        with self._lock:
            if self._began is not None:
                return
            self._began = time.monotonic()
        self.requested.set()
        threading.Thread(target=self._deadline, name="codemem-shutdown-deadline", daemon=True).start()
        for callback in self._on_request:
            callback()

    @property
    def exit_code(self) -> int:
        """128 + the signal's number after a stop signal, 0 after the end of the stream."""
        return 128 + self.signum if self.signum is not None else 0

    def _deadline(self) -> None:
        assert self._began is not None
        time.sleep(max(0.0, self._began + self.budget_s - time.monotonic()))
        log.warning("closing did not finish within the shutdown budget; exiting now", budget_s=self.budget_s)
        for callback in self._on_deadline:
            try:
                callback()
            except Exception:  # noqa: BLE001 - the exit must happen
                log.exception("shutdown step failed")
        self.exit()

    def exit(self) -> NoReturn:
        """End this process's child processes and exit now (threads still blocked on stdin or on
        a call nobody waits for are not waited for)."""
        children = end_children()
        if self._began is not None:
            log.info("shut down", operation="shutdown", signal=self.signum, children_ended=len(children),
                     ms=round((time.monotonic() - self._began) * 1000))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        mcp_front.drain()  # `codemem mcp`: the server's last answers reach the client first
        logging.shutdown()
        os._exit(self.exit_code)


def end_children() -> list[int]:
    """Terminate (then kill) every live descendant of this process: index workers, their
    forkserver, a git command. Returns their pids."""
    import psutil  # here: a server's start, not its end, is what a user waits for

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            child.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(children, timeout=CHILD_WAIT_S)
    for child in alive:
        try:
            child.kill()
        except psutil.Error:
            pass
    return [child.pid for child in children]


GRACEFUL_SHUTDOWN_S = 0.1
"""How long ``codemem serve`` lets requests in flight finish after a stop signal (uvicorn's
``timeout_graceful_shutdown``); a streamed MCP session would otherwise hold the exit open."""


def serve_http(config: Any, shutdown: Shutdown) -> None:
    """Run uvicorn with ``config`` until a stop signal, which also starts ``shutdown``.

    uvicorn takes SIGINT and SIGTERM while it serves (its ``handle_exit``); the first one starts
    the shutdown's deadline here too, and uvicorn re-raises the signals it caught after it
    stopped, which the shutdown's handlers (installed before) take without another exception.
    """
    import asyncio
    import contextlib
    import socket

    import uvicorn

    class StoppingServer(uvicorn.Server):
        """uvicorn that notices a stop signal at once: a signal another thread receives wakes the
        event loop (a wakeup fd the loop watches), so the main thread runs the handler now, and
        the main loop waits on the request instead of ticking every 0.1 s before it looks."""

        async def main_loop(self) -> None:
            loop = asyncio.get_running_loop()
            self._stop_requested = asyncio.Event()
            reader, writer = socket.socketpair()
            reader.setblocking(False)
            writer.setblocking(False)
            previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
            loop.add_reader(reader.fileno(), lambda: reader.recv(512))
            try:
                counter = 0
                while not await self.on_tick(counter):
                    counter = (counter + 1) % 864000
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop_requested.wait(), 0.1)
            finally:
                loop.remove_reader(reader.fileno())
                signal.set_wakeup_fd(previous)
                reader.close()
                writer.close()

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            shutdown.handle(sig, frame)
            stop_requested = getattr(self, "_stop_requested", None)
            if stop_requested is not None:
                stop_requested.set()

    StoppingServer(config).run()


def stop_graph_server(db_dir: Path | None) -> list[int]:
    """SIGTERM the embedded graph server serving ``db_dir`` (named by its registry record; on
    SIGTERM redis flushes its append-only file and exits) and wait for it briefly; the pids signalled.

    The deadline's last resort when closing the stores overran: the graph server is not this
    process's child (falkordblite daemonizes it), so nothing else would end it. Only a process
    that holds the project's owner lock calls this (the owner, the one process that uses that
    server, or ``codemem ui`` once its runs stopped and while it holds the lock).
    """
    if db_dir is None:
        return []
    import json

    import psutil

    from resources.graph.falkor_server import DB_FILENAME, read_pid, server_process

    try:
        record = json.loads((db_dir / f"{DB_FILENAME}.settings").read_text())
        proc = server_process(read_pid(Path(record["pidfile"])), str(record["unixsocket"]))
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if proc is None:
        return []
    try:
        proc.terminate()
    except psutil.Error:
        return []
    psutil.wait_procs([proc], timeout=GRAPH_STOP_WAIT_S)
    return [proc.pid]

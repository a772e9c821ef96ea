"""Interactive calls first: background index jobs pause while tool calls are being served.

A reindex started by a tool call (or the file watcher) runs in a thread of the process that answers
the searches. On a small machine its parsing, embedding and graph writes take the CPU (and the GIL)
from the calls arriving meanwhile: in ``bench.load`` the second in which a 5-file reindex ran had
every call of that second several times slower. The job's progress callback, which runs between
files and between embedding batches, calls :meth:`ForegroundGate.pause_for_foreground`: while a
call is in flight it waits, a bounded time per step, so a job under steady traffic is slowed but
never starved.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_PAUSE_S = 0.25
"""Longest a background step waits for calls in flight (then it proceeds anyway)."""
POLL_S = 0.005
"""How often a waiting step looks again."""


class ForegroundGate:
    """Counts the tool calls in flight; background work asks it whether to wait."""

    def __init__(self, max_pause_s: float = MAX_PAUSE_S, poll_s: float = POLL_S) -> None:
        """A gate with no call in flight.

        Args:
            max_pause_s: The most one ``pause_for_foreground`` waits.
            poll_s: The interval at which a waiting step re-checks.
        """
        self.max_pause_s = max_pause_s
        self.poll_s = poll_s
        self._in_flight = 0
        self._lock = threading.Lock()
        self.paused_s = 0.0
        """Total time background steps have waited (reported by index jobs and benchmarks)."""
        self.activity = 0
        """Calls served plus background steps seen so far: grows while the process works
        (the heap trimmer trims only after some)."""

    @property
    def in_flight(self) -> int:
        """Tool calls being served now."""
        return self._in_flight

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Mark one tool call in flight for the duration of the block."""
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self.activity += 1

    def pause_for_foreground(self) -> float:
        """Wait while calls are in flight, at most ``max_pause_s``; returns the seconds waited."""
        self.activity += 1  # a background step (racy increments only make a trim come later)
        if not self._in_flight:
            return 0.0
        started = time.monotonic()
        deadline = started + self.max_pause_s
        while self._in_flight and time.monotonic() < deadline:
            time.sleep(self.poll_s)
        waited = time.monotonic() - started
        self.paused_s += waited
        return waited

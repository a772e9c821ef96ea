"""Give the heap's free memory back to the system once the server goes quiet (glibc only).

A long-running owner process serves calls on a pool of worker threads; glibc gives each thread
that allocates under contention an arena of its own (up to 8 per core) and keeps what those
arenas free for reuse instead of returning it. Under ``bench.load`` the server's resident memory
stepped up by 17 to 57 MB in bursts (100 sessions opening, a reindex, a peak of concurrent calls)
and stayed there, though ``malloc_trim(0)`` called from a debugger right after gave all of it
back: freed memory kept by the allocator, not live objects. :class:`HeapTrimmer` calls
``malloc_trim(0)`` from a background thread when there has been work since its last trim and no
tool call is in flight, at most once per interval, so resident memory follows the working set
and a burst does not leave its high-water mark behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable

import structlog

from query_server.foreground import ForegroundGate

log = structlog.get_logger(__name__)

DEFAULT_INTERVAL_S = 10.0
"""Seconds between checks: a burst's memory is back with the system this long after it ends."""


def load_malloc_trim() -> Callable[[int], int] | None:
    """``malloc_trim`` of the C library this process runs on, or None where there is none (musl,
    macOS, Windows). ctypes releases the GIL for the call: other threads run while it works."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """A daemon thread that trims the heap after activity, while nothing is being served.

    Args:
        gate: The owner's foreground gate: its ``activity`` grows with the work done (calls
            served, background steps) and its ``in_flight`` counts the calls being served (a trim
            waits for none).
        interval_s: Seconds between checks; 0 or less disables the trimmer.
        trim: The trim function (``malloc_trim``); found in the C library when not given.
    """

    def __init__(self, gate: ForegroundGate, interval_s: float = DEFAULT_INTERVAL_S,
                 trim: Callable[[int], int] | None = None) -> None:
        self._gate = gate
        self.interval_s = interval_s
        self._trim = trim if trim is not None else load_malloc_trim()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = gate.activity
        self.trims = 0
        """Trims done so far."""
        self.trim_seconds = 0.0
        """Time spent in them."""

    @property
    def enabled(self) -> bool:
        """True when this platform has a trim function and the interval is positive."""
        return self._trim is not None and self.interval_s > 0

    def start(self) -> None:
        """Start the thread (nothing happens where the trimmer is disabled)."""
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="codemem-heap-trim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def trim_if_due(self) -> bool:
        """One check: trim when there was work since the last trim and no call is in flight.

        Returns:
            True when it trimmed.
        """
        if self._trim is None:
            return False
        current = self._gate.activity
        if current == self._seen or self._gate.in_flight:
            return False
        started = time.perf_counter()
        self._trim(0)
        took = time.perf_counter() - started
        self.trim_seconds += took
        self.trims += 1
        self._seen = current
        log.info("heap trimmed", operation="heap_trim", ms=round(1000 * took, 2), trims=self.trims)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.trim_if_due()
            except Exception:  # noqa: BLE001 - a failed trim must not end the server
                log.exception("heap trim failed", operation="heap_trim")
                return

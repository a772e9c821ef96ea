"""Client reads versus acknowledged writes on one embedded FalkorDB graph.

FalkorDB runs reads of a graph side by side but applies a write under the graph's write lock,
which waits for every read then running: a write sent during a 10 s ``graph_query`` waits up to
10 s. The writes a caller waits for (memory projections, see ``resources.memory.projection``)
therefore ask :meth:`ReadGate.write_unless_reading` first and, while a client read runs, leave
the graph to the outbox instead of waiting. A read that starts while such a write runs waits for
it (milliseconds), so a write let through never queues behind a read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadGate:
    """Counts client reads and short writes of one graph (thread-safe)."""

    def __init__(self) -> None:
        """No read or write in progress."""
        self._changed = threading.Condition()
        self._reads = 0
        self._writers: list[int] = []
        """Threads in a gated write (one entry per write)."""

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Around a client read: waits for a gated write in progress (not one of this thread's)."""
        me = threading.get_ident()
        with self._changed:
            self._changed.wait_for(lambda: all(writer == me for writer in self._writers))
            self._reads += 1
        try:
            yield
        finally:
            with self._changed:
                self._reads -= 1
                self._changed.notify_all()

    @contextmanager
    def write_unless_reading(self) -> Iterator[bool]:
        """Around a write that must not wait for a read: yields False (write nothing then) while a
        client read runs, else True, and reads wait until the block ends."""
        me = threading.get_ident()
        with self._changed:
            free = self._reads == 0
            if free:
                self._writers.append(me)
        try:
            yield free
        finally:
            if free:
                with self._changed:
                    self._writers.remove(me)
                    self._changed.notify_all()

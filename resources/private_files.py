"""State only its owner can read: folders 0700, files 0600, whatever the process umask says.

The memory ledger, the index manifest and the caches hold a project's memories and code; under
the usual umask (022) they were created 0644, readable by every local user. ``mkdir`` and
``open`` apply the umask to the mode they are given, so each helper sets the mode explicitly
afterwards. SQLite creates a database's ``-wal`` and ``-shm`` files with the database file's own
permissions, so a database created here through ``make_private_file`` stays private whole.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) and make it 0700; an existing folder is tightened.

    Use it for folders codemem owns (the state directory, the global memory directory, a backup).
    """
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def make_private_file(path: Path) -> Path:
    """Create ``path`` empty when missing and make it 0600 (an existing file keeps its content and
    is tightened). A missing parent folder is created 0700; an existing one is left as it is."""
    if not path.parent.exists():
        make_private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return path

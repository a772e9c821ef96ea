"""A read-only SQLite connection for processes that must start at the interpreter's floor.

The Claude Code hooks read the ledger and the manifest on every tool call: they open the files
read-only with a short busy timeout instead of loading ``Ledger`` or ``Manifest``. Standard
library only; ``sqlite3`` is imported on first use (importing it costs ~2 ms, and a hook that
reads nothing should not pay it).
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    import sqlite3


def connect_read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection | None:
    """An autocommit read-only connection to ``path``, or None when the database does not exist.

    Args:
        path: The SQLite file.
        busy_timeout_s: How long a read waits for a writer's lock before failing.
    """
    if not path.is_file():
        return None
    import sqlite3

    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s, isolation_level=None)
    conn.execute("PRAGMA query_only=1")
    return conn


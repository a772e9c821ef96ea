"""A read-only SQLite connection for processes that must start at the interpreter's floor.

The Claude Code hooks read the ledger and the manifest on every tool call: they open the files
read-only with a short busy timeout instead of loading ``Ledger`` or ``Manifest``. Standard
library only; ``sqlite3`` is imported on first use (importing it costs ~2 ms, and a hook that
reads nothing should not pay it), and ``pathlib`` not at all (with what it imports, ~10 ms).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    import sqlite3


def connect_read_only(path: str | os.PathLike[str], busy_timeout_s: float) -> sqlite3.Connection | None:
    """An autocommit read-only connection to ``path``, or None when the database does not exist.

    Args:
        path: The SQLite file.
        busy_timeout_s: How long a read waits for a writer's lock before failing.
    """
    if not os.path.isfile(path):
        return None
    import sqlite3

    conn = sqlite3.connect(f"{file_uri(path)}?mode=ro", uri=True, timeout=busy_timeout_s, isolation_level=None)
    conn.execute("PRAGMA query_only=1")
    return conn


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")
"""The bytes ``urllib.parse.quote_from_bytes`` leaves as they are (its safe ``/`` included)."""


def file_uri(path: str | os.PathLike[str]) -> str:
    """The ``file:`` URI of ``path`` (relative to the working directory), as ``Path.as_uri`` writes it on POSIX:
    ``file://`` and the path's bytes, percent-encoded as ``urllib.parse.quote_from_bytes`` does."""
    if os.sep != "/":  # drive letters and backslashes: pathlib knows them
        from pathlib import Path

        return Path(path).absolute().as_uri()
    text = os.fspath(path)
    absolute = text if os.path.isabs(text) else os.path.join(os.getcwd(), text)
    return "file://" + "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(absolute))

"""A read-only SQLite connection for processes that must start at the interpreter's floor.

The Claude Code hooks read the ledger and the manifest on every tool call: they open the files
read-only with a short busy timeout instead of loading ``Ledger`` or ``Manifest``. Standard
library only; ``sqlite3`` is imported on first use (importing it costs ~2 ms, and a hook that
reads nothing should not pay it), and ``pathlib`` not at all (with what it imports, ~10 ms).
"""

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    import sqlite3
    from typing import Self


def connect_read_only(path: str | os.PathLike[str], busy_timeout_s: float) -> "sqlite3.Connection | None":
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


class ReadOnlyDatabase:
    """A read-only connection to one SQLite file; subclasses add the queries (``LedgerReader``,
    ``ManifestReader``)."""

    def __init__(self, conn: "sqlite3.Connection", *, owned: bool = True) -> None:
        """Wrap an open (read-only, autocommit) connection (``owned``: ``close`` closes it)."""
        self.conn = conn
        self.owned = owned

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], busy_timeout_s: float, kept: "KeptConnections | None" = None
    ) -> "Self | None":
        """The file at ``path`` opened read-only, or None when it does not exist (nothing written
        there yet); with ``kept``, the long-lived process's connection to it, which ``close`` leaves open."""
        if kept is not None:
            conn = kept.connect(os.fspath(path), busy_timeout_s)
            return None if conn is None else cls(conn, owned=False)
        conn = connect_read_only(path, busy_timeout_s)
        return None if conn is None else cls(conn)

    def close(self) -> None:
        """Close the connection (unless it is kept open for the next hook)."""
        if self.owned:
            self.conn.close()


class KeptConnections:
    """Connections a long-lived process keeps open from one hook to the next (the hook relay of
    ``codemem mcp``/``serve`` answers hooks one at a time, in one thread): opening a file and reading
    its schema cost a hook more than its queries. Keyed by path and mode; a path that names another
    file now (a restore replaced the ledger) or none gets a new connection or None. Use from the
    thread that created it (``sqlite3``'s rule), ``close`` included."""

    def __init__(self) -> None:
        """No connection is open until ``connect``."""
        self._kept: dict[tuple[str, bool], tuple[tuple[int, int], sqlite3.Connection]] = {}
        self.manifest: object | None = None
        """What the hooks read of the index instead of ``index.db`` when the manifest is not a file
        of the state dir (server mode: in PostgreSQL): an object with ``ManifestReader``'s queries and
        ``available()``, set by the process that keeps these connections."""

    def connect(self, path: str, busy_timeout_s: float, *, read_only: bool = True) -> "sqlite3.Connection | None":
        """The kept connection to ``path`` (read-only, or read-write for a cache the hooks keep),
        opened now if there is none for this file; None when the file does not exist."""
        key = (path, read_only)
        try:
            stat = os.stat(path)
        except OSError:
            self._drop(key)
            return None
        identity = (stat.st_dev, stat.st_ino)
        kept = self._kept.get(key)
        if kept is not None and kept[0] == identity:
            return kept[1]
        self._drop(key)
        if read_only:
            conn = connect_read_only(path, busy_timeout_s)
        else:
            import sqlite3

            conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
        if conn is not None:
            self._kept[key] = (identity, conn)
        return conn

    def holds(self, conn: "sqlite3.Connection") -> bool:
        """True when ``conn`` is one of the kept connections (its user must not close it)."""
        return any(kept is conn for _, kept in self._kept.values())

    def discard(self, conn: "sqlite3.Connection") -> None:
        """Close ``conn`` and forget it (after an error that may have left it unusable)."""
        for key, (_, kept) in list(self._kept.items()):
            if kept is conn:
                self._drop(key)

    def close(self) -> None:
        """Close every kept connection."""
        for key in list(self._kept):
            self._drop(key)

    def _drop(self, key: tuple[str, bool]) -> None:
        kept = self._kept.pop(key, None)
        if kept is not None:
            kept[1].close()


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

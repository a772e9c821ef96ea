"""Read-only queries on the index manifest, for processes that must not load the ``Manifest``.

The Claude Code hooks read ``index.db`` through this module (standard library only) to report
index freshness and to find the symbols of a file. The SQL follows the schema
``resources.manifest`` writes (the ``files`` and ``symbols`` tables). In server mode the manifest
is in PostgreSQL, which a hook process cannot read: the server's hook relay answers from its own
connection (``KeptConnections.manifest``), and a hook run alone finds ``SERVER_MARKER`` instead.
"""

import os

from resources.sqlite_readonly import KeptConnections, ReadOnlyDatabase

SERVER_MARKER = "index-in-postgres"
"""A file of the state dir while the project's manifest is in PostgreSQL (``resources.manifest.open_manifest``)."""


def in_postgres(state_dir: str) -> bool:
    """True when the project's manifest is in PostgreSQL (server mode), not in ``index.db``."""
    return os.path.exists(os.path.join(state_dir, SERVER_MARKER))


class ManifestReader(ReadOnlyDatabase):
    """A read-only connection to a manifest and the queries the hooks run on it (``open`` gives None
    when the file does not exist yet)."""

    @classmethod
    def open(cls, path: "str | os.PathLike[str]", busy_timeout_s: float, kept: "KeptConnections | None" = None):  # type: ignore[override]
        """As ``ReadOnlyDatabase.open``; in a process whose ``kept`` has the manifest of server mode,
        that one (the same queries)."""
        if kept is not None and kept.manifest is not None:
            return kept.manifest if kept.manifest.available() else None  # type: ignore[attr-defined]
        return super().open(path, busy_timeout_s, kept)

    def file_count(self) -> int:
        """How many files are indexed."""
        return self.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]

    def recently_indexed(self, limit: int) -> list[tuple[str, int, str]]:
        """(path, mtime_ns, indexed_at) of the ``limit`` most recently indexed files, newest first.

        A file's row is replaced when it is (re)indexed, so the highest rowids are the newest.
        """
        return self.conn.execute(
            "SELECT path, mtime_ns, indexed_at FROM files ORDER BY rowid DESC LIMIT ?", (limit,)
        ).fetchall()

    def qualified_names(self, path: str, limit: int) -> list[str]:
        """Up to ``limit`` qualified names of the symbols of the repo-relative file ``path``: their
        own names first, then their path-based names of earlier releases, which anchors may still
        use (a manifest from before that column: their own names alone)."""
        import sqlite3

        try:
            rows = self.conn.execute(
                "SELECT qualified_name, path_qualified_name FROM symbols WHERE path = ? LIMIT ?", (path, limit)
            ).fetchall()
        except sqlite3.OperationalError:
            rows = self.conn.execute("SELECT qualified_name, '' FROM symbols WHERE path = ? LIMIT ?", (path, limit)).fetchall()
        names = dict.fromkeys(row[0] for row in rows) | dict.fromkeys(row[1] for row in rows if row[1])
        return list(names)[:limit]

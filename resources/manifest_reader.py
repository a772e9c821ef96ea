"""Read-only queries on the index manifest, for processes that must not load the ``Manifest``.

The Claude Code hooks read ``index.db`` through this module (standard library only) to report
index freshness and to find the symbols of a file. The SQL follows the schema
``resources.manifest`` writes (the ``files`` and ``symbols`` tables).
"""

from resources.sqlite_readonly import ReadOnlyDatabase


class ManifestReader(ReadOnlyDatabase):
    """A read-only connection to a manifest and the queries the hooks run on it (``open`` gives None
    when the file does not exist yet)."""

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

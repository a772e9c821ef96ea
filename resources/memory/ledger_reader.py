"""Read-only queries on a memory ledger file, for processes that must not load the ``Ledger``.

The Claude Code hooks (``query_server.hooks``) answer within milliseconds on every tool call:
they read ``memory.db`` (in server mode its copy, ``SERVER_COPY_FILE``) through this module,
which imports only the standard library. The SQL
follows the schema ``resources.memory.ledger`` writes (the ``memories``, ``audit`` and
``anchor_state`` tables); ``anchor_state`` may be missing from an older file, and then reads as
empty. Rows are plain tuples, in the column order each method names.
"""

from resources.sqlite_readonly import ReadOnlyDatabase

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    import sqlite3

LEDGER_FILE = "memory.db"
"""The project's ledger in embedded mode."""
SERVER_COPY_FILE = "memory-server-copy.db"
"""In server mode (the ledger in PostgreSQL) the SQLite copy of it the query server keeps for the
hooks (``Ledger.follow``); absent in embedded mode."""


def ledger_file(state_dir: str) -> str:
    """The ledger file the hooks read in ``state_dir``: the server mode copy when there is one, else
    the embedded ledger."""
    import os

    copy = os.path.join(state_dir, SERVER_COPY_FILE)
    return copy if os.path.isfile(copy) else os.path.join(state_dir, LEDGER_FILE)


ROWS_PER_QUERY = 500
"""Ids per ``IN (…)`` list (SQLite's default limit of bound parameters is 999)."""
_ACTIVE_ROW = "SELECT id, memory_type, content, metadata, importance_score FROM memories"
_STATE_ROW = "SELECT id, memory_type, content, metadata, deleted FROM memories"


class LedgerReader(ReadOnlyDatabase):
    """A read-only connection to a ledger and the queries the hooks run on it (``open`` gives None
    when the file does not exist yet)."""

    def snapshot(self) -> "_Snapshot":
        """One read transaction (``with reader.snapshot(): …``): every query inside sees the same
        state of the ledger."""
        return _Snapshot(self.conn)

    # -- counts and changes ------------------------------------------------------------------------

    def counts(self) -> list[tuple[str, int, int]]:
        """(memory type, deleted flag, number of memories) per type and flag."""
        return self.conn.execute(
            "SELECT memory_type, deleted, COUNT(*) FROM memories GROUP BY memory_type, deleted"
        ).fetchall()

    def change_counts(self, since: str) -> tuple[int, int, int]:
        """(created, updated, deleted) memories among those changed after ``since`` (ISO time)."""
        return self.conn.execute(
            "SELECT COALESCE(SUM(created_at > ? AND deleted = 0), 0), COALESCE(SUM(created_at <= ? AND deleted = 0), 0), "
            "COALESCE(SUM(deleted), 0) FROM memories WHERE updated_at > ?",
            (since, since, since),
        ).fetchone()

    def changed(self, since: str, limit: int) -> list[tuple[str, str, str, str, str]]:
        """(id, type, content, metadata, created_at) of live memories changed after ``since``:
        session memories first, then the most recently updated."""
        return self.conn.execute(
            "SELECT id, memory_type, content, metadata, created_at FROM memories WHERE updated_at > ? AND deleted = 0 "
            "ORDER BY memory_type = 'session' DESC, updated_at DESC LIMIT ?",
            (since, limit),
        ).fetchall()

    def recorded_since(self, since: str) -> int:
        """How many memories other than session summaries were added or changed after ``since`` (ISO time)."""
        return self.conn.execute(
            "SELECT COUNT(*) FROM memories WHERE updated_at > ? AND memory_type != 'session'", (since,)
        ).fetchone()[0]

    def last_session_created_at(self) -> str | None:
        """When the newest session memory was created (None without one)."""
        row = self.conn.execute("SELECT MAX(created_at) FROM memories WHERE memory_type = 'session'").fetchone()
        return row[0] if row else None

    # -- anchors -----------------------------------------------------------------------------------

    def stale(self, limit: int) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(number of live stale memories, up to ``limit`` of them as (id, type, content, metadata),
        most important first); none when the ledger has no ``anchor_state`` table."""
        import sqlite3

        try:
            total = self.conn.execute(
                "SELECT COUNT(DISTINCT a.memory_id) FROM anchor_state a JOIN memories m ON m.id = a.memory_id "
                "WHERE a.stale = 1 AND m.deleted = 0"
            ).fetchone()[0]
            rows = self.conn.execute(
                "SELECT m.id, m.memory_type, m.content, m.metadata FROM memories m WHERE m.deleted = 0 AND m.id IN "
                "(SELECT DISTINCT memory_id FROM anchor_state WHERE stale = 1) ORDER BY m.importance_score DESC, "
                "m.updated_at DESC LIMIT ?",
                (limit,),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return 0, []
            raise
        return total, rows

    def anchored(self, qualified_names: list[str]) -> tuple[set[str], set[str]]:
        """(memories anchored to any of ``qualified_names``, the stale ones among them)."""
        import sqlite3

        marks = ",".join("?" * len(qualified_names))
        try:
            rows = self.conn.execute(
                f"SELECT memory_id, MAX(stale) FROM anchor_state WHERE qualified_name IN ({marks}) GROUP BY memory_id",
                list(qualified_names),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return set(), set()
            raise
        return {row[0] for row in rows}, {row[0] for row in rows if row[1]}

    # -- memories about a file ---------------------------------------------------------------------

    def active(self, ids: list[str]) -> list[tuple[str, str, str, str, float]]:
        """(id, type, content, metadata, importance) of the live, non-session memories among ``ids``."""
        rows: list[tuple[str, str, str, str, float]] = []
        for start in range(0, len(ids), ROWS_PER_QUERY):
            chunk = list(ids[start : start + ROWS_PER_QUERY])
            rows += self.conn.execute(
                f"{_ACTIVE_ROW} WHERE deleted = 0 AND memory_type != 'session' AND id IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        return rows

    def mentioning(self, path: str, module: str, anchored: set[str]) -> list[tuple[str, str, str, str, float]]:
        """Candidate memories about the repo-relative file ``path`` (dotted module ``module``), as
        :meth:`active` rows: those whose text names the path or module, whose ``file_path`` is the
        file or a directory above it, and the ``anchored`` ids. A scan of the ledger's text (up to
        500 candidates, most important first) — correct, but it reads every memory."""
        conditions = ["instr(content, ?)", "instr(metadata, ?)", "instr(metadata, ?)"]
        params = [path, path, f"{module}."]
        if "." in module:  # a dotted module name is specific enough to look for in the text too
            conditions += ["instr(content, ?)", "instr(metadata, ?)"]
            params += [module, module]
        for cut in (i for i, ch in enumerate(path) if ch == "/"):  # a component's file_path may be a directory
            conditions += ["instr(metadata, ?)", "instr(metadata, ?)"]
            params += [f'"file_path": "{path[:cut]}"', f'"file_path": "{path[: cut + 1]}"']
        rows = self.conn.execute(
            f"{_ACTIVE_ROW} WHERE deleted = 0 AND memory_type != 'session' AND ({' OR '.join(conditions)}) "
            "ORDER BY importance_score DESC, updated_at DESC LIMIT 500",
            params,
        ).fetchall()
        missing = list(anchored - {row[0] for row in rows})
        if missing:
            rows += self.active(missing)
        return rows

    # -- decisions not yet tied to a commit (the git post-commit hook) -----------------------------

    def untied_decisions(self, since: str | None, limit: int) -> list[str]:
        """Ids of live design memories in the decisions namespace (the default of design memories)
        whose metadata names no commit, created after ``since`` (ISO time in the ledger's UTC form;
        None: any time)."""
        untied = " AND ".join(f"json_extract(metadata, '$.{key}') IS NULL" for key in ("commit_sha", "commit", "git_commit"))
        return [row[0] for row in self.conn.execute(
            f"SELECT id FROM memories WHERE deleted = 0 AND memory_type = 'design' AND {untied} "
            "AND coalesce(json_extract(metadata, '$.namespace'), 'decisions') = 'decisions' AND created_at > ? "
            "ORDER BY created_at LIMIT ?",
            (since or "", limit),
        )]

    # -- the audit, for caches kept in step with the ledger ----------------------------------------

    def last_audit_seq(self) -> int:
        """The sequence number of the latest audit row (0 for an empty audit): it grows with
        every create, update, delete, merge and cleanup."""
        return self.conn.execute("SELECT COALESCE(MAX(seq), 0) FROM audit").fetchone()[0]

    def audited_since(self, seq: int, limit: int) -> list[str]:
        """Up to ``limit`` distinct ids of the memories the audit rows after ``seq`` are about."""
        return [row[0] for row in self.conn.execute(
            "SELECT DISTINCT memory_id FROM audit WHERE seq > ? LIMIT ?", (seq, limit)
        )]

    def states(self, ids: list[str]) -> list[tuple[str, str, str, str, int]]:
        """(id, type, content, metadata, deleted) of the memories among ``ids`` that still have a row."""
        return self.conn.execute(f"{_STATE_ROW} WHERE id IN ({','.join('?' * len(ids))})", list(ids)).fetchall()

    def all_states(self) -> "sqlite3.Cursor":
        """Every memory as (id, type, content, metadata, deleted), as a cursor to fetch in batches."""
        return self.conn.execute(_STATE_ROW)


class _Snapshot:
    """``BEGIN`` on entry, ``COMMIT`` on exit, whatever happened (reads only: nothing to roll back).
    A class rather than ``contextlib.contextmanager``: importing contextlib costs a hook time."""

    def __init__(self, conn: "sqlite3.Connection") -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN")

    def __exit__(self, *exc_info: object) -> None:
        self.conn.execute("COMMIT")

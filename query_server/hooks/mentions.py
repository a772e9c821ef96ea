"""The mentions cache behind PostToolUse: which memories name a file, in one indexed lookup.

``<state>/hooks/mentions.db`` maps the paths, directories, modules and anchors a memory names to
the memory ("p:src/a.py", "fp:src", "mod:src.a", "m:src.a"), so PostToolUse finds a file's
memories without reading every memory. It is a cache of the ledger, kept in step through the
ledger's append-only audit (every create, update, delete, merge and cleanup appends a row): the
cache remembers the last audit seq it has seen, and a hook re-indexes the memories of the few
audit rows since, inline. A missing or unusable cache, many changes, or another ledger file (a
restore) start a detached full rebuild (``python -m query_server.hooks.mentions --build-mentions
<state dir>``) and the hook scans the ledger meanwhile.

Standard library only (see ``query_server.hooks.dispatch``).
"""

import os
import sys
import time

from query_server.hooks.common import (
    BUSY_TIMEOUT_S,
    Project,
    json_loads,
    make_dir,
    spawn_detached,
)
from resources.memory.ledger_reader import LedgerReader, ledger_file

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    import sqlite3

MENTIONS_VERSION = "2"
MENTIONS_INLINE_ROWS = 200
MENTIONS_MAX_AGE_S = 86_400
"""A cache older than this is rebuilt in the background (it keeps serving meanwhile)."""
BUILD_LOCK_MAX_AGE_S = 300
_MENTIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (token TEXT NOT NULL, memory_id TEXT NOT NULL, PRIMARY KEY (token, memory_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tokens_memory ON tokens(memory_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_WORDS = r"[\w./-]+"
_FILE_NAME = r"[\w-]+\.[A-Za-z]\w{0,9}"
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
"""Patterns are compiled on first use (``re`` caches them), and ``re`` is imported then: a hook whose cache is
current does not pay its import (~10 ms)."""
_STRENGTH = {"fp": 1.0, "mod": 1.0, "p": 0.8, "m": 0.6}


def _clean_path(value: str) -> str:
    value = value.strip()
    while value.startswith("./"):
        value = value[2:]
    return value.rstrip("/")


def memory_tokens(memory_type: str, content: str, metadata: str) -> set[str]:
    """The cache keys a memory answers to: its file_path/test_file, anchors, and the paths and dotted
    modules its content and metadata name."""
    import re

    tokens: set[str] = set()
    if memory_type == "session":
        return tokens
    try:
        meta = json_loads(metadata)
    except ValueError:
        meta = {}
    if isinstance(meta, dict):
        for key in ("file_path", "test_file"):
            value = meta.get(key)
            if isinstance(value, str) and _clean_path(value):
                tokens.add("fp:" + _clean_path(value))
        anchors = meta.get("anchors")
        if isinstance(anchors, list):
            for anchor in anchors[:50]:
                name = anchor.get("qualified_name") if isinstance(anchor, dict) else anchor
                if isinstance(name, str) and name:
                    parts = name.split(".")
                    tokens.update("mod:" + ".".join(parts[:i]) for i in range(1, len(parts) + 1))
    for word in re.findall(_WORDS, content + "\n" + metadata):
        while word.startswith("./"):
            word = word[2:]
        word = word.rstrip(".-/")
        if len(word) < 3 or len(word) > 300:
            continue
        if "/" in word or re.fullmatch(_FILE_NAME, word):
            tokens.add("p:" + word)
        if "/" not in word and re.fullmatch(_DOTTED, word):
            parts = word.split(".")
            tokens.update("m:" + ".".join(parts[:i]) for i in range(2, min(len(parts), 8) + 1))
        if len(tokens) >= 400:
            break
    return tokens


def _ledger_identity(project: Project) -> str:
    stat = os.stat(project.ledger_path)
    return f"{stat.st_dev}:{stat.st_ino}"


def _apply_mentions(cache: "sqlite3.Connection", memory_ids: list[str], rows: list[tuple]) -> None:
    """Re-index ``memory_ids`` from their current ``rows`` (id, type, content, metadata, deleted); ids
    without a row are gone for good."""
    current = {row[0]: row for row in rows}
    for memory_id in memory_ids:
        cache.execute("DELETE FROM tokens WHERE memory_id = ?", (memory_id,))
        row = current.get(memory_id)
        if row is not None and not row[4]:
            cache.executemany("INSERT OR IGNORE INTO tokens VALUES (?, ?)",
                              [(token, memory_id) for token in memory_tokens(row[1], row[2], row[3])])


def mentions_cache(project: Project, ledger: LedgerReader) -> "sqlite3.Connection | None":
    """A read connection to an up-to-date mentions cache, or None (then the caller scans)."""
    import sqlite3

    path = os.path.join(project.hooks_dir, "mentions.db")
    if not os.path.isfile(path):
        start_mentions_build(project)
        return None
    cache = None
    try:
        if project.kept is not None:
            cache = project.kept.connect(path, BUSY_TIMEOUT_S, read_only=False)
            if cache is None:  # gone since the check above
                raise LookupError("rebuild")
        else:
            cache = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        meta = dict(cache.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("version") != MENTIONS_VERSION or meta.get("ledger") != _ledger_identity(project):
            raise LookupError("rebuild")
        if time.time() - float(meta.get("built_at", "0")) > MENTIONS_MAX_AGE_S:
            start_mentions_build(project)  # keep serving meanwhile
        seen = int(meta.get("seq", "-1"))
        with ledger.snapshot():  # one snapshot of the ledger for the check and the changed rows
            seq = ledger.last_audit_seq()
            if seq == seen:
                return cache
            if seq < seen:
                raise LookupError("rebuild")  # another ledger
            changed = ledger.audited_since(seen, MENTIONS_INLINE_ROWS + 1)
            if len(changed) > MENTIONS_INLINE_ROWS:
                raise LookupError("rebuild")
            rows = ledger.states(changed)
        cache.execute("BEGIN IMMEDIATE")
        try:
            _apply_mentions(cache, changed, rows)
            cache.execute("INSERT OR REPLACE INTO meta VALUES ('seq', ?)", (str(seq),))
            cache.execute("COMMIT")
        except BaseException:
            cache.execute("ROLLBACK")
            raise
        return cache
    except LookupError:
        start_mentions_build(project)
    except sqlite3.Error as exc:  # busy (a build is running) or unusable: scan this time
        if not isinstance(exc, sqlite3.OperationalError) or "locked" not in str(exc):
            start_mentions_build(project)
    if cache is not None:
        if project.kept is not None:
            project.kept.discard(cache)
        else:
            cache.close()
    return None


def release_mentions(project: Project, cache: "sqlite3.Connection") -> None:
    """Done with ``mentions_cache``'s connection: closed, unless the process keeps it for the next hook."""
    if project.kept is None or not project.kept.holds(cache):
        cache.close()


def lookup_mentions(cache: "sqlite3.Connection", project: Project, rel: str, module: str) -> dict[str, float]:
    """{memory id: match strength} for the memories the cache says name ``rel``."""
    wanted = {f"p:{rel}": "p", f"p:{os.path.join(project.root, rel)}": "p", f"fp:{rel}": "fp", f"mod:{module}": "mod"}
    if "." in module:
        wanted[f"m:{module}"] = "m"
    strengths: dict[str, float] = {}
    marks = ",".join("?" * len(wanted))
    for token, memory_id in cache.execute(f"SELECT token, memory_id FROM tokens WHERE token IN ({marks})", list(wanted)):
        strength = _STRENGTH[wanted[token]]
        if strength > strengths.get(memory_id, 0.0):
            strengths[memory_id] = strength
    return strengths


def start_mentions_build(project: Project) -> None:
    """Start a detached full build of the mentions cache unless one is running."""
    lock = os.path.join(project.hooks_dir, "mentions.build.lock")
    try:
        make_dir(project.hooks_dir)
        try:
            if time.time() - os.stat(lock).st_mtime < BUILD_LOCK_MAX_AGE_S:
                return
            os.unlink(lock)
        except FileNotFoundError:
            pass
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:
        return
    spawn_detached(project, [sys.executable, "-m", "query_server.hooks.mentions", "--build-mentions", project.state_dir])


def build_mentions(state_dir: str | os.PathLike[str]) -> str:
    """Rebuild ``<state>/hooks/mentions.db`` from the ledger in one transaction (readers keep the old one)."""
    import sqlite3

    state_dir = os.fspath(state_dir)
    project = Project({"cwd": os.path.dirname(state_dir)})
    project.state_dir, project.ledger_path = state_dir, ledger_file(state_dir)
    project.hooks_dir = os.path.join(state_dir, "hooks")
    lock = os.path.join(project.hooks_dir, "mentions.build.lock")
    started = time.perf_counter()
    try:
        ledger = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S)
        if ledger is None:
            return "no ledger"
        make_dir(project.hooks_dir, parents=True)
        cache = sqlite3.connect(os.path.join(project.hooks_dir, "mentions.db"), timeout=30, isolation_level=None)
        try:
            cache.execute("PRAGMA journal_mode=WAL")
            cache.execute("PRAGMA synchronous=NORMAL")
            cache.executescript(_MENTIONS_SCHEMA)
            identity = _ledger_identity(project)
            with ledger.snapshot():
                seq = ledger.last_audit_seq()
                rows = ledger.all_states()
                cache.execute("BEGIN IMMEDIATE")
                try:
                    cache.execute("DELETE FROM tokens")
                    count = 0
                    while batch := rows.fetchmany(1_000):
                        for memory_id, memory_type, content, metadata, deleted in batch:
                            if not deleted:
                                cache.executemany("INSERT OR IGNORE INTO tokens VALUES (?, ?)",
                                                  [(t, memory_id) for t in memory_tokens(memory_type, content, metadata)])
                        count += len(batch)
                    cache.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [
                        ("version", MENTIONS_VERSION), ("ledger", identity), ("seq", str(seq)), ("built_at", str(time.time())),
                    ])
                    cache.execute("DELETE FROM meta WHERE key NOT IN ('version', 'ledger', 'seq', 'built_at')")
                    cache.execute("COMMIT")
                except BaseException:
                    cache.execute("ROLLBACK")
                    raise
            tokens = cache.execute("SELECT COUNT(*) FROM tokens").fetchone()[0]
        finally:
            cache.close()
            ledger.close()
    finally:
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
    return f"mentions cache built: {count:,} memories, {tokens:,} tokens in {time.perf_counter() - started:.2f} s"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--build-mentions"] and len(sys.argv) == 3:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        try:
            print(f"{stamp} {build_mentions(os.path.realpath(sys.argv[2]))}", flush=True)
        except Exception as exc:  # noqa: BLE001 - one line in the worker log
            print(f"{stamp} mentions cache build failed: {type(exc).__name__}: {exc}", flush=True)
            sys.exit(1)
    else:
        sys.exit("usage: python -m query_server.hooks.mentions --build-mentions <state dir>")

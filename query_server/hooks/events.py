"""``codemem hook <Event>``: the Claude Code hooks (SessionStart, PostToolUse, PreToolUse,
PreCompact, SessionEnd).

Claude Code runs a hook command for every matching event and waits for it, so each hook must
answer within a few tens of milliseconds. This module therefore imports **only the standard
library** (no click, rich, pydantic, models or store clients) and reads the project's SQLite
files read-only; ``query_server.entry`` routes ``codemem hook`` here before anything else loads.

Input is the hook JSON on stdin (``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``,
``tool_name``, ``tool_input``, ``source``, ``trigger``, ``reason`` …); output follows Claude Code's
documented formats (https://code.claude.com/docs/en/hooks):

* SessionStart — ``hookSpecificOutput.additionalContext`` (≤ ~2,000 tokens): memory counts per
  type, what changed since the last session, stale memories, index freshness, the tools to use.
* PostToolUse (Read/Edit/Write/MultiEdit) — ``hookSpecificOutput.additionalContext``: the top 3
  memories about that file (gotchas, patterns and designs first), each shown once per session.
* PreToolUse — ``hookSpecificOutput.permissionDecision: "deny"`` with a reason for direct edits of
  the state dir (``.codemem/``) and Bash commands that write into it; silence (allow) otherwise.
* PreCompact, SessionEnd — no output; a detached ``query_server.hooks.worker`` process records
  a session memory from the transcript through the normal memory_add path.

A hook never blocks Claude Code on its own failure: any exception is logged as one line to
``<state>/logs/hooks.log`` and the hook exits 0 with no output. Unknown events exit 0 silently.
A project without a state dir (not indexed) gets a one-line hint at SessionStart, nothing else.
"""

import json
import os
import re
import sys
import time
from pathlib import Path

EVENTS = ("SessionStart", "PostToolUse", "PreToolUse", "PreCompact", "SessionEnd")
CONTEXT_CHAR_BUDGET = 6_000
"""SessionStart context cap: 2,000 tokens at ~3 characters per token."""
FILE_TOOLS = ("Read", "Edit", "Write", "MultiEdit")
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
MEMORIES_PER_FILE = 3
HOOK_FILE_MAX_AGE_S = 7 * 86_400
"""Per-session hook state older than this is pruned at SessionStart."""
BUSY_TIMEOUT_S = 0.02
MTIME_CHECK_BUDGET_S = 0.001
LOG_MAX_BYTES = 1_000_000
TOOLS_LINE = (
    "Tools: before changing code, memory_search (decisions, patterns, gotchas) and code_search / get_symbol / "
    "get_related / impact_of_change; record decisions and learnings with memory_add; memory_get <id> shows a "
    "memory in full."
)
GUARD_REASON = (
    "{what} — .codemem/ holds codemem's memory ledger and code index, which must only change through codemem: "
    "use the memory tools (memory_add, memory_update, memory_delete, import_memory) or `codemem memory …`, and "
    "`codemem index` / index_file for the code index."
)
_TITLE_KEYS = ("title", "pattern_name", "name", "test_name", "key", "requirement_id", "component_id")
_GOTCHA = r"(?i)\b(gotchas?|pitfalls?|beware|caveats?|careful|workaround|foot-?guns?|watch out|do not|don't|never)\b"
"""Patterns are compiled on first use (``re`` caches them): compiling at import costs milliseconds."""
_TYPE_WEIGHT = {
    "code_pattern": 3.0, "design": 2.6, "requirements": 1.8, "test_history": 1.0, "component": 1.5,
    "user_preference": 1.2, "function": 1.0,
}
_MODULE_TAILS = {"__init__", "index", "mod", "lib", "main"}


# -- project and state ----------------------------------------------------------------------------


class Project:
    """Where the project and its state dir are (the same rules as ``resources.settings``)."""

    def __init__(self, payload: dict) -> None:
        env = os.environ
        start = env.get("CODEMEM_PROJECT_ROOT") or env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd()
        root = Path(str(start)).expanduser().resolve()
        explicit = env.get("CODEMEM_STATE_DIR")
        if explicit:
            self.root = root
            self.state_dir = Path(explicit).expanduser().resolve()
        else:
            found = next((d for d in (root, *root.parents) if (d / ".codemem").is_dir()), None)
            self.root = found or root
            self.state_dir = self.root / ".codemem"
        self.ledger_path = self.state_dir / "memory.db"
        self.index_path = self.state_dir / "index.db"
        self.indexed = self.ledger_path.is_file() or self.index_path.is_file()
        self.hooks_dir = self.state_dir / "hooks"

    def relative(self, raw: str, cwd: str | None = None) -> str | None:
        """``raw`` as a repo-relative POSIX path, or None when it is outside the project."""
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = Path(cwd or self.root) / path
        path = Path(os.path.normpath(path))
        for candidate in (path, Path(os.path.realpath(path))):
            try:
                return candidate.relative_to(self.root).as_posix()
            except ValueError:
                continue
        return None


def _connect(path: Path):  # noqa: ANN202 - sqlite3 is imported lazily
    """A read-only connection (short busy timeout), or None when the database does not exist."""
    if not path.is_file():
        return None
    import sqlite3

    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute("PRAGMA query_only=1")
    return conn


def _now_iso() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="microseconds")


def session_key(session_id: str) -> str:
    """A file-name-safe key for a session id (UUIDs pass through unchanged)."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:64]
    if clean != session_id:
        import zlib

        clean = f"{clean[:48]}-{zlib.crc32(session_id.encode()):08x}"
    return clean or "unknown"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _log_error(project: "Project | None", event: str, exc: BaseException) -> None:
    """One line in ``<state>/logs/hooks.log`` (only when the state dir exists); never raises."""
    try:
        if project is None or not project.state_dir.is_dir():
            return
        logs = project.state_dir / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / "hooks.log"
        try:
            if log.stat().st_size > LOG_MAX_BYTES:
                os.replace(log, logs / "hooks.log.1")
        except OSError:
            pass
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {event or '-'} {message}\n")
    except Exception:  # noqa: BLE001 - logging must never break the hook
        pass


def _context(event: str, text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# -- memory rendering -----------------------------------------------------------------------------


def _first_line(text: str, limit: int) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _label(memory_type: str, content: str, metadata: str | dict, limit: int = 160) -> str:
    """``[type] Title: first line`` for a memory."""
    meta = metadata
    if isinstance(metadata, str):
        try:
            meta = json.loads(metadata)
        except ValueError:
            meta = {}
    if not isinstance(meta, dict):
        meta = {}
    kind = memory_type
    if memory_type == "design" and meta.get("design_type"):
        kind = f"design/{meta['design_type']}"
    elif memory_type == "test_history" and meta.get("status"):
        kind = f"test {meta['status']}"
    title = next((str(meta[k]) for k in _TITLE_KEYS if isinstance(meta.get(k), str | int) and str(meta[k]).strip()), "")
    if memory_type == "session":
        title = ""
    head = _first_line(content, limit)
    if title and not head.startswith(title):
        head = f"{_first_line(title, 80)}: {head}"
    return f"[{kind}] {head}"


# -- SessionStart ---------------------------------------------------------------------------------


def _ago(iso: str) -> str:
    from datetime import UTC, datetime

    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0.0, (datetime.now(UTC) - then).total_seconds())
    stamp = then.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{stamp} ({int(seconds // size)} {unit} ago)"
    return f"{stamp} (just now)"


def _stale_ids(conn, limit: int = 10) -> tuple[int, list[tuple]]:  # noqa: ANN001
    """(number of stale memories, up to ``limit`` of them) from ``anchor_state``; none without it."""
    import sqlite3

    try:
        total = conn.execute(
            "SELECT COUNT(DISTINCT a.memory_id) FROM anchor_state a JOIN memories m ON m.id = a.memory_id "
            "WHERE a.stale = 1 AND m.deleted = 0"
        ).fetchone()[0]
        rows = conn.execute(
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


def _memory_sections(project: Project, conn, payload: dict) -> list[str]:  # noqa: ANN001
    lines: list[str] = []
    counts: dict[str, list[int]] = {}
    for memory_type, deleted, count in conn.execute(
        "SELECT memory_type, deleted, COUNT(*) FROM memories GROUP BY memory_type, deleted"
    ):
        counts.setdefault(memory_type, [0, 0])[1 if deleted else 0] += count
    active = sum(c[0] for c in counts.values())
    deleted = sum(c[1] for c in counts.values())
    per_type = ", ".join(f"{t} {c[0]:,}" for t, c in sorted(counts.items(), key=lambda item: -item[1][0]) if c[0])
    lines.append(
        f"Memories: {active:,} active" + (f" ({per_type})" if per_type else " — none yet; record decisions with memory_add")
        + (f"; {deleted:,} soft-deleted" if deleted else "")
    )

    baseline = _session_baseline(project, conn, str(payload.get("session_id") or ""))
    if baseline:
        created, updated, removed = conn.execute(
            "SELECT COALESCE(SUM(created_at > ? AND deleted = 0), 0), COALESCE(SUM(created_at <= ? AND deleted = 0), 0), "
            "COALESCE(SUM(deleted), 0) FROM memories WHERE updated_at > ?",
            (baseline, baseline, baseline),
        ).fetchone()
        if created or updated or removed:
            lines.append(
                f"Since the last session ({_ago(baseline)}): {created} new, {updated} updated, {removed} deleted"
            )
            for memory_id, memory_type, content, metadata, created_at in conn.execute(
                "SELECT id, memory_type, content, metadata, created_at FROM memories WHERE updated_at > ? AND deleted = 0 "
                "ORDER BY memory_type = 'session' DESC, updated_at DESC LIMIT 8",
                (baseline,),
            ):
                mark = "+" if created_at > baseline else "~"
                lines.append(f"  {mark} {_label(memory_type, content, metadata, 140)} (id {memory_id})")
        else:
            lines.append(f"Since the last session ({_ago(baseline)}): no memory changed")

    stale_total, stale = _stale_ids(conn)
    if stale_total:
        lines.append(
            f"Stale memories (their anchored code changed since): {stale_total} — check them against the code "
            "before relying on them, then memory_update:"
        )
        lines += [f"  ! {_label(t, c, m, 120)} (id {i})" for i, t, c, m in stale]
    return lines


def _session_baseline(project: Project, conn, session_id: str) -> str | None:  # noqa: ANN001
    """When the previous session started (hook state), else when the last session memory was made.

    A SessionStart of the same session again (resume, clear, compact) keeps the first baseline.
    """
    state_file = project.hooks_dir / "last_session.json"
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
        if not isinstance(state, dict):
            state = {}
    except (OSError, ValueError):
        state = {}
    if session_id and state.get("session_id") == session_id:
        return state.get("previous_at")
    baseline = state.get("started_at")
    if not baseline:
        row = conn.execute("SELECT MAX(created_at) FROM memories WHERE memory_type = 'session'").fetchone()
        baseline = row[0] if row else None
    _write_atomic(state_file, json.dumps({"session_id": session_id, "started_at": _now_iso(), "previous_at": baseline}))
    return baseline


def _index_section(project: Project) -> list[str]:
    """Files indexed, when the index last changed, and whether recently indexed files changed since.

    Rows of the manifest's ``files`` table are replaced when a file is (re)indexed, so the highest
    rowids are the most recently indexed files: their ``indexed_at`` is the last index time, and
    their recorded mtimes are compared with the disk's for ``MTIME_CHECK_BUDGET_S`` at most.
    """
    conn = _connect(project.index_path)
    if conn is None:
        return ["Index: no code index yet — run `codemem index .` for code_search, get_symbol and get_related."]
    try:
        files = conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
        if not files:
            return ["Index: empty — run `codemem index .`."]
        recent = conn.execute("SELECT path, mtime_ns, indexed_at FROM files ORDER BY rowid DESC LIMIT 1000").fetchall()
    finally:
        conn.close()
    last = max(row[2] for row in recent)
    checked = changed = 0
    deadline = time.perf_counter() + MTIME_CHECK_BUDGET_S
    for path, mtime_ns, _ in recent:
        try:
            if os.stat(project.root / path).st_mtime_ns != mtime_ns:
                changed += 1
        except OSError:
            changed += 1
        checked += 1
        if time.perf_counter() > deadline:
            break
    line = f"Index: {files:,} files, last indexed {_ago(last)}"
    scope = "" if checked == files else f" of the {checked:,} most recently indexed"
    if changed:
        line += f"; {changed:,}{scope} file(s) changed since — run `codemem index .` (or index_file) to refresh"
    else:
        line += "; up to date" + (f" ({checked:,} most recently indexed files checked)" if scope else "")
    return [line]


def _prune_hook_files(project: Project) -> None:
    try:
        entries = list(os.scandir(project.hooks_dir))
    except OSError:
        return
    cutoff = time.time() - HOOK_FILE_MAX_AGE_S
    for entry in entries:
        try:
            if entry.name.startswith(("shown-", "recorded-")) and entry.stat().st_mtime < cutoff:  # per-session state
                os.unlink(entry.path)
        except OSError:
            continue


def session_start(project: Project, payload: dict) -> dict | None:
    """The project's memory and index at a glance, as additionalContext."""
    if not project.indexed:
        return _context(
            "SessionStart",
            "codemem: this project has no codemem state yet — run `codemem index .` to get code search and project "
            "memory (memory_search, code_search) in Claude Code.",
        )
    lines = [f"codemem — project memory and code index for {project.root.name}"]
    conn = _connect(project.ledger_path)
    if conn is not None:
        try:
            lines += _memory_sections(project, conn, payload)
            cache = _mentions_cache(project, conn)  # bring PostToolUse's lookup cache up to date (or start its build)
            if cache is not None:
                cache.close()
        finally:
            conn.close()
    lines += _index_section(project)
    lines.append(TOOLS_LINE)
    _prune_hook_files(project)
    return _context("SessionStart", _fit(lines, CONTEXT_CHAR_BUDGET))


def _fit(lines: list[str], budget: int) -> str:
    """Join ``lines``; over ``budget`` characters, drop indented detail lines from the end, then cut."""
    keep = list(lines)
    while len("\n".join(keep)) > budget:
        detail = next((i for i in range(len(keep) - 1, -1, -1) if keep[i].startswith("  ")), None)
        if detail is None:
            text = "\n".join(keep)
            return text[: budget - 1] + "…"
        del keep[detail]
    return "\n".join(keep)


# -- PostToolUse ----------------------------------------------------------------------------------


def module_name(rel: str) -> str:
    """Dotted module name of a repo-relative file, as ``pipelines.records.module_name`` computes it."""
    stem, _, _ = rel.rpartition(".")
    parts = (stem or rel).split("/")
    if len(parts) > 1 and parts[-1] in _MODULE_TAILS:
        parts.pop()
    return ".".join(parts)


def _mentions(text: str, needle: str, *, module: bool = False) -> bool:
    """``needle`` in ``text`` as a whole path (or dotted module) and not as part of a longer name."""
    start = text.find(needle)
    while start != -1:
        before = text[start - 1] if start else " "
        end = start + len(needle)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before in "_.-") and not (after.isalnum() or after == "_" or (not module and after in "/-")):
            return True
        start = text.find(needle, start + 1)
    return False


def _shown_file(project: Project, session_id: str) -> Path:
    return project.hooks_dir / f"shown-{session_key(session_id)}.txt"


def _file_memories(project: Project, rel: str, exclude: set[str]) -> list[tuple[float, str, str]]:
    """Scored memories about ``rel``: [(score, memory id, rendered line)], best first.

    Candidates come from the mentions cache (``_mentions_cache``) when it is current, else from a
    scan of the ledger (correct, but it reads every memory: ~10 ms per 10k memories and pattern).
    """
    conn = _connect(project.ledger_path)
    if conn is None:
        return []
    try:
        module = module_name(rel)
        anchored, stale = _anchor_matches(project, conn, rel)
        cache = _mentions_cache(project, conn)
        if cache is not None:
            try:
                strengths = _lookup_mentions(cache, project, rel, module)
            finally:
                cache.close()
            for memory_id in anchored:
                strengths[memory_id] = 1.0
            ids = [i for i in strengths if i not in exclude]
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows += conn.execute(
                    "SELECT id, memory_type, content, metadata, importance_score FROM memories WHERE deleted = 0 "
                    f"AND memory_type != 'session' AND id IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
        else:
            strengths = None
            rows = _scan_mentions(conn, rel, module, anchored)
    finally:
        conn.close()

    scored: list[tuple[float, str, str]] = []
    for memory_id, memory_type, content, metadata, importance in rows:
        if memory_id in exclude:
            continue
        try:
            meta = json.loads(metadata)
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        if strengths is not None:
            strength = strengths.get(memory_id, 0.0)
        else:
            strength = _match_strength(rel, module, memory_id in anchored, content, metadata, meta)
        if strength <= 0:
            continue
        weight = _TYPE_WEIGHT.get(memory_type, 1.0)
        if memory_type == "test_history" and meta.get("status") in ("Failed", "Error"):
            weight = 2.0
        if _is_gotcha(content, meta):
            weight = max(weight, 4.0)
        score = weight * strength + 0.5 * float(importance or 0)
        line = _label(memory_type, content, meta, 280)
        if memory_id in stale:
            line += " (stale: its anchored code changed since — verify)"
        scored.append((score, memory_id, f"- {line} (id {memory_id})"))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored


def _scan_mentions(conn, rel: str, module: str, anchored: set[str]) -> list[tuple]:  # noqa: ANN001
    """Candidate rows for ``rel`` by scanning the ledger's text (the fallback of the mentions cache)."""
    conditions = ["instr(content, ?)", "instr(metadata, ?)", "instr(metadata, ?)"]
    params = [rel, rel, f"{module}."]
    if "." in module:  # a dotted module name is specific enough to look for in the text too
        conditions += ["instr(content, ?)", "instr(metadata, ?)"]
        params += [module, module]
    for cut in (i for i, ch in enumerate(rel) if ch == "/"):  # a component's file_path may be a directory
        conditions += ["instr(metadata, ?)", "instr(metadata, ?)"]
        params += [f'"file_path": "{rel[:cut]}"', f'"file_path": "{rel[: cut + 1]}"']
    rows = conn.execute(
        "SELECT id, memory_type, content, metadata, importance_score FROM memories "
        f"WHERE deleted = 0 AND memory_type != 'session' AND ({' OR '.join(conditions)}) "
        "ORDER BY importance_score DESC, updated_at DESC LIMIT 500",
        params,
    ).fetchall()
    missing = list(anchored - {row[0] for row in rows})
    if missing:
        rows += conn.execute(
            "SELECT id, memory_type, content, metadata, importance_score FROM memories WHERE deleted = 0 "
            f"AND memory_type != 'session' AND id IN ({','.join('?' * len(missing))})",
            missing,
        ).fetchall()
    return rows


# -- the mentions cache ---------------------------------------------------------------------------
#
# <state>/hooks/mentions.db maps the paths, directories, modules and anchors a memory names to the
# memory ("p:src/a.py", "fp:src", "mod:src.a", "m:src.a"), so PostToolUse finds a file's memories
# with one indexed lookup instead of reading every memory. It is a cache of the ledger, kept in step
# through the ledger's append-only audit (every create, update, delete, merge and cleanup appends a
# row): the cache remembers the last audit seq it has seen, and a hook re-indexes the memories of
# the few audit rows since, inline. A missing or unusable cache, many changes, or another ledger
# file (a restore) start a detached full rebuild (``python -m query_server.hooks.events --build-mentions
# <state dir>``) and the hook scans the ledger meanwhile.

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
_STRENGTH = {"fp": 1.0, "mod": 1.0, "p": 0.8, "m": 0.6, "dir": 0.6}


def _clean_path(value: str) -> str:
    value = value.strip()
    while value.startswith("./"):
        value = value[2:]
    return value.rstrip("/")


def memory_tokens(memory_type: str, content: str, metadata: str) -> set[str]:
    """The cache keys a memory answers to: its file_path/test_file, anchors, and the paths and dotted
    modules its content and metadata name."""
    tokens: set[str] = set()
    if memory_type == "session":
        return tokens
    try:
        meta = json.loads(metadata)
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
    stat = project.ledger_path.stat()
    return f"{stat.st_dev}:{stat.st_ino}"


def _apply_mentions(cache, memory_ids, rows) -> None:  # noqa: ANN001
    """Re-index ``memory_ids`` from their current ``rows`` (id, type, content, metadata, deleted); ids
    without a row are gone for good."""
    current = {row[0]: row for row in rows}
    for memory_id in memory_ids:
        cache.execute("DELETE FROM tokens WHERE memory_id = ?", (memory_id,))
        row = current.get(memory_id)
        if row is not None and not row[4]:
            cache.executemany("INSERT OR IGNORE INTO tokens VALUES (?, ?)",
                              [(token, memory_id) for token in memory_tokens(row[1], row[2], row[3])])


def _mentions_cache(project: Project, ledger):  # noqa: ANN001, ANN202
    """A read connection to an up-to-date mentions cache, or None (then the caller scans)."""
    import sqlite3

    path = project.hooks_dir / "mentions.db"
    if not path.is_file():
        _start_mentions_build(project)
        return None
    cache = None
    try:
        cache = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        meta = dict(cache.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("version") != MENTIONS_VERSION or meta.get("ledger") != _ledger_identity(project):
            raise LookupError("rebuild")
        if time.time() - float(meta.get("built_at", "0")) > MENTIONS_MAX_AGE_S:
            _start_mentions_build(project)  # keep serving meanwhile
        seen = int(meta.get("seq", "-1"))
        ledger.execute("BEGIN")  # one snapshot of the ledger for the check and the changed rows
        try:
            seq = ledger.execute("SELECT COALESCE(MAX(seq), 0) FROM audit").fetchone()[0]
            if seq == seen:
                return cache
            if seq < seen:
                raise LookupError("rebuild")  # another ledger
            changed = [row[0] for row in ledger.execute(
                "SELECT DISTINCT memory_id FROM audit WHERE seq > ? LIMIT ?", (seen, MENTIONS_INLINE_ROWS + 1)
            )]
            if len(changed) > MENTIONS_INLINE_ROWS:
                raise LookupError("rebuild")
            rows = ledger.execute(
                "SELECT id, memory_type, content, metadata, deleted FROM memories "
                f"WHERE id IN ({','.join('?' * len(changed))})",
                changed,
            ).fetchall()
        finally:
            ledger.execute("COMMIT")
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
        _start_mentions_build(project)
    except sqlite3.Error as exc:  # busy (a build is running) or unusable: scan this time
        if not isinstance(exc, sqlite3.OperationalError) or "locked" not in str(exc):
            _start_mentions_build(project)
    if cache is not None:
        cache.close()
    return None


def _lookup_mentions(cache, project: Project, rel: str, module: str) -> dict[str, float]:  # noqa: ANN001
    """{memory id: match strength} for the memories the cache says name ``rel``."""
    wanted = {f"p:{rel}": "p", f"p:{project.root / rel}": "p", f"fp:{rel}": "fp", f"mod:{module}": "mod"}
    if "." in module:
        wanted[f"m:{module}"] = "m"
    for cut in (i for i, ch in enumerate(rel) if ch == "/"):
        wanted[f"fp:{rel[:cut]}"] = "dir"
    strengths: dict[str, float] = {}
    marks = ",".join("?" * len(wanted))
    for token, memory_id in cache.execute(f"SELECT token, memory_id FROM tokens WHERE token IN ({marks})", list(wanted)):
        strength = _STRENGTH[wanted[token]]
        if strength > strengths.get(memory_id, 0.0):
            strengths[memory_id] = strength
    return strengths


def _start_mentions_build(project: Project) -> None:
    """Start a detached full build of the mentions cache unless one is running."""
    lock = project.hooks_dir / "mentions.build.lock"
    try:
        project.hooks_dir.mkdir(exist_ok=True)
        try:
            if time.time() - lock.stat().st_mtime < BUILD_LOCK_MAX_AGE_S:
                return
            lock.unlink()
        except FileNotFoundError:
            pass
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError:
        return
    _spawn(project, [sys.executable, "-m", "query_server.hooks.events", "--build-mentions", str(project.state_dir)])


def build_mentions(state_dir: Path) -> str:
    """Rebuild ``<state>/hooks/mentions.db`` from the ledger in one transaction (readers keep the old one)."""
    import sqlite3

    project = Project({"cwd": str(state_dir.parent)})
    project.state_dir, project.ledger_path, project.hooks_dir = state_dir, state_dir / "memory.db", state_dir / "hooks"
    lock = project.hooks_dir / "mentions.build.lock"
    started = time.perf_counter()
    try:
        ledger = _connect(project.ledger_path)
        if ledger is None:
            return "no ledger"
        project.hooks_dir.mkdir(parents=True, exist_ok=True)
        cache = sqlite3.connect(project.hooks_dir / "mentions.db", timeout=30, isolation_level=None)
        try:
            cache.execute("PRAGMA journal_mode=WAL")
            cache.execute("PRAGMA synchronous=NORMAL")
            cache.executescript(_MENTIONS_SCHEMA)
            identity = _ledger_identity(project)
            ledger.execute("BEGIN")
            seq = ledger.execute("SELECT COALESCE(MAX(seq), 0) FROM audit").fetchone()[0]
            rows = ledger.execute("SELECT id, memory_type, content, metadata, deleted FROM memories")
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
            finally:
                ledger.execute("COMMIT")
            tokens = cache.execute("SELECT COUNT(*) FROM tokens").fetchone()[0]
        finally:
            cache.close()
            ledger.close()
    finally:
        lock.unlink(missing_ok=True)
    return f"mentions cache built: {count:,} memories, {tokens:,} tokens in {time.perf_counter() - started:.2f} s"


def _anchor_matches(project: Project, conn, rel: str) -> tuple[set[str], set[str]]:  # noqa: ANN001
    """(memories anchored to a symbol of ``rel``, the stale ones among them) from ``anchor_state``."""
    import sqlite3

    index = _connect(project.index_path)
    if index is None:
        return set(), set()
    try:
        names = [row[0] for row in index.execute("SELECT qualified_name FROM symbols WHERE path = ? LIMIT 900", (rel,))]
    finally:
        index.close()
    if not names:
        return set(), set()
    marks = ",".join("?" * len(names))
    try:
        rows = conn.execute(
            f"SELECT memory_id, MAX(stale) FROM anchor_state WHERE qualified_name IN ({marks}) GROUP BY memory_id", names
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return set(), set()
        raise
    return {row[0] for row in rows}, {row[0] for row in rows if row[1]}


def _match_strength(rel: str, module: str, anchored: bool, content: str, raw_meta: str, meta: dict) -> float:
    if anchored:
        return 1.0
    file_path = meta.get("file_path")
    if isinstance(file_path, str) and file_path:
        clean = file_path.strip().lstrip("./").rstrip("/")
        if clean == rel:
            return 1.0
        if rel.startswith(clean + "/"):
            return 0.6
    anchors = meta.get("anchors")
    if isinstance(anchors, list):
        for anchor in anchors:
            name = anchor.get("qualified_name") if isinstance(anchor, dict) else anchor
            if isinstance(name, str) and (name == module or name.startswith(module + ".")):
                return 1.0
    if _mentions(content, rel) or _mentions(raw_meta, rel):
        return 0.8
    if "." in module and (_mentions(content, module, module=True) or _mentions(raw_meta, module, module=True)):
        return 0.6
    return 0.0


def _is_gotcha(content: str, meta: dict) -> bool:
    tags = meta.get("tags")
    if isinstance(tags, list) and any(isinstance(t, str) and t.lower() in ("gotcha", "pitfall", "warning") for t in tags):
        return True
    if str(meta.get("kind", "")).lower() == "gotcha" or str(meta.get("category", "")).lower() == "gotcha":
        return True
    return bool(re.search(_GOTCHA, content[:600]))


def post_tool_use(project: Project, payload: dict) -> dict | None:
    """The top memories about the file just read or edited, each once per session."""
    if not project.indexed or payload.get("tool_name") not in FILE_TOOLS:
        return None
    tool_input = payload.get("tool_input") or {}
    raw = tool_input.get("file_path") if isinstance(tool_input, dict) else None
    if not isinstance(raw, str) or not raw:
        return None
    rel = project.relative(raw, payload.get("cwd"))
    if not rel or rel == "." or rel.startswith("../") or _inside(project, str(project.root / rel)):
        return None
    session_id = str(payload.get("session_id") or "")
    shown_path = _shown_file(project, session_id) if session_id else None
    shown: set[str] = set()
    if shown_path is not None:
        try:
            shown = set(shown_path.read_text(encoding="utf-8").split())
        except OSError:
            pass
    picked = _file_memories(project, rel, shown)[:MEMORIES_PER_FILE]
    if not picked:
        return None
    if shown_path is not None:
        shown_path.parent.mkdir(parents=True, exist_ok=True)
        with open(shown_path, "a", encoding="utf-8") as handle:  # appends of a few lines are atomic
            handle.write("".join(f"{memory_id}\n" for _, memory_id, _ in picked))
    text = "\n".join(
        [f"codemem: project memories about {rel} (memory_get <id> shows one in full):"] + [line for _, _, line in picked]
    )
    return _context("PostToolUse", text)


# -- PreToolUse -----------------------------------------------------------------------------------


def _guarded_dirs(project: Project) -> list[str]:
    dirs = {os.path.normpath(project.state_dir), os.path.normpath(project.root / ".codemem")}
    dirs |= {os.path.realpath(d) for d in list(dirs)}
    return sorted(dirs)


def _inside(project: Project, raw: str, cwd: str | None = None) -> bool:
    """True when the path ``raw`` (relative to ``cwd``) is the state dir or inside it."""
    text = raw.strip()
    for name in ("CLAUDE_PROJECT_DIR", "PWD", "HOME"):
        for form in (f"${{{name}}}", f"${name}"):
            if form in text:
                value = str(project.root) if name == "CLAUDE_PROJECT_DIR" else (cwd if name == "PWD" else os.path.expanduser("~"))
                text = text.replace(form, value or "")
    text = os.path.expanduser(text)
    if not text:
        return False
    path = text if os.path.isabs(text) else os.path.join(cwd or str(project.root), text)
    candidates = {os.path.normpath(path)}
    candidates.add(os.path.realpath(path))
    for guarded in _guarded_dirs(project):
        for candidate in candidates:
            if candidate == guarded or candidate.startswith(guarded.rstrip(os.sep) + os.sep):
                return True
    return False


_OPERATORS = {";", "&&", "||", "|", "&", "|&", "(", ")", ";;", "\n"}
_WRAPPERS = {"sudo", "env", "command", "nohup", "time", "nice", "ionice", "doas", "builtin", "exec", "stdbuf", "timeout"}
_WRITE_ANY = {"rm", "rmdir", "unlink", "shred", "truncate", "touch", "chmod", "chown", "chgrp", "ln", "mkdir", "tee", "mv", "srm"}
_COPY = {"cp", "install", "rsync", "scp"}
_IN_PLACE = {"sed", "gsed", "perl", "ruby"}
_SQL_WRITE = r"(?i)\b(insert|update|delete|drop|create|alter|replace|vacuum|reindex|attach|pragma\s+\w+\s*=)\b|\.(restore|import|read)\b"
_SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}


def _tokens(command: str) -> list[str]:
    import shlex

    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return command.replace(";", " ; ").replace("|", " | ").replace(">", " > ").split()


def _bash_violation(project: Project, command: str, cwd: str | None, depth: int = 0) -> str | None:
    """What a Bash command would change inside the state dir, or None."""
    tokens = _tokens(command)
    segments: list[tuple[list[str], list[str], str]] = []  # (words, output redirection targets, operator after)
    words: list[str] = []
    targets: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token and all(ch in ";&|()<>" for ch in token):
            if ">" in token or "<" in token:
                target = tokens[index + 1] if index + 1 < len(tokens) else ""
                if ">" in token and not (token.endswith("&") and (target.isdigit() or target == "-")):
                    targets.append(target)
                index += 2  # an input redirection only reads
                continue
            segments.append((words, targets, token))
            words, targets = [], []
        else:
            words.append(token)
        index += 1
    segments.append((words, targets, ""))

    for position, (words, targets, _op) in enumerate(segments):
        hit = next((t for t in targets if _inside(project, t, cwd)), None)
        if hit:
            return f"redirecting output into {hit}"
        while words and (
            re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in _WRAPPERS or words[0].startswith("-")
            or re.fullmatch(r"\d+(\.\d+)?[smhd]?", words[0])
        ):
            words = words[1:]
        if not words:
            continue
        name = os.path.basename(words[0])
        args = words[1:]
        paths = [a for a in args if not a.startswith("-")]
        if name in _SHELLS and "-c" in args and depth < 2:
            script_at = args.index("-c") + 1
            if script_at < len(args):
                found = _bash_violation(project, args[script_at], cwd, depth + 1)
                if found:
                    return found
        if name in _WRITE_ANY:
            hit = next((p for p in paths if _inside(project, p, cwd)), None)
            if hit:
                return f"`{name}` on {hit}"
        elif name in _COPY:
            target = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--target-directory")), None)
            target = target or next((a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")), None)
            target = target or (paths[-1] if len(paths) >= 2 else None)
            if target and _inside(project, target.split(":", 1)[-1] if name in ("rsync", "scp") else target, cwd):
                return f"`{name}` into {target}"
        elif name in _IN_PLACE and any(a == "--in-place" or re.match(r"^-[a-zA-Z]*i", a) for a in args):
            hit = next((p for p in paths if _inside(project, p, cwd)), None)
            if hit:
                return f"`{name} -i` on {hit}"
        elif name == "dd":
            hit = next((a[3:] for a in args if a.startswith("of=") and _inside(project, a[3:], cwd)), None)
            if hit:
                return f"`dd` writing {hit}"
        elif name in ("sqlite3", "sqlite"):
            databases = [p for p in paths if _inside(project, p, cwd)]
            if databases and "-readonly" not in args:
                sql = " ".join(paths[paths.index(databases[0]) + 1 :])
                if not sql.strip() or re.search(_SQL_WRITE, sql) or re.search(_SQL_WRITE, command):
                    return f"`sqlite3` on {databases[0]} (read-only queries need -readonly and the SQL as an argument)"
        elif name == "find" and ("-delete" in args or any(
            a in ("-exec", "-execdir", "-ok") and i + 1 < len(args) and os.path.basename(args[i + 1]) in _WRITE_ANY | _COPY
            for i, a in enumerate(args)
        )):
            roots = []
            for a in args:
                if a.startswith("-") or a in ("!", "("):
                    break
                roots.append(a)
            hit = next((p for p in roots if _inside(project, p, cwd)), None)
            if hit:
                return f"`find … -delete/-exec` under {hit}"
        elif name == "xargs":
            rest = [a for a in args if not a.startswith("-")]
            if rest and os.path.basename(rest[0]) in _WRITE_ANY | _COPY:
                feeding: list[str] = []  # the words of the commands piped into xargs
                j = position
                while j > 0 and segments[j - 1][2] in ("|", "|&"):
                    feeding += segments[j - 1][0]
                    j -= 1
                hit = next((w for w in feeding if not w.startswith("-") and _inside(project, w, cwd)), None)
                if hit:
                    return f"`xargs {os.path.basename(rest[0])}` on paths under {hit}"
        elif name in ("cd", "pushd") and paths:  # later commands run there
            target = os.path.expanduser(paths[0])
            cwd = os.path.normpath(target if os.path.isabs(target) else os.path.join(cwd or str(project.root), target))
    return None


def pre_tool_use(project: Project, payload: dict) -> dict | None:
    """Deny direct edits of the state dir and Bash commands that write into it; allow the rest silently."""
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input") or {}
    if not isinstance(tool_input, dict):
        return None
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    what = None
    if tool in EDIT_TOOLS:
        raw = tool_input.get("file_path") or tool_input.get("notebook_path")
        if isinstance(raw, str) and raw and _inside(project, raw, cwd):
            what = f"{tool} of {raw} refused"
    elif tool == "Bash":
        command = tool_input.get("command")
        if isinstance(command, str) and _might_touch_state(project, command):
            found = _bash_violation(project, command, cwd)
            if found:
                what = f"Bash command refused: {found}"
    if what is None:
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "codemem: " + GUARD_REASON.format(what=what),
        }
    }


def _might_touch_state(project: Project, command: str) -> bool:
    """A cheap pre-check: only commands that name the state dir are parsed."""
    names = {".codemem", project.state_dir.name, str(project.state_dir)}
    return any(name and name in command for name in names)


# -- PreCompact / SessionEnd ----------------------------------------------------------------------


def record_session(project: Project, payload: dict, event: str) -> None:
    """Start a detached worker that writes this session's memory; return at once."""
    if not project.indexed:
        return
    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("transcript_path")
    if not session_id or not isinstance(transcript, str) or not transcript:
        return
    transcript = os.path.expanduser(transcript)
    try:
        size = os.stat(transcript).st_size
    except OSError:
        return
    detail = str(payload.get("trigger") or payload.get("reason") or "")
    argv = [
        sys.executable, "-m", "query_server.hooks.worker",
        "--event", event, "--session-id", session_id, "--transcript", transcript, "--upto", str(size),
        "--project", str(project.root), "--state-dir", str(project.state_dir), "--detail", detail,
    ]
    _spawn(project, argv)


def _spawn(project: Project, argv: list[str]) -> None:
    """Start ``argv`` detached (new session, stdin /dev/null, output to ``<state>/logs/hooks-worker.log``)."""
    logs = project.state_dir / "logs"
    logs.mkdir(exist_ok=True)
    log = str(logs / "hooks-worker.log")
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    try:
        os.posix_spawn(
            sys.executable, argv, env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
    except (AttributeError, NotImplementedError):  # no posix_spawn/setsid here: the portable way
        import subprocess

        with open(log, "ab") as out:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                             start_new_session=True, close_fds=True)


# -- entry point ----------------------------------------------------------------------------------


def _read_payload() -> dict:
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    stream = getattr(sys.stdin, "buffer", None)
    raw = stream.read().decode("utf-8", "replace") if stream is not None else sys.stdin.read()
    if not raw.strip():
        return {}
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError(f"hook input is a JSON {type(payload).__name__}, not an object")
    return payload


USAGE = (
    "usage: codemem hook <Event>   (Event: " + ", ".join(EVENTS) + ")\n"
    "Reads Claude Code's hook JSON on stdin and answers in its hook output format; "
    "`codemem init` writes these commands into .claude/settings.json.\n"
)


def main(argv: list[str] | None = None) -> int:
    """Run one hook; always exit 0 (a failure is logged to <state>/logs/hooks.log, never shown)."""
    args = list(sys.argv[2:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    event = args[0] if args else ""
    project: Project | None = None
    try:
        payload = _read_payload()
        event = event or str(payload.get("hook_event_name") or "")
        if event not in EVENTS:
            return 0
        project = Project(payload)
        output: dict | None = None
        if event == "SessionStart":
            output = session_start(project, payload)
        elif event == "PostToolUse":
            output = post_tool_use(project, payload)
        elif event == "PreToolUse":
            output = pre_tool_use(project, payload)
        else:
            record_session(project, payload, event)
        if output is not None:
            sys.stdout.write(json.dumps(output))  # ASCII (\u escapes): whatever the locale's encoding
            sys.stdout.flush()
    except Exception as exc:  # noqa: BLE001 - a hook must never block Claude Code
        if project is None:
            try:
                project = Project({})
            except Exception:  # noqa: BLE001
                project = None
        _log_error(project, event, exc)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--build-mentions"] and len(sys.argv) == 3:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        try:
            print(f"{stamp} {build_mentions(Path(sys.argv[2]).resolve())}", flush=True)
        except Exception as exc:  # noqa: BLE001 - one line in the worker log
            print(f"{stamp} mentions cache build failed: {type(exc).__name__}: {exc}", flush=True)
            sys.exit(1)
    else:
        sys.exit(main(sys.argv[1:]))

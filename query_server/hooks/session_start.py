"""SessionStart: the project's memory and index at a glance, as ``additionalContext``.

Memory counts per type, what changed since the last session, stale memories, index freshness
and the tools to use, within ~2,000 tokens. A project without a state dir gets a one-line hint.
Standard library only (see ``query_server.hooks.dispatch``).

What the stores say (``_facts``) is read at the end of a session for the next one: the server's
hook relay when it closes and the SessionEnd worker after it recorded the session
(``save_snapshot``) keep it in ``<state>/hooks/session_start.json`` with the size and mtime of the
ledger's and the manifest's files. A session that starts with those unchanged renders it without
opening either store (no sqlite3, ~20 ms less); otherwise the hook reads the stores as before. The
times ("3 h ago") and the freshness of the recently indexed files are checked as the session starts.
"""

import os
import time

from query_server.hooks.common import (
    BUSY_TIMEOUT_S,
    Project,
    additional_context,
    json_dumps,
    json_loads,
    log_error,
    memory_label,
    now_iso,
    read_text,
    write_atomic,
)

TYPE_CHECKING = False  # not typing.TYPE_CHECKING (see query_server.hooks.common)
if TYPE_CHECKING:
    from collections.abc import Iterator

    from resources.memory.ledger_reader import LedgerReader

CONTEXT_CHAR_BUDGET = 6_000
"""SessionStart context cap: 2,000 tokens at ~3 characters per token."""
HOOK_FILE_MAX_AGE_S = 7 * 86_400
"""Per-session hook state older than this is pruned at SessionStart."""
MTIME_CHECK_BUDGET_S = 0.001
MTIME_CHECKED_AT_LEAST = 32
"""Files whose mtimes a start checks whatever the budget (~5 µs each): a small project's answer is
complete, and the same on a busy machine as on a quiet one."""
RECENT_FILES_CHECKED = 1_000
CHANGED_MEMORIES_SHOWN = 8
STALE_MEMORIES_SHOWN = 10
TOOLS_LINE = (
    "Tools: before changing code, memory_search (decisions, patterns, gotchas) and code_search / get_symbol / "
    "get_related / impact_of_change; record decisions and learnings with memory_add; memory_get <id> shows a "
    "memory in full."
)
SNAPSHOT_FILE = "session_start.json"
SNAPSHOT_VERSION = 2
"""Version 2: the facts as JSON, then NUL and the recently indexed files as ``<mtime_ns> <path>``
entries separated by NUL (read lazily: a start checks as many as its mtime budget allows, a
hundred or so of the thousand, and parses no more)."""
STORE_FILES = ("memory.db", "memory.db-wal", "index.db", "index.db-wal", "memory-server-copy.db", "memory-server-copy.db-wal")
"""The files whose size and mtime say whether a snapshot still describes the stores."""
STATE_FILE = "last_session.json"
PER_SESSION_PREFIXES = ("shown-", "recorded-", "edited-", "prompted-")
"""The hooks' per-session files (PostToolUse, the worker, UserPromptSubmit), pruned after ``HOOK_FILE_MAX_AGE_S``."""


def session_start(project: Project, payload: dict) -> dict | None:
    """The project's memory and index at a glance, as additionalContext."""
    if not project.indexed:
        return additional_context(
            "SessionStart",
            "codemem: this project has no codemem state yet — run `codemem index .` to get code search and project "
            "memory (memory_search, code_search) in Claude Code.",
        )
    session_id = str(payload.get("session_id") or "")
    state = _session_state(project)
    again = bool(session_id) and state.get("session_id") == session_id  # resume, clear, compact: same baseline
    facts = None if again else _saved_facts(project, state)
    if facts is None:
        facts = _facts(project, state, again, refresh_mentions=True)
        _prune_hook_files(project)  # else the read ahead did, off the session's start
    if facts["ledger"] and not again:
        write_atomic(os.path.join(project.hooks_dir, STATE_FILE),
                     json_dumps({"session_id": session_id, "started_at": now_iso(), "previous_at": facts["baseline"]}))
    return additional_context("SessionStart", _fit(_render(project, facts, time.time()), CONTEXT_CHAR_BUDGET))


def save_snapshot(project: Project) -> bool:
    """Read the stores now for the next session's SessionStart (``<state>/hooks/session_start.json``);
    False (and nothing written) when they changed while being read or hold nothing yet, or when the
    manifest is in PostgreSQL (server mode: it changes with no file here changing)."""
    from resources.manifest_reader import in_postgres

    if not project.indexed or in_postgres(project.state_dir):
        return False
    key = _store_key(project)
    state = _session_state(project)
    facts = _facts(project, state, again=False, refresh_mentions=False)
    if _store_key(project) != key:
        return False
    recent = facts["index"].pop("recent", [])
    header = json_dumps({"version": SNAPSHOT_VERSION, "started_at": state.get("started_at"), "key": key, "facts": facts})
    write_atomic(os.path.join(project.hooks_dir, SNAPSHOT_FILE),
                 "\0".join([header, *(f"{mtime_ns} {path}" for path, mtime_ns in recent)]))
    _prune_hook_files(project)
    return True


def read_ahead(root: str, state_dir: str) -> bool:
    """``save_snapshot`` for the project at ``root`` with its state in ``state_dir``, from a process
    that is not a hook (the relay as its server stops, the SessionEnd worker, ``codemem index``): a
    failure goes to ``<state>/logs/hooks.log`` and is never raised. True when it was saved."""
    project = Project({}, environ={"CODEMEM_PROJECT_ROOT": root, "CODEMEM_STATE_DIR": state_dir})
    try:
        return save_snapshot(project)
    except Exception as exc:  # noqa: BLE001 - the next SessionStart reads the stores itself
        log_error(project, "SessionStart snapshot", exc)
        return False


def _session_state(project: Project) -> dict:
    """The hook state of the last SessionStart: its session id, when it started, its baseline."""
    try:
        state = json_loads(read_text(os.path.join(project.hooks_dir, STATE_FILE)))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _store_key(project: Project) -> list:
    """What changes whenever the ledger or the manifest does: each database file's and write-ahead
    log's size, mtime and header (a log's salts change at each restart, its size at each commit; a
    database's change counter at each commit outside WAL mode). A missing and an empty log are the
    same (a read-only reader creates an empty one)."""
    key: list = []
    for name in STORE_FILES:
        try:
            fd = os.open(os.path.join(project.state_dir, name), os.O_RDONLY)
        except OSError:
            key.append(None)
            continue
        try:
            stat = os.fstat(fd)
            header = os.read(fd, 32).hex() if stat.st_size else ""
        finally:
            os.close(fd)
        key.append([stat.st_size, stat.st_mtime_ns, header] if stat.st_size or not name.endswith("-wal") else None)
    return key


def _saved_facts(project: Project, state: dict) -> dict | None:
    """The snapshot's facts when they still hold: same stores, same last session."""
    try:
        header, _, recent = read_text(os.path.join(project.hooks_dir, SNAPSHOT_FILE)).partition("\0")
        saved = json_loads(header)
    except (OSError, ValueError):
        return None
    if (not isinstance(saved, dict) or saved.get("version") != SNAPSHOT_VERSION
            or saved.get("started_at") != state.get("started_at") or saved.get("key") != _store_key(project)):
        return None
    facts = saved.get("facts")
    if not isinstance(facts, dict) or not isinstance(facts.get("index"), dict):
        return None
    if "files" in facts["index"]:
        facts["index"]["recent"] = _recent_entries(recent)
    return facts


def _recent_entries(block: str) -> "Iterator[tuple[str, int]]":
    """The snapshot's recently indexed files, (path, mtime_ns), parsed one at a time as they are
    checked; an entry that is not one ends them."""
    start, size = 0, len(block)
    while start < size:
        end = block.find("\0", start)
        if end == -1:
            end = size
        mtime_ns, _, path = block[start:end].partition(" ")
        if not path or not mtime_ns.isdigit():
            return
        yield path, int(mtime_ns)
        start = end + 1


# -- what the stores say ----------------------------------------------------------------------------


def _facts(project: Project, state: dict, again: bool, *, refresh_mentions: bool) -> dict:
    """What SessionStart reports, read from the ledger and the manifest: the memory lines (a line
    is text, or [text, moment, text] around a time shown relative to the session's start), the
    index's facts, the baseline the changes are counted from, and whether a ledger exists."""
    from resources.memory.ledger_reader import LedgerReader

    facts: dict = {"ledger": False, "baseline": None, "memory": [], "index": _index_facts(project)}
    ledger = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S, project.kept)
    if ledger is None:
        return facts
    try:
        baseline = state.get("previous_at") if again else (state.get("started_at") or ledger.last_session_created_at())
        facts.update(ledger=True, baseline=baseline, memory=_memory_lines(ledger, baseline))
        if refresh_mentions:
            from query_server.hooks.mentions import mentions_cache, release_mentions

            cache = mentions_cache(project, ledger)  # bring PostToolUse's lookup cache up to date (or start its build)
            if cache is not None:
                release_mentions(project, cache)
    finally:
        ledger.close()
    return facts


def _memory_lines(ledger: "LedgerReader", baseline: str | None) -> list:
    lines: list = []
    counts: dict[str, list[int]] = {}
    for memory_type, deleted, count in ledger.counts():
        counts.setdefault(memory_type, [0, 0])[1 if deleted else 0] += count
    active = sum(c[0] for c in counts.values())
    deleted = sum(c[1] for c in counts.values())
    per_type = ", ".join(f"{t} {c[0]:,}" for t, c in sorted(counts.items(), key=lambda item: -item[1][0]) if c[0])
    lines.append(
        f"Memories: {active:,} active" + (f" ({per_type})" if per_type else " — none yet; record decisions with memory_add")
        + (f"; {deleted:,} soft-deleted" if deleted else "")
    )
    if baseline:
        created, updated, removed = ledger.change_counts(baseline)
        since = _moment(baseline)
        if created or updated or removed:
            lines.append(["Since the last session (", since, f"): {created} new, {updated} updated, {removed} deleted"])
            for memory_id, memory_type, content, metadata, created_at in ledger.changed(baseline, CHANGED_MEMORIES_SHOWN):
                mark = "+" if created_at > baseline else "~"
                lines.append(f"  {mark} {memory_label(memory_type, content, metadata, 140)} (id {memory_id})")
        else:
            lines.append(["Since the last session (", since, "): no memory changed"])
    stale_total, stale = ledger.stale(STALE_MEMORIES_SHOWN)
    if stale_total:
        lines.append(
            f"Stale memories (their anchored code changed since): {stale_total} — check them against the code "
            "before relying on them, then memory_update:"
        )
        lines += [f"  ! {memory_label(t, c, m, 120)} (id {i})" for i, t, c, m in stale]
    return lines


def _index_facts(project: Project) -> dict:
    """The manifest's file count, when it last changed, and its most recently indexed files with
    their recorded mtimes (compared with the disk's when the session starts)."""
    from resources.manifest_reader import ManifestReader, in_postgres

    manifest = ManifestReader.open(project.index_path, BUSY_TIMEOUT_S, project.kept)
    if manifest is None and in_postgres(project.state_dir):
        return {"line": "Index: kept in PostgreSQL (server mode) — index_status tells its state while codemem serves this project."}
    if manifest is None:
        return {"line": "Index: no code index yet — run `codemem index .` for code_search, get_symbol and get_related."}
    try:
        files = manifest.file_count()
        if not files:
            return {"line": "Index: empty — run `codemem index .`."}
        recent = manifest.recently_indexed(RECENT_FILES_CHECKED)
    finally:
        manifest.close()
    return {"files": files, "last": _moment(max(row[2] for row in recent)),
            "recent": [[path, mtime_ns] for path, mtime_ns, _ in recent]}


def _moment(iso: str) -> list:
    """[POSIX time, "YYYY-MM-DD HH:MM UTC"] of an ISO time; [None, the text] when it is not one."""
    from datetime import UTC, datetime

    try:
        then = datetime.fromisoformat(iso)
    except ValueError:
        return [None, iso]
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return [then.timestamp(), then.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")]


# -- rendering, as the session starts ---------------------------------------------------------------


def _ago(moment: list, now: float) -> str:
    when, stamp = moment
    if when is None:
        return stamp
    seconds = max(0.0, now - when)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{stamp} ({int(seconds // size)} {unit} ago)"
    return f"{stamp} (just now)"


def _render(project: Project, facts: dict, now: float) -> list[str]:
    lines = [f"codemem — project memory and code index for {os.path.basename(project.root)}"]
    lines += [line if isinstance(line, str) else line[0] + _ago(line[1], now) + line[2] for line in facts["memory"]]
    lines += _index_lines(project, facts["index"], now)
    lines.append(TOOLS_LINE)
    return lines


def _index_lines(project: Project, index: dict, now: float) -> list[str]:
    """Files indexed, when the index last changed, and whether recently indexed files changed since
    (their recorded mtimes against the disk's, for ``MTIME_CHECK_BUDGET_S`` at most)."""
    if "line" in index:
        return [index["line"]]
    files = index["files"]
    checked = changed = 0
    deadline = time.perf_counter() + MTIME_CHECK_BUDGET_S
    for path, mtime_ns in index["recent"]:
        try:
            if os.stat(os.path.join(project.root, path)).st_mtime_ns != mtime_ns:
                changed += 1
        except OSError:
            changed += 1
        checked += 1
        if checked >= MTIME_CHECKED_AT_LEAST and time.perf_counter() > deadline:
            break
    line = f"Index: {files:,} files, last indexed {_ago(index['last'], now)}"
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
            if entry.name.startswith(PER_SESSION_PREFIXES) and entry.stat().st_mtime < cutoff:  # per-session state
                os.unlink(entry.path)
        except OSError:
            continue


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

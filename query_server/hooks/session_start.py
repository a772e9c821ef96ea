"""SessionStart: the project's memory and index at a glance, as ``additionalContext``.

Memory counts per type, what changed since the last session, stale memories, index freshness
and the tools to use, within ~2,000 tokens. A project without a state dir gets a one-line hint.
Standard library only (see ``query_server.hooks.dispatch``).
"""

from __future__ import annotations

import os
import time

from query_server.hooks.common import (
    BUSY_TIMEOUT_S,
    Project,
    additional_context,
    json_dumps,
    json_loads,
    memory_label,
    now_iso,
    read_text,
    write_atomic,
)
from query_server.hooks.mentions import mentions_cache
from resources.manifest_reader import ManifestReader
from resources.memory.ledger_reader import LedgerReader

CONTEXT_CHAR_BUDGET = 6_000
"""SessionStart context cap: 2,000 tokens at ~3 characters per token."""
HOOK_FILE_MAX_AGE_S = 7 * 86_400
"""Per-session hook state older than this is pruned at SessionStart."""
MTIME_CHECK_BUDGET_S = 0.001
RECENT_FILES_CHECKED = 1_000
CHANGED_MEMORIES_SHOWN = 8
STALE_MEMORIES_SHOWN = 10
TOOLS_LINE = (
    "Tools: before changing code, memory_search (decisions, patterns, gotchas) and code_search / get_symbol / "
    "get_related / impact_of_change; record decisions and learnings with memory_add; memory_get <id> shows a "
    "memory in full."
)


def session_start(project: Project, payload: dict) -> dict | None:
    """The project's memory and index at a glance, as additionalContext."""
    if not project.indexed:
        return additional_context(
            "SessionStart",
            "codemem: this project has no codemem state yet — run `codemem index .` to get code search and project "
            "memory (memory_search, code_search) in Claude Code.",
        )
    lines = [f"codemem — project memory and code index for {os.path.basename(project.root)}"]
    ledger = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S)
    if ledger is not None:
        try:
            lines += _memory_sections(project, ledger, payload)
            cache = mentions_cache(project, ledger)  # bring PostToolUse's lookup cache up to date (or start its build)
            if cache is not None:
                cache.close()
        finally:
            ledger.close()
    lines += _index_section(project)
    lines.append(TOOLS_LINE)
    _prune_hook_files(project)
    return additional_context("SessionStart", _fit(lines, CONTEXT_CHAR_BUDGET))


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


def _memory_sections(project: Project, ledger: LedgerReader, payload: dict) -> list[str]:
    lines: list[str] = []
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

    baseline = _session_baseline(project, ledger, str(payload.get("session_id") or ""))
    if baseline:
        created, updated, removed = ledger.change_counts(baseline)
        if created or updated or removed:
            lines.append(
                f"Since the last session ({_ago(baseline)}): {created} new, {updated} updated, {removed} deleted"
            )
            for memory_id, memory_type, content, metadata, created_at in ledger.changed(baseline, CHANGED_MEMORIES_SHOWN):
                mark = "+" if created_at > baseline else "~"
                lines.append(f"  {mark} {memory_label(memory_type, content, metadata, 140)} (id {memory_id})")
        else:
            lines.append(f"Since the last session ({_ago(baseline)}): no memory changed")

    stale_total, stale = ledger.stale(STALE_MEMORIES_SHOWN)
    if stale_total:
        lines.append(
            f"Stale memories (their anchored code changed since): {stale_total} — check them against the code "
            "before relying on them, then memory_update:"
        )
        lines += [f"  ! {memory_label(t, c, m, 120)} (id {i})" for i, t, c, m in stale]
    return lines


def _session_baseline(project: Project, ledger: LedgerReader, session_id: str) -> str | None:
    """When the previous session started (hook state), else when the last session memory was made.

    A SessionStart of the same session again (resume, clear, compact) keeps the first baseline.
    """
    state_file = os.path.join(project.hooks_dir, "last_session.json")
    try:
        state = json_loads(read_text(state_file))
        if not isinstance(state, dict):
            state = {}
    except (OSError, ValueError):
        state = {}
    if session_id and state.get("session_id") == session_id:
        return state.get("previous_at")
    baseline = state.get("started_at") or ledger.last_session_created_at()
    write_atomic(state_file, json_dumps({"session_id": session_id, "started_at": now_iso(), "previous_at": baseline}))
    return baseline


def _index_section(project: Project) -> list[str]:
    """Files indexed, when the index last changed, and whether recently indexed files changed since.

    The most recently indexed files' ``indexed_at`` is the last index time, and their recorded
    mtimes are compared with the disk's for ``MTIME_CHECK_BUDGET_S`` at most.
    """
    manifest = ManifestReader.open(project.index_path, BUSY_TIMEOUT_S)
    if manifest is None:
        return ["Index: no code index yet — run `codemem index .` for code_search, get_symbol and get_related."]
    try:
        files = manifest.file_count()
        if not files:
            return ["Index: empty — run `codemem index .`."]
        recent = manifest.recently_indexed(RECENT_FILES_CHECKED)
    finally:
        manifest.close()
    last = max(row[2] for row in recent)
    checked = changed = 0
    deadline = time.perf_counter() + MTIME_CHECK_BUDGET_S
    for path, mtime_ns, _ in recent:
        try:
            if os.stat(os.path.join(project.root, path)).st_mtime_ns != mtime_ns:
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

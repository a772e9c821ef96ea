"""notes_sync and notes_capture: git notes as a live memory store (seed 003), over the shared stores.

``notes_sync`` merges what ``git fetch`` brought, imports the notes into the ledger and projects what
it created (so fetched memories appear in memory_search), then writes the ledger's changes into the
notes. Every index run calls it when live notes are on (``CodeMemService._run_index``): a few
``git for-each-ref`` when nothing arrived.

``notes_capture`` ties the decisions recorded since a commit's parent to that commit (the post-commit
hook's worker calls it): each becomes a note in ``refs/notes/cs/decisions``.
"""

from __future__ import annotations

from collections import Counter

from query_server.memory.stores import MemoryStores
from query_server.memory.writes import MemoryWrites
from query_server.paging import ToolError
from resources.memory.git_repo import GitNotesError
from resources.memory.notes_sync import SyncReport
from resources.schemas.memory import MemoryUpdateInput
from resources.schemas.memory.kinds import parse_iso
from resources.schemas.memory.notes import (
    NAMESPACES,
    PRIMARY_NAMESPACE,
    NotesCaptureInput,
    NotesCaptureResult,
    NotesSyncInput,
    NotesSyncResult,
    named_commit,
    namespace_of,
)

PROJECT_BATCH = 128


def notes_sync(stores: MemoryStores, request: NotesSyncInput) -> NotesSyncResult:
    """Merge fetched notes, import them into the ledger (and project them), export the ledger's changes."""
    report = stores.notes.sync(rebuild=request.rebuild)
    ids = report.changed_ids
    for start in range(0, len(ids), PROJECT_BATCH):
        stores.project(ids[start : start + PROJECT_BATCH])
    return _result(stores, report)


def notes_capture(stores: MemoryStores, writes: MemoryWrites, request: NotesCaptureInput) -> NotesCaptureResult:
    """Tie the decisions recorded since ``request.since`` (default: the commit's parent) to the commit."""
    repo = stores.notes.require()
    try:
        sha = repo.commit(request.commit)
        since = request.since or repo.parent_time(sha)
    except GitNotesError as exc:
        raise ToolError(str(exc)) from exc
    try:
        after = parse_iso(since) if since else None
    except ValueError as exc:
        raise ToolError(f"since {since!r} is not an ISO 8601 time — e.g. 2025-01-31T14:05:00Z") from exc
    decisions = NAMESPACES["decisions"]
    captured: list[str] = []
    errors: list[dict[str, str]] = []
    for row in stores.ledger.iter_memories(memory_types=[decisions.memory_type], include_deleted=False):
        if named_commit(row.metadata) is not None or namespace_of(row.memory_type, row.metadata) != decisions:
            continue
        if after is not None and parse_iso(row.created_at) <= after:
            continue
        try:
            writes.memory_update(
                MemoryUpdateInput(memory_id=row.id, memory_type=row.memory_type, metadata={"commit_sha": sha}),
                request_id=f"codemem-notes-capture:{sha}:{row.id}",
            )
        except ToolError as exc:  # changed or deleted meanwhile: the others are still tied
            errors.append({"memory_id": row.id, "error": str(exc)})
            continue
        captured.append(row.id)
    try:
        errors += stores.notes.export().errors
    except GitNotesError as exc:
        errors.append({"error": f"{exc} — the decisions are tied to the commit; the next sync writes their notes"})
    return NotesCaptureResult(commit=sha, captured=captured, note_ref=decisions.ref, errors=errors)


def _result(stores: MemoryStores, report: SyncReport) -> NotesSyncResult:
    """The tool's answer, with the project memories per namespace that live in notes now."""
    counts: Counter[str] = Counter()
    for row in stores.ledger.iter_memories(memory_types=list(PRIMARY_NAMESPACE), include_deleted=False):
        namespace = namespace_of(row.memory_type, row.metadata)
        if namespace is not None and named_commit(row.metadata) is not None:
            counts[namespace.name] += 1
    return NotesSyncResult(
        merged_refs=report.merged_refs, imported=len(report.imported), updated=len(report.updated),
        notes_written=report.notes_written, namespaces={name: counts[name] for name in NAMESPACES if counts[name]},
        errors=report.errors,
    )

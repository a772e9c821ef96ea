"""record_review and review_findings: code review findings as memories in the reviews namespace (seed
003 US-017, FR-018), attached to the reviewed commit.

Each finding is one ``session`` memory with ``metadata.namespace = reviews`` (searchable on its own,
as FR-018 asks), its severity, category, file, line, status and resolution, and the reviewed commit
in ``metadata.commit_sha``; the findings of one commit share its note in ``refs/notes/cs/reviews``.
A fix resolves one with memory_update (``metadata.status = resolved``, ``metadata.resolution``),
which rewrites the note (FR-021).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

from query_server.memory.stores import MemoryStores
from query_server.memory.writes import MemoryWrites
from query_server.paging import ToolError, decode_cursor, encode_cursor
from resources.memory.git_repo import GitNotesError, GitRepo
from resources.schemas.memory import MemoryAddInput, MemoryBulkAddInput
from resources.schemas.memory.notes import (
    NAMESPACE_KEY,
    NAMESPACES,
    SEVERITY_ORDER,
    RecordReviewInput,
    RecordReviewResult,
    ReviewFindingsInput,
    ReviewFindingsResult,
    StoredFinding,
    named_commit,
)

REVIEWS = NAMESPACES["reviews"]
IMPORTANCE = {"critical": 0.9, "high": 0.75, "medium": 0.55, "low": 0.4}


def _repo(stores: MemoryStores) -> GitRepo:
    repo = stores.notes.repo()
    if repo is None:
        raise ToolError(f"{stores.settings.resolved_root()} is not in a git repository — review findings are attached to "
                        "a commit (git init, and a first commit)")
    return repo


def _commit(repo: GitRepo, rev: str) -> str:
    try:
        return repo.commit(rev)
    except GitNotesError as exc:
        raise ToolError(str(exc)) from exc


def record_review(stores: MemoryStores, writes: MemoryWrites, request: RecordReviewInput) -> RecordReviewResult:
    """Store each finding as a memory tied to the reviewed commit, in one transaction (all or none)."""
    repo = _repo(stores)
    sha = _commit(repo, request.commit)
    review_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"codemem-review:{sha}:{request.request_id}")) if request.request_id else str(uuid.uuid4())
    memories = []
    for finding in request.findings:
        metadata = {
            NAMESPACE_KEY: REVIEWS.name, "commit_sha": sha, "review_id": review_id, "severity": finding.severity,
            "category": finding.category, "summary": finding.summary, "status": "open",
            "tags": ["review", finding.category, finding.severity],
            **{key: value for key, value in (("file", finding.file), ("line", finding.line), ("spec", request.spec)) if value is not None},
        }
        content = finding.summary + (f"\n\n{finding.details}" if finding.details.strip() else "")
        memories.append(MemoryAddInput(memory_type=REVIEWS.memory_type, content=content, metadata=metadata,
                                       importance_score=IMPORTANCE[finding.severity]))
    added = writes.memory_bulk_add(MemoryBulkAddInput(memories=memories, request_id=request.request_id, scope="project"))
    if added.errors:
        raise ToolError("; ".join(f"finding {e.get('index')}: {e['error']}" for e in added.errors[:5]) + " — nothing was stored")
    counts = Counter(f.severity for f in request.findings)
    detail = ", ".join(f"{counts[s]} {s}" for s in SEVERITY_ORDER if counts[s])
    note = repo.note(REVIEWS.ref, sha) if stores.notes.enabled() else None
    return RecordReviewResult(
        commit=sha, finding_ids=added.added_ids, note_written=note is not None and all(i in note for i in added.added_ids),
        summary=f"Code review: {len(request.findings)} finding{'s' if len(request.findings) != 1 else ''} ({detail})",
    )


def review_findings(stores: MemoryStores, request: ReviewFindingsInput) -> ReviewFindingsResult:
    """The stored findings (of one commit, or all), most severe first, then oldest first."""
    key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor"}), sort_keys=True)
    offset = decode_cursor(request.cursor, key)
    repo = _repo(stores) if request.commit else stores.notes.repo()
    wanted = _commit(repo, request.commit) if request.commit and repo is not None else None
    resolved: dict[str, str | None] = {}
    found: list[StoredFinding] = []
    for row in stores.ledger.iter_memories(memory_types=[REVIEWS.memory_type], include_deleted=False):
        meta = row.metadata
        if meta.get(NAMESPACE_KEY) != REVIEWS.name:
            continue
        status = str(meta.get("status") or "open")
        if request.status != "all" and status != request.status:
            continue
        named = named_commit(meta)
        commit = None
        if named is not None:
            if named[1] not in resolved:
                resolved[named[1]] = repo.resolve(named[1]) if repo is not None else None
            commit = resolved[named[1]] or named[1]
        if wanted is not None and commit != wanted:
            continue
        summary = str(meta.get("summary") or (row.content.splitlines() or [""])[0])
        found.append(StoredFinding(
            id=row.id, commit=commit, severity=str(meta.get("severity") or "medium"), category=str(meta.get("category") or "quality"),
            summary=summary, details=row.content.removeprefix(summary).strip(), file=meta.get("file"),
            line=meta.get("line") if isinstance(meta.get("line"), int) else None, status=status,
            resolution=meta.get("resolution"), version=row.version, created_at=row.created_at,
        ))
    rank = {severity: index for index, severity in enumerate(SEVERITY_ORDER)}
    found.sort(key=lambda f: (rank.get(f.severity, len(rank)), f.created_at, f.id))
    page = found[offset : offset + request.limit]
    more = len(found) > offset + request.limit
    return ReviewFindingsResult(results=page, total=len(found), next_cursor=encode_cursor(offset + len(page), key) if more else None)

"""Git notes as a live memory store (seed 003): the ``refs/notes/cs/<namespace>`` namespaces mapped onto
codemem's memory types, and the inputs and results of the tools over them (notes_sync, notes_capture,
record_review, review_findings) and of level-3 hydration (memory_get's ``include_files``).

A namespace is not a second taxonomy: it is one memory type plus, where a type hosts several
namespaces, the memory's ``metadata.namespace`` (a design memory is a decision unless its metadata says
``namespace: inception`` or ``research``). Types without a namespace (component, function, test_history,
user_preference: derived from code and tests, or personal) never become notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from resources.schemas.base import Schema
from resources.schemas.limits import ToolInput
from resources.schemas.memory.kinds import MemoryValidationError

NOTES_PREFIX = "refs/notes/cs/"
"""Where the namespaces live: ``refs/notes/cs/<namespace>`` (FR-005)."""
NAMESPACE_KEY = "namespace"
"""The metadata key that names a memory's namespace where its type hosts several."""
COMMIT_KEYS = ("commit_sha", "commit", "git_commit")
"""Metadata keys naming the commit a memory belongs to, first found wins."""


@dataclass(frozen=True)
class Namespace:
    """One notes namespace: the memory type its memories are, what it holds, the metadata a capture fills."""

    name: str
    memory_type: str
    holds: str
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """The notes ref, ``refs/notes/cs/<name>``."""
        return NOTES_PREFIX + self.name


NAMESPACES: dict[str, Namespace] = {ns.name: ns for ns in (
    Namespace("inception", "design", "problem statements, scope, success criteria", {"design_type": "Specification", "status": "Proposed"}),
    Namespace("elicitation", "requirements", "requirement clarifications and constraints"),
    Namespace("research", "design", "external findings and technology evaluations", {"design_type": "Architecture", "status": "Proposed"}),
    Namespace("decisions", "design", "architecture decision records", {"design_type": "ADR", "status": "Accepted"}),
    Namespace("progress", "session", "task completions and milestones"),
    Namespace("blockers", "session", "obstacles and their resolutions", {"status": "unresolved"}),
    Namespace("reviews", "session", "code review findings", {"status": "open"}),
    Namespace("learnings", "code_pattern", "technical insights and gotchas"),
    Namespace("retrospective", "session", "post-mortems"),
    Namespace("patterns", "code_pattern", "cross-spec generalizations and conventions"),
)}
"""The namespaces of seed 003 FR-004, in its order."""
PRIMARY_NAMESPACE = {"design": "decisions", "session": "progress", "code_pattern": "patterns", "requirements": "elicitation"}
"""The namespace of a memory of each hosting type whose metadata names none."""
NAMESPACE_HELP = ", ".join(f"{ns.name} ({ns.memory_type})" for ns in NAMESPACES.values())


def parse_namespace(value: str) -> Namespace:
    """The namespace called ``value`` (``cs/decisions`` and ``refs/notes/cs/decisions`` too).

    Raises:
        MemoryValidationError: An unknown namespace, with the list of known ones.
    """
    name = str(value).strip().lower().removeprefix(NOTES_PREFIX).removeprefix("cs/")
    found = NAMESPACES.get(name)
    if found is None:
        raise MemoryValidationError(f"unknown namespace {value!r} — use one of {', '.join(NAMESPACES)}")
    return found


def namespace_of(memory_type: str, metadata: Mapping[str, Any]) -> Namespace | None:
    """The namespace a memory's note goes to (None: its type has none; an unknown or mismatched
    ``metadata.namespace`` is refused by ``check_namespace`` when the memory is written)."""
    named = metadata.get(NAMESPACE_KEY)
    if isinstance(named, str) and named.strip():
        found = NAMESPACES.get(named.strip().lower())
        return found if found is not None and found.memory_type == memory_type else None
    primary = PRIMARY_NAMESPACE.get(str(memory_type))
    return NAMESPACES[primary] if primary else None


def check_namespace(memory_type: str, metadata: Mapping[str, Any]) -> None:
    """Refuse a ``metadata.namespace`` that is unknown or belongs to another memory type.

    Raises:
        MemoryValidationError: Saying which namespaces the memory type may name.
    """
    named = metadata.get(NAMESPACE_KEY)
    if named is None:
        return
    allowed = [ns.name for ns in NAMESPACES.values() if ns.memory_type == memory_type]
    if not isinstance(named, str):
        raise MemoryValidationError(f"metadata.{NAMESPACE_KEY}: must be a string, one of {', '.join(allowed) or 'none'}")
    namespace = NAMESPACES.get(named.strip().lower())
    if namespace is None:
        raise MemoryValidationError(
            f"metadata.{NAMESPACE_KEY}: unknown namespace {named!r} — {memory_type} memories may name "
            f"{', '.join(allowed) or 'none (leave it out)'}; the namespaces are {NAMESPACE_HELP}"
        )
    if namespace.memory_type != memory_type:
        hint = f"use one of {', '.join(allowed)}" if allowed else f"{memory_type} memories have no notes namespace; leave it out"
        raise MemoryValidationError(
            f"metadata.{NAMESPACE_KEY}: namespace {namespace.name} holds {namespace.memory_type} memories, not {memory_type} — {hint}"
        )


def named_commit(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    """(key, revision) of the commit a memory's metadata names, if any."""
    for key in COMMIT_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return key, value.strip()
    return None


# -- notes_sync and notes_capture --------------------------------------------------------------------------
class NotesSyncInput(ToolInput):
    """Bring the ledger and the ``refs/notes/cs/*`` notes in step."""

    rebuild: bool = Field(default=False, description="Re-read every note of every namespace and rewrite every note a project memory belongs to (idempotent), instead of only what changed since the last sync.")


class NotesSyncResult(Schema):
    """What a sync did, in both directions."""

    merged_refs: list[str] = Field(default_factory=list, description="Namespaces whose fetched notes (refs/notes/remotes/<remote>/cs/*) were merged into the local ones.")
    imported: int = Field(default=0, description="Memories created in the ledger from notes.")
    updated: int = Field(default=0, description="Ledger memories replaced by a newer version from a note (or deleted by a note's tombstone).")
    notes_written: int = Field(default=0, description="Notes written or rewritten from the ledger.")
    namespaces: dict[str, int] = Field(default_factory=dict, description="Memories per namespace in the notes now.")
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{memory_id or note, error} for what could not be synced (retried at the next sync).")


class NotesCaptureInput(ToolInput):
    """Attach the decisions made since the previous commit to a commit."""

    commit: str = Field(default="HEAD", min_length=1, max_length=200, description="The commit (a SHA, a branch, HEAD...).")
    since: str | None = Field(default=None, max_length=64, description="Only decisions recorded after this time (ISO 8601); default: the commit time of the commit's first parent (all untied decisions for a root commit).")


class NotesCaptureResult(Schema):
    """Which decisions were tied to the commit."""

    commit: str
    captured: list[str] = Field(default_factory=list, description="Ids of the design memories now tied to the commit (metadata.commit_sha).")
    note_ref: str = NOTES_PREFIX + "decisions"
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{memory_id, error} for a decision not tied, or a note not written yet (the next sync writes it).")


# -- reviews ---------------------------------------------------------------------------------------------
Severity = Literal["critical", "high", "medium", "low"]
ReviewCategory = Literal["security", "performance", "architecture", "quality", "tests", "documentation"]
SEVERITY_ORDER: tuple[str, ...] = ("critical", "high", "medium", "low")


class ReviewFinding(ToolInput):
    """One finding of a code review (seed 003 FR-018)."""

    severity: Severity = Field(description="critical, high, medium or low.")
    category: ReviewCategory = Field(description="security, performance, architecture, quality, tests or documentation.")
    summary: str = Field(min_length=1, max_length=200, description="One line: what is wrong.")
    details: str = Field(default="", max_length=20_000, description="The full finding with remediation guidance.")
    file: str | None = Field(default=None, max_length=1_000, description="Repo-relative file the finding is about.")
    line: int | None = Field(default=None, ge=1, description="Line in that file (1-based).")

    @field_validator("severity", "category", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class RecordReviewInput(ToolInput):
    """Store a code review's findings, attached to the reviewed commit in the reviews namespace."""

    commit: str = Field(default="HEAD", min_length=1, max_length=200, description="The reviewed commit (a SHA, a branch, HEAD...).")
    findings: list[ReviewFinding] = Field(min_length=1, max_length=500, description="The findings; each becomes one searchable memory.")
    spec: str | None = Field(default=None, max_length=200, description="The specification or feature the review belongs to.")
    request_id: str | None = Field(default=None, min_length=1, max_length=200, description="Idempotency key: a retried call with the same key stores nothing twice.")


class RecordReviewResult(Schema):
    """Where the findings went."""

    commit: str = Field(description="The reviewed commit's full SHA.")
    note_ref: str = NOTES_PREFIX + "reviews"
    finding_ids: list[str] = Field(description="The memory id of each finding, in the order given.")
    summary: str = Field(description='"Code review: N findings (X critical, Y high)".')
    note_written: bool = Field(description="False when git notes are off in this repository (`codemem init --git-notes`); the findings are stored either way.")


class ReviewFindingsInput(ToolInput):
    """Read back the findings of code reviews."""

    commit: str | None = Field(default=None, max_length=200, description="Only the findings on this commit (a SHA, a branch, HEAD...); all reviewed commits when omitted.")
    status: Literal["open", "resolved", "all"] = Field(default="open", description="open (default), resolved or all.")
    limit: int = Field(default=50, ge=1, le=100, description="Findings per page (max 100).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")


class StoredFinding(Schema):
    """A finding as stored (a session memory in the reviews namespace)."""

    id: str
    commit: str | None
    severity: str
    category: str
    summary: str
    details: str
    file: str | None = None
    line: int | None = None
    status: str = "open"
    resolution: str | None = None
    version: int
    created_at: str


class ReviewFindingsResult(Schema):
    """Findings, most severe first; resolve one with memory_update (metadata status resolved, resolution)."""

    results: list[StoredFinding]
    total: int
    next_cursor: str | None = None


# -- level-3 hydration -----------------------------------------------------------------------------------
class CommitFile(Schema):
    """A file a memory concerns, as it was at the memory's commit (``git show <sha>:<path>``)."""

    path: str
    commit: str
    content: str | None = Field(default=None, description="The file's text at that commit (cut to the response budget; see truncated).")
    truncated: bool = False
    error: str | None = Field(default=None, description="Why there is no content (not in that commit, binary, over the budget).")

"""The read tools' inputs and results: memory_get (the stored record and its links), memory_search,
memory_list and memory_context."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from resources.schemas.base import Schema
from resources.schemas.limits import ToolInput
from resources.schemas.memory.kinds import (
    SCOPES_FILTER_HELP,
    TYPES_HELP,
    Detail,
    IsoTimestamp,
    MemoryScope,
    MemoryType,
    MemoryTypeInput,
    MemoryTypesInput,
    ScopesInput,
    parse_iso,
)
from resources.schemas.memory.notes import CommitFile
from resources.schemas.tools import MAX_QUERY_CHARS


class MemoryGetInput(ToolInput):
    """Read one memory in full."""

    memory_id: str = Field(min_length=1, description="Id of the memory (from memory_add or memory_search).")
    memory_type: MemoryTypeInput = Field(description="The memory's type: " + TYPES_HELP)
    include_relationships: bool = Field(default=False, description="Also return its links to memories and code.")
    include_files: bool = Field(default=False, description="Level-3 hydration, for a memory tied to a commit (metadata.commit_sha): also return the files it concerns as they were at that commit (git show <sha>:<path>), cut to the response budget.")


class MemoryRelationship(Schema):
    """A link of a memory, seen from the memory."""

    type: str
    direction: Literal["outgoing", "incoming"]
    target_id: str
    target_label: str | None = Field(default=None, description="Kind of the other end (a memory type, Function, Class, ...).")
    target_name: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)


class MemoryRecord(Schema):
    """A stored memory: the base fields of every memory plus its typed metadata."""

    id: str
    memory_type: MemoryType
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    version: int = Field(default=1, description="Increases with every update; pass it as expected_version to memory_update.")
    access_count: int = 0
    importance_score: float = Field(default=0.5, ge=0.0, le=1.0)
    sync_status: Literal["synced", "pending", "failed"] = "pending"
    deleted: bool = False
    deleted_at: str | None = None
    relationships: list[MemoryRelationship] | None = None
    stale_anchors: list[dict[str, Any]] | None = Field(default=None, description="Anchored code that changed or vanished since the memory was anchored (None: current).")
    scope: MemoryScope = Field(default="project", description="Where the memory is kept: project, local, global or enterprise.")
    files: list[CommitFile] | None = Field(default=None, description="With include_files: the files the memory concerns, at its commit.")


class TimeRange(ToolInput):
    """A time window on when memories were created (either end may be open)."""

    start: IsoTimestamp | None = Field(default=None, description="Created at or after (ISO 8601).")
    end: IsoTimestamp | None = Field(default=None, description="Created at or before (ISO 8601).")

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and parse_iso(self.start) > parse_iso(self.end):
            raise ValueError(f"time_range start ({self.start}) is after end ({self.end}) — swap them")
        return self


FilterScalar = bool | int | float | str


class MemorySearchInput(ToolInput):
    """Search memories by meaning, optionally narrowed by type, time, metadata and importance."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What you are looking for, in plain words.")
    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these memory types (all when omitted): " + TYPES_HELP)
    time_range: TimeRange | None = Field(default=None, description='Only memories created in this window: {"start": ISO 8601, "end": ISO 8601}, either end may be left out.')
    metadata_filters: dict[str, FilterScalar | list[FilterScalar]] | None = Field(default=None, description="Exact match on metadata keys, e.g. {\"status\": \"Approved\"}; a list matches any of its values.")
    min_importance: float | None = Field(default=None, ge=0.0, le=1.0, description="Only memories at least this important (0-1).")
    limit: int = Field(default=10, ge=1, le=100, description="Results per page (max 100).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")
    include_deleted: bool = Field(default=False, description="Also return soft-deleted memories.")
    scopes: ScopesInput | None = Field(default=None, description=SCOPES_FILTER_HELP)
    detail: Detail = Field(default="summary", description="summary (default, cheap): each hit's first ~300 characters, content_truncated and `next` say how to read the rest (memory_get); full: up to 4,000 characters per hit.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank — describe what you want to recall")
        return value


class MemoryProvenance(Schema):
    """Which version of the memory a hit shows and whether it is still current."""

    version: int
    updated_at: str
    sync_status: str
    stale: bool = Field(default=False, description="True when code the memory is anchored to has changed since.")
    stale_reason: str | None = None


class MemoryHit(Schema):
    """One memory search result."""

    id: str
    memory_type: MemoryType
    content: str
    score: float
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    importance_score: float
    access_count: int
    provenance: MemoryProvenance
    content_truncated: bool = Field(default=False, description="Content was cut; memory_get returns all of it.")
    metadata_elided: list[str] = Field(
        default_factory=list,
        description="Summary hits: metadata fields left out or cut to keep the hit short (~600 characters); memory_get returns them whole.",
    )
    scope: MemoryScope = Field(default="project", description="Where the memory is kept: project, local, global or enterprise.")
    next: str | None = Field(default=None, description="When content was cut or metadata elided: the call that returns all of it.")


class MemorySearchResult(Schema):
    """A page of memory hits, best first."""

    query: str
    result_count: int
    results: list[MemoryHit]
    next_cursor: str | None = None
    truncated: bool = False
    search_mode: str = Field(description="hybrid, or sparse-only while dense vectors are unavailable.")


class MemoryListInput(ToolInput):
    """Browse memories, most recently updated first."""

    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these types (all when omitted): " + TYPES_HELP)
    include_deleted: bool = Field(default=False, description="Also soft-deleted memories.")
    limit: int = Field(default=20, ge=1, le=100, description="Memories per page (max 100).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")
    scopes: ScopesInput | None = Field(default=None, description=SCOPES_FILTER_HELP)
    detail: Detail = Field(default="summary", description="summary (default): the first ~300 characters of each memory; full: up to 4,000.")


class MemoryListResult(Schema):
    """A page of memories (content cut like search hits; memory_get returns the whole)."""

    results: list[MemoryHit]
    next_cursor: str | None = None


MAX_CONTEXT_TOKENS = 4_000
"""memory_context's default token budget."""


class MemoryContextInput(ToolInput):
    """A topic's memories for a conversation: grouped by type, most relevant first, within a token budget."""

    topic: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The topic, feature, component or requirement to load the context of, in plain words.")
    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these types (all when omitted): " + TYPES_HELP)
    scopes: ScopesInput | None = Field(default=None, description=SCOPES_FILTER_HELP)
    max_tokens: int = Field(default=MAX_CONTEXT_TOKENS, ge=200, le=40_000, description="Token budget of the whole context (estimated conservatively, ~3 characters a token); the most relevant memories are kept.")
    limit: int = Field(default=50, ge=1, le=100, description="At most this many memories are considered, best first.")
    min_score: float | None = Field(default=None, ge=0.0, le=1.0, description="Leave out memories scoring below this (search scores, 0-1).")

    @field_validator("topic")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("topic is blank — name the feature, component or requirement to load the context of")
        return value


class MemoryContextEntry(Schema):
    """One memory in a context: its summary or (when the budget allows) its content."""

    id: str
    memory_type: MemoryType
    scope: MemoryScope
    title: str | None = None
    content: str
    content_truncated: bool = Field(default=False, description="Content was cut to fit; memory_get returns all of it.")
    score: float
    importance_score: float
    updated_at: str
    stale: bool = Field(default=False, description="Code the memory is anchored to changed since.")
    tokens: int = Field(description="Estimated tokens of this entry.")


class MemoryContextGroup(Schema):
    """The memories of one type in a context."""

    memory_type: MemoryType
    count: int
    tokens: int = Field(description="Estimated tokens of the group's memories.")
    memories: list[MemoryContextEntry]


class MemoryContextResult(Schema):
    """A topic's memories grouped by type (groups ordered by their best memory), with token estimates."""

    topic: str
    groups: list[MemoryContextGroup]
    total_tokens: int = Field(description="Estimated tokens of every memory included.")
    max_tokens: int
    memory_count: int
    omitted: int = Field(default=0, description="Relevant memories left out to stay within max_tokens (raise it, or narrow memory_types).")
    summarized: int = Field(default=0, description="Memories cut to a summary to fit (memory_get returns the whole).")
    search_mode: str
    next: str | None = Field(default=None, description="How to get more when something was cut or omitted.")

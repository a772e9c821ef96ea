"""The write tools' inputs and results: memory_add, memory_update, memory_delete and memory_bulk_add
(the relationships a new memory links, the conflicts a write reports)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator

from resources.schemas.base import Schema
from resources.schemas.limits import JsonObject, ToolInput
from resources.schemas.memory.kinds import (
    MAX_CONTENT_CHARS,
    RELATIONSHIP_TYPE_PATTERN,
    SCOPE_HELP,
    TYPES_HELP,
    IsoTimestamp,
    MemoryScope,
    MemoryType,
    MemoryTypeInput,
    ScopeInput,
)
from resources.schemas.memory.metadata import metadata_guide


def _null_is_empty_object(value: Any) -> Any:
    return {} if value is None else value


def _null_is_empty_list(value: Any) -> Any:
    return [] if value is None else value


def _empty_is_omitted(value: Any) -> Any:
    return None if value == "" else value


def _check_content(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("content is blank — write the memory itself: the requirement, decision, pattern or note to remember")
    return value


ContentText = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS), AfterValidator(_check_content)]


class RelationshipSpec(ToolInput):
    """A link to create from the new memory to another memory, a code symbol or a requirement."""

    type: str = Field(description="Relationship type in UPPER_SNAKE_CASE: IMPLEMENTS_REQ, ADDRESSES, DEPENDS_ON, USES_PATTERN, TESTS, SATISFIES, FOLLOWS_PATTERN, TESTED_BY, RELATES_TO.")
    target_id: str = Field(min_length=1, max_length=2_000, description="A memory id, a code symbol id or qualified name (pkg.module.func), or a requirement id (REQ-MEM-FN-001).")
    properties: JsonObject = Field(default_factory=dict, description="Extra properties stored on the relationship.")

    @field_validator("type", mode="before")
    @classmethod
    def _upper_snake(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = re.sub(r"[\s-]+", "_", value.strip()).upper()
        if not re.fullmatch(RELATIONSHIP_TYPE_PATTERN, value):
            raise ValueError(f"relationship type must be UPPER_SNAKE_CASE such as IMPLEMENTS_REQ or DEPENDS_ON (got {value!r})")
        return value


MAX_RELATIONSHIPS = 100
Relationships = Annotated[
    list[RelationshipSpec],
    BeforeValidator(_null_is_empty_list, json_schema_input_type=Annotated[list[RelationshipSpec], Field(max_length=MAX_RELATIONSHIPS)] | None),
]
"""Links a write creates (``null`` reads as none): memory_add's and memory_update's ``relationships``."""


class MemoryAddInput(ToolInput):
    """Store a new memory. Its metadata is checked against its type when it is stored."""

    memory_type: MemoryTypeInput = Field(description="Kind of memory; decides which metadata fields apply: " + TYPES_HELP)
    content: ContentText = Field(description="The memory itself (what is embedded and searched), up to 100,000 characters.")
    metadata: Annotated[JsonObject, BeforeValidator(_null_is_empty_object, json_schema_input_type=JsonObject | None)] = Field(default_factory=dict, description="Type-specific fields (enum values are case-insensitive; other keys are kept):\n" + metadata_guide())
    relationships: Relationships = Field(default_factory=list, max_length=MAX_RELATIONSHIPS, description=(
        "Links to create (max 100): [{type: ADDRESSES|IMPLEMENTS_REQ|DEPENDS_ON|USES_PATTERN|TESTS|RELATES_TO..., "
        "target_id: memory id, REQ id, code qualified name or file path}]."
    ))
    importance_score: float | None = Field(default=None, ge=0.0, le=1.0, description="Retrieval priority 0-1 (default 0.5).")
    request_id: str | None = Field(default=None, max_length=200, description="Optional idempotency key: a retry with the same request_id returns the first result instead of storing the memory twice.")
    scope: ScopeInput | None = Field(default=None, description="Where to keep it: " + SCOPE_HELP + ". When omitted: the batch's scope in memory_bulk_add, else global for a user_preference that applies Global (metadata.scope), else project.")


class MemoryConflict(Schema):
    """A stored memory that the new content duplicates or contradicts."""

    memory_id: str
    memory_type: MemoryType
    kind: Literal["similar", "contradiction"] = Field(description="'similar': near-duplicate; 'contradiction': says otherwise.")
    similarity: float | None = None
    detail: str = Field(description="What conflicts and what to do (update the existing memory, or keep both).")
    content_preview: str
    scope: MemoryScope = Field(default="project", description="The scope of the stored memory.")


class MemoryAddResult(Schema):
    """The stored memory's id, and what it may conflict with."""

    memory_id: str
    memory_type: MemoryType
    conflicts: list[MemoryConflict] = Field(default_factory=list)
    status: Literal["created"] = "created"
    version: int = 1
    sync_status: str = Field(description="synced once the search index and graph have it, pending until then.")
    scope: MemoryScope = "project"


class MemoryUpdateInput(ToolInput):
    """Change a memory's content, metadata or importance, with optimistic concurrency."""

    memory_id: str = Field(min_length=1, description="Id of the memory (from memory_add or memory_search).")
    memory_type: MemoryTypeInput = Field(description="The memory's type: " + TYPES_HELP)
    content: Annotated[ContentText | None, BeforeValidator(_empty_is_omitted)] = Field(default=None, description="New content (re-embedded); unchanged when omitted or empty.")
    metadata: JsonObject | None = Field(default=None, description="Metadata fields to change, merged into the stored metadata (other fields are kept).")
    importance_score: float | None = Field(default=None, ge=0.0, le=1.0, description="New retrieval priority 0-1.")
    expected_version: int | None = Field(default=None, ge=1, description="Optimistic concurrency: the version you read (memory_get/memory_search). If the memory changed since, the update is refused with the current version; read it again and retry.")
    expected_updated_at: IsoTimestamp | None = Field(default=None, description="Alternative to expected_version: the updated_at you read; a mismatch is refused.")
    confirm_anchors: bool = Field(default=False, description="The memory still holds for the code it is anchored to: re-anchor it to the code as indexed now (clears the stale flag).")
    relationships: Relationships = Field(default_factory=list, max_length=MAX_RELATIONSHIPS, description=(
        "Links to add from this memory (max 100; the ones it has stay): [{type: RELATES_TO|DEPENDS_ON|ADDRESSES|"
        "IMPLEMENTS_REQ|FOLLOWS_DESIGN|USES_PATTERN|TESTS..., target_id: memory id, REQ id, code qualified name or file path}]."
    ))


class MemoryUpdateResult(Schema):
    """The memory's new version ('unchanged' when the update changed nothing)."""

    memory_id: str
    memory_type: MemoryType
    status: Literal["updated", "unchanged"]
    version: int
    updated_at: str
    conflicts: list[MemoryConflict] = Field(default_factory=list)
    scope: MemoryScope = "project"


class MemoryDeleteInput(ToolInput):
    """Delete a memory: soft by default (kept 30 days, restorable), or permanently."""

    memory_id: str = Field(min_length=1, description="Id of the memory (from memory_add or memory_search).")
    memory_type: MemoryTypeInput = Field(description="The memory's type: " + TYPES_HELP)
    hard_delete: bool = Field(default=False, description="Delete permanently now (default: a soft delete, hidden from search and restorable for 30 days).")


class MemoryDeleteResult(Schema):
    """How the memory was deleted and until when a soft delete can be undone."""

    memory_id: str
    memory_type: MemoryType
    status: Literal["deleted", "hard_deleted"]
    retention_until: str | None = Field(default=None, description="End of the retention of a soft-deleted memory.")
    scope: MemoryScope = "project"


class MemoryBulkAddInput(ToolInput):
    """Store several memories at once: all of them, or none when any is invalid."""

    memories: list[MemoryAddInput] = Field(min_length=1, max_length=1000, description="The memories (1-1000), as for memory_add.")
    request_id: str | None = Field(default=None, max_length=200, description="Optional idempotency key for the whole batch (a retry returns the first result).")
    scope: ScopeInput | None = Field(default=None, description="The scope of every memory that names none (default project, whatever the types). One batch writes one scope, all or nothing. Scopes: " + SCOPE_HELP + ".")


class MemoryBulkAddResult(Schema):
    """The ids added, or the errors that stopped the batch (then nothing was added)."""

    added_count: int
    added_ids: list[str] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{index, error} for each rejected memory.")
    scope: MemoryScope = "project"

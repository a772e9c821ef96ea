"""Memories: the 8 typed metadata schemas (seed 001 §5) and the memory tools' inputs and results (seed 004).

`validate_metadata` is the one gate for a memory's metadata (memory_add, memory_update after merging,
memory_bulk_add, import_memory); the tool input models check only its shape and its size and nesting
(`resources.schemas.limits.JsonObject`, a bound on what a caller may send, not on what pipelines derive).
"""

from __future__ import annotations

import re
import types
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from resources.schemas.limits import MAX_DOCUMENT_CHARS, MAX_TEXT_CHARS, JsonObject, ToolInput
from resources.schemas.tools import MAX_QUERY_CHARS

MAX_CONTENT_CHARS = MAX_TEXT_CHARS
REQUIREMENT_ID_PATTERN = r"^REQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,}$"
RELATIONSHIP_TYPE_PATTERN = r"^[A-Z][A-Z0-9_]*$"


class MemoryType(StrEnum):
    """The kinds of memory; each has its own metadata schema and collection."""

    REQUIREMENTS = "requirements"
    DESIGN = "design"
    CODE_PATTERN = "code_pattern"
    COMPONENT = "component"
    FUNCTION = "function"
    TEST_HISTORY = "test_history"
    SESSION = "session"
    USER_PREFERENCE = "user_preference"


MEMORY_TYPES: tuple[MemoryType, ...] = tuple(MemoryType)
TYPES_HELP = (
    "requirements (REQ-XXX-NNN statements), design (ADRs and decisions), code_pattern (templates and "
    "conventions), component, function, test_history, session (what a session did), user_preference."
)
"""What each memory type holds, for the fields that name one (the tools' schemas show it to an LLM)."""

MemoryScope = Literal["project", "local", "global"]
"""Where a memory is kept (``resources.memory.scopes``): ``project`` (the project's ledger, shared
through exports), ``local`` (personal notes on this project, never shared) or ``global`` (the
user's memories across all projects)."""
MEMORY_SCOPES: tuple[MemoryScope, ...] = ("project", "local", "global")
Detail = Literal["summary", "full"]
"""Progressive hydration of search hits: ``summary`` (the first ~300 characters; memory_get or
get_symbol returns the rest) or ``full`` (up to 4,000 characters of a memory, 30 lines of code)."""
SUMMARY_CHARS = 300
"""Characters of a memory's content in a ``summary`` hit."""


class MemoryValidationError(ValueError):
    """Metadata or a memory type that does not fit the schema; the message names each bad field.

    Attributes:
        problems: One line per bad field, e.g. ``metadata.title: required for requirements memories``.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


def parse_memory_type(value: str) -> MemoryType:
    """Read a memory type leniently ('Code-Pattern' -> code_pattern).

    Args:
        value: A memory type name, in any case, with '-' or ' ' for '_'.

    Returns:
        The memory type.

    Raises:
        MemoryValidationError: Starting ``Unknown memory type 'x'`` and listing the valid types.
    """
    if isinstance(value, MemoryType):
        return value
    key = re.sub(r"[\s-]+", "_", str(value).strip().lower())
    try:
        return MemoryType(key)
    except ValueError:
        raise MemoryValidationError(f"Unknown memory type {value!r} — use one of {', '.join(MEMORY_TYPES)}") from None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


def _new_id() -> str:
    return str(uuid.uuid4())


def _parse_iso(value: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (naive ones are taken as UTC)."""
    parsed = datetime.fromisoformat(value.strip())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _iso_timestamp(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        try:
            _parse_iso(value)
        except ValueError:
            raise ValueError(f"must be an ISO 8601 timestamp such as 2025-01-31T14:05:00Z (got {value!r})") from None
    return value


IsoTimestamp = Annotated[str, BeforeValidator(_iso_timestamp)]


def _memory_type_input(value: Any) -> Any:
    return parse_memory_type(value) if isinstance(value, str) else value


def _memory_types_input(value: Any) -> Any:
    if isinstance(value, str):
        value = [value]
    return [_memory_type_input(item) for item in value] if isinstance(value, list) else value


def _scope_input(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _scopes_input(value: Any) -> Any:
    if isinstance(value, str):
        value = [value]
    return [_scope_input(item) for item in value] if isinstance(value, list) else value


def _null_is_empty_object(value: Any) -> Any:
    return {} if value is None else value


def _null_is_empty_list(value: Any) -> Any:
    return [] if value is None else value


def _empty_is_omitted(value: Any) -> Any:
    return None if value == "" else value


ScopeInput = Annotated[MemoryScope, BeforeValidator(_scope_input)]
ScopesInput = Annotated[list[MemoryScope], BeforeValidator(_scopes_input)]
SCOPE_HELP = (
    "project (default: this project's memories, shared with the team through exports), local (personal "
    "notes on this project, never shared or exported to git) or global (yours, across all your projects)"
)
SCOPES_FILTER_HELP = "Only memories of these scopes: project, local, global (all when omitted)."


MemoryTypeInput = Annotated[MemoryType, BeforeValidator(_memory_type_input)]
MemoryTypesInput = Annotated[list[MemoryType], BeforeValidator(_memory_types_input)]


def _choice_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _literal_choices(annotation: Any) -> tuple[str, ...] | None:
    annotation = _unwrap_optional(annotation)
    return get_args(annotation) if get_origin(annotation) is Literal else None


class _MetadataBase(BaseModel):
    """Lenient input: enum values in any case ('high', 'coding_style'), a single string for a list field."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _lenient(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, field in cls.model_fields.items():
            value = data.get(name)
            if not isinstance(value, str):
                continue
            choices = _literal_choices(field.annotation)
            if choices:
                data[name] = next((c for c in choices if _choice_key(c) == _choice_key(value)), value)
            elif get_origin(_unwrap_optional(field.annotation)) is list:
                data[name] = [value]
        return data


Priority = Literal["Critical", "High", "Medium", "Low"]
IdList = list[str] | None


class RequirementsMetadata(_MetadataBase):
    """A project requirement (REQ-XXX-NNN)."""

    requirement_id: str = Field(description="Requirement id REQ-<AREA>[-<AREA>...]-<NNN>, e.g. REQ-MEM-FN-001.")
    title: str = Field(min_length=1, description="Short requirement title.")
    description: str | None = Field(default=None, description="Full requirement text; defaults to the memory content.")
    priority: Priority = Field(description="Critical, High, Medium or Low.")
    status: Literal["Draft", "Approved", "Implemented", "Verified"] = Field(description="Lifecycle state.")
    source_document: str | None = Field(default=None, description="Repo-relative path of the document it comes from.")
    implementing_components: IdList = Field(default=None, description="Ids of the components that implement it.")

    @field_validator("requirement_id", mode="before")
    @classmethod
    def _requirement_id(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip().upper()
        if not re.fullmatch(REQUIREMENT_ID_PATTERN, value):
            raise ValueError(f"must look like REQ-XXX-NNN, e.g. REQ-MEM-FN-001 (got {value!r})")
        return value


class DesignMetadata(_MetadataBase):
    """A design decision: an ADR, a specification, an architecture or an interface."""

    design_type: Literal["ADR", "Specification", "Architecture", "Interface"] = Field(description="Kind of design document.")
    title: str = Field(min_length=1, description="Design document title.")
    decision: str | None = Field(default=None, description="What was decided (ADRs).")
    rationale: str | None = Field(default=None, description="Why it was decided.")
    consequences: str | None = Field(default=None, description="Trade-offs and implications.")
    related_requirements: IdList = Field(default=None, description="Requirement ids it addresses, e.g. ['REQ-MEM-FN-001'].")
    affected_components: IdList = Field(default=None, description="Ids of the components it affects.")
    status: Literal["Proposed", "Accepted", "Deprecated", "Superseded"] = Field(description="Decision state.")


class CodePatternMetadata(_MetadataBase):
    """A reusable code pattern or convention of this codebase."""

    pattern_name: str = Field(min_length=1, description="Human-readable pattern name.")
    pattern_type: Literal["Template", "Convention", "Idiom", "Architecture"] = Field(description="Kind of pattern.")
    language: str = Field(min_length=1, description="Programming language, e.g. python.")
    code_template: str = Field(min_length=1, description="Template code, with placeholders.")
    usage_context: str = Field(min_length=1, description="When to apply the pattern.")
    applicable_components: IdList = Field(default=None, description="Component types it applies to.")
    example_implementations: IdList = Field(default=None, description="Repo-relative paths of examples.")


class ComponentMetadata(_MetadataBase):
    """An entry of the component registry."""

    component_id: str = Field(min_length=1, description="Unique component identifier, e.g. 'query-server'.")
    component_type: Literal["Frontend", "Backend", "Agent", "Library", "Service", "Database"] = Field(description="Kind of component.")
    name: str = Field(min_length=1, description="Component name.")
    file_path: str = Field(min_length=1, description="Primary file or directory, repo-relative.")
    public_interface: Any = Field(default=None, description="Exported functions/classes (any JSON).")
    dependencies: IdList = Field(default=None, description="Component ids it depends on.")
    dependents: IdList = Field(default=None, description="Component ids that depend on it.")
    base_pattern: str | None = Field(default=None, description="Id of the code_pattern memory it extends.")
    version: str | None = Field(default=None, description="Semantic version.")


class FunctionMetadata(_MetadataBase):
    """An indexed function or method."""

    function_id: str = Field(default_factory=_new_id, description="Unique function id; a new UUID when omitted.")
    name: str = Field(min_length=1, description="Function or method name.")
    signature: str = Field(min_length=1, description="Full signature with types.")
    file_path: str = Field(min_length=1, description="Repo-relative source file.")
    start_line: int = Field(ge=1, description="First line (1-based).")
    end_line: int = Field(ge=1, description="Last line (1-based, >= start_line).")
    language: str = Field(min_length=1, description="Programming language.")
    docstring: str | None = Field(default=None, description="Documentation string.")
    containing_class: str | None = Field(default=None, description="Id of the enclosing class.")
    calls: IdList = Field(default=None, description="Ids of the functions it calls.")
    called_by: IdList = Field(default=None, description="Ids of the functions that call it.")

    @model_validator(mode="after")
    def _line_order(self) -> FunctionMetadata:
        if self.end_line < self.start_line:
            raise ValueError(f"end_line ({self.end_line}) must be >= start_line ({self.start_line})")
        return self


class TestHistoryMetadata(_MetadataBase):
    """One test execution and, for a failure, its fix."""

    __test__ = False  # not a pytest test class despite its name

    test_id: str = Field(default_factory=_new_id, description="Unique test id; a new UUID when omitted.")
    test_name: str = Field(min_length=1, description="Test function or method name.")
    test_file: str = Field(min_length=1, description="Repo-relative test file.")
    execution_time: IsoTimestamp = Field(default_factory=_utc_now, description="When it ran (ISO 8601); now when omitted.")
    status: Literal["Passed", "Failed", "Skipped", "Error"] = Field(description="Outcome.")
    failure_message: str | None = Field(default=None, description="Error message of a failure.")
    affected_component: str | None = Field(default=None, description="Id of the component under test.")
    related_requirements: IdList = Field(default=None, description="Requirement ids it verifies.")
    fix_applied: str | None = Field(default=None, description="What fixed it.")
    fix_commit: str | None = Field(default=None, description="Git commit SHA of the fix.")
    design_alignment_score: float | None = Field(default=None, ge=0.0, le=1.0, description="How well the fix fits the design, 0-1.")


class SessionMetadata(_MetadataBase):
    """A development session: what was done and decided."""

    session_id: str = Field(default_factory=_new_id, description="Unique session id; a new UUID when omitted.")
    start_time: IsoTimestamp = Field(default_factory=_utc_now, description="Session start (ISO 8601); now when omitted.")
    end_time: IsoTimestamp | None = Field(default=None, description="Session end (ISO 8601).")
    summary: str | None = Field(default=None, description="Brief summary; defaults to the memory content.")
    key_decisions: IdList = Field(default=None, description="Important decisions made.")
    components_modified: IdList = Field(default=None, description="Ids of the components changed.")
    memories_created: IdList = Field(default=None, description="Ids of the memories created.")
    outcome: str | None = Field(default=None, description="How the session ended.")


class UserPreferenceMetadata(_MetadataBase):
    """A preference of the user (style, naming, framework, tool, convention)."""

    preference_id: str = Field(default_factory=_new_id, description="Unique preference id; a new UUID when omitted.")
    category: Literal["CodingStyle", "Naming", "Framework", "Tool", "Convention"] = Field(description="Kind of preference.")
    key: str = Field(min_length=1, description="Preference key, e.g. 'python.quotes'.")
    value: Any = Field(description="Preference value (any JSON), e.g. 'double'.")
    scope: Literal["Global", "Language", "Project", "Component"] = Field(description="Where it applies.")
    examples: IdList = Field(default=None, description="Code examples that show it.")


METADATA_MODELS: dict[MemoryType, type[BaseModel]] = {
    MemoryType.REQUIREMENTS: RequirementsMetadata,
    MemoryType.DESIGN: DesignMetadata,
    MemoryType.CODE_PATTERN: CodePatternMetadata,
    MemoryType.COMPONENT: ComponentMetadata,
    MemoryType.FUNCTION: FunctionMetadata,
    MemoryType.TEST_HISTORY: TestHistoryMetadata,
    MemoryType.SESSION: SessionMetadata,
    MemoryType.USER_PREFERENCE: UserPreferenceMetadata,
}
_FROM_CONTENT: dict[MemoryType, str] = {MemoryType.REQUIREMENTS: "description", MemoryType.SESSION: "summary"}


def _problem(memory_type: MemoryType, model: type[BaseModel], error: Any) -> str:
    loc = ".".join(str(part) for part in ("metadata", *error["loc"]) if part != "__root__")
    field = model.model_fields.get(str(error["loc"][0])) if error["loc"] else None
    if error["type"] == "missing":
        return f"{loc}: required for {memory_type} memories"
    if error["type"] == "literal_error" and field is not None:
        allowed = ", ".join(_literal_choices(field.annotation) or ())
        return f"{loc}: must be one of {allowed} (got {error['input']!r})"
    return f"{loc}: {error['msg'].removeprefix('Value error, ')}"


def validate_metadata(memory_type: MemoryType | str, metadata: dict[str, Any] | None, *, content: str) -> dict[str, Any]:
    """Check a memory's metadata against its type's schema and fill what can be derived.

    Defaults: requirements.description and session.summary take the content; function_id, test_id,
    session_id and preference_id a new UUID; test_history.execution_time and session.start_time now (UTC).
    Enum values are matched case-insensitively and written in their canonical spelling; unknown keys are kept.

    Args:
        memory_type: The memory's type (a name is parsed with `parse_memory_type`).
        metadata: The metadata given (for memory_update: the stored metadata merged with the update).
        content: The memory's content.

    Returns:
        The normalized metadata, JSON-ready: every key given plus the defaults filled in.

    Raises:
        MemoryValidationError: Naming each bad field, with the allowed values of enums.
    """
    kind = parse_memory_type(memory_type)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise MemoryValidationError(f"metadata: must be an object of {kind} fields (got {type(metadata).__name__})")
    given = dict(metadata)
    derived = _FROM_CONTENT.get(kind)
    if derived and not (isinstance(given.get(derived), str) and given[derived].strip()):
        given[derived] = content
    model = METADATA_MODELS[kind]
    try:
        validated = model.model_validate(given)
    except ValidationError as exc:
        problems = [_problem(kind, model, error) for error in exc.errors()]
        raise MemoryValidationError(f"invalid {kind} metadata — {'; '.join(problems)}", problems) from None
    dumped = validated.model_dump(mode="json")
    return {key: value for key, value in dumped.items() if value is not None or key in given}


def _metadata_guide() -> str:
    lines = []
    for kind, model in METADATA_MODELS.items():
        required, optional = [], []
        for name, field in model.model_fields.items():
            choices = _literal_choices(field.annotation)
            label = f"{name} ({'|'.join(choices)})" if choices else name
            (required if field.is_required() else optional).append(label)
        lines.append(f"{kind}: {', '.join(required) or 'nothing required'}; optional: {', '.join(optional)}")
    lines.append("Defaults: ids a new UUID, times now (UTC), requirements.description and session.summary the content.")
    return "\n".join(lines)


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


class MemoryAddInput(ToolInput):
    """Store a new memory. Its metadata is checked against its type when it is stored."""

    memory_type: MemoryTypeInput = Field(description="Kind of memory; decides which metadata fields apply: " + TYPES_HELP)
    content: ContentText = Field(description="The memory itself (what is embedded and searched), up to 100,000 characters.")
    metadata: Annotated[JsonObject, BeforeValidator(_null_is_empty_object, json_schema_input_type=JsonObject | None)] = Field(default_factory=dict, description="Type-specific fields (enum values are case-insensitive; other keys are kept):\n" + _metadata_guide())
    relationships: Annotated[
        list[RelationshipSpec],
        BeforeValidator(_null_is_empty_list, json_schema_input_type=Annotated[list[RelationshipSpec], Field(max_length=100)] | None),
    ] = Field(default_factory=list, max_length=100, description=(
        "Links to create (max 100): [{type: ADDRESSES|IMPLEMENTS_REQ|DEPENDS_ON|USES_PATTERN|TESTS|RELATES_TO..., "
        "target_id: memory id, REQ id, code qualified name or file path}]."
    ))
    importance_score: float | None = Field(default=None, ge=0.0, le=1.0, description="Retrieval priority 0-1 (default 0.5).")
    request_id: str | None = Field(default=None, max_length=200, description="Optional idempotency key: a retry with the same request_id returns the first result instead of storing the memory twice.")
    scope: ScopeInput | None = Field(default=None, description="Where to keep it: " + SCOPE_HELP + ". In memory_bulk_add, the batch's scope when omitted.")


class MemoryConflict(BaseModel):
    """A stored memory that the new content duplicates or contradicts."""

    memory_id: str
    memory_type: MemoryType
    kind: Literal["similar", "contradiction"] = Field(description="'similar': near-duplicate; 'contradiction': says otherwise.")
    similarity: float | None = None
    detail: str = Field(description="What conflicts and what to do (update the existing memory, or keep both).")
    content_preview: str
    scope: MemoryScope = Field(default="project", description="The scope of the stored memory.")


class MemoryAddResult(BaseModel):
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


class MemoryUpdateResult(BaseModel):
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


class MemoryDeleteResult(BaseModel):
    """How the memory was deleted and until when a soft delete can be undone."""

    memory_id: str
    memory_type: MemoryType
    status: Literal["deleted", "hard_deleted"]
    retention_until: str | None = Field(default=None, description="End of the retention of a soft-deleted memory.")
    scope: MemoryScope = "project"


class MemoryGetInput(ToolInput):
    """Read one memory in full."""

    memory_id: str = Field(min_length=1, description="Id of the memory (from memory_add or memory_search).")
    memory_type: MemoryTypeInput = Field(description="The memory's type: " + TYPES_HELP)
    include_relationships: bool = Field(default=False, description="Also return its links to memories and code.")


class MemoryRelationship(BaseModel):
    """A link of a memory, seen from the memory."""

    type: str
    direction: Literal["outgoing", "incoming"]
    target_id: str
    target_label: str | None = Field(default=None, description="Kind of the other end (a memory type, Function, Class, ...).")
    target_name: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)


class MemoryRecord(BaseModel):
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
    scope: MemoryScope = Field(default="project", description="Where the memory is kept: project, local or global.")


class MemoryBulkAddInput(ToolInput):
    """Store several memories at once: all of them, or none when any is invalid."""

    memories: list[MemoryAddInput] = Field(min_length=1, max_length=1000, description="The memories (1-1000), as for memory_add.")
    request_id: str | None = Field(default=None, max_length=200, description="Optional idempotency key for the whole batch (a retry returns the first result).")
    scope: ScopeInput | None = Field(default=None, description="The scope of every memory that names none (default project). One batch writes one scope, all or nothing. Scopes: " + SCOPE_HELP + ".")


class MemoryBulkAddResult(BaseModel):
    """The ids added, or the errors that stopped the batch (then nothing was added)."""

    added_count: int
    added_ids: list[str] = Field(default_factory=list)
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{index, error} for each rejected memory.")
    scope: MemoryScope = "project"


class TimeRange(ToolInput):
    """A time window on when memories were created (either end may be open)."""

    start: IsoTimestamp | None = Field(default=None, description="Created at or after (ISO 8601).")
    end: IsoTimestamp | None = Field(default=None, description="Created at or before (ISO 8601).")

    @model_validator(mode="after")
    def _ordered(self) -> TimeRange:
        if self.start and self.end and _parse_iso(self.start) > _parse_iso(self.end):
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


class MemoryProvenance(BaseModel):
    """Which version of the memory a hit shows and whether it is still current."""

    version: int
    updated_at: str
    sync_status: str
    stale: bool = Field(default=False, description="True when code the memory is anchored to has changed since.")
    stale_reason: str | None = None


class MemoryHit(BaseModel):
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
    scope: MemoryScope = Field(default="project", description="Where the memory is kept: project, local or global.")
    next: str | None = Field(default=None, description="When content was cut: the call that returns all of it.")


class MemorySearchResult(BaseModel):
    """A page of memory hits, best first."""

    query: str
    result_count: int
    results: list[MemoryHit]
    next_cursor: str | None = None
    truncated: bool = False
    search_mode: str = Field(description="hybrid, or sparse-only while dense vectors are unavailable.")


class MemoryStatisticsResult(BaseModel):
    """Counts per memory type, sync state, and the health of storage, cache and outbox."""

    memory_counts: dict[str, dict[str, int]] = Field(description="Per memory type: total, active, deleted.")
    sync_status: dict[str, int] = Field(description="Memories per sync status: synced, pending, failed.")
    storage: dict[str, dict[str, Any]]
    cache: dict[str, Any]
    outbox: dict[str, Any]
    scopes: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Per scope in use (project, local, global): its ledger, memory counts per type, sync status and outbox (the totals above add them up).")


ExportFormat = Literal["jsonl", "markdown", "git_notes"]
DEFAULT_NOTES_REF = "refs/notes/codemem"


class ExportMemoryInput(ToolInput):
    """Export memories as JSONL (a file inside the project or inline), as Markdown files (a directory),
    or as git notes on commits (session and design memories)."""

    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these types (all when omitted): " + TYPES_HELP)
    filters: JsonObject | None = Field(default=None, description="Exact match on metadata keys, as memory_search's metadata_filters.")
    include_deleted: bool = Field(default=False, description="Also export soft-deleted memories.")
    output_path: str | None = Field(default=None, max_length=4_096, description="jsonl: file to write, inside the project directory (the JSONL comes back inline when omitted); markdown: the directory to write, inside the project.")
    format: ExportFormat = Field(default="jsonl", description="jsonl (one memory per line); markdown (one file per memory, YAML front matter, <dir>/<type>/<slug>-<id>.md); git_notes (session and design memories as notes on the commit their metadata names — commit_sha, commit or git_commit — else HEAD).")
    notes_ref: str = Field(default=DEFAULT_NOTES_REF, min_length=1, max_length=200, description="git_notes: the notes ref to write.")
    overwrite: bool = Field(default=False, description="Replace an existing file at output_path (jsonl), or a file in the markdown directory that is not this memory's earlier export. Never allowed into .codemem/ or .git/.")
    scopes: ScopesInput | None = Field(default=None, description="Only memories of these scopes. Default: every scope for jsonl (each line names its scope); only project for markdown and git_notes, which are meant to be committed (local memories are personal, global ones belong to no project).")

    @model_validator(mode="after")
    def _destination(self) -> ExportMemoryInput:
        has_path = bool(self.output_path and self.output_path.strip())
        if self.format == "markdown" and not has_path:
            raise ValueError("format markdown needs output_path: the directory to write, inside the project")
        if self.format == "git_notes" and has_path:
            raise ValueError("format git_notes writes notes to notes_ref, not a file — leave output_path out")
        return self


class ExportMemoryResult(BaseModel):
    """How many memories were exported, and where (or the JSONL itself)."""

    exported_count: int
    output_path: str | None = Field(default=None, description="The file or directory written (the notes ref for git_notes).")
    data: str | None = Field(default=None, description="The JSONL, only when no output_path was given.")
    removed_count: int = Field(default=0, description="markdown: files of memories no longer exported (deleted, or renamed) removed from the directory.")
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{memory_id, error} for each memory not exported (git_notes: a commit that is not in the repository).")


class ImportMemoryInput(ToolInput):
    """Import memories from JSONL (one memory per line, as export_memory writes), from a directory of
    Markdown memory files, or from the git notes export_memory wrote."""

    input_path: str | None = Field(default=None, max_length=4_096, description="jsonl: a JSONL file inside the project directory; markdown: a directory (or one .md file) inside the project.")
    data: str | None = Field(default=None, max_length=MAX_DOCUMENT_CHARS, description="jsonl: JSONL text, instead of input_path.")
    conflict_resolution: Literal["skip", "overwrite", "error"] = Field(default="skip", description="When a memory id already exists: skip it, overwrite it, or stop with an error.")
    format: ExportFormat = Field(default="jsonl", description="jsonl, markdown (files as export_memory format=markdown writes) or git_notes (the notes in notes_ref).")
    notes_ref: str = Field(default=DEFAULT_NOTES_REF, min_length=1, max_length=200, description="git_notes: the notes ref to read.")
    scope: ScopeInput | None = Field(default=None, description="The scope to import into: " + SCOPE_HELP + ". Default: the scope each JSONL line names (as export_memory writes it), else project.")

    @model_validator(mode="after")
    def _one_source(self) -> ImportMemoryInput:
        has_path, has_data = bool(self.input_path and self.input_path.strip()), bool(self.data and self.data.strip())
        if self.format == "git_notes":
            if has_path or has_data:
                raise ValueError("format git_notes reads the notes ref (notes_ref) — pass no input_path or data")
            return self
        if self.format == "markdown" and not has_path:
            raise ValueError("format markdown needs input_path: a directory of memory files inside the project")
        if has_path and has_data:
            raise ValueError("pass either input_path or data, not both")
        if not (has_path or has_data):
            raise ValueError("pass input_path (a JSONL file inside the project) or data (the JSONL text)")
        return self


class ImportMemoryResult(BaseModel):
    """What the import did with each line."""

    imported: int
    skipped: int
    overwritten: int
    errors: list[dict[str, Any]] = Field(default_factory=list, description="For each memory not imported: {line, error} (jsonl), {file, error} (markdown) or {note, error} (git_notes: the commit).")


NormalizationPhase = Literal["snapshot", "deduplication", "orphan_detection", "embedding_refresh", "cleanup", "validation", "swap"]


class NormalizeMemoryInput(ToolInput):
    """Start a normalization job (deduplicate, detect orphans, refresh embeddings, clean up, swap)."""

    phases: list[NormalizationPhase] | None = Field(default=None, description="Only these phases (all when omitted). Without 'swap' nothing is applied.")
    dry_run: bool = Field(default=False, description="Report what would change without changing anything.")


class NormalizeStatusInput(ToolInput):
    """Which normalization job to report on."""

    job_id: str | None = Field(default=None, description="A job id from normalize_memory; the latest job when omitted.")


class NormalizationJob(BaseModel):
    """A normalization job: phase, percent, errors and, when done, its report."""

    job_id: str
    status: Literal["running", "done", "failed"]
    dry_run: bool
    phase: str | None = None
    percent: float = 0.0
    started_at: str
    finished_at: str | None = None
    errors: list[str] = Field(default_factory=list)
    report: dict[str, Any] | None = None


class MemoryListInput(ToolInput):
    """Browse memories, most recently updated first."""

    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these types (all when omitted): " + TYPES_HELP)
    include_deleted: bool = Field(default=False, description="Also soft-deleted memories.")
    limit: int = Field(default=20, ge=1, le=100, description="Memories per page (max 100).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")
    scopes: ScopesInput | None = Field(default=None, description=SCOPES_FILTER_HELP)
    detail: Detail = Field(default="summary", description="summary (default): the first ~300 characters of each memory; full: up to 4,000.")


class MemoryListResult(BaseModel):
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


class MemoryContextEntry(BaseModel):
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


class MemoryContextGroup(BaseModel):
    """The memories of one type in a context."""

    memory_type: MemoryType
    count: int
    tokens: int = Field(description="Estimated tokens of the group's memories.")
    memories: list[MemoryContextEntry]


class MemoryContextResult(BaseModel):
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


class BackupInput(ToolInput):
    """Where to write a backup (a directory inside the project, created if needed)."""

    path: str = Field(min_length=1, max_length=4_096, description="Backup directory inside the project, e.g. backups/2026-11-22.")


class BackupResult(BaseModel):
    """What a backup holds."""

    path: str
    files: dict[str, int] = Field(description="File name -> bytes.")
    memories: int


class RestoreInput(ToolInput):
    """A backup directory made by backup."""

    path: str = Field(min_length=1, max_length=4_096, description="A backup directory inside the project.")


class RestoreResult(BaseModel):
    """What a restore replaced and rebuilt."""

    restored_memories: int
    previous_ledger: str = Field(description="The ledger that was replaced, kept beside the new one.")
    projection: dict[str, Any]

"""The 8 typed metadata schemas of memories (seed 001 §5) and `validate_metadata`, the one gate for a
memory's metadata (memory_add, memory_update after merging, memory_bulk_add, import_memory)."""

from __future__ import annotations

import re
import types
import uuid
from datetime import UTC, datetime
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from resources.schemas.base import Schema
from resources.schemas.memory.kinds import (
    REQUIREMENT_ID_PATTERN,
    IsoTimestamp,
    MemoryType,
    MemoryValidationError,
    parse_memory_type,
)
from resources.schemas.memory.notes import check_namespace
from resources.schemas.memory.roles import check_role


def _utc_now() -> str:
    return datetime.now(UTC).isoformat()


def _new_id() -> str:
    return str(uuid.uuid4())


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


class _MetadataBase(Schema):
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


def validate_metadata(
    memory_type: MemoryType | str, metadata: dict[str, Any] | None, *, content: str, strict_role: bool = True,
) -> dict[str, Any]:
    """Check a memory's metadata against its type's schema and fill what can be derived.

    Defaults: requirements.description and session.summary take the content; function_id, test_id,
    session_id and preference_id a new UUID; test_history.execution_time and session.start_time now (UTC).
    Enum values are matched case-insensitively and written in their canonical spelling; unknown keys are kept,
    except a ``namespace`` (git notes) or a ``role`` (seed 002's taxonomy: decision, learning, artifact,
    gotcha, breadcrumb, hub) that is unknown or belongs to another memory type.

    Args:
        memory_type: The memory's type (a name is parsed with `parse_memory_type`).
        metadata: The metadata given (for memory_update: the stored metadata merged with the update).
        content: The memory's content.
        strict_role: Refuse an unknown or misfitting ``role`` (False keeps it as written:
            ``resources.schemas.memory.roles.check_role``).

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
    check_namespace(str(kind), given)
    check_role(str(kind), given, strict=strict_role)
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


def metadata_guide() -> str:
    """Each memory type's required and optional metadata fields, for memory_add's metadata description."""
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

"""Memory kinds and scopes: the 8 memory types, the 3 scopes, how much of a memory a hit shows,
and the lenient readers of a type, a scope and a timestamp that every memory tool input shares.

`MemoryValidationError` is the error of a memory type or metadata that does not fit (seed 001 §5).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator

from resources.schemas.limits import MAX_TEXT_CHARS

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

MemoryScope = Literal["project", "local", "global", "enterprise"]
"""Where a memory is kept (``resources.memory.scopes``): ``project`` (the project's ledger, shared
through exports), ``local`` (personal notes on this project, never shared), ``global`` (the
user's memories across all projects) or ``enterprise`` (the organisation's, opt-in)."""
MEMORY_SCOPES: tuple[MemoryScope, ...] = ("project", "local", "global", "enterprise")
SHARED_SCOPES: tuple[MemoryScope, ...] = ("global", "enterprise")
"""Scopes whose ledger lives outside the project and is read by many projects: their memories
cannot be anchored to one project's code and link only to memories of the same scope."""
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


def parse_iso(value: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (naive ones are taken as UTC)."""
    parsed = datetime.fromisoformat(value.strip())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _iso_timestamp(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        try:
            parse_iso(value)
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


ScopeInput = Annotated[MemoryScope, BeforeValidator(_scope_input)]
ScopesInput = Annotated[list[MemoryScope], BeforeValidator(_scopes_input)]
SCOPE_HELP = (
    "project (default: this project's memories, shared with the team through exports), local (personal "
    "notes on this project, never shared or exported to git), global (yours, across all your projects) or "
    "enterprise (your organisation's, when it has turned that scope on)"
)
SCOPES_FILTER_HELP = "Only memories of these scopes: project, local, global, enterprise (all when omitted)."


MemoryTypeInput = Annotated[MemoryType, BeforeValidator(_memory_type_input)]
MemoryTypesInput = Annotated[list[MemoryType], BeforeValidator(_memory_types_input)]

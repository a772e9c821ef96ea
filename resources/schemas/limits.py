"""Size limits of tool inputs, defined once: every face (MCP, HTTP, CLI, the owner's loopback RPC) validates
through these models, so a limit here holds everywhere.

- ``ToolInput``: the base of every tool input model; any string without a tighter cap of its own (and every
  item of a list of strings, every key of an object) is capped at ``MAX_TEXT_CHARS``.
- ``JsonObject``: a free-form JSON object (memory metadata, relationship properties, query parameters,
  export filters), capped at ``MAX_JSON_BYTES`` serialized and ``MAX_JSON_DEPTH`` levels of nesting.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, model_validator

from resources.schemas.base import Schema

MAX_TEXT_CHARS = 100_000
"""Default cap of every string of a tool input: content, queries, descriptions, code, ids, names."""
MAX_DIFF_CHARS = 2_000_000
"""Cap of a unified diff (``git diff`` output)."""
MAX_DOCUMENT_CHARS = 20_000_000
"""Cap of a whole document passed inline: JSONL to import, a JUnit XML report."""
MAX_JSON_BYTES = 64 * 1024
"""Cap of a free-form JSON object, serialized (compact JSON, UTF-8)."""
MAX_JSON_DEPTH = 16
"""Cap of a free-form JSON object's nesting, counting the object itself as level 1."""


class ToolInput(Schema):
    """Base of every tool input: strings without a cap of their own get ``MAX_TEXT_CHARS``; a field
    the tool does not have is refused with the fields it does have (a misspelt ``path`` for
    ``directory_path`` would otherwise be dropped and the call run on the defaults)."""

    model_config = ConfigDict(str_max_length=MAX_TEXT_CHARS, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise ValueError(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} — "
                                 f"the fields are: {', '.join(cls.model_fields) or 'none'}")
        return data


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests objects/arrays more than ``limit`` levels (recursion stops at the limit)."""
    if not isinstance(value, dict | list):
        return False
    if limit <= 0:
        return True
    children = value.values() if isinstance(value, dict) else value
    return any(_depth_exceeds(child, limit - 1) for child in children)


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (what ``MAX_JSON_BYTES`` measures)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def check_json_object(value: dict[str, Any]) -> dict[str, Any]:
    """Refuse a free-form JSON object nested deeper than ``MAX_JSON_DEPTH`` or larger than ``MAX_JSON_BYTES``.

    Raises:
        ValueError: Saying which limit was passed and what to do instead.
    """
    if _depth_exceeds(value, MAX_JSON_DEPTH):
        raise ValueError(
            f"nested more than {MAX_JSON_DEPTH} levels deep — flatten it: keep values a few levels deep "
            "(put long structured text in the memory's content instead)"
        )
    size = json_size(value)
    if size > MAX_JSON_BYTES:
        raise ValueError(
            f"{size} bytes of JSON, over the {MAX_JSON_BYTES}-byte limit — keep it to short fields: long text "
            "belongs in a memory's content (up to 100,000 characters) or in a project file named by its path"
        )
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(check_json_object)]
"""A free-form JSON object within ``MAX_JSON_BYTES`` and ``MAX_JSON_DEPTH``."""

"""The code graph's values and errors: nodes, relationships, a file replacement's outcome, the
errors every backend raises, and driver values made JSON-safe."""

from __future__ import annotations

import base64
import datetime as _dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from resources.graph import cypher as cy
from resources.graph.cypher import EdgeType, NodeLabel
from resources.schemas.base import Schema

READ_ONLY_MESSAGE = (
    "graph_query is read-only: CREATE/MERGE/SET/DELETE/REMOVE/DROP/LOAD CSV/CALL of write "
    "procedures are refused — use the index tools to change the graph"
)
"""The message of every :class:`ReadOnlyViolation`."""

QUERY_HINT = (
    "Hint: check the Cypher syntax and names (labels File, Module, Class, Function; relationships "
    "CONTAINS, IMPORTS, CALLS, EXTENDS, IMPLEMENTS). Portable Cypher avoids `=~` (use CONTAINS / "
    "STARTS WITH / ENDS WITH), shortestPath() inside MATCH, EXISTS {} / COUNT {} subqueries and "
    "label alternation like (n:A|B), which the embedded FalkorDB backend does not support."
)
"""Appended to :class:`GraphQueryError` messages for syntax and semantic errors."""


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class GraphStoreError(Exception):
    """Base class of graph-store errors."""


class GraphUnavailable(GraphStoreError):
    """The graph database cannot be reached, started or opened."""


class GraphQueryError(GraphStoreError):
    """A query was rejected by the database (syntax, unknown function, type error, timeout)."""


class ReadOnlyViolation(GraphQueryError):
    """A read-only query contained a write clause or a write procedure call."""

    def __init__(self, detail: str | None = None) -> None:
        """Create the error.

        Args:
            detail: What was found (e.g. ``"CREATE"``), appended in parentheses.
        """
        message = READ_ONLY_MESSAGE if not detail else f"{READ_ONLY_MESSAGE} (found {detail})"
        super().__init__(message)
        self.detail = detail


# --------------------------------------------------------------------------------------------
# Value models
# --------------------------------------------------------------------------------------------

PropertyValue = str | int | float | bool | None | list[str] | list[int] | list[float] | list[bool]
"""Values a node or relationship property may hold (both backends store these natively)."""

_SYMBOL_LABELS = frozenset({"Function", "Class"})


_PROPERTY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY_CHARS = re.compile("[\x00\x01]")
"""Characters refused in ids and indexed values: FalkorDB cannot parse NUL, and its indexes
miss values containing U+0001 (its unique-constraint check even crashes the server on them)."""
_INDEXED = frozenset(prop for props in cy.INDEXED_PROPERTIES.values() for prop in props)
_VALID_NAMES: set[str] = set()
"""Property names already checked (a run writes the same few names on every node and edge)."""
_VALID_NAMES_MAX = 10_000


def _check_key_text(what: str, value: str) -> str:
    if _KEY_CHARS.search(value):
        raise ValueError(f"{what} must not contain the control characters U+0000 or U+0001")
    return value


def _check_properties(properties: dict[str, Any]) -> dict[str, Any]:
    for key, value in properties.items():
        if key not in _VALID_NAMES:
            if not isinstance(key, str) or not _PROPERTY_NAME.fullmatch(key):
                raise ValueError(f"invalid property name {key!r} (letters, digits and _ only)")
            if len(_VALID_NAMES) < _VALID_NAMES_MAX:
                _VALID_NAMES.add(key)
        kind = type(value)
        if kind is int or kind is bool or value is None:  # most values of an index run: nothing to check
            continue
        if kind is str:
            if "\x00" in value or (key in _INDEXED and "\x01" in value):
                _check_key_text(f"property {key!r}", value)
            continue
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is not None and not isinstance(item, str | int | float | bool):
                raise ValueError(f"property {key!r}: unsupported value type {type(item).__name__}")
            if isinstance(item, str) and ("\x00" in item or (key in _INDEXED and "\x01" in item)):
                _check_key_text(f"property {key!r}", item)
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"property {key!r}: non-finite float")
            if isinstance(value, list) and item is None:
                raise ValueError(f"property {key!r}: lists cannot hold null")
    return properties


class GraphNode(Schema):
    """A node of the code graph.

    ``properties`` always ends up holding ``id`` (equal to :attr:`id`); ``Function`` and
    ``Class`` nodes also get ``memory_id`` (the same id, as in the seed). Label-specific
    properties: Function ``name, qualified_name, path_qualified_name, file_path, signature,
    language, start_line, end_line, kind``; Class ``name, qualified_name, path_qualified_name,
    file_path, language, kind`` (``qualified_name`` as the language writes it,
    ``path_qualified_name`` the dotted path-based name of earlier releases); File ``path``
    (repo-relative), ``language, content_hash, indexed_at``; Module ``name, language, file_path``
    (``""`` for external modules).

    Attributes:
        id: Deterministic string id (from path + symbol).
        label: The node label.
        properties: Property map (scalars or lists of scalars).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    label: NodeLabel
    properties: dict[str, Any] = Field(default_factory=dict)

    @field_validator("properties")
    @classmethod
    def _valid_properties(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_properties(value)

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return _check_key_text("id", value)

    @model_validator(mode="after")
    def _fill_ids(self) -> GraphNode:
        props = dict(self.properties)
        if props.get("id", self.id) != self.id:
            raise ValueError(f"properties.id {props['id']!r} differs from id {self.id!r}")
        props["id"] = self.id
        if self.label in _SYMBOL_LABELS:
            if props.get("memory_id", self.id) != self.id:
                raise ValueError("properties.memory_id must equal id")
            props["memory_id"] = self.id
        self.properties = props
        return self

    @property
    def file_key(self) -> str | None:
        """The source path this node belongs to (``path`` for File, ``file_path`` otherwise)."""
        prop = cy.FILE_PATH_PROPERTY.get(self.label)
        value = self.properties.get(prop) if prop else None
        return value if isinstance(value, str) else None


class GraphEdge(Schema):
    """A relationship of the code graph.

    ``created_at`` (ISO-8601 string) is filled with the write time when absent. ``CALLS`` may carry
    ``line_number``, ``IMPORTS`` ``items``. Between two nodes there is at most one relationship of
    a type (writes ``MERGE``), so repeated calls keep the last properties written.

    Attributes:
        source_id: ``id`` of the start node.
        target_id: ``id`` of the end node.
        type: Relationship type.
        properties: Property map (scalars or lists of scalars).
    """

    model_config = ConfigDict(extra="forbid")

    source_id: str = Field(min_length=1)
    target_id: str = Field(min_length=1)
    type: EdgeType
    properties: dict[str, Any] = Field(default_factory=dict)

    @field_validator("properties")
    @classmethod
    def _valid_properties(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_properties(value)

    @field_validator("source_id", "target_id")
    @classmethod
    def _valid_ids(cls, value: str) -> str:
        return _check_key_text("id", value)

    @property
    def key(self) -> tuple[str, str, str]:
        """``(type, source_id, target_id)``: identity of the relationship."""
        return (self.type, self.source_id, self.target_id)


@dataclass(frozen=True, slots=True)
class ReplaceResult:
    """Outcome of :meth:`GraphStore.replace_file`.

    Attributes:
        nodes_deleted: Nodes removed before writing (the file's previous subgraph).
        nodes_written: Nodes merged.
        edges_written: Relationships merged.
        edges_skipped: Relationships dropped because an endpoint exists neither in the batch nor
            in the graph (e.g. an unresolved cross-file call).
    """

    nodes_deleted: int
    nodes_written: int
    edges_written: int
    edges_skipped: int


# --------------------------------------------------------------------------------------------
# Result conversion
# --------------------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """Convert a plain (non-graph) driver value to a JSON-safe value.

    Temporal values become ISO-8601 strings, maps become dicts, tuples/sets lists, bytes base64,
    non-finite floats strings; anything else unknown becomes ``str(value)``.

    Args:
        value: A value from a driver result.

    Returns:
        A value made of dict/list/str/int/float/bool/None.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    iso = getattr(value, "iso_format", None)  # neo4j.time types
    if callable(iso):
        return iso()
    return str(value)

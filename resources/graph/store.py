"""The code-graph store: a ``GraphStore`` protocol, its value models and shared logic.

Two implementations exist: :class:`resources.graph.falkor.FalkorGraphStore` (embedded FalkorDB,
the default) and :class:`resources.graph.neo4j_store.Neo4jGraphStore` (a Neo4j 5 server). Pick one with
:func:`resources.graph.factory.create_graph_store`. Every statement they send to the database is
in :mod:`resources.graph.cypher`; the backends only differ in how a statement is executed and how
results are converted.

Client Cypher (the ``graph_query`` tool) goes through :meth:`GraphStore.read_query`, which refuses
mutating Cypher before sending it (:func:`assert_read_only`) *and* runs it in the backend's
read-only mode.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
import re
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from resources.graph import cypher as cy
from resources.graph.cypher import EDGE_TYPES, MEMORY_EDGE_TYPES, MEMORY_LABELS, NODE_LABELS, EdgeType, NodeLabel
from resources.text.identifiers import identifier_words

__all__ = [
    "EDGE_TYPES",
    "MEMORY_EDGE_TYPES",
    "MEMORY_LABELS",
    "NODE_LABELS",
    "READ_ONLY_MESSAGE",
    "BaseGraphStore",
    "EdgeType",
    "GraphEdge",
    "GraphNode",
    "GraphQueryError",
    "GraphStore",
    "GraphStoreError",
    "GraphUnavailable",
    "NodeLabel",
    "ReadOnlyViolation",
    "ReplaceResult",
    "assert_read_only",
    "strip_cypher",
    "to_jsonable",
]

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


def _check_key_text(what: str, value: str) -> str:
    if _KEY_CHARS.search(value):
        raise ValueError(f"{what} must not contain the control characters U+0000 or U+0001")
    return value


def _check_properties(properties: dict[str, Any]) -> dict[str, Any]:
    for key, value in properties.items():
        if not isinstance(key, str) or not _PROPERTY_NAME.fullmatch(key):
            raise ValueError(f"invalid property name {key!r} (letters, digits and _ only)")
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


class GraphNode(BaseModel):
    """A node of the code graph.

    ``properties`` always ends up holding ``id`` (equal to :attr:`id`); ``Function`` and
    ``Class`` nodes also get ``memory_id`` (the same id, as in the seed). Label-specific
    properties: Function ``name, qualified_name, file_path, signature, language, start_line,
    end_line, kind``; Class ``name, qualified_name, file_path, language, kind``; File ``path``
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


class GraphEdge(BaseModel):
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
# Read-only guard for client Cypher
# --------------------------------------------------------------------------------------------

_WRITE_CLAUSES = frozenset(
    {
        "CREATE",
        "MERGE",
        "SET",
        "DELETE",
        "REMOVE",
        "DROP",
        "FOREACH",
        "ALTER",
        "RENAME",
        "GRANT",
        "DENY",
        "REVOKE",
        "TERMINATE",
    }
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROCEDURE = re.compile(
    r"\bCALL\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)", re.IGNORECASE
)
_WRITE_VERBS = frozenset(
    {
        "create",
        "drop",
        "delete",
        "remove",
        "merge",
        "set",
        "add",
        "clear",
        "kill",
        "terminate",
        "load",
        "write",
        "import",
        "refactor",
        "periodic",
        "upgrade",
        "reset",
        "rename",
        "truncate",
        "flush",
        "commit",
        "mutate",
        "stop",
        "start",
        "enable",
        "disable",
        "alter",
        "grant",
        "revoke",
        "deny",
        "copy",
        "restore",
        "backup",
        "checkpoint",
        "await",
        "do",  # apoc.cypher.doIt, apoc.do.when/case: run a write statement given as a string
    }
)
_READ_PROCEDURE_PREFIXES = (
    "db.labels",
    "db.relationshiptypes",
    "db.propertykeys",
    "db.indexes",
    "db.constraints",
    "db.schema.",
    "db.meta.stats",
    "db.info",
    "db.ping",
    "db.idx.fulltext.query",
    "db.idx.vector.query",
    "db.index.fulltext.query",
    "db.index.vector.query",
    "dbms.components",
    "dbms.procedures",
    "dbms.functions",
    "dbms.info",
    "dbms.showcurrentuser",
)


def strip_cypher(cypher: str) -> str:
    """Blank out comments, string literals and backtick-quoted names of a Cypher text.

    Comments become a space, strings become ``''`` and quoted names become ``_q``, so keyword
    checks see only the statement's own words.

    Args:
        cypher: Cypher text.

    Returns:
        The text with those parts replaced (an unterminated one runs to the end).
    """
    out: list[str] = []
    i, n = 0, len(cypher)
    while i < n:
        ch = cypher[i]
        two = cypher[i : i + 2]
        if two == "//":
            end = cypher.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif two == "/*":
            end = cypher.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif ch in ("'", '"'):
            i += 1
            while i < n and cypher[i] != ch:
                i += 2 if cypher[i] == "\\" else 1
            i += 1
            out.append(" '' ")
        elif ch == "`":
            i += 1
            while i < n:
                if cypher[i] == "`":
                    if cypher[i + 1 : i + 2] == "`":  # doubled backtick escapes itself
                        i += 2
                        continue
                    break
                i += 1
            i += 1
            out.append(" _q ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _neighbour(text: str, index: int, step: int) -> str:
    while 0 <= index < len(text) and text[index].isspace():
        index += step
    return text[index] if 0 <= index < len(text) else ""


def _is_write_procedure(name: str) -> bool:
    lowered = name.lower()
    if lowered.startswith(("db.", "dbms.")) and not lowered.startswith(_READ_PROCEDURE_PREFIXES):
        return True
    words = {word for part in name.split(".") for word in identifier_words(part, unicode_digits=True)}
    return bool(words & _WRITE_VERBS)


def assert_read_only(cypher: str) -> None:
    """Refuse Cypher that could change the graph, before it is sent.

    The check runs on :func:`strip_cypher` output, case-insensitively. A keyword counts when it
    stands as a clause word: not a property (``n.set``), a parameter (``$create``), a label or
    type (``:Merge``) or a map key (``{delete: 1}``). So ``RETURN 'create'``, a comment saying
    "delete" or a property ``created_at`` pass. Refused: CREATE, MERGE, SET, DELETE (incl.
    DETACH DELETE), REMOVE, DROP, FOREACH, LOAD CSV, administration clauses (ALTER, GRANT, ...),
    and CALL of procedures that write (``db.*``/``dbms.*`` outside a read allow-list, or any
    procedure whose name contains a write verb such as create/drop/set). The backend's read-only
    mode remains the real guarantee; this gives a clear message first.

    Args:
        cypher: The client's Cypher.

    Raises:
        ReadOnlyViolation: If a write clause or write procedure call is found.
    """
    text = strip_cypher(cypher)
    for match in _WORD.finditer(text):
        word = match.group(0).upper()
        if word not in _WRITE_CLAUSES and word not in ("LOAD", "START", "STOP"):
            continue
        before = _neighbour(text, match.start() - 1, -1)
        after = _neighbour(text, match.end(), 1)
        if before in (".", "$", ":") or after == ":":
            continue
        if word == "LOAD":
            rest = text[match.end() :].lstrip()
            if rest[:3].upper() == "CSV":
                raise ReadOnlyViolation("LOAD CSV")
            continue
        if word in ("START", "STOP"):
            rest = text[match.end() :].lstrip()
            if rest[:8].upper() == "DATABASE":
                raise ReadOnlyViolation(f"{word} DATABASE")
            continue
        raise ReadOnlyViolation(word)
    for match in _PROCEDURE.finditer(text):
        name = re.sub(r"\s+", "", match.group(1))
        if _is_write_procedure(name):
            raise ReadOnlyViolation(f"CALL {name}")


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


# --------------------------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------------------------


@runtime_checkable
class GraphStore(Protocol):
    """What the indexer and the query server need from a code-graph database."""

    backend: str
    """``"falkordb"`` or ``"neo4j"``."""

    def ensure_schema(self) -> None:
        """Create the lookup indexes and uniqueness constraints (idempotent)."""
        ...

    def replace_file(
        self, path: str, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]
    ) -> ReplaceResult:
        """Replace one file's subgraph in a single atomic statement.

        Deletes the File node with ``path`` and every node whose ``file_path`` is ``path``
        (with their relationships, incoming cross-file ones included), then merges ``nodes`` and
        ``edges``. Relationship endpoints outside the batch are matched by id in the graph;
        relationships whose endpoints exist nowhere are skipped and counted. Re-running with the
        same input leaves the same graph.
        """
        ...

    def replace_files(
        self, paths: Sequence[str], nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]
    ) -> ReplaceResult:
        """``replace_file`` for several files in one atomic statement (fewer round trips)."""
        ...

    def delete_files(self, paths: Sequence[str]) -> int:
        """Delete the subgraphs of ``paths``; returns the number of nodes deleted."""
        ...

    def merge_nodes(self, nodes: Sequence[GraphNode]) -> int:
        """Upsert nodes by id (e.g. external Module nodes); returns the number written."""
        ...

    def delete_nodes(self, label: NodeLabel, ids: Sequence[str]) -> int:
        """Delete nodes of ``label`` by id with their relationships; returns how many went."""
        ...

    def add_edges(self, edges: Sequence[GraphEdge]) -> int:
        """Upsert relationships between existing nodes; returns how many were written (edges
        with a missing endpoint are skipped)."""
        ...

    def remove_edges(self, edges: Sequence[GraphEdge]) -> int:
        """Delete relationships by (type, source id, target id); returns how many were removed."""
        ...

    def read_query(
        self,
        cypher: str,
        parameters: Mapping[str, Any] | None = None,
        limit: int = 1000,
        *,
        timeout_s: float = 30.0,
    ) -> tuple[list[str], list[dict[str, Any]], bool]:
        """Run client Cypher read-only.

        Returns:
            ``(columns, rows, truncated)``: rows are dicts keyed by column with JSON-safe values
            (node → ``{"labels": [...], **properties}``, relationship →
            ``{"type": ..., "properties": {...}}``, path → list alternating nodes and
            relationships); ``truncated`` is True when more than ``limit`` rows existed.

        Raises:
            ReadOnlyViolation: The Cypher writes (refused before sending, or by the backend).
            GraphQueryError: Syntax or runtime error, with the backend's message and a hint.
        """
        ...

    def write_unless_reading(self) -> AbstractContextManager[bool]:
        """Enter around a write a caller waits for: yields False (write nothing; the caller
        retries later) when a client read runs and the write would wait for it, else True."""
        ...

    def counts(self) -> dict[str, int]:
        """Nodes per label and relationships per type, in one flat dict."""
        ...

    def node_ids(self, label: NodeLabel) -> set[str]:
        """All ids of one label."""
        ...

    def health(self) -> dict[str, Any]:
        """``{"ok": True, "backend": ..., ...}`` or ``{"ok": False, "backend": ..., "error": ...}``."""
        ...

    def close(self) -> None:
        """Release the connection (embedded: stop the server, data persisted). Idempotent."""
        ...


# --------------------------------------------------------------------------------------------
# Shared implementation
# --------------------------------------------------------------------------------------------

T = TypeVar("T")


_LOOKUP_ORDER: tuple[NodeLabel, ...] = ("Function", "Class", "Module", "File", *MEMORY_LABELS)
"""Labels tried when locating ids, most numerous first."""


def chunked[T](items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Yield consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _edge_row(edge: GraphEdge, created_at: str) -> dict[str, Any]:
    props = dict(edge.properties)
    props.setdefault("created_at", created_at)
    return {"source": edge.source_id, "target": edge.target_id, "props": props}


def _dedupe_nodes(nodes: Iterable[GraphNode]) -> dict[str, GraphNode]:
    by_id: dict[str, GraphNode] = {}
    for node in nodes:
        by_id[node.id] = node
    return by_id


def _dedupe_edges(edges: Iterable[GraphEdge]) -> list[GraphEdge]:
    return list({edge.key: edge for edge in edges}.values())


class BaseGraphStore(ABC):
    """Backend-independent logic; subclasses execute statements.

    Subclasses implement :meth:`_write` and :meth:`_read` (internal statements from
    :mod:`resources.graph.cypher`, rows as dicts) plus ``ensure_schema``, ``read_query``,
    ``health`` and ``close``.
    """

    backend: str = "abstract"
    node_batch_size: int = 2000
    edge_batch_size: int = 5000
    lookup_batch_size: int = 5000

    @abstractmethod
    def _write(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Run one write statement atomically and return its rows."""

    @abstractmethod
    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one internal read statement and return its rows."""

    # -- lookups ---------------------------------------------------------------------------

    def _locate(self, ids: Iterable[str]) -> dict[str, tuple[NodeLabel, str | None]]:
        """Find ``(label, file key)`` of existing nodes by id (ids not found are absent)."""
        missing = set(ids)
        found: dict[str, tuple[NodeLabel, str | None]] = {}
        for label in _LOOKUP_ORDER:
            if not missing:
                break
            query = cy.locate_ids_query(label)
            for chunk in chunked(sorted(missing), self.lookup_batch_size):
                for row in self._read(query, {"ids": list(chunk)}):
                    found[row["id"]] = (label, row.get("file_key"))
            missing.difference_update(found)
        return found

    # -- writes ----------------------------------------------------------------------------

    def replace_file(
        self, path: str, nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]
    ) -> ReplaceResult:
        """See :meth:`GraphStore.replace_file`."""
        return self.replace_files([path], nodes, edges)

    def replace_files(
        self, paths: Sequence[str], nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]
    ) -> ReplaceResult:
        """Replace the subgraphs of several files in one statement (see ``replace_file``)."""
        path_set = set(paths)
        batch = _dedupe_nodes(nodes)
        labels: dict[str, NodeLabel] = {node_id: node.label for node_id, node in batch.items()}
        unique_edges = _dedupe_edges(edges)
        external = {e for edge in unique_edges for e in (edge.source_id, edge.target_id)} - labels.keys()
        for node_id, (label, file_key) in self._locate(external).items():
            if file_key not in path_set:  # nodes of these files not in the batch are about to be deleted
                labels[node_id] = label

        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for node in batch.values():
            by_label[node.label].append({"id": node.id, "props": node.properties})
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        skipped = 0
        created_at = _now_iso()
        for edge in unique_edges:
            source, target = labels.get(edge.source_id), labels.get(edge.target_id)
            if source is None or target is None:
                skipped += 1
                continue
            groups[(edge.type, source, target)].append(_edge_row(edge, created_at))

        group_keys = list(groups)
        params: dict[str, Any] = {"paths": sorted(path_set)}
        for label, rows in by_label.items():
            params[f"nodes_{label}"] = rows
        for i, key in enumerate(group_keys):
            params[f"edges_{i}"] = groups[key]
        rows = self._write(cy.replace_file_query(list(by_label), group_keys), params)
        deleted = int(rows[0]["deleted"]) if rows else 0
        return ReplaceResult(
            nodes_deleted=deleted,
            nodes_written=len(batch),
            edges_written=sum(len(v) for v in groups.values()),
            edges_skipped=skipped,
        )

    def delete_files(self, paths: Sequence[str]) -> int:
        """See :meth:`GraphStore.delete_files`."""
        deleted = 0
        for chunk in chunked(sorted(set(paths)), 500):
            rows = self._write(cy.DELETE_FILES, {"paths": list(chunk)})
            deleted += int(rows[0]["deleted"]) if rows else 0
        return deleted

    def delete_nodes(self, label: NodeLabel, ids: Sequence[str]) -> int:
        """See :meth:`GraphStore.delete_nodes`."""
        deleted = 0
        query = cy.delete_nodes_query(label)
        for chunk in chunked(sorted(set(ids)), self.node_batch_size):
            rows = self._write(query, {"ids": list(chunk)})
            deleted += int(rows[0]["deleted"]) if rows else 0
        return deleted

    def merge_nodes(self, nodes: Sequence[GraphNode]) -> int:
        """See :meth:`GraphStore.merge_nodes`."""
        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for node in _dedupe_nodes(nodes).values():
            by_label[node.label].append({"id": node.id, "props": node.properties})
        written = 0
        for label, rows in by_label.items():
            query = cy.merge_nodes_query(label)
            for chunk in chunked(rows, self.node_batch_size):
                result = self._write(query, {"rows": list(chunk)})
                written += int(result[0]["written"]) if result else 0
        return written

    def _edge_groups(
        self, edges: Sequence[GraphEdge], with_props: bool
    ) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
        unique = _dedupe_edges(edges)
        located = self._locate({e for edge in unique for e in (edge.source_id, edge.target_id)})
        created_at = _now_iso()
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
        for edge in unique:
            if edge.source_id not in located or edge.target_id not in located:
                continue
            key = (edge.type, located[edge.source_id][0], located[edge.target_id][0])
            row = (
                _edge_row(edge, created_at)
                if with_props
                else {"source": edge.source_id, "target": edge.target_id}
            )
            groups[key].append(row)
        return groups

    def add_edges(self, edges: Sequence[GraphEdge]) -> int:
        """See :meth:`GraphStore.add_edges`."""
        written = 0
        for (edge_type, source, target), rows in self._edge_groups(edges, True).items():
            query = cy.merge_edges_query(edge_type, source, target)
            for chunk in chunked(rows, self.edge_batch_size):
                result = self._write(query, {"rows": list(chunk)})
                written += int(result[0]["written"]) if result else 0
        return written

    def remove_edges(self, edges: Sequence[GraphEdge]) -> int:
        """See :meth:`GraphStore.remove_edges`."""
        removed = 0
        for (edge_type, source, target), rows in self._edge_groups(edges, False).items():
            query = cy.delete_edges_query(edge_type, source, target)
            for chunk in chunked(rows, self.edge_batch_size):
                result = self._write(query, {"rows": list(chunk)})
                removed += int(result[0]["removed"]) if result else 0
        return removed

    # -- reads -----------------------------------------------------------------------------

    @contextmanager
    def write_unless_reading(self) -> Iterator[bool]:
        """See :meth:`GraphStore.write_unless_reading`: always True here (a backend whose reads
        block writes, the embedded FalkorDB, overrides it)."""
        yield True

    def counts(self) -> dict[str, int]:
        """See :meth:`GraphStore.counts`."""
        result: dict[str, int] = {}
        for label in NODE_LABELS:
            rows = self._read(cy.count_nodes_query(label))
            result[label] = int(rows[0]["n"]) if rows else 0
        for edge_type in EDGE_TYPES:
            rows = self._read(cy.count_edges_query(edge_type))
            result[edge_type] = int(rows[0]["n"]) if rows else 0
        return result

    def node_ids(self, label: NodeLabel) -> set[str]:
        """See :meth:`GraphStore.node_ids`."""
        return {row["id"] for row in self._read(cy.node_ids_query(label))}

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release resources."""

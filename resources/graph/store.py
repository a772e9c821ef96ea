"""The code-graph store: the ``GraphStore`` protocol, and the graph's public names in one place.

Two implementations exist: :class:`resources.graph.falkor.FalkorGraphStore` (embedded FalkorDB,
the default) and :class:`resources.graph.neo4j_store.Neo4jGraphStore` (a Neo4j 5 server). Pick one with
:func:`resources.graph.factory.create_graph_store`. Every statement they send to the database is
in :mod:`resources.graph.cypher`; the backends only differ in how a statement is executed and how
results are converted; what they share is :class:`resources.graph.base.BaseGraphStore`. The
values and errors are in :mod:`resources.graph.model`.

Client Cypher (the ``graph_query`` tool) goes through :meth:`GraphStore.read_query`, which refuses
mutating Cypher before sending it (:func:`resources.graph.read_only.assert_read_only`) *and* runs
it in the backend's read-only mode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from resources.graph.base import BaseGraphStore
from resources.graph.cypher import EDGE_TYPES, MEMORY_EDGE_TYPES, MEMORY_LABELS, NODE_LABELS, EdgeType, NodeLabel
from resources.graph.model import (
    READ_ONLY_MESSAGE,
    GraphEdge,
    GraphNode,
    GraphQueryError,
    GraphStoreError,
    GraphUnavailable,
    ReadOnlyViolation,
    ReplaceResult,
    to_jsonable,
)
from resources.graph.read_only import assert_read_only, strip_cypher

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
        self, paths: Sequence[str], nodes: Sequence[GraphNode], edges: Sequence[GraphEdge],
        gone: Iterable[tuple[str, NodeLabel]] | None = None,
    ) -> ReplaceResult:
        """``replace_file`` for several files in one atomic statement (fewer round trips).

        With ``gone`` ((node id, label) pairs: the nodes of the files' last write that this one lacks),
        the files' subgraphs are written over what the graph holds of them instead: the ``gone``
        nodes are deleted with their relationships, and the files' other nodes (their ``File``
        nodes too) stay, with every relationship but ``CONTAINS`` (written again), their
        properties replaced by those in ``nodes``. The caller vouches that the graph holds the
        files as their last write left them.
        """
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

    def compact_in_background(self) -> None:
        """A burst of writes is over: compact what persists them now, in the store's background,
        so that ``close`` need not (embedded: the AOF rewritten to a snapshot; a server: nothing)."""
        ...

    def close(self) -> None:
        """Release the connection (embedded: stop the server, data persisted). Idempotent."""
        ...

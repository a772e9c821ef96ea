"""The backend-independent half of a graph store: batching, id lookup, file replacement and edge
grouping over the statements of ``resources.graph.cypher``; a backend only runs statements."""

from __future__ import annotations

import datetime as _dt
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from resources.graph import cypher as cy
from resources.graph.cypher import EDGE_TYPES, MEMORY_LABELS, NODE_LABELS, NodeLabel
from resources.graph.model import GraphEdge, GraphNode, ReplaceResult

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
        self, paths: Sequence[str], nodes: Sequence[GraphNode], edges: Sequence[GraphEdge],
        gone: Iterable[tuple[str, NodeLabel]] | None = None,
    ) -> ReplaceResult:
        """Replace the subgraphs of several files in one statement (see ``GraphStore.replace_files``)."""
        path_set = set(paths)
        batch = _dedupe_nodes(nodes)
        labels: dict[str, NodeLabel] = {node_id: node.label for node_id, node in batch.items()}
        unique_edges = _dedupe_edges(edges)
        external = {e for edge in unique_edges for e in (edge.source_id, edge.target_id)} - labels.keys()
        for node_id, (label, file_key) in self._locate(external).items():
            if file_key not in path_set:  # nodes of these files not in the batch are about to be deleted
                labels[node_id] = label

        by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for node in batch.values():  # (written over a kept node, its properties are replaced: ``id`` among them)
            props = node.properties if gone is None else {**node.properties, "id": node.id}
            by_label[node.label].append({"id": node.id, "props": props})
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
        gone_labels = None
        if gone is not None:
            by_gone_label: dict[str, list[str]] = defaultdict(list)
            for node_id, label in gone:
                by_gone_label[label].append(node_id)
            gone_labels = sorted(by_gone_label)
            params.update({f"gone_{label}": sorted(ids) for label, ids in by_gone_label.items()})
        rows = self._write(cy.replace_file_query(list(by_label), group_keys, gone_labels), params)
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

    def compact_in_background(self) -> None:
        """See :meth:`GraphStore.compact_in_background` (nothing to do for a server)."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release resources."""

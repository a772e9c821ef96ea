"""Projections of the memory ledger into the vector store and the graph.

One Qdrant collection per memory type (the seed's names), dense + sparse vectors, payload for
filtering (type, deleted flag, timestamps as epoch seconds, importance, metadata). One graph
node per live memory (a label per type) with the memory's relationships as edges. Both are
derived data: ``MemoryProjector.drain`` brings them up to the ledger from its outbox, and
``rebuild`` recreates them from the ledger alone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from resources.embeddings.base import Embedder
from resources.graph.store import GraphEdge, GraphNode, GraphStore
from resources.memory.graph_replay import GraphWriteLog
from resources.memory.ledger import Ledger, MemoryRow
from resources.vectors import sparse
from resources.vectors.store import VectorPoint, VectorStore

if TYPE_CHECKING:
    import numpy as np

log = structlog.get_logger("codemem.memory_projection")

COLLECTIONS: dict[str, str] = {
    "requirements": "requirements_memory",
    "design": "design_memory",
    "code_pattern": "code_patterns",
    "component": "component_registry",
    "function": "function_index",
    "test_history": "test_history",
    "session": "session_history",
    "user_preference": "user_preferences",
}
"""The Qdrant collection of each memory type (seed 001, section 7.2)."""

MEMORY_INDEXES = ("status", "created_ts", "importance_score", "metadata.status")
"""The memory collections' payload indexes: the filter of every memory search (status), time and
importance ranges, and the metadata field most filters name (the status of designs,
requirements and test runs). Other ``metadata_filters`` fields are not indexed (checked against
each candidate). The embedded store builds them once a collection is large enough to gain from
them (``resources.vectors.edge.INDEXED_FROM_POINTS``): each costs every session ~7 ms to open per
collection."""

GENERATION_KEY = "memory_generation"


def collection_name(memory_type: str, generation: int, scope: str = "project") -> str:
    """The collection of a memory type in a generation (generation 0 uses the seed's plain names);
    the ``local`` and ``global`` scopes have collections of their own (``<name>_local``,
    ``<name>_global``) in the project's vector store."""
    base = COLLECTIONS[memory_type]
    if scope != "project":
        base = f"{base}_{scope}"
    return base if generation == 0 else f"{base}_g{generation}"


GRAPH_LABELS: dict[str, str] = {
    "requirements": "Requirement",
    "design": "Design",
    "code_pattern": "Pattern",
    "component": "Component",
    "function": "FunctionNote",
    "test_history": "Test",
    "session": "Session",
    "user_preference": "Preference",
}
"""The graph label of each memory type's nodes."""

EMBED_CHARS = 8_000
"""Characters of a memory's prepared text that are embedded (the local model reads ~256 tokens;
Voyage reads far more, and the sparse vector always sees the whole prepared text)."""

_TITLE_KEYS = ("title", "pattern_name", "name", "test_name", "key", "requirement_id", "component_id")
_GRAPH_PROPS = (
    "title", "name", "requirement_id", "priority", "status", "design_type", "pattern_name", "pattern_type",
    "language", "component_id", "component_type", "file_path", "signature", "test_name", "test_file",
    "category", "key", "scope", "session_id",
)


def memory_title(metadata: dict[str, Any]) -> str | None:
    """The human name of a memory (title, pattern name, test name...), when it has one."""
    for key in _TITLE_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def prepared_text(memory_type: str, content: str, metadata: dict[str, Any]) -> str:
    """The text embedded for a memory (seed 001, 6.2: requirements are title + description,
    patterns add template and usage context, functions signature + docstring, ...)."""
    parts: list[str] = []
    title = memory_title(metadata)
    if title:
        parts.append(title)
    if memory_type == "function":
        parts.extend(str(metadata[k]) for k in ("signature", "docstring") if metadata.get(k))
    parts.append(content)
    if memory_type == "design":
        parts.extend(str(metadata[k]) for k in ("decision", "rationale") if metadata.get(k))
    elif memory_type == "code_pattern":
        parts.extend(str(metadata[k]) for k in ("usage_context", "code_template") if metadata.get(k))
    elif memory_type == "user_preference" and metadata.get("value") is not None:
        parts.append(f"{metadata.get('key', '')} = {metadata['value']}")
    elif memory_type == "test_history":
        parts.extend(str(metadata[k]) for k in ("failure_message", "fix_applied") if metadata.get(k))
    return "\n".join(parts)


def text_digest(memory_type: str, content: str, metadata: dict[str, Any]) -> str:
    """Fingerprint of what a memory's dense vector embeds (a supplied vector is used only when it
    was computed for the row's current text)."""
    import hashlib

    return hashlib.sha256(prepared_text(memory_type, content, metadata)[:EMBED_CHARS].encode()).hexdigest()


def epoch(iso: str | None) -> float | None:
    """ISO 8601 → epoch seconds (what range filters compare)."""
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _scalar_props(metadata: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for key in _GRAPH_PROPS:
        value = metadata.get(key)
        if isinstance(value, (str, int, float, bool)):
            props[key] = value
    return props


@dataclass
class ProjectionReport:
    """What one drain did (``deferred``: memories whose vectors were written but whose graph part
    waits in the outbox, because a client read held the graph)."""

    projected: int = 0
    deleted: int = 0
    failed: int = 0
    deferred: int = 0
    requeued: int = 0
    """Memories queued again because the graph server restarted just after they were written."""
    last_error: str | None = None


class MemoryProjector:
    """Writes ledger memories into the vector store and the graph, from the ledger's outbox."""

    def __init__(
        self,
        ledger: Ledger,
        vectors: VectorStore,
        graph: GraphStore | None,
        embedder: Embedder,
        *,
        scope: str = "project",
    ) -> None:
        """Project ``ledger`` into ``vectors`` and ``graph`` with ``embedder``.

        Args:
            ledger: The system of record (for the global scope: this project's replica of it).
            vectors: Where memory vectors go (one collection per type).
            graph: Where memory nodes and relationships go (None: no graph projection).
            embedder: The active embedding model.
            scope: The memory scope of ``ledger``: it names the collections and is in every payload.
        """
        self.ledger = ledger
        self.scope = scope
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder
        self.write_lock = threading.Lock()
        self._graph_writes = GraphWriteLog(graph)
        self._ready: set[str] = set()
        self._generation: int | None = None

    @property
    def generation(self) -> int:
        """The live generation of the memory collections (normalization builds the next one
        beside it and swaps by bumping this number in the ledger). Cached until
        ``refresh_generation``: in server mode another replica may swap it, so the sync re-reads it
        every tick and a projection marks a memory done only if the generation it wrote to is still
        the live one (``Ledger.mark_projected(meta=...)``)."""
        if self._generation is None:
            self._generation = int(self.ledger.meta(GENERATION_KEY) or 0)
        return self._generation

    def refresh_generation(self) -> None:
        """Re-read the live generation (after a swap or a restore)."""
        self._generation = None

    def collection(self, memory_type: str, generation: int | None = None) -> str:
        """The collection of a memory type (of the live generation unless given), created on first
        use with the model's dimension."""
        name = collection_name(memory_type, self.generation if generation is None else generation, self.scope)
        if name not in self._ready:
            self.vectors.ensure_collection(name, self.embedder.dimension, MEMORY_INDEXES, dense_on_disk=True)
            self._ready.add(name)
        return name

    def embed(self, rows: Sequence[MemoryRow]) -> np.ndarray:
        """Dense vectors of memories' prepared texts (the embedding cache answers repeats)."""
        texts = [prepared_text(r.memory_type, r.content, r.metadata)[:EMBED_CHARS] for r in rows]
        return self.embedder.embed_documents(texts)

    def point(self, row: MemoryRow, dense: Sequence[float]) -> VectorPoint:
        payload = {
            "memory_id": row.id,
            "memory_type": row.memory_type,
            "scope": self.scope,
            "deleted": row.deleted,
            "status": "deleted" if row.deleted else "active",  # qdrant-edge matches bools as ints; filter on this
            "created_ts": epoch(row.created_at),
            "updated_ts": epoch(row.updated_at),
            "importance_score": row.importance_score,
            "content_hash": row.content_hash,
            "version": row.version,
            "metadata": row.metadata,
        }
        text = prepared_text(row.memory_type, row.content, row.metadata)
        return VectorPoint(id=row.id, payload=payload, dense=list(map(float, dense)), sparse=sparse.document_vector(text))

    def project(self, memory_ids: Sequence[str], *, vectors_of: dict[str, Any] | None = None) -> ProjectionReport:
        """Bring the projections of ``memory_ids`` up to the ledger; failures stay queued.

        Args:
            memory_ids: Memories to project (gone ones are removed from both stores).
            vectors_of: Dense vectors already computed for some ids: a bare vector is trusted (bulk
                loaders), a ``(text_digest, vector)`` pair is used only if the row's current text
                has that digest (a concurrent update may have changed it; then it is re-embedded).

        Returns:
            Counts, and the last error when some projection failed. The graph part never waits
            for a client read (``GraphStore.write_unless_reading``): while one runs, the memories
            stay in the outbox (``deferred``) and the next drain writes them.
        """
        report = ProjectionReport()
        if not memory_ids:
            return report
        with self.write_lock:
            report.requeued += self._requeue_lost_graph_writes()
            try:
                return self._project(memory_ids, vectors_of, report)
            finally:
                report.requeued += self._requeue_lost_graph_writes()  # the server restarted during this write

    def _requeue_lost_graph_writes(self) -> int:
        """Queue again the memories a restarted graph server may have lost (``graph_replay``); how
        many. A failure to queue them is logged and retried at the next check."""
        pending = self._graph_writes.lost()
        if pending is None:
            return 0
        restarts, lost = pending
        try:
            if lost:
                self.ledger.requeue(lost)
        except Exception:  # noqa: BLE001 - the next projection or drain tries again
            log.exception("queueing the memories a restarted graph server lost failed; retrying later")
            return 0
        self._graph_writes.replayed(restarts)
        if lost:
            log.warning("the graph server restarted; projecting the memories written just before it again", memories=len(lost))
        return len(lost)

    def _project(
        self, memory_ids: Sequence[str], vectors_of: dict[str, Any] | None, report: ProjectionReport
    ) -> ProjectionReport:
        """``project`` under the write lock: only the memories this projector could claim (another
        process's projector writes the others, ``Ledger.claim``)."""
        queued = self.ledger.claim(memory_ids)
        memory_ids = list(queued)
        if not memory_ids:
            return report
        try:
            rows = self.ledger.get_many(memory_ids)
            gone = [memory_id for memory_id in memory_ids if memory_id not in rows]
            try:
                self._project_vectors(list(rows.values()), vectors_of or {})
                if gone:
                    for memory_type in COLLECTIONS:
                        self.vectors.delete(self.collection(memory_type), list(gone))
                projected_graph = self._project_graph(list(rows.values()), gone)
            except Exception as exc:  # noqa: BLE001 - any store failure leaves the outbox row for a retry
                message = f"{type(exc).__name__}: {exc}"
                self.ledger.mark_failed(list(memory_ids), message)  # (releases the claims)
                report.failed = len(memory_ids)
                report.last_error = message
                log.warning("memory projection failed; queued for retry", error=message, memories=len(memory_ids))
                return report
            if not projected_graph:
                self.ledger.release(memory_ids)
                report.deferred = len(memory_ids)
                return report
        except BaseException:
            with contextlib.suppress(Exception):  # (the ledger may be what failed: the claims then expire)
                self.ledger.release(memory_ids)
            raise
        written_to = (GENERATION_KEY, str(self.generation))  # another replica may swap it meanwhile
        for memory_id in memory_ids:
            self.ledger.mark_projected(memory_id, queued.get(memory_id), meta=written_to)
        report.projected = len(rows)
        report.deleted = len(gone)
        return report

    def _project_vectors(self, rows: list[MemoryRow], supplied: dict[str, Any]) -> None:
        if not rows:
            return
        vectors_of: dict[str, np.ndarray] = {}
        for row in rows:
            given = supplied.get(row.id)
            if isinstance(given, tuple):
                digest, vector = given
                if digest == text_digest(row.memory_type, row.content, row.metadata):
                    vectors_of[row.id] = vector
            elif given is not None:
                vectors_of[row.id] = given
        missing = [r for r in rows if r.id not in vectors_of]
        computed = dict(zip([r.id for r in missing], self.embed(missing), strict=True)) if missing else {}
        by_type: dict[str, list[VectorPoint]] = {}
        for row in rows:
            dense = vectors_of.get(row.id)
            if dense is None:
                dense = computed[row.id]
            by_type.setdefault(row.memory_type, []).append(self.point(row, dense))
        for memory_type, points in by_type.items():
            self.vectors.upsert(self.collection(memory_type), points)

    def _project_graph(self, rows: list[MemoryRow], gone: list[str]) -> bool:
        """Memory nodes and relationships of ``rows``, and no node for ``gone`` (hard-deleted) ids;
        False, writing nothing, while a client read holds the graph."""
        if self.graph is None or not (rows or gone):
            return True
        with self.graph.write_unless_reading() as free:
            if free:
                self._write_graph(rows, gone)
        return free

    def _write_graph(self, rows: list[MemoryRow], gone: list[str]) -> None:
        assert self.graph is not None
        if gone:
            for label in GRAPH_LABELS.values():
                self.graph.delete_nodes(label, list(gone))  # type: ignore[arg-type]
        live = [r for r in rows if not r.deleted]
        dead = [r for r in rows if r.deleted]
        for row in dead:
            self.graph.delete_nodes(GRAPH_LABELS[row.memory_type], [row.id])  # type: ignore[arg-type]
        nodes = [
            GraphNode(
                id=row.id,
                label=GRAPH_LABELS[row.memory_type],  # type: ignore[arg-type]
                properties={
                    "memory_id": row.id,
                    "memory_type": row.memory_type,
                    "memory_scope": self.scope,
                    "importance_score": row.importance_score,
                    "created_at": row.created_at,
                    "updated_at": row.updated_at,
                    **_scalar_props(row.metadata),
                },
            )
            for row in live
        ]
        if nodes:
            self.graph.merge_nodes(nodes)
        edges: list[GraphEdge] = []
        for row in live:
            outgoing, incoming = self.ledger.relationships_of(row.id)
            for rel in (*outgoing, *incoming):
                edges.append(
                    GraphEdge(
                        source_id=rel.source_id,
                        target_id=rel.target_id,
                        type=rel.rel_type,  # type: ignore[arg-type]
                        properties={k: v for k, v in rel.properties.items() if isinstance(v, (str, int, float, bool))},
                    )
                )
        if edges:
            self.graph.add_edges(edges)
        self._graph_writes.wrote([*gone, *(row.id for row in rows)])

    def drain(self, *, batch: int = 128, max_batches: int | None = None) -> ProjectionReport:
        """Project everything due in the outbox, batch by batch, until it is empty or fails."""
        total = ProjectionReport()
        with self.write_lock:  # a restart found by a read: its lost writes are due now
            total.requeued += self._requeue_lost_graph_writes()
        done = 0
        while max_batches is None or done < max_batches:
            due = self.ledger.due_outbox(batch)
            if not due:
                break
            report = self.project(due)
            total.projected += report.projected
            total.deleted += report.deleted
            total.failed += report.failed
            total.deferred += report.deferred
            total.requeued += report.requeued
            total.last_error = report.last_error or total.last_error
            done += 1
            if report.failed or report.deferred:
                break
        return total

    def drop_collections(self, generation: int | None = None) -> None:
        """Delete a generation's memory collections (the live one unless given)."""
        gen = self.generation if generation is None else generation
        for memory_type in COLLECTIONS:
            name = collection_name(memory_type, gen, self.scope)
            self.vectors.drop_collection(name)
            self._ready.discard(name)

    def rebuild(self) -> ProjectionReport:
        """Recreate every memory collection and memory node from the ledger alone (the project
        scope drops every memory node, the others only their own: rebuild the project first)."""
        with self.write_lock:
            self.drop_collections()
            if self.graph is not None:
                own = None if self.scope == "project" else {row.id for row in self.ledger.iter_memories()}
                for label in GRAPH_LABELS.values():
                    ids = self.graph.node_ids(label)  # type: ignore[arg-type]
                    if own is not None:
                        ids = ids & own
                    if ids:
                        self.graph.delete_nodes(label, sorted(ids))  # type: ignore[arg-type]
        self.ledger.enqueue_all()
        return self.drain()

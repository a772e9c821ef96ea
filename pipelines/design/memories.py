"""What the design step reads, writes and reports (``DesignStores``, ``DesignReport``), and how it
writes its own memories: each carries ``metadata.origin = "pipeline"`` and a ``source_key``, is
written only when new or changed (``source_hash``), and is soft-deleted when its source is gone."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from resources.manifest import Manifest
from resources.memory.ledger import Ledger, MemoryRow, NewMemory, Relationship
from resources.memory.projection import MemoryProjector
from resources.schemas.memory import validate_metadata
from resources.settings import Settings
from resources.vectors.store import VectorStore

ORIGIN = "pipeline"


class DesignSources(Protocol):
    """What telling whether the design step has anything to do reads (``derive.design_unchanged``):
    the settings, the ledgers and the manifest, no vector collection or graph. ``DesignStores`` is
    one; ``pipelines.dagster.run.answer_from_manifest`` builds one with no store open."""

    settings: Settings
    ledger: Ledger
    local_ledger: Ledger | None
    manifest: Manifest | None


@dataclass
class DesignStores:
    """What the design step reads and writes."""

    settings: Settings
    vectors: VectorStore
    graph: Any
    ledger: Ledger
    projector: MemoryProjector
    embedder: Any
    local_ledger: Ledger | None = None
    """The project's local memory scope, when it has one (its anchored memories are checked too)."""
    manifest: Manifest | None = None
    """The code index's manifest: with it, links and anchors are derived again only when their
    inputs changed (:func:`derive_when_changed`)."""


@dataclass
class DesignReport:
    """What one design step did."""

    documents_seen: int = 0
    documents_changed: int = 0
    documents_removed: int = 0
    requirements: int = 0
    designs: int = 0
    chunks_written: int = 0
    chunks_dense_pending: int = 0
    """Doc chunks searchable by words only: their dense vectors are left to the background."""
    memories_written: int = 0
    memories_deleted: int = 0
    requirement_links: int = 0
    design_links: int = 0
    """FOLLOWS_DESIGN links from code, tests and design documents to the ADRs they cite."""
    patterns: int = 0
    components: int = 0
    edges_added: int = 0
    edges_removed: int = 0
    anchors_checked: int = 0
    anchors_stale: int = 0
    derivation_skipped: bool = False
    """Links, patterns, components and anchors were current (their inputs had not changed)."""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return dict(self.__dict__)

    def merge(self, other: DesignReport) -> DesignReport:
        """Add another step's counts (and notes) to this one."""
        for key, value in other.__dict__.items():
            if isinstance(value, bool):
                setattr(self, key, getattr(self, key) or value)
            elif isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)
        self.notes.extend(other.notes)
        return self


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _pipeline_rows(ledger: Ledger, memory_types: Sequence[str]) -> dict[str, MemoryRow]:
    """source_key → the pipeline's memory of these types (soft-deleted ones included)."""
    rows: dict[str, MemoryRow] = {}
    for row in ledger.iter_memories(memory_types=memory_types, include_deleted=True):
        if row.metadata.get("origin") == ORIGIN and row.metadata.get("source_key"):
            key = row.metadata["source_key"]
            if key not in rows or (rows[key].deleted and not row.deleted):
                rows[key] = row
    return rows


def _upsert(
    ledger: Ledger,
    existing: dict[str, MemoryRow],
    memory_type: str,
    key: str,
    content: str,
    metadata: dict[str, Any],
    *,
    importance: float = 0.6,
    relationships: Sequence[Relationship] = (),
) -> str | None:
    """Write one pipeline memory if it is new or changed; returns its id when written."""
    digest = _hash(json.dumps([content, metadata, sorted((r.rel_type, r.target_id) for r in relationships)], sort_keys=True, default=str))
    metadata = validate_metadata(memory_type, {**metadata, "origin": ORIGIN, "source_key": key, "source_hash": digest}, content=content)  # type: ignore[arg-type]
    row = existing.get(key)
    if row is not None and row.metadata.get("source_hash") == digest and not row.deleted:
        return None
    if row is not None:
        if row.deleted:
            ledger.restore(row.id, request_id=f"pipeline:restore:{key}:{digest[:16]}")
        for rel in relationships:
            rel.source_id = row.id
        updated, changed = ledger.update(
            row.id, content=content, metadata=metadata, relationships=list(relationships),
            request_id=f"pipeline:{key}:{digest[:16]}", operation="pipeline_update",
        )
        existing[key] = updated
        return row.id if changed or row.deleted else None
    new = NewMemory(memory_type=memory_type, content=content, metadata=metadata, importance_score=importance)
    for rel in relationships:
        rel.source_id = new.id
    new.relationships = list(relationships)
    rows = ledger.add([new], request_id=f"pipeline:{key}:{digest[:16]}")
    if rows:
        existing[key] = rows[0]
        return rows[0].id
    return None


def _soft_delete(ledger: Ledger, rows: Iterable[MemoryRow]) -> list[str]:
    deleted = []
    for row in rows:
        if not row.deleted:
            ledger.soft_delete(row.id, request_id=f"pipeline:delete:{row.id}:{row.version}")
            deleted.append(row.id)
    return deleted

"""The project's documents (``settings.doc_globs``) as requirements and design memories (ADRs,
design sections) in the ledger and as searchable doc chunks in the ``docs`` collection, incremental
by document hash; a removed document's memories are soft-deleted."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import pathspec

from pipelines.design.documents import ParsedDocument, RequirementIds, parse_document
from pipelines.design.memories import (
    ORIGIN,
    DesignReport,
    DesignStores,
    _hash,
    _pipeline_rows,
    _soft_delete,
    _upsert,
)
from pipelines.discovery import _default_skip_reason, _git_candidates, _walk_candidates, resolve_project_root
from pipelines.records import path_prefixes
from resources.memory.ledger import Relationship
from resources.schemas.memory import MemoryValidationError
from resources.settings import Settings
from resources.vectors import sparse
from resources.vectors.store import PayloadFilter, VectorPoint

DOCS_COLLECTION = "docs"
DOCS_INDEXES = ("file_path",)
"""The docs collection's payload indexes (a changed document's chunks are found by path)."""
DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc")
MAX_DOC_BYTES = 2_000_000
DOC_STATE_KEY = "design_documents"
_ID_NAMESPACE = uuid.UUID("0f4e5d8a-7c1b-4e22-9d3a-5c6b7a8e9f10")


def discover_documents(settings: Settings) -> list[tuple[str, Path]]:
    """The project's documents: files matching ``doc_globs`` (gitignore-style), .gitignore and
    .codememignore respected, vendored directories skipped."""
    root = resolve_project_root(settings.resolved_root())
    spec = pathspec.GitIgnoreSpec.from_lines(settings.doc_globs)
    candidates = _git_candidates(root)
    listed = candidates if candidates is not None else list(_walk_candidates(root))
    ignore_file = root / ".codememignore"
    ignore = pathspec.GitIgnoreSpec.from_lines(ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()) if ignore_file.is_file() else None
    found = []
    for rel in listed:
        if not rel.lower().endswith(DOC_EXTENSIONS) or not spec.match_file(rel):
            continue
        if _default_skip_reason(rel) is not None or (ignore is not None and ignore.match_file(rel)):
            continue
        path = root / rel
        try:
            if not path.resolve(strict=True).is_relative_to(root) or not path.is_file() or path.stat().st_size > MAX_DOC_BYTES:
                continue
        except (OSError, RuntimeError):
            continue
        found.append((rel, path))
    return sorted(found)


def _chunk_points(stores: DesignStores, doc: ParsedDocument, doc_hash: str, indexed_at: str) -> list[VectorPoint]:
    if not doc.chunks:
        return []
    texts = [f"{c.title}\n{c.text}" for c in doc.chunks]
    dense = stores.embedder.embed_documents(texts) if stores.settings.dense_embeddings else None
    points = []
    for index, (chunk, text) in enumerate(zip(doc.chunks, texts, strict=True)):
        payload = {
            "id": str(uuid.uuid5(_ID_NAMESPACE, chunk.key)), "kind": "doc_chunk", "name": chunk.title,
            "qualified_name": f"{doc.path}#{chunk.title}", "local_name": chunk.title, "container": doc.title,
            "file_path": doc.path, "path_prefixes": path_prefixes(doc.path), "language": "markdown",
            "start_line": chunk.start_line, "end_line": chunk.end_line, "signature": chunk.title, "docstring": None,
            "code": chunk.text[:2_500], "code_truncated": len(chunk.text) > 2_500, "requirement_ids": chunk.requirement_ids,
            "content_hash": doc_hash, "indexed_at": indexed_at, "is_test": False,
        }
        points.append(
            VectorPoint(
                id=payload["id"], payload=payload,
                dense=list(map(float, dense[index])) if dense is not None else None,
                sparse=sparse.document_vector(text),
            )
        )
    return points


def _delete_chunks(stores: DesignStores, paths: Sequence[str]) -> None:
    if not paths:
        return
    hits = stores.vectors.scroll(DOCS_COLLECTION, PayloadFilter({"file_path": list(paths)}), limit=1_000_000)
    if hits:
        stores.vectors.delete(DOCS_COLLECTION, [h.id for h in hits])


def ingest_documents(stores: DesignStores, *, force: bool = False) -> DesignReport:
    """Bring requirements, designs and doc chunks in line with the documents on disk.

    Args:
        stores: The ledger, its projector and the vector store.
        force: Re-parse every document, changed or not.

    Returns:
        Counts of what changed; a duplicated requirement id is reported in ``notes``.
    """
    from resources.memory.ledger import now_iso

    report = DesignReport()
    settings = stores.settings
    ids = RequirementIds(settings.requirement_id_patterns)
    state: dict[str, str] = json.loads(stores.ledger.meta(DOC_STATE_KEY) or "{}")
    documents = discover_documents(settings)
    report.documents_seen = len(documents)
    existing = _pipeline_rows(stores.ledger, ["requirements", "design"])
    current: dict[str, str] = {}
    parsed: list[ParsedDocument] = []
    for rel, path in documents:
        text = path.read_text(encoding="utf-8", errors="replace")
        digest = _hash(text)
        current[rel] = digest
        if not force and state.get(rel) == digest:
            continue
        parsed.append(parse_document(rel, text, ids))
    report.documents_changed = len(parsed)
    removed = [p for p in state if p not in current]
    report.documents_removed = len(removed)
    changed_paths = {d.path for d in parsed}
    written: list[str] = []
    kept_keys: set[str] = set()
    defined_elsewhere = {
        row.metadata.get("requirement_id"): row.metadata.get("source_document")
        for row in existing.values()
        if row.memory_type == "requirements" and not row.deleted and row.metadata.get("source_document") not in changed_paths
    }
    for doc in parsed:  # requirements first: designs link to them
        report.notes.extend(doc.notes)
        for req in doc.requirements:
            key = f"requirement:{req.requirement_id}"
            other = defined_elsewhere.get(req.requirement_id)
            if other is not None and other not in removed:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} is already defined in {other}; that definition is kept")
                continue
            if key in kept_keys:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} is defined twice; the first definition is kept")
                continue
            kept_keys.add(key)
            report.requirements += 1
            metadata = {
                "requirement_id": req.requirement_id, "title": req.title, "description": req.description,
                "priority": req.priority, "status": req.status, "source_document": req.source_document, "line": req.line,
            }
            try:
                memory_id = _upsert(stores.ledger, existing, "requirements", key, f"{req.requirement_id}: {req.title}\n\n{req.description}", metadata, importance=0.7)
            except MemoryValidationError as exc:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} skipped: {exc}")
                continue
            if memory_id:
                written.append(memory_id)
    requirement_rows = {
        row.metadata.get("requirement_id"): row
        for row in stores.ledger.iter_memories(memory_types=["requirements"], include_deleted=False)
    }
    for doc in parsed:
        for design in doc.designs:
            key = f"design:{design.key}"
            kept_keys.add(key)
            report.designs += 1
            rels = [
                Relationship("", "ADDRESSES", requirement_rows[r].id, "memory:requirements", {"requirement_id": r, "origin": ORIGIN})
                for r in design.related_requirements if r in requirement_rows
            ]
            metadata = {
                "design_type": design.design_type, "title": design.title, "status": design.status,
                "decision": design.decision, "rationale": design.rationale, "consequences": design.consequences,
                "context": design.context, "related_requirements": design.related_requirements or None,
                "source_document": design.source_document, "line": design.line,
            }
            try:
                memory_id = _upsert(stores.ledger, existing, "design", key, design.content, metadata, importance=0.7, relationships=rels)
            except MemoryValidationError as exc:
                report.notes.append(f"{doc.path}:{design.line}: design skipped: {exc}")
                continue
            if memory_id:
                written.append(memory_id)
    gone = [
        row for key, row in existing.items()
        if row.metadata.get("source_document") in (changed_paths | set(removed)) and key not in kept_keys
        and (key.startswith("requirement:") or key.startswith("design:"))
    ]
    deleted = _soft_delete(stores.ledger, gone)
    report.memories_deleted = len(deleted)
    report.memories_written = len(written)
    if written or deleted:
        stores.projector.project(written + deleted)
    indexed_at = now_iso()
    if parsed or removed:  # loading the collection costs ~80 ms: only when it changes
        stores.vectors.ensure_collection(DOCS_COLLECTION, stores.embedder.dimension, DOCS_INDEXES)
    _delete_chunks(stores, [d.path for d in parsed] + removed)
    points = [p for doc in parsed for p in _chunk_points(stores, doc, current[doc.path], indexed_at)]
    for start in range(0, len(points), 256):
        stores.vectors.upsert(DOCS_COLLECTION, points[start:start + 256])
    report.chunks_written = len(points)
    stores.ledger.set_meta(DOC_STATE_KEY, json.dumps(current, sort_keys=True))
    return report

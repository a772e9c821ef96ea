"""The project's documents (``settings.doc_globs``) as requirements and design memories (ADRs,
design sections) in the ledger and as searchable doc chunks in the ``docs`` collection, incremental
by document hash; a removed document's memories are soft-deleted.

A run without dense vectors (``codemem index --no-embed``, the server's own runs) writes the chunks
with their sparse vectors only and records their documents as pending (``DOC_DENSE_PENDING_KEY``):
``embed_pending_documents`` computes their dense vectors later (the server's background embedding,
the next run that embeds), as ``pipelines.index_stores.embed_pending`` does for symbols.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

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
from pipelines.discovery import _default_skip_reason, candidates, resolve_project_root
from pipelines.records import path_prefixes
from resources.faults import fault_point
from resources.memory.ledger import Ledger, Relationship
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
DOC_DENSE_PENDING_KEY = "design_documents_dense_pending"
"""Ledger meta: ``{path: [document hash, chunks]}`` for the documents whose chunks were written
without dense vectors."""
DOC_MODEL_KEY = "design_documents_model"
"""Ledger meta: what made the docs collection (``doc_vectors_key``): another model, or dense vectors
turned on or off, empties it and reads every document again."""
_ID_NAMESPACE = uuid.UUID("0f4e5d8a-7c1b-4e22-9d3a-5c6b7a8e9f10")


def doc_vectors_key(model: str, dense: bool) -> str:
    """What ``DOC_MODEL_KEY`` records for chunks written by ``model`` with dense vectors or without."""
    return model if dense else f"{model} words-only"


def discover_documents(settings: Settings) -> list[tuple[str, Path]]:
    """The project's documents: files matching ``doc_globs`` (gitignore-style), .gitignore and
    .codememignore respected, vendored directories skipped."""
    root = resolve_project_root(settings.resolved_root())
    spec = pathspec.GitIgnoreSpec.from_lines(settings.doc_globs)
    listed = candidates(root).paths
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


def _chunk_texts(doc: ParsedDocument) -> list[str]:
    """What a document's chunks embed (dense and sparse)."""
    return [f"{c.title}\n{c.text}" for c in doc.chunks]


def _chunk_id(key: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, key))


def _chunk_points(stores: DesignStores, doc: ParsedDocument, doc_hash: str, indexed_at: str, *, embed: bool) -> list[VectorPoint]:
    if not doc.chunks:
        return []
    texts = _chunk_texts(doc)
    dense = stores.embedder.embed_documents(texts) if embed else None
    points = []
    for index, (chunk, text) in enumerate(zip(doc.chunks, texts, strict=True)):
        payload = {
            "id": _chunk_id(chunk.key), "kind": "doc_chunk", "name": chunk.title,
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


def _pending(ledger: Ledger) -> dict[str, list[Any]]:
    return json.loads(ledger.meta(DOC_DENSE_PENDING_KEY) or "{}")


def pending_document_chunks(ledger: Ledger) -> int:
    """Doc chunks of the project (``ledger``) written without their dense vector: searchable by
    words until ``embed_pending_documents`` computes it."""
    return sum(chunks for _, chunks in _pending(ledger).values())


def ingest_documents(stores: DesignStores, *, force: bool = False, embed: bool = True) -> DesignReport:
    """Bring requirements, designs and doc chunks in line with the documents on disk.

    Args:
        stores: The ledger, its projector and the vector store.
        force: Re-parse every document, changed or not.
        embed: Compute the chunks' dense vectors now, and those earlier runs left pending; without
            it the written chunks are searchable by words and pending (``embed_pending_documents``).

    Returns:
        Counts of what changed; a duplicated requirement id is reported in ``notes``.
    """
    from resources.memory.ledger import now_iso

    report = DesignReport()
    settings = stores.settings
    ids = RequirementIds(settings.requirement_id_patterns)
    state: dict[str, str] = json.loads(stores.ledger.meta(DOC_STATE_KEY) or "{}")
    model = str(getattr(stores.embedder, "model_id", "") or "")
    vectors_key = doc_vectors_key(model, settings.dense_embeddings) if model else ""
    recorded = stores.ledger.meta(DOC_MODEL_KEY)
    remade = bool(vectors_key) and recorded != vectors_key and (bool(state) or recorded is not None)
    if remade:  # two models' vectors (or dimensions) never mixed in one collection, none left unembedded
        force = True
        report.notes.append(f"doc chunks were written by {recorded or 'an earlier model'}: the docs collection is emptied "
                            f"and every document read again ({vectors_key})")
    documents = discover_documents(settings)
    report.documents_seen = len(documents)
    existing = _pipeline_rows(stores.ledger, ["requirements", "design"])
    current: dict[str, str] = {}
    parsed: list[ParsedDocument] = []
    pending_before = _pending(stores.ledger)
    for rel, path in documents:
        text = path.read_text(encoding="utf-8", errors="replace")
        digest = _hash(text)
        current[rel] = digest
        # (a document pending at another content — a run killed between the two records, the file
        # reverted since — is read again: its stored chunks may be of that other content)
        if not force and state.get(rel) == digest and pending_before.get(rel, [digest])[0] == digest:
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
    if remade:  # (another dimension, perhaps: the collection is made again)
        stores.vectors.clear_collection(DOCS_COLLECTION, stores.embedder.dimension, DOCS_INDEXES)
    elif parsed or removed:  # loading the collection costs ~80 ms: only when it changes
        stores.vectors.ensure_collection(DOCS_COLLECTION, stores.embedder.dimension, DOCS_INDEXES)
    if not remade:
        _delete_chunks(stores, [d.path for d in parsed] + removed)
    dense = embed and settings.dense_embeddings
    points = [p for doc in parsed for p in _chunk_points(stores, doc, current[doc.path], indexed_at, embed=dense)]
    for start in range(0, len(points), 256):
        stores.vectors.upsert(DOCS_COLLECTION, points[start:start + 256])
    report.chunks_written = len(points)
    pending = {path: entry for path, entry in pending_before.items() if path in current and path not in changed_paths}
    if not settings.dense_embeddings:  # no dense vectors at all: nothing is waiting for one
        pending = {}
    elif not dense:
        pending |= {doc.path: [current[doc.path], len(doc.chunks)] for doc in parsed if doc.chunks}
    if pending != pending_before:  # before the state: a crash between them re-ingests, and nothing is left unembedded
        stores.ledger.set_meta(DOC_DENSE_PENDING_KEY, json.dumps(pending, sort_keys=True))
    stores.ledger.set_meta(DOC_STATE_KEY, json.dumps(current, sort_keys=True))
    if vectors_key and recorded != vectors_key:
        stores.ledger.set_meta(DOC_MODEL_KEY, vectors_key)
    report.chunks_dense_pending = embed_pending_documents(stores) if dense and pending else pending_document_chunks(stores.ledger)
    return report


def embed_pending_documents(
    stores: DesignStores,
    *,
    stop: threading.Event | None = None,
    guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Compute the dense vectors of the doc chunks written without them, a document at a time;
    resumable and interruptible.

    A document changed on disk since it was ingested is left to the next ingest (which writes its
    chunks again). ``guard`` returns what a document's write holds: the locks every run that
    ingests documents holds, when one may run meanwhile (the server's index lock and index-run
    lock); documents made pending meanwhile are taken too.

    Returns:
        The chunks still pending when it stops.
    """
    if not stores.settings.dense_embeddings:
        return pending_document_chunks(stores.ledger)
    ids = RequirementIds(stores.settings.requirement_id_patterns)
    root = resolve_project_root(stores.settings.resolved_root())
    done, tried = 0, set()
    while stop is None or not stop.is_set():  # until no document is pending that was not tried (runs meanwhile add some)
        todo = sorted((path, doc_hash) for path, (doc_hash, _) in _pending(stores.ledger).items() if (path, doc_hash) not in tried)
        if not todo:
            break
        total = done + pending_document_chunks(stores.ledger)
        for path, doc_hash in todo:
            if stop is not None and stop.is_set():
                break
            tried.add((path, doc_hash))
            try:
                text = (root / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # gone: the next ingest removes its chunks
            if _hash(text) != doc_hash:
                continue  # changed: the next ingest writes its chunks again
            doc = parse_document(path, text, ids)
            vectors = stores.embedder.embed_documents(_chunk_texts(doc)) if doc.chunks else []
            with guard():  # no ingest meanwhile: the pending record and the chunks are the ones read
                pending = _pending(stores.ledger)
                if pending.get(path, [None])[0] != doc_hash:
                    continue  # ingested again meanwhile
                wanted = {_chunk_id(c.key): list(map(float, v)) for c, v in zip(doc.chunks, vectors, strict=True)}
                live = {hit.id for hit in stores.vectors.retrieve(DOCS_COLLECTION, list(wanted))}
                stores.vectors.set_dense(DOCS_COLLECTION, {i: v for i, v in wanted.items() if i in live})
                stores.vectors.flush(DOCS_COLLECTION)
                fault_point("design:docs_dense_written")
                del pending[path]
                stores.ledger.set_meta(DOC_DENSE_PENDING_KEY, json.dumps(pending, sort_keys=True))
            done += len(doc.chunks)
            if progress is not None:
                progress(done, total)
    return pending_document_chunks(stores.ledger)

"""The memory tools as plain methods: add, update, delete, get, bulk add, search, statistics,
export and import, over the ledger (system of record) and its projections.

Every write commits to the ledger first, then projects; a projection that fails stays in the
outbox and is retried in the background (``MemoryService.sync``), so a write never fails
because Qdrant or the graph is down.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from pipelines.discovery import DiscoveryError, confine_path
from resources.vectors import sparse
from resources.faults import fault_point
from resources.graph.cypher import ALL_EDGE_TYPES
from resources.memory.ledger import (
    RETENTION_DAYS,
    Ledger,
    LedgerError,
    MemoryNotFound,
    MemoryRow,
    NewMemory,
    Relationship,
    VersionConflict,
    content_hash,
)
from resources.memory.git_notes import NOTE_TYPES, GitNotes, GitNotesError, export_notes, import_notes
from resources.memory.markdown import MarkdownMemoryError, read_directory, write_directory
from resources.memory.normalization import Normalizer
from resources.memory.projection import (
    COLLECTIONS,
    EMBED_CHARS,
    MemoryProjector,
    ProjectionReport,
    epoch,
    memory_title,
    prepared_text,
    text_digest,
)
from resources.memory.scopes import MemoryScopes, ScopeStore
from resources.private_files import make_private_dir, make_private_file
from resources.schemas.limits import check_json_object, json_size
from resources.ranking import minmax_fuse
from resources.schemas.memory import (
    MEMORY_SCOPES,
    MEMORY_TYPES,
    REQUIREMENT_ID_PATTERN,
    SUMMARY_CHARS,
    BackupInput,
    BackupResult,
    ExportMemoryInput,
    ExportMemoryResult,
    ImportMemoryInput,
    ImportMemoryResult,
    MemoryAddInput,
    MemoryAddResult,
    MemoryBulkAddInput,
    MemoryBulkAddResult,
    MemoryConflict,
    MemoryContextEntry,
    MemoryContextGroup,
    MemoryContextInput,
    MemoryContextResult,
    MemoryDeleteInput,
    MemoryDeleteResult,
    MemoryGetInput,
    MemoryHit,
    MemoryListInput,
    MemoryListResult,
    MemoryProvenance,
    MemoryRecord,
    MemoryRelationship,
    MemorySearchInput,
    MemorySearchResult,
    MemoryStatisticsResult,
    MemoryType,
    MemoryUpdateInput,
    MemoryUpdateResult,
    MemoryValidationError,
    NormalizationJob,
    NormalizeMemoryInput,
    NormalizeStatusInput,
    RelationshipSpec,
    RestoreInput,
    RestoreResult,
    parse_memory_type,
    validate_metadata,
)
from resources.settings import Settings
from resources.vectors.store import PayloadFilter, VectorHit, VectorStore

from query_server.output_paths import OutputPathRefused, checked_output_path, write_file_atomic
from query_server.paging import MAX_RESPONSE_TOKENS, ToolError, cut_text, decode_cursor, encode_cursor, estimate_tokens

log = structlog.get_logger("codemem.memory")

CodeResolver = Callable[[str], tuple[str, str, str | None] | None]
"""Finds a code entity by id, qualified name or path: (node id, graph label, display name)."""

HIT_CONTENT_CHARS = 4_000
"""Content characters per search hit with ``detail="full"``; memory_get returns the whole memory."""
CONTEXT_CONTENT_CHARS = 1_500
"""Content characters of one memory in memory_context (when the budget allows; else a summary)."""
SYNC_INTERVAL_S = 2.0
REPLAYED = "replayed a committed write"
"""Logged when a call's idempotency key finds its change already in the ledger (a retry after its
owner died between the commit and the answer): the first outcome is returned."""
FALLBACK_SCAN_LIMIT = 50_000
MAX_RANK_WEIGHT = 1.0
"""The largest factor importance and recency apply to a memory's similarity (see ``_rank_weight``)."""
_REQUIREMENT_ID = re.compile(REQUIREMENT_ID_PATTERN)
_IDENTITY_KEY = {"requirements": "requirement_id", "user_preference": "key"}
"""Metadata that names one thing: the same key with other content is a contradiction."""


def summarize(text: str, max_chars: int, hint: str) -> tuple[str, bool]:
    """The start of ``text`` (at most ``max_chars``, cut at a word boundary when one is near) with a
    marker naming the call that returns the whole; whether it was cut."""
    if len(text) <= max_chars:
        return text, False
    head = text[:max_chars]
    space = max(head.rfind(" "), head.rfind("\n"))
    if space > max_chars * 2 // 3:
        head = head[:space]
    head = head.rstrip()
    return f"{head} … [summary: {len(text) - len(head)} more characters — {hint}]", True


def _merged_metadata_within_limits(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Refuse an update whose merged metadata grows past the input limits (each update's own metadata
    is checked on input; repeated updates could still pile it up). Metadata the pipeline made larger
    than the limit stays updatable as long as the update does not grow it."""
    try:
        check_json_object(after)
    except ValueError as exc:
        if json_size(after) > json_size(before):
            raise ToolError(f"metadata after this update: {exc}") from exc


def _not_found(memory_id: str) -> ToolError:
    return ToolError(
        f"Memory not found: {memory_id} — pass an id returned by memory_add or memory_search "
        "(memory_search finds memories by meaning)"
    )


class MemoryService:
    """Typed project memories for one project, never lost: ledger first, projections second."""

    def __init__(
        self,
        settings: Settings,
        *,
        vectors: VectorStore,
        graph: Any,
        embedder: Any,
        resolve_code: CodeResolver | None = None,
        lookup_symbols: Callable[[list[str]], dict[str, dict[str, Any]]] | None = None,
    ) -> None:
        """Open the project's memory ledger and project it into ``vectors`` and ``graph``."""
        self.settings = settings
        self.ledger = Ledger(settings.resolved_state_dir() / "memory.db")
        self.embedder = embedder
        self.vectors = vectors
        self.projector = MemoryProjector(self.ledger, vectors, graph, embedder)
        self.resolve_code = resolve_code
        self.lookup_symbols = lookup_symbols
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._sync_thread: threading.Thread | None = None
        self._jobs: dict[str, NormalizationJob] = {}
        self._job_lock = threading.Lock()
        model = self.ledger.meta("embedding_model")
        if model is not None and model != embedder.model_id:
            log.info("embedding model changed; rebuilding memory projections", old=model, new=embedder.model_id)
            self.projector.drop_collections()
            self.ledger.enqueue_all()
        self.ledger.set_meta("embedding_model", embedder.model_id)
        self.scopes = MemoryScopes(settings, self.ledger, self.projector, vectors=vectors, graph=graph, embedder=embedder)
        if graph is not None:
            try:  # memory node lookups by id need the label indexes (else every write scans the label)
                graph.ensure_schema()
            except Exception as exc:  # noqa: BLE001 - the graph may be down; projections retry later
                log.warning("graph schema not ensured", error=str(exc))

    # -- background sync ---------------------------------------------------------------------
    def start_sync(self) -> None:
        """Project what the outbox holds (left by a crash or a store outage), then keep doing so."""
        if self._sync_thread is not None and self._sync_thread.is_alive():
            return

        def run() -> None:
            while not self._stop.is_set():
                self._drain_scopes()
                self._wake.wait(SYNC_INTERVAL_S)
                self._wake.clear()

        self._sync_thread = threading.Thread(target=run, name="codemem-memory-sync", daemon=True)
        self._sync_thread.start()

    def stop_sync(self) -> None:
        """Stop the background projection thread (bulk loaders that project themselves use it)."""
        self._stop.set()
        self._wake.set()
        if self._sync_thread is not None:
            self._sync_thread.join(timeout=30)
            self._sync_thread = None
        self._stop.clear()

    @staticmethod
    def _report(reports: Sequence[ProjectionReport]) -> dict[str, Any]:
        return {
            "projected": sum(r.projected for r in reports), "deleted": sum(r.deleted for r in reports),
            "failed": sum(r.failed for r in reports), "deferred": sum(r.deferred for r in reports),
            "last_error": next((r.last_error for r in reports if r.last_error), None),
        }

    def _drain_scopes(self, *, retry_now: bool = False) -> dict[str, Any]:
        """Bring the global replica up to date, then project what every scope's outbox holds (one
        scope's failure does not hold up the others)."""
        reports: list[ProjectionReport] = []
        try:
            self.scopes.sync_global()
        except Exception as exc:  # noqa: BLE001 - the global ledger may be unreachable; the rest goes on
            log.warning("global memories not replicated", error=str(exc))
            reports.append(ProjectionReport(last_error=f"global scope: {type(exc).__name__}: {exc}"))
        for store in self.scopes.opened():
            try:
                if retry_now:
                    store.projected.retry_now()
                reports.append(store.projector.drain())
            except Exception as exc:  # noqa: BLE001 - the loop must survive a store outage
                log.exception("memory sync failed", operation="sync", scope=store.name)
                reports.append(ProjectionReport(last_error=f"{store.name} scope: {type(exc).__name__}: {exc}"))
        return self._report(reports)

    def sync(self) -> dict[str, Any]:
        """Project everything queued now, in every scope (retrying failed projections at once)."""
        return self._drain_scopes(retry_now=True)

    def rebuild_projections(self) -> dict[str, Any]:
        """Recreate the memory collections and graph nodes from the ledgers alone (the project
        scope first: it clears every memory node; then local and global add theirs back)."""
        try:
            self.scopes.sync_global()
        except Exception as exc:  # noqa: BLE001 - the replica is rebuilt as it is; the next sync catches up
            log.warning("global memories not replicated before the rebuild", error=str(exc))
        return self._report([store.projector.rebuild() for store in self.scopes.opened()])

    def close(self) -> None:
        """Stop the sync thread and close the ledgers."""
        self.stop_sync()
        self.scopes.close()
        self.ledger.close()

    # -- helpers -----------------------------------------------------------------------------
    def _row_of(self, memory_id: str, memory_type: MemoryType | str) -> MemoryRow:
        row = self.scopes.locate(memory_id)
        if row is None:
            raise _not_found(memory_id)
        if row.memory_type != str(memory_type):
            raise ToolError(
                f"Memory not found: {memory_id} is a {row.memory_type} memory, not {memory_type} — "
                f"call again with memory_type='{row.memory_type}'"
            )
        return row

    def _replayed(
        self, request_id: str | None, memory_id: str, operations: tuple[str, ...]
    ) -> tuple[str, dict[str, Any] | None] | None:
        """(scope, memory as it was left) when the call with idempotency key ``request_id``
        already did one of ``operations`` to ``memory_id`` (its owner died before answering; see
        ``query_server.methods``); None when it did not."""
        if request_id is None:
            return None
        for store in self.scopes.opened():
            found = store.ledger.replayed(request_id, memory_id)
            if found is not None and found[0] in operations:
                log.info(REPLAYED, memory_id=memory_id, operation=found[0], request_id=request_id)
                return store.name, found[1]
        return None

    def _store(self, scope: str, *, create: bool = False) -> ScopeStore:
        """The store of a scope (a row's scope always has one)."""
        store = self.scopes.store(scope, create=create)  # type: ignore[arg-type]
        if store is None:
            raise ToolError(f"no {scope} memories are stored yet — store one with memory_add(scope={scope!r})")
        return store

    def _current(self, row: MemoryRow) -> MemoryRow:
        """The row as its ledger holds it now (for global rows: with this project's sync state)."""
        return self.scopes.get_many([row.id], [row.scope]).get(row.id) or row

    @staticmethod
    def _no_global_anchors(scope: str, metadata: dict[str, Any] | None) -> None:
        if scope == "global" and metadata and metadata.get("anchors"):
            raise ToolError(
                "global memories cannot be anchored to code: anchors name symbols of one project — "
                "store the memory with scope 'project' (or 'local'), or leave metadata.anchors out"
            )

    def _validated_metadata(self, memory_type: MemoryType, metadata: dict[str, Any] | None, content: str) -> dict[str, Any]:
        try:
            return validate_metadata(memory_type, metadata, content=content)
        except MemoryValidationError as exc:
            raise ToolError(str(exc)) from exc

    def _resolve_target(self, spec: RelationshipSpec, scope: str = "project") -> Relationship:
        """A relationship's target: a memory (of any scope; a global memory links only to global
        memories, the only ones every project sees), a stored requirement id, or code."""
        if spec.type not in ALL_EDGE_TYPES:
            raise ToolError(
                f"relationship type {spec.type} is not known — use one of {', '.join(ALL_EDGE_TYPES)}"
            )
        target = spec.target_id.strip()
        visible = ["global"] if scope == "global" else None
        row = self.scopes.locate(target)
        if row is not None:
            if scope == "global" and row.scope != "global":
                raise ToolError(
                    f"a global memory can link only to global memories (every project sees it; {row.id} is a {row.scope} "
                    f"memory) — link from that memory to this one instead, or store this one with scope {row.scope!r}"
                )
            return Relationship("", spec.type, row.id, f"memory:{row.memory_type}", spec.properties)
        if _REQUIREMENT_ID.match(target.upper()):
            for store in self.scopes.opened(visible):
                found = store.ledger.find_by_metadata("requirements", "requirement_id", target.upper())
                if found:
                    return Relationship("", spec.type, found[0].id, "memory:requirements", {**spec.properties, "requirement_id": target.upper()})
        if scope == "global":
            raise ToolError(
                f"relationship target {target!r} is not a global memory — a global memory can link only to global "
                "memories (code and project memories belong to one project); store it with scope 'project' to link it there"
            )
        if self.resolve_code is not None:
            try:
                code = self.resolve_code(target)
            except ToolError:
                raise
            if code is not None:
                return Relationship("", spec.type, code[0], f"code:{code[1]}", spec.properties)
        raise ToolError(
            f"relationship target {target!r} not found — pass a memory id, a requirement id that is stored "
            "(REQ-XXX-NNN), a code symbol id or qualified name from code_search, or an indexed file path"
        )

    def _embed_one(self, memory_type: str, content: str, metadata: dict[str, Any]) -> np.ndarray | None:
        try:
            return self.embedder.embed_documents([prepared_text(memory_type, content, metadata)[:EMBED_CHARS]])[0]
        except Exception as exc:  # noqa: BLE001 - the ledger write must not depend on the embedder
            log.warning("memory embedding failed; projection queued", error=str(exc))
            return None

    def _conflicts(
        self, memory_type: str, content: str, metadata: dict[str, Any], vector: np.ndarray | None, exclude: str | None
    ) -> list[MemoryConflict]:
        """Stored memories of every scope this project sees that the content duplicates or contradicts."""
        conflicts: dict[str, MemoryConflict] = {}
        stores = self.scopes.opened()
        for store in stores:
            self._scope_conflicts(store, conflicts, memory_type, content, metadata, vector, exclude)
        return list(conflicts.values())

    def _scope_conflicts(
        self, store: ScopeStore, conflicts: dict[str, MemoryConflict], memory_type: str, content: str,
        metadata: dict[str, Any], vector: np.ndarray | None, exclude: str | None,
    ) -> None:
        ledger = store.ledger
        for row in ledger.find_by_hash(memory_type, content_hash(content)):
            if row.id != exclude:
                conflicts[row.id] = MemoryConflict(
                    memory_id=row.id, memory_type=row.memory_type, kind="similar", similarity=1.0,
                    detail="identical content is already stored — update that memory instead of adding a copy",
                    content_preview=row.content[:200], scope=row.scope,  # type: ignore[arg-type]
                )
        key = _IDENTITY_KEY.get(memory_type)
        if key is not None and metadata.get(key) is not None:
            for row in ledger.find_by_metadata(memory_type, key, metadata[key]):
                if row.id == exclude or row.id in conflicts:
                    continue
                if key == "key":  # a preference: the same key in the same scope with another value
                    if row.metadata.get("scope") != metadata.get("scope") or row.metadata.get("value") == metadata.get("value"):
                        continue
                    what = f"preference {metadata[key]!r} is stored with the value {row.metadata.get('value')!r}"
                elif row.content != content:
                    what = f"requirement {metadata[key]} is stored with a different text"
                else:
                    continue
                conflicts[row.id] = MemoryConflict(
                    memory_id=row.id, memory_type=row.memory_type, kind="contradiction", similarity=None,
                    detail=f"{what} — update that memory (memory_update) or delete one of them",
                    content_preview=row.content[:200], scope=row.scope,  # type: ignore[arg-type]
                )
        if vector is not None:
            try:
                dense, _ = self.vectors.ranked_lists(
                    store.projector.collection(memory_type), dense=vector.tolist(), sparse=None, candidates=5,
                    payload_filter=PayloadFilter(must_match={"status": ["active"]}), with_payload=False,
                )
            except Exception as exc:  # noqa: BLE001 - conflict detection degrades, the write goes on
                log.warning("conflict search failed", error=str(exc))
                dense = []
            for hit in dense:
                if hit.id == exclude or hit.id in conflicts or hit.score < self.settings.memory_conflict_threshold:
                    continue
                row = ledger.get(hit.id)
                if row is None or row.deleted:
                    continue
                conflicts[hit.id] = MemoryConflict(
                    memory_id=hit.id, memory_type=row.memory_type, kind="similar", similarity=round(hit.score, 4),
                    detail="a very similar memory exists — update it (memory_update) if this restates it, keep both if not",
                    content_preview=row.content[:200], scope=row.scope,  # type: ignore[arg-type]
                )

    def _project(self, memory_ids: Sequence[str], vectors_of: dict[str, Any] | None = None, scope: str = "project") -> None:
        """Project memories of a scope just written (the ledger committed them; a failure stays
        queued). A global write is first copied into this project's replica of the global ledger."""
        store = self._store(scope)
        if store.replica is not None:
            self.scopes.sync_global(memory_ids)
        report = store.projector.project(memory_ids, vectors_of=vectors_of)
        if report.failed:
            self._wake.set()

    def _catch_up_global(self) -> None:
        """Replicate and project what other projects wrote to the global scope since the last sync
        (one indexed read when nothing changed), so a search sees it at once."""
        try:
            queued = self.scopes.sync_global()
            if queued:
                store = self._store("global")
                for start in range(0, len(queued), 128):
                    store.projector.project(queued[start : start + 128])
        except Exception as exc:  # noqa: BLE001 - search goes on with what is projected; the sync retries
            log.warning("global memories not caught up", error=str(exc))

    def _anchored(self, metadata: dict[str, Any], *, reanchor: bool = False) -> dict[str, Any]:
        """Metadata with its ``anchors`` checked against the code index and each one's content
        hash filled in (the indexed symbol's hash when omitted, or always with ``reanchor``)."""
        anchors = metadata.get("anchors")
        if anchors is None:
            return metadata
        if not isinstance(anchors, list) or not all(isinstance(a, (dict, str)) for a in anchors):
            raise ToolError("metadata.anchors must be a list of {qualified_name, content_hash?} objects (or qualified names)")
        if len(anchors) > 50:
            raise ToolError(f"metadata.anchors holds {len(anchors)} anchors — at most 50; anchor the memory to the symbols it is about")
        wanted = [a if isinstance(a, str) else str(a.get("qualified_name") or "") for a in anchors]
        if not all(wanted):
            raise ToolError("every anchor needs a qualified_name (from code_search or get_symbol)")
        found = self.lookup_symbols(wanted) if self.lookup_symbols is not None else {}
        missing = [name for name in wanted if name not in found]
        if missing:
            raise ToolError(
                f"anchor(s) not in the code index: {', '.join(missing[:5])} — pass qualified names as code_search returns them "
                "(e.g. package.module.Class.method), after the code is indexed"
            )
        normalized = []
        for raw, name in zip(anchors, wanted, strict=True):
            given = raw.get("content_hash") if isinstance(raw, dict) else None
            normalized.append({"qualified_name": name, "content_hash": found[name].get("symbol_hash") if reanchor or not given else given,
                               "file_path": found[name].get("file_path")})
        return {**metadata, "anchors": normalized}

    def _record_anchor_state(self, row: MemoryRow) -> None:
        """Check a memory's anchors now (the pipeline re-checks them after every index run)."""
        ledger = self._store(row.scope).ledger
        anchors = row.metadata.get("anchors") or []
        if not anchors or self.lookup_symbols is None:
            ledger.clear_anchor_state([row.id])
            return
        try:
            current = self.lookup_symbols([a["qualified_name"] for a in anchors])
        except Exception as exc:  # noqa: BLE001 - staleness is re-checked by the next index run
            log.warning("anchor check deferred", memory_id=row.id, error=str(exc))
            return
        ledger.set_anchor_state([
            (row.id, a["qualified_name"], str(a.get("content_hash") or ""), (current.get(a["qualified_name"]) or {}).get("symbol_hash"))
            for a in anchors
        ])

    # -- tools -------------------------------------------------------------------------------
    def memory_add(self, request: MemoryAddInput) -> MemoryAddResult:
        """Store a memory in its scope (project by default); returns its id and the stored memories
        it may duplicate or contradict."""
        memory_type = request.memory_type
        scope = request.scope or "project"
        self._no_global_anchors(scope, request.metadata)
        metadata = self._anchored(self._validated_metadata(memory_type, request.metadata, request.content))
        relationships = [self._resolve_target(spec, scope) for spec in request.relationships]
        vector = self._embed_one(memory_type, request.content, metadata)
        conflicts = self._conflicts(memory_type, request.content, metadata, vector, None)
        new = NewMemory(
            memory_type=str(memory_type), content=request.content, metadata=metadata,
            importance_score=request.importance_score if request.importance_score is not None else 0.5,
            relationships=relationships,
        )
        for rel in relationships:
            rel.source_id = new.id
        store = self._store(scope, create=True)
        rows = store.ledger.add([new], request_id=request.request_id)
        if not rows:
            raise ToolError(
                f"request_id {request.request_id!r} was used for a memory that has since been deleted — "
                "send a new request_id (or none) to store this memory"
            )
        row = rows[0]
        if row.id != new.id:
            log.info(REPLAYED, memory_id=row.id, operation="create", request_id=request.request_id)
        fault_point("memory_add:after_ledger")
        if row.metadata.get("anchors"):
            self._record_anchor_state(row)
        self._project(
            [row.id], {row.id: (text_digest(row.memory_type, row.content, row.metadata), vector)} if vector is not None and row.id == new.id else None,
            scope,
        )
        conflicts = [c for c in conflicts if c.memory_id != row.id]  # a retried request_id finds itself
        after = self._current(row)
        log.info("memory added", memory_id=row.id, memory_type=row.memory_type, scope=scope, conflicts=len(conflicts))
        return MemoryAddResult(
            memory_id=row.id, memory_type=row.memory_type, conflicts=conflicts, version=after.version,
            sync_status=after.sync_status, scope=scope,
        )

    def memory_bulk_add(self, request: MemoryBulkAddInput) -> MemoryBulkAddResult:
        """Store many memories in one ledger transaction: all of them, or none when one is invalid.
        One batch writes one scope (each memory's, else the batch's, else project)."""
        wanted = {item.scope or request.scope or "project" for item in request.memories}
        if len(wanted) > 1:
            raise ToolError(
                f"one memory_bulk_add writes one scope (all or nothing) — this batch names {', '.join(sorted(wanted))}; "
                "send one batch per scope"
            )
        scope = wanted.pop()
        errors: list[dict[str, Any]] = []
        news: list[NewMemory] = []
        for index, item in enumerate(request.memories):
            try:
                self._no_global_anchors(scope, item.metadata)
                metadata = self._validated_metadata(item.memory_type, item.metadata, item.content)
                rels = [self._resolve_target(spec, scope) for spec in item.relationships]
            except ToolError as exc:
                errors.append({"index": index, "error": str(exc)})
                continue
            new = NewMemory(
                memory_type=str(item.memory_type), content=item.content, metadata=metadata,
                importance_score=item.importance_score if item.importance_score is not None else 0.5, relationships=rels,
            )
            for rel in rels:
                rel.source_id = new.id
            news.append(new)
        if errors:
            return MemoryBulkAddResult(added_count=0, added_ids=[], errors=errors, scope=scope)  # type: ignore[arg-type]
        rows = self._store(scope, create=True).ledger.add(news, request_id=request.request_id)
        if not rows:
            raise ToolError(
                f"request_id {request.request_id!r} was used for memories that have since been deleted — "
                "send a new request_id (or none)"
            )
        ids = [row.id for row in rows]
        for start in range(0, len(ids), 128):
            self._project(ids[start : start + 128], scope=scope)
            fault_point("memory_bulk_add:between_projection_batches")
        return MemoryBulkAddResult(added_count=len(ids), added_ids=ids, errors=[], scope=scope)  # type: ignore[arg-type]

    def memory_update(self, request: MemoryUpdateInput, *, request_id: str | None = None) -> MemoryUpdateResult:
        """Change a memory in whichever scope holds it; refused with the current version when
        ``expected_version`` is stale. A repeated ``request_id`` returns the first outcome."""
        first = self._replayed(request_id, request.memory_id, ("update",))
        if first is not None and first[1] is not None:
            scope, done = first
            return MemoryUpdateResult(
                memory_id=done["id"], memory_type=done["memory_type"], status="updated", version=done["version"],
                updated_at=done["updated_at"], scope=scope,  # type: ignore[arg-type]
            )
        row = self._row_of(request.memory_id, request.memory_type)
        store = self._store(row.scope)
        self._no_global_anchors(row.scope, request.metadata)
        if row.deleted:
            raise ToolError(
                f"memory {row.id} is deleted (since {row.deleted_at}) — it cannot be updated; add a new memory instead"
            )
        content = request.content if request.content is not None else row.content
        metadata = row.metadata
        if request.metadata is not None or request.content is not None:
            metadata = self._validated_metadata(request.memory_type, {**row.metadata, **(request.metadata or {})}, content)
        if request.metadata:
            _merged_metadata_within_limits(row.metadata, metadata)
        if (request.metadata and "anchors" in request.metadata) or request.confirm_anchors or (request.content is not None and metadata.get("anchors")):
            metadata = self._anchored(metadata, reanchor=request.confirm_anchors or request.content is not None)
        try:
            after, changed = store.ledger.update(
                row.id,
                content=request.content,
                metadata=metadata,
                importance_score=request.importance_score,
                expected_version=request.expected_version,
                expected_updated_at=request.expected_updated_at,
                request_id=request_id,
            )
        except VersionConflict as exc:
            raise ToolError(str(exc)) from exc
        except MemoryNotFound as exc:
            raise _not_found(row.id) from exc
        fault_point("memory_update:after_ledger")
        conflicts: list[MemoryConflict] = []
        if changed and (after.metadata.get("anchors") or row.metadata.get("anchors")):
            self._record_anchor_state(after)
        if changed:
            vector = self._embed_one(after.memory_type, after.content, after.metadata) if request.content is not None else None
            if request.content is not None:
                conflicts = self._conflicts(after.memory_type, after.content, after.metadata, vector, after.id)
            digest = text_digest(after.memory_type, after.content, after.metadata)
            self._project([after.id], {after.id: (digest, vector)} if vector is not None else None, row.scope)
        return MemoryUpdateResult(
            memory_id=after.id, memory_type=after.memory_type, status="updated" if changed else "unchanged",
            version=after.version, updated_at=after.updated_at, conflicts=conflicts, scope=row.scope,  # type: ignore[arg-type]
        )

    def memory_delete(self, request: MemoryDeleteInput, *, request_id: str | None = None) -> MemoryDeleteResult:
        """Soft-delete (kept 30 days) or hard-delete a memory in whichever scope holds it; its graph
        relationships go with it. A repeated ``request_id`` returns the first outcome."""
        first = self._replayed(request_id, request.memory_id, ("soft_delete", "hard_delete"))
        if first is not None:
            scope, done = first
            return self._deleted(request.memory_id, str(request.memory_type), scope, done)
        row = self._row_of(request.memory_id, request.memory_type)
        store = self._store(row.scope)
        if request.hard_delete:
            store.ledger.hard_delete([row.id], request_id=request_id)
            fault_point("memory_delete:after_ledger")
            self._project([row.id], scope=row.scope)
            return self._deleted(row.id, row.memory_type, row.scope, None)
        after = store.ledger.soft_delete(row.id, request_id=request_id)
        fault_point("memory_delete:after_ledger")
        self._project([row.id], scope=row.scope)
        return self._deleted(row.id, row.memory_type, row.scope, after.snapshot())

    @staticmethod
    def _deleted(memory_id: str, memory_type: str, scope: Any, after: dict[str, Any] | None) -> MemoryDeleteResult:
        """The answer to a delete: hard when the memory is gone (``after`` None), else soft with
        the end of its retention."""
        if after is None:
            return MemoryDeleteResult(memory_id=memory_id, memory_type=memory_type, status="hard_deleted", scope=scope)  # type: ignore[arg-type]
        until = datetime.fromisoformat(after["deleted_at"] or after["updated_at"]) + timedelta(days=RETENTION_DAYS)
        return MemoryDeleteResult(
            memory_id=memory_id, memory_type=memory_type, status="deleted",  # type: ignore[arg-type]
            retention_until=until.isoformat(timespec="seconds"), scope=scope,
        )

    def _relationships(self, row: MemoryRow) -> list[MemoryRelationship]:
        out, _ = self._store(row.scope).ledger.relationships_of(row.id)
        incoming = []  # memories of any scope this project sees may point at it
        for store in self.scopes.opened():
            incoming.extend(store.ledger.relationships_of(row.id)[1])
        others = self.scopes.get_many([r.target_id for r in out] + [r.source_id for r in incoming])
        result: list[MemoryRelationship] = []
        for rel, direction in [(r, "outgoing") for r in out] + [(r, "incoming") for r in incoming]:
            other_id = rel.target_id if direction == "outgoing" else rel.source_id
            other = others.get(other_id)
            if other is not None:
                label, name = other.memory_type, memory_title(other.metadata) or other.content[:80]
            elif rel.target_kind.startswith("code:") and direction == "outgoing":
                label, name = rel.target_kind.split(":", 1)[1], rel.properties.get("name")
                if self.resolve_code is not None:
                    found = self.resolve_code(other_id)
                    name = found[2] if found else f"{name or other_id} (no longer in the code index)"
            else:
                label, name = rel.target_kind, None
            result.append(
                MemoryRelationship(
                    type=rel.rel_type, direction=direction, target_id=other_id, target_label=label,
                    target_name=name, properties=rel.properties,
                )
            )
        return result

    def _record(self, row: MemoryRow, with_relationships: bool = False) -> MemoryRecord:
        return MemoryRecord(
            id=row.id, memory_type=row.memory_type, content=row.content, metadata=row.metadata,
            created_at=row.created_at, updated_at=row.updated_at, version=row.version,
            access_count=row.access_count, importance_score=row.importance_score,
            sync_status=row.sync_status, deleted=row.deleted, deleted_at=row.deleted_at,  # type: ignore[arg-type]
            relationships=self._relationships(row) if with_relationships else None,
            stale_anchors=self._store(row.scope).ledger.stale_anchors([row.id]).get(row.id),
            scope=row.scope,  # type: ignore[arg-type]
        )

    def memory_get(self, request: MemoryGetInput) -> MemoryRecord:
        """One memory in full, from whichever scope holds it (soft-deleted ones too, flagged), with
        its relationships on request."""
        row = self._row_of(request.memory_id, request.memory_type)
        self._store(row.scope).ledger.record_access([row.id])
        record = self._record(self._current(row), request.include_relationships)
        text, cut = cut_text(record.content, (MAX_RESPONSE_TOKENS - 5_000) * 3, "the memory is larger than one response")
        record.content = text
        return record

    # -- search ------------------------------------------------------------------------------
    def _filter(self, request: MemorySearchInput) -> PayloadFilter:
        must: dict[str, list[Any]] = {}
        if not request.include_deleted:
            must["status"] = ["active"]
        for key, value in (request.metadata_filters or {}).items():
            must[f"metadata.{key}"] = list(value) if isinstance(value, list) else [value]
        ranges: dict[str, tuple[float | None, float | None]] = {}
        if request.time_range is not None and (request.time_range.start or request.time_range.end):
            ranges["created_ts"] = (epoch(request.time_range.start), epoch(request.time_range.end))
        if request.min_importance is not None:
            ranges["importance_score"] = (request.min_importance, None)
        return PayloadFilter(must_match=must, ranges=ranges)

    def _rank_weight(self, row: MemoryRow, now: float) -> float:
        """Importance × recency, in (0, MAX_RANK_WEIGHT]."""
        age_days = max(0.0, (now - (epoch(row.updated_at) or now)) / 86_400)
        recency = 0.5 ** (age_days / self.settings.memory_recency_half_life_days)
        importance = min(1.0, max(0.0, row.importance_score))
        return (0.75 + 0.25 * importance) * (0.85 + 0.15 * recency)

    def _ranked(self, request: MemorySearchInput, want: int) -> tuple[list[tuple[float, MemoryRow]], str]:
        """Memories of the requested scopes and types by meaning, best first, and the search mode."""
        self._catch_up_global()
        types = [str(t) for t in (request.memory_types or MEMORY_TYPES)]
        scopes = [str(s) for s in (request.scopes or MEMORY_SCOPES)]
        candidates = max(self.settings.search_candidates, want * 2)
        mode = "hybrid"
        try:
            pooled = self._vector_candidates(request, types, candidates)
        except Exception as exc:  # noqa: BLE001 - degrade to the ledger, and say so
            log.warning("memory vector search failed; ledger keyword fallback", error=str(exc))
            mode = f"ledger-keyword (vector store unavailable: {type(exc).__name__}: {str(exc)[:200]})"
            pooled = self._ledger_candidates(request, types)
        # Rows are read best candidate first, a chunk at a time, until no candidate left can enter
        # the top ``want`` (a rank weight is at most 1): the same ranking, without reading and
        # decoding every candidate's row (most of a search's time with a few hundred memories).
        pooled = sorted(pooled, key=lambda hit: -hit.score)
        now = datetime.now(UTC).timestamp()
        ranked: list[tuple[float, MemoryRow]] = []
        top: list[float] = []  # the best ``want`` weighted scores so far (a min-heap)
        chunk = max(want, 16)
        for start in range(0, len(pooled), chunk):
            if len(top) >= want and pooled[start].score * MAX_RANK_WEIGHT < top[0]:
                break
            part = pooled[start : start + chunk]
            rows = self.scopes.get_many([hit.id for hit in part], scopes)
            for hit in part:
                row = rows.get(hit.id)
                if row is None or (row.deleted and not request.include_deleted) or row.memory_type not in types:
                    continue
                if request.min_importance is not None and row.importance_score < request.min_importance:
                    continue
                score = hit.score * self._rank_weight(row, now)
                ranked.append((score, row))
                if len(top) < want:
                    heapq.heappush(top, score)
                elif score > top[0]:
                    heapq.heapreplace(top, score)
        ranked.sort(key=lambda pair: (-pair[0], pair[1].id))
        return ranked, mode

    def _by_scope(self, rows: Sequence[MemoryRow]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for row in rows:
            grouped.setdefault(row.scope, []).append(row.id)
        return grouped

    def _stale(self, rows: Sequence[MemoryRow]) -> dict[str, list[dict[str, Any]]]:
        """Memory id → its stale anchors, from each scope's ledger."""
        found: dict[str, list[dict[str, Any]]] = {}
        for scope, ids in self._by_scope(rows).items():
            found.update(self._store(scope).ledger.stale_anchors(ids))
        return found

    def _record_access(self, rows: Sequence[MemoryRow]) -> None:
        for scope, ids in self._by_scope(rows).items():
            self._store(scope).ledger.record_access(ids)

    def memory_search(self, request: MemorySearchInput) -> MemorySearchResult:
        """Memories by meaning (dense + keyword) across the scopes this project sees (project, local,
        global), ranked by similarity × importance × recency; summaries unless ``detail="full"``."""
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor", "detail"}), sort_keys=True)
        offset = decode_cursor(request.cursor, key)
        ranked, mode = self._ranked(request, offset + request.limit + 1)
        page = ranked[offset : offset + request.limit]
        more = len(ranked) > offset + request.limit
        hits: list[MemoryHit] = []
        budget = MAX_RESPONSE_TOKENS - 1_000
        truncated = False
        stale = self._stale([row for _, row in page])
        for score, row in page:
            hit = self._hit(row, score, stale, detail=request.detail)
            hit.access_count += 1  # this retrieval
            cost = estimate_tokens(hit.model_dump_json())
            if cost > budget:
                truncated, more = True, True
                break
            budget -= cost
            hits.append(hit)
        self._record_access([row for _, row in page[: len(hits)]])
        next_offset = offset + len(hits)
        return MemorySearchResult(
            query=request.query, result_count=len(hits), results=hits,
            next_cursor=encode_cursor(next_offset, key) if more and hits else None,
            truncated=truncated, search_mode=mode,
        )

    def _vector_candidates(self, request: MemorySearchInput, types: list[str], candidates: int) -> list[VectorHit]:
        dense_query = self.embedder.embed_query(request.query).tolist() if self.settings.dense_embeddings else None
        sparse_query = sparse.query_vector(request.query)
        flt = self._filter(request)
        dense_all: list[VectorHit] = []
        sparse_all: list[VectorHit] = []
        for store in self.scopes.opened(request.scopes):
            for memory_type in types:
                dense, words = self.vectors.ranked_lists(
                    store.projector.collection(memory_type), dense=dense_query, sparse=sparse_query,
                    candidates=candidates, payload_filter=flt, with_payload=False,
                )
                dense_all.extend(dense)
                sparse_all.extend(words)
        dense_all.sort(key=lambda h: -h.score)
        sparse_all.sort(key=lambda h: -h.score)
        if not dense_all and not sparse_all:
            return []
        # Similarity stays on an absolute scale (cosine) so a page of weak matches scores low;
        # the keyword list lifts exact-term matches within it.
        fused = minmax_fuse(dense_all[:candidates], sparse_all[:candidates], self.settings.dense_weight)
        cosine = {h.id: max(0.0, h.score) for h in dense_all}
        return [
            VectorHit(id=h.id, score=0.5 * cosine.get(h.id, 0.0) + 0.5 * h.score if cosine else h.score, payload=h.payload)
            for h in fused
        ]

    def _ledger_candidates(self, request: MemorySearchInput, types: list[str]) -> list[VectorHit]:
        words = set(sparse.tokenize(request.query))
        start = epoch(request.time_range.start) if request.time_range else None
        end = epoch(request.time_range.end) if request.time_range else None
        hits: list[VectorHit] = []
        rows = (
            row for store in self.scopes.opened(request.scopes)
            for row in store.ledger.iter_memories(memory_types=types, include_deleted=request.include_deleted)
        )
        for n, row in enumerate(rows):
            if n >= FALLBACK_SCAN_LIMIT:
                break
            created = epoch(row.created_at) or 0.0
            if (start is not None and created < start) or (end is not None and created > end):
                continue
            if any(
                (row.metadata.get(k) not in v) if isinstance(v, list) else row.metadata.get(k) != v
                for k, v in (request.metadata_filters or {}).items()
            ):
                continue
            tokens = set(sparse.tokenize(prepared_text(row.memory_type, row.content, row.metadata)))
            overlap = len(words & tokens)
            if overlap:
                hits.append(VectorHit(id=row.id, score=overlap / max(1, len(words)), payload={}))
        hits.sort(key=lambda h: -h.score)
        return hits

    # -- statistics, export, import -------------------------------------------------------------
    def memory_statistics(self) -> MemoryStatisticsResult:
        """Counts per type, sync states, store and cache health, the projection queue: totals over
        every scope in use, and each scope on its own."""
        storage: dict[str, dict[str, Any]] = {}
        stores = self.scopes.opened()
        per_scope: dict[str, dict[str, Any]] = {}
        try:
            sizes = dict.fromkeys(COLLECTIONS, 0)
            for store in stores:
                points = {t: self.vectors.count(store.projector.collection(t)) for t in COLLECTIONS}
                per_scope[store.name] = {"points_per_type": points}
                for t, n in points.items():
                    sizes[t] += n
            storage["vector_store"] = {"connected": True, "points_per_type": sizes}
        except Exception as exc:  # noqa: BLE001 - statistics report the outage
            storage["vector_store"] = {"connected": False, "error": str(exc)}
        graph = self.projector.graph
        if graph is not None:
            try:
                storage["graph"] = {"connected": True, **graph.health()}
            except Exception as exc:  # noqa: BLE001
                storage["graph"] = {"connected": False, "error": str(exc)}
        storage["ledger"] = {"path": str(self.ledger.path), "bytes": self.ledger.path.stat().st_size}
        cache_stats: dict[str, Any] = {}
        cache = getattr(self.embedder, "cache", None)
        if cache is not None:
            cache_stats = {"entries": len(cache), "hit_rate": round(cache.hit_rate, 4)}
        counts: dict[str, dict[str, int]] = {str(t): {"total": 0, "active": 0, "deleted": 0} for t in MEMORY_TYPES}
        sync: dict[str, int] = {"synced": 0, "pending": 0, "failed": 0}
        outbox: dict[str, Any] = {"pending": 0, "max_attempts": 0, "last_error": None}
        for store in stores:
            scope_counts = store.ledger.counts()
            scope_sync = store.projected.sync_counts()  # global: this project's replica says what is projected
            scope_outbox = store.projected.outbox_stats()
            for memory_type, numbers in scope_counts.items():
                total = counts.setdefault(memory_type, {"total": 0, "active": 0, "deleted": 0})
                for k, n in numbers.items():
                    total[k] += n
            for status, n in scope_sync.items():
                sync[status] = sync.get(status, 0) + n
            outbox["pending"] += scope_outbox["pending"]
            outbox["max_attempts"] = max(outbox["max_attempts"], scope_outbox["max_attempts"])
            outbox["last_error"] = outbox["last_error"] or scope_outbox["last_error"]
            per_scope.setdefault(store.name, {}).update({
                "ledger": str(store.ledger.path),
                "memory_counts": {t: n for t, n in scope_counts.items() if n["total"]},
                "sync_status": scope_sync, "outbox": scope_outbox,
            })
        return MemoryStatisticsResult(
            memory_counts=counts, sync_status=sync, storage=storage, cache=cache_stats, outbox=outbox, scopes=per_scope,
        )

    def _confined(self, raw: str) -> Path:
        try:
            return confine_path(self.settings.resolved_root(), raw)
        except DiscoveryError as exc:
            raise ToolError(f"Path must be within project directory: {raw!r} — {exc}") from exc

    def _output(self, raw: str, *, overwrite: bool = False, directory: bool = False) -> Path:
        """Where an export or backup may write (see ``query_server.output_paths``)."""
        try:
            return checked_output_path(
                self.settings.resolved_root(), raw, overwrite=overwrite, directory=directory,
                protected=(self.settings.resolved_state_dir(), self.settings.resolved_global_dir()),
            )
        except OutputPathRefused as exc:
            raise ToolError(str(exc)) from exc

    @staticmethod
    def _matches(row: MemoryRow, filters: dict[str, Any] | None) -> bool:
        for key, value in (filters or {}).items():
            have = row.metadata.get(key)
            if isinstance(value, list) and have not in value or not isinstance(value, list) and have != value:
                return False
        return True

    def export_memory(self, request: ExportMemoryInput) -> ExportMemoryResult:
        """Memories as JSONL (one per line, with relationships and scope), to a project file or inline;
        as Markdown files in a project directory; or as git notes on commits (session and design
        memories). JSONL exports every scope unless told otherwise; Markdown and git notes, which
        are meant to be committed, export the project scope unless told otherwise."""
        types = [str(t) for t in request.memory_types] if request.memory_types else None
        scopes = request.scopes or (list(MEMORY_SCOPES) if request.format == "jsonl" else ["project"])
        if request.format == "git_notes":
            refused = [t for t in types or () if t not in NOTE_TYPES]
            if refused:
                raise ToolError(f"git notes hold {' and '.join(NOTE_TYPES)} memories, not {', '.join(refused)} — use format markdown or jsonl for those")
            types = types or list(NOTE_TYPES)
        records: list[dict[str, Any]] = []
        rows = (
            (store, row) for store in self.scopes.opened(scopes)
            for row in store.ledger.iter_memories(memory_types=types, include_deleted=request.include_deleted)
        )
        for store, row in rows:
            if not self._matches(row, request.filters):
                continue
            out, _ = store.ledger.relationships_of(row.id)
            records.append({
                **row.snapshot(),
                "scope": row.scope,
                "access_count": row.access_count,
                "relationships": [
                    {"type": r.rel_type, "target_id": r.target_id, "target_kind": r.target_kind, "properties": r.properties}
                    for r in out
                ],
            })
        if request.format == "markdown":
            assert request.output_path is not None  # the input model requires it
            target = self._output(request.output_path, directory=True)
            prune = [] if request.filters else (types or [str(t) for t in MEMORY_TYPES])
            try:
                count, removed = write_directory(target, records, prune_types=prune, overwrite=request.overwrite)
            except MarkdownMemoryError as exc:
                raise ToolError(str(exc)) from exc
            except (OSError, RecursionError) as exc:
                raise ToolError(
                    f"cannot write {request.output_path[:200]!r}: {getattr(exc, 'strerror', None) or exc} — pass a shorter directory "
                    "path inside the project"
                ) from exc
            return ExportMemoryResult(exported_count=count, output_path=str(target), removed_count=removed)
        if request.format == "git_notes":
            def deleted(memory_id: str) -> bool:
                row = self.scopes.locate(memory_id)
                return row is not None and row.deleted and not request.include_deleted

            try:
                notes = GitNotes(self.settings.resolved_root(), request.notes_ref)
                report = export_notes(notes, records, drop=deleted)
            except GitNotesError as exc:
                raise ToolError(str(exc)) from exc
            return ExportMemoryResult(exported_count=report.exported, output_path=notes.ref, removed_count=report.removed, errors=report.errors)
        lines = [json.dumps(record, ensure_ascii=False) for record in records]
        text = "".join(line + "\n" for line in lines)
        if request.output_path:
            path = self._output(request.output_path, overwrite=request.overwrite)
            try:
                write_file_atomic(path, text.encode("utf-8"))
            except (OSError, RecursionError) as exc:  # name too long, a file in the way, no space, 1000s of levels
                raise ToolError(
                    f"cannot write {request.output_path[:200]!r}: {getattr(exc, 'strerror', None) or exc} — pass a shorter file path "
                    "inside the project, or leave output_path out to get the JSONL inline"
                ) from exc
            fault_point("export_memory:after_write")
            return ExportMemoryResult(exported_count=len(lines), output_path=str(path))
        if estimate_tokens(text) > MAX_RESPONSE_TOKENS - 1_000:
            raise ToolError(
                f"{len(lines)} memories are too large to return inline — pass output_path (a file inside the project) "
                "or narrow memory_types/filters"
            )
        return ExportMemoryResult(exported_count=len(lines), data=text)

    def _jsonl_items(self, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
        if request.input_path:
            path = self._confined(request.input_path)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ToolError(f"cannot read {request.input_path}: {exc.strerror} — pass a JSONL file inside the project") from exc
        else:
            text = request.data or ""
        items: list[tuple[dict[str, Any], Any]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                item = ValueError(
                    f"not valid JSON ({exc.msg} at column {exc.colno}) — each line must be one JSON object, "
                    "as export_memory writes"
                )
            if not isinstance(item, dict | Exception):
                item = ValueError("each line must be a JSON object with memory_type and content")
            items.append(({"line": number}, item))
        return items

    def _markdown_items(self, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
        assert request.input_path is not None  # the input model requires it
        source = self._confined(request.input_path)
        if not source.exists():
            raise ToolError(f"{request.input_path} does not exist — pass a directory written by `codemem export --markdown` (inside the project)")
        root = self.settings.resolved_root()
        return [
            ({"file": path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)}, item)
            for path, item in read_directory(source)
        ]

    def _git_note_items(self, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
        try:
            notes = GitNotes(self.settings.resolved_root(), request.notes_ref)
            return [({"note": commit}, item) for commit, item in import_notes(notes)]
        except GitNotesError as exc:
            raise ToolError(str(exc)) from exc

    def import_memory(self, request: ImportMemoryInput, *, request_id: str | None = None) -> ImportMemoryResult:
        """Memories from JSONL, a directory of Markdown memory files, or git notes, into ``scope`` (or
        the scope each JSONL line names, else project); existing ids, in any scope, are skipped,
        overwritten where they are, or refused (then nothing is imported). A repeated ``request_id``
        imports nothing twice and counts as the first call did."""
        if request.format == "markdown":
            items = self._markdown_items(request)
        elif request.format == "git_notes":
            items = self._git_note_items(request)
        else:
            items = self._jsonl_items(request)
        errors: list[dict[str, Any]] = []
        fresh: dict[str, list[NewMemory]] = {}
        overwrite: list[tuple[MemoryRow, dict[str, Any]]] = []
        seen: dict[str, dict[str, Any]] = {}
        skipped = 0
        for where, item in items:
            try:
                if isinstance(item, Exception):
                    raise item
                memory_type = parse_memory_type(str(item.get("memory_type", "")))
                content = item.get("content")
                if not isinstance(content, str) or not content.strip():
                    raise ValueError("content is missing or blank")
                metadata = validate_metadata(memory_type, item.get("metadata") or {}, content=content)
                memory_id = str(item.get("id") or uuid.uuid4())
                try:
                    uuid.UUID(memory_id)
                except ValueError as exc:
                    raise ValueError(f"id {memory_id!r} is not a UUID — omit it to get a new one") from exc
                importance = item.get("importance_score", 0.5)
                if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
                    raise ValueError(f"importance_score must be a number from 0 to 1 (got {importance!r})")
                importance = float(importance)
                if memory_id in seen:
                    first = ", ".join(f"{key} {value}" for key, value in seen[memory_id].items())
                    raise ValueError(f"memory {memory_id} appears twice (first at {first}) — keep one of them")
                scope = request.scope or str(item.get("scope") or "project").strip().lower()
                if scope not in MEMORY_SCOPES:
                    raise ValueError(f"scope {item.get('scope')!r} is not one of {', '.join(MEMORY_SCOPES)}")
                if scope == "global" and metadata.get("anchors"):
                    raise ValueError("global memories cannot be anchored to code (metadata.anchors) — import it with scope project")
            except (ValueError, TypeError, MemoryValidationError) as exc:
                errors.append({**where, "error": str(exc)})
                continue
            seen[memory_id] = where
            existing = self.scopes.locate(memory_id)
            if existing is not None and self._replayed(request_id, memory_id, ("create",)) is not None:
                existing = None  # this call created it before its owner died: the ledger returns it again
            if existing is not None:
                if request.conflict_resolution == "skip":
                    skipped += 1
                    continue
                if request.conflict_resolution == "error":
                    errors.append({**where, "error": f"memory {memory_id} already exists (conflict_resolution='error')"})
                    continue
                overwrite.append((existing, {"content": content, "metadata": metadata, "importance_score": importance}))
                continue
            rels = [
                Relationship(memory_id, str(r["type"]), str(r["target_id"]), str(r.get("target_kind", "memory")), r.get("properties") or {})
                for r in item.get("relationships") or []
                if isinstance(r, dict) and r.get("type") in ALL_EDGE_TYPES and r.get("target_id")
            ]
            fresh.setdefault(scope, []).append(NewMemory(
                memory_type=str(memory_type), content=content, metadata=metadata, importance_score=importance,
                relationships=rels, id=memory_id, created_at=item.get("created_at"), updated_at=item.get("updated_at"),
            ))
        if errors and request.conflict_resolution == "error":
            return ImportMemoryResult(imported=0, skipped=skipped, overwritten=0, errors=errors)
        touched: dict[str, list[str]] = {}
        added = 0
        try:  # one all-or-nothing transaction per scope
            for scope, news in fresh.items():
                rows = self._store(scope, create=True).ledger.add(news, request_id=request_id)
                touched.setdefault(scope, []).extend(row.id for row in rows)
                added += len(rows)
            for row, change in overwrite:
                self._store(row.scope).ledger.update(row.id, request_id=request_id, operation="import_overwrite", **change)
                touched.setdefault(row.scope, []).append(row.id)
        except LedgerError as exc:
            raise ToolError(str(exc)) from exc
        fault_point("import_memory:after_ledger")
        for scope, ids in touched.items():
            for start in range(0, len(ids), 128):
                self._project(ids[start : start + 128], scope=scope)
        return ImportMemoryResult(imported=added, skipped=skipped, overwritten=len(overwrite), errors=errors)

    def _hit(
        self, row: MemoryRow, score: float, stale: dict[str, list[dict[str, Any]]] | None = None, *, detail: str = "full"
    ) -> MemoryHit:
        whole = f"memory_get(memory_id={row.id!r}, memory_type={row.memory_type!r}) returns the whole memory"
        if detail == "summary":
            content, cut = summarize(row.content, SUMMARY_CHARS, "memory_get returns the whole memory (see next)")
        else:
            content, cut = cut_text(row.content, HIT_CONTENT_CHARS, "memory_get returns the whole memory")
        changed = (stale or {}).get(row.id)
        return MemoryHit(
            id=row.id, memory_type=row.memory_type, content=content, score=round(score, 4), metadata=row.metadata,
            created_at=row.created_at, updated_at=row.updated_at, importance_score=row.importance_score,
            access_count=row.access_count,
            provenance=MemoryProvenance(
                version=row.version, updated_at=row.updated_at, sync_status=row.sync_status, stale=bool(changed),
                stale_reason=(
                    "anchored code changed since: " + ", ".join(a["qualified_name"] + (" (gone)" if a["current_hash"] is None else "") for a in changed)
                    + " — re-check it, then memory_update with confirm_anchors=true (or update it)"
                ) if changed else None,
            ),
            content_truncated=cut,
            scope=row.scope,  # type: ignore[arg-type]
            next=whole if cut else None,
        )

    def memory_list(self, request: MemoryListInput) -> MemoryListResult:
        """Memories of every scope, most recently updated first (for browsing; search ranks by meaning)."""
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor", "detail"}), sort_keys=True)
        offset = decode_cursor(request.cursor, key)
        types = [str(t) for t in request.memory_types] if request.memory_types else None
        stores = self.scopes.opened(request.scopes)
        if len(stores) == 1:
            rows = stores[0].ledger.recent(memory_types=types, include_deleted=request.include_deleted, offset=offset, limit=request.limit + 1)
        else:  # merge the scopes' newest pages (each ledger answers in updated_at order)
            merged = [
                row for store in stores
                for row in store.ledger.recent(memory_types=types, include_deleted=request.include_deleted, offset=0, limit=offset + request.limit + 1)
            ]
            merged.sort(key=lambda row: row.id)
            merged.sort(key=lambda row: row.updated_at, reverse=True)
            rows = merged[offset : offset + request.limit + 1]
        rows = [self._current(row) if row.scope == "global" else row for row in rows]
        page = [self._hit(row, 1.0, detail=request.detail) for row in rows[: request.limit]]
        more = len(rows) > request.limit
        return MemoryListResult(results=page, next_cursor=encode_cursor(offset + len(page), key) if more else None)

    def memory_context(self, request: MemoryContextInput) -> MemoryContextResult:
        """A topic's memories for a conversation (``/codemem:context``): the most relevant first,
        grouped by type, each group and the whole with a token estimate, within ``max_tokens``.

        Breadth first: every memory, best first, goes in as a ~300-character summary (or ~120
        when that no longer fits; left out, and counted in ``omitted``, when neither does); the
        budget left then widens the most relevant summaries to up to 1,500 characters. The
        estimate of the whole answer (entries, group headers and envelope) stays within
        ``max_tokens``."""
        search = MemorySearchInput(
            query=request.topic, memory_types=request.memory_types, scopes=request.scopes, limit=request.limit,
        )
        ranked, mode = self._ranked(search, request.limit)
        ranked = [(score, row) for score, row in ranked if request.min_score is None or score >= request.min_score][: request.limit]
        stale = self._stale([row for _, row in ranked])
        envelope = MemoryContextResult(
            topic=request.topic, groups=[], total_tokens=99_999, max_tokens=request.max_tokens, memory_count=999,
            omitted=999, summarized=999, search_mode=mode, next="x" * 200,
        )
        group_cost = estimate_tokens(MemoryContextGroup(memory_type="user_preference", count=999, tokens=99_999, memories=[]).model_dump_json())
        budget = request.max_tokens - estimate_tokens(envelope.model_dump_json())

        def entry(score: float, row: MemoryRow, chars: int) -> MemoryContextEntry:
            content, cut = summarize(row.content, chars, "memory_get returns the whole memory")
            made = MemoryContextEntry(
                id=row.id, memory_type=row.memory_type, scope=row.scope,  # type: ignore[arg-type]
                title=memory_title(row.metadata), content=content, content_truncated=cut, score=round(score, 4),
                importance_score=row.importance_score, updated_at=row.updated_at, stale=row.id in stale, tokens=99_999,
            )
            made.tokens = estimate_tokens(made.model_dump_json())  # an upper bound: the real count is shorter
            return made

        chosen: list[tuple[float, MemoryRow, MemoryContextEntry]] = []
        opened: set[str] = set()
        omitted = 0
        for score, row in ranked:
            header = 0 if row.memory_type in opened else group_cost
            fitting = (e for e in (entry(score, row, chars) for chars in (SUMMARY_CHARS, SUMMARY_CHARS * 2 // 5)) if e.tokens + header <= budget)
            found = next(fitting, None)
            if found is None:
                omitted += 1
                continue
            budget -= found.tokens + header
            opened.add(row.memory_type)
            chosen.append((score, row, found))
        for index, (score, row, small) in enumerate(chosen):  # widen the best summaries with what is left
            if small.content_truncated and budget > 0:
                wide = entry(score, row, CONTEXT_CONTENT_CHARS)
                if wide.tokens - small.tokens <= budget:
                    budget -= wide.tokens - small.tokens
                    chosen[index] = (score, row, wide)
        entries = [e for _, _, e in chosen]
        summarized = sum(1 for e in entries if e.content_truncated)
        kept = {entry.id for entry in entries}
        self._record_access([row for _, row in ranked if row.id in kept])
        groups: dict[str, MemoryContextGroup] = {}
        for entry in entries:  # best first, so groups come in the order of their best memory
            group = groups.setdefault(entry.memory_type, MemoryContextGroup(memory_type=entry.memory_type, count=0, tokens=0, memories=[]))
            group.memories.append(entry)
            group.count += 1
            group.tokens += entry.tokens
        total = sum(g.tokens for g in groups.values())
        hints = []
        if summarized:
            hints.append("memory_get(memory_id, memory_type) returns a summarized memory in full")
        if omitted:
            hints.append(f"{omitted} more relevant {'memory' if omitted == 1 else 'memories'} did not fit: raise max_tokens or narrow memory_types")
        return MemoryContextResult(
            topic=request.topic, groups=list(groups.values()), total_tokens=total, max_tokens=request.max_tokens,
            memory_count=len(entries), omitted=omitted, summarized=summarized, search_mode=mode,
            next="; ".join(hints) or None,
        )

    # -- backup and restore --------------------------------------------------------------------
    def backup(self, request: BackupInput) -> BackupResult:
        """A consistent online copy of the ledger (and the embedding cache) into a project directory."""
        target = self._output(request.path, directory=True)
        if target.exists() and any(target.iterdir()):
            raise ToolError(f"{request.path} is not empty — pass a new directory for the backup")
        make_private_dir(target)  # a backup holds every memory: only its owner may read it
        self.ledger.backup_to(target / "memory.db")
        cache = getattr(self.embedder, "cache", None)
        if cache is not None and getattr(cache, "path", ":memory:") != ":memory:":
            import sqlite3

            source = sqlite3.connect(cache.path)
            dest = sqlite3.connect(str(make_private_file(target / "embeddings.db")))
            try:
                source.backup(dest)
            finally:
                dest.close()
                source.close()
        counts = Ledger(target / "memory.db")
        try:
            total = sum(c["total"] for c in counts.counts().values())
        finally:
            counts.close()
        make_private_file(target / "BACKUP.json").write_text(json.dumps({
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "memories": total,
            "embedding_model": self.embedder.model_id, "restore": "codemem restore <this directory>",
        }, indent=2))
        files = {p.name: p.stat().st_size for p in sorted(target.iterdir()) if p.is_file()}
        return BackupResult(path=str(target), files=files, memories=total)

    def restore(self, request: RestoreInput) -> RestoreResult:
        """Replace the ledger with a backup's (the current one is kept beside it), then rebuild the
        memory projections from it."""
        source = self._confined(request.path) / "memory.db"
        if not source.is_file():
            raise ToolError(f"{request.path} holds no memory.db — pass a directory written by `codemem backup`")
        import shutil
        import sqlite3

        check = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            if check.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                raise ToolError(f"{source} is corrupt (integrity_check failed) — pick another backup")
        finally:
            check.close()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        live = self.ledger.path
        kept = live.with_name(f"memory.db.pre-restore-{stamp}")
        with self.projector.write_lock:
            self.ledger.backup_to(kept)
            self.ledger.close()
            for suffix in ("-wal", "-shm"):
                live.with_name(live.name + suffix).unlink(missing_ok=True)
            tmp = live.with_name(f".memory.db.restore-{stamp}")
            shutil.copyfile(source, tmp)
            os.replace(tmp, live)
            self.ledger = Ledger(live)
            self.projector.ledger = self.ledger
            self.scopes.set_project(self.ledger)
            self.projector.refresh_generation()
        self.ledger.set_meta("embedding_model", self.embedder.model_id)
        report = self.rebuild_projections()
        total = sum(c["total"] for c in self.ledger.counts().values())
        return RestoreResult(restored_memories=total, previous_ledger=str(kept), projection=report)

    # -- normalization ---------------------------------------------------------------------------
    def normalize_memory(self, request: NormalizeMemoryInput) -> NormalizationJob:
        """Start normalization in the background (one at a time); returns the job at once."""
        with self._job_lock:
            running = next((j for j in self._jobs.values() if j.status == "running"), None)
            if running is not None:
                raise ToolError(
                    f"normalization {running.job_id} is already running ({running.phase}, {running.percent:.0f}%) — "
                    "poll normalize_status with its job_id"
                )
            job = NormalizationJob(
                job_id=str(uuid.uuid4()), status="running", dry_run=request.dry_run, phase="starting",
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            self._jobs[job.job_id] = job

        def progress(phase: str, percent: float) -> None:
            job.phase, job.percent = phase, round(percent, 1)

        def run() -> None:
            normalizer = Normalizer(
                self.ledger, self.projector, state_dir=self.settings.resolved_state_dir(),
                threshold=self.settings.memory_dedup_threshold, progress=progress,
                code_exists=(lambda target: self.resolve_code(target) is not None) if self.resolve_code else None,
            )
            try:
                report = normalizer.run(phases=request.phases, dry_run=request.dry_run)
                job.report = report.as_dict()
                job.status, job.phase, job.percent = "done", "done", 100.0
                self._wake.set()
            except Exception as exc:  # noqa: BLE001 - the job reports its failure
                log.exception("normalization failed", operation="normalize")
                job.errors.append(f"{type(exc).__name__}: {exc}")
                job.status = "failed"
            finally:
                job.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
                self.ledger.set_meta("last_normalization", job.model_dump_json())

        threading.Thread(target=run, name="codemem-normalize", daemon=True).start()
        return job

    def normalize_status(self, request: NormalizeStatusInput) -> NormalizationJob:
        """A normalization job's phase, percent, errors and report (the latest when no id is given)."""
        if request.job_id is None:
            if self._jobs:
                return max(self._jobs.values(), key=lambda j: j.started_at)
            last = self.ledger.meta("last_normalization")
            if last:
                return NormalizationJob.model_validate_json(last)
            raise ToolError("no normalization has run yet — start one with normalize_memory (dry_run=true to preview)")
        job = self._jobs.get(request.job_id)
        if job is None:
            last = self.ledger.meta("last_normalization")
            if last and json.loads(last).get("job_id") == request.job_id:
                return NormalizationJob.model_validate_json(last)
            raise ToolError(
                f"unknown normalization job {request.job_id!r} — jobs are kept while the server runs; "
                "normalize_status without job_id shows the latest"
            )
        return job

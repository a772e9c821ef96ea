"""The memory writes: add, bulk add, update and delete — with the checks a write makes first
(metadata against its type, relationship targets, code anchors) and the stored memories it may
duplicate or contradict.

Each write commits to the ledger of its scope first, then projects (``MemoryStores.project``); a
call's idempotency key (``request_id``) makes a retried write return its first outcome.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog

from query_server.memory.stores import REPLAYED, MemoryStores, not_found
from query_server.paging import ToolError
from resources.faults import fault_point
from resources.graph.cypher import ALL_EDGE_TYPES
from resources.memory.ledger import RETENTION_DAYS, MemoryNotFound, MemoryRow, NewMemory, Relationship, VersionConflict, content_hash
from resources.memory.projection import EMBED_CHARS, prepared_text, text_digest
from resources.memory.scopes import ScopeStore
from resources.schemas.limits import check_json_object, json_size
from resources.schemas.memory import (
    REQUIREMENT_ID_PATTERN,
    SHARED_SCOPES,
    MemoryAddInput,
    MemoryAddResult,
    MemoryBulkAddInput,
    MemoryBulkAddResult,
    MemoryConflict,
    MemoryDeleteInput,
    MemoryDeleteResult,
    MemoryType,
    MemoryUpdateInput,
    MemoryUpdateResult,
    MemoryValidationError,
    RelationshipSpec,
    validate_metadata,
)
from resources.vectors.store import PayloadFilter

if TYPE_CHECKING:
    import numpy as np

log = structlog.get_logger("codemem.memory")

_REQUIREMENT_ID = re.compile(REQUIREMENT_ID_PATTERN)
_IDENTITY_KEY = {"requirements": "requirement_id", "user_preference": "key"}
"""Metadata that names one thing: the same key with other content is a contradiction."""


def _merged_metadata_within_limits(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Refuse an update whose merged metadata grows past the input limits (each update's own metadata
    is checked on input; repeated updates could still pile it up). Metadata the pipeline made larger
    than the limit stays updatable as long as the update does not grow it."""
    try:
        check_json_object(after)
    except ValueError as exc:
        if json_size(after) > json_size(before):
            raise ToolError(f"metadata after this update: {exc}") from exc


def default_scope(memory_type: str, metadata: dict[str, Any] | None) -> str:
    """The scope of a memory stored without one (seed 002 US6-6: global for what is personal,
    project for the team's context): a user preference that applies ``Global`` (its metadata's
    ``scope``) goes to the user's global scope, everything else to the project."""
    applies = (metadata or {}).get("scope") if memory_type == "user_preference" else None
    return "global" if isinstance(applies, str) and applies.strip().lower() == "global" else "project"


class MemoryWrites:
    """Add, update and delete memories in the scope each belongs to."""

    def __init__(self, stores: MemoryStores) -> None:
        """Write through ``stores``."""
        self.stores = stores

    def memory_add(self, request: MemoryAddInput) -> MemoryAddResult:
        """Store a memory in its scope (by default: ``default_scope``); returns its id and the
        stored memories it may duplicate or contradict."""
        memory_type = request.memory_type
        scope = request.scope or default_scope(str(memory_type), request.metadata)
        self._no_shared_anchors(scope, request.metadata)
        if scope == "enterprise":  # off or unreachable: refused before any work
            self.stores.store(scope, create=True)
        metadata = self._anchored(self._validated_metadata(memory_type, request.metadata, request.content))
        relationships = [self._resolve_target(spec, scope) for spec in request.relationships]
        vector = self.embed_one(memory_type, request.content, metadata)
        conflicts = self.conflicts(memory_type, request.content, metadata, vector, None)
        new = NewMemory(
            memory_type=str(memory_type), content=request.content, metadata=metadata,
            importance_score=request.importance_score if request.importance_score is not None else 0.5,
            relationships=relationships,
        )
        for rel in relationships:
            rel.source_id = new.id
        store = self.stores.store(scope, create=True)
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
        self.stores.project(
            [row.id], {row.id: (text_digest(row.memory_type, row.content, row.metadata), vector)} if vector is not None and row.id == new.id else None,
            scope,
        )
        conflicts = [c for c in conflicts if c.memory_id != row.id]  # a retried request_id finds itself
        after = self.stores.current(row)
        log.info("memory added", memory_id=row.id, memory_type=row.memory_type, scope=scope, conflicts=len(conflicts))
        return MemoryAddResult(
            memory_id=row.id, memory_type=row.memory_type, conflicts=conflicts, version=after.version,
            sync_status=after.sync_status, scope=scope,
        )

    def memory_bulk_add(self, request: MemoryBulkAddInput) -> MemoryBulkAddResult:
        """Store many memories in one ledger transaction: all of them, or none when one is invalid.
        One batch writes one scope (each memory's, else the batch's, else project: a batch is not
        split by ``default_scope``)."""
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
                self._no_shared_anchors(scope, item.metadata)
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
        rows = self.stores.store(scope, create=True).ledger.add(news, request_id=request.request_id)
        if not rows:
            raise ToolError(
                f"request_id {request.request_id!r} was used for memories that have since been deleted — "
                "send a new request_id (or none)"
            )
        ids = [row.id for row in rows]
        for start in range(0, len(ids), 128):
            self.stores.project(ids[start : start + 128], scope=scope)
            fault_point("memory_bulk_add:between_projection_batches")
        return MemoryBulkAddResult(added_count=len(ids), added_ids=ids, errors=[], scope=scope)  # type: ignore[arg-type]

    def memory_update(self, request: MemoryUpdateInput, *, request_id: str | None = None) -> MemoryUpdateResult:
        """Change a memory in whichever scope holds it; refused with the current version when
        ``expected_version`` is stale. A repeated ``request_id`` returns the first outcome."""
        first = self.stores.replayed(request_id, request.memory_id, ("update",))
        if first is not None and first[1] is not None:
            scope, done = first
            return MemoryUpdateResult(
                memory_id=done["id"], memory_type=done["memory_type"], status="updated", version=done["version"],
                updated_at=done["updated_at"], scope=scope,  # type: ignore[arg-type]
            )
        row = self.stores.row_of(request.memory_id, request.memory_type)
        store = self.stores.store(row.scope)
        self._no_shared_anchors(row.scope, request.metadata)
        if row.deleted:
            raise ToolError(
                f"memory {row.id} is deleted (since {row.deleted_at}) — it cannot be updated; add a new memory instead"
            )
        content = request.content if request.content is not None else row.content
        metadata = row.metadata
        if request.metadata is not None or request.content is not None:
            metadata = self._validated_metadata(request.memory_type, {**row.metadata, **(request.metadata or {})}, content,
                                                strict_role="role" in (request.metadata or {}))
        if request.metadata:
            _merged_metadata_within_limits(row.metadata, metadata)
        if (request.metadata and "anchors" in request.metadata) or request.confirm_anchors or (request.content is not None and metadata.get("anchors")):
            metadata = self._anchored(metadata, reanchor=request.confirm_anchors or request.content is not None)
        links = [self._resolve_target(spec, row.scope) for spec in request.relationships]
        for link in links:
            if link.target_id == row.id:
                raise ToolError(f"memory {row.id} cannot link to itself — name another memory, a requirement or code")
            link.source_id = row.id
        try:
            after, changed = store.ledger.update(
                row.id,
                content=request.content,
                metadata=metadata,
                importance_score=request.importance_score,
                relationships=links,
                expected_version=request.expected_version,
                expected_updated_at=request.expected_updated_at,
                request_id=request_id,
            )
        except VersionConflict as exc:
            raise ToolError(str(exc)) from exc
        except MemoryNotFound as exc:
            raise not_found(row.id) from exc
        fault_point("memory_update:after_ledger")
        conflicts: list[MemoryConflict] = []
        if changed and (after.metadata.get("anchors") or row.metadata.get("anchors")):
            self._record_anchor_state(after)
        if changed:
            vector = self.embed_one(after.memory_type, after.content, after.metadata) if request.content is not None else None
            if request.content is not None:
                conflicts = self.conflicts(after.memory_type, after.content, after.metadata, vector, after.id)
            digest = text_digest(after.memory_type, after.content, after.metadata)
            self.stores.project([after.id], {after.id: (digest, vector)} if vector is not None else None, row.scope)
        return MemoryUpdateResult(
            memory_id=after.id, memory_type=after.memory_type, status="updated" if changed else "unchanged",
            version=after.version, updated_at=after.updated_at, conflicts=conflicts, scope=row.scope,  # type: ignore[arg-type]
        )

    def memory_delete(self, request: MemoryDeleteInput, *, request_id: str | None = None) -> MemoryDeleteResult:
        """Soft-delete (kept 30 days) or hard-delete a memory in whichever scope holds it; its graph
        relationships go with it. A repeated ``request_id`` returns the first outcome."""
        first = self.stores.replayed(request_id, request.memory_id, ("soft_delete", "hard_delete"))
        if first is not None:
            scope, done = first
            return self._deleted(request.memory_id, str(request.memory_type), scope, done)
        row = self.stores.row_of(request.memory_id, request.memory_type)
        store = self.stores.store(row.scope)
        if request.hard_delete:
            store.ledger.hard_delete([row.id], request_id=request_id)
            fault_point("memory_delete:after_ledger")
            self.stores.project([row.id], scope=row.scope)
            return self._deleted(row.id, row.memory_type, row.scope, None)
        after = store.ledger.soft_delete(row.id, request_id=request_id)
        fault_point("memory_delete:after_ledger")
        self.stores.project([row.id], scope=row.scope)
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

    @staticmethod
    def _no_shared_anchors(scope: str, metadata: dict[str, Any] | None) -> None:
        if scope in SHARED_SCOPES and metadata and metadata.get("anchors"):
            raise ToolError(
                f"{scope} memories cannot be anchored to code: anchors name symbols of one project — "
                "store the memory with scope 'project' (or 'local'), or leave metadata.anchors out"
            )

    def _validated_metadata(
        self, memory_type: MemoryType, metadata: dict[str, Any] | None, content: str, *, strict_role: bool = True,
    ) -> dict[str, Any]:
        try:
            return validate_metadata(memory_type, metadata, content=content, strict_role=strict_role)
        except MemoryValidationError as exc:
            raise ToolError(str(exc)) from exc

    def _resolve_target(self, spec: RelationshipSpec, scope: str = "project") -> Relationship:
        """A relationship's target: a memory (of any scope; a memory of a shared scope links only to
        memories of its scope, the only ones every project sees it beside), a stored requirement id, or code."""
        if spec.type not in ALL_EDGE_TYPES:
            raise ToolError(
                f"relationship type {spec.type} is not known — use one of {', '.join(ALL_EDGE_TYPES)}"
            )
        target = spec.target_id.strip()
        visible = [scope] if scope in SHARED_SCOPES else None
        row = self.stores.scopes.locate(target)
        if row is not None:
            if row.deleted:
                raise ToolError(
                    f"memory {row.id} is deleted (since {row.deleted_at}) — restore it first, or link to a live memory"
                )
            if scope in SHARED_SCOPES and row.scope != scope:
                raise ToolError(
                    f"{'an' if scope == 'enterprise' else 'a'} {scope} memory can link only to {scope} memories (every project sees it; {row.id} is a {row.scope} "
                    f"memory) — link from that memory to this one instead, or store this one with scope {row.scope!r}"
                )
            return Relationship("", spec.type, row.id, f"memory:{row.memory_type}", spec.properties)
        if _REQUIREMENT_ID.match(target.upper()):
            for store in self.stores.scopes.opened(visible):
                found = store.ledger.find_by_metadata("requirements", "requirement_id", target.upper())
                if found:
                    return Relationship("", spec.type, found[0].id, "memory:requirements", {**spec.properties, "requirement_id": target.upper()})
        if scope in SHARED_SCOPES:
            raise ToolError(
                f"relationship target {target!r} is not {'an' if scope == 'enterprise' else 'a'} {scope} memory — a memory of "
                f"scope {scope} can link only to {scope} "
                "memories (code and project memories belong to one project); store it with scope 'project' to link it there"
            )
        if self.stores.resolve_code is not None:
            try:
                code = self.stores.resolve_code(target)
            except ToolError:
                raise
            if code is not None:
                return Relationship("", spec.type, code[0], f"code:{code[1]}", spec.properties)
        raise ToolError(
            f"relationship target {target!r} not found — pass a memory id, a requirement id that is stored "
            "(REQ-XXX-NNN), a code symbol id or qualified name from code_search, or an indexed file path"
        )

    def embed_one(self, memory_type: str, content: str, metadata: dict[str, Any]) -> np.ndarray | None:
        try:
            return self.stores.embedder.embed_documents([prepared_text(memory_type, content, metadata)[:EMBED_CHARS]])[0]
        except Exception as exc:  # noqa: BLE001 - the ledger write must not depend on the embedder
            log.warning("memory embedding failed; projection queued", error=str(exc))
            return None

    def conflicts(
        self, memory_type: str, content: str, metadata: dict[str, Any], vector: np.ndarray | None, exclude: str | None
    ) -> list[MemoryConflict]:
        """Stored memories of every scope this project sees that the content duplicates or contradicts."""
        conflicts: dict[str, MemoryConflict] = {}
        for store in self.stores.scopes.opened():
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
                dense, _ = self.stores.vectors.ranked_lists(
                    store.projector.collection(memory_type), dense=vector.tolist(), sparse=None, candidates=5,
                    payload_filter=PayloadFilter(must_match={"status": ["active"]}), with_payload=False,
                )
            except Exception as exc:  # noqa: BLE001 - conflict detection degrades, the write goes on
                log.warning("conflict search failed", error=str(exc))
                dense = []
            for hit in dense:
                if hit.id == exclude or hit.id in conflicts or hit.score < self.stores.settings.memory_conflict_threshold:
                    continue
                row = ledger.get(hit.id)
                if row is None or row.deleted:
                    continue
                conflicts[hit.id] = MemoryConflict(
                    memory_id=hit.id, memory_type=row.memory_type, kind="similar", similarity=round(hit.score, 4),
                    detail="a very similar memory exists — update it (memory_update) if this restates it, keep both if not",
                    content_preview=row.content[:200], scope=row.scope,  # type: ignore[arg-type]
                )

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
        found = self.stores.lookup_symbols(wanted) if self.stores.lookup_symbols is not None else {}
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
        ledger = self.stores.store(row.scope).ledger
        anchors = row.metadata.get("anchors") or []
        if not anchors or self.stores.lookup_symbols is None:
            ledger.clear_anchor_state([row.id])
            return
        try:
            current = self.stores.lookup_symbols([a["qualified_name"] for a in anchors])
        except Exception as exc:  # noqa: BLE001 - staleness is re-checked by the next index run
            log.warning("anchor check deferred", memory_id=row.id, error=str(exc))
            return
        ledger.set_anchor_state([
            (row.id, a["qualified_name"], str(a.get("content_hash") or ""), (current.get(a["qualified_name"]) or {}).get("symbol_hash"))
            for a in anchors
        ])

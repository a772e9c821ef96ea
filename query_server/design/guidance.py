"""What governs a change: get_design_context (the designs, requirements, patterns, components and doc
chunks of a component or a feature) and validate_fix (a proposed fix against the decisions,
designs and requirements that govern it)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

import structlog

from pipelines.design.ingest import DOCS_COLLECTION
from pipelines.design.links import component_of
from query_server.design.alignment import NamingRule, SignatureRule, assess_fix
from query_server.design.lookups import CLASS_KINDS, DesignLookups
from query_server.design.signatures import signature_shape
from query_server.paging import ToolError, cut_text, estimate_tokens
from resources.memory.ledger import MemoryRow
from resources.schemas.design import (
    AlignmentStatement,
    ContextItem,
    DesignContextInput,
    DesignContextResult,
    ValidateFixInput,
    ValidateFixResult,
)
from resources.vectors import sparse
from resources.vectors.store import PayloadFilter

log = structlog.get_logger("codemem.design")


class DesignGuidance(DesignLookups):
    """The design context of a component or feature, and the check of a proposed fix."""

    def _item(self, row: MemoryRow, score: float, stale: set[str]) -> ContextItem:
        title = row.metadata.get("title") or row.metadata.get("pattern_name") or row.metadata.get("component_id") or row.content.splitlines()[0][:120]
        return ContextItem(
            id=row.id, kind=row.memory_type, title=str(title), content=cut_text(row.content, 1_500, "memory_get returns the whole")[0],
            score=round(score, 4), source_document=row.metadata.get("source_document"), stale=row.id in stale,
        )

    def _search_rows(self, text: str, memory_type: str, limit: int) -> list[tuple[MemoryRow, float]]:
        vector = self.embedder.embed_query(text)
        try:
            dense, _ = self.vectors.ranked_lists(
                self.memory.projector.collection(memory_type), dense=list(map(float, vector)), sparse=None, candidates=limit,
                payload_filter=PayloadFilter({"status": ["active"]}), with_payload=False,
            )
        except Exception as exc:  # noqa: BLE001 - a missing collection means no memories of the type yet
            log.info("design context search skipped", memory_type=memory_type, error=str(exc))
            return []
        rows = self.ledger.get_many([h.id for h in dense])
        return [(rows[h.id], h.score) for h in dense if h.id in rows and not rows[h.id].deleted]

    def get_design_context(self, request: DesignContextInput) -> DesignContextResult:
        """Designs, requirements, patterns, components and doc chunks for a component or a feature."""
        stale = set(self.ledger.stale_anchors())
        component: dict[str, Any] | None = None
        terms: list[str] = []
        linked: dict[str, dict[str, tuple[MemoryRow, float]]] = defaultdict(dict)
        if request.component_id:
            classes = self._classes_for(request.component_id)
            file, directory = self._component_paths(request.component_id)
            if not classes and not file and not directory:
                raise ToolError(f"Component not found: {request.component_id!r} — pass a class, a repo-relative file or directory, or a component id")
            paths = sorted({c["file_path"] for c in classes} | ({file} if file else set()))
            comp_id = directory or (component_of(paths[0], self.settings.component_depth) if paths else None)
            component = {"component_id": request.component_id, "classes": [c["qualified_name"] for c in classes[:50]], "files": paths[:50], "directory": comp_id}
            terms = [c["name"] for c in classes] + [PurePosixPath(p).stem for p in paths] + ([comp_id] if comp_id else [])
            ids = sorted({r for c in classes for r in (c.get("requirement_ids") or [])})
            for requirement_id in ids:
                row = self._requirement(requirement_id)
                if row is not None:
                    linked["requirements"][row.id] = (row, 1.0)
            for row in self.ledger.iter_memories(memory_types=["design", "code_pattern", "component"], include_deleted=False):
                text = f"{row.content}\n{row.metadata}"
                if row.memory_type == "component" and comp_id and row.metadata.get("component_id") == comp_id:
                    linked["components"][row.id] = (row, 1.0)
                elif row.memory_type == "code_pattern" and any(i.get("id") in {c["id"] for c in classes} for i in row.metadata.get("implementations") or []):
                    linked["patterns"][row.id] = (row, 1.0)
                elif row.memory_type == "design" and any(t and re.search(rf"\b{re.escape(t)}\b", text) for t in terms):
                    linked["designs"][row.id] = (row, 0.9)
        query = (request.query or "").strip() or " ".join(terms[:20])
        groups = {"designs": "design", "requirements": "requirements", "patterns": "code_pattern", "components": "component"}
        result: dict[str, list[ContextItem]] = {}
        for group, memory_type in groups.items():
            found = dict(linked[group])
            if query:
                for row, score in self._search_rows(query, memory_type, request.limit):
                    found.setdefault(row.id, (row, score))
            ranked = sorted(found.values(), key=lambda rs: -rs[1])[: request.limit]
            result[group] = [self._item(row, score, stale) for row, score in ranked]
        documents: list[ContextItem] = []
        if query:
            try:
                vector = self.embedder.embed_query(query)
                dense, sparse_hits = self.vectors.ranked_lists(DOCS_COLLECTION, dense=list(map(float, vector)), sparse=sparse.query_vector(query), candidates=request.limit)
                for hit in (dense or sparse_hits)[: request.limit]:
                    p = hit.payload
                    documents.append(ContextItem(id=hit.id, kind="doc_chunk", title=f"{p.get('file_path')} — {p.get('name')}", content=cut_text(p.get("code") or "", 1_500, "read the file")[0], score=round(hit.score, 4), source_document=p.get("file_path")))
            except Exception as exc:  # noqa: BLE001 - no documents collection yet
                log.info("doc chunk search skipped", error=str(exc))
        out = DesignContextResult(component=component, documents=documents, token_estimate=0, **result)
        out.token_estimate = estimate_tokens(out.model_dump_json())
        return out

    # -- validate_fix --------------------------------------------------------------------------------
    def validate_fix(self, request: ValidateFixInput) -> ValidateFixResult:
        """Check a proposed fix against the ADR decisions, designs and requirements that govern it."""
        designs = [r for r in self.ledger.iter_memories(memory_types=["design"], include_deleted=False) if r.metadata.get("status") not in ("Superseded", "Deprecated")]
        requirements = list(self.ledger.iter_memories(memory_types=["requirements"], include_deleted=False))
        component_terms: list[str] = []
        if request.affected_component:
            classes = self._classes_for(request.affected_component)
            component_terms = [c["name"] for c in classes] + [PurePosixPath(c["file_path"]).stem for c in classes]
        context = " ".join(t for t in component_terms if t and t[0].isupper())  # the classes being fixed
        naming = [
            NamingRule(row=row, base=str(row.metadata.get("base_class") or "").split(".")[-1], naming=row.metadata["naming"])
            for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False)
            if row.metadata.get("naming") and row.metadata.get("base_class")
        ]
        known = {p.get("name", "") for p in self._code(kind=CLASS_KINDS)} if naming else set()
        contracts = [
            SignatureRule(
                row=row, base=str(row.metadata.get("base_class") or "").split(".")[-1],
                implementations={str(i.get("name")) for i in row.metadata.get("implementations") or []},
                contract={m["name"]: [n for n, _ in signature_shape(m["signature"], row.metadata.get("language", ""))[0]] for m in row.metadata.get("contract") or [] if m.get("signature")},
                language=str(row.metadata.get("language") or ""),
            )
            for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False)
            if row.metadata.get("contract") and row.metadata.get("base_class")
        ]
        return assess_fix(
            self.embedder, request.fix_description, request.diff, designs, requirements, component_terms,
            AlignmentStatement, ValidateFixResult, naming_rules=naming, known_classes=known, signature_rules=contracts,
            context=context,
        )

"""What every design tool shares: the project's stores (taken from the ``CodeMemService``) and the
lookups the tools make in them — the indexed code a component id names, a requirement's memory,
the designs that address requirements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.design.anchors import QUALIFIED_NAME_FIELDS
from pipelines.discovery import DiscoveryError, confine_path
from pipelines.index_context import CODE_COLLECTION
from query_server.paging import cut_text
from resources.memory.ledger import MemoryRow
from resources.schemas.code import CLASS_KINDS as RECORD_CLASS_KINDS
from resources.vectors.store import PayloadFilter

CLASS_KINDS = sorted(RECORD_CLASS_KINDS)
MAX_ITEMS = 200


class DesignLookups:
    """The stores of one project and the lookups every design tool makes in them."""

    def __init__(self, service: Any) -> None:
        """Use the stores of ``service`` (a ``CodeMemService``)."""
        self.service = service
        self.settings = service.settings
        self.vectors = service.vectors
        self.graph = service.graph
        self.memory = service.memory
        self.ledger = service.memory.ledger
        self.embedder = service.embedder

    # -- resolving components ------------------------------------------------------------------
    def _code(self, **match: list[Any]) -> list[dict[str, Any]]:
        return [h.payload for h in self.vectors.scroll(CODE_COLLECTION, PayloadFilter(dict(match)), limit=100_000)]

    def _code_named(self, name: str, **match: list[Any]) -> list[dict[str, Any]]:
        """The symbols with qualified name ``name``: the language's own, else the path-based one
        of earlier releases (and ``match``)."""
        for field_name in QUALIFIED_NAME_FIELDS:
            found = self._code(**match, **{field_name: [name]})
            if found:
                return found
        return []

    def _component_paths(self, component_id: str) -> tuple[str | None, str | None]:
        """(file, directory) that a component id names, if it is a path or a component memory."""
        raw = component_id.strip().rstrip("/")
        for row in self.ledger.find_by_metadata("component", "component_id", raw):
            return None, row.metadata.get("file_path") or raw
        try:
            path = confine_path(self.settings.resolved_root(), raw)
        except DiscoveryError:
            return None, None
        rel = path.relative_to(self.settings.resolved_root()).as_posix() if path.exists() else None
        if rel is None:
            return None, None
        return (rel, None) if path.is_file() else (None, rel)

    def _classes_for(self, component_id: str) -> list[dict[str, Any]]:
        """The classes a component id names: a class (name or qualified name), a file, a directory."""
        raw = component_id.strip()
        found = self._code_named(raw, kind=CLASS_KINDS) or self._code(kind=CLASS_KINDS, name=[raw])
        if found:
            return found
        file, directory = self._component_paths(raw)
        if file:
            return self._code(kind=CLASS_KINDS, file_path=[file])
        if directory:
            return self._code(kind=CLASS_KINDS, path_prefixes=[directory + "/"])
        return []

    # -- requirements and designs ---------------------------------------------------------------
    def _requirement(self, requirement_id: str) -> MemoryRow | None:
        found = self.ledger.find_by_metadata("requirements", "requirement_id", requirement_id)
        return found[0] if found else None

    def _designs_for(self, requirement_ids: Sequence[str], requirement_memory_ids: Sequence[str]) -> list[dict[str, Any]]:
        found: dict[str, MemoryRow] = {}
        wanted = set(requirement_memory_ids)
        ids = set(requirement_ids)
        for row in self.ledger.iter_memories(memory_types=["design"], include_deleted=False):
            related = set(row.metadata.get("related_requirements") or [])
            if related & ids:
                found[row.id] = row
        if wanted:
            for rel in self.ledger.all_relationships():
                if rel.rel_type == "ADDRESSES" and rel.target_id in wanted and rel.source_id not in found:
                    design = self.ledger.get(rel.source_id)
                    if design is not None and not design.deleted:
                        found[design.id] = design
        return [
            {"memory_id": r.id, "title": r.metadata.get("title"), "design_type": r.metadata.get("design_type"), "status": r.metadata.get("status"),
             "source_document": r.metadata.get("source_document"), "decision": cut_text(r.metadata.get("decision") or "", 800, "memory_get returns the whole")[0] or None}
            for r in sorted(found.values(), key=lambda r: r.metadata.get("source_document") or "")
        ]

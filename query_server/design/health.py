"""memory_health: memories anchored to code that changed, links to code or memories that are gone,
memories no hub reaches (orphans, with the hub to join), duplicates, and the projection's sync
state — with what to do about each."""

from __future__ import annotations

from pipelines.index_context import CODE_COLLECTION
from query_server.design.lookups import MAX_ITEMS, DesignLookups
from query_server.memory.hubs import orphan_memories
from resources.schemas.design import MemoryHealthResult


_BROKEN_FIX = {
    "deleted": "the target is soft-deleted (the link comes back if it is restored): link this memory to what replaced it "
               "(codemem memory link), and hard-delete the target (memory_delete hard_delete=true) to drop the link",
    "missing": "the target is gone: normalize_memory removes the link (restorable with its restore_links id); link this "
               "memory to what replaced it (codemem memory link)",
}
"""What to do about a link to a deleted or missing memory (seed 002 US5-3: broken links with fix options)."""


class HealthCheck(DesignLookups):
    """The health of the project's memories."""

    def memory_health(self) -> MemoryHealthResult:
        """Stale (anchored code changed), orphaned, broken-linked and duplicated memories, and sync."""
        counts = self.ledger.counts()
        stale_map = self.ledger.stale_anchors()
        rows = self.ledger.get_many(list(stale_map))
        stale = [
            {"memory_id": mid, "memory_type": rows[mid].memory_type if mid in rows else None,
             "preview": rows[mid].content.splitlines()[0][:200] if mid in rows and rows[mid].content else "",
             "changed_anchors": [a["qualified_name"] + (" (gone)" if a["current_hash"] is None else " (changed)") for a in anchors]}
            for mid, anchors in list(stale_map.items())[:MAX_ITEMS]
        ]
        relationships = self.ledger.all_relationships()
        code_targets = sorted({r.target_id for r in relationships if r.target_kind.startswith("code:")})
        present: set[str] = set()
        for start in range(0, len(code_targets), 1000):
            present.update(h.id for h in self.vectors.retrieve(CODE_COLLECTION, code_targets[start:start + 1000]))
        orphans, broken = [], []
        memory_targets = self.ledger.get_many(sorted({r.target_id for r in relationships if r.target_kind.startswith("memory:")}))
        for rel in relationships:
            if rel.target_kind.startswith("code:") and rel.target_id not in present:
                orphans.append({"memory_id": rel.source_id, "relationship": rel.rel_type, "missing_code": rel.target_id, "fix": "re-link it (memory_update) or delete it if the code is gone for good"})
            elif rel.target_kind.startswith("memory:"):
                target = memory_targets.get(rel.target_id)
                if target is None or target.deleted:
                    broken.append({"memory_id": rel.source_id, "relationship": rel.rel_type, "target": rel.target_id,
                                   "target_state": "deleted" if target else "missing", "fix": _BROKEN_FIX["deleted" if target else "missing"]})
        unlinked = orphan_memories(self.ledger, relationships, self.memory.projector, self.vectors, MAX_ITEMS)
        duplicates = [{"memory_type": t, "memory_ids": ids} for t, ids in self.ledger.duplicate_groups()]
        sync = {**self.ledger.sync_counts(), **self.ledger.outbox_stats()}
        recommendations = []
        if stale:
            recommendations.append(f"{len(stale_map)} memorie(s) are anchored to code that changed: review them, then memory_update (with confirm_anchors) or delete")
        if orphans:
            recommendations.append(f"{len(orphans)} link(s) point at code that is no longer indexed")
        if broken:
            recommendations.append(f"{len(broken)} link(s) point at deleted or missing memories")
        if unlinked.total:
            recommendations.append(
                f"{unlinked.total} memorie(s) are orphans ({'no hub reaches them' if unlinked.hubs else 'linked to nothing'}): "
                + ("link each to the hub suggested (codemem memory link <id> <hub>)" if unlinked.hubs
                   else "link them (codemem memory suggest-links), or make a hub (metadata role=hub) and link them to it")
            )
        if duplicates:
            recommendations.append(f"{len(duplicates)} group(s) of identical memories: normalize_memory merges them")
        if sync.get("failed"):
            recommendations.append(f"{sync['failed']} memorie(s) failed to project: sync_memory retries; /health names the store")
        return MemoryHealthResult(
            status="attention" if recommendations else "healthy",
            totals={t: c["active"] for t, c in counts.items()} | {"deleted": sum(c["deleted"] for c in counts.values())},
            stale=stale, orphans=orphans[:MAX_ITEMS], broken_links=broken[:MAX_ITEMS], duplicates=duplicates, sync=sync,
            hubs=unlinked.hubs, orphan_memory_count=unlinked.total, orphan_memories=unlinked.orphans,
            recommendations=recommendations,
        )

"""Anchors: memories anchored to code (``metadata.anchors``) checked against the indexed symbols'
hashes; a changed or vanished symbol flags the memory stale."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.design.memories import DesignReport, DesignStores
from pipelines.index_context import CODE_COLLECTION
from resources.vectors.store import PayloadFilter, VectorStore


QUALIFIED_NAME_FIELDS = ("qualified_name", "path_qualified_name")
"""The payload fields a qualified name is looked up in: the language's own name first, then the
path-based name of earlier releases (anchors and reports made before issue 19 use it)."""


def symbols_by_qualified_name(vectors: VectorStore, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """qualified name (the language's own or the path-based one) → the indexed symbol's payload."""
    found: dict[str, dict[str, Any]] = {}
    names = sorted(set(names))
    for field_name in QUALIFIED_NAME_FIELDS:
        for start in range(0, len(names), 500):
            wanted = [name for name in names[start:start + 500] if name not in found]
            if not wanted:
                continue
            for hit in vectors.scroll(CODE_COLLECTION, PayloadFilter({field_name: wanted}), limit=100_000):
                found.setdefault(hit.payload.get(field_name, ""), hit.payload)
    return found


def refresh_anchors(stores: DesignStores) -> DesignReport:
    """Compare every anchored memory's anchors with the indexed code; flag the changed ones."""
    report = DesignReport()
    for ledger in (stores.ledger, stores.local_ledger):
        if ledger is None:
            continue
        rows = ledger.anchored_memories()
        anchors = [(row.id, a) for row in rows for a in (row.metadata.get("anchors") or []) if isinstance(a, dict) and a.get("qualified_name")]
        current = symbols_by_qualified_name(stores.vectors, [a["qualified_name"] for _, a in anchors])
        states = []
        for memory_id, anchor in anchors:
            symbol = current.get(anchor["qualified_name"])
            now = symbol.get("symbol_hash") if symbol else None
            states.append((memory_id, anchor["qualified_name"], str(anchor.get("content_hash") or ""), now))
        ledger.set_anchor_state(states)
        report.anchors_checked += len(states)
        report.anchors_stale += sum(1 for s in states if s[2] != s[3])
    return report

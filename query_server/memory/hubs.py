"""Hubs and orphan memories (seed 002 FR-037, US5-2): which memories no hub reaches, and the hub
each should join.

A hub is a memory with ``metadata.role: hub`` (``resources.schemas.memory.roles``). Once the
project has one, a memory is an *orphan* when no hub is reachable from it through links between
memories (either direction: a learning linked to a decision that is linked to the hub is not an
orphan). Before any hub exists, an orphan is a memory linked to nothing at all. The links are the
memories' own relationships and the edges the design layer derives (a requirement the code
cites, a component's dependencies: ``pipelines.design.links``). Session summaries and user
preferences stand alone, and the memories the pipeline derives from documents and code follow
their sources, so none of them is reported as an orphan.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any


from pipelines.design.links import DERIVED_EDGES_KEY
from pipelines.design.memories import ORIGIN
from resources.memory.ledger import MemoryRow, Relationship
from resources.schemas.memory import MEMORY_TYPES
from resources.schemas.memory.roles import HUB, ROLE_KEY, is_hub

if TYPE_CHECKING:
    import numpy as np

STANDALONE_TYPES = frozenset({"session", "user_preference"})
"""Types not expected under a hub: a session summary, a personal preference."""
SUGGESTED_HUBS = 2
"""Hubs proposed per orphan, nearest by meaning first."""


@dataclass
class OrphanReport:
    """The orphans of a project's memories.

    Attributes:
        hubs: How many hubs the project has.
        total: How many orphans there are.
        orphans: The first of them (most recently updated first), each with its link suggestions.
    """

    hubs: int
    total: int
    orphans: list[dict[str, Any]] = field(default_factory=list)


def _links(ledger: Any, relationships: Iterable[Relationship]) -> list[tuple[str, str, bool]]:
    """Every link as ``(source, target, between memories)``: the memories' relationships and the
    edges the design layer derived (whose ends may be code)."""
    links = [(rel.source_id, rel.target_id, rel.target_kind.startswith("memory:")) for rel in relationships]
    derived = json.loads(ledger.meta(DERIVED_EDGES_KEY) or "[]")  # [type, source, target(, properties)]
    return links + [(str(edge[1]), str(edge[2]), False) for edge in derived]


def _reaching_hubs(hub_ids: set[str], links: Iterable[tuple[str, str, bool]], memory_ids: set[str]) -> set[str]:
    """Every memory a hub reaches through links between memories (either direction), hubs included."""
    neighbours: dict[str, set[str]] = defaultdict(set)
    for source, target, between_memories in links:
        if between_memories or (source in memory_ids and target in memory_ids):
            neighbours[source].add(target)
            neighbours[target].add(source)
    reached, frontier = set(hub_ids), list(hub_ids)
    while frontier:
        for other in neighbours.pop(frontier.pop(), ()):
            if other not in reached:
                reached.add(other)
                frontier.append(other)
    return reached


def _hub_suggestions(orphan: MemoryRow, hubs: Sequence[MemoryRow], vectors_of: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """The hubs nearest to ``orphan`` by their stored vectors, with the command that links it."""
    mine = vectors_of.get(orphan.id)
    scored = [(float(mine @ vectors_of[h.id]) if mine is not None and h.id in vectors_of else 0.0, h) for h in hubs]
    scored.sort(key=lambda pair: -pair[0])
    return [{
        "hub_id": hub.id, "hub": _title(hub), "similarity": round(score, 3),
        "command": f"codemem memory link {orphan.id} {hub.id} --type RELATES_TO",
    } for score, hub in scored[:SUGGESTED_HUBS]]


def _title(row: MemoryRow) -> str:
    title = (row.metadata or {}).get("title")
    return str(title) if title else (row.content.splitlines()[0][:100] if row.content else row.id)


def _unit_vectors(rows: Sequence[MemoryRow], projector: Any, vectors: Any) -> dict[str, np.ndarray]:
    """The stored dense vectors of ``rows`` (unit length; absent where the store has none)."""
    import numpy as np  # numpy only where vectors are compared

    by_type: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_type[row.memory_type].append(row.id)
    found: dict[str, np.ndarray] = {}
    for memory_type, ids in by_type.items():
        try:
            stored = vectors.dense_vectors(projector.collection(memory_type), ids)
        except Exception:  # noqa: BLE001, S112 - suggestions are ranked without vectors then
            continue
        for memory_id, vector in stored.items():
            array = np.asarray(vector, dtype=np.float32)
            found[memory_id] = array / max(float(np.linalg.norm(array)), 1e-12)
    return found


def orphan_memories(ledger: Any, relationships: Sequence[Relationship], projector: Any, vectors: Any, limit: int) -> OrphanReport:
    """The project's orphan memories (see the module docstring), the first ``limit`` with suggestions:
    the nearest hubs by meaning, or, before any hub exists, ``codemem memory suggest-links``."""
    hubs = [row for memory_type in MEMORY_TYPES for row in ledger.find_by_metadata(str(memory_type), ROLE_KEY, HUB)
            if is_hub(row.metadata)]
    memories = list(ledger.iter_memories(include_deleted=False))
    links = _links(ledger, relationships)
    if hubs:
        reached = _reaching_hubs({h.id for h in hubs}, links, {row.id for row in memories})
    else:
        reached = {end for source, target, _ in links for end in (source, target)}
    orphans = [row for row in memories
               if row.memory_type not in STANDALONE_TYPES and row.id not in reached
               and (row.metadata or {}).get("origin") != ORIGIN]
    orphans.sort(key=lambda row: row.updated_at, reverse=True)
    shown = orphans[:limit]
    vectors_of = _unit_vectors([*shown, *hubs], projector, vectors) if hubs and shown else {}
    items = []
    for row in shown:
        item: dict[str, Any] = {
            "memory_id": row.id, "memory_type": row.memory_type, "preview": _title(row),
            "reason": "no hub reaches it through links" if hubs else "linked to nothing",
        }
        if hubs:
            item["suggested_hubs"] = _hub_suggestions(row, hubs, vectors_of)
        else:
            item["suggestion"] = f"codemem memory suggest-links {row.id} (or make a hub: metadata role=hub, and link to it)"
        items.append(item)
    return OrphanReport(hubs=len(hubs), total=len(orphans), orphans=items)

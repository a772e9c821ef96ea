"""A memory's neighbourhood as a Mermaid flowchart (``codemem memory graph``; seed 002 FR-020).

Nodes are the start memory and what ``get_related`` reached from it (memories rounded, code
boxed), edges the relationships it reached them by, in their own direction. Labels are quoted
and escaped the way Mermaid reads them (``#quot;`` for a quote, ``#35;`` for ``#``), on one line
and cut to ``LABEL_CHARS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from resources.schemas.tools import RelatedEntity

LABEL_CHARS = 60


def mermaid_label(text: str) -> str:
    """``text`` as the inside of a quoted Mermaid label: one line, cut, ``#`` and ``"`` escaped."""
    line = " ".join(str(text).split())
    if len(line) > LABEL_CHARS:
        line = line[: LABEL_CHARS - 1].rstrip() + "…"
    return line.replace("#", "#35;").replace('"', "#quot;")


def _node(name: str, kind: str | None, memory_type: str | None, title: str) -> str:
    label = mermaid_label(f"{memory_type}: {title}" if memory_type else title)
    return f'  {name}("{label}")' if kind == "memory" else f'  {name}["{label}"]'


def memory_graph(entity: Mapping[str, Any], related: Iterable[RelatedEntity]) -> str:
    """The flowchart of ``entity`` (``GetRelatedResult.entity``) and the entities ``related`` to it."""
    names: dict[str, str] = {str(entity["id"]): "n0"}
    lines = ["flowchart LR", _node("n0", entity.get("kind"), entity.get("memory_type"),
                                    str(entity.get("title") or entity.get("name") or entity["id"]))]
    edges: list[str] = []
    for item in related:
        if item.id not in names:
            names[item.id] = f"n{len(names)}"
            kind = item.node_kind or ("memory" if item.memory_type else None)
            lines.append(_node(names[item.id], kind, item.memory_type, item.title or item.qualified_name or item.name or item.id))
        origin = names.get(item.reached_from or "")
        if origin is None or not item.edge:
            continue
        ends = (origin, names[item.id]) if item.edge_direction != "incoming" else (names[item.id], origin)
        edge = f"  {ends[0]} -->|{mermaid_label(item.edge)}| {ends[1]}"
        if edge not in edges:
            edges.append(edge)
    lines += edges
    memories = [name for key, name in names.items() if key == str(entity["id"]) and entity.get("kind") == "memory"]
    memories += [names[item.id] for item in related if (item.node_kind == "memory" or item.memory_type) and item.id in names]
    if memories:
        lines.append("  classDef memory fill:#eef4ff,stroke:#4a6fa5")
        lines.append(f"  class {','.join(dict.fromkeys(memories))} memory")
    return "\n".join(lines) + "\n"

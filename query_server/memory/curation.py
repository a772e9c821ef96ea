"""Curating the memory graph: a memory's quality score and the links it should have
(``codemem memory quality`` / ``suggest-links``; seed 002 US5-4, US3-5, FR-037, FR-040).

Plain functions over what the tools return: the CLI gathers a memory (``memory_get`` with its
relationships and stale anchors) and its search neighbours (``memory_search`` on its content),
these decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from resources.schemas.memory.metadata import METADATA_MODELS

WORDS_FOR_FULL_CONTENT = 12
UNLINKED_TYPES = frozenset({"session"})
"""Types that are not expected to link to anything (a session summary stands alone)."""
LINK_TYPES: dict[tuple[str, str], str] = {
    ("design", "requirements"): "ADDRESSES",
    ("code_pattern", "design"): "FOLLOWS_DESIGN",
    ("component", "design"): "FOLLOWS_DESIGN",
    ("function", "design"): "FOLLOWS_DESIGN",
    ("component", "requirements"): "IMPLEMENTS_REQ",
    ("function", "requirements"): "IMPLEMENTS_REQ",
    ("test_history", "requirements"): "TESTS",
    ("component", "code_pattern"): "USES_PATTERN",
    ("function", "code_pattern"): "USES_PATTERN",
    ("component", "component"): "DEPENDS_ON",
}
"""The relationship a link from a memory of the first type to one of the second usually is."""


def link_type(source_type: str, target_type: str) -> str:
    """The relationship to propose from a ``source_type`` memory to a ``target_type`` one."""
    return LINK_TYPES.get((source_type, target_type), "RELATES_TO")


def optional_fields(memory_type: str) -> list[str]:
    """The metadata fields a memory of this type may leave out (the required ones are checked on write)."""
    model = METADATA_MODELS.get(memory_type)  # type: ignore[call-overload]
    if model is None:
        return []
    return [name for name, field in model.model_fields.items() if not field.is_required() and name != "tags"]


def quality(memory_type: str, content: str, metadata: Mapping[str, Any], links: int, stale: bool) -> tuple[int, list[str]]:
    """A 0-100 score and what would raise it: content that says enough (25), the type's optional
    metadata filled (35), at least one link (25; not expected of a session summary), no stale
    anchor (15)."""
    advice: list[str] = []
    words = len(content.split())
    score = 25 * min(1.0, words / WORDS_FOR_FULL_CONTENT)
    if words < WORDS_FOR_FULL_CONTENT:
        advice.append(f"say more ({words} words): what holds, why, and where it applies")
    optional = optional_fields(memory_type)
    missing = [name for name in optional if metadata.get(name) in (None, "", [], {})]
    score += 35 * (1 - len(missing) / len(optional)) if optional else 35
    if missing:
        advice.append("fill metadata: " + ", ".join(missing))
    if links or memory_type in UNLINKED_TYPES:
        score += 25
    else:
        advice.append("link it to what it concerns (an orphan): codemem memory suggest-links <id>")
    if stale:
        advice.append("its anchored code changed: check it, then memory_update with confirm_anchors")
    else:
        score += 15
    return round(score), advice


def suggested_links(source: Mapping[str, Any], linked: Iterable[str], hits: Iterable[Any], limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` links to propose from ``source`` (``id``, ``memory_type``): its nearest
    memories by content (``hits``, a memory_search of its content, best first), not itself, not
    linked already, no session summaries."""
    seen = set(linked) | {source["id"]}
    out: list[dict[str, Any]] = []
    for rank, hit in enumerate(hits, 1):
        if hit.id in seen or hit.memory_type in UNLINKED_TYPES:
            continue
        seen.add(hit.id)
        out.append({"source_id": source["id"], "target_id": hit.id, "target_type": str(hit.memory_type), "rank": rank,
                    "type": link_type(str(source["memory_type"]), str(hit.memory_type)), "target": hit.content[:80]})
        if len(out) == limit:
            break
    return out

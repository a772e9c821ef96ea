"""Seed 002's memory taxonomy as roles on codemem's eight types (FR-002): no second taxonomy.

Seed 002 files memories as decision, learning, artifact, gotcha, breadcrumb or hub. codemem keeps
its eight types and says the rest in ``metadata.role``: a gotcha is a ``code_pattern`` memory with
``role: gotcha``, a breadcrumb a ``session`` with ``role: breadcrumb``. A **hub** is a navigation
node any memory can be: the memories of a topic link to it (``memory link``), ``memory graph`` draws
it with its neighbours, and ``memory_health`` names the memories linked to no hub (FR-037) with the
hub each should join.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resources.schemas.memory.kinds import MEMORY_TYPES, MemoryValidationError

ROLE_KEY = "role"
HUB = "hub"
ROLES: dict[str, tuple[str, ...]] = {
    "decision": ("design",),
    "learning": ("code_pattern", "session"),
    "gotcha": ("code_pattern",),
    "artifact": ("component", "function", "design"),
    "breadcrumb": ("session",),
    HUB: tuple(str(t) for t in MEMORY_TYPES),
}
"""Each role of seed 002 and the memory types that take it (a hub: any)."""
ROLE_HELP = "; ".join(
    f"{role} ({'any type' if role == HUB else ', '.join(types)})" for role, types in ROLES.items()
)


def role_of(metadata: Mapping[str, Any] | None) -> str | None:
    """A memory's role (lower case), or None."""
    value = (metadata or {}).get(ROLE_KEY)
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def is_hub(metadata: Mapping[str, Any] | None) -> bool:
    """Whether the memory is a hub."""
    return role_of(metadata) == HUB


def check_role(memory_type: str, metadata: dict[str, Any], *, strict: bool = True) -> None:
    """Write a role that fits the memory type in lower case; refuse one that is unknown or does not
    fit, unless not ``strict`` (an update that leaves the role alone, an import, a note from another
    clone: metadata written before roles existed may use the key for something else, and is kept).

    Raises:
        MemoryValidationError: Saying which roles exist and which types take the one given.
    """
    if ROLE_KEY not in metadata or metadata[ROLE_KEY] is None:
        return
    role = role_of(metadata)
    if role in ROLES and memory_type in ROLES[role]:
        metadata[ROLE_KEY] = role
        return
    if not strict:
        return
    if role not in ROLES:
        raise MemoryValidationError(f"metadata.{ROLE_KEY}: unknown role {metadata[ROLE_KEY]!r} — use one of {ROLE_HELP}")
    raise MemoryValidationError(
        f"metadata.{ROLE_KEY}: a {role} is a {' or '.join(ROLES[role])} memory, not {memory_type} — "
        f"store it as {ROLES[role][0]} (roles: {ROLE_HELP})"
    )

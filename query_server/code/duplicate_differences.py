"""What differs between an indexed function and the code about to be written, in words an agent
can act on: names, annotations, docstring, comments, statements written another way, layout,
and the tokens that change behaviour."""

from __future__ import annotations

from collections import Counter

from pipelines.parsing.canonical import CanonicalCode
from resources.code_similarity import CodeComparison, Token

MAX_RENAMES = 4
"""Renamed names listed in one hit (the function's own name first)."""

_REWRITES = {
    "augmented": "`x = x + e` written `x += e` (or back)",
    "comparison": "comparison operands swapped",
    "temporary": "a value returned directly or through a temporary",
    "conditional": "if/else written as a conditional expression (or back)",
    "comprehension": "a loop written as a comprehension (or back)",
}


def _renames(existing: list[Token], new: list[Token]) -> list[str]:
    """``old → new`` for names bound differently at the same positions of equal token sequences."""
    if [t.text for t in existing] != [t.text for t in new]:
        return []
    pairs: dict[str, str] = {}
    for old, fresh in zip(existing, new, strict=True):
        if old.kind == "id" and old.name and fresh.name and old.name != fresh.name:
            pairs.setdefault(old.name, fresh.name)
    return [f"{old} → {fresh}" for old, fresh in pairs.items()]


def describe_differences(
    existing: CanonicalCode, new: CanonicalCode, existing_tokens: list[Token], new_tokens: list[Token],
    comparison: CodeComparison | None, existing_name: str | None, new_name: str | None,
    existing_raw: str | None = None, new_raw: str | None = None,
) -> list[str]:
    """The differences between an indexed function and new code, most telling first.

    Args:
        existing / new: The canonical forms of the indexed function and of the new code.
        existing_tokens / new_tokens: Their tokens (``resources.code_similarity.code_tokens``
            of the canonical texts).
        comparison: The structural comparison of the two, or None where none was made.
        existing_name / new_name: The two functions' names.
        existing_raw / new_raw: The two codes as written (to tell a layout-only difference).

    Returns:
        Short phrases; empty when the two are the same code.
    """
    out: list[str] = []
    if comparison is not None and comparison.verdict != "clone":
        out.append(f"behaviour may differ: {comparison.describe()}")
    renames = _renames(existing_tokens, new_tokens)
    if existing_name and new_name and existing_name != new_name:
        own = f"{existing_name} → {new_name}"
        renames = [own] + [rename for rename in renames if rename != own]
    if renames:
        more = f" (+{len(renames) - MAX_RENAMES} more)" if len(renames) > MAX_RENAMES else ""
        out.append("names: " + ", ".join(renames[:MAX_RENAMES]) + more)
    if sorted(existing.annotations) != sorted(new.annotations):
        if not new.annotations:
            out.append("type annotations left out")
        elif not existing.annotations:
            out.append("type annotations added")
        else:
            out.append("type annotations differ")
    if (existing.docstring or "") != (new.docstring or ""):
        out.append("no docstring" if not new.docstring else "docstring differs" if existing.docstring else "docstring added")
    if existing.comments != new.comments:
        out.append("comments differ")
    rewritten = (Counter(existing.rewrites) - Counter(new.rewrites)) + (Counter(new.rewrites) - Counter(existing.rewrites))
    out.extend(_REWRITES[kind] for kind in _REWRITES if rewritten[kind])
    if not out and existing_raw is not None and new_raw is not None and existing_raw.strip() != new_raw.strip():
        out.append("layout or literal spelling only (same tokens)")
    return out

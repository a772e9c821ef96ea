"""memory_extract's input and result (REQ-MEM-FN-021): typed memories proposed from a transcript, a
diff, a commit message or free text, each with its confidence, its source span and the stored
memories it repeats or contradicts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from resources.schemas.base import Schema
from resources.schemas.limits import MAX_DIFF_CHARS, ToolInput
from resources.schemas.memory.kinds import (
    SCOPE_HELP,
    MemoryScope,
    MemoryType,
    ScopeInput,
)

MAX_EXTRACT_CHARS = MAX_DIFF_CHARS
"""Cap of the text memory_extract reads: a long session transcript or a large diff (2,000,000
characters; the 100,000 of other text fields is too small for a transcript)."""
QUOTE_CHARS = 300
"""Characters of the source span a candidate quotes (its offsets give the whole span)."""
ExtractSource = Literal["auto", "transcript", "diff", "commit", "text"]


def _check_length(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_EXTRACT_CHARS:
        raise ValueError(
            f"text is {len(value):,} characters, over the {MAX_EXTRACT_CHARS:,} memory_extract reads — "
            "split it (one session, one diff or one commit at a time)"
        )
    return value


def _check_text(value: str) -> str:
    if not value.strip():
        raise ValueError("text is blank — pass the transcript, diff, commit message or notes to extract memories from")
    return value


class MemoryExtractInput(ToolInput):
    """Propose typed memories from a piece of work; store them only when ``commit`` is true."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_EXTRACT_CHARS), BeforeValidator(_check_length), AfterValidator(_check_text)] = Field(
        description=(
            "What to extract from (up to 2,000,000 characters): a conversation ('User:'/'Assistant:' turns, or a "
            "Claude Code JSONL transcript), a unified diff, a commit message, or free notes."
        ),
    )
    source: ExtractSource = Field(default="auto", description="What the text is: transcript, diff, commit, text, or auto (detected).")
    commit: bool = Field(default=False, description="Store the candidates (non-duplicates at or above min_confidence); default false: a dry run that only proposes them.")
    scope: ScopeInput = Field(default="project", description="Where committed memories go: " + SCOPE_HELP + ".")
    max_candidates: int = Field(default=20, ge=1, le=100, description="At most this many candidates, the most confident first (1-100).")
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0, description="Leave out candidates less confident than this (0-1).")


class ExtractedMemory(Schema):
    """One proposed memory and where in the text it comes from."""

    memory_type: MemoryType = Field(description="The memory type it would be stored as.")
    title: str = Field(description="A short title.")
    content: str = Field(description="The memory's content as it would be stored.")
    confidence: float = Field(ge=0.0, le=1.0, description="How sure the extraction is that this is worth remembering as this type (0-1).")
    source_start: int = Field(ge=0, description="Offset of the source span's first character in the text.")
    source_end: int = Field(ge=0, description="Offset just past the source span's last character in the text.")
    quote: str = Field(description=f"The source span (its first {QUOTE_CHARS} characters).")
    tags: list[str] = Field(default_factory=list, description="Tags stored with it ('extracted', the source kind, cue words).")
    duplicate_of: str | None = Field(default=None, description="Id of a stored memory that already says this (it is not stored again).")
    conflicts_with: list[str] = Field(default_factory=list, description="Ids of stored memories it contradicts (e.g. a decision reversing a stored design decision): review them.")
    stored_id: str | None = Field(default=None, description="Id of the memory stored for it (commit=true).")


class MemoryExtractResult(Schema):
    """The candidates, and what a commit stored."""

    candidates: list[ExtractedMemory] = Field(default_factory=list)
    source: str = Field(description="The kind of text read: transcript, diff, commit or text.")
    stored: int = Field(default=0, description="How many candidates were stored (0 in a dry run).")
    skipped_duplicates: int = Field(default=0, description="Candidates not stored because a stored memory already says them.")
    dry_run: bool = Field(description="True when nothing was stored (commit=false).")
    scope: MemoryScope = Field(default="project", description="The scope committed memories went to.")

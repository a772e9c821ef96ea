"""Where code, tests and design documents cite an architecture decision record: "ADR-0003",
"ADR 3", "docs/adr/0003-use-argon2.md", "see decision 0003". Each citation becomes a
FOLLOWS_DESIGN link to that ADR's design memory, the way requirement citations become
IMPLEMENTS_REQ links (``pipelines.design.links``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from resources.memory.ledger import MemoryRow

ADR_CITATION = re.compile(r"\bADR[-_ ]?#?0*(\d{1,5})\b|\bdecision(?:[- ]record)?\s+#?0*(\d{1,5})\b", re.IGNORECASE)
"""ADR-0003, ADR 3, adr_12, ADR #3, decision 0003, decision record 7 (group 1 or 2: the number)."""
_ADR_FILE = re.compile(r"^(?:adr[-_]?)?0*(\d{1,5})(?=[-_.])", re.IGNORECASE)
_ADR_TITLE = re.compile(r"^\s*(?:ADR[-_ ]?0*(\d{1,5})|0*(\d{1,5})[.:)])", re.IGNORECASE)
_COMMENT_LINE = re.compile(r"^\s*(#|//|/\*|\*|--|<!--|\"\"\"|''')")
_NEXT_SYMBOL_LINES = 3
"""A comment this many lines or fewer above a declaration cites for that declaration."""
_TEXT_FIELDS = ("decision", "context", "consequences", "rationale")


@dataclass(frozen=True)
class AdrIndex:
    """The project's ADR design memories by number and by document path."""

    by_number: dict[int, list[str]]
    by_path: dict[str, str]

    def cited(self, text: str) -> list[tuple[int, str]]:
        """(1-based line, ADR memory id) of every ADR ``text`` cites, in order, each line's once."""
        found: dict[tuple[int, str], None] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            for match in ADR_CITATION.finditer(line):
                for memory_id in self.by_number.get(int(match.group(1) or match.group(2)), ()):
                    found[(number, memory_id)] = None
            for path, memory_id in self.by_path.items():
                if path in line or PurePosixPath(path).name in line:
                    found[(number, memory_id)] = None
        return list(found)


def adr_number(row: MemoryRow) -> int | None:
    """An ADR memory's number: from its document's name (``0003-use-argon2.md``, ``adr-12.md``), else
    from its title (``ADR-3: ...``, ``3. ...``)."""
    source = str(row.metadata.get("source_document") or "")
    match = _ADR_FILE.match(PurePosixPath(source).name) if source else None
    if match is None:
        match = _ADR_TITLE.match(str(row.metadata.get("title") or ""))
        if match is None:
            return None
        return int(match.group(1) or match.group(2))
    return int(match.group(1))


def adr_index(designs: Iterable[MemoryRow]) -> AdrIndex:
    """The ADRs among live design memories, by number and by document path."""
    by_number: dict[int, list[str]] = {}
    by_path: dict[str, str] = {}
    for row in designs:
        if row.deleted or row.memory_type != "design" or row.metadata.get("design_type") != "ADR":
            continue
        number = adr_number(row)
        if number is not None:
            by_number.setdefault(number, []).append(row.id)
        source = row.metadata.get("source_document")
        if isinstance(source, str) and source:
            by_path[source] = row.id
    return AdrIndex(by_number, by_path)


def design_text(row: MemoryRow) -> str:
    """What a design memory says (content and its decision, context, consequences, rationale)."""
    return "\n".join([row.content, *(str(row.metadata[f]) for f in _TEXT_FIELDS if row.metadata.get(f))])


def citing_symbol(path_lines: Sequence[str], line: int, symbols: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The symbol a citation on ``line`` belongs to: the declaration a comment just above names,
    else the innermost symbol around the line; None at the file's top level."""
    text = path_lines[line - 1] if 0 < line <= len(path_lines) else ""
    if _COMMENT_LINE.match(text):
        below = [s for s in symbols if line < int(s.get("start_line") or 0) <= line + _NEXT_SYMBOL_LINES]
        if below:
            return min(below, key=lambda s: (int(s["start_line"]), int(s.get("end_line") or 0)))
    around = [s for s in symbols if int(s.get("start_line") or 0) <= line <= int(s.get("end_line") or 0)]
    if around:
        return min(around, key=lambda s: int(s.get("end_line") or 0) - int(s.get("start_line") or 0))
    return None

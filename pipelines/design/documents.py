"""The project's documents as structured records: requirement statements, ADRs and design
sections, prose chunks, and the requirement ids each part cites.

Pure functions over a document's text (Markdown, reStructuredText or plain text); nothing here
touches a store. ``pipelines.design.derive`` turns the records into memories and searchable chunks.

Formats understood:

* requirements as a heading (``### REQ-AUTH-001: Title`` + body, ``Priority:``/``Status:``
  lines), a table row (``| ID | Title | Priority | Status | Description |``) or a line
  (``- **REQ-AUTH-001**: text``);
* ADRs in Nygard's format (``# 1. Title``, ``## Status``, ``## Context``, ``## Decision``,
  ``## Consequences``) and in MADR (front matter ``status:``, ``## Context and Problem
  Statement``, ``## Decision Outcome`` with ``Chosen option: …``, ``### Consequences``);
* design documents (a path or title with design, architecture, spec or rfc): one design per
  second-level section;
* everything else: chunks per section, for search.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

MAX_CHUNK_CHARS = 2_000
DESIGN_PATH_WORDS = ("design", "architecture", "spec", "rfc")
ADR_PATH_WORDS = ("adr", "decisions", "decision-records")

_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
_FIELD_LINE = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*|__)?(priority|status)(?:\*\*|__)?\s*[:=]\s*(?:\*\*|__)?\s*([A-Za-z0-9 _-]+)", re.I)
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_ADR_TITLE_PREFIX = re.compile(r"^(?:ADR[-\s]?\d+[:.\s-]*|\d+[.:)]\s*|\d+\s*[-–—]\s*)", re.I)
_MARKUP = re.compile(r"(\*\*|__|`)")

PRIORITY_WORDS = {
    "critical": "Critical", "p0": "Critical", "blocker": "Critical",
    "high": "High", "p1": "High", "must": "High", "shall": "High",
    "medium": "Medium", "p2": "Medium", "should": "Medium", "normal": "Medium", "moderate": "Medium",
    "low": "Low", "p3": "Low", "could": "Low", "may": "Low", "nice": "Low", "optional": "Low",
}
REQUIREMENT_STATUS_WORDS = {
    "draft": "Draft", "proposed": "Draft", "new": "Draft", "open": "Draft",
    "approved": "Approved", "accepted": "Approved", "agreed": "Approved", "planned": "Approved",
    "implemented": "Implemented", "done": "Implemented", "complete": "Implemented", "completed": "Implemented",
    "verified": "Verified", "tested": "Verified", "validated": "Verified",
}
DESIGN_STATUS_WORDS = {
    "proposed": "Proposed", "draft": "Proposed",
    "accepted": "Accepted", "approved": "Accepted", "active": "Accepted",
    "deprecated": "Deprecated", "rejected": "Deprecated", "obsolete": "Deprecated",
    "superseded": "Superseded", "replaced": "Superseded",
}
_SECTION_ROLES = {
    "status": "status",
    "context": "context", "context and problem statement": "context", "problem statement": "context",
    "problem": "context", "background": "context",
    "decision": "decision", "decision outcome": "decision", "outcome": "decision",
    "consequences": "consequences", "positive consequences": "consequences",
    "negative consequences": "consequences", "implications": "consequences",
    "rationale": "rationale", "decision drivers": "rationale", "justification": "rationale",
    "considered options": "options", "options": "options", "alternatives": "options",
}


@dataclass
class Section:
    """A heading and the text under it (up to the next heading of any level)."""

    level: int
    title: str
    body: str
    start_line: int
    end_line: int


@dataclass
class RequirementStatement:
    """A requirement defined in a document."""

    requirement_id: str
    title: str
    description: str
    priority: str
    status: str
    source_document: str
    line: int


@dataclass
class DesignRecord:
    """An ADR or a design section."""

    key: str
    design_type: str
    title: str
    status: str
    content: str
    source_document: str
    line: int
    decision: str | None = None
    context: str | None = None
    consequences: str | None = None
    rationale: str | None = None
    related_requirements: list[str] = field(default_factory=list)


@dataclass
class DocChunk:
    """A searchable piece of prose."""

    key: str
    title: str
    text: str
    source_document: str
    start_line: int
    end_line: int
    requirement_ids: list[str] = field(default_factory=list)


@dataclass
class ParsedDocument:
    """What one document holds."""

    path: str
    title: str
    requirements: list[RequirementStatement] = field(default_factory=list)
    designs: list[DesignRecord] = field(default_factory=list)
    chunks: list[DocChunk] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class RequirementIds:
    """Finds requirement ids in text with the configured patterns (normalized to upper case)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        """Compile ``patterns`` (their first group, or the whole match, is the id)."""
        self.patterns = [re.compile(p, re.I) for p in patterns]

    def find(self, text: str) -> list[str]:
        """Every id in ``text``, in order of first appearance, without repeats."""
        found: dict[str, None] = {}
        for pattern in self.patterns:
            for match in pattern.finditer(text):
                found[(match.group(1) if match.groups() else match.group(0)).upper()] = None
        return list(found)

    def leading(self, text: str) -> tuple[str, str] | None:
        """An id that starts ``text`` (after list markers and emphasis), and the text after it."""
        stripped = _MARKUP.sub("", text).strip().lstrip("-*+ ").strip()
        for pattern in self.patterns:
            match = pattern.match(stripped)
            if match:
                rest = stripped[match.end():].lstrip(" :.-–—)]").strip()
                return (match.group(1) if match.groups() else match.group(0)).upper(), rest
        return None


def front_matter(text: str) -> tuple[dict[str, str], str, int]:
    """YAML-style ``key: value`` front matter (flat), the text after it, and its line count."""
    if not text.startswith("---"):
        return {}, text, 0
    lines = text.splitlines()
    for index in range(1, min(len(lines), 60)):
        if lines[index].strip() in ("---", "..."):
            fields = {}
            for line in lines[1:index]:
                key, sep, value = line.partition(":")
                if sep and key.strip() and not key.startswith((" ", "\t")):
                    fields[key.strip().lower()] = value.strip().strip("'\"")
            return fields, "\n".join(lines[index + 1:]), index + 1
    return {}, text, 0


def sections(text: str, *, line_offset: int = 0) -> list[Section]:
    """Split Markdown (ATX headings) or reStructuredText (underlined titles) into sections.

    Text before the first heading is a level-0 section titled ''. Fenced code is never a heading.
    """
    lines = text.splitlines()
    heads: list[tuple[int, int, str]] = []  # (line index, level, title)
    rst_levels: list[str] = []
    in_fence = False
    skip_next = False
    for index, line in enumerate(lines):
        if skip_next:
            skip_next = False
            continue
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        atx = _ATX.match(line)
        if atx:
            heads.append((index, len(atx.group(1)), atx.group(2).strip()))
            continue
        if index + 1 < len(lines) and line.strip() and not line.startswith((" ", "\t")):
            under = _RST_UNDERLINE.match(lines[index + 1])
            if under and len(lines[index + 1].strip()) >= len(line.strip()) * 0.6 and not line.lstrip().startswith("|"):
                char = under.group(1)
                if char not in rst_levels:
                    rst_levels.append(char)
                heads.append((index, rst_levels.index(char) + 1, line.strip()))
                skip_next = True
    result: list[Section] = []
    starts = [(0, 0, "")] + heads if not heads or heads[0][0] > 0 else heads
    for position, (index, level, title) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else len(lines)
        body_start = index + (0 if (level == 0) else 1)
        if level and index + 1 < len(lines) and _RST_UNDERLINE.match(lines[index + 1] or "") and not _ATX.match(lines[index]):
            body_start += 1
        body = "\n".join(lines[body_start:end]).strip("\n")
        if level == 0 and not body.strip():
            continue
        result.append(Section(level, _MARKUP.sub("", title).strip(), body, index + 1 + line_offset, max(end, index + 1) + line_offset))
    return result


def _plain(text: str) -> str:
    """Markdown emphasis and code ticks removed, whitespace collapsed."""
    return re.sub(r"\s+", " ", _MARKUP.sub("", text)).strip()


def _first_word_map(text: str, words: dict[str, str], default: str) -> str:
    for token in re.findall(r"[A-Za-z0-9]+", text.lower()):
        if token in words:
            return words[token]
    return default


def _fields_of(body: str) -> tuple[dict[str, str], str]:
    """``Priority:``/``Status:`` lines pulled out of a body, and the remaining text."""
    fields: dict[str, str] = {}
    kept = []
    for line in body.splitlines():
        match = _FIELD_LINE.match(line)
        if match and match.group(1).lower() not in fields:
            fields[match.group(1).lower()] = match.group(2).strip()
            continue
        kept.append(line)
    return fields, "\n".join(kept).strip()


def _sentence_title(text: str, limit: int = 90) -> str:
    first = re.split(r"(?<=[.!?])\s", _plain(text), maxsplit=1)[0].rstrip(".")
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _table_rows(body: str) -> list[tuple[int, list[str]]]:
    """Rows of the Markdown tables in ``body`` (line offset in body, cells), headers first."""
    rows = []
    for offset, line in enumerate(body.splitlines()):
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|") and not _TABLE_SEPARATOR.match(stripped):
            rows.append((offset, [cell.strip() for cell in stripped.strip("|").split("|")]))
        elif _TABLE_SEPARATOR.match(stripped):
            continue
        elif rows and rows[-1][1] != ["<end>"]:
            rows.append((offset, ["<end>"]))
    return rows


def _requirements_from_tables(path: str, section: Section, ids: RequirementIds) -> list[RequirementStatement]:
    found = []
    header: list[str] | None = None
    for offset, cells in _table_rows(section.body):
        if cells == ["<end>"]:
            header = None
            continue
        if header is None:
            header = [_plain(c).lower() for c in cells]
            continue
        id_col = next((i for i, c in enumerate(cells) if ids.leading(c) and ids.leading(c)[1] == ""), None)  # type: ignore[index]
        if id_col is None:
            continue
        requirement_id = ids.leading(cells[id_col])[0]  # type: ignore[index]
        by_name = {header[i] if i < len(header) else str(i): _plain(cells[i]) for i in range(len(cells))}

        def column(*names: str, _by_name: dict[str, str] = by_name) -> str:
            return next((v for k, v in _by_name.items() if any(n in k for n in names) and v), "")

        description = column("description", "requirement", "text", "statement", "detail")
        title = column("title", "name", "summary") or _sentence_title(description or requirement_id)
        found.append(
            RequirementStatement(
                requirement_id=requirement_id, title=title, description=description or title,
                priority=_first_word_map(column("priority", "importance"), PRIORITY_WORDS, "Medium"),
                status=_first_word_map(column("status", "state"), REQUIREMENT_STATUS_WORDS, "Approved"),
                source_document=path, line=section.start_line + 1 + offset,
            )
        )
    return found


def _requirements_from_lines(path: str, section: Section, ids: RequirementIds, taken: set[str]) -> list[RequirementStatement]:
    found = []
    lines = section.body.splitlines()
    for offset, line in enumerate(lines):
        if line.strip().startswith("|"):
            continue
        lead = ids.leading(line)
        if lead is None or lead[0] in taken or not lead[1]:
            continue
        requirement_id, text = lead
        continuation = []
        for follow in lines[offset + 1:]:  # an indented continuation belongs to the item
            if follow.startswith(("  ", "\t")) and follow.strip() and ids.leading(follow) is None:
                continuation.append(follow.strip())
            else:
                break
        full = " ".join([text, *continuation])
        fields, rest = _fields_of(full.replace(" Priority:", "\nPriority:").replace(" Status:", "\nStatus:"))
        found.append(
            RequirementStatement(
                requirement_id=requirement_id, title=_sentence_title(rest), description=_plain(rest),
                priority=_first_word_map(fields.get("priority", "") or rest, PRIORITY_WORDS, "Medium") if fields.get("priority") else _keyword_priority(rest),
                status=_first_word_map(fields.get("status", ""), REQUIREMENT_STATUS_WORDS, "Approved"),
                source_document=path, line=section.start_line + 1 + offset,
            )
        )
        taken.add(requirement_id)
    return found


def _keyword_priority(text: str) -> str:
    """RFC 2119 wording as a priority when none is stated: MUST/SHALL high, SHOULD medium, MAY low."""
    upper = f" {text} "
    if re.search(r"\b(MUST|SHALL|REQUIRED)\b", upper):
        return "High"
    if re.search(r"\b(SHOULD|RECOMMENDED)\b", upper):
        return "Medium"
    if re.search(r"\b(MAY|OPTIONAL)\b", upper):
        return "Low"
    return "Medium"


def _is_adr(path: str, fm: dict[str, str], secs: list[Section]) -> bool:
    parts = [p.lower() for p in PurePosixPath(path).parts]
    if any(word in part for part in parts[:-1] for word in ADR_PATH_WORDS) or re.match(r"^(adr[-_]?)?\d{3,4}[-_]", parts[-1]):
        return any(_SECTION_ROLES.get(s.title.lower()) == "decision" for s in secs) or "status" in fm
    roles = {_SECTION_ROLES.get(s.title.lower()) for s in secs}
    return "decision" in roles and ("status" in roles or "status" in fm or "context" in roles)


def _adr(path: str, fm: dict[str, str], secs: list[Section], ids: RequirementIds, text: str) -> DesignRecord:
    title_section = next((s for s in secs if s.level == 1), None) or next((s for s in secs if s.level), None)
    title = fm.get("title") or (title_section.title if title_section else PurePosixPath(path).stem)
    title = _ADR_TITLE_PREFIX.sub("", title).strip() or title
    parts: dict[str, list[str]] = {}
    current_role: str | None = None
    current_level = 0
    for section in secs:
        role = _SECTION_ROLES.get(section.title.lower().rstrip(":"))
        if role is not None:
            current_role, current_level = role, section.level
        elif section.level <= current_level:
            current_role = None
        if current_role is not None and (role is not None or section.level > current_level):
            body = section.body if role is not None else f"{section.title}\n{section.body}"
            parts.setdefault(current_role, []).append(body.strip())
    status_text = fm.get("status") or " ".join(parts.get("status", []))
    if not status_text:
        status_fields, _ = _fields_of(text)
        status_text = status_fields.get("status", "")
    status = _first_word_map(status_text, DESIGN_STATUS_WORDS, "Accepted")
    joined = {role: "\n\n".join(p for p in chunks if p) or None for role, chunks in parts.items()}
    content_parts = [title]
    for role, label in (("decision", "Decision"), ("context", "Context"), ("consequences", "Consequences")):
        if joined.get(role):
            content_parts.append(f"{label}: {joined[role]}")
    if len(content_parts) == 1:
        content_parts.append(text.strip()[:4_000])
    return DesignRecord(
        key=path, design_type="ADR", title=title, status=status, content="\n\n".join(content_parts),
        source_document=path, line=title_section.start_line if title_section else 1,
        decision=joined.get("decision"), context=joined.get("context"), consequences=joined.get("consequences"),
        rationale=joined.get("rationale"), related_requirements=ids.find(text),
    )


def _is_design_document(path: str, title: str) -> bool:
    name = f"{PurePosixPath(path).stem} {title}".lower()
    return any(word in name for word in DESIGN_PATH_WORDS) or any(
        word in part.lower() for part in PurePosixPath(path).parts[:-1] for word in ("design", "architecture")
    )


def _chunks(path: str, secs: list[Section], ids: RequirementIds, doc_title: str) -> list[DocChunk]:
    chunks: list[DocChunk] = []
    for section in secs:
        text = section.body.strip()
        if not text:
            continue
        title = section.title or doc_title
        pieces: list[str] = []
        current = ""
        for paragraph in re.split(r"\n\s*\n", text):
            if current and len(current) + len(paragraph) > MAX_CHUNK_CHARS:
                pieces.append(current)
                current = ""
            current = f"{current}\n\n{paragraph}" if current else paragraph
            while len(current) > MAX_CHUNK_CHARS:
                pieces.append(current[:MAX_CHUNK_CHARS])
                current = current[MAX_CHUNK_CHARS:]
        if current.strip():
            pieces.append(current)
        for number, piece in enumerate(pieces):
            chunks.append(
                DocChunk(
                    key=f"{path}#{section.start_line}.{number}", title=title, text=piece.strip(), source_document=path,
                    start_line=section.start_line, end_line=section.end_line, requirement_ids=ids.find(piece),
                )
            )
    return chunks


def _own_text(body: str, ids: RequirementIds) -> str:
    """A heading requirement's own text: up to a table, a code fence or another requirement."""
    kept = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(("|", "```", "~~~")) or (stripped and ids.leading(stripped) is not None):
            break
        kept.append(line)
    return "\n".join(kept)


def parse_document(path: str, text: str, ids: RequirementIds) -> ParsedDocument:
    """Everything a document holds: requirements, ADR or design records, chunks, citations.

    Args:
        path: Repo-relative path (decides ADR and design detection together with the text).
        text: The document's text.
        ids: The requirement id matcher (from settings).

    Returns:
        The parsed document; a requirement defined twice in it is kept once, with a note.
    """
    fm, body, fm_lines = front_matter(text)
    secs = sections(body, line_offset=fm_lines)
    doc_title = next((s.title for s in secs if s.level == 1), "") or fm.get("title", "") or PurePosixPath(path).stem
    doc = ParsedDocument(path=path, title=doc_title)
    taken: set[str] = set()
    for section in secs:  # heading-defined requirements
        lead = ids.leading(section.title) if section.level else None
        if lead is None:
            continue
        requirement_id, title_rest = lead
        fields, description = _fields_of(_own_text(section.body, ids))
        description = _plain(description)
        if requirement_id in taken:
            doc.notes.append(f"{path}:{section.start_line}: {requirement_id} is defined again; the first definition is kept")
            continue
        taken.add(requirement_id)
        doc.requirements.append(
            RequirementStatement(
                requirement_id=requirement_id, title=title_rest or _sentence_title(description or requirement_id),
                description=description or title_rest or requirement_id,
                priority=_first_word_map(fields["priority"], PRIORITY_WORDS, "Medium") if "priority" in fields else _keyword_priority(section.body),
                status=_first_word_map(fields.get("status", ""), REQUIREMENT_STATUS_WORDS, "Approved"),
                source_document=path, line=section.start_line,
            )
        )
    for section in secs:
        for requirement in _requirements_from_tables(path, section, ids):
            if requirement.requirement_id in taken:
                continue
            taken.add(requirement.requirement_id)
            doc.requirements.append(requirement)
        doc.requirements.extend(_requirements_from_lines(path, section, ids, taken))
    if _is_adr(path, fm, secs):
        doc.designs.append(_adr(path, fm, secs, ids, text))
    elif _is_design_document(path, doc_title):
        for section in secs:
            if section.level == 0 or (section.level == 1 and not section.body.strip()):
                continue
            if ids.leading(section.title):
                continue
            body = section.body.strip()
            if not body:
                continue
            design_type = "Specification" if "spec" in f"{path} {doc_title}".lower() else "Architecture"
            title = f"{doc_title} — {section.title}" if section.title and section.title != doc_title else doc_title
            doc.designs.append(
                DesignRecord(
                    key=f"{path}#{section.title or section.start_line}", design_type=design_type, title=title,
                    status=_first_word_map(fm.get("status", ""), DESIGN_STATUS_WORDS, "Accepted"),
                    content=f"{title}\n\n{body}"[:20_000], source_document=path, line=section.start_line,
                    related_requirements=ids.find(body),
                )
            )
    else:
        doc.chunks = _chunks(path, secs, ids, doc_title)
    defined = {r.requirement_id for r in doc.requirements}
    doc.citations = [i for i in ids.find(text) if i not in defined]
    return doc

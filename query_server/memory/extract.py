"""memory_extract (REQ-MEM-FN-021): typed memories proposed from a transcript, a diff, a commit message
or free text — each with a confidence and its source span — checked against what is stored (a stored
memory that already says it makes it a duplicate; one it reverses is flagged), and stored on request.

How, with the local model only (no LLM):

1. The text is cut by its kind: conversation turns (``User:``/``Assistant:``, or a Claude Code JSONL
   transcript read as the hooks read it), unified diff hunks (added prose, comments and function
   definitions, with their file and line), a commit's subject, body and trailers, or free text's
   sentences and bullets. Questions, chit-chat, code and tool chatter are left out.
2. Each segment is classified by clear cues (decision language → design; must/shall/REQ ids →
   requirements; "I prefer / always / don't" said by the user → user_preference; "N passed, M failed",
   FAILED test ids, flaky → test_history; gotcha / turns out / convention → code_pattern; a diff adding a
   documented function → function). The embedding's similarity to a few prototypes of each type only
   strengthens weak cues or, alone, gives a low-confidence candidate: the local model measures topic,
   not intent.
3. Each candidate is compared with the stored memories of its type in every scope (identical content,
   or a vector at or above ``memory_conflict_threshold`` → ``duplicate_of``) and with the stored ones
   on the same subject that it contradicts (a negated statement, an option it rejects that the stored
   one chose, or the reverse → ``conflicts_with``).
4. ``commit`` stores the non-duplicates through ``memory_bulk_add``: one ledger transaction, all or none.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from query_server.memory.stores import MemoryStores
from query_server.memory.writes import MemoryWrites
from query_server.paging import ToolError
from resources.memory.ledger import content_hash
from resources.memory.projection import EMBED_CHARS
from resources.schemas.memory import (
    ExtractedMemory,
    MemoryAddInput,
    MemoryBulkAddInput,
    MemoryExtractInput,
    MemoryExtractResult,
)
from resources.schemas.memory.extract import QUOTE_CHARS
from resources.transcripts import conversation_turns
from resources.vectors.store import PayloadFilter

log = structlog.get_logger("codemem.memory")

MIN_SEGMENT_CHARS = 15
MAX_SEGMENT_CHARS = 1_500
MAX_EMBEDDED = 400
"""Segments embedded per call at most (cue-bearing ones first): bounds the cost of a long transcript."""
CONFLICT_SIMILARITY = 0.5
"""Cosine similarity from which a stored memory is taken to be on the same subject (then checked for
a contradiction)."""
PROTOTYPE_ONLY_CAP = 0.45
"""The most confidence a segment gets from prototype similarity alone (below the default
min_confidence: the local model measures topic, not whether something was decided)."""

# -- cues ----------------------------------------------------------------------------------------

_I = re.IGNORECASE


@dataclass(frozen=True)
class Cue:
    """Words that mark a segment as one memory type, with how sure they make it."""

    memory_type: str
    weight: float
    pattern: re.Pattern[str]
    roles: tuple[str | None, ...] | None = None
    """Whose words it must be (``user``, ``assistant``, ``None`` for text without a speaker); None: anyone's."""


def _cue(memory_type: str, weight: float, pattern: str, roles: tuple[str | None, ...] | None = None, flags: int = _I) -> Cue:
    return Cue(memory_type, weight, re.compile(pattern, flags), roles)


CUES: tuple[Cue, ...] = (
    # decisions → design
    _cue("design", 0.85, r"\b(we|i|team|they)\s+(have\s+|had\s+|finally\s+)?(decided|chose|agreed|settled|opted)\b|\bdecision\s*:|\bdecided (to|on|that|against)\b"),
    _cue("design", 0.8, r"\b(going forward|from now on|henceforth)\b", ("assistant", None)),
    _cue("design", 0.8, r"\b(we|we'll|we will|we're going to|we are going to|let's|the team will)\s*(now\s+)?(use|go with|switch to|adopt|stick with|move to|migrate to|standardi[sz]e on|keep using|rely on)\b"),
    _cue("design", 0.75, r"\b(use[sd]?|using|switch(ed|ing)? to|adopt(ed)?|mov(e|ed|ing) to|migrat(e|ed|ing) to|replac(e|ed|ing) \S+ with|go(ing)? with)\b.{0,80}\b(instead of|rather than)\b"),
    _cue("design", 0.75, r"\bBREAKING CHANGE\b|\bADR[- ]?\d+\b|\bno longer (use|support|rel(y|ies) on)\b", flags=0),
    _cue("design", 0.65, r"\b(i'll|i will|i'm going to)\s+(use|go with|switch to|adopt)\b(?!.*\b(tool|command|grep|read|edit)\b)", ("assistant",)),
    # requirements
    _cue("requirements", 0.9, r"\bREQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,}\b.{0,200}\b(must|shall|required)\b|\b(must|shall)\b.{0,200}\bREQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,}\b", flags=0),
    _cue("requirements", 0.85, r"^\W*(requirement|REQ-[A-Z0-9]+(-[A-Z0-9]+)*-\d{3,})\s*[:—-]"),
    _cue("requirements", 0.75, r"\b(must|shall)( not| never| always)?\b(?!.*\b(first|now)\b)"),
    _cue("requirements", 0.6, r"\b(is|are) required to\b|\bmust be (able|supported)\b"),
    # preferences, in the user's own words (or reported by the assistant)
    _cue("user_preference", 0.85, r"\bI\s+(really\s+|strongly\s+|generally\s+|always\s+)?(prefer|like|want|'d like|would like|'d rather|would rather|hate|dislike|don't like|do not like)\b", ("user", None)),
    _cue("user_preference", 0.85, r"\b(please|pls)\s+(always|never|don't|do not|stop|avoid|keep|use|write|make sure)\b|\bmy preference\b|\bfor me\b", ("user",)),
    _cue("user_preference", 0.8, r"^\W*(always|never|don't|do not|stop|avoid)\b", ("user",)),
    _cue("user_preference", 0.75, r"\b(the user|you)\s+(prefers?|wants?|likes?|asked (me )?to always|asked me never)\b", ("assistant",)),
    # test results
    _cue("test_history", 0.85, r"\b\d+\s+(tests?\s+)?(passed|failed|failing|errors?|skipped|xfailed)\b|\bFAILED\s+\S+::\S+|\b(PASSED|FAILED|ERROR)\b\s+\S+\.py", flags=0),
    _cue("test_history", 0.85, r"\b\d+\s+(tests?\s+)?(passed|failed|failing|errors?)\b"),
    _cue("test_history", 0.8, r"\bflaky\b|\btest_\w+\s+(now\s+)?(fails|failed|passes|passed|is failing|was failing|times out|timed out)\b|\b(all|the)\s+(\w+\s+)?tests?\s+(now\s+)?(pass|passed|are green|fail|failed|are failing)\b|\bfixed (the )?(failing|flaky|broken) tests?\b"),
    # gotchas and patterns
    _cue("code_pattern", 0.8, r"\b(gotcha|pitfall|footgun|caveat|watch out|beware|be careful|careful:|the trick is|turns out|it turned out|lesson learned)\b"),
    _cue("code_pattern", 0.7, r"\b(the|our|a|this)\s+(convention|pattern|idiom)\s+(is|here is|we use|for)\b|\b(convention|pattern|idiom)\s*:"),
    _cue("code_pattern", 0.6, r"\b(always|never)\s+(call|use|wrap|put|import|pass|close|commit|await|mock)\b", ("assistant", None)),
    _cue("code_pattern", 0.5, r"\b(pattern|convention|idiom)\b"),
)

HEADING_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(decisions?|adr|architecture|design)\b", _I), "design"),
    (re.compile(r"\b(requirements?)\b", _I), "requirements"),
    (re.compile(r"\b(preferences?)\b", _I), "user_preference"),
    (re.compile(r"\b(gotchas?|pitfalls?|lessons?|learnings?|patterns?|conventions?)\b", _I), "code_pattern"),
    (re.compile(r"\b(test results?|tests?)\b", _I), "test_history"),
)
"""A Markdown heading (or a commit trailer key) that says what the lines under it are."""

PROTOTYPES: dict[str, tuple[str, ...]] = {
    "design": (
        "We decided to use one library instead of another for this part of the system.",
        "Design decision: store the data in this database and accept the trade-off.",
        "The architecture choice is that this service owns the queue.",
    ),
    "requirements": (
        "The system must respond within two seconds.",
        "The API shall reject requests without a valid token.",
        "Every export is required to include a checksum.",
    ),
    "user_preference": (
        "I prefer short functions and descriptive names.",
        "Please always write type hints for me.",
        "Don't add comments that restate the code.",
    ),
    "test_history": (
        "12 tests passed and 1 failed in the test suite.",
        "The flaky test is fixed now.",
        "test_login fails with a timeout error.",
    ),
    "code_pattern": (
        "Gotcha: this call deadlocks when used inside a transaction.",
        "The convention here is to wrap every handler in a retry decorator.",
        "Turns out the cache must be cleared before reloading the config.",
    ),
}

_QUESTION = re.compile(r"\?\s*[)\"'`]*$|^\W*(should we|shall we|can you|could you|would you|do you|did you|what|why|how|which|is it|are there|is there)\b", _I)
_CHITCHAT = re.compile(r"^\W*(thanks|thank you|ok(ay)?|great|sounds good|perfect|cool|nice|yes|no|sure|got it|lgtm|done|hi|hello|hey|good (morning|job))\b", _I)
_TOOL_NOISE = re.compile(
    r"^\W*(let me|now let me|let's (look|check|see|run|read|start|open)|i'll (now )?(read|look|check|run|open|search|start|explore|examine|take a look|create|write|update|edit|fix|add|implement)|"
    r"i('m| am) going to (read|look|check|run)|now i('ll| will)|running|reading|searching|looking at|here('s| is) (the|a|what)|"
    r"the file has been|file created|perfect!|great!|excellent!|done[.!]?$)", _I,
)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'`(\[]?[A-Z0-9])")
_TURN = re.compile(r"^(?:\*\*)?(User|Human|Assistant|Claude|AI|You)(?:\*\*)?\s*:\s?", re.MULTILINE)
_DIFF = re.compile(r"^(diff --git |--- \S.*\n\+\+\+ \S|@@ -\d+(,\d+)? \+\d+(,\d+)? @@)", re.MULTILINE)
_COMMIT_HEADER = re.compile(r"^commit [0-9a-f]{7,40}\b", re.MULTILINE)
_CONVENTIONAL = re.compile(r"^(feat|fix|chore|docs|refactor|perf|test|tests|build|ci|style|revert)(\([^)]*\))?!?:\s", _I)
_TRAILER = re.compile(r"^([A-Z][A-Za-z-]+(?: [A-Z][A-Za-z-]+)?):\s+(.+)$")
_NOISE_TRAILERS = {"signed-off-by", "co-authored-by", "reviewed-by", "acked-by", "tested-by", "change-id", "cc", "author", "date", "merge"}
_COMMENT = re.compile(r"^\s*(#|//|/\*+|\*|--|<!--|;;?)\s?")
_DEF = re.compile(
    r"^\s*(?:async\s+)?(?:def|function|func|fn|pub\s+fn|public\s+\w+|private\s+\w+)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(.*"
)
_PROSE_EXT = (".md", ".markdown", ".rst", ".txt", ".adoc")
_LANGUAGES = {".py": "python", ".js": "javascript", ".ts": "typescript", ".tsx": "typescript", ".go": "go", ".rs": "rust",
              ".java": "java", ".rb": "ruby", ".c": "c", ".cc": "cpp", ".cpp": "cpp", ".h": "c", ".cs": "csharp", ".kt": "kotlin",
              ".sh": "bash", ".sql": "sql"}
_REQ_ID = re.compile(r"\bREQ-[A-Z0-9]+(?:-[A-Z0-9]+)*-\d{3,}\b")
_TEST_ID = re.compile(r"\b([\w/.-]+\.py)::([\w\[\]-]+(?:::[\w\[\]-]+)*)|\b(test_\w+)\b")
_TEST_FILE = re.compile(r"\b((?:[\w.-]+/)*test[\w.-]*\.\w+)\b")
_INLINE_CODE = re.compile(r"`([^`\n]{1,200})`")
_STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "for", "with", "by", "from", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "we", "i", "you", "they", "he", "she", "our", "my", "your", "their", "us", "me", "will", "would", "should", "shall", "must", "can", "could", "do", "does", "did", "not", "no", "never", "always", "use", "using", "used", "instead", "rather", "than", "over", "decided", "decide", "chose", "choose", "prefer", "going", "forward", "now", "from", "then", "so", "also", "just", "please"]
)
_NEGATION = re.compile(r"\b(not|never|no longer|don't|do not|doesn't|does not|won't|will not|without|stop(ped)? using|avoid|drop(ped)?)\b", _I)
_CHOSEN = re.compile(
    r"\b(?:use|uses|using|chose|choose|adopt|adopted|go with|going with|switch(?:ed)? to|settled on|stick with|keep using|"
    r"move(?:d)? to|migrate(?:d)? to|standardi[sz]e on|rely on|with)\s+(?:the\s+|a\s+|an\s+)?([\w.+#/-]+)", _I,
)
_REJECTED = re.compile(
    r"\b(?:instead of|rather than|over|no longer use|not use|stop using|stopped using|drop|dropped|replac(?:e|ed|ing)|away from|"
    r"moved? off)\s+(?:the\s+|a\s+|an\s+|using\s+)?([\w.+#/-]+)", _I,
)


# -- segments ------------------------------------------------------------------------------------


@dataclass
class Segment:
    """A piece of the text that may say one memory: its words, its span and where it was said."""

    text: str
    start: int
    end: int
    role: str | None = None
    kind: str = "prose"
    """``prose``, ``subject`` (a commit's first line), ``trailer``, ``comment`` (added in a diff) or ``def``."""
    hint: str | None = None
    """The memory type its heading or trailer names."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What its source says about it (a diff's file and lines)."""


def detect_source(text: str) -> str:
    """The kind of ``text``: ``transcript``, ``diff``, ``commit`` or ``text``."""
    head = text.lstrip()[:4_000]
    first = head.split("\n", 1)[0].strip()
    if first.startswith("{"):
        try:
            entry = json.loads(first)
        except ValueError:
            entry = None
        if isinstance(entry, dict) and ("message" in entry or entry.get("type") in ("user", "assistant", "summary")):
            return "transcript"
    if _DIFF.search(head):
        return "diff"
    if len(_TURN.findall(head)) >= 2:
        return "transcript"
    if _COMMIT_HEADER.match(head) or _CONVENTIONAL.match(first):
        return "commit"
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(first) <= 100 and lines and any(_TRAILER.match(line.strip()) and line.split(":")[0].lower() in _NOISE_TRAILERS for line in lines[-4:]):
        return "commit"
    return "text"


def _spans(body: str, base: int) -> Iterable[tuple[int, int, str | None]]:
    """Sentences and bullets of prose: ``(start, end, heading hint)`` offsets into the whole text
    (``base`` is the offset of ``body``); code fences and headings are left out."""
    in_fence = False
    hint: str | None = None
    block: list[tuple[int, int]] = []  # (start, end) of the lines of one paragraph or bullet

    def flush() -> Iterable[tuple[int, int, str | None]]:
        if not block:
            return
        start, end = block[0][0], block[-1][1]
        chunk = body[start:end]
        if _BULLET.match(chunk):
            yield base + start, base + end, hint
            return
        cursor = 0
        for match in _SENTENCE_END.finditer(chunk):
            yield base + start + cursor, base + start + match.start(), hint
            cursor = match.end()
        yield base + start + cursor, base + end, hint

    offset = 0
    for line in body.split("\n"):
        start, end, offset = offset, offset + len(line), offset + len(line) + 1
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            yield from flush()
            block = []
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        if not stripped or heading:
            yield from flush()
            block = []
            if heading:
                hint = next((kind for pattern, kind in HEADING_HINTS if pattern.search(heading.group(1))), None)
            continue
        if _BULLET.match(line) and block:
            yield from flush()
            block = []
        block.append((start, end))
    yield from flush()


def _prose(text: str, body: str, base: int, role: str | None = None, kind: str = "prose") -> list[Segment]:
    segments = []
    for start, end, hint in _spans(body, base):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            segments.append(Segment(text[start:end], start, end, role, kind, hint))
    return segments


def _turn_segments(text: str) -> list[Segment]:
    """``User:`` / ``Assistant:`` turns."""
    marks = list(_TURN.finditer(text))
    segments = []
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        role = "user" if mark.group(1).lower() in ("user", "human", "you") else "assistant"
        segments += _prose(text, text[mark.end():end], mark.end(), role)
    return segments


def _jsonl_segments(text: str) -> list[Segment]:
    """A Claude Code JSONL transcript's conversation; a segment's span is its words inside the JSON
    line when they are written there as they read, else the whole line."""
    segments = []
    for role, body, line_start, line_end in conversation_turns(text):
        line = text[line_start:line_end]
        for piece in _prose(body, body, 0, role):
            for ascii_only in (False, True):
                encoded = json.dumps(piece.text, ensure_ascii=ascii_only)[1:-1]
                at = line.find(encoded)
                if at >= 0:
                    piece.start, piece.end = line_start + at, line_start + at + len(encoded)
                    break
            else:
                piece.start, piece.end = line_start, line_end
            segments.append(piece)
    return segments


def _diff_segments(text: str) -> list[Segment]:
    """Added lines of each hunk: prose files sentence by sentence, comments in code, and function
    definitions (with their new line numbers)."""
    segments: list[Segment] = []
    path: str | None = None
    new_line = 0
    run: list[tuple[int, int, int, str]] = []  # added lines: (start, end, new line number, text)

    def flush() -> None:
        if not run or path is None:
            run.clear()
            return
        language = _LANGUAGES.get(_ext(path))
        if path.lower().endswith(_PROSE_EXT):
            body = "\n".join(line for _, _, _, line in run)
            for seg in _prose(body, body, 0):
                seg.start, seg.end = _map_offsets(run, seg.start, seg.end)
                seg.text = " ".join(seg.text.split())
                seg.facts = {"file_path": path}
                segments.append(seg)
        else:
            comment: list[tuple[int, int, int, str]] = []
            for index, (start, end, number, line) in enumerate(run):
                marker = _COMMENT.match(line)
                if marker and line.strip() not in ("*/", "-->"):
                    comment.append((start + marker.end(), end, number, line[marker.end():].rstrip(" */->")))
                    continue
                _comment_segment(segments, comment, path)
                comment = []
                definition = _DEF.match(line)
                if definition:
                    doc = _docstring(run[index + 1:])
                    last = run[-1][2]
                    segments.append(Segment(
                        line.strip(), start, end, kind="def", facts={
                            "file_path": path, "name": definition.group(1), "signature": line.strip().rstrip(":{ "),
                            "start_line": number, "end_line": max(number, last), "language": language or "unknown", "docstring": doc,
                        },
                    ))
            _comment_segment(segments, comment, path)
        run.clear()

    offset = 0
    for line in text.split("\n"):
        start, offset = offset, offset + len(line) + 1
        if line.startswith("+++ "):
            flush()
            target = line[4:].strip().split("\t")[0]
            path = None if target == "/dev/null" else target.removeprefix("b/")
        elif line.startswith(("--- ", "diff --git ")):
            flush()
        elif line.startswith("@@"):
            flush()
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)", line)
            new_line = int(match.group(1)) if match else 0
        elif line.startswith("+"):
            run.append((start + 1, start + len(line), new_line, line[1:]))
            new_line += 1
        else:
            flush()
            if line.startswith(" "):
                new_line += 1
    flush()
    return segments


def _ext(path: str) -> str:
    dot = path.rfind(".")
    return path[dot:].lower() if dot > path.rfind("/") else ""


def _map_offsets(run: Sequence[tuple[int, int, int, str]], start: int, end: int) -> tuple[int, int]:
    """Offsets into the joined added lines of ``run`` → offsets into the diff."""
    def one(at: int, closing: bool) -> int:
        cursor = 0
        for line_start, line_end, _, line in run:
            if at <= cursor + len(line) and (not closing or at > cursor or cursor == 0):
                return line_start + min(at - cursor, line_end - line_start)
            cursor += len(line) + 1
        return run[-1][1]

    return one(start, False), one(end, True)


def _comment_segment(segments: list[Segment], comment: list[tuple[int, int, int, str]], path: str) -> None:
    if not comment:
        return
    words = " ".join(part.strip() for _, _, _, part in comment).strip()
    if words:
        segments.append(Segment(words, comment[0][0], comment[-1][1], kind="comment", facts={"file_path": path, "line": comment[0][2]}))


def _docstring(after: Sequence[tuple[int, int, int, str]]) -> str | None:
    """The docstring (or leading comment) of a function whose body follows in ``after``."""
    for _, _, _, line in after[:3]:
        stripped = line.strip()
        if stripped.startswith(('"""', "'''", "///", "//", "#", "/**", "*")):
            words = stripped.strip("\"'/#* ")
            if len(words) >= 10:
                return words
    return None


def _commit_segments(text: str) -> list[Segment]:
    """A commit message (or ``git log`` output): the subject, the body's sentences and bullets, and
    trailers other than sign-offs."""
    segments: list[Segment] = []
    offset = 0
    subject_seen = False
    body_lines: list[tuple[int, str]] = []

    def flush_body() -> None:
        if body_lines:
            start = body_lines[0][0]
            end = body_lines[-1][0] + len(body_lines[-1][1])
            segments.extend(_prose(text, text[start:end], start))
            body_lines.clear()

    for line in text.split("\n"):
        start, offset = offset, offset + len(line) + 1
        stripped = line.strip()
        if re.match(r"^(commit [0-9a-f]{7,40}|Author:|Date:|Merge:)", line):
            flush_body()
            subject_seen = False
            continue
        if not subject_seen:
            if stripped:
                subject_seen = True
                lead = start + len(line) - len(line.lstrip())
                segments.append(Segment(stripped, lead, lead + len(stripped), kind="subject"))
            continue
        trailer = _TRAILER.match(stripped)
        if trailer and (trailer.group(1).lower() in _NOISE_TRAILERS or trailer.group(1).isupper() or "-" in trailer.group(1)
                        or trailer.group(1) in ("Decision", "Refs", "Fixes", "Closes", "Requirement", "Gotcha", "Tests", "Preference")):
            flush_body()
            key = trailer.group(1)
            if key.lower() not in _NOISE_TRAILERS:
                value_at = start + line.index(trailer.group(2))
                hint = next((kind for pattern, kind in HEADING_HINTS if pattern.search(key)), None)
                if key.upper() == "BREAKING CHANGE":
                    hint = "design"
                segments.append(Segment(f"{key}: {trailer.group(2).strip()}", value_at, value_at + len(trailer.group(2).rstrip()), kind="trailer", hint=hint))
            continue
        body_lines.append((start, line))
    flush_body()
    return segments


def segments_of(text: str, source: str) -> list[Segment]:
    """``text`` cut into the segments its kind has."""
    if source == "transcript":
        return _jsonl_segments(text) if text.lstrip().startswith("{") else _turn_segments(text)
    if source == "diff":
        return _diff_segments(text)
    if source == "commit":
        return _commit_segments(text)
    return _prose(text, text, 0)


# -- classification ------------------------------------------------------------------------------


def _plain(segment: Segment) -> str:
    words = _BULLET.sub("", segment.text, count=1)
    return " ".join(words.replace("**", "").split())


def is_noise(segment: Segment) -> bool:
    """Questions, chit-chat, tool chatter, code and fragments: nothing to remember."""
    words = _plain(segment)
    if segment.kind == "def":
        return False
    if len(words) < MIN_SEGMENT_CHARS or len(words) > MAX_SEGMENT_CHARS:
        return True
    if _QUESTION.search(words) or _TOOL_NOISE.match(words):
        return True
    if _CHITCHAT.match(words) and len(words) < 60:
        return True
    letters = sum(ch.isalpha() or ch.isspace() for ch in words)
    return letters < 0.6 * len(words) or len(words.split()) < 3


def cue_scores(segment: Segment) -> dict[str, tuple[float, str]]:
    """Each memory type's strongest cue in the segment: ``{type: (weight, cue words)}``."""
    words = _plain(segment)
    scores: dict[str, tuple[float, str]] = {}
    for cue in CUES:
        if cue.roles is not None and segment.role not in cue.roles:
            continue
        match = cue.pattern.search(words)
        if match and cue.weight > scores.get(cue.memory_type, (0.0, ""))[0]:
            scores[cue.memory_type] = (cue.weight, match.group(0).strip().lower()[:40])
    if segment.hint and segment.kind != "subject":
        weight, cue = scores.get(segment.hint, (0.0, ""))
        scores[segment.hint] = (max(weight + 0.1, 0.7), cue or "heading")
    if segment.kind == "subject":
        conventional = _CONVENTIONAL.match(words)
        if conventional and conventional.group(1).lower() in ("test", "tests") and "test_history" not in scores:
            scores.setdefault("code_pattern", (0.0, ""))
    return scores


_PROTOTYPE_VECTORS: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}
"""The embedded prototypes, by embedder model id."""


class Prototypes:
    """The embedded prototype sentences of each type, computed once per embedder."""

    @classmethod
    def of(cls, embedder: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(types, vectors, owner index of each vector)``."""
        key = str(getattr(embedder, "model_id", id(embedder)))
        if key not in _PROTOTYPE_VECTORS:
            types = list(PROTOTYPES)
            texts = [text for kind in types for text in PROTOTYPES[kind]]
            owners = np.array([i for i, kind in enumerate(types) for _ in PROTOTYPES[kind]])
            _PROTOTYPE_VECTORS[key] = (types, np.asarray(embedder.embed_documents(texts), dtype=np.float32), owners)
        return _PROTOTYPE_VECTORS[key]


def _similarities(vector: np.ndarray, prototypes: tuple[list[str], np.ndarray, np.ndarray]) -> dict[str, float]:
    types, vectors, owners = prototypes
    sims = vectors @ vector
    return {kind: float(sims[owners == i].max()) for i, kind in enumerate(types)}


def decide_type(segment: Segment, scores: dict[str, tuple[float, str]], sims: dict[str, float] | None) -> tuple[str, float, str] | None:
    """The segment's memory type, confidence and cue — or None: nothing to remember."""
    if segment.kind == "def":
        facts = segment.facts
        if facts.get("docstring") and facts.get("language") != "unknown":
            return "function", 0.6, "documented function added"
        return None
    ranked = sorted(((weight, kind, cue) for kind, (weight, cue) in scores.items() if weight > 0), reverse=True)
    if ranked:
        weight, kind, cue = ranked[0]
        if sims:
            best = max(sims, key=lambda k: sims[k])
            if weight < 0.7 and best == kind and sims[kind] >= 0.4:
                weight = min(0.75, weight + 0.15)  # a weak cue the model agrees with
            elif len(ranked) > 1 and ranked[1][0] == weight and sims.get(ranked[1][1], 0) > sims.get(kind, 0):
                weight, kind, cue = ranked[1]  # a tie: the type the text is closer to
        if segment.kind == "subject" and not segment.hint:
            weight -= 0.05  # a subject line is terse: a bit less sure
        return kind, round(min(weight, 0.95), 3), cue
    if sims:
        best = max(sims, key=lambda k: sims[k])
        second = max((v for k, v in sims.items() if k != best), default=0.0)
        if best == "user_preference" and segment.role == "assistant":
            return None
        if sims[best] >= 0.55 and sims[best] - second >= 0.15:
            return best, round(min(PROTOTYPE_ONLY_CAP, 0.2 + sims[best] * 0.4), 3), "similar to " + best.replace("_", " ")
    return None


# -- the memory a candidate would be -------------------------------------------------------------


def _title(words: str) -> str:
    words = re.sub(r"^\W*(decision|gotcha|note|requirement|preference|convention|pattern|breaking change)\s*[:—-]\s*", "", words, flags=_I)
    words = words[:1].upper() + words[1:]
    if len(words) <= 80:
        return words.rstrip(".")
    cut = words[:80].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def _slug(words: str, limit: int = 4) -> str:
    kept = [w for w in re.findall(r"[a-z0-9]+", words.lower()) if w not in _STOPWORDS and len(w) > 1]
    return "-".join(kept[:limit]) or "note"


def type_metadata(memory_type: str, title: str, content: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Metadata of the memory type's schema for an extracted memory (what its words and source say)."""
    facts = facts or {}
    if memory_type == "design":
        return {"design_type": "ADR", "title": title, "decision": content, "status": "Accepted",
                **({"related_requirements": sorted(set(_REQ_ID.findall(content)))} if _REQ_ID.search(content) else {})}
    if memory_type == "requirements":
        found = _REQ_ID.search(content)
        if found:
            requirement_id = found.group(0)
        else:
            digits = int(hashlib.sha256(content.encode()).hexdigest()[:8], 16) % 1_000_000
            requirement_id = f"REQ-EXTRACTED-{digits:06d}"
        return {"requirement_id": requirement_id, "title": title, "priority": "Medium", "status": "Draft",
                **({} if found else {"requirement_id_generated": True})}
    if memory_type == "user_preference":
        lowered = content.lower()
        category = ("Naming" if re.search(r"\bnam(e|es|ing)\b", lowered) else
                    "Framework" if re.search(r"\b(framework|library|libraries|package)\b", lowered) else
                    "Tool" if re.search(r"\b(tool|cli|editor|command|pytest|ruff|git)\b", lowered) else
                    "CodingStyle" if re.search(r"\b(style|format|quotes?|indent|line|comments?|type hints?|docstrings?)\b", lowered) else
                    "Convention")
        return {"category": category, "key": "extracted." + _slug(content), "value": content, "scope": "Project"}
    if memory_type == "test_history":
        test = _TEST_ID.search(content)
        name = (test.group(2) or test.group(3)) if test else "test suite"
        test_file = (test.group(1) if test and test.group(1) else None) or (m.group(1) if (m := _TEST_FILE.search(content)) else "unknown")
        lowered = content.lower()
        fixed = re.search(r"\b(fixed|now pass(es)?|passes now|green again)\b", lowered)
        failed = re.search(r"\b([1-9]\d*\s+(tests?\s+)?(failed|failing|errors?)|fails|failed|failing|flaky|times out|timed out)\b", lowered)
        meta: dict[str, Any] = {"test_name": name, "test_file": test_file, "status": "Failed" if failed and not fixed else "Passed"}
        if failed and not fixed:
            meta["failure_message"] = content[:500]
        if fixed:
            meta["fix_applied"] = content[:500]
        return meta
    if memory_type == "code_pattern":
        code = _INLINE_CODE.findall(content)
        return {"pattern_name": title, "pattern_type": "Convention", "language": str(facts.get("language") or _LANGUAGES.get(_ext(str(facts.get("file_path") or "")), "any")),
                "code_template": " ".join(code) if code else content, "usage_context": content,
                **({"example_implementations": [facts["file_path"]]} if facts.get("file_path") else {})}
    if memory_type == "function":
        return {key: facts[key] for key in ("name", "signature", "file_path", "start_line", "end_line", "language", "docstring") if facts.get(key) is not None}
    return {}


def memory_input(candidate: ExtractedMemory, source: str, scope: str, facts: dict[str, Any] | None = None) -> MemoryAddInput:
    """The memory_add input that stores ``candidate``: its type's metadata, the tags ``extracted`` and
    the source kind, and the source span (offsets, quote, confidence) under ``metadata.extracted``."""
    metadata = type_metadata(str(candidate.memory_type), candidate.title, candidate.content, facts)
    metadata["tags"] = list(candidate.tags)
    metadata["extracted"] = {
        "source": source, "source_start": candidate.source_start, "source_end": candidate.source_end,
        "quote": candidate.quote, "confidence": candidate.confidence,
    }
    return MemoryAddInput(
        memory_type=candidate.memory_type, content=candidate.content, metadata=metadata,
        importance_score=round(0.3 + 0.4 * candidate.confidence, 3), scope=scope,  # type: ignore[arg-type]
    )


# -- contradictions ------------------------------------------------------------------------------


def _options(pattern: re.Pattern[str], words: str) -> set[str]:
    return {m.group(1).lower().strip(".,;:") for m in pattern.finditer(words)} - _STOPWORDS


def _content_words(words: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", words.lower()) if w not in _STOPWORDS and len(w) > 2}


def contradiction(new: str, stored: str) -> str | None:
    """Why ``new`` contradicts ``stored`` (both on the same subject), or None: a rejected option the
    other chose, or the same statement negated."""
    chosen_new, rejected_new = _options(_CHOSEN, new), _options(_REJECTED, new)
    chosen_old, rejected_old = _options(_CHOSEN, stored), _options(_REJECTED, stored)
    chosen_new -= rejected_new
    chosen_old -= rejected_old
    if rejected_new & chosen_old:
        return f"rejects {min(rejected_new & chosen_old)!r}, which the stored memory chose"
    if chosen_new & rejected_old:
        return f"chooses {min(chosen_new & rejected_old)!r}, which the stored memory rejected"
    words_new, words_old = _content_words(new), _content_words(stored)
    overlap = len(words_new & words_old) / max(1, min(len(words_new), len(words_old)))
    if overlap >= 0.6 and bool(_NEGATION.search(new)) != bool(_NEGATION.search(stored)):
        return "says the opposite of the stored memory"
    return None


# -- the tool ------------------------------------------------------------------------------------


@dataclass
class _Draft:
    candidate: ExtractedMemory
    facts: dict[str, Any]
    vector: np.ndarray | None = None


class MemoryExtraction:
    """memory_extract over the project's memory stores (dedupe and conflicts read them, commit writes)."""

    def __init__(self, stores: MemoryStores, writes: MemoryWrites) -> None:
        """Read and write through ``stores``; store through ``writes`` (the memory_bulk_add path)."""
        self.stores = stores
        self.writes = writes

    def memory_extract(self, request: MemoryExtractInput) -> MemoryExtractResult:
        """Propose typed memories from ``request.text``; store the new ones when ``request.commit``."""
        text = request.text
        source = detect_source(text) if request.source == "auto" else request.source
        drafts = self._drafts(text, source, request)
        self._check_against_stored(drafts)
        if request.commit:
            stored, skipped = self._commit(drafts, source, request.scope)
        else:
            stored, skipped = 0, sum(1 for d in drafts if d.candidate.duplicate_of)
        log.info("memories extracted", source=source, candidates=len(drafts), stored=stored, duplicates=skipped, dry_run=not request.commit)
        return MemoryExtractResult(
            candidates=[d.candidate for d in drafts], source=source, stored=stored, skipped_duplicates=skipped,
            dry_run=not request.commit, scope=request.scope,
        )

    # -- candidates ------------------------------------------------------------------------------
    def _drafts(self, text: str, source: str, request: MemoryExtractInput) -> list[_Draft]:
        segments = [s for s in segments_of(text, source) if not is_noise(s)]
        scored = [(segment, cue_scores(segment)) for segment in segments]
        order = sorted(range(len(scored)), key=lambda i: -max((w for w, _ in scored[i][1].values()), default=0.0))[:MAX_EMBEDDED]
        vectors: dict[int, np.ndarray] = {}
        prototypes = None
        if order:
            try:
                prototypes = Prototypes.of(self.stores.embedder)
                embedded = self.stores.embedder.embed_documents([_plain(scored[i][0])[:EMBED_CHARS] for i in order])
                vectors = {i: np.asarray(embedded[n], dtype=np.float32) for n, i in enumerate(order)}
            except Exception as exc:  # noqa: BLE001 - cues alone still classify; the log says why the model was not used
                log.warning("memory_extract: embedding failed; classifying by cues only", error=str(exc))
        drafts: list[_Draft] = []
        seen: set[str] = set()
        for index, (segment, scores) in enumerate(scored):
            sims = _similarities(vectors[index], prototypes) if prototypes is not None and index in vectors else None
            decided = decide_type(segment, scores, sims)
            if decided is None:
                continue
            memory_type, confidence, cue = decided
            if confidence < request.min_confidence:
                continue
            content = _plain(segment) if segment.kind != "def" else self._function_content(segment)
            key = re.sub(r"\W+", " ", content.lower()).strip()
            if key in seen:
                continue
            seen.add(key)
            tags = ["extracted", source] + ([cue] if cue and not cue.startswith("similar to") else [])
            candidate = ExtractedMemory(
                memory_type=memory_type, title=_title(content) if segment.kind != "def" else segment.facts["name"], content=content,
                confidence=confidence, source_start=segment.start, source_end=segment.end,
                quote=text[segment.start:segment.end][:QUOTE_CHARS], tags=tags,
            )
            drafts.append(_Draft(candidate, {**segment.facts}, vectors.get(index)))
        drafts.sort(key=lambda d: -d.candidate.confidence)
        return drafts[: request.max_candidates]

    @staticmethod
    def _function_content(segment: Segment) -> str:
        facts = segment.facts
        return f"{facts['signature']} in {facts['file_path']} (lines {facts['start_line']}-{facts['end_line']}): {facts.get('docstring') or ''}".strip()

    # -- against what is stored ------------------------------------------------------------------
    def _check_against_stored(self, drafts: list[_Draft]) -> None:
        """Mark each draft's duplicate (a stored memory that says it) and the stored memories it contradicts."""
        threshold = self.stores.settings.memory_conflict_threshold
        for draft in drafts:
            candidate = draft.candidate
            memory_type = str(candidate.memory_type)
            metadata = type_metadata(memory_type, candidate.title, candidate.content, draft.facts)
            vector = self.writes.embed_one(memory_type, candidate.content, metadata)
            hash_of = content_hash(candidate.content)
            for store in self.stores.scopes.opened():
                for row in store.ledger.find_by_hash(memory_type, hash_of):
                    candidate.duplicate_of = candidate.duplicate_of or row.id
                if vector is None:
                    continue
                for memory_id, score, content in self._neighbours(store, memory_type, vector):
                    if memory_id == candidate.duplicate_of:
                        continue
                    why = contradiction(candidate.content, content)
                    if why is not None:
                        if memory_id not in candidate.conflicts_with:
                            candidate.conflicts_with.append(memory_id)
                            log.info("memory_extract: conflict", memory_id=memory_id, why=why)
                    elif score >= threshold and candidate.duplicate_of is None:
                        candidate.duplicate_of = memory_id
        kept: list[_Draft] = []
        for draft in drafts:  # the same thing said twice in one text: one candidate
            if draft.vector is not None and any(
                other.vector is not None and str(other.candidate.memory_type) == str(draft.candidate.memory_type)
                and float(other.vector @ draft.vector) >= 0.95 for other in kept
            ):
                continue
            kept.append(draft)
        drafts[:] = kept

    def _neighbours(self, store: Any, memory_type: str, vector: np.ndarray) -> list[tuple[str, float, str]]:
        """Active memories of ``memory_type`` in ``store`` on the same subject: ``(id, similarity, content)``."""
        try:
            dense, _ = self.stores.vectors.ranked_lists(
                store.projector.collection(memory_type), dense=vector.tolist(), sparse=None, candidates=8,
                payload_filter=PayloadFilter(must_match={"status": ["active"]}), with_payload=False,
            )
        except Exception as exc:  # noqa: BLE001 - a collection not made yet, or the store down: no neighbours to report
            log.debug("memory_extract: neighbour search failed", memory_type=memory_type, error=str(exc))
            return []
        found = []
        for hit in dense:
            if hit.score < CONFLICT_SIMILARITY:
                continue
            row = store.ledger.get(hit.id)
            if row is not None and not row.deleted:
                found.append((row.id, float(hit.score), row.content))
        return found

    # -- storing ---------------------------------------------------------------------------------
    def _commit(self, drafts: list[_Draft], source: str, scope: str) -> tuple[int, int]:
        """Store every non-duplicate draft in one memory_bulk_add (one ledger transaction: all or none)."""
        new = [d for d in drafts if d.candidate.duplicate_of is None]
        skipped = len(drafts) - len(new)
        if not new:
            return 0, skipped
        inputs = [memory_input(d.candidate, source, scope, d.facts) for d in new]
        result = self.writes.memory_bulk_add(MemoryBulkAddInput(memories=inputs, scope=scope))  # type: ignore[arg-type]
        if result.errors:
            problems = "; ".join(f"{new[e['index']].candidate.title!r}: {e['error']}" for e in result.errors[:3])
            raise ToolError(f"the extracted memories could not be stored (nothing was stored): {problems} — "
                            "run memory_extract with commit=false and store them with memory_add")
        for draft, memory_id in zip(new, result.added_ids, strict=True):
            draft.candidate.stored_id = memory_id
        return len(result.added_ids), skipped

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
   documented function → function; the rules and their reasons are in ``extract_cues``). The words
   around a segment count too (``annotate``, ``test_episodes``): title lines and headings name what is
   under them (open questions are skipped), an assistant's proposal the user accepts and the user's
   pick among options the assistant laid out are decisions, a test run with the assistant's
   explanation of its failure and the re-run is one candidate, and sentences of one paragraph that say
   one thing are one candidate. The embedding's similarity to a few prototypes of each type only
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

from query_server.memory.extract_cues import (
    ABBREVIATIONS,
    ACK,
    ADDRESSED,
    AGREEMENT,
    CUES,
    HEADING_HINTS,
    MEASURED,
    OPEN_ITEM,
    OPTION_WORD,
    OPTIONS,
    PROPOSAL,
    PROTOTYPES,
    TEST_FAILURE,
    TOOL_LINE,
)
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
PROTOTYPE_ONLY_SIMILARITY = 0.55
PROTOTYPE_ONLY_MARGIN = 0.05
PROTOTYPE_ONLY_CAP = 0.6
"""A segment without a cue becomes a candidate when its nearest example sentence (``PROTOTYPES``,
``none`` included: narration, questions, chit-chat) is of a memory type, at least
``PROTOTYPE_ONLY_SIMILARITY`` close and ``PROTOTYPE_ONLY_MARGIN`` closer than any other type's; its
confidence (0.2 + 0.6 × similarity) stays under ``PROTOTYPE_ONLY_CAP``: the local model measures
topic more than intent."""

# -- cues (query_server/memory/extract_cues.py) ----------------------------------------------------

_I = re.IGNORECASE

_QUESTION = re.compile(r"\?\s*[)\"'`]*$|^\W*(should we|shall we|can you|could you|would you|do you|did you|what|why|how|which|is it|are there|is there)\b", _I)
_CHITCHAT = re.compile(r"^\W*(thanks|thank you|ok(ay)?|great|sounds good|perfect|cool|nice|yes|no|sure|got it|lgtm|done|hi|hello|hey|good (morning|job))\b", _I)
_TOOL_NOISE = re.compile(
    r"^\W*(let me|now let me|let's (look|check|see|run|read|start|open)|i'll (now )?(read|look|check|run|open|search|start|explore|examine|take a look|create|write|update|edit|fix|add|implement)|"
    r"i('m| am) going to (read|look|check|run)|now i('ll| will)|running|reading|searching|looking at|here('s| is) (the|a|what)|"
    r"the file has been|file created|perfect!|great!|excellent!|done[.!]?$)", _I,
)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")
_TURN = re.compile(r"^(?:>\s*)?(?:\*\*)?(User|Human|Assistant|Claude|AI|You)(?:\*\*)?\s*:\s?", re.MULTILINE)
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
_INSTRUCTION_FILES = frozenset({"claude.md", "claude.local.md", "agents.md", "gemini.md", ".cursorrules", "copilot-instructions.md"})
"""Files whose lines are the user's instructions to a coding agent."""
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
    block: Any = None
    """The paragraph or bullet it is a sentence of (None: a block of its own)."""


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


def _sentence_ends(chunk: str) -> Iterable[tuple[int, int]]:
    """Where the sentences of ``chunk`` end: ``(end of one, start of the next)``. A period ends a
    sentence before a capital, a digit, a quote or code, and before a lowercase word too (people type
    lowercase in chat: "agreed. make that the rule") unless it closes an abbreviation ("e.g. this")."""
    for match in re.finditer(r"[.!?]+\s+(?=\S)", chunk):
        after = chunk[match.end()]
        before = chunk[:match.start()].rsplit(None, 1)[-1] if chunk[:match.start()].strip() else ""
        starts = after.isupper() or after.isdigit() or after in "\"'`([*_"
        lowercase = (after.islower() and chunk[match.start()] == "." and before.lower().strip("(") not in ABBREVIATIONS
                     and len(before) > 1 and "." not in before)
        if starts or lowercase:
            yield match.start() + 1, match.end()


def _is_title(line: str, previous: str | None, following: str | None) -> bool:
    """A line that names the section under it: at the start of a block, a numbered or capitalised short
    line without a sentence's end ("3. Module conventions", "Compliance"), or a short line ending in a
    colon ("Decisions:"), with text right below it."""
    if following is None or not following.strip() or (previous is not None and previous.strip()) or _HEADING.match(line):
        return False
    words = _BULLET.sub("", line.strip(), count=1).strip()
    if not words or len(re.sub(r"\s*\([^)]*\)", "", words).split()) > 8:  # "Conventions (Tomasz asked for these)"
        return False
    numbered = bool(re.match(r"^\s*\d+[.)]\s", line))
    if _BULLET.match(line) and not numbered:
        return False
    if words.endswith(":"):
        return True
    if re.search(r"[.!?;,]$", words) or (numbered and re.match(r"^\s*\d+[.)]\s", following)):
        return False
    return numbered or words[:1].isupper()


def _spans(body: str, base: int) -> Iterable[tuple[int, int, str | None, str, int]]:
    """Sentences and bullets of prose: ``(start, end, heading hint, kind, block)`` offsets into the whole text
    (``base`` is the offset of ``body``); code fences, headings and title lines are left out, and a tool
    call with its output (a pasted Claude Code transcript: ``[Tool: ...]``, ``● Bash(...)``, ``⎿``) is
    one ``tool`` span up to the next blank line."""
    in_fence = False
    in_tool = False
    hint: str | None = None
    block: list[tuple[int, int]] = []  # (start, end) of the lines of one paragraph or bullet

    def flush() -> Iterable[tuple[int, int, str | None, str, int]]:
        if not block:
            return
        start, end = block[0][0], block[-1][1]
        if in_tool:
            yield base + start, base + end, hint, "tool", base + start
            return
        chunk = body[start:end]
        cursor = 0
        for stop, resume in _sentence_ends(chunk):
            yield base + start + cursor, base + start + stop, hint, "prose", base + start
            cursor = resume
        yield base + start + cursor, base + end, hint, "prose", base + start

    lines = body.split("\n")
    offset = 0
    for number, line in enumerate(lines):
        start, end, offset = offset, offset + len(line), offset + len(line) + 1
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            yield from flush()
            block, in_tool = [], False
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = _HEADING.match(line)
        following = lines[number + 1] if number + 1 < len(lines) else None
        previous = lines[number - 1] if number else None
        title = not in_tool and not heading and _is_title(line, previous, following)
        if not stripped or heading or title:
            yield from flush()
            block, in_tool = [], False
            if heading or title:
                words = heading.group(1) if heading else line
                hint = next((kind for pattern, kind in HEADING_HINTS if pattern.search(words)), None)
            continue
        if TOOL_LINE.match(line) and not in_tool:
            yield from flush()
            block, in_tool = [], True
        elif _BULLET.match(line) and block and not in_tool:
            yield from flush()
            block = []
        block.append((start, end))
    yield from flush()


def _prose(text: str, body: str, base: int, role: str | None = None, kind: str = "prose") -> list[Segment]:
    segments = []
    for start, end, hint, span_kind, block in _spans(body, base):
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            segments.append(Segment(text[start:end], start, end, role, span_kind if span_kind == "tool" else kind, hint, block=block))
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
            piece.block = (line_start, piece.block)
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
            # CLAUDE.md and its kind hold the user's standing instructions to the agent: the user speaking
            role = "user" if path.rsplit("/", 1)[-1].lower() in _INSTRUCTION_FILES else None
            for seg in _prose(body, body, 0, role=role):
                seg.start, seg.end = _map_offsets(run, seg.start, seg.end)
                seg.text = " ".join(seg.text.split())
                seg.facts = {"file_path": path}
                segments.append(seg)
        else:
            comment: list[tuple[int, int, int, str]] = []
            for index, (start, end, number, line) in enumerate(run):
                marker = _COMMENT.match(line)
                if marker and line.strip() not in ("*/", "-->"):
                    words = line[marker.end():].rstrip(" */->")
                    if not words.strip():  # a blank comment line ends a paragraph of the comment
                        _comment_segment(segments, comment, path)
                        comment = []
                        continue
                    comment.append((start + marker.end(), end, number, words))
                    continue
                _comment_segment(segments, comment, path)
                comment = []
                definition = _DEF.match(line)
                if definition and not _is_test(path, definition.group(1)):
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


def _is_test(path: str, name: str) -> bool:
    """A test function (``test_*``, ``Test*`` or any function of a test file): a test, not an API to remember."""
    return bool(re.match(r"(?i)test", name)) or bool(re.search(r"(^|/)(tests?|__tests__|spec)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$|Test\.\w+$", path))


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
    """Questions, chit-chat, tool chatter, code, fragments, open items (a TODO comment, a section of open
    questions): nothing to remember. A tool call's output counts only for the test results in it."""
    words = _plain(segment)
    if segment.kind == "def":
        return False
    if segment.hint == "skip" or OPEN_ITEM.match(words):
        return True
    if segment.kind == "tool":
        return len(words) > MAX_SEGMENT_CHARS * 2
    if len(words) < MIN_SEGMENT_CHARS or len(words) > MAX_SEGMENT_CHARS:
        return True
    if _QUESTION.search(words) or _TOOL_NOISE.match(words):
        return True
    if _CHITCHAT.match(words) and len(words) < 60 and not ACK.sub("", words, count=1).strip(" .,!").count(" ") >= 3:
        return True
    letters = sum(ch.isalpha() or ch.isspace() for ch in words)
    return letters < 0.6 * len(words) or len(words.split()) < 3


def annotate(segments: Sequence[Segment]) -> None:
    """What the segments around each one say about it (``facts``), read in order:

    * text addressed to the assistant ("@claude when you ...") is the user speaking;
    * an assistant's proposal ("I suggest we ...") that the user's next turn opens by accepting
      ("agreed", "yes", "sounds good") is a decision: ``facts["agreed"]``;
    * after the assistant lays out options ("two options: X or Y", "we could X, or Y"), a statement of
      the user's next two turns that names one of them is the user's pick: ``facts["picks"]``.
    """
    proposal: Segment | None = None
    options: set[str] = set()
    user_turns_left = 0
    previous_role: str | None = None
    for segment in segments:
        words = _plain(segment)
        if segment.role is None and ADDRESSED.match(words):
            segment.role = "user"
            segment.facts["addressed"] = True
            if segment.hint == "skip":  # a word to the assistant is not part of the section it follows
                segment.hint = None
        if segment.role == "user" and previous_role != "user":  # a new user turn
            if proposal is not None and AGREEMENT.match(words):
                proposal.facts["agreed"] = True
            proposal = None
            user_turns_left -= 1
        if segment.role == "assistant" and segment.kind == "prose":
            if PROPOSAL.search(words) and not _QUESTION.search(words):
                proposal = segment
            if OPTIONS.search(words):
                options = _option_words(words)
                user_turns_left = 3  # the next two user turns (the count drops as each one starts)
        elif segment.role == "user" and options and user_turns_left > 0 and not _QUESTION.search(words):
            named = {w for w in options if re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", words, _I)}
            if named:
                segment.facts["picks"] = sorted(named)
        if segment.role is not None:
            previous_role = segment.role
        if user_turns_left <= 0:
            options = set()


def _option_words(words: str) -> set[str]:
    """The names of the options in an options sentence ("moment-timezone", "Decimal", ``date-fns``), and
    the head of a hyphenated name ("moment")."""
    found: set[str] = set()
    for match in OPTION_WORD.finditer(words):
        name = next(g for g in match.groups() if g).strip()
        if len(name) < 4 or name.lower() in _STOPWORDS or name.lower() in ("options", "either", "two", "three"):
            continue
        found.add(name)
        head = re.split(r"[-_.]", name)[0]
        if len(head) >= 5 and head != name:
            found.add(head)
    return found


def cue_scores(segment: Segment) -> dict[str, tuple[float, str]]:
    """Each memory type's strongest cue in the segment: ``{type: (weight, cue words)}``. A tool call's
    output is read only for test results; an opening acknowledgement ("ok, ...") is skipped."""
    words = ACK.sub("", _plain(segment), count=1) if segment.role == "user" else _plain(segment)
    if segment.facts.get("addressed"):
        words = ADDRESSED.sub("", words, count=1)
    tool = segment.kind == "tool"
    scores: dict[str, tuple[float, str]] = {}
    for cue in CUES:
        if tool and cue.memory_type != "test_history":
            continue
        if cue.kinds is not None and segment.kind not in cue.kinds and not tool:
            continue
        if cue.roles is not None and segment.role not in cue.roles and not tool:
            continue
        match = cue.pattern.search(segment.text if tool else words)
        if match and cue.weight > scores.get(cue.memory_type, (0.0, ""))[0]:
            scores[cue.memory_type] = (cue.weight, match.group(0).strip().lower()[:40])
    if tool:
        return scores
    if segment.facts.get("agreed") and scores.get("design", (0.0, ""))[0] < 0.8:
        scores["design"] = (0.8, "proposal the user agreed to")
    if segment.facts.get("picks") and scores.get("design", (0.0, ""))[0] < 0.75:
        scores["design"] = (0.75, "picks " + segment.facts["picks"][0])
    if segment.hint and segment.hint != "skip" and segment.kind != "subject":
        weight, cue = scores.get(segment.hint, (0.0, ""))
        # a conventions/gotchas section lists rules: its "must"s are conventions; under a decision heading a
        # "must" stays the requirement the decision sets
        floor = 0.8 if segment.hint == "code_pattern" else 0.7
        scores[segment.hint] = (max(weight + 0.1, floor), cue or "heading")
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
    if segment.kind == "tool":
        return ("test_history", round(ranked[0][0], 3), ranked[0][2]) if ranked else None
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
        if best == "none" or best == "user_preference" and segment.role == "assistant":
            return None
        if segment.role == "user" and best != "user_preference":
            return None  # a user's words without a cue are a request ("fix the failing login test"), not a record
        if sims[best] >= PROTOTYPE_ONLY_SIMILARITY and sims[best] - second >= PROTOTYPE_ONLY_MARGIN:
            return best, round(min(PROTOTYPE_ONLY_CAP, 0.2 + sims[best] * 0.6), 3), "similar to " + best.replace("_", " ")
    return None


EPISODE_CHARS = 1_000
"""The longest span one test episode covers (a run, its explanation and the re-run)."""
ROUTINE_RUN_CAP = 0.45
"""The confidence of a session's test run that only passed and measured nothing: routine, not history."""

_Decided = tuple[Segment, "tuple[str, float, str] | None", "np.ndarray | None"]


def test_episodes(decisions: Sequence[_Decided]) -> list[tuple[list[Segment], tuple[str, float, str] | None, np.ndarray | None]]:
    """The decided segments, with each test episode of a session made one: the assistant's test runs
    (a tool call's output or its own words) up to the user's next turn, with the assistant's sentences
    that follow a failure (its cause and fix) — one memory, said in several places. An episode that only
    passed and measured nothing is a routine run (confidence at most ``ROUTINE_RUN_CAP``). Segments
    without a speaker (commits, diffs, notes) stay as they are."""
    groups: list[tuple[list[Segment], tuple[str, float, str] | None, np.ndarray | None]] = []
    episode: list[Segment] | None = None
    for segment, decided, vector in decisions:
        is_test = decided is not None and decided[0] == "test_history"
        if segment.role == "assistant" and episode is not None and segment.end - episode[0].start <= EPISODE_CHARS:
            members, best, best_vector = groups[-1]
            failed = any(TEST_FAILURE.search(m.text) for m in members)
            explains = failed and segment.kind == "prose" and (decided is None or decided[1] < 0.75)
            if is_test or explains or (segment.kind == "tool" and decided is None):
                members.append(segment)
                if is_test and best is not None and decided is not None and decided[1] > best[1]:
                    best = decided
                groups[-1] = (members, best, best_vector)
                continue
        episode = None
        groups.append(([segment], decided, vector))
        if is_test and segment.role == "assistant":
            episode = groups[-1][0]
    for index, (members, decided, vector) in enumerate(groups):
        if decided is None or decided[0] != "test_history" or members[0].role != "assistant":
            continue
        words = " ".join(m.text for m in members)
        if not TEST_FAILURE.search(words) and not MEASURED.search(words) and not any(m.kind == "prose" and "flaky" in m.text.lower() for m in members):
            groups[index] = (members, (decided[0], min(decided[1], ROUTINE_RUN_CAP), decided[2]), vector)
    return _paragraphs(groups)


CONTINUATION_WEIGHT = 0.7
"""A sentence classified less surely than this, right after a candidate of its paragraph, continues it."""


def _paragraphs(groups: list[tuple[list[Segment], tuple[str, float, str] | None, np.ndarray | None]]) -> list[tuple[list[Segment], tuple[str, float, str] | None, np.ndarray | None]]:
    """Sentences of one paragraph (or bullet) in a row that say one memory, made one: the next sentence
    of the same type ("please don't run the whole suite every time. just the billing tests."), or one
    that only weakly says anything ("keep a retry too, but at most 3 attempts") after a candidate."""
    merged: list[tuple[list[Segment], tuple[str, float, str] | None, np.ndarray | None]] = []
    for members, decided, vector in groups:
        if merged and decided is not None:
            previous, before, before_vector = merged[-1]
            last = previous[-1]
            if (before is not None and last.block is not None and last.block == members[0].block and last.kind == members[0].kind == "prose"
                    and last.role == members[0].role and members[-1].end - previous[0].start <= EPISODE_CHARS
                    and (decided[0] == before[0] or decided[1] < CONTINUATION_WEIGHT)):
                best = decided if decided[0] == before[0] and decided[1] > before[1] else before
                merged[-1] = (previous + members, best, before_vector)
                continue
        merged.append((members, decided, vector))
    return merged


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
        every = segments_of(text, source)
        annotate(every)
        segments = [s for s in every if not is_noise(s)]
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
        decisions = []
        for index, (segment, scores) in enumerate(scored):
            sims = _similarities(vectors[index], prototypes) if prototypes is not None and index in vectors else None
            decisions.append((segment, decide_type(segment, scores, sims), vectors.get(index)))
        drafts: list[_Draft] = []
        seen: set[str] = set()
        for members, decided, vector in test_episodes(decisions):
            if decided is None:
                continue
            memory_type, confidence, cue = decided
            if confidence < request.min_confidence:
                continue
            first, last = members[0], members[-1]
            if first.kind == "def":
                content = self._function_content(first)
            else:
                content = " ".join(_plain(m) for m in members)[:MAX_SEGMENT_CHARS]
            key = re.sub(r"\W+", " ", content.lower()).strip()
            if key in seen:
                continue
            seen.add(key)
            tags = ["extracted", source] + ([cue] if cue and not cue.startswith("similar to") else [])
            candidate = ExtractedMemory(
                memory_type=memory_type, title=_title(content) if first.kind != "def" else first.facts["name"], content=content,
                confidence=confidence, source_start=first.start, source_end=last.end,
                quote=text[first.start:last.end][:QUOTE_CHARS], tags=tags,
            )
            drafts.append(_Draft(candidate, {**first.facts}, vector))
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

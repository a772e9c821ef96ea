"""What the design derivation reads of one file, as a digest the manifest keeps per file.

``derive_links`` (``pipelines.design.links``) reads, of the indexed code: the classes (names,
bases, signature, code) and their methods (name, signature, whether abstract), the symbols that
cite requirements, the lines that may cite an ADR with the symbol each belongs to, the file set
and its imports. ``design_digest`` hashes exactly that for one file at index time, so
``derive.derivation_inputs`` can tell that an edit inside a function body, the everyday change,
leaves the derivation's inputs as they were, and skip it. A class's code is read only for a
pattern's base (its template): the inputs hold the bases' code hashes instead.

A line may cite an ADR by number (``ADR-0003``, ``decision 7``: ``citations.ADR_CITATION``) or
by its document's path or name, which the project's ``doc_globs`` match: such a line holds the
longest literal part of the last part of one of the globs. The digest is tagged with the globs it was
computed for (``globs_tag``); a digest of other globs is not used.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from pipelines.design.citations import ADR_CITATION, citing_symbol
from pipelines.design.patterns import is_abstract
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS

def globs_tag(doc_globs: Iterable[str]) -> str:
    """A short tag of the document globs a digest's citation lines were found with."""
    return hashlib.sha1(json.dumps(list(doc_globs)).encode()).hexdigest()[:12]


def _glob_fragment(glob: str) -> str:
    """The longest literal part of a glob's last path part (lower case): any name the glob matches
    holds it, so a line naming such a document does ("" where the part is all wildcards)."""
    last = glob.rstrip("/").rsplit("/", 1)[-1]
    return max(re.split(r"[*?]|\[[^\]]*\]", last), key=len).lower()


class CitingLines:
    """Lines that may cite an ADR: by number (``ADR_CITATION``), or by a document name the globs
    can match (the line holds the longest literal part of a glob's last part: linear in the line,
    where a regular expression of the globs backtracks over long lines)."""

    def __init__(self, doc_globs: tuple[str, ...]) -> None:
        self.fragments = tuple(dict.fromkeys(_glob_fragment(g) for g in doc_globs if g.strip() and not g.startswith("!")))

    def match(self, line: str) -> bool:
        """True when ``line`` may cite an ADR."""
        return self.may_name(line) or ADR_CITATION.search(line) is not None

    def may_name(self, text: str) -> bool:
        """True when ``text`` holds a glob's fragment: a line that names a document whose name
        holds one is kept (an ADR whose name holds none can be cited unseen: the derivation then
        always runs, ``derive.derivation_inputs``)."""
        lower = text.lower()
        return any(fragment in lower for fragment in self.fragments)


@lru_cache(maxsize=8)
def citing_lines(doc_globs: tuple[str, ...]) -> CitingLines:
    """The lines that may cite an ADR in a project with these document globs."""
    return CitingLines(doc_globs)


def design_digest(
    payloads: Sequence[dict[str, Any]], imports: Sequence[dict[str, Any]], text: str, doc_globs: tuple[str, ...],
) -> str:
    """``<globs tag>:<sha1>`` of what the derivation reads of one file (its symbols' payloads and
    imports as indexed, and its text)."""
    parts: list[Any] = []
    for payload in payloads:
        kind = payload.get("kind")
        if kind in CLASS_KINDS:  # its code only matters as a pattern's base: derive.derivation_inputs
            parts.append(["class", payload.get("id"), payload.get("name"), payload.get("local_name"),
                          payload.get("qualified_name"), kind, payload.get("language"), payload.get("extends"),
                          payload.get("implements"), payload.get("signature")])
        elif kind in CALLABLE_KINDS and payload.get("container"):
            parts.append(["member", payload.get("id"), payload.get("container"), payload.get("name"),
                          payload.get("signature"), is_abstract(payload)])
        if payload.get("requirement_ids"):
            parts.append(["cites", payload.get("id"), payload.get("requirement_ids"), bool(payload.get("is_test"))])
    citing = citing_lines(doc_globs)
    text_lines = text.splitlines()
    lines = [[number, line] for number, line in enumerate(text_lines, start=1) if citing.match(line)]
    if lines:  # a citation belongs to the symbol around or below it: a symbol added elsewhere in the file changes nothing
        parts.append(["adr", [[number, line, (citing_symbol(text_lines, number, payloads) or {}).get("id")] for number, line in lines]])
    parts.append(["imports", [[i.get("module"), i.get("items")] for i in imports]])
    digest = hashlib.sha1(json.dumps(parts, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return f"{globs_tag(doc_globs)}:{digest.hexdigest()}"


__all__ = ["citing_lines", "design_digest", "globs_tag"]

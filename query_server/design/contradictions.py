"""Does a fix contradict a statement of the design? The four checks behind ``validate_fix``.

A fix (its description, and the added and removed lines of its diff) contradicts a
``Statement`` (see ``statements``) when it

* **changes a value**: states a number of the same quantity (time, count, size, percent, exit
  status) on the statement's topic that the statement does not allow ("at most 3 times" → 10
  times; "5 seconds to connect" → 60 s; "exit with code 2 …, never 1" → 1);
* **negates the modality**: does what a ``never`` sentence prohibits, on its subject ("POST …
  requests are never retried" → "make ApiClient.post retry"), or puts something else where an
  ``only`` sentence allows one thing ("stdout carries exactly one JSON document and nothing
  else" → "print a line on stdout");
* **brings back a forbidden name** ("argparse, docopt and typer are not used" → ``import typer``);
* **removes a required step**: removes, skips or drops what a positive sentence names ("no
  longer posts to /audit", a removed line with ``SHA256SUMS`` that no added line restores).

Only what the fix *affirms* counts: text after "no longer", "instead of", "without", "don't" …
and the removed lines are what it takes away. Each contradiction says what differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from query_server.design.statements import (
    UNITS,
    Statement,
    Value,
    describe,
    lemma,
    overlap,
    same_term,
    terms,
    values_in,
)

Kind = Literal["changed_value", "negated_modality", "forbidden_name", "removed_step"]

_REMOVAL = re.compile(
    r"\b(?:no longer|stop(?:s|ped)?\s+(?=\w+ing\b)|skip(?:s|ped|ping)?|drop(?:s|ped|ping)?|remov(?:e|es|ed|ing)|delet(?:e|es|ed|ing)|"
    r"disabl(?:e|es|ed|ing)|bypass(?:es|ed|ing)?|without|instead of|rather than|get rid of|rip(?:s|ped)? out|omit(?:s|ted)?|"
    r"turn(?:s|ed)? off)\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"\b(?:not|never|don't|doesn't|didn't|do not|does not|isn't|aren't|won't|no)\b", re.IGNORECASE)
_SCOPE_END = re.compile(r"[,;:.!?]\s|[,;:.!?]$|\)|\b(?:so|because|but|since|and then|when|while|which)\b", re.IGNORECASE)
_PAST = re.compile(r"\b(?:used to|previously|was|were|had been|kept|before this|old)\b", re.IGNORECASE)
_OUTPUT_VERB = re.compile(r"\b(?:print|prints|printed|write|writes|show|shows|emit|emits|echo|echoes|output|outputs|display|displays|log|logs|send|sends|add|adds|put|puts)\b", re.IGNORECASE)
_SYNONYMS = [
    {lemma(w) for w in group.split()}
    for group in ("write save store persist dump put cache", "retry reattempt resend re-send re-try", "publish upload release push",
                  "edit modify rewrite amend", "call invoke")
]
_QUANTITY_WORDS = {lemma(w) for w in UNITS if len(w) > 2} | {"exit", "status", "code", "return"}


@dataclass
class Contradiction:
    """A statement a fix contradicts, the kind of contradiction and what differs."""

    statement: Statement
    kind: Kind
    differs: str


@dataclass
class FixText:
    """A fix read for contradictions: what it affirms and what it takes away."""

    clauses: list[str]
    """Affirmed clauses of the description (removal and negation scopes cut out)."""
    removal: list[str]
    """The scopes of the description's removal words ("no longer posts to /audit")."""
    added: str
    removed: str
    whole: set[str]
    """The terms of the whole fix (description and changed lines)."""


def _cut_scopes(text: str, cue: re.Pattern[str]) -> tuple[str, list[str]]:
    """``text`` without the scopes of ``cue`` (cue to clause end), and those scopes."""
    scopes: list[str] = []
    kept, at = [], 0
    for match in cue.finditer(text):
        if match.start() < at:
            continue
        end = _SCOPE_END.search(text, match.end())
        stop = end.start() if end else len(text)
        kept.append(text[at:match.start()])
        scopes.append(text[match.end():stop])
        at = stop
    kept.append(text[at:])
    return " ".join(kept), scopes


def diff_lines(diff: str | None, signs: str) -> str:
    """The lines of a unified diff that start with one of ``signs`` (``+`` added, ``-`` removed,
    ``+-`` both, in diff order), without their marker; file headers (``+++``/``---``) excluded."""
    return "\n".join(
        line[1:] for line in (diff or "").splitlines()
        if line[:1] and line[0] in signs and not line.startswith(line[0] * 3)
    )


def read_fix(description: str, diff: str | None) -> FixText:
    """Split a fix into its affirmed clauses, its removals and its changed lines."""
    affirmed, removal = _cut_scopes(description, _REMOVAL)
    affirmed, _ = _cut_scopes(affirmed, _NEGATED)
    clauses = [c.strip() for c in re.split(r"(?<=[.!?;:])\s+|,\s+(?:so|and|but)\s+|\s+so\s+|\s\(|\)(?=\s|$)", affirmed) if c.strip()]
    added, removed = diff_lines(diff, "+"), diff_lines(diff, "-")
    return FixText(clauses=clauses, removal=removal, added=added, removed=removed,
                   whole=terms(f"{description}\n{added}\n{removed}"))


# -- names -------------------------------------------------------------------------------------------

def name_pattern(name: str) -> re.Pattern[str]:
    """A name as it may be written in a fix: case-insensitive, whole, spaces allowed around ``=``,
    an optional hyphen in ``SHA-1``, ``()`` optional."""
    pieces = [re.escape(p).replace(r"\-", "-?") for p in re.split(r"<[^>]*>|\{[^}]*\}", name)]
    body = r"\S+".join(r"\s*=\s*".join(re.split(r"\\?\s*=\s*", p)) for p in pieces)
    return re.compile(rf"(?<![\w.\-/]){body}(?![\w\-])", re.IGNORECASE)


def prose_names(statements: list[Statement]) -> set[str]:
    """Plain lower-case names the statements also use as ordinary words (``requests`` in "GET
    requests are retried"): a fix must write them as code to bring them back."""
    prose = " ".join(re.sub(r"`[^`]*`", " ", s.sentence) for s in statements)
    candidates = {n for s in statements for n in s.forbidden_names if re.fullmatch(r"[a-z]+", n)}
    return {n for n in candidates if len(re.findall(rf"\b{n}\b", prose)) > sum(n in s.forbidden_names for s in statements)}


_INTRODUCED = r"\b(?:with|using|use[sd]?|via|imports?|imported|call(?:s|ed|ing)?|switch(?:es|ed)? to|moved? to|adopt(?:s|ed)?|add(?:s|ed)?|back)\s+(?:\S+\s+){0,2}"


def _introduced(name: str, text: str) -> bool:
    """``name`` brought in by the words of ``text``: called (``sys.exit(1)``, ``requests.get(…)``)
    or after "with", "use", "import", "call", "switch to" … (not a mention such as "an unhandled
    sqlite3 error" or "wrap sqlite3.OperationalError")."""
    pattern = name_pattern(name).pattern
    return bool(re.search(_INTRODUCED + pattern, text, re.IGNORECASE) or re.search(pattern + r"(?:\.\w+)?\(", text, re.IGNORECASE))


def _as_code(name: str, text: str) -> bool:
    """``name`` written as code in ``text``: backticked, imported, called or dotted."""
    n = re.escape(name)
    return bool(re.search(rf"`{n}`|\b(?:import|from)\s+{n}\b|(?<![\w.]){n}(?:\.\w|\()|\b{n}\s+(?:library|package|module)\b", text))


def brought_back(name: str, fix: FixText, code_only: bool) -> bool:
    """The fix affirms ``name``: in its affirmed description or its added lines (and not only
    where its removed lines had it already)."""
    pattern = name_pattern(name)
    described = " ".join(fix.clauses)
    in_added = bool(pattern.search(fix.added)) and len(pattern.findall(fix.added)) > len(pattern.findall(fix.removed))
    if code_only:
        return _as_code(name, described) or (in_added and _as_code(name, fix.added))
    return _introduced(name, described) or in_added


def _name_terms(name: str) -> set[str]:
    """The words of a name worth matching (placeholders ``<command>`` dropped)."""
    return {t for t in terms(re.sub(r"<[^>]*>|\{[^}]*\}", " ", name), keep=frozenset({"without"})) if len(t) >= 3}


def taken_away(name: str, fix: FixText) -> bool:
    """The fix removes ``name``: a removal scope of its description names it, or a removed line
    holds it and no added line does."""
    words = _name_terms(name)
    if not words:
        return False
    if any(words <= overlap(words, terms(scope, keep=frozenset({"without"}))) for scope in fix.removal):
        return True
    pattern = name_pattern(name)
    return len(pattern.findall(fix.removed)) > len(pattern.findall(fix.added))


# -- values ------------------------------------------------------------------------------------------

def _allows(statement: Statement, value: Value) -> bool:
    """The statement allows the value (same quantity: equal, or within its bound)."""
    same = [v for v in statement.values if v.quantity == value.quantity]
    for allowed in same:
        if allowed.bound == "max" and value.number <= allowed.number + 1e-9:
            return True
        if allowed.bound == "min" and value.number >= allowed.number - 1e-9:
            return True
        if abs(allowed.number - value.number) <= 1e-9 * max(1.0, abs(value.number)):
            return True
    return False


def _forbids(statement: Statement, value: Value) -> bool:
    return any(v.quantity == value.quantity and abs(v.number - value.number) < 1e-9 for v in statement.forbidden_values)


def _topic(statement: Statement) -> set[str]:
    return statement.subject - _QUANTITY_WORDS


def fix_values(fix: FixText) -> list[tuple[Value, str]]:
    """The values a fix states (each with its clause), not those of a past-tense account of the
    problem or after "from" ("from 30 to 60 s" states 60)."""
    found = []
    for clause in fix.clauses:
        if _PAST.search(clause):
            continue
        for value in values_in(clause):
            at = clause.find(value.text)
            if not re.search(r"\bfrom\s+$", clause[:at]):
                found.append((value, clause))
    return found


def value_conflicts(statements: list[Statement], fix: FixText) -> list[Contradiction]:
    """A fix value that the best-matching statement of its quantity does not allow, or that a
    matching statement explicitly forbids ("never 1")."""
    out: list[Contradiction] = []
    for value, clause in fix_values(fix):
        near = terms(clause)
        scored = []
        for s in statements:
            if not any(v.quantity == value.quantity for v in s.values + s.forbidden_values):
                continue
            topic = _topic(s)
            score = 2 * len(overlap(topic, near)) + len(overlap(topic, fix.whole))
            if score:
                scored.append((score, len(overlap(topic, fix.whole)), s))
        if not scored:
            continue
        forbidding = [s for _, shared, s in scored if shared >= 2 and _forbids(s, value)]
        best = max(score for score, _, _ in scored)
        top = [s for score, _, s in scored if score == best]
        culprit = forbidding[0] if forbidding else None if any(_allows(s, value) for s in top) else top[0]
        if culprit is not None and (forbidding or any(v.quantity == value.quantity for v in culprit.values)):
            stated = [describe(v) for v in culprit.values if v.quantity == value.quantity and not (forbidding and _forbids(culprit, v))]
            never = [describe(v) for v in culprit.forbidden_values if v.quantity == value.quantity]
            said = " and ".join(stated) + (f", never {', '.join(never)}" if never else "")
            out.append(Contradiction(culprit, "changed_value", f"{culprit.source} says {said.strip(', ')}; the fix states {describe(value)}"))
    return out


# -- modality ----------------------------------------------------------------------------------------

def _synonyms(verb: str) -> set[str]:
    return next((group for group in _SYNONYMS if any(same_term(verb, g) for g in group)), {verb})


def action_conflict(statement: Statement, fix: FixText) -> str | None:
    """What the fix does that a ``never`` sentence prohibits (its action, on its subject and objects)."""
    blocks = [*fix.clauses, fix.added] if fix.added else fix.clauses
    verbs = set().union(*(_synonyms(v) for v in statement.action))
    for block in blocks:
        words = terms(block, keep=frozenset({"file", "files"}))
        done = overlap(words, verbs)
        applies = all(not part or overlap(part, words) for part in (statement.objects, statement.target))
        if done and overlap(statement.specific, words) and applies:
            named = done | overlap(words, statement.specific | statement.objects | statement.target)
            said = [w for w in re.findall(r"[\w.]+", block) if overlap(terms(w), named)]
            return f"{statement.source} says “{statement.scope}”; the fix does it: {' '.join(dict.fromkeys(said))}"
    return None


def only_conflict(statement: Statement, fix: FixText) -> str | None:
    """Something other than the one allowed thing sent where an ``only`` sentence allows one thing."""
    carriers = statement.specific
    for clause in fix.clauses:
        if re.search(r"\bonly\b", clause, re.IGNORECASE):
            continue
        for verb in _OUTPUT_VERB.finditer(clause):
            rest = clause[verb.end():]
            target = re.search(r"\b(?:on|to|into)\s+(?:the\s+)?([\w-]+)", rest)
            if target and overlap({lemma(target.group(1))}, carriers) and not overlap(terms(rest[: target.start()]), statement.allowed):
                sent = rest[: target.start()].strip()
                return f"{statement.source} says “{statement.scope}”; the fix sends {sent} to {target.group(1)} with {verb.group(0)}"
    return None


# -- all of it ---------------------------------------------------------------------------------------

def contradictions(statements: list[Statement], description: str, diff: str | None) -> list[Contradiction]:
    """Every contradiction between a fix and the statements, at most one per statement."""
    fix = read_fix(description, diff)
    found: dict[int, Contradiction] = {}
    prose = prose_names(statements)
    for c in value_conflicts(statements, fix):
        found.setdefault(id(c.statement), c)
    for s in statements:
        if id(s) in found:
            continue
        back = [n for n in s.forbidden_names if brought_back(n, fix, n in prose)]
        if back:
            found[id(s)] = Contradiction(s, "forbidden_name", f"the fix brings back {', '.join(f'`{n}`' for n in back)}, which {s.source} rules out")
            continue
        negated = action_conflict(s, fix) if s.action else only_conflict(s, fix) if s.allowed else None
        if negated:
            found[id(s)] = Contradiction(s, "negated_modality", negated)
            continue
        if s.modality != "never":
            gone = [n for n in s.names if taken_away(n, fix)]
            if gone:
                found[id(s)] = Contradiction(s, "removed_step", f"the fix removes {', '.join(f'`{n}`' for n in gone)}, which {s.source} requires")
    return list(found.values())

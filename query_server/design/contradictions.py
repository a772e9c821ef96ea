"""Does a fix contradict a statement of the design? The four checks behind ``validate_fix``.

A fix (its description, and the added and removed lines of its diff) contradicts a
``Statement`` (see ``statements``) when it

* **changes a value**: states a number of the same quantity (time, count, size, percent, exit
  status, a rate, a version) on the statement's topic that the statement does not allow ("at
  most 3 times" → 10 times; "5 seconds to connect" → 60 s; "exit with code 2 …, never 1" → 1;
  "TLS 1.2 is the minimum" → TLS 1.0), or a diff line changes a number the statement gives
  (``MetadataCallTimeout = 2 * time.Second`` → ``60 * time.Second`` where the design says 2 s);
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
from dataclasses import dataclass, field
from typing import Literal

from query_server.design.statements import (
    COUNT_NOUNS,
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
from resources.text.identifiers import identifier_words

Kind = Literal["changed_value", "negated_modality", "forbidden_name", "removed_step"]

_REMOVAL = re.compile(
    r"\b(?:no longer|stop(?:s|ped)?\s+(?=\w+ing\b)|skip(?:s|ped|ping)?|drop(?:s|ped|ping)?|remov(?:e|es|ed|ing)|delet(?:e|es|ed|ing)|"
    r"disabl(?:e|es|ed|ing)|bypass(?:es|ed|ing)?|without|instead of|rather than|get rid of|rip(?:s|ped)? out|omit(?:s|ted)?|"
    r"turn(?:s|ed)? off)\b",
    re.IGNORECASE,
)
_TAKEN_OUT = re.compile(r"\b(?:t(?:ake|akes|ook|aken)|pull(?:s|ed)?|rip(?:s|ped)?|turn(?:s|ed)?|switch(?:es|ed)?|cut(?:s)?)\s+((?:\w[\w.-]*\s+){0,4}?\w[\w.-]*)\s+(?:out|off)\b",
                        re.IGNORECASE)
"""A removal with its object between the verb and the particle ("took the lookup out", "turned scrubbing off")."""
_NEGATED = re.compile(r"\b(?:not|never|don't|doesn't|didn't|do not|does not|isn't|aren't|won't|no)\b", re.IGNORECASE)
_SCOPE_END = re.compile(r"[,;:.!?]\s|[,;:.!?]$|\)|\b(?:so|because|but|since|and then|when|while|which)\b", re.IGNORECASE)
_PAST = re.compile(r"\b(?:used to|previously|was|were|had been|kept|before this)\b|(?<!days )(?<!hours )(?<!weeks )(?<!months )(?<!years )\bold\b", re.IGNORECASE)
_OUTPUT_VERB = re.compile(r"\b(?:print|prints|printed|write|writes|show|shows|emit|emits|echo|echoes|output|outputs|display|displays|log|logs|send|sends|add|adds|put|puts)\b", re.IGNORECASE)
_SYNONYMS = [
    {lemma(w) for w in group.split()}
    for group in ("write save store persist", "retry reattempt resend re-send re-try", "publish upload release push",
                  "edit modify rewrite amend", "call invoke", "log logger logging dump trace print",
                  "contain carry include expose leak embed echo", "order sort rank", "set enable turn",
                  "create build construct instantiate spawn open")
]
_QUANTITY_WORDS = {lemma(w) for w in UNITS if len(w) > 2 and w not in COUNT_NOUNS} | {"exit", "status", "code", "return"}
"""Unit words, which say how a value is measured, not what it is about (counted nouns such as
"requests" or "parts" do say what it is about)."""


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
    steps: list[str] = field(default_factory=list)
    """The removal scopes that take a step away ("skip the zod parse", "without waiting for a
    co-signer"), not those that describe a condition ("a task without a subject")."""
    step_words: list[set[str]] = field(default_factory=list)
    """The terms of each of ``steps``, the verbs of checking counted as one (``_with_synonyms``)."""


def _cut_scopes(text: str, cue: re.Pattern[str], cues: list[str] | None = None) -> tuple[str, list[str]]:
    """``text`` without the scopes of ``cue`` (cue to clause end), and those scopes (``cues``
    collects the cue words of each scope)."""
    scopes: list[str] = []
    kept, at = [], 0
    for match in cue.finditer(text):
        if match.start() < at:
            continue
        end = _SCOPE_END.search(text, match.end())
        stop = end.start() if end else len(text)
        kept.append(text[at:match.start()])
        scopes.append(text[match.end():stop])
        if cues is not None:
            cues.append(match.group(0))
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
    taken_out = [m.group(1) for m in _TAKEN_OUT.finditer(description)]
    cues: list[str] = []
    affirmed, removal = _cut_scopes(_TAKEN_OUT.sub(" ", description), _REMOVAL, cues)
    steps = [scope for cue, scope in zip(cues, removal, strict=True)
             if not re.fullmatch(r"without|instead of|rather than", cue, re.IGNORECASE) or re.match(r"\s*\w+ing\b", scope)] + taken_out
    removal += taken_out
    affirmed, _ = _cut_scopes(affirmed, _NEGATED)
    clauses = [c.strip() for c in re.split(r"(?<=[.!?;:])\s+|,\s+(?:so|and|but)\s+|\s+so\s+|\s\(|\)(?=\s|$)", affirmed) if c.strip()]
    added, removed = diff_lines(diff, "+"), diff_lines(diff, "-")
    return FixText(clauses=clauses, removal=removal, added=added, removed=removed,
                   whole=terms(f"{description}\n{added}\n{removed}"), steps=steps,
                   step_words=[_with_synonyms(terms(step)) for step in steps])


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
    where its removed lines had it already). An import path (``crypto/md5``) is brought back by
    its package used as code too (``md5.New()``), and by its mention: a path is code, not prose."""
    pattern = name_pattern(name)
    described = " ".join(fix.clauses)
    if "/" in name.strip("/"):
        package = name.rstrip("/").rsplit("/", 1)[1]
        if pattern.search(described) or (not re.fullmatch(r"v\d+", package) and brought_back(package, fix, True)):
            return True
    if re.search(rf"`{re.escape(name)}[\s:.(]", described, re.IGNORECASE):  # `knex migrate:latest`
        return True
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
    if re.fullmatch(r"[A-Z]{2,5}(?:-?\d{1,3})?", name):  # an acronym (TLS, SHA-256) names a topic: fewer mentions are not a removal
        return False
    pattern = _spelling_pattern(name)
    return len(pattern.findall(fix.removed)) > len(pattern.findall(fix.added))


def _spelling_pattern(name: str) -> re.Pattern[str]:
    """A code name in any of its spellings: ``notification_failures``, ``notificationFailures``,
    ``NotificationFailures``, ``notification-failures``."""
    words = identifier_words(name) if re.fullmatch(r"[A-Za-z][\w-]*", name) else []
    if len(words) < 2:
        return name_pattern(name)
    return re.compile(r"(?<![\w\-/])" + r"[_-]?".join(re.escape(w) for w in words) + r"(?![\w\-])", re.IGNORECASE)


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
        for value in values_in(clause, articles=True):
            at = clause.find(value.text)
            if not re.search(r"\bfrom\s+$", clause[:at]):
                found.append((value, clause))
    return found


_MEASURE_WORDS = {lemma(w) for w in ("timeout", "limit", "deadline", "budget", "threshold", "cap", "size", "default", "value",
                                      "duration", "interval", "delay", "ttl", "maximum", "minimum", "max", "min")}
"""Words that say what kind of value it is, not whose ("the hook timeout" is not "the graph query timeout")."""
VALUE_WINDOW = 80
"""Characters on each side of a stated value whose words say what the value is about."""


def _value_topic(statement: Statement, quantity: str) -> set[str]:
    """The topic of a statement's values of one quantity: the words around them ("every metadata
    store call a deadline of 2 s"), not those of a long sentence's other clauses."""
    found: set[str] = set()
    for value in statement.values + statement.forbidden_values:
        at = statement.sentence.find(value.text) if value.quantity == quantity else -1
        if at >= 0:
            found |= terms(statement.sentence[max(0, at - VALUE_WINDOW): at + len(value.text) + VALUE_WINDOW])
    return (found or statement.subject) - _QUANTITY_WORDS - _MEASURE_WORDS


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
            topic = _value_topic(s, value.quantity)
            score = 2 * len(overlap(topic, near)) + len(overlap(topic, fix.whole))
            if overlap(topic, near) or len(overlap(topic, fix.whole)) >= 2:
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


_DIGITS = re.compile(r"\d+(?:\.\d+)?")


def _skeleton(line: str) -> str:
    return " ".join(_DIGITS.sub("#", line).split())


def changed_lines(diff: str | None) -> list[tuple[str, str]]:
    """(removed, added) line pairs of a diff that differ only in their numbers
    (``MetadataCallTimeout = 2 * time.Second`` → ``= 60 * time.Second``)."""
    pairs: list[tuple[str, str]] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        for old, new in zip(removed, added, strict=False):
            if old.strip() != new.strip() and _skeleton(old) == _skeleton(new):
                pairs.append((old, new))
        removed.clear()
        added.clear()

    for line in (diff or "").splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            if added:
                flush()
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            flush()
    flush()
    return pairs


def _stated_digits(value: Value) -> str | None:
    """The number a value is written with (``8 MiB`` → 8, ``TLS 1.2`` → 12, ``30 days`` → 30)."""
    found = _DIGITS.search(value.text.replace(",", ""))
    if not found:
        return None
    return found.group(0).replace(".", "") if value.quantity.startswith("version:") else found.group(0)


def diff_value_conflicts(statements: list[Statement], diff: str | None) -> list[Contradiction]:
    """A diff line that changes a number the design states, on its topic, to one it does not allow
    (``MinPartSize = 8 << 20`` → ``1 << 20`` where the design says parts of at least 8 MiB)."""
    out: list[Contradiction] = []
    for old_line, new_line in changed_lines(diff):
        near = terms(f"{old_line} {new_line}")
        olds, news = _DIGITS.findall(old_line), _DIGITS.findall(new_line)
        for old, new in zip(olds, news, strict=False):
            if old == new:
                continue
            best: tuple[int, Statement, Value] | None = None
            for statement in statements:
                shared = len(overlap(_topic(statement), near))
                for value in statement.values + statement.forbidden_values:
                    stated = _stated_digits(value)
                    if shared and stated is not None and float(stated) == float(old) and (best is None or shared > best[0]):
                        best = (shared, statement, value)
            if best is None:
                continue
            _, statement, value = best
            version = value.quantity.startswith("version:")
            before, after = (float(old.replace(".", "")), float(new.replace(".", ""))) if version else (float(old), float(new))
            if value.bound == "max" and after <= before or value.bound == "min" and after >= before:
                continue
            out.append(Contradiction(statement, "changed_value",
                                     f"{statement.source} says {describe(value)}; the fix changes {old} to {new} in `{' '.join(new_line.split())[:80]}`"))
            break
    return out


# -- modality ----------------------------------------------------------------------------------------

def synonyms(verb: str) -> set[str]:
    """The verb's group of synonyms (``write`` → save, store, persist …), or the verb alone."""
    return next((group for group in _SYNONYMS if any(same_term(verb, g) for g in group)), {verb})


def action_conflict(statement: Statement, fix: FixText) -> str | None:
    """What the fix does that a ``never`` sentence prohibits (its action, on its subject and objects)."""
    blocks = [*fix.clauses, fix.added] if fix.added else fix.clauses
    verbs = set().union(*(synonyms(v) for v in statement.action))
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


_STEP_SYNONYMS = [{lemma(w) for w in group.split()} for group in ("validate verify check parse",)]


def _with_synonyms(words: set[str]) -> set[str]:
    grown = set(words)
    for group in _STEP_SYNONYMS:
        if any(same_term(w, g) for w in words for g in group):
            grown |= group
    return grown


def removed_in_words(statement: Statement, fix: FixText) -> str | None:
    """A removal scope of the fix ("skip the zod parse and their changes are written as they
    arrive") that shares at least two of the required sentence's terms (the verbs of checking —
    validate, verify, check, parse — counted as one): the step described in words is taken away."""
    topic = statement.subject - _QUANTITY_WORDS
    for scope, words in zip(fix.steps, fix.step_words, strict=True):
        if len(overlap(topic, words)) >= 2:
            return " ".join(scope.split())
    return None


def tension(statements: list[Statement], fix: FixText) -> float:
    """Half the evidence of a contradiction (0, 0.5 or 1), for ranking fixes that contradict
    nothing outright: the fix takes away something on a required sentence's topic (a removal
    scope sharing one of its terms), or does a prohibited action (the verb or a synonym) on a
    sentence's topic. It lowers an aligned fix's score, never makes a conflict."""
    found = 0.0
    affirmed = [terms(c) for c in fix.clauses]
    for s in statements:
        topic = s.subject - _QUANTITY_WORDS
        if s.modality != "never" and any(overlap(topic, words) for words in fix.step_words):
            found = max(found, 0.5 if s.modality == "fact" else 1.0)
        if s.action:
            verbs = set().union(*(synonyms(v) for v in s.action))
            if any(overlap(words, verbs) and overlap(words, topic - s.action) for words in affirmed):
                found = max(found, 1.0)
    return found


# -- all of it ---------------------------------------------------------------------------------------

def contradictions(statements: list[Statement], description: str, diff: str | None) -> list[Contradiction]:
    """Every contradiction between a fix and the statements, at most one per statement."""
    return contradictions_in(statements, read_fix(description, diff), diff)


def contradictions_in(statements: list[Statement], fix: FixText, diff: str | None) -> list[Contradiction]:
    """``contradictions`` of a fix already read (``read_fix``), with its raw diff."""
    found: dict[int, Contradiction] = {}
    prose = prose_names(statements)
    for c in value_conflicts(statements, fix) + diff_value_conflicts(statements, diff):
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
                continue
            step = removed_in_words(s, fix)
            if step:
                found[id(s)] = Contradiction(s, "removed_step", f"the fix takes away “{step}”, which {s.source} requires: “{s.sentence}”")
    return list(found.values())

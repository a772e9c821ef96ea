"""Does a proposed fix follow the project's decisions? The rule reading behind ``validate_fix``.

Design decisions and requirements are read as rules: each normative sentence (must, never,
only, always, shall, do not, instead of …) splits into what it *prohibits* and what it
*requires*. A fix (its words, and the added and removed lines of its diff) is read as concepts
it *introduces* and concepts it *removes or bypasses*. Words map to concepts through a small
lexicon of software terms (``sqlite3``/``SELECT``/``cursor`` → database, ``time.sleep`` →
sleep, ``token``/``password`` → secret …) plus their stems, so a fix need not repeat the
decision's wording.

A rule is relevant when the fix shares its topic (embedding similarity of the sentence and the
fix, or shared concepts). A relevant rule is violated when the fix introduces what it prohibits
without the required alternative, or removes or bypasses what it requires. The embedding model
alone cannot tell "use the repository" from "bypass the repository" (both are close in
meaning); the rule reading can, and the model decides relevance.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from query_server.design.contradictions import Contradiction, contradictions_in, diff_lines, synonyms, tension
from query_server.design.contradictions import read_fix as read_statement_fix
from query_server.design.statements import STOPWORDS, Statement, clean, overlap, statements_of, terms

if TYPE_CHECKING:
    import numpy as np
from resources.memory.ledger import MemoryRow
from resources.text.identifiers import IDENTIFIER, identifier_words, suffix_stem

RELEVANCE_THRESHOLD = 0.30
NOTHING_GOVERNS = 0.75
"""The score of a side (designs, requirements) no statement of which bears on the fix."""
TENSION_PENALTY = 0.15
"""How much half the evidence of a contradiction lowers an aligned fix's overall score (from at
least 0.7, so it stays above the 0.5 of a conflict)."""
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n\s*[-*+]\s+|\n{2,}")
_NEGATION = re.compile(
    r"\b(must not|mustn't|shall not|should not|shouldn't|never|do not|don't|not allowed|not permitted|forbidden|"
    r"prohibited|avoid|instead of|rather than)\b(?!\s*(?:be\s+)?(?:more|less|fewer|longer|later|larger|higher|greater)\s+than\b)"
    r"|(?:^|[:;]\s*)no\s+(?!(?:more|less|fewer|longer|later)\s+than\b)(?=\w)|\b(?:exposes?|has|have|with|uses?|contains?|takes?)\s+no\s+(?=\w)",
    re.IGNORECASE,
)
_REQUIRE = re.compile(r"\b(must|shall|always|only|required|requires|need to|needs to|should|are to|is to|go through|goes through|chosen option)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[,;:()]|\.(?:\s|$)|\b(?:but|only|instead|so|because|which|and then)\b", re.IGNORECASE)
_NEGATION_AFTER = re.compile(r"\b(?:is|are|be)\s+(?:never|not)\s+(?:used|allowed|permitted)\b|\b(?:forbidden|prohibited|disallowed)\b", re.IGNORECASE)
_PUBLIC_METHOD = re.compile(
    r"\bpublic\s+(?:\S+\s+){0,2}?(?:method|methods|function|api)\b|\b(?:method|helper|function)\b(?:\s+\S+){0,4}?\s+public\b", re.IGNORECASE
)
_SWALLOW = re.compile(r"\bexcept\b[^:\n]{0,40}:\s*(?:pass|continue|\.\.\.)\b|\bcatch\s*\([^)]*\)\s*\{\s*\}", re.IGNORECASE)
_SQL = re.compile(r"\bSELECT\b[^;]{1,200}?\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|\bCREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)\b", re.IGNORECASE)
_PRONOUN_REMOVAL = re.compile(r"\b(?:remove|delete|drop|get rid of|rip out)\s+(?:it|them|this|that)\b", re.IGNORECASE)
_REMOVAL = re.compile(
    r"\b(remove|removes|removing|drop|drops|dropping|delete|deletes|deleting|bypass|bypasses|bypassing|skip|skips|skipping|"
    r"disable|disables|disabling|circumvent|avoid|avoiding|get rid of|instead of|rather than|without|replace|replaces|replacing|"
    r"strip|stripping|go around|going around|sidestep|sidestepping|ditch|rip out|didn't want|did not want|don't want|"
    r"no need for|not worth|skipped)\b",
    re.IGNORECASE,
)
CONCEPTS: dict[str, tuple[str, ...]] = {
    "database": ("database", "databases", "db", "sql", "sqlite", "sqlite3", "postgres", "postgresql", "mysql", "cursor", "orm",
                 "sqlalchemy", "psycopg", "psycopg2", "db connection", "database connection"),
    "repository": ("repository", "repositories", "repo", "dao", "taskrepository", "data access"),
    "sleep": ("sleep", "time.sleep", "sleeps", "sleeping", "wait", "waits", "waiting", "busy-wait", "delay", "pause"),
    "loop": ("loop", "loops", "while", "for", "spin", "poll", "polling"),
    "retry": ("retry", "retries", "retrying", "retried", "tenacity", "backoff", "back-off", "reattempt", "attempts", "stop_after_attempt", "wait_exponential"),
    "secret": ("secret", "secrets", "token", "tokens", "password", "passwords", "api key", "apikey", "api_key", "credential",
               "credentials", "bearer"),
    "hardcode": ("hard-code", "hard-coded", "hardcode", "hardcoded", "hard code", "hard coded", "literal", "inline the", "embed the key", "paste",
                 "written in the source", "in the source code", "in source code", "checked into", "committed to the repo"),
    "environment": ("environment", "os.environ", "getenv", "dotenv", "environ", "from_env", "env.get", "env var", "env vars"),
    "print": ("print", "prints", "printing", "print(", "stdout", "console.log", "println", "printf", "echo"),
    "logging": ("log", "logs", "logging", "logger", "structlog", "log.info", "log.warning", "log.error"),
    "raise": ("raise", "raises", "raising", "throw", "throws", "throwing", "propagate", "propagates", "bubble"),
    "exception": ("exception", "exceptions", "error", "errors", "valueerror", "runtimeerror", "keyerror", "typeerror"),
    "swallow": ("swallow", "swallows", "swallowing", "silence", "silently", "except: pass", "suppress", "suppressing"),
    "failure_result": ("agentresult.failure", "failure result", "result.failure", "failure(", "return a failure", "failed result"),
    "http": ("http", "https", "requests", "httpx", "urllib", "aiohttp", "fetch", "endpoint", "url", "get(", "post("),
    "client": ("client", "clients", "ratelimitedclient", "rate-limited client", "session", "rate limiter", "limiter", "rate limit", "rate-limit", "throttle"),
    "subclass": ("subclass", "subclasses", "inherit", "inherits", "extend", "extends", "baseagent", "base class"),
    "validation": ("validate", "validates", "validation", "validating", "check", "checks", "checking", "verify", "sanitize"),
    "global_state": ("global", "globals", "singleton", "module-level", "shared state", "mutable default"),
    "thread": ("thread", "threads", "threading", "asyncio", "concurrent", "concurrency", "async"),
    "cache": ("cache", "caches", "caching", "memoize", "lru_cache"),
    "success_result": ("agentresult.success", "result.success", "success(", "return success", "returning success", "report success", "mark it as success", "empty success"),
    "catch": ("catch", "catches", "catching", "except", "try/except", "try:", "rescue"),
    "shared": ("shared", "injected", "self.client", "self._client", "common client", "existing client", "the same client"),
    "no_default": ("no default", "without a default", "without default"),
    "default_value": ("default value", "as a default", "as the default", "default it to", "defaults to", "default to", "fall back to",
                      "falls back to", "fallback to", "default it", "a default of"),
    "public_method": ("public method", "public methods", "public api", "expose it", "expose them", "exposes it", "make it public",
                      "made public", "make them public"),
    "direct": ("directly", "direct", "bypass", "bypasses", "bypassing", "straight to", "straight into", "straight from", "circumvent", "go around", "going around"),
}
_PHRASES = sorted(((term, concept) for concept, terms in CONCEPTS.items() for term in terms if (" " in term or "." in term or "(" in term or "-" in term or ":" in term)), key=lambda tc: -len(tc[0]))
_TERM_CONCEPT = {term: concept for concept, terms in CONCEPTS.items() for term in terms if " " not in term}
GENERIC_CONCEPTS = frozenset({"loop", "exception", "validation", "logging"})
"""Concepts too common to make a rule relevant on their own."""


def _identifier(word: str) -> bool:
    """A code identifier (CamelCase with two humps, snake_case, or with digits), not a plain word."""
    return bool(re.search(r"[a-z][A-Z]|_|\d", word)) and len(word) > 3


def concepts(text: str, *, plain_words: bool = False) -> set[str]:
    """The concepts a text mentions: lexicon concepts and code identifiers (lower-cased); with
    ``plain_words``, stems of its other content words too."""
    found: set[str] = set()
    if _PUBLIC_METHOD.search(text):
        found.add("public_method")
    if _SWALLOW.search(text):
        found.add("swallow")
    if _SQL.search(text):
        found.add("database")
    for phrase, concept in _PHRASES:
        pattern = (r"\b" if phrase[0].isalnum() else "") + re.escape(phrase) + (r"\b" if phrase[-1].isalnum() else "")
        if re.search(pattern, text, re.IGNORECASE):
            found.add(concept)
            text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    for raw in IDENTIFIER.findall(text):
        if raw.lower() in _TERM_CONCEPT:
            found.add(_TERM_CONCEPT[raw.lower()])
            if _identifier(raw):
                found.add(raw.lower())
            continue
        if _identifier(raw):
            found.add(raw.lower())
        for word in identifier_words(raw, humps_only=True):
            if word in _TERM_CONCEPT:
                found.add(_TERM_CONCEPT[word])
            elif plain_words and word not in STOPWORDS and len(word) > 2 and not word.isdigit():
                found.add(suffix_stem(word))
    return found


@dataclass
class Rule:
    """A normative sentence of a design or requirement."""

    row: MemoryRow
    source: str
    sentence: str
    prohibited: set[str] = field(default_factory=set)
    required: set[str] = field(default_factory=set)
    prohibited_words: set[str] = field(default_factory=set)


def _clauses_after(pattern: re.Pattern[str], sentence: str) -> list[str]:
    clauses = []
    for match in pattern.finditer(sentence):
        rest = sentence[match.end():]
        end = _CLAUSE_END.search(rest)
        clauses.append(rest[: end.start()] if end else rest)
    return clauses


def _clauses_before(pattern: re.Pattern[str], sentence: str) -> list[str]:
    """The clause before each match ("`print` is not used": the prohibited thing comes first)."""
    clauses = []
    for match in pattern.finditer(sentence):
        before = sentence[: match.start()]
        starts = [m.end() for m in re.finditer(r"[;:()]|\.(?:\s|$)", before)]
        clauses.append(before[starts[-1] if starts else 0:])
    return clauses


def _chosen_option(sentence: str) -> str | None:
    match = re.search(r"chosen option:?\s*\"?([^\",]+)\"?", sentence, re.IGNORECASE)
    return match.group(1) if match else None


def rules_of(row: MemoryRow) -> list[Rule]:
    """The normative sentences of a design (its decision, else its content) or a requirement."""
    if row.memory_type == "design":
        text = row.metadata.get("decision") or row.content
        source = row.metadata.get("title") or row.content.splitlines()[0]
    else:
        text = row.metadata.get("description") or row.content
        source = row.metadata.get("requirement_id") or row.content.splitlines()[0]
    found = []
    for sentence in _SENTENCE_SPLIT.split(text):
        sentence = clean(sentence.strip(" *-\n"))
        if len(sentence) < 12:
            continue
        negative = _NEGATION.search(sentence) or _NEGATION_AFTER.search(sentence)
        positive = _REQUIRE.search(sentence) or _chosen_option(sentence) or row.memory_type == "requirements"
        if not negative and not positive:
            continue
        rule = Rule(row=row, source=str(source), sentence=sentence)
        prohibited_text = " ".join(_clauses_after(_NEGATION, sentence) + _clauses_before(_NEGATION_AFTER, sentence))
        whole = bool(negative) and negative.start() == 0 and not re.search(r"\b(only|instead|but)\b", sentence, re.IGNORECASE)
        rule.prohibited = concepts(prohibited_text)
        rule.prohibited_words = concepts(prohibited_text, plain_words=True)
        chosen = _chosen_option(sentence)
        positive_text = re.sub(_NEGATION.pattern + r"[^,;:()]*", " ", sentence, flags=re.IGNORECASE)
        rule.required = concepts(chosen) if chosen else (set() if whole else concepts(positive_text))
        if whole:  # "No token, password or secret is written in the source": all of it is prohibited
            rule.prohibited = concepts(sentence)
        rule.required -= rule.prohibited
        rule.prohibited -= rule.required
        found.append(rule)
    return found


@dataclass
class FixReading:
    """What a fix introduces and what it removes or bypasses."""

    introduced: set[str]
    removed: set[str]
    bypass: bool
    words: set[str] = field(default_factory=set)


def read_fix(description: str, diff: str | None) -> FixReading:
    """Concepts a fix introduces and removes (its words, and its diff's added and removed lines)."""
    removed_text = " ".join(_clauses_after(_REMOVAL, description))
    replace = re.findall(r"\breplac\w*\s+(.+?)\s+with\s+(.+?)(?:[.;,]|$)", description, re.IGNORECASE)
    removed = concepts(removed_text)
    introduced_text = _REMOVAL.sub(" ", description)
    for old, new in replace:
        removed |= concepts(old)
        introduced_text = introduced_text.replace(old, " ")
        introduced_text += " " + new
    for clause in _clauses_after(_REMOVAL, description):
        introduced_text = introduced_text.replace(clause, " ")
    introduced = concepts(introduced_text)
    pronoun = _PRONOUN_REMOVAL.search(description)
    if pronoun:  # "validate() is redundant. Delete it": the code named before goes
        named = " ".join(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*\(\)", description[: pronoun.start()]))
        removed |= concepts(named)
        introduced -= concepts(named)
    if diff:
        added, dropped = diff_lines(diff, "+"), diff_lines(diff, "-")
        added_concepts, dropped_concepts = concepts(added), concepts(dropped)
        introduced |= added_concepts - dropped_concepts
        removed |= dropped_concepts - added_concepts
    lower = description.lower()
    bypass = bool(re.search(r"\b(directly|bypass\w*|around the|straight (?:to|into|from)|raw)\b", lower))
    words = concepts(introduced_text + "\n" + (diff or ""), plain_words=True)
    # a name replaced by a variant of itself (sha256 → sha256simd) is kept, not removed
    removed = {r for r in removed if not any(len(r) >= 4 and r != i and (r in i or i in r) for i in introduced)}
    return FixReading(introduced=introduced - removed, removed=removed, bypass=bypass, words=words)


def _unit(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def judge(rule: Rule, fix: FixReading, design_required: set[str]) -> tuple[str, str | None]:
    """'conflicts' (with the reason), 'supports' or 'related' for one relevant rule.

    ``design_required``: what the rule's design requires on the same topic (the alternative it
    offers to what it prohibits).
    """
    required_key = rule.required - GENERIC_CONCEPTS
    prohibited_key = rule.prohibited - GENERIC_CONCEPTS
    removed_required = (rule.required - {"loop", "exception", "logging"}) & fix.removed
    if removed_required:
        return "conflicts", f"the fix removes or bypasses what the rule requires ({', '.join(sorted(removed_required))})"
    hit = prohibited_key & fix.introduced
    alternative = (required_key | (design_required - prohibited_key)) & fix.introduced
    if hit and len(hit) >= min(2, len(prohibited_key)) and (not alternative or "direct" in hit or fix.bypass):
        return "conflicts", f"the fix introduces what the rule prohibits ({', '.join(sorted(hit))})"
    if fix.bypass and required_key and (required_key & fix.introduced) and not required_key <= fix.introduced:
        return "conflicts", f"the fix goes around what the rule requires ({', '.join(sorted(required_key - fix.introduced))})"
    if (required_key & fix.introduced) or (prohibited_key & fix.removed):
        return "supports", None
    return "related", None


@dataclass
class NamingRule:
    """A code pattern's naming convention: subclasses of ``base`` are named with ``naming``."""

    row: MemoryRow
    base: str
    naming: dict[str, str]


_CAMEL = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")


def naming_conflicts(rule: NamingRule, text: str, known_classes: set[str]) -> list[str]:
    """New class names in a fix that extends ``rule.base`` but breaks its naming convention."""
    if not re.search(rf"\b{re.escape(rule.base)}\b", text):
        return []
    bad = []
    for name in dict.fromkeys(_CAMEL.findall(text)):
        if name == rule.base or name in known_classes:
            continue
        ok = all(name.endswith(word) if side == "suffix" else name.startswith(word) for side, word in rule.naming.items())
        if not ok:
            bad.append(name)
    return bad


@dataclass
class SignatureRule:
    """A code pattern's contract: implementations of ``base`` (``implementations``) keep these signatures."""

    row: MemoryRow
    base: str
    implementations: set[str]
    contract: dict[str, list[str]]
    """method name → its parameter names (receiver excluded)."""
    language: str


def signature_conflicts(rule: SignatureRule, text: str) -> list[str]:
    """Contract methods a fix declares with other parameters, on the base or one of its implementations."""
    from query_server.design.signatures import signature_shape

    names = {rule.base, *rule.implementations}
    if not any(re.search(rf"\b{re.escape(n)}\b", text) for n in names if n):
        return []
    drifted = []
    for method, params in rule.contract.items():
        for match in re.finditer(rf"\b{re.escape(method)}\s*\(([^()]*)\)", text):
            shape, _ = signature_shape(f"{method}({match.group(1)})", rule.language)
            got = [n for n, _ in shape]
            if got and got != params and not (len(got) == 1 and got[0] in ("...", "")):
                drifted.append(f"{method}({match.group(1).strip()})")
    return drifted


def _covers(rule: Rule, statement: Statement) -> bool:
    """The rule and the statement are read from the same sentence (or one holds the other)."""
    return rule.row.id == statement.row.id and (statement.sentence in rule.sentence or rule.sentence in statement.sentence)


def _checked_elsewhere(rule: Rule, fix: FixReading, fix_text: str, checkable: Sequence[Statement]) -> bool:
    """The statement check read this rule's prohibition more exactly and found the fix clear of
    it: the sentence forbids names (``requests`` → http; the name check found none brought back), or
    an action on a subject (``POST, PUT … requests are never retried``, "other 4xx answers are
    never retried") the fix does not name."""
    words = None
    for s in checkable:
        if not _covers(rule, s):
            continue
        if s.forbidden_names and not s.action:  # a sentence that bans names: the name check is the exact reading
            return True
        if s.action and s.specific and s.restricted:
            words = terms(fix_text, keep=frozenset({"file", "files"})) if words is None else words
            if not overlap(s.specific, words) and not s.specific & fix.words:
                return True
    return False


_CALLED = re.compile(r"([A-Za-z_]\w*)\s*\(")


def _action_absent(rule: Rule, description: str, added: str, fix: FixReading, checkable: Sequence[Statement]) -> bool:
    """The sentence prohibits an action ("never *log* personal data", "never *stores* a client-supplied
    digest") and the fix does not do it: neither the verb (or a synonym) in its description or the
    functions its added lines call, nor the verb's concept, is in the fix; sharing the sentence's
    nouns (tokens, client, an ``h.Store`` receiver) is not a conflict."""
    actions = [s.action for s in checkable if _covers(rule, s) and s.action]
    if not actions:
        return False
    words = terms(f"{description} {' '.join(_CALLED.findall(added))}", keep=frozenset({"file", "files"}))
    for action in actions:
        verbs = set().union(*(synonyms(v) for v in action))
        if overlap(words, verbs) or concepts(" ".join(action)) & fix.introduced:
            return False
    return True


def _conflict_statement(contradiction: Contradiction, relevance: float, statement_model: Any) -> Any:
    """A contradiction as a ``conflicts`` statement that quotes the sentence and says what differs."""
    s = contradiction.statement
    return statement_model(
        memory_id=s.row.id, memory_type=s.row.memory_type, source=s.source, source_document=s.row.metadata.get("source_document"),
        statement=s.sentence, relevance=round(max(relevance, RELEVANCE_THRESHOLD), 4), verdict="conflicts",
        reason=contradiction.differs, kind=contradiction.kind, differs=contradiction.differs,
    )


def assess_fix(
    embedder: Any,
    description: str,
    diff: str | None,
    designs: Sequence[MemoryRow],
    requirements: Sequence[MemoryRow],
    component_terms: Sequence[str],
    statement_model: Any,
    result_model: Any,
    naming_rules: Sequence[NamingRule] = (),
    known_classes: set[str] | None = None,
    signature_rules: Sequence[SignatureRule] = (),
    context: str = "",
) -> Any:
    """Score a fix against the rules of the given designs and requirements (see module doc)."""
    rules = [r for row in designs for r in rules_of(row)] + [r for row in requirements for r in rules_of(row)]
    if not designs and not requirements:
        return result_model(
            design_alignment_score=0.5, requirements_alignment_score=0.5, overall_alignment_score=0.5, verdict="no_design_context",
            conflicts=[], related_designs=[], related_requirements=[],
            recommendation="no designs or requirements are stored: add ADRs/requirements to the docs and run `codemem index`, or memory_add them",
        )
    fix = read_fix(description, diff)
    added = diff_lines(diff, "+")
    fix_text = description + ("\n" + diff_lines(diff, "+-") if diff else "")
    checkable = [s for row in [*designs, *requirements] for s in statements_of(row)]
    statement_fix = read_statement_fix(description, diff)
    found = contradictions_in(checkable, statement_fix, diff)
    sentences = [r.sentence for r in rules] + [c.statement.sentence for c in found]
    import numpy as np  # here: a process that checks no fix never loads numpy

    relevance = np.zeros(len(sentences))
    if sentences:
        vectors = _unit(np.asarray(embedder.embed_documents([fix_text[:4_000]] + sentences), dtype=np.float32))
        relevance = vectors[1:] @ vectors[0]
    component = {c.lower() for c in component_terms}
    statements: dict[str, list[Any]] = {"design": [], "requirements": []}
    conflicts = []
    by_design: dict[str, list[Rule]] = {}
    for rule in rules:
        by_design.setdefault(rule.row.id, []).append(rule)

    def alternatives(rule: Rule) -> set[str]:
        """What the rule's own design requires on the same topic (the allowed way to do it)."""
        topic = rule.prohibited - GENERIC_CONCEPTS
        found: set[str] = set()
        for other in by_design[rule.row.id]:
            if other is not rule and (other.required | other.prohibited) & topic:
                found |= other.required - GENERIC_CONCEPTS
        return found

    contradicted = [(c, float(score)) for c, score in zip(found, relevance[len(rules):], strict=True)]
    for rule, score in zip(rules, relevance[: len(rules)], strict=True):
        shared = (rule.required | rule.prohibited) & (fix.introduced | fix.removed)
        specific = (shared - GENERIC_CONCEPTS) | (shared & fix.removed)
        topical = score >= RELEVANCE_THRESHOLD or bool(specific) or any(c in rule.sentence.lower() for c in component)
        if not topical or (not specific and score < RELEVANCE_THRESHOLD + 0.1):
            continue
        if any(_covers(rule, c.statement) for c, _ in contradicted):
            continue  # the statement check says how the fix contradicts this sentence
        verdict, reason = judge(rule, fix, alternatives(rule))
        if verdict == "conflicts" and (_checked_elsewhere(rule, fix, fix_text, checkable) or _action_absent(rule, description, added, fix, checkable)):
            verdict, reason = "related", None  # the prohibition was read and checked: the fix does not break it
        statement = statement_model(
            memory_id=rule.row.id, memory_type=rule.row.memory_type, source=rule.source,
            source_document=rule.row.metadata.get("source_document"), statement=rule.sentence,
            relevance=round(float(score), 4), verdict=verdict, reason=reason,
        )
        statements[rule.row.memory_type].append(statement)
        if verdict == "conflicts":
            conflicts.append(statement)
    for contradiction, score in contradicted:
        statement = _conflict_statement(contradiction, score, statement_model)
        statements[contradiction.statement.row.memory_type].append(statement)
        conflicts.append(statement)
    for naming in naming_rules:
        names = naming_conflicts(naming, f"{description}\n{added}", known_classes or set())
        if names:
            wanted = " and ".join(f"{'end' if side == 'suffix' else 'start'} with {word!r}" for side, word in naming.naming.items())
            statement = statement_model(
                memory_id=naming.row.id, memory_type="code_pattern", source=naming.row.metadata.get("pattern_name") or naming.base,
                source_document=None, statement=f"{naming.base} implementations' class names {wanted}", relevance=1.0,
                verdict="conflicts", reason=f"new class {', '.join(names)} breaks the naming convention of {naming.base} implementations",
            )
            statements["design"].append(statement)
            conflicts.append(statement)
    for contract in signature_rules:
        drifted = signature_conflicts(contract, f"{context}\n{description}\n{added}")
        if drifted:
            expected = "; ".join(f"{m}({', '.join(p)})" for m, p in contract.contract.items())
            statement = statement_model(
                memory_id=contract.row.id, memory_type="code_pattern", source=contract.row.metadata.get("pattern_name") or contract.base,
                source_document=None, statement=f"{contract.base} implementations keep the contract: {expected}", relevance=1.0,
                verdict="conflicts", reason=f"the fix declares {', '.join(drifted)}, which differs from the {contract.base} contract",
            )
            statements["design"].append(statement)
            conflicts.append(statement)
    for items in statements.values():
        items.sort(key=lambda s: (s.verdict != "conflicts", -s.relevance))

    def score_of(items: list[Any]) -> float | None:
        if any(s.verdict == "conflicts" for s in items):
            worst = max(s.relevance for s in items if s.verdict == "conflicts")
            return round(max(0.05, 0.35 - 0.3 * worst), 4)
        if not items:
            return None
        support = [s.relevance for s in items if s.verdict == "supports"]
        best = max(support) if support else max(s.relevance for s in items) * 0.5
        return round(min(1.0, 0.7 + 0.3 * math.tanh(2 * best)), 4)

    design_score, requirement_score = score_of(statements["design"]), score_of(statements["requirements"])
    judged = [(w, v) for w, v in ((0.6, design_score), (0.4, requirement_score)) if v is not None]
    overall = round(sum(w * v for w, v in judged) / sum(w for w, _ in judged), 4) if judged else NOTHING_GOVERNS
    if conflicts:  # a conflict on either side caps the whole
        overall = round(min(overall, min(v for _, v in judged) + 0.1), 4)
    else:  # half the evidence of a contradiction ranks the fix lower, staying aligned
        overall = round(overall - TENSION_PENALTY * tension(checkable, statement_fix), 4)
    design_score = NOTHING_GOVERNS if design_score is None else design_score
    requirement_score = NOTHING_GOVERNS if requirement_score is None else requirement_score
    if conflicts:
        first = conflicts[0]
        recommendation = f"Revise the fix: it conflicts with {first.source} — \"{first.statement}\"" + (f" ({first.reason})" if first.reason else "")
    elif statements["design"] or statements["requirements"]:
        recommendation = "Fix aligns with the related designs and requirements"
    else:
        recommendation = "No stored design or requirement governs this change; nothing to conflict with"
    return result_model(
        design_alignment_score=design_score, requirements_alignment_score=requirement_score, overall_alignment_score=overall,
        verdict="conflicts" if conflicts else "aligned", conflicts=conflicts[:20],
        related_designs=[s for s in statements["design"] if s.verdict != "conflicts"][:10],
        related_requirements=[s for s in statements["requirements"] if s.verdict != "conflicts"][:10], recommendation=recommendation,
    )

"""Checkable statements read from design decisions and requirements (``validate_fix``, issue 20).

Each sentence of an ADR's decision (or a requirement's description) becomes a ``Statement``: its
modality (``must``, ``never``, ``only``, or ``fact`` for a plain present-tense decision such as
"GET requests are retried at most 3 times"), its subject terms, the action a negated sentence
prohibits, its values (numbers with units and bounds: "at most 3 times", "5 seconds", "exit with
code 2 ... never 1"), and the code names it requires or forbids (backticked, CamelCase, dotted,
snake_case, acronyms, and the items of an enumeration that "is not used"). The reading is
linguistic (modal words, negation scope, numbers and units, code-name shapes), not a lexicon of
the project's topics; ``contradictions`` compares a fix against these statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from resources.text.identifiers import identifier_words

STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "from", "by", "with", "as", "is", "are", "be", "been", "being", "it", "its", "this", "that", "these", "those", "we", "our", "you", "your", "they", "their", "must", "shall", "should", "never", "always", "only", "not", "no", "do", "does", "don't", "can", "cannot", "may", "might", "will", "would", "could", "all", "any", "each", "every", "some", "one", "two", "into", "onto", "than", "then", "there", "here", "when", "while", "where", "which", "who", "what", "why", "how", "so", "such", "also", "just", "more", "most", "less", "least", "very", "use", "uses", "used", "using", "instead", "rather", "add", "adds", "added", "adding", "make", "makes", "made", "new", "fix", "fixes", "fixed", "change", "changes", "changed", "update", "updates", "call", "calls", "called", "calling", "code", "file", "files", "function", "functions", "method", "methods", "class", "classes", "via", "through", "go", "goes", "going", "per", "own", "other", "same", "get", "gets", "set", "sets", "have", "has", "had", "if", "else", "because", "way", "ones", "thing", "things", "need", "needs"]
)
"""Words too common to tell one statement's topic from another's."""
OBJECT_WORDS = frozenset({"file", "files", "code", "function", "functions", "method", "methods", "class", "classes"})
"""Stopwords that still name what a prohibited action applies to ("written to … any other file")."""

_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<!etc\.)(?<=[.!?;])\s+(?=\S)")
_MORE = "more|longer|larger|bigger|higher|later|greater"
_LESS = "less|fewer|shorter|smaller|lower|earlier"
"""The comparatives of an upper bound ("no more than 5") and of a lower one ("not less than 2")."""
_NEGATION = re.compile(
    r"(?:\b(?:must not|mustn't|shall not|should not|may not|do not|does not|don't|doesn't|is not|are not|isn't|aren't|is never|are never|never)\b"
    rf"|^\s*no\s+(?=\w))(?!\s*(?:be\s+)?(?:{_MORE}|{_LESS})\s+than\b)"
    r"(?!\s*exceed)",
    re.IGNORECASE,
)
"""A negation; "no more than 5", "never longer than 30 seconds", "must not exceed" are bounds, not prohibitions."""
_ONLY = re.compile(r"\b(?:only|exactly one|nothing else|exclusively)\b", re.IGNORECASE)
_MUST = re.compile(r"\b(?:must|shall|always|required|requires|need to|needs to|have to|has to)\b", re.IGNORECASE)
_CONDITION = re.compile(r"\b(?:when|if|unless|while|where|whenever)\b", re.IGNORECASE)
_CLAUSE_STOP = re.compile(r"[,;:]|\s\(|\)(?=\s|$)|\sby\s|\.(?:\s|$)|\b(?:and then|but|except|because|so that|which|when|if|unless|while|where)\b", re.IGNORECASE)
_USE_VERB = re.compile(
    r"\b(?:use[ds]?|using|call(?:s|ed)?|import(?:s|ed)?|depend\w*|dependency|support(?:s|ed)?|allow(?:s|ed)?|permit(?:s|ted)?|"
    r"include[ds]?|install(?:s|ed)?|rel(?:y|ies|ied)|add(?:s|ed)?|introduce[ds]?|set|enabled?|enables|turned on)\b",
    re.IGNORECASE,
)
"""Verbs after which a negation forbids names ("argparse is not used", "never call `sys.exit()`")."""

_IRREGULAR = {"written": "write", "wrote": "write", "sent": "send", "made": "make", "kept": "keep", "ran": "run", "gave": "give",
              "given": "give", "taken": "take", "took": "take", "read": "read", "built": "build", "chosen": "choose"}
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "sixty": 60, "hundred": 100, "twice": 2}
COUNT_NOUNS: tuple[str, ...] = ("request", "requests", "call", "calls", "change", "changes", "item", "items", "part", "parts", "row", "rows",
    "record", "records", "message", "messages", "event", "events", "entry", "entries", "connection", "connections",
    "object", "objects", "operator", "operators", "approver", "approvers", "reviewer", "reviewers", "replica",
    "replicas", "node", "nodes", "page", "pages", "batch", "batches", "character", "characters", "char", "chars",
    "line", "lines", "worker", "workers", "thread", "threads", "rps", "qps")
"""Counted nouns: "120 requests", "500 changes" are counts (digits only: "one record" is wording)."""
UNITS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), ("time", 0.001)),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), ("time", 1.0)),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), ("time", 60.0)),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), ("time", 3600.0)),
    **dict.fromkeys(("day", "days"), ("time", 86400.0)),
    **dict.fromkeys(("week", "weeks"), ("time", 604800.0)),
    **dict.fromkeys(("month", "months"), ("time", 2592000.0)),
    **dict.fromkeys(("year", "years"), ("time", 31536000.0)),
    **dict.fromkeys(("time", "times", "attempt", "attempts", "retry", "retries", "try", "tries"), ("count", 1.0)),
    **dict.fromkeys(COUNT_NOUNS, ("count", 1.0)),
    **dict.fromkeys(("b", "byte", "bytes"), ("size", 1.0)),
    **dict.fromkeys(("tb", "tib", "terabytes"), ("size", 1024.0**4)),
    **dict.fromkeys(("kb", "kib", "kilobytes"), ("size", 1024.0)),
    **dict.fromkeys(("mb", "mib", "megabytes"), ("size", 1024.0**2)),
    **dict.fromkeys(("gb", "gib", "gigabytes"), ("size", 1024.0**3)),
    **dict.fromkeys(("%", "percent"), ("percent", 1.0)),
}
"""Unit word → (quantity, factor to its base unit)."""
_EXIT_BEFORE = re.compile(r"\b(?:exit|exits|exited|exiting|return|returns|returned|status|code)\s+(?:\w+\s+){0,2}$", re.IGNORECASE)
_EXIT_CONTEXT = re.compile(r"\bexit (?:status|code)|\bexit statuses\b|\breturn codes?\b", re.IGNORECASE)
_MAX = re.compile(
    rf"\b(?:at most(?:\s+(?:once\s+)?every)?|up to|(?:no|not|never) (?:{_MORE}) than|(?:not |never )?exceed(?:s|ing)?|"
    r"maximum of|max(?:imum)?|within|under|less than|below|fewer than|capped at|cap of|limit of|limited to)\s+(?:a\s+)?$",
    re.IGNORECASE,
)
_MIN = re.compile(
    rf"\b(?:at least(?:\s+(?:once\s+)?every)?|minimum of|min(?:imum)?|(?:no|not|never) (?:{_LESS}) than|more than|over|above)\s+$",
    re.IGNORECASE,
)
_MIN_AFTER = re.compile(r"^\s*(?:(?:is|as) the\s+)?(?:minimum|min\b|lowest|or (?:more|higher|later|above|newer))", re.IGNORECASE)
_MAX_AFTER = re.compile(r"^\s*(?:(?:is|as) the\s+)?(?:maximum|max\b|highest|or (?:less|fewer|lower|below|earlier))", re.IGNORECASE)
"""A bound written after its number ("TLS 1.2 minimum", "10 or fewer")."""
_EVERY = re.compile(r"\b(?:at least|at most)\s+(?:once\s+)?every\s+$", re.IGNORECASE)
"""A frequency ("at least every 30 days"): its bound is on the interval, the other way round."""
_PERIOD = re.compile(r"^\s*(?:/\s*|per\s+|an?\s+|each\s+)(s|sec|second|min|minute|h|hr|hour|day|week|month)s?\b", re.IGNORECASE)
"""A rate's period after its number ("120 requests per minute", "20 MB/s", "1000 calls a minute")."""
_VERSION = re.compile(r"\b([A-Z][A-Za-z]{1,12})\s?v?(\d+(?:\.\d+)+)\b")
"""A versioned name ("TLS 1.2", "Python 3.11", "TLSv1.3"): a value of the quantity ``version:<name>``."""
_NUMBER = re.compile(
    r"(?<![\w.\-,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|(?:" + "|".join(_NUMBER_WORDS) + r")(?![A-Za-z]))"
    r"(?![\w.]\d)(?:\s*(?:-\s*)?(%|[A-Za-z]+\b))?",
    re.IGNORECASE,
)
_LIST_GAP = re.compile(r"(?:\s*(?:,|/|and|or)\s*|\s*\d+(?:\.\d+)?\s*)*", re.IGNORECASE)
_NOT_NAMES = frozenset({"OS", "API", "CLI", "ADR", "URL", "UTC", "ID"})
_BACKTICK = re.compile(r"`([^`]+)`")
_NAME_SHAPE = re.compile(
    r"(?<![\w./-])(?:[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?:\(\))?|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:_[a-z0-9]+)+|"
    r"[A-Z][A-Z0-9]+(?:-\d+)?|--?[a-z][\w-]*)(?![\w-])"
)


def lemma(word: str) -> str:
    """A light lemma for comparing words: lower-cased, plural and verb endings stripped, a final
    ``e`` dropped (``retried``/``retries`` → ``retry``, ``saves``/``saved`` → ``sav``)."""
    word = _IRREGULAR.get(word.lower(), word.lower())
    if len(word) > 4 and word.endswith(("ies", "ied")):
        word = word[:-3] + "y"
    elif len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed") or len(word) > 4 and word.endswith("es") and word[-3] in "sxzh":
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


def terms(text: str, keep: frozenset[str] = frozenset()) -> set[str]:
    """The content-word lemmas of a text (code identifiers split into their words); ``keep``:
    stopwords to keep."""
    found: set[str] = set()
    for raw in re.findall(r"[A-Za-z][A-Za-z0-9_]*", text):
        acronym = raw.isupper() and len(raw) > 2
        for word in identifier_words(raw) if re.search(r"[a-z][A-Z]|_", raw) else [raw.lower()]:
            if len(word) > 2 and (word not in STOPWORDS or word in keep or acronym) and not word.isdigit():
                found.add(lemma(word))
    return found


def same_term(a: str, b: str) -> bool:
    """Two lemmas name the same thing: equal, or one a prefix of at least 5 letters of the other
    (``config`` and ``configuration``)."""
    short, long_ = sorted((a, b), key=len)
    return a == b or (len(short) >= 5 and long_.startswith(short))


def overlap(a: set[str], b: set[str]) -> set[str]:
    """The terms of ``a`` that match a term of ``b``."""
    return {x for x in a if any(same_term(x, y) for y in b)}


def clean(text: str) -> str:
    """A sentence on one line: markdown bullets and emphasis dropped, whitespace collapsed."""
    return " ".join(_BULLET.sub("", text).replace("**", "").split()).strip()


@dataclass(frozen=True)
class Value:
    """A number a statement or a fix states: its quantity (``time``, ``count``, ``size``,
    ``percent``, ``exit``) in base units, and whether it is a bound (``max``/``min``) or exact."""

    number: float
    quantity: str
    bound: str
    text: str


def describe(value: Value) -> str:
    """A value as a reader would say it (``exit status 1``, ``30 seconds``, ``at most 3 times``)."""
    text = value.text.strip("` ")
    if re.fullmatch(r"[\d.]+", text):
        text = f"exit status {text}" if value.quantity == "exit" else f"{text} ({value.quantity})"
    return {"max": "at most ", "min": "at least "}.get(value.bound, "") + text


@dataclass
class Statement:
    """A checkable sentence of a design or requirement."""

    row: Any
    source: str
    sentence: str
    modality: str
    """``must``, ``never``, ``only`` or ``fact``."""
    subject: set[str] = field(default_factory=set)
    """Content terms of the sentence (its lead-in's too, for a list item)."""
    specific: set[str] = field(default_factory=set)
    """Terms of the negated subject that single it out (``POST, PUT … requests`` → post, put …)."""
    action: set[str] = field(default_factory=set)
    """What a ``never`` sentence prohibits doing (lemmas of the verb after the negation)."""
    objects: set[str] = field(default_factory=set)
    """The terms the prohibited action applies to (``raise exceptions`` → exception)."""
    target: set[str] = field(default_factory=set)
    """Where the prohibited action goes (``written to the configuration file``, ``… to the router``)."""
    values: list[Value] = field(default_factory=list)
    forbidden_values: list[Value] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    """Code names the statement requires (positive sentences)."""
    forbidden_names: list[str] = field(default_factory=list)
    allowed: set[str] = field(default_factory=set)
    """For ``only`` sentences: the terms of what alone is allowed (``exactly one JSON document``)."""
    scope: str = ""
    """The words of the prohibition or restriction, as written ("never retried automatically")."""
    restricted: bool = False
    """The prohibition applies to a singled-out part of its subject (``POST … requests``, "other 4xx
    answers", "unsigned artifacts"), not to the whole kind ("agents")."""


_PERIOD_SECONDS = {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hr": 3600.0, "hour": 3600.0,
                   "day": 86400.0, "week": 604800.0, "month": 2592000.0}
_RANGE = re.compile(r"\s*(?:to|-|–|and|through)\s*", re.IGNORECASE)
_ARTICLE_NUMBER = re.compile(
    r"\b(?:(?:a|an|one)\s+(?:full|whole|entire)\s+|(?:for|within|after|than|to|about)\s+(?:a|an|one)\s+)(minute|hour|day|week|month|year)\b", re.IGNORECASE)


def _bound_before(before: str) -> str:
    """``max``, ``min`` or ``eq``: the bound the words before a number set ("at most", "at least")."""
    return "max" if _MAX.search(before[-30:]) else "min" if _MIN.search(before[-30:]) else "eq"


def _bound_after(after: str) -> str:
    """``min``, ``max`` or ``eq``: the bound the words after a number set ("minimum", "or fewer")."""
    return "min" if _MIN_AFTER.search(after) else "max" if _MAX_AFTER.search(after) else "eq"


def _version_number(text: str) -> float:
    """A dotted version as one comparable number (``1.10`` after ``1.9``)."""
    parts = [int(p) for p in text.split(".")[:3]] + [0, 0]
    return parts[0] * 1e6 + parts[1] * 1e3 + parts[2]


def values_in(text: str, context: str = "", articles: bool = False) -> list[Value]:
    """The numbers of a text with their units (``15-second`` and ``1, 2 and 4 seconds`` included);
    rates by their period (``120 requests per minute``, ``20 MB/s``); versions of a name (``TLS
    1.2``, quantity ``version:tls``); an exit status by the word before it (``exit with code 2``);
    a bound before or after the number (``at most 3``, ``TLS 1.2 minimum``); a number without a
    unit takes the one quantity of ``context`` (``never 1`` after ``code 2``), else it is skipped.
    ``articles``: "a full minute", "a month" count as one of their unit (a fix's wording)."""
    found: list[tuple[int, int, float, str | None, float, str]] = []
    versions = list(_VERSION.finditer(text))
    for match in _NUMBER.finditer(text):
        if any(v.start() <= match.start() < v.end() for v in versions):
            continue
        raw, unit = match.group(1).lower(), (match.group(2) or "").lower()
        number = float(_NUMBER_WORDS[raw]) if raw in _NUMBER_WORDS else float(raw.replace(",", ""))  # 1,500
        before = text[: match.start()]
        quantity, factor = UNITS.get(unit, (None, 1.0))
        if raw in _NUMBER_WORDS and unit in COUNT_NOUNS:  # "one record", "two changes": wording, not a limit
            quantity = None
        if raw == "twice":
            quantity = "count"
        if quantity is None and _EXIT_BEFORE.search(before[-40:]):
            quantity = "exit"
        end = match.end() if unit in UNITS else match.end(1)
        bound = _bound_before(before)
        every = _EVERY.search(before[-30:])
        if every:
            bound = "max" if every.group(0).lower().startswith("at least") else "min"
        if bound == "eq":
            bound = _bound_after(text[end:])
        found.append((match.start(), end, number, quantity, factor, bound))
    out: list[Value] = []
    spans: list[tuple[int, int]] = []
    taken: list[tuple[int, int]] = []
    for i, (start, end, number, quantity, factor, bound) in enumerate(found):
        if quantity is None:  # "1, 2 and 4 seconds", "1/2/4 second": the unit of the list's last number
            following = next((f for f in found[i + 1:] if f[3]), None)
            if following and _LIST_GAP.fullmatch(text[end:following[0]]):
                quantity, factor = following[3], following[4]
                bound = following[5] if bound == "eq" else bound
        if quantity is None and context:
            quantities = {v.quantity for v in values_in(context)} or ({"exit"} if _EXIT_CONTEXT.search(context) else set())
            quantity = next(iter(quantities)) if len(quantities) == 1 else None
        if quantity is not None:
            period = _PERIOD.match(text[end:]) if quantity in ("count", "size") else None
            if period:
                quantity, factor = f"{quantity}/s", factor / _PERIOD_SECONDS[period.group(1).lower().rstrip("s") or "s"]
                taken.append((end, end + period.end()))
            out.append(Value(number * factor, quantity, bound, text[start:end + (period.end() if period else 0)].strip()))
            spans.append((start, end + (period.end() if period else 0)))
    for i in range(len(out) - 1):  # "8 MiB to 512 MiB", "between 2 and 5 seconds": a range
        (_, b), (c, _) = spans[i], spans[i + 1]
        if out[i].quantity == out[i + 1].quantity and out[i].bound == out[i + 1].bound == "eq" and _RANGE.fullmatch(text[b:c]):
            out[i], out[i + 1] = replace(out[i], bound="min"), replace(out[i + 1], bound="max")
    for match in versions:
        after = text[match.end():]
        bound = "min" if _MIN_AFTER.search(after) or _MIN.search(text[: match.start()][-30:]) else (
            "max" if _MAX_AFTER.search(after) or _MAX.search(text[: match.start()][-30:]) else "eq")
        out.append(Value(_version_number(match.group(2)), f"version:{match.group(1).lower()}", bound, match.group(0)))
    if articles:
        for match in _ARTICLE_NUMBER.finditer(text):
            if any(a <= match.start() < b for a, b in taken):
                continue
            quantity, factor = UNITS[match.group(1).lower()]
            bound = _bound_before(text[: match.start()])
            out.append(Value(factor, quantity, bound, match.group(0)))
    return out


def _names(text: str) -> list[str]:
    """Code names in a text: backticked spans, dotted names, CamelCase, snake_case, acronyms, flags."""
    names = [m.strip().removesuffix("()") for m in _BACKTICK.findall(text) if not m.strip().isdigit()]
    rest = _BACKTICK.sub(" ", text)
    names += [m.removesuffix("()") for m in _NAME_SHAPE.findall(rest) if len(m) > 1 and m not in _NOT_NAMES]
    return list(dict.fromkeys(names))


def _enumeration_items(subject: str) -> list[str]:
    """The one-word items of an enumeration ("argparse, docopt and typer")."""
    items = re.split(r",\s*|\s+(?:and|or|nor)\s+", _BACKTICK.sub(lambda m: m.group(1), subject).strip())
    # an item of two or three words led by a proper name ("Knex migrations") is that name
    items = [i.split()[0] if re.fullmatch(r"[A-Z][\w.-]*(?:\s+[\w.-]+){1,2}", i.strip()) and i.split()[0] not in ("The", "A", "An", "Any", "All")
             else i for i in items]
    words = [i.strip() for i in items if re.fullmatch(r"[A-Za-z][\w.-]*", i.strip())]
    return words if len(words) >= 2 else []


_WITHOUT = re.compile(r"\bwithout\b", re.IGNORECASE)


def _scope_after(sentence: str, start: int) -> str:
    """The clause from ``start`` to the next clause boundary (a condition ends it too)."""
    rest = sentence[start:]
    end = _CLAUSE_STOP.search(rest)
    return rest[: end.start()] if end else rest


def _subject_before(sentence: str, end: int) -> str:
    """The clause before a negation: from the last clause boundary (``, and``, ``;``) to ``end``."""
    before = sentence[:end]
    cuts = [m.end() for m in re.finditer(r"[;:]|\s\(|\)\s|,\s*(?:and|but)\s+|\.(?:\s|$)", before)]
    return before[cuts[-1] if cuts else 0:]


def _clause_before(sentence: str, end: int) -> str:
    """The clause before a negation, parentheses included ("the device's clock (`clientUpdatedAt`) is never used")."""
    before = sentence[:end]
    cuts = [m.end() for m in re.finditer(r"[;:]|,\s*(?:and|but)\s+|\.(?:\s|$)", before)]
    return before[cuts[-1] if cuts else 0:]


def _main_text(sentence: str) -> str:
    """The sentence without parentheses and condition clauses ("when stdin is not a TTY")."""
    text = re.sub(r"\s\([^)]*\)", " ", sentence)
    return re.sub(r"\b(?:when|if|unless|whenever)\b[^,;]*(?:,|$)", " ", text, flags=re.IGNORECASE)


def _verb(scope: str) -> str:
    """The lemma of the first content word of a negated scope ("retried automatically" → retry)."""
    words = [w for w in re.findall(r"[A-Za-z]+", scope) if w.lower() not in STOPWORDS and w.lower() not in ("be", "automatically")]
    return lemma(words[0]) if words else ""


def _specific(subject: str) -> set[str]:
    """What singles out a negated subject: its names or enumeration items, else a negative
    adjective (``unsigned``), else its terms."""
    named = {n.lower() for n in _names(subject) + _enumeration_items(subject)}
    negative = {lemma(w) for w in re.findall(r"\b(?:un|non-?)[a-z]{4,}\b", subject, re.IGNORECASE)}
    return named or negative or terms(subject)


def _is_restricted(subject: str) -> bool:
    """The subject singles out a part of a kind: names, an enumeration, a number, a negative
    adjective or "other"."""
    return bool(_names(subject) or _enumeration_items(subject) or re.search(r"\d|\b(?:other|un[a-z]{4,}|non-?[a-z]{3,})\b", subject, re.IGNORECASE))


def _read_negation(statement: Statement, sentence: str) -> None:
    """Fill the prohibited action, its objects, specific subject terms and forbidden names."""
    main = _main_text(sentence)
    for match in _NEGATION.finditer(main):
        scope = _scope_after(main, match.end())
        subject = _subject_before(main, match.start())
        if _USE_VERB.search(" ".join(scope.split()[:4])) or re.match(r"\s*no\b", match.group(0), re.IGNORECASE):
            whole = next((m for m in _NEGATION.finditer(sentence) if m.group(0).lower() == match.group(0).lower()), None)
            named = _WITHOUT.split(_clause_before(sentence, whole.start()) if whole else subject)[0]
            statement.forbidden_names += _names(scope) + _names(named) + _enumeration_items(_WITHOUT.split(subject)[0])
        elif _verb(scope):
            statement.scope = f"{statement.scope}; {main[match.start():match.end() + len(scope)]}".strip("; ")
            statement.action.add(_verb(scope))
            to = re.search(r"\b(?:to|into|onto)\b", scope)
            direct, target = (scope[: to.start()], scope[to.end():]) if to else (scope, "")
            statement.objects |= {t for t in terms(direct, keep=OBJECT_WORDS) - statement.action if not t.endswith("ly")}
            statement.target |= terms(target, keep=OBJECT_WORDS)
            statement.specific |= _specific(subject)
            statement.restricted = statement.restricted or _is_restricted(subject)


def _read_only(statement: Statement, sentence: str) -> None:
    """``X carries exactly one Y and nothing else``: X's terms are the subject, Y's the allowed."""
    match = _ONLY.search(sentence)
    if match:
        statement.specific = terms(_subject_before(sentence, match.start()).split(",")[-1])
        statement.scope = sentence[match.start():match.end() + len(_scope_after(sentence, match.end()))]
        statement.allowed = terms(statement.scope)


_BANNED = re.compile(r"\b(?:banned|forbidden|prohibited|disallowed|not (?:allowed|permitted|used)|never used|must not be used|may not be used)\b",
                     re.IGNORECASE)
"""A list's lead-in that bans what its items name ("The following are not allowed in the gateway:")."""
_POSITIVE_START = re.compile(r"^\W*(?:use|prefer|instead|only|always)\b", re.IGNORECASE)


def _banned_item(row: Any, source: str, sentence: str) -> Statement | None:
    """A list item under a banning lead-in: the names it gives are forbidden."""
    names = _names(re.split(r"\s(?:for|except|unless|outside)\s", sentence, maxsplit=1)[0])
    if not names or _POSITIVE_START.search(sentence) or _ONLY.search(sentence):
        return None
    return Statement(row=row, source=source, sentence=sentence, modality="never", subject=terms(sentence), forbidden_names=names,
                     scope="not allowed")


def statement_of(row: Any, source: str, sentence: str, lead_in: str = "") -> Statement | None:
    """The statement of one sentence (``None`` when it holds nothing checkable)."""
    if lead_in and _BANNED.search(lead_in) and not _NEGATION.search(sentence):
        banned = _banned_item(row, source, sentence)
        if banned is not None:
            return banned
    main = _main_text(sentence)
    negated = _NEGATION.search(main)
    modality = "never" if negated else "only" if _ONLY.search(main) else "must" if _MUST.search(main) else "fact"
    statement = Statement(row=row, source=source, sentence=sentence, modality=modality, subject=terms(sentence))
    context = f"{lead_in} {sentence}"
    statement.values = [v for v in values_in(sentence, context) if not _is_forbidden_value(sentence, v)]
    statement.forbidden_values = [v for v in values_in(sentence, context) if _is_forbidden_value(sentence, v)]
    if negated:
        _read_negation(statement, sentence)
    elif modality == "only":
        _read_only(statement, sentence)
    statement.names = [n for n in _names(sentence) if n not in statement.forbidden_names]
    statement.forbidden_names = list(dict.fromkeys(statement.forbidden_names))
    if not (statement.values or statement.forbidden_values or statement.names or statement.forbidden_names or statement.action
            or statement.allowed or len(statement.subject) >= 3):
        return None
    return statement


def _is_forbidden_value(sentence: str, value: Value) -> bool:
    """A value in the scope of a negation (``never 1``, ``not 0``)."""
    at = sentence.find(value.text)
    return at > 0 and bool(re.search(rf"\b(?:never|not|no)\s+(?!(?:be\s+)?(?:{_MORE}|{_LESS})\s+than)"
                                     r"(?:\w+\s+){0,2}$", sentence[:at], re.IGNORECASE))


def sentences(text: str) -> list[tuple[str, str]]:
    """(sentence, lead-in) pairs of a markdown text: list items carry the paragraph line that
    introduced the list ("… a fixed set of exit statuses:"); sentences are on one line."""
    out: list[tuple[str, str]] = []
    lead_in = ""
    text = _table_rows(text)
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        if not block.strip():
            continue
        item = bool(_BULLET.match(block))
        flat = clean(block)
        if not item:
            lead_in = flat if flat.endswith(":") else ""
        for sentence in _SENTENCE_END.split(flat):
            if len(sentence) >= 8:
                out.append((sentence.strip(), lead_in if item else ""))
    return out


_TABLE_LINE = re.compile(r"^\s*\|(.+)\|\s*$")
_TABLE_RULE = re.compile(r"^[\s|:-]+$")


def _table_rows(text: str) -> str:
    """A markdown table's rows as list items of their own ("| push | 120 per minute |" → "- push —
    120 per minute"), introduced by the header's cells, so that each row is one statement."""
    lines, out, header = text.splitlines(), [], None
    for i, line in enumerate(lines):
        row = _TABLE_LINE.match(line)
        if not row:
            header = None
            out.append(line)
            continue
        if _TABLE_RULE.match(line):
            continue
        cells = [c.strip() for c in row.group(1).split("|")]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if header is None and _TABLE_RULE.match(following) and "-" in following:
            header = cells
            out.append("")
            out.append(" — ".join(cells) + ":")
            continue
        out.append("- " + " — ".join(c for c in cells if c))
    return "\n".join(out)


def statements_of(row: Any) -> list[Statement]:
    """The checkable statements of a design (its decision, else its content) or a requirement."""
    if row.memory_type == "design":
        text, source = row.metadata.get("decision") or row.content, row.metadata.get("title") or row.content.splitlines()[0]
    else:
        text, source = row.metadata.get("description") or row.content, row.metadata.get("requirement_id") or row.content.splitlines()[0]
    found = (statement_of(row, str(source), sentence, lead_in) for sentence, lead_in in sentences(text))
    return [s for s in found if s is not None]

"""Structural similarity of two functions, for duplicate detection (REQ-MEM-VER-003).

A sentence-embedding model rates ``sum_positive`` and ``sum_negative`` as near-identical and a
renamed copy of a function as only loosely related (all-MiniLM-L6-v2 reads the name words
first). Token structure says the opposite, and says it reliably:

* **clone** — with local identifiers abstracted, both functions have the same tokens, in any
  order (renamed identifiers, reordered independent statements): a duplicate.
* **variant** — the same shape with a few *semantic* tokens changed (an operator, a literal, an
  API or member name: ``<`` vs ``>``, ``LOCK_EX`` vs ``LOCK_UN``, ``1000`` vs ``1024``), or the same
  tokens with two variables swapped (``b - a`` vs ``a - b``): similar code, different behaviour.
* **other** — different shapes (a loop rewritten as a comprehension, say): the embedding decides,
  unless the two names say the functions do opposite things (``lock``/``unlock``, ``encode``/
  ``decode``, ``x_to_y``/``y_to_x``), which the embedding cannot see.

Tokens come from one regular expression for every supported language (comments and Python
docstrings dropped). Identifiers are abstracted to ``ID`` unless they are keywords, member or
path names (after ``.``, ``?.``, ``::``) or called names (before ``(``): those name APIs, which a
copy keeps and a variant swaps. Members of ``self``/``this``/a Go receiver are the type's own
state and are abstracted like locals. The function's own name is abstracted.
"""

from __future__ import annotations

import bisect
import difflib
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from resources.text.identifiers import identifier_words

if TYPE_CHECKING:
    import numpy as np

Verdict = Literal["clone", "variant", "other"]

MAX_VARIANT_EDIT = 16
"""Most token edits (multiset difference) a variant may have; more is a rewrite, not a tweak."""
MIN_VARIANT_SEQUENCE = 0.8
"""Least sequence ratio for a variant: the same statements in the same order, a few tokens changed."""
MIN_CLONE_BAG = 0.9
"""Least token-bag overlap (Dice) for a clone whose differences are syntax only."""
MIN_TOKENS = 12
"""Functions shorter than this (in tokens) are too small for a structural verdict."""
CLONE_FLOOR = 0.96
"""A clone's score is at least this (above every threshold ``find_duplicates`` accepts)."""
VARIANT_PENALTY = 0.2
"""Subtracted from a variant's cosine, which puts it under the default threshold (0.85)."""
OPPOSITE_NAMES_PENALTY = 0.15
"""Subtracted from the cosine of differently shaped functions whose names are opposites."""
STRUCTURE_COSINE_FLOOR = 0.25
"""Candidates below this index cosine are not compared (noise). A short renamed copy without its
docstring embeds low: 0.39 for a five-line function of toolz (bench.duplicates --dev)."""
CODE_COSINE_FLOOR = 0.6
"""Differently shaped candidates below this index cosine are not re-embedded (they keep it)."""
MAX_CODE_EMBEDDINGS = 1
"""Most candidates re-embedded per query (the best by index cosine): bounds the latency and the CPU
one check takes from concurrent calls (8, 4, 2 and 1 score the same on bench.duplicate_accuracy;
2 and 1 on bench.duplicates --dev)."""
MAX_CODE_EMBED_CHARS = 250
"""Code re-embedded per function: its start (~60–110 word pieces). The encoding time grows with
the length (~0.35 ms a word piece on one core here) and find_duplicates encodes twice (the
snippet, one candidate). 250, 400, 600 and the whole score the same on bench.duplicate_accuracy,
bench.duplicates --dev and --inspected (and with 5,000 standard-library functions indexed beside
the development corpora); 200 loses recall on bench.duplicate_accuracy (0.917 → 0.867)."""
MIN_REEMBED_BAG = 0.5
"""Least token-bag overlap for a differently shaped candidate to be re-embedded: a rewrite of the
same function keeps most tokens (0.58–0.89 on bench.duplicate_accuracy's restyles); one under this
is other code, and keeps its index cosine."""
INTRODUCED_NAMES = frozenset({"filter", "map"})
"""Member names the canonical form writes where the code had none (a TypeScript loop of ``push``
written ``xs.filter(...).map(...)``, ``pipelines.parsing.canonical``); every other name and
string literal of a canonical form is copied from the code as written."""

_COMMON_KEYWORDS = frozenset(
    "if else for while do return break continue switch case default try catch finally throw "
    "true false null new this super class const let var in of".split()
)
_KEYWORDS: dict[str, frozenset[str]] = {
    "python": frozenset(
        "if elif else for while return break continue def lambda class in not and or is with as try "
        "except finally raise yield await async True False None from import pass global nonlocal del "
        "assert self".split()
    ),
    "java": frozenset(
        "if else for while do return break continue switch case default try catch finally throw throws "
        "new class interface enum extends implements static final public private protected void this "
        "super instanceof true false null var yield synchronized".split()
    ),
    "go": frozenset(
        "if else for range return break continue switch case default func go defer select chan map "
        "struct interface type var const package import true false nil fallthrough goto".split()
    ),
    "rust": frozenset(
        "if else for while loop in return break continue match fn let mut ref move impl trait struct "
        "enum pub use mod self Self super crate as where unsafe async await dyn true false Some None "
        "Ok Err".split()
    ),
    "csharp": _COMMON_KEYWORDS
    | frozenset("foreach is as out ref static public private protected void var using namespace async await".split()),
    "c": frozenset(
        "if else for while do return break continue switch case default goto sizeof struct union enum typedef "
        "static extern const volatile inline void char short int long float double signed unsigned NULL".split()
    ),
}
_KEYWORDS["cpp"] = _KEYWORDS["c"] | _COMMON_KEYWORDS | frozenset(
    "bool nullptr auto namespace using template typename virtual override public private protected delete "
    "operator const_cast static_cast dynamic_cast reinterpret_cast".split()
)
_JS_KEYWORDS = _COMMON_KEYWORDS | frozenset(
    "function async await typeof instanceof undefined delete void yield export import from as type "
    "interface extends implements public private protected readonly static".split()
)
for _lang in ("javascript", "typescript", "tsx"):
    _KEYWORDS[_lang] = _JS_KEYWORDS

# Keywords that change what code computes, counted with operators and literals.
_SEMANTIC_KEYWORDS = frozenset(
    "true false True False None null nil undefined not and or is in Some None Ok Err".split()
)
_SYNTAX = frozenset("( ) { } [ ] , ; : . => -> :: = := ?. ? <g >g".split())
_SELF = frozenset({"self", "this"})
_OPERATORS = sorted(
    "=== !== **= <<= >>= ... => -> :: == != <= >= && || ++ -- += -= *= /= %= &= |= ^= << >> ** // ?? ?. :=".split(),
    key=len,
    reverse=True,
)
_STRING = (
    r'[rRbBuUfF]{0,2}"(?:\\.|[^"\\\n])*"'
    r"|`(?:\\.|[^`\\])*`"
)
_QUOTED = r"|[rRbBuUfF]{0,2}'(?:\\.|[^'\\\n])*'"
_RUST_CHAR = r"|b?'(?:\\.|[^'\\])'"
_TAIL = (
    r"|(?P<num>\d[\d_]*(?:\.(?![.\w])|\.\d[\d_]*)?(?:[eE][+-]?\d+)?\w*|(?<![\w)\]])\.\d[\d_]*(?:[eE][+-]?\d+)?)"
    r"|(?P<id>[^\W\d]\w*)"
    r"|(?P<op>" + "|".join(re.escape(o) for o in _OPERATORS) + r")"
    r"|(?P<ch>\S)"
)
_C_COMMENT = r"(?P<doc>//[^\n]*|/\*(?:.|\n)*?\*/)|"
_PYTHON_TOKEN = re.compile(
    r'(?P<doc>#[^\n]*|[rRbBuUfF]{0,2}(?:"""(?:.|\n)*?"""|\'\'\'(?:.|\n)*?\'\'\'))'
    r"|(?P<str>" + _STRING + _QUOTED + ")" + _TAIL
)
_C_TOKEN = re.compile(_C_COMMENT + r"(?P<str>" + _STRING + _QUOTED + ")" + _TAIL)
_RUST_TOKEN = re.compile(_C_COMMENT + r"(?P<str>" + _STRING + _RUST_CHAR + r")|(?P<life>'\w+)" + _TAIL)
_INTERPOLATION = re.compile(r"\{([^{}]*)\}")
_WORD = re.compile(r"[^\W\d]\w*")
_GO_RECEIVER = re.compile(r"^\s*func\s*\(\s*(\w+)\s")
_DEFINING = frozenset({"def", "function", "func", "fn", "class"})
"""Keywords before a name the function defines itself (a nested function is a local)."""
_CLOSERS = frozenset({")", "]", "}"})
_ASI = frozenset({"javascript", "typescript", "tsx"})
_GENERIC_INSIDE = frozenset(", [ ] ? & :: . | : ( ) ... => extends super keyof".split())


class Token(NamedTuple):
    """One token of a function: its abstracted text, class, and (for identifiers) its name.

    The comparison reads tokens by position (``TEXT``, ``KIND``, ``NAME``, ``LINE``), so the
    cached rows can be plain tuples (``_code_tokens``): the garbage collector stops tracking a
    tuple of strings and ints after its first pass, never a class instance. A server caches the
    tokens of thousands of functions; as tracked objects they made each full collection ~100 ms,
    paid by whichever query triggered it (bench.duplicates at 100,000 symbols)."""

    text: str
    kind: Literal["id", "syntax", "semantic"]
    name: str | None = None
    line: int = 0


TEXT, KIND, NAME, LINE = range(4)
"""Positions of a token's fields (in a ``Token`` or a cached plain row)."""
TokenRow = tuple[str, str, "str | None", int]
"""A token as cached: ``(text, kind, name, line)``."""


def _generic_brackets(raw: list[tuple[str, str]]) -> set[int]:
    """Indexes of ``<``/``>`` (and ``>>``) that delimit type arguments, not comparisons."""
    marked: set[int] = set()
    for start, (_, text) in enumerate(raw):
        if text != "<" or start == 0 or (raw[start - 1][0] != "id" and raw[start - 1][1] != "::"):
            continue
        depth, inside = 0, []
        for index in range(start, min(start + 60, len(raw))):
            tkind, ttext = raw[index]
            if ttext == "<":
                depth += 1
            elif ttext in (">", ">>"):
                depth -= 1 if ttext == ">" else 2
            elif not (tkind in ("id", "life") or ttext in _GENERIC_INSIDE):
                break
            inside.append(index)
            if depth <= 0:
                if depth == 0:
                    marked.update(i for i in inside if raw[i][1] in ("<", ">", ">>"))
                break
    return marked


def _scanner(language: str) -> re.Pattern[str]:
    return {"python": _PYTHON_TOKEN, "rust": _RUST_TOKEN}.get(language, _C_TOKEN)


def code_without_comments(code: str, language: str) -> str:
    """The code with comments and Python docstrings removed and blank lines dropped.

    What the duplicate check embeds for differently shaped candidates: the index's vectors lead
    with the name and the docstring, which is right for search by description and wrong for
    comparing two implementations.
    """
    kept, last = [], 0
    for match in _scanner(language.lower()).finditer(code):
        if match.lastgroup == "doc":
            kept.append(code[last : match.start()])
            last = match.end()
    kept.append(code[last:])
    return "\n".join(line.rstrip() for line in "".join(kept).splitlines() if line.strip())


def reembed_text(code: str, language: str) -> str:
    """What the model reads of a function to compare it with another: its code as written (types
    and layout are signal, both sides have them), comments and docstrings removed, its start."""
    return code_without_comments(code, language)[:MAX_CODE_EMBED_CHARS]


def code_tokens(code: str, language: str, own_name: str | None = None) -> list[Token]:
    """The abstracted tokens of a function's code.

    Args:
        code: The function's source (signature and body).
        language: Its language (``python``, ``typescript``, ``go``, ...); picks the comment
            syntax and the keywords.
        own_name: The function's name, abstracted wherever it is not a member name (its
            definition and recursive calls).

    Returns:
        Tokens in source order: keywords, operators and punctuation as written; string literals
        with quotes normalized and interpolated names abstracted; identifiers as ``ID`` unless
        they name an API (member, path or called name).
    """
    return [Token(*row) for row in _code_tokens(code, language.lower(), own_name)]


@lru_cache(maxsize=4096)
def _code_tokens(code: str, language: str, own_name: str | None) -> tuple[TokenRow, ...]:
    """:func:`code_tokens` as plain rows, cached: a server compares the same candidates again
    and again."""
    keywords = _KEYWORDS.get(language, _COMMON_KEYWORDS)
    matches = [m for m in _scanner(language).finditer(code) if m.lastgroup != "doc"]
    raw = [(m.lastgroup or "ch", m.group()) for m in matches]
    breaks = [m.start() for m in re.finditer("\n", code)]
    lines = [bisect.bisect(breaks, m.start()) for m in matches]
    generics = _generic_brackets(raw) if language != "python" else set()
    receiver = _GO_RECEIVER.match(code) if language == "go" else None
    own_state = _SELF | ({receiver.group(1)} if receiver else set())
    # A called name that also appears as a plain value (a parameter or local holding a function)
    # is a local, not an API.
    plain = {
        text for index, (kind, text) in enumerate(raw)
        if kind == "id" and (index == 0 or raw[index - 1][1] not in (".", "?.", "::"))
        and (index + 1 == len(raw) or raw[index + 1][1] != "(" or (index > 0 and raw[index - 1][1] in _DEFINING))
    }
    tokens: list[TokenRow] = []

    def add(text: str, kind: Literal["id", "syntax", "semantic"], name: str | None = None) -> None:
        tokens.append((text, kind, name, lines[index]))

    for index, (kind, text) in enumerate(raw):
        after = raw[index + 1][1] if index + 1 < len(raw) else ""
        if kind == "ch" and (text == "," and after in _CLOSERS or text == ";" and language in _ASI):
            continue  # a trailing comma, a semicolon JavaScript inserts anyway: layout
        before = raw[index - 1][1] if index else ""
        before_object = raw[index - 2][1] if index > 1 else ""
        if kind == "id":
            if text in keywords:
                add(text, "semantic" if text in _SEMANTIC_KEYWORDS else "syntax")
            elif before in (".", "?.") and before_object in own_state:
                add("ID", "id", "." + text)
            elif before in (".", "?.", "::"):
                add(text, "semantic")
            elif text == own_name:
                add("ID", "id", text)
            elif after == "(" and text not in plain:
                add(text, "semantic")
            else:
                add("ID", "id", text)
        elif kind == "str":
            body = re.sub(r"^[rRbBuUfF]{0,2}", "", text)[1:-1]
            body = _INTERPOLATION.sub(lambda m: "{" + _WORD.sub("ID", m.group(1)) + "}", body)
            add(f'"{body}"', "semantic")
        elif kind == "num":
            add(_number(text), "semantic")
        elif kind == "life":
            add("'", "syntax")
        elif index in generics:
            for _ in range(2 if text == ">>" else 1):
                add("<g" if text == "<" else ">g", "syntax")
        else:
            add(text, "syntax" if text in _SYNTAX else "semantic")
    return tuple(tokens)


def _lines(tokens: Sequence[Token | TokenRow]) -> Counter[tuple[str, ...]]:
    """The token texts of each line, as a multiset of lines."""
    by_line: dict[int, list[str]] = {}
    for token in tokens:
        by_line.setdefault(token[LINE], []).append(token[TEXT])
    return Counter(tuple(texts) for texts in by_line.values())


def _number(text: str) -> str:
    """A numeric literal by its value where the spelling varies (``1_000``, ``0x3e8``, ``1.``, ``.5``)."""
    plain = text.replace("_", "")
    try:
        return str(int(plain, 0))
    except ValueError:
        pass
    try:
        return repr(float(plain))
    except ValueError:
        return text


def _swapped_variables(a: Sequence[Token | TokenRow], b: Sequence[Token | TokenRow]) -> int:
    """Positions where identical token sequences bind names inconsistently (``b - a`` vs ``a - b``).

    Pairs up the identifiers at the same positions; a position counts when its name on each side
    is paired with more than one name on the other side. Swapping two variables yields at least
    two such positions; shadowing (``let text = text.trim()``) is ambiguous on one side only.
    """
    pairs = [(x[NAME], y[NAME]) for x, y in zip(a, b, strict=True) if x[KIND] == "id"]
    forward: dict[str | None, set[str | None]] = {}
    backward: dict[str | None, set[str | None]] = {}
    for x, y in pairs:
        forward.setdefault(x, set()).add(y)
        backward.setdefault(y, set()).add(x)
    return sum(1 for x, y in pairs if len(forward[x]) > 1 and len(backward[y]) > 1)


# -- names -------------------------------------------------------------------------------------

_OPPOSITES = (
    "min max|minimum maximum|lowest highest|low high|smallest largest|small large|shortest longest|"
    "short long|first last|head tail|start end|begin end|before after|prev next|previous next|"
    "older newer|oldest newest|earliest latest|early late|asc desc|ascending descending|"
    "increasing decreasing|increment decrement|inc dec|up down|top bottom|left right|front back|"
    "upper lower|uppercase lowercase|positive negative|pos neg|plus minus|add remove|add subtract|"
    "add delete|insert delete|insert remove|push pop|enqueue dequeue|get set|read write|load save|"
    "load store|open close|lock unlock|acquire release|start stop|enable disable|show hide|"
    "visible hidden|on off|allow deny|grant revoke|accept reject|include exclude|inclusive exclusive|"
    "encode decode|encrypt decrypt|compress decompress|serialize deserialize|marshal unmarshal|"
    "pack unpack|wrap unwrap|escape unescape|quote unquote|connect disconnect|attach detach|"
    "bind unbind|register unregister|subscribe unsubscribe|import export|input output|in out|"
    "send receive|upload download|src dst|source target|source destination|parent child|"
    "leading trailing|prefix suffix|horizontal vertical|width height|row column|rows columns|"
    "inner outer|internal external|local remote|success failure|valid invalid|active inactive|"
    "online offline|expand collapse|grow shrink|ceil floor|forward backward|undo redo|login logout|"
    "create destroy|create delete|alloc free|allocate deallocate|setup teardown|hot cold|"
    "hottest coldest|even odd|buy sell|credit debit|deposit withdraw|gross net|with without|"
    "keep drop|any all|some every|union intersection|join split|merge split|little big|le be|"
    "read unread|pin unpin|archive unarchive|publish unpublish|mount unmount|follow unfollow|"
    "true false|yes no|enter exit|open closed|opened closed|locked unlocked|public private"
)
_OPPOSITE_PAIRS = frozenset(
    frozenset(pair.split()) for pair in _OPPOSITES.split("|")
)
_NEGATORS = frozenset({"not", "no", "non", "un"})
_NEGATING_PREFIXES = ("un", "de", "dis", "in", "non")
_DIRECTION_WORDS = frozenset({"to", "from", "2", "into", "as"})


def opposite_names(name_a: str, name_b: str) -> str | None:
    """Why two function names say opposite things, or None.

    * a word of one name is the opposite of a word of the other (``lock``/``unlock``,
      ``min``/``max``, ``encode``/``decode``; a word with a negating prefix counts too);
    * one name has a negation the other lacks (``is_valid``/``is_not_valid``);
    * the same words in another order around ``to``/``from`` (``celsius_to_fahrenheit``/
      ``fahrenheit_to_celsius``): the inverse conversion.
    """
    words_a = identifier_words(name_a, unicode_digits=True)
    words_b = identifier_words(name_b, unicode_digits=True)
    set_a, set_b = set(words_a), set(words_b)
    only_a, only_b = set_a - set_b, set_b - set_a
    for x in only_a:
        for y in only_b:
            if frozenset((x, y)) in _OPPOSITE_PAIRS:
                return f"{x}/{y}"
            for prefix in _NEGATING_PREFIXES:
                if x == prefix + y or y == prefix + x:
                    return f"{x}/{y}"
    if (only_a & _NEGATORS) or (only_b & _NEGATORS):
        return "negated"
    if set_a == set_b and words_a != words_b and set_a & _DIRECTION_WORDS:
        return "inverse conversion"
    return None


# -- comparison --------------------------------------------------------------------------------

@dataclass(frozen=True)
class CodeComparison:
    """What differs between two functions, and the structural verdict.

    Attributes:
        verdict: ``clone``, ``variant`` or ``other`` (see the module docstring).
        bag: Dice overlap of the two token multisets (1.0: same tokens, any order).
        sequence: ``difflib`` ratio of the token sequences (order-sensitive); computed only
            when it decides (a few edits, some semantic), else None.
        edits: Tokens in one multiset and not the other (both directions).
        semantic_edits: The same, counting operators, literals and API names only.
        swapped: Positions where identical sequences bind variables inconsistently.
        rearranged: The same tokens, moved within lines rather than as whole lines.
        opposite: Why the names are opposites (``lock/unlock``), or None.
        only_existing / only_new: Up to 5 semantic tokens found in one function only.
    """

    verdict: Verdict
    bag: float
    sequence: float | None
    edits: int
    semantic_edits: int
    swapped: int = 0
    rearranged: bool = False
    opposite: str | None = None
    only_existing: list[str] = field(default_factory=list)
    only_new: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """A short account of the difference, for a tool's recommendation text."""
        if self.verdict == "clone":
            return "same code up to names and statement order"
        parts = []
        if self.only_existing or self.only_new:
            parts.append(f"{' '.join(self.only_existing) or '∅'} → {' '.join(self.only_new) or '∅'}")
        if self.swapped:
            parts.append("variables swapped")
        if self.rearranged:
            parts.append("operands or arguments in another order")
        if self.opposite:
            parts.append(f"opposite names ({self.opposite})")
        return "; ".join(parts) or "different structure"


def compare_code(
    existing: str | list[Token], new: str | list[Token], language: str,
    existing_name: str | None = None, new_name: str | None = None,
) -> CodeComparison:
    """Compare an existing function with new code and classify the pair.

    Args:
        existing: The indexed function's code (or its :func:`code_tokens`).
        new: The code about to be written, its first function (or its :func:`code_tokens`,
            computed once when it is compared with many candidates).
        language: The language of both.
        existing_name / new_name: The functions' names (abstracted in the tokens, compared for
            opposite meanings).
    """
    a = code_tokens(existing, language, existing_name) if isinstance(existing, str) else existing
    b = code_tokens(new, language, new_name) if isinstance(new, str) else new
    return _compare_sides(_Side.of(a), _Side.of(b), existing_name, new_name)


@dataclass(frozen=True)
class _Side:
    """One function's tokens and their multisets (the new code's, computed once for all candidates)."""

    tokens: Sequence[Token | TokenRow]
    texts: tuple[str, ...]
    counts: Counter[str]
    semantic: Counter[str]

    @classmethod
    def of(cls, tokens: Sequence[Token | TokenRow]) -> _Side:
        texts = tuple(t[TEXT] for t in tokens)
        return cls(tokens, texts, Counter(texts), Counter(t[TEXT] for t in tokens if t[KIND] == "semantic"))


@lru_cache(maxsize=4096)
def code_side(code: str, language: str, own_name: str | None = None) -> _Side:
    """A function's tokens with their multisets, cached like :func:`code_tokens` (a server
    compares the same candidates with query after query)."""
    return _Side.of(_code_tokens(code, language.lower(), own_name))


def _compare_sides(side_a: _Side, side_b: _Side, existing_name: str | None, new_name: str | None) -> CodeComparison:
    """:func:`compare_code` on the two functions' tokens."""
    a, b = side_a.tokens, side_b.tokens
    texts_a, texts_b = side_a.texts, side_b.texts
    count_a, count_b = side_a.counts, side_b.counts
    total = len(texts_a) + len(texts_b)
    common = sum((count_a & count_b).values())
    bag = 2 * common / total if total else 0.0
    edits = total - 2 * common  # the tokens in one multiset and not the other
    only_a, only_b = side_a.semantic - side_b.semantic, side_b.semantic - side_a.semantic
    semantic_edits = sum(only_a.values()) + sum(only_b.values())
    # the order-sensitive ratio matters for the variant rule only (and costs the most)
    sequence = (
        difflib.SequenceMatcher(None, texts_a, texts_b, autojunk=False).ratio()
        if semantic_edits and edits <= MAX_VARIANT_EDIT else None
    )
    swapped = _swapped_variables(a, b) if texts_a == texts_b else 0
    # The same tokens in another order are a clone when whole lines (statements, in canonical
    # code) moved; tokens moved inside a line (`x < 0` vs `0 < x`) may change what it computes.
    rearranged = texts_a != texts_b and count_a == count_b and _lines(a) != _lines(b)
    opposite = opposite_names(existing_name, new_name) if existing_name and new_name else None
    if min(len(texts_a), len(texts_b)) < MIN_TOKENS:
        verdict: Verdict = "other"
    elif swapped >= 2 or rearranged or (sequence is not None and sequence >= MIN_VARIANT_SEQUENCE):
        verdict = "variant"
    elif not semantic_edits and bag >= MIN_CLONE_BAG:
        verdict = "clone"
    else:
        verdict = "other"
    return CodeComparison(
        verdict=verdict, bag=round(bag, 4), sequence=None if sequence is None else round(sequence, 4),
        edits=edits, semantic_edits=semantic_edits, swapped=swapped, rearranged=rearranged, opposite=opposite,
        only_existing=sorted(only_a)[:5], only_new=sorted(only_b)[:5],
    )


_ORDERING = frozenset({"<", ">", "<=", ">="})
"""Written ``<``/``<=`` by the canonical form where the code had ``>``/``>=``."""
AUGMENTABLE_OPERATORS = frozenset(["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@"])
"""The ``op`` of ``x = x op e``, which the canonical form writes ``x op= e``
(``pipelines.parsing.canonical`` reads this set: one list for the rule and its evidence)."""
_INTRODUCED_OPERATORS = frozenset({"?"})
"""Written by the canonical form's conditional expression (``c ? a : b``) where the code had ``if``."""


def clone_evidence(side: _Side, language: str) -> tuple[tuple[str, ...], ...]:
    """What a clone of a function must contain as written, from its canonical tokens (``side``):
    each entry a set of strings one of which occurs in the clone's code, longest first.

    A clone has the same semantic tokens (:func:`_compare_sides`). A canonical form
    (``pipelines.parsing.canonical``) copies every name, keyword and string literal from the code
    as written, except ``INTRODUCED_NAMES`` and a statement's runs of whitespace (made one space),
    and never runs a rewritten part into the word before it (``return(f(x))`` is ``return f(x)``);
    its operators too, except ``op=`` (written so from ``x = x op e``: ``op`` was there), ``<``
    and ``<=`` (from ``>``, ``>=``) and the conditional expression's ``?``. Code lacking every
    string of an entry cannot be a clone, whatever its canonical form
    (``test_every_function_of_real_code_holds_its_own_clone_evidence`` checks this on real code).
    Numbers (spelled otherwise as written) and strings with interpolated names (abstracted) are
    left out."""
    keywords = _KEYWORDS.get(language.lower(), _COMMON_KEYWORDS) - _SEMANTIC_KEYWORDS
    found: set[tuple[str, ...]] = set()
    for token in side.tokens:
        text = token[TEXT]
        if token[KIND] != "semantic" or text[:1].isdigit() or text[:1] == "." and text[1:2].isdigit():
            continue
        if text.startswith('"'):
            if "{" not in text:  # else names in it may be abstracted (`{ID}`)
                found.update((word,) for word in text[1:-1].split())
        elif _WORD.fullmatch(text):
            if text not in keywords and text not in INTRODUCED_NAMES and text not in ("inf", "nan"):
                found.add((text,))  # a name, or a keyword that computes (`None`, `not`, `in`)
        elif text in _ORDERING:
            found.add(("<", ">"))
        elif text[:-1] in AUGMENTABLE_OPERATORS and text.endswith("="):
            found.add((text[:-1],))
        elif text not in _INTRODUCED_OPERATORS:
            found.add((text,))
    return tuple(sorted(found, key=lambda alternatives: (-len(alternatives[0]), alternatives)))


def duplicate_score(cosine: float, comparison: CodeComparison, use_names: bool = True) -> float:
    """The duplicate score of a candidate: its embedding cosine corrected by structure.

    A clone scores at least ``CLONE_FLOOR`` (whatever the cosine: renamed copies embed poorly);
    a variant loses ``VARIANT_PENALTY``; differently shaped code keeps its cosine, less
    ``OPPOSITE_NAMES_PENALTY`` when the names are opposites (``use_names``).
    """
    if comparison.verdict == "clone":
        return max(cosine, CLONE_FLOOR + (1 - CLONE_FLOOR) * comparison.bag)
    if comparison.verdict == "variant":
        return max(0.0, cosine - VARIANT_PENALTY)
    if use_names and comparison.opposite:
        return max(0.0, cosine - OPPOSITE_NAMES_PENALTY)
    return cosine


# -- ranking candidates ------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """An indexed function found near the new code by the vector store.

    Attributes:
        code: Its code (the payload's copy).
        name: Its name.
        language: Its language.
        cosine: The store's cosine between its vector and the new code's.
        truncated: The payload's copy of the code is cut (structure not comparable).
        original: The code as written when ``code`` is a canonical form of it (what is
            embedded for differently shaped candidates); None: ``code`` itself.
    """

    code: str
    name: str | None
    language: str | None
    cosine: float
    truncated: bool = False
    original: str | None = None


class Background:
    """``fn(arg)`` on a thread of its own; :meth:`result` waits for it (and raises what it raised)."""

    def __init__(self, fn: Callable[[Any], Any], arg: Any) -> None:
        self._fn, self._arg = fn, arg
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="codemem-reembed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn(self._arg)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def score_candidates(
    new_code: str,
    new_name: str | None,
    language: str,
    candidates: Sequence[Candidate],
    embed: Callable[[list[str]], np.ndarray],
    *,
    use_names: bool = True,
    new_original: str | None = None,
    new_vector: np.ndarray | None = None,
    compared_code: Callable[[Candidate], str] | None = None,
    threshold: float | None = None,
) -> list[tuple[float, CodeComparison | None]]:
    """Duplicate scores of candidates for new code, in the candidates' order.

    Each candidate is compared structurally (:func:`compare_code`). Differently shaped ones
    (verdict ``other``) whose index cosine reaches ``CODE_COSINE_FLOOR`` are scored on the
    cosine of their code with the new code (comments and docstrings removed, one batch through
    ``embed``, at most ``MAX_CODE_EMBEDDINGS``); the others keep the index cosine. Then
    :func:`duplicate_score` applies the verdict.

    Args:
        new_code: The code about to be written (its first function when it has one).
        new_name: That function's name, if any.
        language: The new code's language.
        candidates: The vector store's candidates.
        embed: The embedder's ``embed_documents`` (texts to unit vectors, cache first).
        use_names: Whether opposite names lower the score (off for ablations only).
        new_original: The new code as written when ``new_code`` is a canonical form of it.
        new_vector: The unit vector of :func:`reembed_text` of the new code, when the caller
            has it already (``find_duplicates`` searches with it): not embedded again.
        compared_code: What is compared of a candidate (its canonical form, say), computed only
            for the candidates compared by structure; None: its ``code``. The others' ``code``
            only needs to be empty or not.
        threshold: The score the caller reports from, when it reports no candidate under it and
            ``new_code`` is canonical while candidates' ``code`` is as written: a candidate whose
            index cosine is under both it and any re-embedding's reach, and whose code lacks the
            new code's :func:`clone_evidence`, cannot be a clone, and is not compared (its
            score stays under ``threshold``). The scores from ``threshold`` up are those
            without it.

    Returns:
        ``(score, comparison)`` per candidate; comparison is None when the candidate's code is
        missing or cut, its language differs, its cosine is under ``STRUCTURE_COSINE_FLOOR``,
        or it cannot reach ``threshold`` (its score is then its index cosine).
    """
    new_side = code_side(new_code, language, new_name)
    evidence = clone_evidence(new_side, language) if threshold is not None else ()

    def cannot_reach(candidate: Candidate) -> bool:
        """Under ``threshold`` whatever its verdict: not above it, not to be re-embedded, no clone."""
        return (
            bool(evidence) and candidate.cosine < threshold  # type: ignore[operator]
            and (candidate.cosine < CODE_COSINE_FLOOR or len(reembed) == MAX_CODE_EMBEDDINGS)
            and not all(any(text in candidate.code for text in entry) for entry in evidence)
        )

    def compare(candidate: Candidate) -> CodeComparison | None:
        if (
            not candidate.code or candidate.truncated or candidate.cosine < STRUCTURE_COSINE_FLOOR
            or (candidate.language or language) != language
        ):
            return None
        if len(new_side.tokens) < MIN_TOKENS:  # too short for structure: names only
            opposite = opposite_names(candidate.name, new_name) if candidate.name and new_name else None
            return CodeComparison("other", 0.0, None, 0, 0, opposite=opposite)
        code = compared_code(candidate) if compared_code is not None else candidate.code
        return _compare_sides(code_side(code, language, candidate.name), new_side, candidate.name, new_name)

    def embedding_texts() -> list[str]:
        texts = [] if new_vector is not None else [reembed_text(new_original or new_code, language)]
        return texts + [reembed_text(candidates[i].original or candidates[i].code, language) for i in reembed]

    # In order of decreasing cosine: the candidates to re-embed are known once those before them
    # are compared, and the model then runs while the rest are (it holds no GIL while it computes).
    comparisons: list[CodeComparison | None] = [None] * len(candidates)
    reembed: list[int] = []
    encoding: Background | None = None
    for i in sorted(range(len(candidates)), key=lambda i: -candidates[i].cosine):
        if cannot_reach(candidates[i]):
            continue
        comp = comparisons[i] = compare(candidates[i])
        if (
            len(reembed) < MAX_CODE_EMBEDDINGS and comp is not None and comp.verdict == "other"
            and candidates[i].cosine >= CODE_COSINE_FLOOR and comp.bag >= MIN_REEMBED_BAG
        ):
            reembed.append(i)
            if len(reembed) == MAX_CODE_EMBEDDINGS:
                encoding = Background(embed, embedding_texts())
    cosines = [c.cosine for c in candidates]
    if reembed:
        import numpy as np  # here: a process that compares no code (an index run) never loads numpy

        vectors = np.asarray(encoding.result() if encoding is not None else embed(embedding_texts()), dtype=np.float32)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        if new_vector is not None:
            vectors = np.vstack([np.asarray(new_vector, dtype=np.float32)[None, :], vectors])
        for row, i in enumerate(reembed, start=1):
            cosines[i] = float(vectors[row] @ vectors[0])
    return [
        (candidate.cosine if comp is None else duplicate_score(cosine, comp, use_names), comp)
        for candidate, comp, cosine in zip(candidates, comparisons, cosines, strict=True)
    ]

"""The one identifier tokenizer: names split into words, and the index's search tokens.

Code is searched by the words of its names: ``getHTTPResponse`` → ``get``, ``http``,
``response``; ``parse_url`` → ``parse``, ``url``. Every part of codemem that splits identifiers
calls this module: the sparse (BM25) vectors, the evaluation's BM25 baseline, the embedding
text, duplicate detection's name comparison, the graph's read-only procedure check and the
design rules' concept reading. Where they legitimately differ it is a flag here, not a copy.

The search tokens are stored in users' indexes (hashed into the sparse vectors): any change of
their output silently degrades every existing index, so ``tests/resources/text`` pins them.
"""

from __future__ import annotations

import re
from functools import lru_cache

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An ASCII identifier (letters, digits, underscores; not starting with a digit)."""

_IDENTIFIER_OR_NUMBER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_WORD_PART = r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|{digit}+"
_ASCII_DIGIT_PARTS = re.compile(_WORD_PART.format(digit="[0-9]"))
_UNICODE_DIGIT_PARTS = re.compile(_WORD_PART.format(digit=r"\d"))
_HUMP = re.compile(r"_|(?<=[a-z])(?=[A-Z])")

SEARCH_STOPWORDS = frozenset(
    "a an and are as at be by for from has have if in into is it its of on or that the this to "
    "was were will with".split()
)
"""English words too common to search by; dropped from the search tokens."""


def identifier_words(name: str, *, unicode_digits: bool = False, humps_only: bool = False) -> list[str]:
    """The lower-cased words of an identifier (``snake_case``, ``camelCase``, ``HTTPServer``).

    Args:
        name: An identifier (or any text: characters outside words are dropped).
        unicode_digits: Count any Unicode digit as a number word, not only ``0-9``. Duplicate
            detection and the graph's procedure check read Unicode names this way; the index's
            texts keep ASCII digits so the stored vectors never change.
        humps_only: Split only at underscores and at a lower-case letter followed by an
            upper-case one, keeping acronyms and digits attached (``HTTPResponse``, ``utf8``
            stay whole). The design rules match these words against their concept lexicon.

    Returns:
        The words in order, repeats kept.
    """
    if humps_only:
        return [word.lower() for word in _HUMP.split(name) if word]
    parts = _UNICODE_DIGIT_PARTS if unicode_digits else _ASCII_DIGIT_PARTS
    return [part.lower() for chunk in name.split("_") for part in parts.findall(chunk)]


@lru_cache(maxsize=1)
def _stemmer():  # noqa: ANN202 - PyStemmer has no stubs
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _word_tokens(word: str, keep_compound: bool) -> tuple[str, ...]:
    parts = identifier_words(word)
    stem = _stemmer().stemWord
    tokens = [stem(p) for p in parts if p not in SEARCH_STOPWORDS and (len(p) > 1 or p.isdigit())]
    if keep_compound and len(parts) > 1:
        tokens.append(word.lower().strip("_"))
    return tuple(tokens)


def search_tokens(text: str, *, keep_compound: bool = True) -> list[str]:
    """The search tokens of text and code: identifier words, lower-cased and Snowball-stemmed.

    Stop words and one-letter words (numbers excepted) are dropped.

    Args:
        text: Any text; its ASCII identifiers and numbers are tokenized.
        keep_compound: Also keep a compound identifier's whole lower-cased form, so an exact
            name still wins (the index does; the evaluation's Lucene-style baseline does not).

    Returns:
        The tokens in text order, repeats kept.
    """
    tokens: list[str] = []
    for word in _IDENTIFIER_OR_NUMBER.findall(text):
        tokens.extend(_word_tokens(word, keep_compound))
    return tokens


def suffix_stem(word: str) -> str:
    """A light, lower-cased stem: one common English suffix stripped, four letters kept at least.

    Cruder than the Snowball stemmer of :func:`search_tokens` (``validations`` → ``valid``,
    ``running`` → ``runn``); the design rules compare a rule's words with a fix's words by it.
    """
    word = word.lower()
    for suffix in ("ations", "ation", "ingly", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly", "y"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word

"""BM25-style sparse vectors for code, shared by the indexer and the query side.

Identifiers are split the way people search for them (``getHTTPResponse`` → ``get``, ``http``,
``response``; ``parse_url`` → ``parse``, ``url``), lower-cased and Snowball-stemmed; a
compound identifier also keeps its whole lower-cased form so an exact name still wins. Each
token is hashed to a stable 31-bit dimension. Documents carry BM25 term-frequency weights
(k1=1.5, b=0.75 over a fixed average length); Qdrant applies the IDF (``Modifier.Idf``) from
the collection itself, so the vectors never need re-computing when the corpus grows.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from functools import lru_cache

from resources.vectors.store import SparseVec

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have if in into is it its of on or that the this to "
    "was were will with".split()
)
K1 = 1.5
B = 0.75
AVERAGE_LENGTH = 80.0


@lru_cache(maxsize=1)
def _stemmer():  # noqa: ANN202 - PyStemmer has no stubs
    import Stemmer

    return Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _identifier_tokens(word: str) -> tuple[str, ...]:
    parts = [p.lower() for chunk in word.split("_") if chunk for p in _CAMEL.findall(chunk)]
    stem = _stemmer().stemWord
    tokens = [stem(p) for p in parts if p not in _STOPWORDS and (len(p) > 1 or p.isdigit())]
    if len(parts) > 1:
        tokens.append(word.lower().strip("_"))
    return tuple(tokens)


def tokenize(text: str) -> list[str]:
    """Split text and code into search tokens (sub-words stemmed, compound names kept)."""
    tokens: list[str] = []
    for word in _WORD.findall(text):
        tokens.extend(_identifier_tokens(word))
    return tokens


@lru_cache(maxsize=500_000)
def _dimension(token: str) -> int:
    return zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF


def _merge(counts: Counter[str], weight_of) -> SparseVec:  # noqa: ANN001
    by_index: dict[int, float] = {}
    for token, tf in counts.items():
        index = _dimension(token)
        by_index[index] = by_index.get(index, 0.0) + weight_of(tf)
    indices = sorted(by_index)
    return SparseVec(indices=indices, values=[by_index[i] for i in indices])


def document_vector(text: str) -> SparseVec:
    """The BM25 term-frequency vector of a document (IDF is applied by the store)."""
    tokens = tokenize(text)
    norm = K1 * (1 - B + B * len(tokens) / AVERAGE_LENGTH)
    return _merge(Counter(tokens), lambda tf: tf * (K1 + 1) / (tf + norm))


def query_vector(text: str) -> SparseVec:
    """The query vector: each token weighs its count in the query (as in classic BM25)."""
    return _merge(Counter(tokenize(text)), float)

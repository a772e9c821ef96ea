"""BM25-style sparse vectors for code, shared by the indexer and the query side.

Identifiers are split the way people search for them (``getHTTPResponse`` → ``get``, ``http``,
``response``; ``parse_url`` → ``parse``, ``url``), lower-cased and Snowball-stemmed; a
compound identifier also keeps its whole lower-cased form so an exact name still wins
(:func:`resources.text.identifiers.search_tokens`, exported here as ``tokenize``). Each
token is hashed to a stable 31-bit dimension. Documents carry BM25 term-frequency weights
(k1=1.5, b=0.75 over a fixed average length); Qdrant applies the IDF (``Modifier.Idf``) from
the collection itself, so the vectors never need re-computing when the corpus grows.
"""

from __future__ import annotations

import zlib
from collections import Counter
from functools import lru_cache

from resources.text.identifiers import search_tokens as tokenize
from resources.vectors.store import SparseVec

__all__ = ["AVERAGE_LENGTH", "B", "K1", "document_vector", "query_vector", "tokenize"]

K1 = 1.5
B = 0.75
AVERAGE_LENGTH = 80.0


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

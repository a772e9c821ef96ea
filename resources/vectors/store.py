"""The vector store contract: the ``VectorStore`` protocol, its data types and collection layout.

Two Qdrant implementations: ``EdgeVectorStore`` (``resources.vectors.edge``) runs Qdrant
in-process through ``qdrant-edge-py`` (one shard directory per collection under the state dir):
the embedded default. ``ServerVectorStore`` (``resources.vectors.server``) talks to a Qdrant
server through ``qdrant-client`` when ``QDRANT_URL``/``QDRANT_HOST`` is set;
``resources.vectors.factory.create_vector_store`` picks one. What they share is in
``resources.vectors.points``. Both store every point with an optional dense vector named
``dense`` (cosine) and a sparse BM25-style vector named ``sparse`` whose IDF is applied by Qdrant
(``Modifier.Idf``), so a point is searchable by its sparse vector the moment it is written and
gains its dense vector later.

qdrant-client's own local mode is deliberately not used: measured here at 100k points it took
170 s to upsert and ~5 s per filtered query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

DENSE = "dense"
SPARSE = "sparse"
# Segments below this many kilobytes of vectors are searched exactly (no HNSW): measured here,
# exact search is ~7 ms at 100k x 384 dims, and exact results need no recall check.
EXACT_SEARCH_KB = 160_000
FLOAT_FIELDS: frozenset[str] = frozenset({"created_ts", "updated_ts", "importance_score"})
"""Payload fields indexed as numbers (range filters); every other indexed field is a keyword.

Each collection indexes only the fields its readers filter on (``ensure_collection``'s
``indexes``): an unindexed filter field is checked against every point (measured 4.6 ms against
1.2 ms on 1,271 points), but every payload index of an open collection costs ~7 ms to load
(qdrant-edge, measured here), paid by every session for every collection it opens: the embedded
store builds them only for collections of ``resources.vectors.edge.INDEXED_FROM_POINTS`` points."""


class VectorStoreError(RuntimeError):
    """A vector store operation failed; the message says what to do."""


@dataclass(slots=True)
class SparseVec:
    """A sparse vector: parallel lists of dimension indices and weights."""

    indices: list[int]
    values: list[float]


@dataclass(slots=True)
class VectorPoint:
    """A point to write: id (UUID string), optional dense and sparse vectors, payload."""

    id: str
    payload: dict[str, Any]
    dense: Sequence[float] | None = None
    sparse: SparseVec | None = None


@dataclass(slots=True)
class VectorHit:
    """A point returned by a query, with its score and payload."""

    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PayloadFilter:
    """Conditions every hit must meet.

    Attributes:
        must_match: Each key must equal one of its values (dotted keys reach nested payload).
        ranges: Each numeric key must lie in ``[low, high]`` (either bound may be None).
    """

    must_match: dict[str, list[Any]] = field(default_factory=dict)
    ranges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        """True when the filter has no condition."""
        return not self.must_match and not self.ranges


class VectorStore(Protocol):
    """What the indexer and the query server need from a vector database."""

    def ensure_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, dense_on_disk: bool = False,
        write_ahead_log: bool = True, dense_apart: Sequence[str] | None = None,
    ) -> None:
        """Create the collection (dense + sparse vectors, payload ``indexes``) if it is missing; an
        existing one gets the missing ``indexes`` (the embedded store also drops the ones not
        named; a shared server keeps them; the embedded store builds them once the collection is
        large enough to gain from them). ``indexes`` None: an existing collection keeps its own.
        ``dense_on_disk``: a new embedded collection reads its dense vectors from disk (the page
        cache) instead of loading them all when it opens — for small collections, searched a few
        times a session (an existing collection keeps how it was made; a server ignores it).
        ``write_ahead_log`` False: a new embedded collection keeps no write-ahead log (two 32 MB
        segments on disk, and every write written twice); its writes are durable only once
        ``flush(name)`` returns — for a collection whose writer records what it wrote elsewhere
        and flushes first (the code index and its manifest). A server ignores it.
        ``dense_apart`` (the payload fields a dense search of it filters on): a new embedded
        collection keeps its dense vectors in a second one, with those fields only, so that points
        without one take no room for it (for a collection searched by words long before its dense
        vectors come: the code index of a large tree); a dense search filtering on another field
        raises. A server ignores it.

        Raises:
            VectorStoreError: if it exists with another dense dimension (a model change needs
                a re-embed: ``codemem index --reembed``).
        """
        ...

    def payload_indexes(self, name: str) -> list[str]:
        """The payload fields a collection indexes (none when it does not exist)."""
        ...

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (all given vectors and the whole payload)."""
        ...

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """Attach dense vectors to existing points, keeping their sparse vector and payload."""
        ...

    def set_payload(self, collection: str, values: dict[str, Any], payload_filter: PayloadFilter) -> None:
        """Set payload fields on every point matching the filter, keeping its other fields and
        vectors (a collection's migration to a new field: ``pipelines.index_stores``)."""
        ...

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Delete points by id (missing ids are ignored)."""
        ...

    def hybrid_query(
        self,
        collection: str,
        *,
        dense: Sequence[float] | None,
        sparse: SparseVec | None,
        limit: int,
        payload_filter: PayloadFilter | None = None,
        candidates: int = 100,
        weights: tuple[float, float] = (1.0, 1.0),
    ) -> list[VectorHit]:
        """Rank points by RRF of dense and sparse candidate lists (either may be None)."""
        ...

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[VectorHit]:
        """Fetch points by id with their payloads (score 0)."""
        ...

    def dense_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored dense vectors of points (points without one are absent)."""
        ...

    def held_as_is(self, collection: str, points: Sequence[VectorPoint]) -> set[str]:
        """The ids of ``points`` the collection holds as they would be written, dense vectors
        aside (``points.held_as_is``): writing them again would change nothing but their write
        time."""
        ...

    def prefetch(self, collection: str, ids: Sequence[str]) -> None:
        """Read the stored payloads and sparse vectors of these points once, so that a comparison
        soon after (``held_as_is``) finds them in memory: on a large embedded collection the first
        read of ~10,000 points waits seconds on the disk. Nothing to do for a server's collection."""
        ...

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """Number of points (matching the filter)."""
        ...

    def ids(self, collection: str) -> set[str]:
        """All point ids of the collection."""
        ...

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """Points matching the filter with their payloads (score 0), at most ``limit``, in id order."""
        ...

    def flush(self, collection: str | None = None) -> None:
        """Persist pending writes (of one collection, or of all); when it returns they survive a
        crash, whatever the collection's write-ahead log."""
        ...

    def optimize(self, collection: str) -> None:
        """Merge segments and drop tombstones (a no-op where the server does it itself)."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its data."""
        ...

    def clear_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, write_ahead_log: bool = True,
        dense_apart: Sequence[str] | None = None,
    ) -> None:
        """Empty a collection: drop and create it again (with payload ``indexes``,
        ``write_ahead_log`` and ``dense_apart`` as ``ensure_collection`` takes them; None: as the
        collection was made), with no moment in which it is
        missing for a concurrent reader (a full reindex clears it while the server answers
        searches)."""
        ...

    def ranked_lists(
        self,
        collection: str,
        *,
        dense: Sequence[float] | None,
        sparse: SparseVec | None,
        candidates: int,
        payload_filter: PayloadFilter | None = None,
        with_payload: bool = True,
    ) -> tuple[list[VectorHit], list[VectorHit]]:
        """The dense and sparse candidate lists, separately (for ranking above the store);
        ``with_payload=False`` returns ids and scores only (much faster when the caller reads its
        own records)."""
        ...

    def close(self) -> None:
        """Flush and release the store."""
        ...

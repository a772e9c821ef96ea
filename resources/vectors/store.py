"""The vector store contract and its two Qdrant implementations.

``EdgeVectorStore`` runs Qdrant in-process through ``qdrant-edge-py`` (one shard directory per
collection under the state dir): the embedded default. ``ServerVectorStore`` talks to a Qdrant
server through ``qdrant-client`` when ``QDRANT_URL``/``QDRANT_HOST`` is set. Both store every
point with an optional dense vector named ``dense`` (cosine) and a sparse BM25-style vector named
``sparse`` whose IDF is applied by Qdrant (``Modifier.Idf``), so a point is searchable by its
sparse vector the moment it is written and gains its dense vector later.

qdrant-client's own local mode is deliberately not used: measured here at 100k points it took
170 s to upsert and ~5 s per filtered query.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from resources.private_files import make_private_dir

DENSE = "dense"
SPARSE = "sparse"
# Segments below this many kilobytes of vectors are searched exactly (no HNSW): measured here,
# exact search is ~7 ms at 100k x 384 dims, and exact results need no recall check.
EXACT_SEARCH_KB = 160_000
KEYWORD_FIELDS: tuple[str, ...] = (
    "file_path", "language", "kind", "name", "path_prefixes", "status", "memory_type",
    "metadata.status", "metadata.priority", "metadata.design_type", "metadata.category", "metadata.component_id",
    "requirement_ids", "extends", "implements", "qualified_name", "container",
)
FLOAT_FIELDS: tuple[str, ...] = ("created_ts", "updated_ts", "importance_score")
"""Payload indexes of every collection (code fields, then the memory collections' filters: an
unindexed filter field is checked against every point — measured 4.6 ms against 1.2 ms on 1,271
points, and the gap grows with the collection)."""


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

    def ensure_collection(self, name: str, dense_dim: int) -> None:
        """Create the collection (dense + sparse vectors, payload indexes) if it is missing.

        Raises:
            VectorStoreError: if it exists with another dense dimension (a model change needs
                a re-embed: ``codemem index --reembed``).
        """
        ...

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (all given vectors and the whole payload)."""
        ...

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """Attach dense vectors to existing points, keeping their sparse vector and payload."""
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

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """Number of points (matching the filter)."""
        ...

    def ids(self, collection: str) -> set[str]:
        """All point ids of the collection."""
        ...

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """Points matching the filter with their payloads (score 0), at most ``limit``, in id order."""
        ...

    def flush(self) -> None:
        """Persist pending writes."""
        ...

    def optimize(self, collection: str) -> None:
        """Merge segments and drop tombstones (a no-op where the server does it itself)."""
        ...

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its data."""
        ...

    def clear_collection(self, name: str, dense_dim: int) -> None:
        """Empty a collection: drop and create it again, with no moment in which it is missing for
        a concurrent reader (a full reindex clears it while the server answers searches)."""
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


def _rrf(ranked_lists: Iterable[tuple[list[VectorHit], float]], limit: int, k: int = 60) -> list[VectorHit]:
    """Weighted reciprocal-rank fusion (used by the server store for parity with edge)."""
    scores: dict[str, float] = {}
    first_seen: dict[str, VectorHit] = {}
    for hits, weight in ranked_lists:
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (k + rank + 1)
            first_seen.setdefault(hit.id, hit)
    ordered = sorted(scores.items(), key=lambda item: -item[1])[:limit]
    return [VectorHit(id=pid, score=score, payload=first_seen[pid].payload) for pid, score in ordered]


class EdgeVectorStore:
    """Embedded Qdrant (qdrant-edge): one shard directory per collection.

    A shard directory admits one process; the project's owner process holds it (see
    ``query_server.ownership``). Within the process, calls are serialized per shard.
    """

    def __init__(self, root: Path) -> None:
        """Open (lazily) the collections under ``root``."""
        import qdrant_edge  # noqa: F401  (fail early with a clear import error)

        self._root = make_private_dir(root)
        self._shards: dict[str, Any] = {}
        self._lock = threading.RLock()

    # -- helpers -------------------------------------------------------------------------
    @contextmanager
    def _locked(self, name: str) -> Iterator[Any]:
        """The open shard of a collection, held under the store's lock for the block (looked up
        inside it: a shard taken before the lock may have been closed by a concurrent drop)."""
        with self._lock:
            yield self._shard(name)

    def _shard(self, name: str) -> Any:
        """The open shard of a collection (opened on first use)."""
        import qdrant_edge as qe

        with self._lock:
            shard = self._shards.get(name)
            if shard is not None:
                return shard
            path = self._root / name
            if not (path / "edge_config.json").exists() and not any(path.glob("segments*")):
                raise VectorStoreError(
                    f"collection {name!r} does not exist — run `codemem index` to create it"
                )
            try:
                shard = qe.EdgeShard.load(str(path))
            except Exception as exc:  # the Rust error text is all we get
                raise VectorStoreError(
                    f"cannot open vector collection {name!r} at {path}: {exc} — if another "
                    "process owns this project, reach it through `codemem` (it proxies), or "
                    "run `codemem repair`"
                ) from exc
            self._shards[name] = shard
            return shard

    @staticmethod
    def _filter(payload_filter: PayloadFilter | None) -> Any:
        import qdrant_edge as qe

        if payload_filter is None or payload_filter.is_empty():
            return None
        must = []
        for key, values in payload_filter.must_match.items():
            if len(values) == 1:
                must.append(qe.FieldCondition(key=key, match=qe.MatchValue(values[0])))
            else:
                must.append(qe.FieldCondition(key=key, match=qe.MatchAny(list(values))))
        for key, (low, high) in payload_filter.ranges.items():
            must.append(qe.FieldCondition(key=key, range=qe.RangeFloat(gte=low, lte=high)))
        return qe.Filter(must=must)

    # -- contract ------------------------------------------------------------------------
    def ensure_collection(self, name: str, dense_dim: int) -> None:
        """See ``VectorStore.ensure_collection``."""
        import json

        import qdrant_edge as qe

        path = self._root / name
        marker = path / "codemem_collection.json"
        with self._lock:
            if marker.exists():
                existing = json.loads(marker.read_text())
                if existing.get("dense_dim") != dense_dim:
                    raise VectorStoreError(
                        f"collection {name!r} holds {existing.get('dense_dim')}-dim vectors but "
                        f"the active embedding model makes {dense_dim}-dim vectors — run "
                        "`codemem index --reembed` to rebuild it with the active model"
                    )
                shard = self._shard(name)
                indexed = set(existing.get("indexes", KEYWORD_FIELDS[:5]))
                missing = [k for k in (*KEYWORD_FIELDS, *FLOAT_FIELDS) if k not in indexed]
                if missing:  # a collection made by an older codemem: add the newer indexes
                    self._create_indexes(shard, missing)
                    marker.write_text(json.dumps({**existing, "indexes": [*KEYWORD_FIELDS, *FLOAT_FIELDS]}))
                return
            if path.exists():  # a half-created collection from a crash: start it again
                shutil.rmtree(path)
            config = qe.EdgeConfig(
                vectors={DENSE: qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine)},
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                hnsw_config=qe.HnswIndexConfig(
                    m=16, ef_construct=200, full_scan_threshold=EXACT_SEARCH_KB, max_indexing_threads=1
                ),
            )
            shard = qe.EdgeShard.create(str(path), config)
            self._create_indexes(shard, [*KEYWORD_FIELDS, *FLOAT_FIELDS])
            self._shards[name] = shard
            marker.write_text(json.dumps({"dense_dim": dense_dim, "indexes": [*KEYWORD_FIELDS, *FLOAT_FIELDS]}))

    @staticmethod
    def _create_indexes(shard: Any, fields: Sequence[str]) -> None:
        import qdrant_edge as qe

        for key in fields:
            kind = qe.PayloadSchemaType.Float if key in FLOAT_FIELDS else qe.PayloadSchemaType.Keyword
            shard.update(qe.UpdateOperation.create_field_index(key, kind))
        shard.flush()

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its files."""
        with self._lock:
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._root / name, ignore_errors=True)

    def clear_collection(self, name: str, dense_dim: int) -> None:
        """See ``VectorStore.clear_collection`` (both steps under the store's lock)."""
        with self._lock:
            self.drop_collection(name)
            self.ensure_collection(name, dense_dim)

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """See ``VectorStore.upsert``."""
        import qdrant_edge as qe

        if not points:
            return
        edge_points = []
        for point in points:
            vector: dict[str, Any] = {}
            if point.dense is not None:
                vector[DENSE] = [float(x) for x in point.dense]
            if point.sparse is not None and point.sparse.indices:
                vector[SPARSE] = qe.SparseVector(point.sparse.indices, point.sparse.values)
            edge_points.append(qe.Point(point.id, vector, point.payload))
        with self._locked(collection) as shard:
            shard.update(qe.UpdateOperation.upsert_points(edge_points))

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """See ``VectorStore.set_dense``."""
        import qdrant_edge as qe

        if not vectors:
            return
        updates = [qe.PointVectors(pid, {DENSE: [float(x) for x in vec]}) for pid, vec in vectors.items()]
        with self._locked(collection) as shard:
            shard.update(qe.UpdateOperation.update_vectors(updates))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """See ``VectorStore.delete``."""
        import qdrant_edge as qe

        if not ids:
            return
        with self._locked(collection) as shard:
            shard.update(qe.UpdateOperation.delete_points(list(ids)))

    @staticmethod
    def _nearest(dense: Sequence[float] | None, sparse: SparseVec | None) -> list[tuple[str, Any]]:
        """The nearest-neighbour queries to run: ("dense"|"sparse", query) for each vector given."""
        import qdrant_edge as qe

        queries: list[tuple[str, Any]] = []
        if dense is not None:
            queries.append((DENSE, qe.Query.Nearest([float(x) for x in dense], using=DENSE)))
        if sparse is not None and sparse.indices:
            queries.append((SPARSE, qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)))
        return queries

    @staticmethod
    def _hits(points: Sequence[Any]) -> list[VectorHit]:
        return [VectorHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in points]

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
        """See ``VectorStore.hybrid_query``: Qdrant's own prefetch + RRF fusion."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:  # a missing collection raises, even for an empty query
            flt = self._filter(payload_filter)
            queries = self._nearest(dense, sparse)
            if not queries:
                return []
            weight_of = {DENSE: weights[0], SPARSE: weights[1]}
            request = qe.QueryRequest(
                limit=limit,
                prefetches=[qe.Prefetch(limit=candidates, query=query, filter=flt) for _, query in queries],
                query=qe.Fusion.Rrf(k=60, weights=[weight_of[name] for name, _ in queries]),
                with_payload=True,
            )
            scored = shard.query(request)
        return self._hits(scored)

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
        """The dense and sparse candidate lists separately (for re-ranking above the store)."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:  # a missing collection raises, even for an empty query
            flt = self._filter(payload_filter)
            queries = self._nearest(dense, sparse)
            if not queries:
                return [], []
            requests = [
                qe.QueryRequest(limit=candidates, query=query, filter=flt, with_payload=with_payload)
                for _, query in queries
            ]
            results = shard.query_batch(qe.QueryBatchRequest(requests))
        found = {name: self._hits(result) for (name, _), result in zip(queries, results, strict=True)}
        return found.get(DENSE, []), found.get(SPARSE, [])

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[VectorHit]:
        """See ``VectorStore.retrieve``."""
        if not ids:
            return []
        with self._locked(collection) as shard:
            records = shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return [VectorHit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records]

    def dense_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """See ``VectorStore.dense_vectors``."""
        if not ids:
            return {}
        with self._locked(collection) as shard:
            records = shard.retrieve(list(ids), with_payload=False, with_vector=[DENSE])
        return {str(r.id): list(r.vector[DENSE]) for r in records if r.vector and r.vector.get(DENSE) is not None}

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """See ``VectorStore.count``."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:
            return int(shard.count(qe.CountRequest(exact=True, filter=self._filter(payload_filter))))

    def ids(self, collection: str) -> set[str]:
        """See ``VectorStore.ids``."""
        import qdrant_edge as qe

        found: set[str] = set()
        offset = None
        with self._locked(collection) as shard:
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=2048, with_payload=False, with_vector=False)
                )
                found.update(str(r.id) for r in records)
                if offset is None:
                    return found

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """See ``VectorStore.scroll``."""
        import qdrant_edge as qe

        flt = self._filter(payload_filter)
        hits: list[VectorHit] = []
        offset = None
        with self._locked(collection) as shard:
            while len(hits) < limit:
                records, offset = shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=min(1024, limit - len(hits)), filter=flt, with_payload=True, with_vector=False)
                )
                hits.extend(VectorHit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records)
                if offset is None:
                    break
        return hits

    def flush(self) -> None:
        """Persist pending writes of every open collection."""
        with self._lock:
            for shard in self._shards.values():
                shard.flush()

    def optimize(self, collection: str) -> None:
        """Build indexes (HNSW, payload) for the collection's segments."""
        with self._locked(collection) as shard:
            shard.optimize()

    def close(self) -> None:
        """See ``VectorStore.close``."""
        with self._lock:
            for shard in self._shards.values():
                try:
                    shard.flush()
                finally:
                    shard.close()
            self._shards.clear()


class ServerVectorStore:
    """A Qdrant server through the official ``qdrant-client`` (HTTP), same contract."""

    def __init__(
        self,
        url: str | None,
        host: str | None,
        port: int,
        api_key: str | None,
        *,
        shard_number: int | None = None,
        replication_factor: int | None = None,
    ) -> None:
        """Connect to the server given by URL or host/port.

        ``shard_number`` and ``replication_factor`` apply to the collections this store creates
        (a distributed Qdrant cluster); None leaves the server's defaults. Existing collections
        keep theirs (Qdrant changes replication of an existing collection through its cluster API).
        """
        from qdrant_client import QdrantClient

        self.shard_number = shard_number
        self.replication_factor = replication_factor
        if url:
            self._client = QdrantClient(url=url, api_key=api_key, timeout=30)
        else:
            self._client = QdrantClient(host=host, port=port, api_key=api_key, timeout=30)

    @staticmethod
    def _filter(payload_filter: PayloadFilter | None) -> Any:
        from qdrant_client import models

        if payload_filter is None or payload_filter.is_empty():
            return None
        must = []
        for key, values in payload_filter.must_match.items():
            match = models.MatchValue(value=values[0]) if len(values) == 1 else models.MatchAny(any=list(values))
            must.append(models.FieldCondition(key=key, match=match))
        for key, (low, high) in payload_filter.ranges.items():
            must.append(models.FieldCondition(key=key, range=models.Range(gte=low, lte=high)))
        return models.Filter(must=must)

    def ensure_collection(self, name: str, dense_dim: int) -> None:
        """See ``VectorStore.ensure_collection``."""
        from qdrant_client import models

        if self._client.collection_exists(name):
            info = self._client.get_collection(name)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) else None
            if size != dense_dim:
                raise VectorStoreError(
                    f"collection {name!r} holds {size}-dim vectors but the active embedding model "
                    f"makes {dense_dim}-dim vectors — run `codemem index --reembed`"
                )
            return
        self._client.create_collection(
            name,
            vectors_config={DENSE: models.VectorParams(size=dense_dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            hnsw_config=models.HnswConfigDiff(m=16, ef_construct=200, full_scan_threshold=EXACT_SEARCH_KB),
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
        )
        for key in KEYWORD_FIELDS:
            self._client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD)
        for key in FLOAT_FIELDS:
            self._client.create_payload_index(name, key, models.PayloadSchemaType.FLOAT)

    def drop_collection(self, name: str) -> None:
        """Delete a collection."""
        self._client.delete_collection(name)

    def clear_collection(self, name: str, dense_dim: int) -> None:
        """See ``VectorStore.clear_collection``: deletes every point of a collection of the right
        dimension (it never goes missing); drops and recreates one of another dimension."""
        from qdrant_client import models

        if self._client.collection_exists(name):
            vectors = self._client.get_collection(name).config.params.vectors
            if isinstance(vectors, dict) and DENSE in vectors and vectors[DENSE].size == dense_dim:
                self._client.delete(name, points_selector=models.FilterSelector(filter=models.Filter()), wait=True)
                return
            self.drop_collection(name)
        self.ensure_collection(name, dense_dim)

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """See ``VectorStore.upsert``."""
        from qdrant_client import models

        if not points:
            return
        structs = []
        for point in points:
            vector: dict[str, Any] = {}
            if point.dense is not None:
                vector[DENSE] = [float(x) for x in point.dense]
            if point.sparse is not None and point.sparse.indices:
                vector[SPARSE] = models.SparseVector(indices=point.sparse.indices, values=point.sparse.values)
            structs.append(models.PointStruct(id=point.id, vector=vector, payload=point.payload))
        self._client.upsert(collection, structs, wait=True)

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """See ``VectorStore.set_dense``."""
        from qdrant_client import models

        if vectors:
            self._client.update_vectors(
                collection,
                [models.PointVectors(id=pid, vector={DENSE: [float(x) for x in vec]}) for pid, vec in vectors.items()],
                wait=True,
            )

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """See ``VectorStore.delete``."""
        from qdrant_client import models

        if ids:
            self._client.delete(collection, models.PointIdsList(points=list(ids)), wait=True)

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
        """The dense and sparse candidate lists separately."""
        from qdrant_client import models

        flt = self._filter(payload_filter)

        def run(query: Any, using: str) -> list[VectorHit]:
            response = self._client.query_points(
                collection, query=query, using=using, limit=candidates, query_filter=flt, with_payload=with_payload
            )
            return [VectorHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in response.points]

        dense_hits = run([float(x) for x in dense], DENSE) if dense is not None else []
        sparse_hits = (
            run(models.SparseVector(indices=sparse.indices, values=sparse.values), SPARSE)
            if sparse is not None and sparse.indices
            else []
        )
        return dense_hits, sparse_hits

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
        """See ``VectorStore.hybrid_query``."""
        dense_hits, sparse_hits = self.ranked_lists(
            collection, dense=dense, sparse=sparse, candidates=candidates, payload_filter=payload_filter
        )
        return _rrf([(dense_hits, weights[0]), (sparse_hits, weights[1])], limit)

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[VectorHit]:
        """See ``VectorStore.retrieve``."""
        if not ids:
            return []
        records = self._client.retrieve(collection, list(ids), with_payload=True)
        return [VectorHit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records]

    def dense_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """See ``VectorStore.dense_vectors``."""
        if not ids:
            return {}
        records = self._client.retrieve(collection, list(ids), with_payload=False, with_vectors=[DENSE])
        return {
            str(r.id): list(r.vector[DENSE])  # type: ignore[index]
            for r in records
            if isinstance(r.vector, dict) and r.vector.get(DENSE) is not None
        }

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """See ``VectorStore.count``."""
        return int(self._client.count(collection, count_filter=self._filter(payload_filter), exact=True).count)

    def ids(self, collection: str) -> set[str]:
        """See ``VectorStore.ids``."""
        found: set[str] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(collection, limit=2048, offset=offset, with_payload=False)
            found.update(str(r.id) for r in records)
            if offset is None:
                return found

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """See ``VectorStore.scroll``."""
        hits: list[VectorHit] = []
        offset = None
        while len(hits) < limit:
            records, offset = self._client.scroll(
                collection, scroll_filter=self._filter(payload_filter), limit=min(1024, limit - len(hits)),
                offset=offset, with_payload=True,
            )
            hits.extend(VectorHit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records)
            if offset is None:
                break
        return hits

    def flush(self) -> None:
        """Nothing to do: the server persists on write."""

    def optimize(self, collection: str) -> None:
        """Nothing to do: the server optimizes in the background."""

    def close(self) -> None:
        """See ``VectorStore.close``."""
        self._client.close()


def create_vector_store(settings: Any) -> EdgeVectorStore | ServerVectorStore:
    """The server store when a Qdrant server is configured, else embedded qdrant-edge."""
    if settings.server_mode_vectors:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return ServerVectorStore(
            settings.qdrant_url, settings.qdrant_host, settings.qdrant_port, key,
            shard_number=settings.qdrant_shard_number,
            replication_factor=settings.qdrant_replication_factor,
        )
    return EdgeVectorStore(settings.resolved_state_dir() / "qdrant")

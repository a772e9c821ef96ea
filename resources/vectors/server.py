"""The server vector store: a Qdrant server through the official ``qdrant-client`` (HTTP).

Used when ``QDRANT_URL``/``QDRANT_HOST`` is set; same contract as the embedded store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from resources.vectors.points import (
    all_ids,
    build_filter,
    dense_by_id,
    dense_list,
    held_as_is,
    payload_hits,
    point_vectors,
    rrf,
    scored_hits,
    scroll_hits,
    stored_payload,
)
from resources.vectors.store import (
    DENSE,
    EXACT_SEARCH_KB,
    FLOAT_FIELDS,
    SPARSE,
    PayloadFilter,
    SparseVec,
    VectorHit,
    VectorPoint,
    VectorStoreError,
)


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
        location: str | None = None,
    ) -> None:
        """Connect to the server given by URL or host/port.

        ``shard_number`` and ``replication_factor`` apply to the collections this store creates
        (a distributed Qdrant cluster); None leaves the server's defaults. Existing collections
        keep theirs (Qdrant changes replication of an existing collection through its cluster API).
        ``location`` (``":memory:"`` or a folder) runs qdrant-client's own in-process
        implementation of the API instead of a server: the contract tests run every request this
        store builds through it where no server can run (``docs/scaling.md`` says what it cannot show).
        """
        from qdrant_client import QdrantClient

        self.shard_number = shard_number
        self.replication_factor = replication_factor
        if location:
            self._client = QdrantClient(location=location) if location == ":memory:" else QdrantClient(path=location)
        elif url:
            self._client = QdrantClient(url=url, api_key=api_key, timeout=30)
        else:
            self._client = QdrantClient(host=host, port=port, api_key=api_key, timeout=30)

    @staticmethod
    def _filter(payload_filter: PayloadFilter | None) -> Any:
        from qdrant_client import models

        return build_filter(
            payload_filter,
            match_one=lambda key, value: models.FieldCondition(key=key, match=models.MatchValue(value=value)),
            match_any=lambda key, values: models.FieldCondition(key=key, match=models.MatchAny(any=values)),
            in_range=lambda key, low, high: models.FieldCondition(key=key, range=models.Range(gte=low, lte=high)),
            all_of=lambda must: models.Filter(must=must),
        )

    @staticmethod
    def _sparse_vector(indices: list[int], values: list[float]) -> Any:
        from qdrant_client import models

        return models.SparseVector(indices=indices, values=values)

    def ensure_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, dense_on_disk: bool = False,
        write_ahead_log: bool = True, dense_apart: Sequence[str] | None = None,
    ) -> None:
        """See ``VectorStore.ensure_collection``: a server may be shared (another codemem version, an
        operator's own indexes), so missing indexes are added and none is dropped. A server keeps
        its collections open: ``dense_on_disk`` (a saving at each embedded open) is not applied;
        its write-ahead log is the server's own (``write_ahead_log`` is not applied either), and so is
        the room it gives points without a dense vector (``dense_apart`` is not applied)."""
        from qdrant_client import models

        wanted = list(dict.fromkeys(indexes or ()))
        if self._client.collection_exists(name):
            info = self._client.get_collection(name)
            vectors = info.config.params.vectors
            size = vectors[DENSE].size if isinstance(vectors, dict) else None
            if size != dense_dim:
                raise VectorStoreError(
                    f"collection {name!r} holds {size}-dim vectors but the active embedding model "
                    f"makes {dense_dim}-dim vectors — run `codemem index --reembed`"
                )
            indexed = list(info.payload_schema or {})
            self._create_indexes(name, [key for key in wanted if key not in indexed])
            return
        self._client.create_collection(
            name,
            vectors_config={DENSE: models.VectorParams(size=dense_dim, distance=models.Distance.COSINE)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            hnsw_config=models.HnswConfigDiff(m=16, ef_construct=200, full_scan_threshold=EXACT_SEARCH_KB),
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
        )
        self._create_indexes(name, wanted)

    def payload_indexes(self, name: str) -> list[str]:
        """See ``VectorStore.payload_indexes``."""
        if not self._client.collection_exists(name):
            return []
        return list(self._client.get_collection(name).payload_schema or {})

    def _create_indexes(self, name: str, fields: Sequence[str]) -> None:
        from qdrant_client import models

        for key in fields:
            kind = models.PayloadSchemaType.FLOAT if key in FLOAT_FIELDS else models.PayloadSchemaType.KEYWORD
            self._client.create_payload_index(name, key, kind)

    def drop_collection(self, name: str) -> None:
        """Delete a collection."""
        self._client.delete_collection(name)

    def clear_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, write_ahead_log: bool = True,
        dense_apart: Sequence[str] | None = None,
    ) -> None:
        """See ``VectorStore.clear_collection``: deletes every point of a collection of the right
        dimension (it never goes missing); drops and recreates one of another dimension."""
        from qdrant_client import models

        if self._client.collection_exists(name):
            info = self._client.get_collection(name)
            if indexes is None:
                indexes = list(info.payload_schema or {})
            vectors = info.config.params.vectors
            if isinstance(vectors, dict) and DENSE in vectors and vectors[DENSE].size == dense_dim:
                self._client.delete(name, points_selector=models.FilterSelector(filter=models.Filter()), wait=True)
                self.ensure_collection(name, dense_dim, indexes)  # its indexes as asked
                return
            self.drop_collection(name)
        self.ensure_collection(name, dense_dim, indexes)

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """See ``VectorStore.upsert``."""
        from qdrant_client import models

        if not points:
            return
        structs = [
            models.PointStruct(id=point.id, vector=point_vectors(point, self._sparse_vector), payload=stored_payload(point.payload))
            for point in points
        ]
        self._client.upsert(collection, structs, wait=True)

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """See ``VectorStore.set_dense``."""
        from qdrant_client import models

        if vectors:
            self._client.update_vectors(
                collection,
                [models.PointVectors(id=pid, vector={DENSE: dense_list(vec)}) for pid, vec in vectors.items()],
                wait=True,
            )

    def set_payload(self, collection: str, values: dict[str, Any], payload_filter: PayloadFilter) -> None:
        """See ``VectorStore.set_payload``."""
        self._client.set_payload(collection, values, points=self._filter(payload_filter), wait=True)

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
        flt = self._filter(payload_filter)

        def run(query: Any, using: str) -> list[VectorHit]:
            response = self._client.query_points(
                collection, query=query, using=using, limit=candidates, query_filter=flt, with_payload=with_payload
            )
            return scored_hits(response.points)

        dense_hits = run(dense_list(dense), DENSE) if dense is not None else []
        sparse_hits = (
            run(self._sparse_vector(sparse.indices, sparse.values), SPARSE)
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
        return rrf([(dense_hits, weights[0]), (sparse_hits, weights[1])], limit)

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[VectorHit]:
        """See ``VectorStore.retrieve``."""
        if not ids:
            return []
        return payload_hits(self._client.retrieve(collection, list(ids), with_payload=True))

    def held_as_is(self, collection: str, points: Sequence[VectorPoint]) -> set[str]:
        """See ``VectorStore.held_as_is``."""
        if not points:
            return set()
        records = self._client.retrieve(collection, [point.id for point in points], with_payload=True, with_vectors=[SPARSE])
        stored = {str(r.id): r for r in records}
        return {
            point.id for point in points
            if (record := stored.get(point.id)) is not None
            and held_as_is(point, record.payload, (record.vector or {}).get(SPARSE) if isinstance(record.vector, dict) else None)
        }

    def prefetch(self, collection: str, ids: Sequence[str]) -> None:
        """See ``VectorStore.prefetch``: the server keeps its own pages."""

    def dense_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """See ``VectorStore.dense_vectors``."""
        if not ids:
            return {}
        return dense_by_id(self._client.retrieve(collection, list(ids), with_payload=False, with_vectors=[DENSE]))

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """See ``VectorStore.count``."""
        return int(self._client.count(collection, count_filter=self._filter(payload_filter), exact=True).count)

    def ids(self, collection: str) -> set[str]:
        """See ``VectorStore.ids``."""
        return all_ids(lambda offset: self._client.scroll(collection, limit=2048, offset=offset, with_payload=False))

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """See ``VectorStore.scroll``."""
        return scroll_hits(
            lambda offset, size: self._client.scroll(
                collection, scroll_filter=self._filter(payload_filter), limit=size, offset=offset, with_payload=True,
            ),
            limit,
        )

    def flush(self, collection: str | None = None) -> None:
        """Nothing to do: the server persists on write."""

    def optimize(self, collection: str) -> None:
        """Nothing to do: the server optimizes in the background."""

    def close(self) -> None:
        """See ``VectorStore.close``."""
        self._client.close()

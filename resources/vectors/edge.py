"""The embedded vector store: Qdrant in-process through ``qdrant-edge-py``.

One shard directory per collection under the state dir. A shard directory admits one process;
the project's owner process holds it (see ``query_server.ownership``).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resources.private_files import make_private_dir
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


MARKER = "codemem_collection.json"
"""A collection's record of its dense dimension and payload indexes, in its shard directory."""
DENSE_STORAGE = "Float16"
"""How collections created from now on store dense vectors (``qdrant_edge.VectorStorageDatatype``;
one created before keeps float32). On 100,000 random unit vectors of 384 dimensions: 95 against
170 MB on disk, a filtered exact top 50 in 13.0 against 15.6 ms (p50), and the same top 50 as
float32 (recall 0.9998)."""
LEGACY_INDEXES = ("file_path", "language", "kind", "name", "path_prefixes")
"""The payload indexes of a collection whose marker predates the ``indexes`` list."""
SEGMENT_POINTS = 100_000
"""A collection made from now on (its marker says ``segment_points``) closes its appendable
segment once this many points were written to it: ``optimize`` makes it immutable, its sparse
and payload indexes mapped from disk, and later writes go to a new appendable one. qdrant-edge
rebuilds an appendable segment's indexes in RAM each time it opens one (a million-point one: ~14 s
to open, ~6 s to close, 4.5 GB resident; an immutable one of 200,000 points opens in 0.3 s), and
optimizing a million-point segment at once held 10 GB. Measured on the Linux kernel's points:
~13 s a 100,000-point chunk (most of it the payload indexes)."""
DENSE_APART = "+dense"
"""The suffix of the collection that holds the dense vectors of a collection made with
``dense_apart`` (``code+dense`` for ``code``): only the points that have one, with the payload
fields a dense search filters on (``dense_apart`` names them). qdrant-edge gives every point of a
collection that declares a dense vector a slot for it, written with placeholders until the vector
comes (768 bytes a point at 384 float16 dimensions): at the Linux kernel, whose million symbols are searchable by words hours before their
dense vectors are computed, 778 MB of the 3.4 GB of vectors on disk. Declaring the vector later
does not help: qdrant-edge gives existing points the slot then."""
SEGMENTS_BEFORE_MERGE = 32
"""The number of segments qdrant's merge optimizer lets a collection hold before it merges the
smallest ones (its default, the CPU count, merged the million-point collection's segments again
at each chunk)."""
INDEXED_FROM_POINTS = 200
"""A collection builds its payload indexes once it holds this many points (and drops them, when
ensured, under half as many). Opening a shard costs
~7 ms per index (its files are mapped and read whole: 4 indexes are ~25 of the ~45 ms of opening
a 7-point memory collection on 2 cores, and the first memory_search of a session opens every
memory collection); a filter without an index checks each point's payload instead (~8 µs a point:
~1.5 ms at 200 points, against ~0.5 ms indexed)."""


@dataclass
class _Appendable:
    """A segmented collection's appendable segment: when it closes, and what was written to it."""

    limit: int  # the marker's segment_points
    written: int = 0  # points written to it since it was last closed (across processes)
    saved: int = 0  # ``written`` as the marker last recorded it
    closed: bool | None = None  # whether the collection holds a closed segment (None: not asked yet)


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
        self._indexes: dict[str, list[str]] = {}  # the payload indexes each collection names (once ensured here)
        self._indexed: set[str] = set()  # collections whose named indexes are built
        self._appendable: dict[str, _Appendable | None] = {}  # None: a collection of one appendable segment
        self._apart: dict[str, tuple[str, ...] | None] = {}  # the fields of a collection's dense vectors kept apart (DENSE_APART)
        self._lock = threading.RLock()

    # -- helpers -------------------------------------------------------------------------
    @contextmanager
    def _locked(self, name: str) -> Iterator[Any]:
        """The open shard of a collection, held under the store's lock for the block (looked up
        inside it: a shard taken before the lock may have been closed by a concurrent drop)."""
        with self._lock:
            yield self._shard(name)

    def _shard(self, name: str) -> Any:
        """The open shard of a collection (opened on first use; with the collection that keeps
        its dense vectors apart, when it has one)."""
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
            apart = self._dense_collection(name, create=False)
            if apart is not None:  # its dense vectors' collection too: a session's first search needs both
                self._shard(apart)
            return shard

    @staticmethod
    def _filter(payload_filter: PayloadFilter | None) -> Any:
        import qdrant_edge as qe

        return build_filter(
            payload_filter,
            match_one=lambda key, value: qe.FieldCondition(key=key, match=qe.MatchValue(value)),
            match_any=lambda key, values: qe.FieldCondition(key=key, match=qe.MatchAny(values)),
            in_range=lambda key, low, high: qe.FieldCondition(key=key, range=qe.RangeFloat(gte=low, lte=high)),
            all_of=lambda must: qe.Filter(must=must),
        )

    # -- contract ------------------------------------------------------------------------
    def ensure_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, dense_on_disk: bool = False,
        write_ahead_log: bool = True, dense_apart: Sequence[str] | None = None,
    ) -> None:
        """See ``VectorStore.ensure_collection``. The payload indexes named are built once the
        collection holds ``INDEXED_FROM_POINTS`` points (``payload_indexes`` lists them from the
        start); a collection below that has none, whatever an older codemem built. ``dense_apart``
        (the fields a dense search filters on): a new collection keeps its dense vectors in a
        second one (``DENSE_APART``) with those fields, made at the first dense vector written; an
        existing collection keeps how it was made."""
        import qdrant_edge as qe

        path = self._root / name
        marker = path / MARKER
        with self._lock:
            if marker.exists():
                existing = self._marker(name)
                if existing.get("dense_dim") != dense_dim:
                    raise VectorStoreError(
                        f"collection {name!r} holds {existing.get('dense_dim')}-dim vectors but "
                        f"the active embedding model makes {dense_dim}-dim vectors — run "
                        "`codemem index --reembed` to rebuild it with the active model"
                    )
                shard = self._shard(name)
                declared = list(existing.get("indexes", LEGACY_INDEXES))
                wanted = declared if indexes is None else list(dict.fromkeys(indexes))
                self._indexes[name] = wanted
                self._build_indexes(name, shard, settle=True)
                if wanted != declared:  # a collection made by another codemem version: its indexes now
                    shard.flush()  # what the list promises (a migration's payload writes before it) is on disk first
                    _write_marker(marker, {**existing, "indexes": wanted})
                return
            if path.exists():  # a half-created collection from a crash: start it again
                shutil.rmtree(path)
            # the exact-search threshold is in KB of vectors: halved with float16, the same number of
            # points (~100,000 of 384 dimensions) is searched exactly as before
            storage = getattr(qe.VectorStorageDatatype, DENSE_STORAGE)
            placement = qe.Memory.Cold if dense_on_disk else None
            dense_params = qe.EdgeVectorParams(size=dense_dim, distance=qe.Distance.Cosine, datatype=storage, memory=placement)
            config = qe.EdgeConfig(
                vectors={} if dense_apart is not None else {DENSE: dense_params},
                # the immutable segments' sparse index mapped from disk (an appendable one's is in RAM whatever this says)
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=qe.Memory.Cold)},
                hnsw_config=qe.HnswIndexConfig(
                    m=16, ef_construct=200, full_scan_threshold=EXACT_SEARCH_KB // 2, max_indexing_threads=1
                ),
                # optimize() closes the appendable segment from 1 KB of vectors (points without a dense
                # vector are not counted by qdrant's default threshold): codemem decides when
                optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=SEGMENTS_BEFORE_MERGE),
                wal_enabled=write_ahead_log,
            )
            shutil.rmtree(self._root / (name + DENSE_APART), ignore_errors=True)  # one left by a crash in clear_collection
            shard = qe.EdgeShard.create(str(path), config)
            wanted = list(dict.fromkeys(indexes or ()))
            self._shards[name] = shard
            self._indexes[name] = wanted
            self._indexed.discard(name)
            self._appendable[name] = _Appendable(SEGMENT_POINTS)
            apart = None if dense_apart is None else tuple(dict.fromkeys(dense_apart))
            self._apart[name] = apart
            _write_marker(marker, {
                "dense_dim": dense_dim, "indexes": wanted, "write_ahead_log": write_ahead_log,
                "segment_points": SEGMENT_POINTS, "appendable_points": 0, **({"dense_apart": list(apart)} if apart is not None else {}),
            })

    def payload_indexes(self, name: str) -> list[str]:
        """See ``VectorStore.payload_indexes``: the fields named, built or not yet (a collection
        under ``INDEXED_FROM_POINTS`` points checks each point of a filter instead)."""
        import json

        marker = self._root / name / MARKER

        def declared() -> list[str]:
            return list(json.loads(marker.read_text()).get("indexes", LEGACY_INDEXES))

        try:
            return declared()
        except FileNotFoundError:  # none yet, or the collection is being made anew (clear_collection): ask again once it is
            with self._lock:
                return declared() if marker.exists() else []

    def _build_indexes(self, name: str, shard: Any, *, settle: bool = False) -> None:
        """Build the payload indexes the collection names once it holds ``INDEXED_FROM_POINTS``
        points (after a write; nothing to do once they are built); ``settle`` (when the collection
        is ensured): also drop every index it does not name, and all of them under half that size
        (between the two, what is built stays: a collection near the line does not build and drop
        its indexes in turn). Under the store's lock."""
        import qdrant_edge as qe

        wanted = self._indexes.get(name)
        if wanted is None or (not settle and name in self._indexed):
            return
        points = int(shard.count(qe.CountRequest(exact=True)))
        large = points >= INDEXED_FROM_POINTS
        if not settle and not large:
            return
        built = set(shard.info().payload_schema)
        if large:
            target = wanted
        elif points < INDEXED_FROM_POINTS // 2:
            target = []
        else:
            target = [key for key in wanted if key in built]
        surplus = [key for key in built if key not in target]
        missing = [key for key in target if key not in built]
        for key in surplus:
            shard.update(qe.UpdateOperation.delete_field_index(key))
        on_disk = self._appendable_of(name) is not None  # an immutable segment's index mapped from disk
        for key in missing:
            if key in FLOAT_FIELDS:
                kind = qe.FloatIndexParams(memory=qe.Memory.Cold) if on_disk else qe.PayloadSchemaType.Float
            else:
                kind = qe.KeywordIndexParams(memory=qe.Memory.Cold) if on_disk else qe.PayloadSchemaType.Keyword
            shard.update(qe.UpdateOperation.create_field_index(key, kind))
        if surplus or missing:
            shard.flush()
        if large:
            self._indexed.add(name)
        else:
            self._indexed.discard(name)

    def _marker(self, name: str) -> dict[str, Any]:
        """A collection's marker (empty when it has none)."""
        import json

        try:
            return json.loads((self._root / name / MARKER).read_text())
        except FileNotFoundError:
            return {}

    def _appendable_of(self, name: str) -> _Appendable | None:
        """A collection's appendable segment as its marker records it; None for one made before
        codemem bounded it (one appendable segment, indexes in RAM). Under the store's lock."""
        if name not in self._appendable:
            marker = self._marker(name)
            limit, written = marker.get("segment_points"), int(marker.get("appendable_points", 0))
            self._appendable[name] = None if limit is None else _Appendable(int(limit), written, written)
        return self._appendable[name]

    def _wrote(self, name: str, shard: Any, points: int) -> None:
        """Count points written to a segmented collection's appendable segment; past
        ``SEGMENT_POINTS`` (since it was last closed, across processes), close it: flush, then
        ``optimize``. The count errs high (a dense vector given to a point already in the
        appendable segment counts again; ``set_payload``, used only by a migration of older
        collections, is not counted): a segment closes early, never holds much more. Under the
        store's lock."""
        appendable = self._appendable_of(name)
        if appendable is None:
            return
        appendable.written += points
        if appendable.written >= appendable.limit:
            appendable.written = 0  # a close that fails (disk full) is tried again a segment later, not at each write
            shard.flush()  # an optimize stopped by a crash leaves the flushed segment as it was
            shard.optimize()
            appendable.closed = True
            self._save_appendable(name)

    def _has_closed_segments(self, name: str, shard: Any) -> bool:
        """Whether a segmented collection holds a segment besides its appendable one (where a
        point's new dense vector moves it from). A collection never closed keeps every point where
        it is: its dense vectors (the background embedding of a repository under
        ``SEGMENT_POINTS`` symbols) close nothing. Under the store's lock."""
        appendable = self._appendable_of(name)
        if appendable is None:
            return False
        if appendable.closed is None:
            appendable.closed = shard.info().segments_count > 1
        return appendable.closed

    def _save_appendable(self, name: str) -> None:
        """Record a segmented collection's appendable count in its marker (after a flush of the
        points it counts) when it changed. Under the store's lock."""
        appendable = self._appendable.get(name)
        if appendable is None or appendable.written == appendable.saved:
            return
        marker = self._marker(name)
        if marker:
            _write_marker(self._root / name / MARKER, {**marker, "appendable_points": appendable.written})
        appendable.saved = appendable.written

    def _dense_apart(self, name: str) -> tuple[str, ...] | None:
        """The fields a collection's dense vectors are kept with in another (``DENSE_APART``), as
        its marker says; None when it keeps them itself. Under the store's lock."""
        if name not in self._apart:
            fields = self._marker(name).get("dense_apart")
            self._apart[name] = None if fields is None else tuple(fields)
        return self._apart[name]

    def _dense_collection(self, name: str, *, create: bool) -> str | None:
        """The collection that holds ``name``'s dense vectors when ``name`` keeps them apart (made
        now when ``create``); None when it does not, or when none was written yet. Under the
        store's lock."""
        fields = self._dense_apart(name)
        if fields is None:
            return None
        dense = name + DENSE_APART
        if dense in self._shards or (self._root / dense / MARKER).exists():
            return dense
        marker = self._marker(name)
        if marker.get("dense_written"):  # made once, gone now (a crash inside a drop, a hand): say so
            raise VectorStoreError(
                f"the dense vectors of collection {name!r} are missing ({self._root / dense}) — run `codemem repair`"
            )
        if not create:
            return None
        self.ensure_collection(dense, int(marker["dense_dim"]), fields, write_ahead_log=bool(marker.get("write_ahead_log", True)))
        _write_marker(self._root / name / MARKER, {**marker, "dense_written": True})
        return dense

    def _put_dense_apart(self, name: str, points: Sequence[VectorPoint]) -> None:
        """Written points' dense vectors, into the collection that holds them apart: a point
        written without one loses the one its earlier version had (as an upsert replaces a point
        whole). Under the store's lock."""
        with_dense = [point for point in points if point.dense is not None]
        dense = self._dense_collection(name, create=bool(with_dense))
        if dense is None:
            return
        fields = self._dense_apart(name) or ()
        self.delete(dense, [point.id for point in points if point.dense is None])
        self.upsert(dense, [VectorPoint(point.id, _only(point.payload, fields), point.dense) for point in with_dense])

    @staticmethod
    def _held(shard: Any, hits: list[VectorHit], with_payload: bool) -> list[VectorHit]:
        """The ``hits`` of a collection's dense vectors kept apart that the collection itself
        (``shard``) still holds (a crash between the two writes of a delete can leave a stray),
        with their payloads from it when asked. Under the store's lock."""
        if not hits:
            return hits
        records = shard.retrieve([hit.id for hit in hits], with_payload=with_payload, with_vector=False)
        found = {hit.id: hit.payload for hit in payload_hits(records)}
        return [VectorHit(hit.id, hit.score, found[hit.id]) for hit in hits if hit.id in found]

    def _ranked_apart(
        self, collection: str, shard: Any, dense: Sequence[float] | None, sparse: SparseVec | None,
        candidates: int, payload_filter: PayloadFilter | None, with_payload: bool,
    ) -> tuple[list[VectorHit], list[VectorHit]]:
        """``ranked_lists`` of a collection that keeps its dense vectors apart: its words from it,
        its dense neighbours from the other (their payloads, when asked, from it). Under the store's lock."""
        import qdrant_edge as qe

        fields = self._dense_apart(collection) or ()
        flt = self._filter(payload_filter)
        queries = dict(self._nearest(dense, sparse))
        sparse_hits: list[VectorHit] = []
        if SPARSE in queries:
            sparse_hits = scored_hits(shard.query(
                qe.QueryRequest(limit=candidates, query=queries[SPARSE], filter=flt, with_payload=with_payload)
            ))
        dense_hits: list[VectorHit] = []
        apart = self._dense_collection(collection, create=False)
        if DENSE in queries and apart is not None:
            filtered = set() if payload_filter is None else {*payload_filter.must_match, *payload_filter.ranges}
            unkept = sorted(filtered - set(fields))
            if unkept:
                raise VectorStoreError(
                    f"a dense search of {collection!r} filters on {', '.join(unkept)}, which its dense vectors "
                    f"are not kept with (only {', '.join(fields) or 'no field'}): add it to the collection's dense_apart fields"
                )
            dense_hits = self._held(shard, scored_hits(self._shard(apart).query(
                qe.QueryRequest(limit=candidates, query=queries[DENSE], filter=flt, with_payload=False)
            )), with_payload)
        return dense_hits, sparse_hits

    def drop_collection(self, name: str) -> None:
        """Delete a collection and its files."""
        with self._lock:
            if self._dense_apart(name) is not None:
                # its marker first: a crash from here leaves a collection ensure_collection makes anew
                # (its dense vectors' collection with it), never one that lost them unnoticed
                (self._root / name / MARKER).unlink(missing_ok=True)
                self.drop_collection(name + DENSE_APART)
            self._apart.pop(name, None)
            self._indexed.discard(name)
            self._appendable.pop(name, None)
            self._indexes.pop(name, None)
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            shutil.rmtree(self._root / name, ignore_errors=True)

    def clear_collection(
        self, name: str, dense_dim: int, indexes: Sequence[str] | None = None, *, write_ahead_log: bool = True,
        dense_apart: Sequence[str] | None = None,
    ) -> None:
        """See ``VectorStore.clear_collection`` (both steps under the store's lock; ``indexes`` None
        keeps the collection's own, ``dense_apart`` None how it keeps its dense vectors)."""
        with self._lock:
            if indexes is None:
                indexes = self.payload_indexes(name)
            if dense_apart is None:
                dense_apart = self._dense_apart(name)
            self.drop_collection(name)
            self.ensure_collection(name, dense_dim, indexes, write_ahead_log=write_ahead_log, dense_apart=dense_apart)

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """See ``VectorStore.upsert``."""
        import qdrant_edge as qe

        if not points:
            return
        with self._locked(collection) as shard:
            apart = self._dense_apart(collection) is not None
            edge_points = [
                qe.Point(point.id, point_vectors(_without_dense(point) if apart else point, qe.SparseVector), stored_payload(point.payload))
                for point in points
            ]
            shard.update(qe.UpdateOperation.upsert_points(edge_points))
            self._build_indexes(collection, shard)
            self._wrote(collection, shard, len(edge_points))
            if apart:
                self._put_dense_apart(collection, points)

    def set_dense(self, collection: str, vectors: dict[str, Sequence[float]]) -> None:
        """See ``VectorStore.set_dense``."""
        import qdrant_edge as qe

        if not vectors:
            return
        with self._locked(collection) as shard:
            fields = self._dense_apart(collection)
            if fields is not None:  # the points it still holds, with the fields a dense search filters on
                records = shard.retrieve(list(vectors), with_payload=True, with_vector=False)
                self.upsert(self._dense_collection(collection, create=True) or "", [
                    VectorPoint(str(record.id), _only(dict(record.payload or {}), fields), vectors[str(record.id)])
                    for record in records if str(record.id) in vectors
                ])
                return
            updates = [qe.PointVectors(pid, {DENSE: dense_list(vec)}) for pid, vec in vectors.items()]
            shard.update(qe.UpdateOperation.update_vectors(updates))
            if self._has_closed_segments(collection, shard):  # a point of a closed segment moves to the appendable one
                self._wrote(collection, shard, len(updates))

    def set_payload(self, collection: str, values: dict[str, Any], payload_filter: PayloadFilter) -> None:
        """See ``VectorStore.set_payload``."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:
            shard.update(qe.UpdateOperation.set_payload_by_filter(self._filter(payload_filter), values))
            apart = self._dense_collection(collection, create=False)
            kept = _only(values, self._dense_apart(collection) or ())
            if apart is not None and kept:
                self.set_payload(apart, kept, payload_filter)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """See ``VectorStore.delete``."""
        import qdrant_edge as qe

        if not ids:
            return
        with self._locked(collection) as shard:
            shard.update(qe.UpdateOperation.delete_points(list(ids)))
            apart = self._dense_collection(collection, create=False)
            if apart is not None:
                self.delete(apart, ids)

    @staticmethod
    def _nearest(dense: Sequence[float] | None, sparse: SparseVec | None) -> list[tuple[str, Any]]:
        """The nearest-neighbour queries to run: ("dense"|"sparse", query) for each vector given."""
        import qdrant_edge as qe

        queries: list[tuple[str, Any]] = []
        if dense is not None:
            queries.append((DENSE, qe.Query.Nearest(dense_list(dense), using=DENSE)))
        if sparse is not None and sparse.indices:
            queries.append((SPARSE, qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)))
        return queries

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
        """See ``VectorStore.hybrid_query``: Qdrant's own prefetch + RRF fusion (of a collection whose
        dense vectors are kept apart: the two lists fused here by the same formula, ``rrf``)."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:  # a missing collection raises, even for an empty query
            if self._dense_apart(collection) is not None:
                dense_hits, sparse_hits = self._ranked_apart(collection, shard, dense, sparse, candidates, payload_filter, False)
                return self._held(shard, rrf([(dense_hits, weights[0]), (sparse_hits, weights[1])], limit), True)
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
        return scored_hits(scored)

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
            if self._dense_apart(collection) is not None:
                return self._ranked_apart(collection, shard, dense, sparse, candidates, payload_filter, with_payload)
            flt = self._filter(payload_filter)
            queries = self._nearest(dense, sparse)
            if not queries:
                return [], []
            requests = [
                qe.QueryRequest(limit=candidates, query=query, filter=flt, with_payload=with_payload)
                for _, query in queries
            ]
            results = shard.query_batch(qe.QueryBatchRequest(requests))
        found = {name: scored_hits(result) for (name, _), result in zip(queries, results, strict=True)}
        return found.get(DENSE, []), found.get(SPARSE, [])

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[VectorHit]:
        """See ``VectorStore.retrieve``."""
        if not ids:
            return []
        with self._locked(collection) as shard:
            records = shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return payload_hits(records)

    def held_as_is(self, collection: str, points: Sequence[VectorPoint]) -> set[str]:
        """See ``VectorStore.held_as_is``."""
        if not points:
            return set()
        with self._locked(collection) as shard:
            records = shard.retrieve([point.id for point in points], with_payload=True, with_vector=[SPARSE])
        stored = {str(r.id): r for r in records}
        return {
            point.id for point in points
            if (record := stored.get(point.id)) is not None
            and held_as_is(point, record.payload, (record.vector or {}).get(SPARSE) if isinstance(record.vector, dict) else None)
        }

    PREFETCH_CHUNK = 250
    """Points read at a time by ``prefetch``: the store's lock is held for one chunk only (~0.05 s
    read cold), so searches and the run's writes go on between them."""

    def prefetch(self, collection: str, ids: Sequence[str]) -> None:
        """See ``VectorStore.prefetch`` (the library reads the segments' storage with the GIL
        released: a thread's prefetch overlaps the run's parsing)."""
        for start in range(0, len(ids), self.PREFETCH_CHUNK):
            with self._locked(collection) as shard:
                shard.retrieve(list(ids[start:start + self.PREFETCH_CHUNK]), with_payload=True, with_vector=[SPARSE])

    def dense_vectors(self, collection: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """See ``VectorStore.dense_vectors``."""
        if not ids:
            return {}
        with self._locked(collection) as shard:
            if self._dense_apart(collection) is not None:
                apart = self._dense_collection(collection, create=False)
                if apart is None:  # none written yet
                    return {}
                shard = self._shard(apart)
            records = shard.retrieve(list(ids), with_payload=False, with_vector=[DENSE])
        return dense_by_id(records)

    def count(self, collection: str, payload_filter: PayloadFilter | None = None) -> int:
        """See ``VectorStore.count``."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:
            return int(shard.count(qe.CountRequest(exact=True, filter=self._filter(payload_filter))))

    def ids(self, collection: str) -> set[str]:
        """See ``VectorStore.ids``."""
        import qdrant_edge as qe

        with self._locked(collection) as shard:
            return all_ids(
                lambda offset: shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=2048, with_payload=False, with_vector=False)
                )
            )

    def scroll(self, collection: str, payload_filter: PayloadFilter | None = None, *, limit: int = 10_000) -> list[VectorHit]:
        """See ``VectorStore.scroll``."""
        import qdrant_edge as qe

        flt = self._filter(payload_filter)
        with self._locked(collection) as shard:
            return scroll_hits(
                lambda offset, size: shard.scroll(
                    qe.ScrollRequest(offset=offset, limit=size, filter=flt, with_payload=True, with_vector=False)
                ),
                limit,
            )

    def flush(self, collection: str | None = None) -> None:
        """See ``VectorStore.flush`` (of every open collection when none is named; a collection's
        dense vectors kept apart with it)."""
        with self._lock:
            if collection is not None:
                for name in (collection + DENSE_APART, collection):  # (a collection's dense vectors kept apart first)
                    shard = self._shards.get(name)
                    if shard is not None:  # not opened by this process: nothing written to it here
                        shard.flush()
                        self._save_appendable(name)
                return
            for name, shard in self._shards.items():
                shard.flush()
                self._save_appendable(name)

    def optimize(self, collection: str) -> None:
        """Merge segments, drop tombstones, build indexes (HNSW, payload); a segmented collection's
        appendable segment is closed too (a new one takes the next writes)."""
        with self._locked(collection) as shard:
            apart = self._dense_collection(collection, create=False)
            if apart is not None:
                self.optimize(apart)
            shard.optimize()
            appendable = self._appendable_of(collection)
            if appendable is not None:
                appendable.written, appendable.closed = 0, None  # (closed: asked again when needed)
                self._save_appendable(collection)

    def close(self) -> None:
        """See ``VectorStore.close``."""
        with self._lock:
            shards, self._shards = dict(self._shards), {}
            failures = []
            for name, shard in shards.items():  # closing persists what was written (a flush first only doubled the cost)
                try:
                    shard.close()
                    self._save_appendable(name)
                except Exception as exc:  # noqa: BLE001 - close the others, then report the first
                    failures.append(exc)
            if failures:
                raise VectorStoreError(f"closing a vector collection failed: {failures[0]}") from failures[0]


def _only(payload: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """The ``fields`` of a payload (those it has)."""
    return {key: payload[key] for key in fields if key in payload}


def _without_dense(point: VectorPoint) -> VectorPoint:
    """``point`` without its dense vector (kept apart)."""
    return VectorPoint(point.id, point.payload, None, point.sparse)


def _write_marker(marker: Path, content: dict[str, Any]) -> None:
    """Write a collection's marker whole: a reader never sees it half-written (``payload_indexes``
    reads it without the store's lock, a search during a reindex's rebuild found it empty), nor a
    crash leave it so."""
    import json

    partial = marker.with_name(marker.name + ".tmp")
    partial.write_text(json.dumps(content))
    os.replace(partial, marker)

"""What the two Qdrant stores share: point conversion, filters, paging, hit building and fusion.

``qdrant-edge`` and ``qdrant-client`` name the same concepts with different classes; each store
passes its library's constructors, and the shape of the work is written once here.
"""

from __future__ import annotations

import base64
import json
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from resources.vectors.store import DENSE, SPARSE, PayloadFilter, VectorHit, VectorPoint

Page = tuple[Sequence[Any], Any]
"""One page of a scroll: its records and the offset of the next page (None after the last)."""


SHOWN_KEY = "_shown"
"""Where an earlier release stored the shown-only fields: one JSON string (still read)."""
PACKED_KEY = "_shown_z"
"""Where the shown-only fields are stored: their JSON, deflated with ``SHOWN_DICTIONARY`` and
base64-encoded, after a one-character format version (``PACKED_VERSION``)."""
SHOWN_FIELDS = frozenset({
    "signature", "docstring", "code", "code_truncated", "is_async", "extends", "implements",
    "content_hash", "symbol_hash", "indexed_at", "local_name",
})
"""Fields of a code or document point's payload that are only ever shown, never filtered on:
stored together as one string under ``PACKED_KEY`` and read back as fields. qdrant-edge
converts each value of a payload on its own (~5 µs a string, a list more), which made building
the points ~60% of an index's vector writes; one string halves it. Deflated, the string is half
the size: on Linux's ``fs/`` the 51,465 points' shown fields take 29 MB instead of 55 MB."""
PACKED_VERSION = "1"
SHOWN_DICTIONARY = (
    b" return  static  struct  const  unsigned  int  void  char  bool  if (  else  for (  while (  NULL  nil "
    b"sizeof(  break;\\n  case  switch (  self.  def  class  function  public  private  protected  import  from "
    b" None  true  false  this.  async  await  string  =>  !==  ===  err != nil  := \\n\\t\\t\\t\\n\\t\\t\\n\\t"
    b"\\n            \\n        \\n    "
    b'{"local_name": "", "signature": "", "docstring": null, "code": "", "code_truncated": false, '
    b'"is_async": false, "extends": [], "implements": [], "content_hash": "", "symbol_hash": "", "indexed_at": "20'
)
"""zlib's preset dictionary for version 1 of the packed fields: what most of them share (the JSON
keys, common code words, escaped indentation), so that a few hundred bytes compress as well as a
long text would. Fixed for good: a stored point is read with the dictionary of its version."""


def _deflate(text: str) -> str:
    """``text`` packed: version, then base64 of its raw deflate stream with ``SHOWN_DICTIONARY``."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, SHOWN_DICTIONARY)
    return PACKED_VERSION + base64.b64encode(packer.compress(text.encode("utf-8")) + packer.flush()).decode("ascii")


def _inflate(packed: str) -> str:
    """The text ``_deflate`` packed."""
    if packed[:1] != PACKED_VERSION:
        raise ValueError(f"packed payload of unknown version {packed[:1]!r}: written by a newer codemem")
    unpacker = zlib.decompressobj(-15, SHOWN_DICTIONARY)
    return (unpacker.decompress(base64.b64decode(packed[1:])) + unpacker.flush()).decode("utf-8")


def stored_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as written: a code or document point's (one with ``code``) shown-only fields
    packed in one string; any other payload (or one packed already) as it is. Indexing packs its
    points in the parse workers, off the writer's thread."""
    if "code" not in payload:
        return payload
    stored = {key: value for key, value in payload.items() if key not in SHOWN_FIELDS}
    stored[PACKED_KEY] = _deflate(json.dumps({key: value for key, value in payload.items() if key in SHOWN_FIELDS}))
    return stored


def read_payload(raw: Any) -> dict[str, Any]:
    """A payload as read back: the fields ``stored_payload`` packed (or an earlier release stored
    as one JSON string), as fields again."""
    payload = dict(raw or {})
    packed = payload.pop(PACKED_KEY, None)
    if isinstance(packed, str):
        payload = {**json.loads(_inflate(packed)), **payload}
    shown = payload.pop(SHOWN_KEY, None)
    if isinstance(shown, str):
        payload = {**json.loads(shown), **payload}
    return payload


def dense_list(vector: Sequence[float]) -> list[float]:
    """A dense vector as the plain float list both libraries accept."""
    return [float(x) for x in vector]


def point_vectors(point: VectorPoint, sparse_vector: Callable[[list[int], list[float]], Any]) -> dict[str, Any]:
    """The named vectors of a point to write: its dense vector, and its sparse one when it has
    any weight (``sparse_vector`` builds the library's sparse type from indices and values)."""
    vector: dict[str, Any] = {}
    if point.dense is not None:
        vector[DENSE] = dense_list(point.dense)
    if point.sparse is not None and point.sparse.indices:
        vector[SPARSE] = sparse_vector(point.sparse.indices, point.sparse.values)
    return vector


def held_as_is(point: VectorPoint, stored_payload_raw: Any, stored_sparse: Any) -> bool:
    """Whether a stored point (its payload as stored, its sparse vector as the library returns it:
    ``indices`` and ``values``, or None) holds what ``point`` would write: the same payload, the
    same sparse vector (its weights compared as float32, as Qdrant keeps them). Dense vectors are
    the caller's to compare."""
    ours = point.sparse if point.sparse is not None and point.sparse.indices else None
    if (ours is None) != (stored_sparse is None):
        return False
    if ours is not None and (
        list(stored_sparse.indices) != list(ours.indices) or array("f", stored_sparse.values) != array("f", ours.values)
    ):
        return False
    return dict(stored_payload_raw or {}) == point.payload


def build_filter(
    payload_filter: PayloadFilter | None,
    *,
    match_one: Callable[[str, Any], Any],
    match_any: Callable[[str, list[Any]], Any],
    in_range: Callable[[str, float | None, float | None], Any],
    all_of: Callable[[list[Any]], Any],
) -> Any:
    """The library's filter for ``payload_filter`` (None when it has no condition).

    Args:
        payload_filter: The conditions.
        match_one: The condition "``key`` equals ``value``".
        match_any: The condition "``key`` equals one of ``values``".
        in_range: The condition "``key`` lies in ``[low, high]``".
        all_of: The filter that requires every condition.
    """
    if payload_filter is None or payload_filter.is_empty():
        return None
    must = [
        match_one(key, values[0]) if len(values) == 1 else match_any(key, list(values))
        for key, values in payload_filter.must_match.items()
    ]
    must.extend(in_range(key, low, high) for key, (low, high) in payload_filter.ranges.items())
    return all_of(must)


def scored_hits(points: Iterable[Any]) -> list[VectorHit]:
    """Query results (``id``, ``score``, ``payload``) as hits."""
    return [VectorHit(id=str(p.id), score=float(p.score), payload=read_payload(p.payload)) for p in points]


def payload_hits(records: Iterable[Any]) -> list[VectorHit]:
    """Fetched records (``id``, ``payload``) as hits of score 0."""
    return [VectorHit(id=str(r.id), score=0.0, payload=read_payload(r.payload)) for r in records]


def dense_by_id(records: Iterable[Any]) -> dict[str, list[float]]:
    """The dense vectors of fetched records by id (records without one are left out)."""
    return {
        str(r.id): list(r.vector[DENSE])
        for r in records
        if isinstance(r.vector, dict) and r.vector.get(DENSE) is not None
    }


def all_ids(next_page: Callable[[Any], Page]) -> set[str]:
    """Every id of a collection, paging with ``next_page(offset)`` until the last page."""
    found: set[str] = set()
    offset = None
    while True:
        records, offset = next_page(offset)
        found.update(str(r.id) for r in records)
        if offset is None:
            return found


def scroll_hits(next_page: Callable[[Any, int], Page], limit: int) -> list[VectorHit]:
    """Up to ``limit`` points with payloads, paging with ``next_page(offset, page_size)``."""
    hits: list[VectorHit] = []
    offset = None
    while len(hits) < limit:
        records, offset = next_page(offset, min(1024, limit - len(hits)))
        hits.extend(payload_hits(records))
        if offset is None:
            break
    return hits


def rrf(ranked_lists: Iterable[tuple[list[VectorHit], float]], limit: int, k: int = 60) -> list[VectorHit]:
    """Weighted reciprocal-rank fusion as Qdrant computes it (``Fusion.Rrf``): the hit at rank
    ``r`` (from 0) of a list of weight ``w`` scores ``1 / ((r + 1) / w + k - 1)`` (a weight
    stretches the ranks; 1: ``1 / (k + r)``); a list of weight 0 counts for nothing. Used where the
    lists come from two queries: the server store, and an embedded collection whose dense vectors
    are kept apart."""
    scores: dict[str, float] = {}
    first_seen: dict[str, VectorHit] = {}
    for hits, weight in ranked_lists:
        if weight <= 0:
            continue
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / ((rank + 1) / weight + k - 1)
            first_seen.setdefault(hit.id, hit)
    ordered = sorted(scores.items(), key=lambda item: -item[1])[:limit]
    return [VectorHit(id=pid, score=score, payload=first_seen[pid].payload) for pid, score in ordered]

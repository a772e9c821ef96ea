"""One VectorStore contract, run against embedded qdrant-edge, the server store through
qdrant-client's in-process implementation of the API (``client-local``), and (when QDRANT_URL is
set) a Qdrant server."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from resources.vectors.edge import EdgeVectorStore
from resources.vectors.server import ServerVectorStore
from resources.vectors.store import PayloadFilter, SparseVec, VectorPoint, VectorStoreError


def _edge(tmp_path: Path):
    return EdgeVectorStore(tmp_path / "qdrant")


def _edge_dense_apart(tmp_path: Path):
    """The embedded store with the collection's dense vectors kept in a second one (the code index's)."""
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.dense_apart = ("file_path", "language", "path_prefixes")  # what the contract's dense searches filter on
    return store


def _server(tmp_path: Path):
    url = os.environ.get("QDRANT_URL")
    if not url:
        pytest.skip("QDRANT_URL not set: no Qdrant server runs on this machine (no Docker engine); set it to run the server contract")
    return ServerVectorStore(url, None, 6333, os.environ.get("QDRANT_API_KEY"))


def _client_local(tmp_path: Path):
    """The server store's every request through qdrant-client's in-process implementation of the API
    (issue 23: no Qdrant server can run here). What it cannot show: ``LOCAL_MODE_LACKS``."""
    store = ServerVectorStore(None, None, 6333, None, location=str(tmp_path / "qdrant-local"))
    store.local_mode = True
    return store


LOCAL_MODE_LACKS = "qdrant-client's local mode keeps no payload index (it warns and ignores them): only a Qdrant server shows them"


@pytest.fixture(params=[
    pytest.param(_edge, id="edge"),
    pytest.param(_edge_dense_apart, id="edge-dense-apart"),
    pytest.param(_client_local, id="client-local"),
    pytest.param(_server, id="server", marks=pytest.mark.integration),
])
def store(request, tmp_path: Path):
    made = request.param(tmp_path)
    name = f"code_{uuid.uuid4().hex[:8]}"
    made.ensure_collection(name, 4, dense_apart=getattr(made, "dense_apart", None))
    made.test_collection = name
    yield made
    if isinstance(made, ServerVectorStore):
        made.drop_collection(name)
    made.close()


def ids(n: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")) for i in range(n)]


def test_sparse_first_then_dense_and_fusion(store) -> None:
    c = store.test_collection
    a, b, d = ids(3)
    store.upsert(c, [
        VectorPoint(a, {"file_path": "src/a.py", "language": "python", "path_prefixes": ["src/"]}, sparse=SparseVec([1, 2], [1.0, 1.0])),
        VectorPoint(b, {"file_path": "b.go", "language": "go", "path_prefixes": []}, dense=[1, 0, 0, 0], sparse=SparseVec([3], [1.0])),
        VectorPoint(d, {"file_path": "src/d.py", "language": "python", "path_prefixes": ["src/"]}, dense=[0, 1, 0, 0]),
    ])
    # a has no dense vector yet but is found by its sparse vector
    hits = store.hybrid_query(c, dense=[0.9, 0.1, 0, 0], sparse=SparseVec([1], [1.0]), limit=10)
    assert {h.id for h in hits} == {a, b, d}
    assert hits[0].id in {a, b}
    store.set_dense(c, {a: [1, 0, 0, 0]})
    dense_only = store.hybrid_query(c, dense=[1, 0, 0, 0], sparse=None, limit=2)
    assert {h.id for h in dense_only} == {a, b}
    # payload filters: language and directory prefix
    py = store.hybrid_query(c, dense=[1, 0, 0, 0], sparse=None, limit=10, payload_filter=PayloadFilter({"language": ["python"]}))
    assert {h.id for h in py} == {a, d}
    src = store.hybrid_query(c, dense=None, sparse=SparseVec([1, 3], [1.0, 1.0]), limit=10, payload_filter=PayloadFilter({"path_prefixes": ["src/"]}))
    assert [h.id for h in src] == [a]
    # the sparse vector survived set_dense
    assert [h.id for h in store.hybrid_query(c, dense=None, sparse=SparseVec([2], [1.0]), limit=5)] == [a]


def test_upsert_is_idempotent_and_delete_removes(store) -> None:
    c = store.test_collection
    pts = [VectorPoint(i, {"file_path": "x.py", "n": k}, dense=[1, 0, 0, float(k)]) for k, i in enumerate(ids(5))]
    store.upsert(c, pts)
    store.upsert(c, pts)
    assert store.count(c) == 5
    assert store.ids(c) == set(ids(5))
    store.delete(c, ids(5)[:2] + [str(uuid.uuid4())])
    assert store.count(c) == 3
    assert store.count(c, PayloadFilter({"file_path": ["x.py"]})) == 3
    got = store.retrieve(c, [ids(5)[4]])
    assert got[0].payload["n"] == 4


def test_held_as_is_names_the_points_stored_exactly_as_given(store) -> None:
    """What a re-indexed file need not write again: a point stored with the same payload and the
    same sparse weights (compared as the store keeps them, float32); dense vectors are not compared."""
    from resources.vectors.points import stored_payload

    c = store.test_collection
    a, b, d, e = ids(4)
    code = {"code": "def f(): pass", "signature": "def f()", "file_path": "x.py", "language": "python", "path_prefixes": []}
    given = [
        VectorPoint(a, stored_payload({**code, "name": "f", "start_line": 1}), sparse=SparseVec([3, 9], [0.1, 1 / 3])),
        VectorPoint(b, {"file_path": "x.py", "language": "python", "path_prefixes": [], "name": "g"}, dense=[1, 0, 0, 0]),
        VectorPoint(d, {"file_path": "x.py", "language": "python", "path_prefixes": [], "name": "h"}, sparse=SparseVec([4], [2.0])),
    ]
    store.upsert(c, given)
    assert store.held_as_is(c, given) == {a, b, d}
    assert store.held_as_is(c, [VectorPoint(b, given[1].payload)]) == {b}  # its dense vector is the caller's to compare
    changed = [
        VectorPoint(a, stored_payload({**code, "name": "f", "start_line": 2}), sparse=given[0].sparse),  # moved a line down
        VectorPoint(d, given[2].payload, sparse=SparseVec([4], [2.5])),  # another weight
        VectorPoint(b, given[1].payload, sparse=SparseVec([1], [1.0])),  # a sparse vector where it had none
        VectorPoint(e, given[1].payload),  # not stored
    ]
    assert store.held_as_is(c, changed) == set()
    assert store.held_as_is(c, []) == set()


def test_dimension_change_is_refused_with_the_fix(store) -> None:
    with pytest.raises(VectorStoreError, match="--reembed"):
        store.ensure_collection(store.test_collection, 8)


def test_clear_collection_empties_it_and_a_new_dimension_recreates_it(store) -> None:
    c = store.test_collection
    store.upsert(c, [VectorPoint(i, {"file_path": "x.py"}, dense=[1, 0, 0, 0]) for i in ids(4)])
    store.clear_collection(c, 4)
    assert store.count(c) == 0  # still there: a search meanwhile finds nothing instead of failing
    assert store.hybrid_query(c, dense=[1, 0, 0, 0], sparse=None, limit=5) == []
    store.upsert(c, [VectorPoint(ids(1)[0], {"file_path": "y.py"}, dense=[0, 1, 0, 0])])
    assert store.count(c) == 1
    store.clear_collection(c, 8)  # another model: recreated with its dimension
    store.upsert(c, [VectorPoint(ids(1)[0], {"file_path": "y.py"}, dense=[0.0] * 7 + [1.0])])
    assert store.count(c) == 1


def test_edge_store_persists_across_reopen(tmp_path: Path) -> None:
    first = EdgeVectorStore(tmp_path / "q")
    first.ensure_collection("code", 4)
    first.upsert("code", [VectorPoint(i, {"k": 1}, dense=[0, 0, 1, 0]) for i in ids(3)])
    first.close()
    second = EdgeVectorStore(tmp_path / "q")
    second.ensure_collection("code", 4)
    assert second.count("code") == 3
    second.close()


def test_missing_collection_error_says_what_to_do(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "q")
    with pytest.raises(VectorStoreError, match="codemem index"):
        store.count("code")


def test_a_collection_indexes_the_fields_asked_and_an_existing_one_is_brought_to_them(store) -> None:
    if getattr(store, "local_mode", False):
        pytest.skip(LOCAL_MODE_LACKS)
    c = store.test_collection
    store.upsert(c, [VectorPoint(i, {"file_path": f"f{n}.py", "kind": "class" if n % 2 else "function"}, dense=[1, 0, 0, 0])
                     for n, i in enumerate(ids(6))])
    store.ensure_collection(c, 4, ("file_path", "kind", "created_ts"))
    assert sorted(store.payload_indexes(c)) == ["created_ts", "file_path", "kind"]
    store.ensure_collection(c, 4, None)  # None: the collection keeps its own
    assert sorted(store.payload_indexes(c)) == ["created_ts", "file_path", "kind"]
    store.ensure_collection(c, 4, ("kind",))  # another codemem version's set: the embedded store drops the surplus
    if isinstance(store, EdgeVectorStore):
        assert store.payload_indexes(c) == ["kind"]
    else:  # a shared server keeps indexes it did not make
        assert "kind" in store.payload_indexes(c)
    assert store.count(c) == 6
    # a filter on a field no longer indexed still answers exactly (it checks every point)
    assert store.count(c, PayloadFilter({"file_path": ["f1.py", "f2.py"]})) == 2
    assert store.count(c, PayloadFilter({"kind": ["class"]})) == 3
    store.clear_collection(c, 4, ("kind", "file_path"))
    assert {"file_path", "kind"} <= set(store.payload_indexes(c))
    store.clear_collection(c, 8)  # another dimension, recreated: with the indexes it had
    assert {"file_path", "kind"} <= set(store.payload_indexes(c))


def test_an_edge_collection_of_an_older_codemem_loses_its_surplus_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from resources.vectors import edge
    from resources.vectors.store import FLOAT_FIELDS

    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 0)  # a large collection: every index named is built
    first = EdgeVectorStore(tmp_path / "q")
    older = ("file_path", "language", "kind", "name", "path_prefixes", "status", "memory_type", "metadata.status",
             "requirement_ids", "qualified_name", "container", *sorted(FLOAT_FIELDS))
    first.ensure_collection("session_history", 4, older)
    first.upsert("session_history", [VectorPoint(i, {"status": "active", "created_ts": 1.0}, dense=[0, 1, 0, 0]) for i in ids(3)])
    first.close()
    marker = tmp_path / "q" / "session_history" / "codemem_collection.json"
    files_before = sum(1 for _ in (tmp_path / "q" / "session_history").rglob("*"))
    second = EdgeVectorStore(tmp_path / "q")
    second.ensure_collection("session_history", 4, ("status", "created_ts"))
    assert _built_indexes(second, "session_history") == {"status", "created_ts"}
    second.close()
    assert json.loads(marker.read_text())["indexes"] == ["status", "created_ts"]
    assert sum(1 for _ in (tmp_path / "q" / "session_history").rglob("*")) < files_before
    third = EdgeVectorStore(tmp_path / "q")
    assert third.count("session_history", PayloadFilter({"status": ["active"]})) == 3
    third.close()


def test_a_code_points_shown_fields_come_back_as_written_and_its_filters_still_match(store) -> None:
    """A code point's shown-only fields are stored as one string (``points.stored_payload``):
    every read gives the payload as written, and the fields filtered on stay fields."""
    from resources.vectors.points import PACKED_KEY, SHOWN_FIELDS, SHOWN_KEY, read_payload, stored_payload

    c = store.test_collection
    a, b, m = ids(3)
    code = {
        "id": a, "kind": "function", "name": "parse", "qualified_name": "pkg.parse", "file_path": "pkg/p.py",
        "path_prefixes": ["pkg/"], "language": "python", "start_line": 3, "end_line": 9, "is_test": False,
        "signature": "def parse(text: str) -> dict", "docstring": "Parse ü text.", "code": "def parse(text):\n    return {}",
        "code_truncated": False, "is_async": False, "extends": [], "implements": [], "content_hash": "ab12",
        "symbol_hash": "cd34", "requirement_ids": ["REQ-1"], "local_name": "parse", "indexed_at": "2026-11-26T00:00:00",
    }
    memory = {"memory_id": m, "memory_type": "design", "status": "active", "content_hash": "ef56", "metadata": {"k": "v"}}
    store.upsert(c, [VectorPoint(a, code, sparse=SparseVec([1], [1.0])), VectorPoint(b, {**code, "id": b, "name": "other"}, dense=[1, 0, 0, 0]),
                     VectorPoint(m, memory, dense=[0, 1, 0, 0])])
    assert store.retrieve(c, [a])[0].payload == code
    assert store.retrieve(c, [m])[0].payload == memory  # no code: stored as it is
    assert {h.id: h.payload for h in store.scroll(c, PayloadFilter({"name": ["parse"], "kind": ["function"]}))} == {a: code}
    assert [h.payload for h in store.hybrid_query(c, dense=None, sparse=SparseVec([1], [1.0]), limit=5)] == [code]
    assert store.count(c, PayloadFilter({"requirement_ids": ["REQ-1"], "path_prefixes": ["pkg/"]})) == 2
    assert store.count(c, PayloadFilter({"id": [b]})) == 1
    assert read_payload({**{k: v for k, v in code.items() if k != "code"}}) == {k: v for k, v in code.items() if k != "code"}  # an older point
    assert SHOWN_KEY not in read_payload({SHOWN_KEY: "{}", "name": "x"})
    assert stored_payload(stored_payload(code)) == stored_payload(code)  # packed once (in a parse worker), kept as it is
    older = {k: v for k, v in code.items() if k not in SHOWN_FIELDS} | {SHOWN_KEY: json.dumps({k: v for k, v in code.items() if k in SHOWN_FIELDS})}
    assert read_payload(older) == code  # as an earlier release stored it: one JSON string
    if isinstance(store, EdgeVectorStore):  # as stored: one string for the shown fields
        with store._locked(c) as shard:
            raw = dict(shard.retrieve([a], with_payload=True, with_vector=False)[0].payload)
        assert set(raw) == {"id", "kind", "name", "qualified_name", "file_path", "path_prefixes", "language", "start_line",
                            "end_line", "is_test", "requirement_ids", PACKED_KEY}


def test_set_payload_adds_a_field_where_the_filter_matches_and_keeps_the_rest(store) -> None:
    """How an older code collection gets a new filter field (``pipelines.index_stores``)."""
    c = store.test_collection
    a, b, d = ids(3)
    code = {"kind": "function", "language": "python", "file_path": "a.py", "code": "def f():\n    pass"}
    store.upsert(c, [
        VectorPoint(a, code, dense=[1, 0, 0, 0], sparse=SparseVec([1], [1.0])),
        VectorPoint(b, {"kind": "class", "language": "python", "file_path": "b.py"}, dense=[0, 1, 0, 0]),
        VectorPoint(d, {"kind": "function", "language": "go", "file_path": "d.go"}, dense=[0, 0, 1, 0]),
    ])
    store.set_payload(c, {"callable_language": "python"}, PayloadFilter({"kind": ["function"], "language": ["python"]}))
    assert store.retrieve(c, [a])[0].payload == {**code, "callable_language": "python"}
    assert [h.id for h in store.scroll(c, PayloadFilter({"callable_language": ["python"]}))] == [a]
    assert "callable_language" not in store.retrieve(c, [b])[0].payload | store.retrieve(c, [d])[0].payload
    assert [round(x, 6) for x in store.dense_vectors(c, [a])[a]] == [1, 0, 0, 0]  # vectors kept
    assert [h.id for h in store.hybrid_query(c, dense=None, sparse=SparseVec([1], [1.0]), limit=5)] == [a]


def _built_indexes(store: EdgeVectorStore, name: str) -> set[str]:
    with store._locked(name) as shard:
        return set(shard.info().payload_schema)


def test_an_edge_collection_builds_its_payload_indexes_once_it_is_large_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18: opening a shard reads every payload index's files (~7 ms each), and a session's
    first memory_search opens every memory collection; a small collection filters without them."""
    import json

    from resources.vectors import edge

    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 5)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("design_memory", 4, ("status", "created_ts"), dense_on_disk=True)
    assert store.payload_indexes("design_memory") == ["status", "created_ts"]  # named from the start
    store.upsert("design_memory", [VectorPoint(i, {"status": "active", "created_ts": float(n)}, dense=[1, 0, 0, n])
                                   for n, i in enumerate(ids(4))])
    assert _built_indexes(store, "design_memory") == set()
    assert store.count("design_memory", PayloadFilter({"status": ["active"]}, ranges={"created_ts": (1.0, 2.0)})) == 2
    store.upsert("design_memory", [VectorPoint(ids(5)[4], {"status": "deleted", "created_ts": 9.0}, dense=[0, 1, 0, 0])])
    assert _built_indexes(store, "design_memory") == {"status", "created_ts"}
    assert store.count("design_memory", PayloadFilter({"status": ["active"]}, ranges={"created_ts": (1.0, 2.0)})) == 2
    hits = store.hybrid_query("design_memory", dense=[1, 0, 0, 3], sparse=None, limit=2, payload_filter=PayloadFilter({"status": ["active"]}))
    assert [h.id for h in hits][0] == ids(4)[3]
    store.close()
    config = json.loads((tmp_path / "q" / "design_memory" / "edge_config.json").read_text())
    assert config["vectors"]["dense"]["memory"] == "cold"  # read from disk, not loaded at open
    reopened = EdgeVectorStore(tmp_path / "q")  # the vectors read from disk, as written
    assert reopened.dense_vectors("design_memory", [ids(4)[2]])[ids(4)[2]][:2] == pytest.approx([1 / 5 ** 0.5, 0], abs=1e-3)
    reopened.close()


def test_a_small_edge_collection_an_older_codemem_indexed_drops_its_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from resources.vectors import edge

    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 0)  # as an older codemem: every index built at once
    first = EdgeVectorStore(tmp_path / "q")
    first.ensure_collection("code_patterns", 4, ("status", "importance_score"))
    first.upsert("code_patterns", [VectorPoint(i, {"status": "active", "importance_score": 0.5}, dense=[0, 1, 0, 0]) for i in ids(3)])
    assert _built_indexes(first, "code_patterns") == {"status", "importance_score"}
    first.close()
    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 200)
    second = EdgeVectorStore(tmp_path / "q")
    second.ensure_collection("code_patterns", 4, ("status", "importance_score"))
    assert _built_indexes(second, "code_patterns") == set()
    assert second.payload_indexes("code_patterns") == ["status", "importance_score"]
    assert second.count("code_patterns", PayloadFilter({"status": ["active"]})) == 3
    second.close()


def test_an_edge_collection_near_the_line_keeps_what_it_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from resources.vectors import edge

    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 4)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("requirements_memory", 4, ("status",))
    store.upsert("requirements_memory", [VectorPoint(i, {"status": "active"}, dense=[1, 0, 0, 0]) for i in ids(4)])
    assert _built_indexes(store, "requirements_memory") == {"status"}
    store.delete("requirements_memory", ids(4)[:1])  # 3 points: under the line, not under half of it
    store.ensure_collection("requirements_memory", 4, ("status",))
    assert _built_indexes(store, "requirements_memory") == {"status"}
    store.delete("requirements_memory", ids(4)[1:3])  # 1 point: dropped when next ensured
    store.ensure_collection("requirements_memory", 4, ("status",))
    assert _built_indexes(store, "requirements_memory") == set()
    store.close()


def _code_points(start: int, stop: int) -> list[VectorPoint]:
    """Points as the indexer writes them without dense vectors: a sparse vector, a file and a kind."""
    return [
        VectorPoint(ids(stop)[i], {"file_path": f"src/f{i % 7}.c", "kind": "function" if i % 3 else "struct"},
                    sparse=SparseVec([i % 13, 20 + i % 5], [1.0 + i / 1000, 0.5 + i / 1000]))  # no two score alike
        for i in range(start, stop)
    ]


def _segments(store: EdgeVectorStore, name: str) -> int:
    with store._locked(name) as shard:
        return shard.info().segments_count


def _answers(store: EdgeVectorStore, name: str) -> tuple:
    """What a search, a filtered search, a count and a scroll of the collection return: ranks
    (RRF), not raw sparse scores, which differ slightly once points were rewritten (the old copy in
    a closed segment counts in the IDF until a vacuum drops it, as after any ``optimize``)."""
    query = SparseVec([3, 21], [1.0, 1.0])
    found = store.hybrid_query(name, dense=None, sparse=query, limit=10)
    narrowed = store.hybrid_query(name, dense=None, sparse=query, limit=10, payload_filter=PayloadFilter({"file_path": ["src/f3.c"]}))
    return ([(h.id, round(h.score, 6)) for h in found], [h.id for h in narrowed],
            store.count(name, PayloadFilter({"kind": ["struct"]})), sorted(h.id for h in store.scroll(name, PayloadFilter({"file_path": ["src/f1.c"]}))))


def test_an_edge_collection_closes_its_appendable_segment_every_segment_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: qdrant-edge rebuilds an appendable segment's indexes in RAM at each open (14 s and
    4.5 GB for the kernel's million points), so a collection's appendable segment is closed
    (made immutable, its indexes mapped from disk) every SEGMENT_POINTS points, counted across
    processes; it answers exactly as one segment holding the same points does."""
    import qdrant_edge

    from resources.vectors import edge

    monkeypatch.setattr(edge, "INDEXED_FROM_POINTS", 5)
    monkeypatch.setattr(edge, "SEGMENT_POINTS", 50)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False)
    store.upsert("code", _code_points(0, 40))
    assert _segments(store, "code") == 1
    store.upsert("code", _code_points(40, 80))  # 80 written: the appendable segment closed, a new one opened
    assert _segments(store, "code") == 2
    with store._locked("code") as shard:
        placement = {key: info.params.memory for key, info in shard.info().payload_schema.items()}
    assert placement == {"file_path": qdrant_edge.Memory.Cold, "kind": qdrant_edge.Memory.Cold}
    store.upsert("code", _code_points(80, 120))
    store.delete("code", ids(120)[:3])  # two points of the closed segment, out of it
    store.upsert("code", _code_points(10, 12))  # rewritten: moved to the appendable segment
    store.close()
    marker = json.loads((tmp_path / "q" / "code" / edge.MARKER).read_text())
    assert (marker["segment_points"], marker["appendable_points"]) == (50, 42)

    monkeypatch.setattr(edge, "SEGMENT_POINTS", 10_000)  # the same points in one segment, as before this change
    one = EdgeVectorStore(tmp_path / "one")
    one.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False)
    for start in (0, 40, 80):
        one.upsert("code", _code_points(start, start + 40))
    one.delete("code", ids(120)[:3])
    one.upsert("code", _code_points(10, 12))
    assert _segments(one, "code") == 1

    reopened = EdgeVectorStore(tmp_path / "q")  # counted on: 42 + 10 reaches the marker's 50
    assert _answers(reopened, "code") == _answers(one, "code")
    reopened.upsert("code", _code_points(120, 130))
    one.upsert("code", _code_points(120, 130))
    assert _segments(reopened, "code") == 3
    assert reopened.count("code") == one.count("code") == 127
    assert _answers(reopened, "code") == _answers(one, "code")
    reopened.close()
    one.close()


def test_an_edge_collection_of_an_older_codemem_keeps_its_one_appendable_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A collection whose marker predates ``segment_points`` is never optimized behind the
    caller's back: closing a million-point appendable segment at once held 10 GB."""
    from resources.vectors import edge

    monkeypatch.setattr(edge, "SEGMENT_POINTS", 20)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("code", 4, ("file_path",), write_ahead_log=False)
    store.close()
    marker_path = tmp_path / "q" / "code" / edge.MARKER
    marker = json.loads(marker_path.read_text())
    marker_path.write_text(json.dumps({k: v for k, v in marker.items() if k not in ("segment_points", "appendable_points")}))
    older = EdgeVectorStore(tmp_path / "q")
    older.ensure_collection("code", 4, ("file_path",), write_ahead_log=False)
    for start in (0, 30, 60):
        older.upsert("code", _code_points(start, start + 30))
    assert _segments(older, "code") == 1
    assert older.count("code") == 90
    older.close()
    assert "appendable_points" not in json.loads(marker_path.read_text())


def test_dense_vectors_close_a_segment_only_where_they_move_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A point's new dense vector moves it out of a closed segment into the appendable one (that
    counts towards closing it); in a collection never closed it stays where it is: the background
    embedding of a repository under SEGMENT_POINTS symbols closes nothing."""
    from resources.vectors import edge

    monkeypatch.setattr(edge, "SEGMENT_POINTS", 50)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("small", 4, write_ahead_log=False)
    store.upsert("small", _code_points(0, 40))
    store.set_dense("small", {point.id: [1.0, 0.0, 0.0, float(n)] for n, point in enumerate(_code_points(0, 40))})
    assert _segments(store, "small") == 1
    assert store._appendable["small"].written == 40

    store.ensure_collection("large", 4, write_ahead_log=False)
    store.upsert("large", _code_points(0, 60))  # closed at 60: every point in a closed segment
    assert _segments(store, "large") == 2
    store.set_dense("large", {point.id: [0.0, 1.0, 0.0, float(n)] for n, point in enumerate(_code_points(0, 30))})
    assert store._appendable["large"].written == 30
    store.set_dense("large", {point.id: [0.0, 1.0, 0.0, float(n)] for n, point in enumerate(_code_points(30, 60))})
    assert _segments(store, "large") == 3 and store._appendable["large"].written == 0
    assert len(store.dense_vectors("large", [p.id for p in _code_points(0, 60)])) == 60
    store.close()


def test_a_close_that_fails_fails_its_write_once_not_every_write_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills while a segment closes fails that write (the indexer redoes its files);
    the next writes go on into the appendable segment and the close is tried a segment later."""
    from resources.vectors import edge

    monkeypatch.setattr(edge, "SEGMENT_POINTS", 50)
    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("code", 4, write_ahead_log=False)
    shard = store._shard("code")

    class FullDisk:
        def __getattr__(self, name):
            return getattr(shard, name)

        def optimize(self):
            raise OSError("No space left on device")

    store._shards["code"] = FullDisk()
    store.upsert("code", _code_points(0, 40))
    with pytest.raises(OSError, match="No space"):
        store.upsert("code", _code_points(40, 60))
    store.upsert("code", _code_points(60, 70))  # not a close again: 10 of the next 50
    store._shards["code"] = shard
    store.upsert("code", _code_points(70, 110))  # 50 since the failed close: closed now
    assert _segments(store, "code") == 2
    assert store.count("code") == 110
    store.close()


def test_a_collection_that_keeps_its_dense_vectors_apart_gives_points_without_one_no_room(tmp_path: Path) -> None:
    """Issue 21: qdrant-edge writes a placeholder dense vector for every point of a collection that
    declares one (778 MB at the Linux kernel, searched by words hours before its dense vectors
    come). The code collection keeps them in ``code+dense``, made at the first dense vector: only
    the points that have one are there, with the fields a filter reads; rewrites, deletes, filters,
    a clear and a reopen keep the two in step."""
    from resources.vectors import edge

    store = EdgeVectorStore(tmp_path / "q")
    store.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False, dense_apart=("file_path",))
    points = [  # as the indexer writes them: shown-only fields (code, signature) packed, no dense vector
        VectorPoint(point.id, {**point.payload, "file_path": f"src/f{n}.c", "code": f"int f{n}(void);", "signature": f"f{n}"},
                    sparse=point.sparse)
        for n, point in enumerate(_code_points(0, 30))
    ]
    store.upsert("code", points)
    apart = tmp_path / "q" / ("code" + edge.DENSE_APART)
    assert not apart.exists()  # nothing but words yet
    assert not list((tmp_path / "q" / "code").rglob("vector_storage-dense"))  # and no room for them in the collection
    store.set_dense("code", {point.id: [1.0, 0.0, 0.0, float(n)] for n, point in enumerate(points[:10])})
    assert store.count("code" + edge.DENSE_APART) == 10
    kept = store.retrieve("code" + edge.DENSE_APART, [points[0].id])[0].payload
    assert kept == {"file_path": points[0].payload["file_path"]}  # the fields a dense search filters on, only
    assert len(store.dense_vectors("code", [p.id for p in points])) == 10

    # the nearest by dense vector, filtered, with the collection's own payload
    near, _ = store.ranked_lists("code", dense=[1.0, 0.0, 0.0, 2.0], sparse=None, candidates=3,
                                 payload_filter=PayloadFilter({"file_path": [points[2].payload["file_path"]]}))
    assert [hit.id for hit in near] == [points[2].id] and near[0].payload["code"] == points[2].payload["code"]
    with pytest.raises(VectorStoreError, match="filters on kind"):  # not kept with them: said, never an empty answer
        store.ranked_lists("code", dense=[1.0, 0.0, 0.0, 2.0], sparse=None, candidates=3, payload_filter=PayloadFilter({"kind": ["function"]}))
    store.upsert("code", points[:2])  # rewritten without a dense vector: theirs is gone, as in one collection
    store.delete("code", [points[2].id])
    assert store.count("code" + edge.DENSE_APART) == 7
    assert set(store.dense_vectors("code", [p.id for p in points])) == {p.id for p in points[3:10]}
    store.upsert("code", [VectorPoint(points[11].id, points[11].payload, dense=[0.0, 1.0, 0.0, 0.0], sparse=points[11].sparse)])
    fused = store.hybrid_query("code", dense=[0.0, 1.0, 0.0, 0.0], sparse=None, limit=1)
    assert [hit.id for hit in fused] == [points[11].id] and fused[0].payload["code"] == points[11].payload["code"]
    store.close()

    reopened = EdgeVectorStore(tmp_path / "q")
    reopened.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False)  # as made: apart
    assert reopened.count("code" + edge.DENSE_APART) == 8
    assert len(reopened.dense_vectors("code", [p.id for p in points])) == 8
    reopened.clear_collection("code", 4)
    assert not apart.exists() and reopened.count("code") == 0
    reopened.upsert("code", [VectorPoint(points[0].id, points[0].payload, dense=[1.0, 0.0, 0.0, 0.0])])
    assert reopened.count("code" + edge.DENSE_APART) == 1  # made apart again
    reopened.drop_collection("code")
    assert not apart.exists()
    # a first full rebuild (`--reembed`, `codemem repair`) clears a collection that is not there yet: made apart
    reopened.clear_collection("code", 4, ("file_path",), write_ahead_log=False, dense_apart=("file_path",))
    reopened.upsert("code", [VectorPoint(points[0].id, points[0].payload, dense=[1.0, 0.0, 0.0, 0.0])])
    assert reopened.count("code" + edge.DENSE_APART) == 1
    reopened.close()


def test_dense_vectors_kept_apart_are_never_lost_unnoticed(tmp_path: Path) -> None:
    """A drop removes the collection's marker before anything else, so a crash inside it leaves a
    collection the next ensure makes anew (with no dense vectors' collection); and dense vectors
    once written and now missing (a crash in an older order, a hand) make every use say so and
    send to `codemem repair`, instead of searches that quietly find nothing by meaning."""
    from resources.vectors import edge

    def made() -> EdgeVectorStore:
        store = EdgeVectorStore(tmp_path / "q")
        store.ensure_collection("code", 4, ("file_path",), write_ahead_log=False, dense_apart=("file_path",))
        return store

    store = made()
    points = [VectorPoint(point.id, point.payload, dense=[1.0, 0.0, 0.0, float(n)], sparse=point.sparse)
              for n, point in enumerate(_code_points(0, 5))]
    store.upsert("code", points)
    store.close()
    shutil.rmtree(tmp_path / "q" / ("code" + edge.DENSE_APART))  # lost
    lost = EdgeVectorStore(tmp_path / "q")
    with pytest.raises(VectorStoreError, match="dense vectors of collection 'code' are missing.*codemem repair"):
        lost.count("code")
    lost.close()

    shutil.rmtree(tmp_path / "q")
    store = made()
    store.upsert("code", points)
    store.close()
    (tmp_path / "q" / "code" / edge.MARKER).unlink()  # a drop killed right after its first step
    again = made()
    assert again.count("code") == 0 and not (tmp_path / "q" / ("code" + edge.DENSE_APART)).exists()
    again.upsert("code", points)
    assert len(again.dense_vectors("code", [p.id for p in points])) == 5
    again.close()

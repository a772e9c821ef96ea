"""Normalized-score fusion of dense and sparse candidates."""

from __future__ import annotations

from resources.ranking import minmax_fuse
from resources.vectors.store import VectorHit


def hits(*pairs: tuple[str, float]) -> list[VectorHit]:
    return [VectorHit(id=i, score=s, payload={"id": i}) for i, s in pairs]


def test_a_confident_single_list_result_beats_mediocre_results_of_both() -> None:
    dense = hits(("a", 0.90), ("b", 0.50), ("c", 0.48))
    sparse = hits(("b", 3.0), ("c", 2.9), ("d", 1.0))
    fused = minmax_fuse(dense, sparse, 0.5)
    # RRF would rank c (mediocre in both lists) above a (best by far in one); scores keep a above c
    assert [h.id for h in fused] == ["b", "a", "c", "d"]
    scores = {h.id: h.score for h in fused}
    assert scores["a"] == 0.5 and scores["b"] > scores["c"] > scores["d"]
    assert {h.id for h in fused} == {"a", "b", "c", "d"} and fused[0].payload["id"] == fused[0].id


def test_one_empty_list_gives_the_other_list_order() -> None:
    sparse = hits(("x", 5.0), ("y", 1.0))
    assert [h.id for h in minmax_fuse([], sparse, 0.5)] == ["x", "y"]
    assert [h.id for h in minmax_fuse(sparse, [], 0.5)] == ["x", "y"]
    assert minmax_fuse([], [], 0.5) == []


def test_dense_weight_moves_the_balance() -> None:
    dense = hits(("a", 1.0), ("b", 0.0))
    sparse = hits(("b", 1.0), ("a", 0.0))
    assert minmax_fuse(dense, sparse, 0.8)[0].id == "a"
    assert minmax_fuse(dense, sparse, 0.2)[0].id == "b"

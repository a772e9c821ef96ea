"""find_duplicates through the real service: a copy survives every edit that keeps behaviour,
says what differs, and a same-signature function with other behaviour is not flagged
(issue 19, item 1; ``python -m bench.duplicates`` measures it on held-out packages)."""

from __future__ import annotations

from pathlib import Path

import pytest

from resources.schemas.tools import FindDuplicatesInput, IndexInput
from tests.conftest import write_files

PYTHON = '''from typing import Iterable


def weighted_mean(values: Iterable[float], weights: Iterable[float], default: float = 0.0) -> float:
    """The mean of values weighted by weights, or default when the weights sum to zero."""
    total: float = 0.0
    weight_sum = 0.0
    for value, weight in zip(values, weights):
        # skip weightless values
        if weight > 0:
            total = total + value * weight
            weight_sum += weight
    if weight_sum == 0:
        return default
    else:
        result = total / weight_sum
        return result


def positive_squares(numbers: list[int]) -> list[int]:
    """The squares of the positive numbers, in order."""
    squares = []
    for number in numbers:
        if number > 0:
            squares.append(number * number)
    return squares


def negative_squares(numbers: list[int]) -> list[int]:
    """The squares of the negative numbers, in order."""
    squares = []
    for number in numbers:
        if number < 0:
            squares.append(number * number)
    return squares
'''

TYPESCRIPT = '''export class Cart {
  private items: { price: number; quantity: number }[] = [];

  total(discount: number = 0): number {
    let sum: number = 0;
    for (const item of this.items) {
      if (item.quantity > 0) {
        sum = sum + item.price * item.quantity;
      }
    }
    if (discount > 0) {
      return sum * (1 - discount);
    } else {
      return sum;
    }
  }
}
'''

WEIGHTED_EDITS = {
    "renamed": PYTHON.split("\n\n\n")[1].replace("weighted_mean", "average_of").replace("values", "xs")
    .replace("weights", "ws").replace("value", "x").replace("weight_sum", "denominator").replace("weight", "w"),
    "annotations": '''def weighted_mean(values, weights, default=0.0):
    """The mean of values weighted by weights, or default when the weights sum to zero."""
    total = 0.0
    weight_sum = 0.0
    for value, weight in zip(values, weights):
        if weight > 0:
            total = total + value * weight
            weight_sum += weight
    if weight_sum == 0:
        return default
    else:
        result = total / weight_sum
        return result
''',
    "statements": '''def weighted_mean(values: Iterable[float], weights: Iterable[float], default: float = 0.) -> float:
    total = 0.0
    weight_sum = 0.0
    for value, weight in zip(values, weights):
        if 0 < weight:
            total += value * weight
            weight_sum = weight_sum + weight
    return default if weight_sum == 0 else total / weight_sum
''',
}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    from query_server.service import CodeMemService
    from resources.settings import Settings

    root = tmp_path_factory.mktemp("dups") / "project"
    write_files(root, {"stats.py": PYTHON, "cart.ts": TYPESCRIPT})
    svc = CodeMemService(Settings(project_root=root, state_dir=root.parent / "state", dense_embeddings=True))
    request.addfinalizer(svc.close)
    svc.index(IndexInput(embed=True))
    return svc


def found(service, code: str, language: str, name: str):
    result = service.find_duplicates(FindDuplicatesInput(code=code, language=language))
    return next((hit for hit in result.duplicates if hit.name == name), None)


@pytest.mark.parametrize("edit", sorted(WEIGHTED_EDITS))
def test_an_edited_copy_is_found_and_what_differs_is_said(service, edit: str) -> None:
    hit = found(service, WEIGHTED_EDITS[edit], "python", "weighted_mean")
    assert hit is not None and hit.similarity >= 0.95, edit
    said = " ".join(hit.differences)
    expected = {"renamed": "names: weighted_mean → average_of", "annotations": "type annotations left out",
                "statements": "conditional expression"}[edit]
    assert expected in said, hit.differences


def test_a_loop_rewritten_as_a_comprehension_is_found(service) -> None:
    code = "def pos_sq(nums):\n    return [n * n for n in nums if n > 0]\n"
    hit = found(service, code, "python", "positive_squares")
    assert hit is not None and hit.similarity >= 0.95
    assert "comprehension" in " ".join(hit.differences)


def test_the_same_shape_with_other_behaviour_is_not_flagged(service) -> None:
    code = "def pos_sq(nums):\n    return [n * n for n in nums if n < 0]\n"  # negatives: negative_squares
    result = service.find_duplicates(FindDuplicatesInput(code=code, language="python"))
    assert "positive_squares" not in [hit.name for hit in result.duplicates]
    assert "negative_squares" in [hit.name for hit in result.duplicates]


def test_a_typescript_method_on_its_own_is_compared_as_a_method(service) -> None:
    method = '''total(discount = 0) {
    let s = 0;
    for (const it of this.items) {
      if (0 < it.quantity) { s += it.price * it.quantity; }
    }
    return discount > 0 ? s * (1 - discount) : s;
}'''
    hit = found(service, method, "typescript", "total")
    assert hit is not None and hit.similarity >= 0.95, hit
    assert "type annotations left out" in hit.differences


def test_a_function_longer_than_the_payload_is_compared_whole(tmp_path: Path, service_factory) -> None:
    body = "".join(f"    acc = acc + values[{i}] * {i + 1}  # term {i} of the weighted sum\n" for i in range(90))
    code = f"def long_weighted(values):\n    acc = 0\n{body}    return acc\n"
    assert len(code) > 2_500  # more than the payload keeps
    write_files(tmp_path / "p", {"long.py": code})
    service = service_factory(tmp_path / "p", state_dir=tmp_path / "state", dense_embeddings=True)
    service.index(IndexInput(embed=True))
    clone = code.replace("long_weighted", "weighted_terms").replace("acc", "sum_").replace("values", "xs")
    hit = found(service, clone, "python", "long_weighted")
    assert hit is not None and hit.similarity >= 0.95


def test_a_method_with_a_nested_function_is_read_as_the_method(service) -> None:
    # tree-sitter reads the bare method with errors and finds the nested arrow function first
    method = '''total(discount = 0) {
    const priced = (it) => it.price * it.quantity;
    let s = 0;
    for (const it of this.items) {
      if (it.quantity > 0) { s += priced(it); }
    }
    return discount > 0 ? s * (1 - discount) : s;
}'''
    from query_server.code.duplicates import read_snippet

    assert read_snippet(method, "typescript").name == "total"


def test_the_snippet_is_embedded_once_and_candidates_also_come_by_words(service, monkeypatch) -> None:
    import numpy as np

    from pipelines.indexer import CODE_COLLECTION
    from query_server.code import duplicates
    from resources.schemas.code import CALLABLE_KINDS
    from resources.vectors import sparse
    from resources.vectors.store import PayloadFilter

    texts: list[str] = []
    embed = service.embedder.embed_documents

    def counted(batch):
        texts.extend(batch)
        return embed(batch)

    monkeypatch.setattr(service.embedder, "embed_documents", counted)
    hit = found(service, WEIGHTED_EDITS["renamed"], "python", "weighted_mean")
    assert hit is not None
    snippet = duplicates.read_snippet(WEIGHTED_EDITS["renamed"], "python")
    assert texts.count(snippet.embed_text) == 1  # searched with, and compared with, the same vector
    # the nearest by the vector and the nearest by words, each scored by its cosine
    monkeypatch.setattr(duplicates, "DENSE_CANDIDATES", 1)
    vector = embed([snippet.embed_text])[0]
    by_words = service.duplicates._word_hits(snippet, "python", 0)
    candidates = service.duplicates._candidates(vector, by_words, "python", 0, 0.85)
    by_vector, by_words = service.vectors.ranked_lists(
        CODE_COLLECTION, dense=vector, sparse=sparse.query_vector(snippet.code), candidates=1, with_payload=False,
        payload_filter=PayloadFilter({"kind": sorted(CALLABLE_KINDS), "language": ["python"]}),
    )
    assert {c.id for c in candidates} == {by_vector[0].id, by_words[0].id}
    stored = service.vectors.dense_vectors(CODE_COLLECTION, [c.id for c in candidates])
    assert all(abs(c.score - float(np.dot(stored[c.id], vector))) < 1e-3 for c in candidates)


def test_an_index_written_before_callable_language_is_searched_and_then_filled_in(tmp_path: Path, service_factory) -> None:
    """find_duplicates filters on one field, ``callable_language`` (the language of a function,
    method or constructor): at 100,000 symbols two conditions (``kind``, ``language``) cost more than
    the search. An index written before the field is searched with the two until the next index run
    fills the field in (no file changed) and indexes it; the answers stay the same throughout."""
    import qdrant_edge as qe

    from pipelines.index_context import CALLABLE_LANGUAGE, CODE_COLLECTION, CODE_INDEXES
    from resources.schemas.code import CALLABLE_KINDS
    from resources.vectors.store import PayloadFilter

    root = tmp_path / "project"
    write_files(root, {"stats.py": PYTHON, "cart.ts": TYPESCRIPT})
    service = service_factory(root, state_dir=tmp_path / "state", dense_embeddings=True)
    service.index(IndexInput(embed=True))
    vectors = service.vectors

    def callables(language: str) -> tuple[int, int]:
        """(points with the field, functions/methods/constructors) of a language."""
        return (vectors.count(CODE_COLLECTION, PayloadFilter({CALLABLE_LANGUAGE: [language]})),
                vectors.count(CODE_COLLECTION, PayloadFilter({"kind": sorted(CALLABLE_KINDS), "language": [language]})))

    def answers() -> list[dict]:
        return [service.find_duplicates(FindDuplicatesInput(code=code, language=language)).model_dump()
                for code, language in ((WEIGHTED_EDITS["renamed"], "python"),
                                       ("def pos_sq(nums):\n    return [n * n for n in nums if n < 0]\n", "python"),
                                       (TYPESCRIPT.replace("Cart", "Basket"), "typescript"))]

    assert callables("python") == (3, 3) and callables("typescript") == (1, 1)  # written by the index run
    assert service.duplicates._callables_filter("python") == PayloadFilter({CALLABLE_LANGUAGE: ["python"]})
    expected = answers()
    assert expected[0]["duplicates"][0]["name"] == "weighted_mean"

    # as an older codemem left the collection: the field on no point, no index for it
    with vectors._locked(CODE_COLLECTION) as shard:
        shard.update(qe.UpdateOperation.delete_payload_by_filter(
            vectors._filter(PayloadFilter({"kind": sorted(CALLABLE_KINDS)})), [CALLABLE_LANGUAGE]))
    vectors.ensure_collection(CODE_COLLECTION, service.embedder.dimension, [k for k in CODE_INDEXES if k != CALLABLE_LANGUAGE])
    assert callables("python") == (0, 3) and CALLABLE_LANGUAGE not in vectors.payload_indexes(CODE_COLLECTION)
    assert service.duplicates._callables_filter("python") == PayloadFilter({"kind": sorted(CALLABLE_KINDS), "language": ["python"]})
    assert answers() == expected

    report = service.index(IndexInput(embed=True))  # nothing changed on disk: the run fills the field in, and says so
    assert any("code collection was upgraded" in note for note in report["notes"]), report["notes"]
    assert CALLABLE_LANGUAGE in vectors.payload_indexes(CODE_COLLECTION)
    assert callables("python") == (3, 3) and callables("typescript") == (1, 1)
    assert answers() == expected

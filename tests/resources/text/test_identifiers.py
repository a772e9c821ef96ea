"""The one identifier tokenizer, pinned at every former call site.

``pinned_tokens.json`` holds the outputs of the five tokenizers (and the two identifier splitters)
as they were before they became :mod:`resources.text.identifiers`, computed with that old code on
a varied sample: camelCase, snake_case, acronyms, digits, Unicode, stop words, prose and code of
several languages. The search tokens and sparse vectors are stored in users' indexes: if any of
these changes, existing indexes silently degrade. Never regenerate the file to make a test pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.experiments import _ident_words
from pipelines.eval_corpus import code_tokenize
from pipelines.records import split_identifier
from query_server.design.alignment import concepts
from resources.code_similarity import opposite_names
from resources.graph.read_only import _is_write_procedure
from resources.text.identifiers import identifier_words, search_tokens, suffix_stem
from resources.vectors.sparse import document_vector, query_vector, tokenize

PINS = json.loads((Path(__file__).parent / "pinned_tokens.json").read_text(encoding="utf-8"))
EXPECTED = PINS["expected"]


def _cases(site: str) -> list[tuple[str, object]]:
    return list(EXPECTED[site].items())


@pytest.mark.parametrize(("text", "expected"), _cases("sparse.tokenize"))
def test_index_tokens_are_unchanged(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected
    assert search_tokens(text) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("sparse.document_vector"))
def test_document_vectors_are_unchanged(text: str, expected: list[list[float]]) -> None:
    vector = document_vector(text)
    assert [vector.indices, vector.values] == expected


@pytest.mark.parametrize(("text", "expected"), _cases("sparse.query_vector"))
def test_query_vectors_are_unchanged(text: str, expected: list[list[float]]) -> None:
    vector = query_vector(text)
    assert [vector.indices, vector.values] == expected


@pytest.mark.parametrize(("text", "expected"), _cases("eval_corpus.code_tokenize"))
def test_baseline_tokens_are_unchanged(text: str, expected: list[str]) -> None:
    assert code_tokenize(text) == expected
    assert search_tokens(text, keep_compound=False) == expected


@pytest.mark.parametrize(("name", "expected"), _cases("records.split_identifier"))
def test_embedding_words_are_unchanged(name: str, expected: str) -> None:
    assert split_identifier(name) == expected


@pytest.mark.parametrize(("name", "expected"), _cases("code_similarity.name_words"))
def test_duplicate_name_words_are_unchanged(name: str, expected: list[str]) -> None:
    assert identifier_words(name, unicode_digits=True) == expected


@pytest.mark.parametrize(("pair", "expected"), _cases("code_similarity.opposite_names"))
def test_opposite_names_are_unchanged(pair: str, expected: str | None) -> None:
    name_a, name_b = pair.split("|")
    assert opposite_names(name_a, name_b) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("alignment.concepts"))
def test_rule_concepts_are_unchanged(text: str, expected: list[str]) -> None:
    assert sorted(concepts(text)) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("alignment.concepts.plain_words"))
def test_rule_words_are_unchanged(text: str, expected: list[str]) -> None:
    assert sorted(concepts(text, plain_words=True)) == expected


@pytest.mark.parametrize(("text", "expected"), _cases("experiments.ident_words"))
def test_experiment_words_are_unchanged(text: str, expected: str) -> None:
    assert _ident_words(text) == expected


@pytest.mark.parametrize(("name", "expected"), _cases("graph.is_write_procedure"))
def test_procedure_verbs_are_unchanged(name: str, expected: bool) -> None:
    assert _is_write_procedure(name) is expected


def test_the_flags_say_where_the_splits_differ() -> None:
    assert identifier_words("getHTTPResponse2") == ["get", "http", "response", "2"]
    assert identifier_words("getHTTPResponse2", humps_only=True) == ["get", "httpresponse2"]
    assert identifier_words("x\u0663") == ["x"]
    assert identifier_words("x\u0663", unicode_digits=True) == ["x", "\u0663"]
    assert search_tokens("parse_url") == ["pars", "url", "parse_url"]
    assert search_tokens("parse_url", keep_compound=False) == ["pars", "url"]
    assert suffix_stem("validations") == "valid" and suffix_stem("runs") == "runs"

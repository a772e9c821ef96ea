"""The code-aware BM25 tokenizer and vectors."""

from __future__ import annotations

from resources.vectors.sparse import K1, document_vector, query_vector, tokenize


def test_identifiers_split_into_searchable_words() -> None:
    assert tokenize("getHTTPResponse") == ["get", "http", "respons", "gethttpresponse"]
    tokens = tokenize("parse_url_v2")
    assert tokens[:2] == ["pars", "url"] and tokens[-1] == "parse_url_v2"
    assert "cooki" in tokenize("The session's cookies") and "the" not in tokenize("The session's cookies")


def test_query_and_document_vectors_share_dimensions() -> None:
    doc = document_vector("def send_request(url):\n    return http_send(url)")
    query = query_vector("send a request")
    assert set(query.indices) <= set(doc.indices)
    assert all(v == 1.0 for v in query.values)
    assert doc.indices == sorted(doc.indices)
    # repeated terms weigh more but saturate (BM25 tf)
    once = document_vector("cookie jar")
    many = document_vector("cookie cookie cookie cookie jar")
    idx = once.indices.index(query_vector("cookie").indices[0])
    idx_many = many.indices.index(query_vector("cookie").indices[0])
    assert once.values[idx] < many.values[idx_many] < K1 + 1
    # a repeated query word counts twice, as in classic BM25
    assert sorted(query_vector("cookie jar cookie").values) == [1.0, 2.0]


def test_empty_text() -> None:
    assert document_vector("").indices == []
    assert query_vector("!!!").indices == []

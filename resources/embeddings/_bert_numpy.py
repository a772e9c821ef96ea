"""A BERT encoder forward pass in plain numpy (float32), for sentence-transformers models.

Sequences are *packed*: the tokens of all sequences in a batch are stacked into one ``(T, H)``
matrix, so the dense layers (about 90 % of the work) run as single large GEMMs with no padding,
and attention runs per group of equal-length sequences, so no attention mask is needed.
Mean pooling over each sequence's tokens then equals sentence-transformers' masked mean pooling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - poly(t) * exp(-z^2), t = 1 / (1 + p z), |error| <= 1.5e-7.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_INV_SQRT2 = np.float32(1.0 / math.sqrt(2.0))
_FFN_ROWS = 256  # measured best on a 2 MiB L2 cache: 15 % faster than one full-size GEMM


def gelu_inplace(x: np.ndarray) -> np.ndarray:
    """Exact (erf-based) GELU, computed in place on a float32 array.

    Uses ``gelu(x) = max(x, 0) - 0.5 * |x| * erfc(|x| / sqrt 2)`` with the A&S erfc
    approximation, which needs no scipy.
    """
    ax = np.abs(x)
    z = ax * _INV_SQRT2
    t = _AS_P * z
    t += 1.0
    np.reciprocal(t, out=t)
    poly = _AS_A[4] * t
    for a in (_AS_A[3], _AS_A[2], _AS_A[1], _AS_A[0]):
        poly += a
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # erfc(|x| / sqrt 2)
    poly *= ax
    poly *= 0.5
    np.maximum(x, 0.0, out=x)
    x -= poly
    return x


def layer_norm_inplace(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis, in place."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var *= 1.0 / x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    x *= var
    x *= gamma
    x += beta
    return x


@dataclass
class _Layer:
    w_qkv: np.ndarray  # (H, 3H), query part pre-scaled by 1/sqrt(head_dim)
    b_qkv: np.ndarray
    w_out: np.ndarray  # (H, H)
    b_out: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    w_in: np.ndarray  # (H, I)
    b_in: np.ndarray
    w_down: np.ndarray  # (I, H)
    b_down: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


class NumpyBert:
    """BERT encoder with mean pooling over each sequence.

    Args:
        weights: Tensors of a Hugging Face ``BertModel`` (keys like ``encoder.layer.0...``;
            a ``bert.`` prefix is tolerated).
        config: The model's ``config.json`` as a dict.
    """

    def __init__(self, weights: dict[str, np.ndarray], config: dict[str, Any]) -> None:
        w = {k.removeprefix("bert."): v for k, v in weights.items()}
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_positions = int(config.get("max_position_embeddings", 512))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")
        self.word = _f32(w["embeddings.word_embeddings.weight"])
        self.pos = _f32(w["embeddings.position_embeddings.weight"])
        self.type0 = _f32(w["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln = (_f32(w["embeddings.LayerNorm.weight"]), _f32(w["embeddings.LayerNorm.bias"]))
        scale = np.float32(1.0 / math.sqrt(self.head_dim))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            w_qkv = np.concatenate(
                [w[att + "query.weight"] * scale, w[att + "key.weight"], w[att + "value.weight"]], axis=0
            )
            b_qkv = np.concatenate([w[att + "query.bias"] * scale, w[att + "key.bias"], w[att + "value.bias"]])
            self.layers.append(
                _Layer(
                    w_qkv=_f32(w_qkv.T),
                    b_qkv=_f32(b_qkv),
                    w_out=_f32(w[p + "attention.output.dense.weight"].T),
                    b_out=_f32(w[p + "attention.output.dense.bias"]),
                    ln1=(
                        _f32(w[p + "attention.output.LayerNorm.weight"]),
                        _f32(w[p + "attention.output.LayerNorm.bias"]),
                    ),
                    w_in=_f32(w[p + "intermediate.dense.weight"].T),
                    b_in=_f32(w[p + "intermediate.dense.bias"]),
                    w_down=_f32(w[p + "output.dense.weight"].T),
                    b_down=_f32(w[p + "output.dense.bias"]),
                    ln2=(_f32(w[p + "output.LayerNorm.weight"]), _f32(w[p + "output.LayerNorm.bias"])),
                )
            )

    def _attention(self, qkv: np.ndarray, groups: list[tuple[int, int, int]]) -> np.ndarray:
        """Self-attention for packed sequences; ``groups`` are (start, count, length) runs."""
        total = qkv.shape[0]
        ctx = np.empty((total, self.hidden), dtype=np.float32)
        nh, hd = self.heads, self.head_dim
        for start, count, length in groups:
            end = start + count * length
            blk = qkv[start:end].reshape(count, length, 3, nh, hd)
            q = np.ascontiguousarray(blk[:, :, 0].transpose(0, 2, 1, 3))  # (n, nh, L, hd)
            k = np.ascontiguousarray(blk[:, :, 1].transpose(0, 2, 3, 1))  # (n, nh, hd, L)
            v = np.ascontiguousarray(blk[:, :, 2].transpose(0, 2, 1, 3))  # (n, nh, L, hd)
            scores = np.matmul(q, k)  # (n, nh, L, L)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            out = np.matmul(scores, v)  # (n, nh, L, hd)
            ctx[start:end] = out.transpose(0, 2, 1, 3).reshape(count * length, self.hidden)
        return ctx

    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray:
        """Run the encoder and mean-pool each sequence.

        Args:
            sequences: Token-id arrays (each including [CLS]/[SEP], at most
                ``max_position_embeddings`` long). Runs of equal length share one batched
                attention call, so sort by length for speed.

        Returns:
            float32 array ``(len(sequences), hidden)``; not normalized.
        """
        lengths = [len(s) for s in sequences]
        if not lengths:
            return np.zeros((0, self.hidden), dtype=np.float32)
        if min(lengths) < 1 or max(lengths) > self.max_positions:
            raise ValueError("sequence lengths must be in [1, max_position_embeddings]")
        ids = np.concatenate(sequences)
        positions = np.concatenate([np.arange(n) for n in lengths])
        x = self.word[ids]
        x += self.pos[positions]
        x += self.type0
        layer_norm_inplace(x, *self.emb_ln, self.eps)

        groups: list[tuple[int, int, int]] = []
        start = 0
        for n in lengths:
            if groups and groups[-1][2] == n:
                s, c, _ = groups[-1]
                groups[-1] = (s, c + 1, n)
            else:
                groups.append((start, 1, n))
            start += n

        for layer in self.layers:
            qkv = x @ layer.w_qkv
            qkv += layer.b_qkv
            h = self._attention(qkv, groups) @ layer.w_out
            h += layer.b_out
            h += x
            x = layer_norm_inplace(h, *layer.ln1, self.eps)
            h = np.empty_like(x)
            for s in range(0, x.shape[0], _FFN_ROWS):  # row blocks keep the (rows, I) activations in cache
                f = x[s : s + _FFN_ROWS] @ layer.w_in
                f += layer.b_in
                gelu_inplace(f)
                np.matmul(f, layer.w_down, out=h[s : s + _FFN_ROWS])
            h += layer.b_down
            h += x
            x = layer_norm_inplace(h, *layer.ln2, self.eps)

        offsets = np.cumsum([0, *lengths[:-1]])
        pooled = np.add.reduceat(x, offsets, axis=0)
        pooled /= np.asarray(lengths, dtype=np.float32)[:, None]
        return pooled

"""Baselines every codemem number is compared with, computed in the same run.

* BM25 — Lucene BM25 (k1=1.5, b=0.75) over the stripped function texts, with a code tokenizer:
  words and identifiers, camelCase / snake_case split into parts, lower-cased, English stop
  words dropped, Snowball-stemmed (PyStemmer). It is ``pipelines.eval_corpus.BM25`` (numpy, the
  same rankings as ``bm25s``, which the tests check), the baseline ``codemem eval`` reports too.
* MiniLM — the raw local model all-MiniLM-L6-v2 (the packaged weights, the same numpy forward
  pass codemem uses, truncated at 256 word pieces as sentence-transformers does, mean pooled,
  L2-normalized); cosine between the query and each function text.
* RRF — plain reciprocal-rank fusion (k=60, equal weights) of the two rankings above.

Baseline MiniLM vectors are cached in ``bench/.cache/minilm/`` keyed by text hash so reruns are
fast; codemem's own runs never see this cache (they get a fresh state dir).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.corpora import CACHE_DIR
from pipelines.eval_corpus import BM25, code_tokenize

__all__ = ["BM25", "RawMiniLM", "VectorCache", "code_tokenize", "dense_rank", "rrf"]

MAX_SEQ = 256


# BM25 and its tokenizer: pipelines.eval_corpus (shared with `codemem eval`), re-exported here.


# -- raw MiniLM ------------------------------------------------------------------------------

class RawMiniLM:
    """all-MiniLM-L6-v2 with no cache and no extras.

    codemem's own ``LocalMiniLMEmbedder`` used bare (no cache, all cores, its faster runtime)
    when it imports; otherwise the same numpy forward pass driven here. Both agree with
    sentence-transformers to a cosine of 0.99999, so cached vectors are shared between them.
    """

    model_id = "all-MiniLM-L6-v2"

    def __init__(self, threads: int | None = None) -> None:
        import os

        self.local = None
        try:
            from resources.embeddings.local import LocalMiniLMEmbedder

            self.local = LocalMiniLMEmbedder(threads=threads or os.cpu_count() or 1, runtime="auto")
            self.local.load()
            self.dimension = self.local.dimension
            self.runtime = self.local.runtime
            return
        except Exception:  # noqa: BLE001 - fall back to the bench's own driver
            self.local = None
        from tokenizers import Tokenizer

        from resources.embeddings._bert_numpy import NumpyBert
        from resources.embeddings._model_files import load_model_files

        files = load_model_files()
        self.tokenizer = Tokenizer.from_str(files.tokenizer_json)
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_SEQ)
        self.bert = NumpyBert(files.weights, files.config)
        self.threads = threads
        self.dimension = self.bert.hidden
        self.runtime = "numpy (bench driver)"

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors for ``texts`` (sorted by length internally for speed)."""
        if self.local is not None:
            return self.local.embed_documents(list(texts))
        from threadpoolctl import threadpool_limits

        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), self.dimension), dtype=np.float32)
        limits = threadpool_limits(self.threads) if self.threads else None
        try:
            for s in range(0, len(order), batch_size):
                chunk = order[s : s + batch_size]
                vecs = self.bert.encode([ids[i] for i in chunk])
                out[chunk] = vecs
        finally:
            if limits is not None:
                limits.unregister()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class VectorCache:
    """SQLite cache of baseline vectors keyed by sha256(model, text) — bench-only."""

    def __init__(self, path: Path | None = None) -> None:
        path = path or CACHE_DIR / "minilm" / "vectors.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB)")

    @staticmethod
    def key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\0{MAX_SEQ}\0{text}".encode()).hexdigest()

    def embed(self, model: RawMiniLM, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Vectors for ``texts``; returns (matrix, how many had to be computed)."""
        keys = [self.key(model.model_id, t) for t in texts]
        found: dict[str, np.ndarray] = {}
        for s in range(0, len(keys), 500):
            part = keys[s : s + 500]
            rows = self.db.execute(f"SELECT k, vec FROM v WHERE k IN ({','.join('?' * len(part))})", part).fetchall()
            found.update({k: np.frombuffer(b, dtype=np.float32) for k, b in rows})
        missing = sorted({i for i, k in enumerate(keys) if k not in found}, key=lambda i: keys[i])
        unique_missing = list({keys[i]: i for i in missing}.values())
        if unique_missing:
            vecs = model.embed([texts[i] for i in unique_missing])
            with self.db:
                self.db.executemany(
                    "INSERT OR REPLACE INTO v VALUES (?, ?)",
                    [(keys[i], vecs[j].astype(np.float32).tobytes()) for j, i in enumerate(unique_missing)],
                )
            for j, i in enumerate(unique_missing):
                found[keys[i]] = vecs[j]
        return np.stack([found[k] for k in keys]).astype(np.float32), len(unique_missing)


def dense_rank(doc_vecs: np.ndarray, query_vec: np.ndarray, k: int = 100) -> list[int]:
    """Indices of the k nearest documents by cosine (unit vectors), best first."""
    scores = doc_vecs @ query_vec
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


def rrf(rankings: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None) -> list[int]:
    """Reciprocal-rank fusion of ranked lists of ids (weights default to 1 each)."""
    weights = weights or [1.0] * len(rankings)
    scores: dict[int, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for r, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + w / (k + r + 1)
    return [d for d, _ in sorted(scores.items(), key=lambda kv: -kv[1])]

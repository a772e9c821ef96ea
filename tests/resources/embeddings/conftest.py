"""Fixtures for the embeddings tests: the real local model (loaded once) and reference vectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from resources.embeddings.local import LocalMiniLMEmbedder

REFERENCE = Path(__file__).parents[2] / "fixtures" / "embeddings" / "minilm_reference.json"


@pytest.fixture(scope="session")
def reference() -> dict:
    """sentence-transformers' vectors for a few texts (see the fixture's ``note``)."""
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    data["vectors"] = {k: np.asarray(v, dtype=np.float32) for k, v in data["vectors"].items()}
    return data


@pytest.fixture(scope="session")
def local_embedder() -> LocalMiniLMEmbedder:
    """The default local embedder (runtime ``auto``), shared by the whole session."""
    embedder = LocalMiniLMEmbedder()
    embedder.load()
    return embedder

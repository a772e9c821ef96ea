"""Embeddings for codemem: one :class:`Embedder` protocol, a local and a Voyage backend, a cache.

Typical use::

    embedder, status = create_embedder(settings)
    log.info(status.message)
    vectors = embedder.embed_documents(texts)
"""

from resources.embeddings.base import Embedder, EmbeddingError, l2_normalize
from resources.embeddings.cache import CachedEmbedder, EmbeddingCache
from resources.embeddings.factory import EmbedderStatus, create_embedder
from resources.embeddings.local import LocalMiniLMEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbedderStatus",
    "EmbeddingCache",
    "EmbeddingError",
    "LocalMiniLMEmbedder",
    "VoyageEmbedder",
    "create_embedder",
    "l2_normalize",
]


def __getattr__(name: str) -> object:
    """``VoyageEmbedder`` is imported when first named (its HTTP retry stack costs ~40 ms to import)."""
    if name == "VoyageEmbedder":
        from resources.embeddings.voyage import VoyageEmbedder

        return VoyageEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Embeddings for codemem: one :class:`Embedder` protocol, a local and a Voyage backend, a cache.

Typical use::

    embedder, status = create_embedder(settings)
    log.info(status.message)
    vectors = embedder.embed_documents(texts)
"""

from resources.embeddings.base import Embedder, EmbeddingError, l2_normalize

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

_LAZY = {
    "CachedEmbedder": "resources.embeddings.cache", "EmbeddingCache": "resources.embeddings.cache",
    "EmbedderStatus": "resources.embeddings.factory", "create_embedder": "resources.embeddings.factory",
    "LocalMiniLMEmbedder": "resources.embeddings.local", "VoyageEmbedder": "resources.embeddings.voyage",
}
"""Names imported when first used: the backends and the cache load numpy (~90 ms), the Voyage
backend its HTTP retry stack (~40 ms); a command that embeds nothing loads neither."""


def __getattr__(name: str) -> object:
    """The backends, the cache and the factory, imported when first named (``_LAZY``)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)

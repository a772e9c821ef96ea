"""The vector store a configuration asks for."""

from __future__ import annotations

from typing import Any

from resources.vectors.edge import EdgeVectorStore
from resources.vectors.server import ServerVectorStore


def create_vector_store(settings: Any) -> EdgeVectorStore | ServerVectorStore:
    """The server store when a Qdrant server is configured, else embedded qdrant-edge."""
    if settings.server_mode_vectors:
        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        return ServerVectorStore(
            settings.qdrant_url, settings.qdrant_host, settings.qdrant_port, key,
            shard_number=settings.qdrant_shard_number,
            replication_factor=settings.qdrant_replication_factor,
        )
    return EdgeVectorStore(settings.resolved_state_dir() / "qdrant")

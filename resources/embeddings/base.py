"""The embedder interface shared by every backend, and its error type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the interface itself needs no numpy (a command that embeds nothing never loads it)
    import numpy as np


class EmbeddingError(RuntimeError):
    """An embedding backend could not produce vectors.

    The message always says what failed and what the user can do about it (install a package,
    check an API key, unset a variable, ...).
    """


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors.

    Attributes:
        model_id: Stable identifier of the model *and* its dimension (for example
            ``"local/all-MiniLM-L6-v2@384"``). Used as part of cache keys and to tag vector
            collections, so vectors from different models are never mixed.
        dimension: Length of every vector this embedder returns.
    """

    model_id: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts that will be stored and searched.

        Args:
            texts: The texts; empty strings are allowed.

        Returns:
            A float32 array of shape ``(len(texts), dimension)`` whose rows have unit L2 norm,
            in the order of ``texts``.

        Raises:
            EmbeddingError: The backend failed; the message says how to fix it.
        """
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query.

        Args:
            text: The query text.

        Returns:
            A float32 array of shape ``(dimension,)`` with unit L2 norm.

        Raises:
            EmbeddingError: The backend failed; the message says how to fix it.
        """
        ...


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Scale each row of a 2-D array to unit L2 norm (zero rows stay zero).

    Args:
        vectors: Array of shape ``(n, dim)``.

    Returns:
        A float32 array of the same shape.
    """
    import numpy as np

    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return (out / norms).astype(np.float32, copy=False)

"""Choose the embedding backend once, at start-up, and say which one is active.

Voyage is used when an API key is set and a probe request succeeds; otherwise the local
all-MiniLM-L6-v2. The choice is never revisited per call: vectors of different models must
not be mixed in one collection, so a Voyage outage later surfaces as an ``EmbeddingError``
instead of silently switching models.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from resources.embeddings._model_files import INSTALL_HINT, candidate_sources
from resources.embeddings.base import Embedder, EmbeddingError
from resources.embeddings.cache import DAY, CachedEmbedder, EmbeddingCache
from resources.embeddings.local import MODEL_NAME, LocalMiniLMEmbedder, onnx_available, resolved_runtime

log = logging.getLogger(__name__)
CACHE_FILE = "embedding_cache.sqlite3"


@dataclass(frozen=True)
class EmbedderStatus:
    """Which embedding backend is active, and why.

    Attributes:
        backend: ``"voyage"`` or ``"local"``.
        model_id: The active embedder's ``model_id``.
        dimension: Vector length.
        degraded: True when Voyage was configured but could not be used.
        reason: Why Voyage is not used (``None`` when it is, or was never configured).
        runtime: For the local model: ``"onnx"`` or ``"numpy"``.
        cache_path: The embedding cache file, or ``None`` when caching is off.
        notes: Further non-fatal problems (for example an unusable cache).
    """

    backend: Literal["voyage", "local"]
    model_id: str
    dimension: int
    degraded: bool = False
    reason: str | None = None
    runtime: str | None = None
    cache_path: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def message(self) -> str:
        """One human-readable line, e.g. for the server's status tool and start-up log."""
        if self.backend == "voyage":
            model = self.model_id.removeprefix("voyage/").rsplit("@", 1)[0]
            text = f"using Voyage {model} ({self.dimension} dims)"
        else:
            precision = ", int8" if "-int8@" in self.model_id else ""
            text = f"using local {MODEL_NAME} ({self.dimension} dims, {self.runtime} runtime{precision})"
        if self.degraded:
            text = f"voyage unavailable: {self.reason}; {text}"
        return "; ".join((text, *self.notes))


def _voyage_key(settings: object) -> str | None:
    key = getattr(settings, "voyage_api_key", None)
    return key.get_secret_value() if hasattr(key, "get_secret_value") else key


def _local_embedder(settings: object) -> LocalMiniLMEmbedder:
    """The local model as these settings configure it (not loaded yet)."""
    return LocalMiniLMEmbedder(
        threads=getattr(settings, "embed_threads", 1),
        runtime=getattr(settings, "embed_runtime", "auto") or "auto",  # type: ignore[arg-type]  # validated by the constructor
        model_path=getattr(settings, "embedding_model_path", None),
        batch_size=getattr(settings, "embed_batch_size", 32),
        precision=getattr(settings, "embed_precision", "fp32") or "fp32",  # type: ignore[arg-type]  # validated by the constructor
    )


def configured_model_id(settings: object) -> str | None:
    """The ``model_id`` the embedder these settings configure would have, without building it (no
    model load, no Voyage probe): what an index made under these settings records. A Voyage key
    means Voyage (its fallback to the local model is decided only by a probe); None when the
    settings name no model this can tell (an unknown Voyage model, a bad local setting)."""
    if _voyage_key(settings):
        from resources.embeddings.voyage import KNOWN_DIMENSIONS

        model = getattr(settings, "voyage_model", "voyage-code-3")
        return f"voyage/{model}@{KNOWN_DIMENSIONS[model]}" if model in KNOWN_DIMENSIONS else None
    try:
        return _local_embedder(settings).model_id
    except EmbeddingError:
        return None


def preload_local_model(settings: object) -> None:
    """Start loading the local model in the background when these settings will use it (no Voyage
    key): the embedder ``create_embedder`` builds later takes it over. Problems are left to that
    embedder to report."""
    if _voyage_key(settings):
        return
    try:
        _local_embedder(settings).preload()
    except EmbeddingError:  # an unknown runtime: create_embedder says so
        return


def _local(settings: object) -> tuple[LocalMiniLMEmbedder, str]:
    path = getattr(settings, "embedding_model_path", None)
    if path is None and not candidate_sources():
        raise EmbeddingError(
            f"No embedding backend: VOYAGE_API_KEY is unset and {MODEL_NAME} is missing; {INSTALL_HINT}."
        )
    if path is not None and not Path(path).expanduser().exists():
        raise EmbeddingError(f"CODEMEM_EMBEDDING_MODEL_PATH={path} does not exist; {INSTALL_HINT}.")
    embedder = _local_embedder(settings)
    runtime = resolved_runtime(embedder.requested_runtime)
    if runtime == "onnx" and not onnx_available():
        raise EmbeddingError(
            "CODEMEM_EMBED_RUNTIME=onnx needs the packages onnx and onnxruntime: `pip install onnx onnxruntime`."
        )
    return embedder, runtime


def create_embedder(settings: object, *, probe: bool = True, use_cache: bool = True) -> tuple[Embedder, EmbedderStatus]:
    """Build the embedder for these settings and report which backend is active.

    Args:
        settings: A :class:`resources.settings.Settings` (read: ``voyage_api_key``,
            ``voyage_model``, ``voyage_base_url``, ``embedding_model_path``, ``embed_runtime``,
            ``embed_threads``, ``embed_batch_size``, ``embedding_cache_max_entries``,
            ``embedding_cache_ttl_days``, ``resolved_state_dir()``).
        probe: Send one small request to Voyage before choosing it (recommended; without it a
            bad key shows up only at the first embedding call).
        use_cache: Wrap the embedder in a :class:`CachedEmbedder` backed by
            ``<state_dir>/embedding_cache.sqlite3``.

    Returns:
        The embedder (the local model loads lazily on first use) and its status.

    Raises:
        EmbeddingError: Neither Voyage nor the local model can be used.
    """
    key_value = _voyage_key(settings)
    embedder: Embedder
    status: EmbedderStatus
    reason: str | None = None
    if key_value:
        from resources.embeddings.voyage import VoyageEmbedder  # its HTTP retry stack only where used (~40 ms)

        try:
            voyage = VoyageEmbedder(
                key_value,
                model=getattr(settings, "voyage_model", "voyage-code-3"),
                base_url=getattr(settings, "voyage_base_url", None),
            )
            if probe:
                voyage.probe()
            embedder = voyage
            status = EmbedderStatus("voyage", voyage.model_id, voyage.dimension)
        except EmbeddingError as exc:
            reason = str(exc)
            log.warning("voyage unavailable, falling back to the local model: %s", reason)
    if not key_value or reason is not None:
        local, runtime = _local(settings)
        embedder = local
        status = EmbedderStatus(
            "local", local.model_id, local.dimension, degraded=reason is not None, reason=reason, runtime=runtime
        )

    if use_cache:
        limits = {"max_entries": getattr(settings, "embedding_cache_max_entries", 500_000),
                  "ttl_seconds": getattr(settings, "embedding_cache_ttl_days", 30) * DAY}
        database = getattr(settings, "database_url", None)
        database = database.get_secret_value().strip() if database is not None else ""
        try:
            if database:  # server mode: one cache for every replica and worker (an empty value is unset)
                from resources.embeddings.cache_postgres import PostgresEmbeddingCache

                cache = PostgresEmbeddingCache(database, **limits)
            else:
                cache = EmbeddingCache(settings.resolved_state_dir() / CACHE_FILE, **limits)  # type: ignore[attr-defined]
            cache_path = cache.path
        except (EmbeddingError, OSError) as exc:
            note = f"embedding cache disabled: {exc}"
            log.warning(note)
            status = replace(status, notes=(*status.notes, note))
        else:
            embedder = CachedEmbedder(embedder, cache)
            status = replace(status, cache_path=cache_path)
    log.info("embeddings: %s", status.message)
    return embedder, status

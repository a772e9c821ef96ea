"""Voyage AI embeddings (voyage-code-3 by default) through the official ``voyageai`` client.

Requests carry at most 128 texts and stay under a rough token budget; rate limits (HTTP 429),
5xx answers, timeouts and connection errors are retried with exponential backoff (tenacity),
honouring ``Retry-After`` when the server sends it. Anything else becomes an
:class:`~resources.embeddings.base.EmbeddingError` that says what to do.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from resources.embeddings.base import EmbeddingError, l2_normalize

log = logging.getLogger(__name__)

DEFAULT_MODEL = "voyage-code-3"
KNOWN_DIMENSIONS = {
    "voyage-code-3": 1024,
    "voyage-3": 1024,
    "voyage-3-large": 1024,
    "voyage-3.5": 1024,
    "voyage-3.5-lite": 1024,
    "voyage-3-lite": 512,
    "voyage-code-2": 1536,
}
MAX_BATCH_TEXTS = 128  # the API's limit on inputs per request
MAX_BATCH_TOKENS = 100_000  # voyage-code-3 allows 120K tokens per request; keep a margin
CHARS_PER_TOKEN = 3  # pessimistic for code, so the estimate overshoots rather than undershoots


def estimate_tokens(text: str) -> int:
    """A rough, pessimistic token count for batching (no tokenizer download needed)."""
    return len(text) // CHARS_PER_TOKEN + 1


def batches(texts: Sequence[str], max_texts: int = MAX_BATCH_TEXTS, max_tokens: int = MAX_BATCH_TOKENS) -> list[range]:
    """Split ``texts`` into consecutive index ranges under both limits.

    A single text over the token budget gets a batch of its own (the API truncates it).
    """
    out: list[range] = []
    start, tokens = 0, 0
    for i, text in enumerate(texts):
        n = estimate_tokens(text)
        if i > start and (i - start >= max_texts or tokens + n > max_tokens):
            out.append(range(start, i))
            start, tokens = i, 0
        tokens += n
    if start < len(texts):
        out.append(range(start, len(texts)))
    return out


def _is_transient(exc: BaseException) -> bool:
    from voyageai import error

    return isinstance(
        exc,
        error.RateLimitError
        | error.ServiceUnavailableError
        | error.ServerError
        | error.Timeout
        | error.APIConnectionError
        | error.TryAgain,
    )


def _retry_after(exc: BaseException | None) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    try:
        value = headers.get("Retry-After") or headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


class VoyageEmbedder:
    """Embeds with a Voyage AI model over HTTPS.

    Args:
        api_key: The Voyage API key.
        model: Model name (default ``voyage-code-3``).
        dimension: Output dimension; defaults to the model's native one.
        base_url: API base URL (default: the client's, ``https://api.voyageai.com/v1``).
        timeout_s: Per-request timeout.
        max_attempts: Attempts per batch before giving up on transient errors.
        backoff_initial_s: First backoff delay; doubles each attempt (with jitter).
        backoff_max_s: Longest single backoff delay (also caps ``Retry-After``).
        max_batch_texts: Texts per request (at most 128).
        max_batch_tokens: Estimated tokens per request.
    """

    def __init__(
        self,
        api_key: str,
        *,
        model: str = DEFAULT_MODEL,
        dimension: int | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_attempts: int = 6,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_batch_texts: int = MAX_BATCH_TEXTS,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ) -> None:
        if not api_key:
            raise EmbeddingError("Voyage needs an API key: set VOYAGE_API_KEY (or unset it to use the local model).")
        if dimension is None:
            if model not in KNOWN_DIMENSIONS:
                raise EmbeddingError(f"Unknown dimension for Voyage model {model!r}: pass dimension explicitly.")
            dimension = KNOWN_DIMENSIONS[model]
        try:
            import voyageai
        except ImportError as exc:
            raise EmbeddingError("Voyage embeddings need the package voyageai: `pip install voyageai`.") from exc
        self.model = model
        self.dimension = int(dimension)
        self.model_id = f"voyage/{model}@{self.dimension}"
        self.base_url = base_url
        self.max_attempts = max(1, int(max_attempts))
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.max_batch_texts = max(1, min(int(max_batch_texts), MAX_BATCH_TEXTS))
        self.max_batch_tokens = max(1, int(max_batch_tokens))
        # max_retries=0: retries are ours, so every transient error class is covered uniformly.
        self._client = voyageai.Client(api_key=api_key, max_retries=0, timeout=timeout_s, base_url=base_url)
        self._native = dimension == KNOWN_DIMENSIONS.get(model)

    # -- requests ------------------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        exponent = min(state.attempt_number - 1, 30)
        backoff = min(
            self.backoff_max_s, self.backoff_initial_s * 2**exponent + random.uniform(0, self.backoff_initial_s)
        )
        hinted = _retry_after(state.outcome.exception() if state.outcome else None)
        return min(self.backoff_max_s, max(backoff, hinted)) if hinted is not None else backoff

    def _request(
        self, texts: list[str], input_type: Literal["document", "query"], attempts: int, wait_cap: float | None = None
    ) -> np.ndarray:
        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("voyage request failed (attempt %d/%d): %s; retrying", state.attempt_number, attempts, exc)

        kwargs: dict[str, Any] = {"model": self.model, "input_type": input_type, "truncation": True}
        if not self._native:
            kwargs["output_dimension"] = self.dimension
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=self._wait if wait_cap is None else (lambda state: min(wait_cap, self._wait(state))),
            retry=retry_if_exception(_is_transient),
            before_sleep=log_retry,
            reraise=True,
        )
        payload = [t if t.strip() else " " for t in texts]  # the API rejects empty inputs
        try:
            result = retrying(self._client.embed, payload, **kwargs)
        except Exception as exc:
            raise self._error(exc, attempts) from exc
        vectors = np.asarray(result.embeddings, dtype=np.float32)
        if vectors.shape != (len(texts), self.dimension):
            raise EmbeddingError(
                f"Voyage returned vectors of shape {vectors.shape} for {len(texts)} texts; expected "
                f"{(len(texts), self.dimension)} from {self.model}."
            )
        return l2_normalize(vectors)

    def _error(self, exc: Exception, attempts: int) -> EmbeddingError:
        from voyageai import error

        where = self.base_url or "the Voyage API"
        if isinstance(exc, error.AuthenticationError):
            return EmbeddingError(
                f"Voyage rejected the API key ({exc}): check VOYAGE_API_KEY, or unset it to use the local model."
            )
        if isinstance(exc, error.RateLimitError):
            return EmbeddingError(
                f"Voyage kept rate-limiting after {attempts} attempts ({exc}): wait and retry, index fewer files "
                "at once, or raise the account's rate limit."
            )
        if isinstance(exc, error.APIConnectionError | error.Timeout):
            return EmbeddingError(
                f"Could not reach {where} after {attempts} attempts ({exc}): check the network or VOYAGE_BASE_URL."
            )
        if isinstance(exc, error.InvalidRequestError | error.MalformedRequestError):
            return EmbeddingError(f"Voyage rejected the request for model {self.model!r}: {exc}")
        if isinstance(exc, error.VoyageError):
            return EmbeddingError(f"Voyage API error after {attempts} attempt(s): {exc}")
        return EmbeddingError(f"Unexpected error calling Voyage: {exc!r}")

    # -- Embedder protocol ---------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with ``input_type="document"``; see ``Embedder.embed_documents``."""
        texts = list(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rng in batches(texts, self.max_batch_texts, self.max_batch_tokens):
            out[rng.start : rng.stop] = self._request(texts[rng.start : rng.stop], "document", self.max_attempts)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query with ``input_type="query"``; see ``Embedder.embed_query``."""
        return self._request([text], "query", self.max_attempts)[0]

    def probe(self, attempts: int = 2, wait_cap: float = 0.5) -> None:
        """One small request to check key, network and model (used once at start-up).

        Args:
            attempts: Tries on transient errors.
            wait_cap: Longest pause between tries, so start-up stays quick.

        Raises:
            EmbeddingError: Voyage is not usable; the message says why.
        """
        self._request(["codemem probe"], "query", attempts, wait_cap)

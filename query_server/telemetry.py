"""One record per tool call, whatever face it came through (MCP stdio, MCP over HTTP, HTTP routes):
a structlog JSON line (tool, sanitized inputs, duration, status) and Prometheus metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
from pydantic import BaseModel

log = structlog.get_logger("codemem.tools")

SECRET_KEYS = ("token", "password", "secret", "api_key", "apikey", "authorization")
MAX_LOGGED_CHARS = 160


class Metrics:
    """Prometheus metrics of one server (its own registry, so tests can build several)."""

    def __init__(self) -> None:
        """Create the metric families (``prometheus_client`` loads here: ``codemem mcp`` has no
        metrics and answers its first call sooner without it)."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "codemem_tool_seconds", "Tool call latency", ["tool"], registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120),
        )
        self.calls = Counter("codemem_tool_calls_total", "Tool calls by outcome", ["tool", "status"], registry=self.registry)
        self.errors = Counter("codemem_tool_errors_total", "Failed tool calls", ["tool", "kind"], registry=self.registry)
        self.symbols = Gauge("codemem_indexed_symbols", "Symbols in the code index", registry=self.registry)
        self.files = Gauge("codemem_indexed_files", "Files in the code index", registry=self.registry)
        self.dense = Gauge("codemem_dense_coverage", "Share of symbols with a dense vector", registry=self.registry)
        self.cache_hit_rate = Gauge("codemem_embedding_cache_hit_rate", "Embedding cache hit rate", registry=self.registry)
        self.memories = Gauge("codemem_memories", "Memories in the ledger", ["memory_type", "state"], registry=self.registry)
        self.outbox = Gauge("codemem_memory_outbox", "Memory projections waiting to be written", registry=self.registry)


def sanitize(value: Any) -> Any:
    """Inputs fit for a log line: long text cut (with its length), secrets redacted."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {
            k: "***" if any(s in str(k).lower() for s in SECRET_KEYS) else sanitize(v) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        items = [sanitize(v) for v in value[:10]]
        return items + [f"... {len(value) - 10} more"] if len(value) > 10 else items
    if isinstance(value, str) and len(value) > MAX_LOGGED_CHARS:
        return f"{value[:MAX_LOGGED_CHARS]}... ({len(value)} chars)"
    return value


class ToolTelemetry:
    """Records every tool call: a log line and, when given, Prometheus metrics."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        """Record into ``metrics`` (None: log only)."""
        self.metrics = metrics

    @contextmanager
    def call(self, tool: str, request: Any = None, *, face: str) -> Iterator[None]:
        """Time the block as one call of ``tool``; an exception marks it failed (and propagates)."""
        started = time.perf_counter()
        status, kind = "ok", None
        try:
            yield
        except Exception as exc:
            status, kind = "error", type(exc).__name__
            raise
        finally:
            elapsed = time.perf_counter() - started
            if self.metrics is not None:
                self.metrics.latency.labels(tool).observe(elapsed)
                self.metrics.calls.labels(tool, status).inc()
                if kind is not None:
                    self.metrics.errors.labels(tool, kind).inc()
            log.info(
                "tool call", tool=tool, face=face, status=status, error_kind=kind,
                duration_ms=round(elapsed * 1000, 2), inputs=sanitize(request) if request is not None else None,
            )

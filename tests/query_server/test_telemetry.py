"""Every tool call is logged (sanitized inputs, duration, status) and counted in Prometheus."""

from __future__ import annotations

import pytest
import structlog
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from query_server.telemetry import Metrics, ToolTelemetry, sanitize
from resources.schemas.memory import MemoryAddInput


def test_sanitize_cuts_long_text_and_redacts_secrets() -> None:
    request = MemoryAddInput(memory_type="session", content="x" * 5_000, metadata={"api_key": "s3cret", "n": list(range(30))})
    clean = sanitize(request)
    assert clean["content"].endswith("(5000 chars)") and len(clean["content"]) < 200
    assert clean["metadata"]["api_key"] == "***"
    assert clean["metadata"]["n"][-1] == "... 20 more"


def test_calls_are_logged_and_counted_by_outcome() -> None:
    structlog.reset_defaults()  # the CLI tests configure a WARNING filter in this process
    metrics = Metrics()
    telemetry = ToolTelemetry(metrics)
    with capture_logs() as logs:
        with telemetry.call("memory_search", {"query": "auth"}, face="mcp"):
            pass
        with pytest.raises(ValueError):
            with telemetry.call("memory_get", {"memory_id": "x", "password": "p"}, face="http"):
                raise ValueError("boom")
    ok, failed = logs
    assert ok["tool"] == "memory_search" and ok["status"] == "ok" and ok["face"] == "mcp" and ok["duration_ms"] >= 0
    assert failed["status"] == "error" and failed["error_kind"] == "ValueError" and failed["inputs"]["password"] == "***"
    text = generate_latest(metrics.registry).decode()
    assert 'codemem_tool_calls_total{status="ok",tool="memory_search"} 1.0' in text
    assert 'codemem_tool_errors_total{kind="ValueError",tool="memory_get"} 1.0' in text
    assert 'codemem_tool_seconds_count{tool="memory_search"} 1.0' in text

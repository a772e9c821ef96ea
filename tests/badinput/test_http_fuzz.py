"""Schemathesis over the OpenAPI of ``codemem serve``: every route, generated bodies (valid and not),
zero 5xx, every 4xx a JSON object with an actionable ``error`` (or FastAPI ``detail``), no stack trace.

Bounded by default (the ``badinput`` hypothesis profile: 25 examples per route); the long run is
``CODEMEM_FUZZ_PROFILE=long .venv/bin/python -m pytest -q -p no:cacheprovider tests/badinput``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from query_server.http_api import build_http_app
from query_server.ownership import ProjectHandle
from query_server.tools import routed_tools
from tests.badinput.conftest import EXAMPLES, PROFILE, assert_clean_error

LOCAL_HOST = "127.0.0.1:8765"
"""The Host a local client sends (the app refuses others, e.g. the test client's default ``testserver``)."""
STATUSES: Counter[tuple[str, int]] = Counter()
NEGATIVE_ACCEPTED: Counter[str] = Counter()


@pytest.fixture(scope="module")
def app(handle: ProjectHandle) -> Iterator[FastAPI]:
    yield build_http_app(handle)


@pytest.fixture(scope="module")
def api_schema(app: FastAPI):
    return schemathesis.openapi.from_asgi("/openapi.json", app, headers={"host": LOCAL_HOST})


def _send(client: TestClient, case) -> Any:
    """Send a generated case through the module's TestClient (its lifespan runs once: the mounted MCP
    app's session manager cannot be started again for every request, as ``case.call()`` would)."""
    kwargs = case.as_transport_kwargs(base_url=f"http://{LOCAL_HOST}")
    headers = {k: v for k, v in kwargs["headers"].items() if k.lower() not in {"connection", "accept-encoding"}}
    body: dict[str, Any] = {}
    if "json" in kwargs:
        body["json"] = kwargs["json"]
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        body["content"] = data if isinstance(data, bytes | str) else str(data).encode()
    return client.request(kwargs["method"], kwargs["url"], headers=headers, params=kwargs.get("params") or None, **body)


def _wait_for_job(client: TestClient, job_id: str) -> None:
    """Let a background index job finish before the next request, so each generated case meets a
    settled index (reads served during a full reindex are tested in
    ``tests/query_server/test_concurrency.py``)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.post("/tools/index_status", json={"job_id": job_id}).json().get("job") or {}
        if job.get("status") in ("done", "failed"):
            return
        time.sleep(0.05)


ROUTES = [("POST", f"/tools/{name}") for name in sorted(tool.name for tool in routed_tools())] + [
    ("GET", "/health"), ("GET", "/metrics"),
]
MODES = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[path for _, path in ROUTES])
def test_every_route_answers_without_5xx_or_traceback(
    api_schema, http: TestClient, method: str, path: str, mode: GenerationMode,
) -> None:
    """Schema-valid bodies (positive) and schema-violating ones (negative) for one route."""
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(settings.get_profile(PROFILE), max_examples=max(1, EXAMPLES // 2))  # ~EXAMPLES per route
    def run(case) -> None:
        response = _send(http, case)
        if response.status_code == 200 and path in ("/tools/index_directory", "/tools/reindex"):
            _wait_for_job(http, response.json()["job_id"])  # see _wait_for_job
        STATUSES[(path, response.status_code)] += 1
        assert_clean_error(response.status_code, response.text)
        if mode is GenerationMode.NEGATIVE and response.status_code < 400:
            NEGATIVE_ACCEPTED[path] += 1  # a body outside the schema may still be harmless (e.g. extra fields)

    try:
        run()
    except Unsatisfiable:
        pytest.skip(f"{path} takes no input: no schema-violating body to generate")


HOSTILE = [
    ({"host": "rebind.attacker.example:8716"}, 421),
    ({"origin": "http://rebind.attacker.example:8716"}, 403),
]


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[path for _, path in ROUTES])
def test_every_route_refuses_a_foreign_host_or_origin_and_an_oversized_body(
    api_schema, http: TestClient, method: str, path: str,
) -> None:
    """Generated valid requests sent from a rebinding page (foreign Host, foreign Origin), and padded past
    CODEMEM_MAX_REQUEST_BYTES: refused with 421, 403 and 413 and an ``error`` that says what to do.
    ``/health`` stays open to any Host and Origin (probes), so only its body limit applies."""
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @settings(settings.get_profile(PROFILE), max_examples=2)
    def run(case) -> None:
        for extra, status in HOSTILE if path != "/health" else []:
            case.headers = {**(case.headers or {}), **extra}
            response = _send(http, case)
            assert response.status_code == status, (path, extra, response.status_code, response.text[:300])
            body = assert_clean_error(response.status_code, response.text)
            assert "CODEMEM_ALLOWED_" in body["error"], body
            case.headers = {k: v for k, v in case.headers.items() if k not in extra}
        kwargs = case.as_transport_kwargs(base_url=f"http://{LOCAL_HOST}")
        padded = http.request(kwargs["method"], kwargs["url"], content=b" " * (3 * 1024 * 1024),
                              headers={"content-type": "application/json"})
        assert padded.status_code == 413, (path, padded.status_code, padded.text[:300])
        assert "CODEMEM_MAX_REQUEST_BYTES" in assert_clean_error(padded.status_code, padded.text)["error"]

    run()


def test_the_schema_lists_every_tool_route(app: FastAPI) -> None:
    paths = app.openapi()["paths"]
    tools = [p for p in paths if p.startswith("/tools/")]
    assert len(tools) >= 25, tools
    assert "/health" in paths and "/metrics" in paths


def test_fuzz_figures() -> None:
    """Runs last in the module: what the fuzzer sent and how the server answered (``-rA`` shows it)."""
    if not STATUSES:
        pytest.skip("the fuzz test did not run in this session")
    total = sum(STATUSES.values())
    server_errors = sum(n for (_, status), n in STATUSES.items() if status >= 500)
    by_status = Counter()
    for (_, status), n in STATUSES.items():
        by_status[status] += n
    print(f"\nschemathesis: {total} requests over {len({p for p, _ in STATUSES})} routes; by status {dict(by_status)}")
    assert server_errors == 0

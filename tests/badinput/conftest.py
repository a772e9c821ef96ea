"""Shared fixtures of the bad-input suite: one small indexed project per module, its in-process owner
(``ProjectHandle``) and the HTTP app over it, plus the helpers every suite uses to judge an answer."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from query_server.http_api import build_http_app
from query_server.ownership import ProjectHandle
from resources.schemas.tools import IndexInput
from resources.settings import Settings
from tests.conftest import write_files

# Bounded by default; CODEMEM_FUZZ_PROFILE=long for the long run (see README.md, Tests).
settings.register_profile(
    "badinput", max_examples=25, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)
settings.register_profile(
    "badinput-long", parent=settings.get_profile("badinput"), max_examples=500, derandomize=False,
)
PROFILE = "badinput-long" if os.environ.get("CODEMEM_FUZZ_PROFILE") == "long" else "badinput"
EXAMPLES = settings.get_profile(PROFILE).max_examples

FILES = {
    "shop/__init__.py": "",
    "shop/pricing.py": textwrap.dedent(
        '''
        def apply_discount(price, percent):
            """Reduce a price by a percentage discount."""
            return price - price * percent / 100


        def total_with_tax(items, tax_rate):
            """Sum the prices of the items and add the sales tax."""
            return sum(items) * (1 + tax_rate)
        '''
    ),
    "shop/checkout.py": textwrap.dedent(
        '''
        from shop.pricing import apply_discount, total_with_tax


        def checkout(cart):
            """Price the cart: tax first, then the coupon."""
            return apply_discount(total_with_tax(cart.items, 0.2), cart.coupon)
        '''
    ),
    "web/app.ts": "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n",
}
TRACEBACK_WORDS = ("Traceback (most recent call last)", 'File "/', "site-packages/")


def make_project(root: Path, *, dense: bool = False) -> Path:
    """Write the small project under ``root`` and index it."""
    root.mkdir(parents=True, exist_ok=True)
    write_files(root, FILES)
    handle = ProjectHandle(Settings(project_root=root, dense_embeddings=dense))
    try:
        report = handle.call("index", IndexInput())
        assert report["failed"] == [], report
    finally:
        handle.close()
    return root


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("badinput") / "project")


@pytest.fixture(scope="module")
def handle(bad_project: Path) -> Iterator[ProjectHandle]:
    owner = ProjectHandle(Settings(project_root=bad_project, dense_embeddings=False))
    try:
        yield owner
    finally:
        owner.close()


@pytest.fixture(scope="module")
def http(handle: ProjectHandle) -> Iterator[TestClient]:
    with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as client:
        yield client


def assert_clean_error(status: int, text: str) -> dict[str, Any]:
    """A refusal: a 4xx whose body is a JSON object with an actionable ``error`` (or FastAPI's
    ``detail``), never a 5xx, never a stack trace."""
    assert status < 500, f"{status}: {text[:2000]}"
    for word in TRACEBACK_WORDS:
        assert word not in text, f"stack trace in the answer: {text[:2000]}"
    if status < 400:
        return {}
    body = json.loads(text)
    assert isinstance(body, dict), text[:500]
    message = body.get("error") or body.get("detail")
    assert message, f"no error message: {text[:500]}"
    if isinstance(message, str):
        assert len(message.strip()) >= 10, f"an error that says nothing: {message!r}"
    return body

"""Fixtures of the fault tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.graph_servers import graph_servers_under, stop_graph_servers


@pytest.fixture
def graph_servers(tmp_path: Path) -> Iterator[Path]:
    """Checks that no graph server of this test outlives it, stopping any that does.

    Request it before ``service_factory`` so that it runs after the services are closed."""
    yield tmp_path
    leftovers = stop_graph_servers(tmp_path)
    assert graph_servers_under(tmp_path) == [], "a graph server of this test could not be stopped"
    assert leftovers == [], f"graph server(s) {leftovers} outlived the test's stores (stopped now)"

"""Fixtures of the fault tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.graph_servers import graph_servers_under, stop_graph_servers, wait_for_graph_servers_to_exit

EXIT_GRACE_S = 10.0


@pytest.fixture
def graph_servers(tmp_path: Path) -> Iterator[Path]:
    """Checks that no graph server of this test outlives it, stopping any that does.

    Request it before ``service_factory`` so that it runs after the services are closed."""
    yield tmp_path
    # A server told to stop (SHUTDOWN, or SIGTERM from a shutdown's deadline) flushes its AOF and
    # exits on its own, after its owner may already have exited: give it that time. One nobody
    # stopped is still there after it.
    wait_for_graph_servers_to_exit(tmp_path, EXIT_GRACE_S)
    leftovers = stop_graph_servers(tmp_path)
    assert graph_servers_under(tmp_path) == [], "a graph server of this test could not be stopped"
    assert leftovers == [], f"graph server(s) {leftovers} outlived the test's stores by {EXIT_GRACE_S:.0f} s (stopped now)"

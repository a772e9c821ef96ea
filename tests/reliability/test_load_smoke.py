"""Smoke version of ``bench.load`` (issue 9, item 6): 20 MCP clients over streamable HTTP against
one real ``codemem serve`` for ~10 s, every tool of the mix plus a reindex job, no error.

It takes ~50–70 s on the 2-core dev machine (index with the local model, server start, idle pass,
10 s of load, shutdown), over the 30 s the default run allows a test, so it is also marked
``soak``: ``scripts/test.sh -m soak`` or ``pytest -m slow tests/reliability/test_load_smoke.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.load import TOOLS, run_load
from tests.reliability.graph_servers import graph_servers_under

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.soak
def test_twenty_http_clients_get_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the run's project, state and graph server live here
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_load(seconds=10, clients=20, procs=2, think=0.5, memories=40, idle_calls=2, warmup=4,
                      project=REPO_ROOT / "resources" / "schemas", log=lambda _msg: None)
    load = result["load"]
    assert load["errors"] == 0, load["error_kinds"]
    assert load["calls"] > 50
    assert all(load["per_tool"][tool]["n"] > 0 for tool in TOOLS), load["per_tool"]
    assert load["reindex"]["status"] == "done", load["reindex"]
    assert result["warmup"]["errors"] == 0 and result["warmup"]["reindex"]["status"] == "done", result["warmup"]
    assert load["server_cpu"]["load_s"] > 0
    assert load["rss"]["samples"] > 5
    assert graph_servers_under(tmp_path) == [], "the server's embedded graph server outlived it"

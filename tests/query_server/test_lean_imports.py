"""What a starting process does not import (issue 18: the first call of ``codemem mcp``, a
no-change ``codemem index``): structlog without rich's traceback and pretty-printer, the server's
modules without rich, Prometheus or psutil, and codemem's pydantic models built on first use."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import threading
from pathlib import Path

from pydantic import BaseModel

import resources.schemas
from query_server.structlog_import import _RichHidden
from resources.graph.model import GraphEdge, GraphNode
from resources.schemas.base import Schema

REPO_ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; its last printed line, parsed as JSON."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_structlog_is_imported_without_the_rich_modules_it_never_uses_and_still_logs_json() -> None:
    found = _loaded_after(
        "import io, json, logging, sys\n"
        "from query_server.structlog_import import import_structlog\n"
        "import_structlog()\n"
        "loaded = sorted(m for m in ('rich', 'rich.traceback', 'rich.pretty', 'attr', 'pygments') if m in sys.modules)\n"
        "stream = io.StringIO()\n"
        "logging.basicConfig(stream=stream, level=logging.INFO, format='%(message)s')\n"
        "from query_server.cli.common import structure_log_lines\n"
        "structure_log_lines('INFO')\n"
        "import structlog\n"
        "try:\n"
        "    raise ValueError('boom')\n"
        "except ValueError:\n"
        "    structlog.get_logger('t').exception('failed', k=1)\n"
        "line = json.loads(stream.getvalue().splitlines()[-1])\n"
        "import rich.pretty, rich.traceback  # rich stays whole for everything else\n"
        "print(json.dumps({'loaded': loaded, 'line': line}))\n"
    )
    assert found["loaded"] == []
    line = found["line"]
    assert isinstance(line, dict)
    assert line["event"] == "failed" and line["k"] == 1 and line["level"] == "error"
    assert "ValueError: boom" in line["exception"]


def test_rich_is_hidden_from_the_importing_thread_only() -> None:
    hidden = _RichHidden()
    seen: list[object] = []
    other = threading.Thread(target=lambda: seen.append(hidden.find_spec("rich.pretty")))
    other.start()
    other.join()
    assert seen == [None]  # another thread imports rich as usual
    try:
        hidden.find_spec("rich.pretty")
    except ImportError as exc:
        assert exc.name == "rich.pretty"
    else:
        raise AssertionError("the importing thread was given rich.pretty")
    assert hidden.find_spec("structlog.dev") is None


def test_the_mcp_servers_modules_load_without_rich_prometheus_or_psutil() -> None:
    found = _loaded_after(
        "import json, sys\n"
        "from query_server.structlog_import import import_structlog\n"
        "import_structlog()\n"
        "import query_server.cli.servers, query_server.early_calls, query_server.hooks.relay_server\n"
        "import query_server.ownership, query_server.shutdown, query_server.telemetry, query_server.warm_start\n"
        "print(json.dumps(sorted(m for m in ('rich', 'prometheus_client', 'psutil', 'attr', 'dagster', 'mcp')"
        " if m in sys.modules)))\n"
    )
    assert found == []


def test_the_cli_consoles_are_made_on_first_use_and_can_be_replaced() -> None:
    found = _loaded_after(
        "import json, sys\n"
        "from query_server.cli import common\n"
        "before = 'rich' in sys.modules\n"
        "from query_server.cli.common import console\n"
        "from rich.console import Console\n"
        "print(json.dumps([before, isinstance(console, Console), console is common.console, common.out is not console,"
        " common.out.stderr, console.stderr]))\n"
    )
    assert found == [False, True, True, True, False, True]


def _models_of(package: object) -> list[type[BaseModel]]:
    models = []
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):  # type: ignore[attr-defined]
        module = importlib.import_module(info.name)
        models += [value for value in vars(module).values()
                   if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == info.name]
    return models


def test_every_codemem_model_is_built_on_first_use_and_then_validates() -> None:
    models = [*_models_of(resources.schemas), GraphNode, GraphEdge]
    assert len(models) > 80
    not_deferred = [m.__qualname__ for m in models if m is not Schema and not m.model_config.get("defer_build")]
    assert not_deferred == []
    from resources.schemas.memory.reads import MemorySearchInput

    request = MemorySearchInput.model_validate({"query": "how are headers parsed"})
    assert request.query == "how are headers parsed" and MemorySearchInput.__pydantic_complete__
    assert "query" in MemorySearchInput.model_json_schema()["properties"]


def test_models_first_used_by_many_threads_at_once_validate_as_built() -> None:
    """pydantic before 2.14 rebuilt a deferred model without a lock: a thread could validate with a
    half-built model (its parent's validator), so pyproject asks for 2.14."""
    found = _loaded_after(
        "import json, threading\n"
        "from pydantic import ValidationError\n"
        "from resources.schemas.memory.reads import MemorySearchInput\n"
        "from resources.schemas.tools import CodeSearchInput\n"
        "barrier, outcomes = threading.Barrier(12), []\n"
        "def use(i):\n"
        "    barrier.wait()\n"
        "    model = MemorySearchInput if i % 2 else CodeSearchInput\n"
        "    good = model.model_validate({'query': f'q{i}'})\n"
        "    try:\n"
        "        model.model_validate({'query': 'q', 'qurey': 'typo'})\n"
        "        refused = False\n"
        "    except ValidationError:\n"
        "        refused = True\n"
        "    outcomes.append([type(good).__name__ == model.__name__, good.query == f'q{i}', refused])\n"
        "threads = [threading.Thread(target=use, args=(i,)) for i in range(12)]\n"
        "[t.start() for t in threads]\n"
        "[t.join() for t in threads]\n"
        "print(json.dumps(outcomes))\n"
    )
    assert found == [[True, True, True]] * 12

"""Paths for every tool that takes one: traversal (``../``, absolute, ``~``, URL-encoded, NUL, very
long) and symlink escapes (a link inside the project to a directory or file outside it, a symlink
loop). Escapes are refused with a clear message; odd-but-inside spellings may succeed inside the
project; nothing outside the project is ever read (its marker never comes back, its memory is never
imported) or written (the outside directory's listing does not change); never a 5xx.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.badinput.conftest import assert_clean_error

MARKER = "OUTSIDE-SECRET-7f3a"
SECRET_MEMORY_ID = "0b9f3c1e-5a2d-4f6b-9c8e-7d1a2b3c4d5e"

# tool -> a function from a path to the tool's arguments
TOOLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "index_file": lambda p: {"file_path": p, "force": True},
    "index_directory": lambda p: {"directory_path": p},
    "reindex": lambda p: {"directory_path": p, "scope": "changed"},
    "export_memory": lambda p: {"output_path": p},
    "export_memory-markdown": lambda p: {"output_path": p, "format": "markdown"},
    "import_memory": lambda p: {"input_path": p},
    "import_memory-markdown": lambda p: {"input_path": p, "format": "markdown"},
    "record_test_run": lambda p: {"junit_xml_path": p},
    "impact_of_change": lambda p: {"files": [p]},
}


def _escapes(outside: Path) -> dict[str, str]:
    """Spellings that leave the project: each must be refused."""
    return {
        "dotdot": "../outside/secret.py",
        "dotdot-deep": "shop/../../outside/secret.py",
        "dotdot-many": "../" * 40 + "etc/passwd",
        "absolute-outside": str(outside / "secret.py"),
        "absolute-etc": "/etc/passwd",
        "symlink-dir-escape": "escape/secret.py",
        "symlink-dir-itself": "escape",
        "symlink-file-escape": "shop/linked_secret.py",
        "symlink-loop": "loop_a",
        "symlink-loop-child": "loop_a/x.py",
    }


ODD = {
    # not escapes, but odd: refused or confined to the project, never a crash
    "tilde": "~/.ssh/id_rsa",
    "tilde-user": "~root/.bashrc",
    "url-encoded-dotdot": "%2e%2e/%2e%2e/outside/secret.py",
    "url-encoded-slash": "..%2f..%2foutside%2fsecret.py",
    "nul-byte": "shop/pricing.py\x00../../etc/passwd",
    "nul-only": "\x00",
    "long-component": "a" * 300 + ".py",
    "long-path": "a/" * 1_500 + "x.py",
    "backslashes": "..\\..\\outside\\secret.py",
    "newline": "shop/pricing.py\n../../etc/passwd",
    "unicode-dots": "\u2024\u2024/\u2024\u2024/outside/secret.py",
    "fullwidth-slash": "..\uff0f..\uff0foutside",
    "blank": "   ",
}


@pytest.fixture(scope="module")
def layout(bad_project: Path) -> dict[str, Any]:
    """An outside directory beside the project with a secret source file and a JSONL memory, and the
    symlinks inside the project that point at it (and at each other)."""
    outside = bad_project.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.py").write_text(f"def leaked():\n    return '{MARKER}'\n")
    (outside / "secret.jsonl").write_text(json.dumps({
        "id": SECRET_MEMORY_ID, "memory_type": "session", "content": f"{MARKER} imported from outside",
    }) + "\n")
    (outside / "report.xml").write_text(f'<testsuite name="{MARKER}"><testcase name="t" classname="c"/></testsuite>')
    for name, target in [("escape", outside), ("shop/linked_secret.py", outside / "secret.py"),
                         ("loop_a", bad_project / "loop_b"), ("loop_b", bad_project / "loop_a")]:
        link = bad_project / name
        if not link.is_symlink():
            os.symlink(target, link)
    return {"outside": outside, "listing": sorted(p.name for p in outside.iterdir())}


def _call(http: TestClient, tool: str, path: str) -> tuple[int, str]:
    name = tool.split("-")[0]
    response = http.post(f"/tools/{name}", json=TOOLS[tool](path))
    return response.status_code, response.text


def _nothing_leaked(http: TestClient, layout: dict[str, Any], text: str) -> None:
    assert MARKER not in text, f"outside content came back: {text[:500]}"
    assert sorted(p.name for p in layout["outside"].iterdir()) == layout["listing"], "something was written outside"
    got = http.post("/tools/memory_get", json={"memory_id": SECRET_MEMORY_ID, "memory_type": "session"})
    assert got.status_code in (400, 404), f"the outside memory was imported: {got.text[:300]}"


CASES = [(tool, kind) for tool in TOOLS for kind in [*_escapes(Path("/x")), *ODD]]


@pytest.mark.parametrize(("tool", "kind"), CASES, ids=[f"{t}-{k}" for t, k in CASES])
def test_path_is_refused_or_confined(http: TestClient, layout: dict[str, Any], tool: str, kind: str) -> None:
    escapes = _escapes(layout["outside"])
    path = escapes.get(kind) or ODD[kind]
    status, text = _call(http, tool, path)
    body = assert_clean_error(status, text)
    if kind in escapes:
        assert status in (400, 422), f"{tool} accepted an escaping path {path!r}: {status} {text[:500]}"
        message = body["error"] if isinstance(body.get("error"), str) else str(body)
        words = ("within project", "outside", "symlink", "cannot be resolved", "not found", "does not exist",
                 "not a file", "not a directory", "inside the project")
        assert any(w in message for w in words), f"unclear refusal for {path!r}: {message[:500]}"
    _nothing_leaked(http, layout, text)


def test_indexing_the_project_skips_the_escaping_symlinks(http: TestClient, layout: dict[str, Any]) -> None:
    from query_server.ownership import ProjectHandle  # noqa: F401 - the http fixture's handle owns the stores

    response = http.post("/tools/index_file", json={"file_path": "shop/pricing.py", "force": True})
    assert response.status_code == 200, response.text
    rows = http.post("/tools/graph_query", json={"cypher": "MATCH (f:Function) RETURN f.name AS name"}).json()["results"]
    assert "leaked" not in {r["name"] for r in rows}
    found = http.post("/tools/code_search", json={"query": MARKER}).json()
    assert MARKER not in json.dumps(found)

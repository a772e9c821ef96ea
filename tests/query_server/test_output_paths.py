"""Outputs the caller names (export_memory, backup) never replace codemem's state, ``.git`` or an
existing file unasked — over HTTP, MCP, the CLI and the service — and the ledger refuses writes
once its file was replaced under it (issue 25: one export wiped every memory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from query_server.http_api import build_http_app
from query_server.mcp_server import build_mcp_server
from query_server.ownership import ProjectHandle
from query_server.service import ToolError
from resources.memory.ledger import Ledger, LedgerReplaced, NewMemory
from resources.schemas.memory import BackupInput, ExportMemoryInput, MemoryAddInput
from resources.settings import Settings
from tests.conftest import git_init, write_files

REPO_ROOT = Path(__file__).parents[2]
SOURCE = "app/main.py"
SOURCE_TEXT = "def main():\n    return 42\n"
HOOK = ".git/hooks/pre-commit"
HOOK_TEXT = "#!/bin/sh\nexit 0\n"


@pytest.fixture
def repo(project: Path) -> Path:
    """A git project with a source file and a pre-commit hook."""
    write_files(project, {SOURCE: SOURCE_TEXT})
    git_init(project)
    write_files(project, {HOOK: HOOK_TEXT})
    return project


def _memory_count(handle: ProjectHandle) -> int:
    return sum(c["total"] for c in handle.call("memory_statistics").memory_counts.values())


def _untouched(repo: Path) -> None:
    assert (repo / SOURCE).read_text() == SOURCE_TEXT
    assert (repo / HOOK).read_text() == HOOK_TEXT
    assert (repo / ".codemem" / "memory.db").read_bytes()[:16] == b"SQLite format 3\x00"


def test_http_export_cannot_replace_the_ledger_a_source_file_or_a_git_hook(repo: Path) -> None:
    handle = ProjectHandle(Settings(project_root=repo))
    try:
        with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as client:
            added = client.post("/tools/memory_add", json={"memory_type": "session", "content": "Refactored the login flow"})
            assert added.status_code == 200
            for target, expected in (
                (".codemem/memory.db", "state directory"),
                ("./.codemem/../.codemem/memory.db", "state directory"),
                (str(repo / ".codemem" / "index.db"), "state directory"),
                (SOURCE, "already exists"),
                (HOOK, ".git directory"),
                (".git/config", ".git directory"),
                ("app", "is a directory"),
            ):
                refused = client.post("/tools/export_memory", json={"output_path": target})
                assert refused.status_code == 400, (target, refused.text)
                assert expected in refused.json()["error"] and "—" in refused.json()["error"]
            hook_forced = client.post("/tools/export_memory", json={"output_path": HOOK, "overwrite": True})
            assert hook_forced.status_code == 400 and ".git directory" in hook_forced.json()["error"]
            ledger_forced = client.post("/tools/export_memory", json={"output_path": ".codemem/memory.db", "overwrite": True})
            assert ledger_forced.status_code == 400 and "state directory" in ledger_forced.json()["error"]
            markdown = client.post("/tools/export_memory", json={"output_path": ".codemem/md", "format": "markdown"})
            assert markdown.status_code == 400 and "state directory" in markdown.json()["error"]
            # a symlink in the project that leads into the state directory is followed, then refused
            (repo / "latest.jsonl").symlink_to(repo / ".codemem" / "memory.db")
            via_link = client.post("/tools/export_memory", json={"output_path": "latest.jsonl", "overwrite": True})
            assert via_link.status_code == 400 and "state directory" in via_link.json()["error"]
            _untouched(repo)
            after = client.post("/tools/memory_add", json={"memory_type": "session", "content": "Wrote the export tests"})
            assert after.status_code == 200
            # a new file is written; a second export to it needs overwrite
            first = client.post("/tools/export_memory", json={"output_path": "exports/memories.jsonl"})
            assert first.status_code == 200 and first.json()["exported_count"] == 2
            again = client.post("/tools/export_memory", json={"output_path": "exports/memories.jsonl"})
            assert again.status_code == 400 and "overwrite=true" in again.json()["error"]
            replaced = client.post("/tools/export_memory", json={"output_path": "exports/memories.jsonl", "overwrite": True})
            assert replaced.status_code == 200
            assert len((repo / "exports" / "memories.jsonl").read_text().splitlines()) == 2
            assert not [p for p in (repo / "exports").iterdir() if p.name.endswith(".tmp")]
    finally:
        handle.close()
    reopened = ProjectHandle(Settings(project_root=repo))
    try:
        assert _memory_count(reopened) == 2  # every acknowledged memory survives a restart
    finally:
        reopened.close()


def test_mcp_export_refuses_the_ledger_and_git(repo: Path) -> None:
    handle = ProjectHandle(Settings(project_root=repo))
    try:
        handle.call("memory_add", MemoryAddInput(memory_type="session", content="Moved the cache to Redis"))

        async def scenario() -> None:
            async with Client(build_mcp_server(handle)) as client:
                for target in (".codemem/memory.db", HOOK):
                    result = await client.call_tool("export_memory", {"output_path": target, "overwrite": True})
                    assert result.is_error, target
                    text = result.content[0].text
                    assert "state directory" in text or ".git directory" in text
                ok = await client.call_tool("export_memory", {"output_path": "mem.jsonl"})
                assert not ok.is_error and ok.structured_content["exported_count"] == 1

        anyio.run(scenario)
        _untouched(repo)
        assert _memory_count(handle) == 1
    finally:
        handle.close()


def test_backup_and_markdown_export_stay_out_of_state_and_git(repo: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(repo)
    svc.memory.memory_add(MemoryAddInput(memory_type="design", content="Payments go through one gateway client",
                                  metadata={"design_type": "ADR", "title": "ADR-1 one gateway", "status": "Accepted"}))
    for path in (".codemem/backup", ".git/backup", ".codemem"):
        with pytest.raises(ToolError, match="state directory|.git directory"):
            svc.memory.backup(BackupInput(path=path))
    with pytest.raises(ToolError, match="is a file"):
        svc.memory.backup(BackupInput(path=SOURCE))
    made = svc.memory.backup(BackupInput(path="backups/today"))
    assert made.memories == 1
    with pytest.raises(ToolError, match=r"\.git directory"):
        svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path=".git/memories"))
    # a file in the way that is not an earlier export of its memory is never replaced unasked
    first = svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="docs/memories"))
    written = next((repo / "docs" / "memories" / "design").glob("*.md"))
    written.write_text("my own notes, not a memory\n")
    with pytest.raises(ToolError, match="not an earlier export"):
        svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="docs/memories"))
    assert written.read_text() == "my own notes, not a memory\n"
    forced = svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="docs/memories", overwrite=True))
    assert forced.exported_count == first.exported_count == 1 and "Payments go through" in written.read_text()
    # a type folder that is a symlink into the state directory is refused before anything is written
    (repo / "notes").mkdir()
    (repo / "notes" / "design").symlink_to(repo / ".codemem")
    before = sorted(p.name for p in (repo / ".codemem").iterdir())
    with pytest.raises(ToolError, match="outside the export directory"):
        svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="notes"))
    assert sorted(p.name for p in (repo / ".codemem").iterdir()) == before
    _untouched(repo)


def test_cli_export_needs_overwrite_for_an_existing_file(repo: Path) -> None:
    def run(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "query_server.entry", *args, "--project", str(repo)],
            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, env={**os.environ, "CODEMEM_LOG_LEVEL": "ERROR"},
        )
        assert done.returncode == code, done.stdout + done.stderr
        return done

    run("memory", "add", "session", "Indexed the repository for the first time")
    refused = run("export", "--output", SOURCE, code=2)
    assert "--overwrite" in refused.stdout + refused.stderr
    assert (repo / SOURCE).read_text() == SOURCE_TEXT
    run("export", "--output", SOURCE, "--overwrite")
    assert json.loads((repo / SOURCE).read_text().splitlines()[0])["content"] == "Indexed the repository for the first time"
    refused_state = run("export", "--output", ".codemem/memory.db", "--overwrite", code=2)
    assert "state directory" in refused_state.stdout + refused_state.stderr


def test_ledger_refuses_writes_after_its_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    ledger = Ledger(path)
    try:
        first = ledger.add([NewMemory(memory_type="session", content="before", metadata={})])[0]
        replacement = tmp_path / "other.db"
        replacement.write_text('{"id": "x"}\n')
        os.replace(replacement, path)  # what an export over the ledger did
        with pytest.raises(LedgerReplaced, match="replaced or removed"):
            ledger.add([NewMemory(memory_type="session", content="after", metadata={})])
        path.unlink()
        with pytest.raises(LedgerReplaced):
            ledger.update(first.id, content="changed")
    finally:
        ledger.close()


def test_a_replaced_ledger_is_not_acknowledged_through_the_service(repo: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(repo)
    svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Kept"))
    ledger = repo / ".codemem" / "memory.db"
    copy = ledger.with_name("copy.db")
    copy.write_bytes(ledger.read_bytes())
    os.replace(copy, ledger)  # replaced by something outside codemem
    with pytest.raises(Exception, match="replaced or removed"):
        svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Would be written into a deleted file"))

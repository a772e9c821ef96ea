"""The memory commands of the CLI on a real project: add, search, list, get, delete, stats,
export/import, normalize, backup/restore, rebuild-projections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from query_server.cli import main


@pytest.fixture
def run(tmp_path: Path):  # noqa: ANN201
    project = tmp_path / "proj"
    project.mkdir()
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None, code: int = 0):  # noqa: A002, ANN202
        result = runner.invoke(main, [*args, "--project", str(project)], input=input)
        assert result.exit_code == code, (args, result.output, result.stderr if hasattr(result, "stderr") else "")
        assert "Traceback" not in result.output
        return result

    invoke.project = project  # type: ignore[attr-defined]
    return invoke


def test_memory_commands_round_trip(run) -> None:  # noqa: ANN001
    added = json.loads(run(
        "memory", "add", "design", "Sessions are JWTs signed with a rotating key", "--json",
        "--meta", "title=ADR-7 tokens", "--meta", "design_type=ADR", "--meta", "status=Accepted",
    ).stdout)
    memory_id = added["memory_id"]
    pref = json.loads(run("memory", "add", "user_preference", "Tests use pytest fixtures", "--json",
                          "--meta", "category=Tool", "--meta", "key=tests", "--meta", "value=pytest", "--meta", "scope=Project").stdout)
    found = json.loads(run("memory", "search", "how are session tokens signed", "--json").stdout)
    assert found["results"][0]["id"] == memory_id
    assert "ADR-7 tokens" in run("memory", "search", "session tokens").stdout
    listed = json.loads(run("memory", "list", "--json", "--type", "user_preference").stdout)
    assert [h["id"] for h in listed["results"]] == [pref["memory_id"]]
    shown = run("memory", "get", memory_id, "--type", "design")
    assert "rotating key" in shown.stdout and "metadata.title" in shown.stdout
    wrong = run("memory", "get", memory_id, "--type", "session", code=2)
    assert "memory_type='design'" in wrong.output
    bad = run("memory", "add", "requirements", "x", "--meta", "priority=urgent", code=2)
    assert "Critical, High, Medium, Low" in bad.output

    stats = json.loads(run("stats", "--json").stdout)
    assert stats["memory_counts"]["design"]["active"] == 1 and stats["sync_status"]["synced"] == 2
    run("export", "--output", "out/memories.jsonl")
    assert len((run.project / "out/memories.jsonl").read_text().splitlines()) == 2
    run("backup", "backups/one")
    run("memory", "delete", memory_id, "--type", "design", "--hard")
    run("memory", "get", memory_id, "--type", "design", code=2)
    imported = run("import", "out/memories.jsonl", "--json")
    assert json.loads(imported.stdout)["imported"] == 1
    run("memory", "delete", memory_id, "--type", "design", "--hard")
    restored = json.loads(run("restore", "backups/one", "--json").stdout)
    assert restored["restored_memories"] == 2
    assert json.loads(run("memory", "search", "session tokens", "--json").stdout)["results"][0]["id"] == memory_id
    assert "projected 2" in run("rebuild-projections").output
    job = json.loads(run("normalize", "--dry-run", "--json").stdout)
    assert job["status"] == "done" and job["dry_run"] and job["report"]["duplicates"] == 0
    run("export", "--output", "../escape.jsonl", code=2)


def test_memory_extract_reads_a_file_or_stdin_and_stores_only_with_commit(run, tmp_path: Path) -> None:  # noqa: ANN001
    message = ("Switch the HTTP client to httpx\n\nWe decided to use httpx instead of requests going forward: it has "
               "per-phase timeouts.\n\nTests: 214 passed, 2 failed before the fix; 216 passed after.\n")
    dry = json.loads(run("memory", "extract", "-", "--source", "commit", "--json", input=message).stdout)
    assert dry["dry_run"] and dry["stored"] == 0
    assert "design" in {c["memory_type"] for c in dry["candidates"]}
    note = tmp_path / "commit.txt"
    note.write_text(message, encoding="utf-8")
    stored = json.loads(run("memory", "extract", str(note), "--commit", "--json").stdout)
    assert stored["stored"] >= 1 and all(c["stored_id"] or c["duplicate_of"] for c in stored["candidates"])
    again = json.loads(run("memory", "extract", str(note), "--commit", "--json").stdout)
    assert again["stored"] == 0  # the same text twice stores nothing new
    assert "text is blank" in run("memory", "extract", "-", input="  \n", code=2).output

"""Readable memory exports through the real ledger: Markdown files (export, import into a fresh
project, per-file errors, conflict modes, re-export as a mirror) and git notes (seed 003), by the
service and by the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from query_server.cli import main
from query_server.service import ToolError
from resources.schemas.memory import (
    ExportMemoryInput,
    ImportMemoryInput,
    MemoryAddInput,
    MemoryDeleteInput,
    MemoryUpdateInput,
)

MEMORIES: list[dict[str, Any]] = [
    {"memory_type": "requirements", "content": "Search answers within 500 ms.\n\n---\nnot: front matter\n---\n",
     "metadata": {"requirement_id": "REQ-MEM-FN-001", "title": "Search latency", "priority": "High", "status": "Approved"}},
    {"memory_type": "design", "content": "Sessions are JWTs signed with a rotating key.",
     "metadata": {"design_type": "ADR", "title": "ADR-7: tokens", "status": "Accepted", "rationale": "yes\nno\n  null",
                  "related_requirements": ["REQ-MEM-FN-001"], "tags": ["auth", "api"]}},
    {"memory_type": "code_pattern", "content": "  Repositories wrap the session.  ",
     "metadata": {"pattern_name": "Repository", "pattern_type": "Template", "language": "python",
                  "code_template": "class {Name}Repository:\n    def get(self, id): ...\n", "usage_context": "1e3: data access"}},
    {"memory_type": "component", "content": "The query server: MCP, HTTP and the CLI.",
     "metadata": {"component_id": "query-server", "component_type": "Service", "name": "query server",
                  "file_path": "query_server/", "public_interface": {"tools": ["code_search", "memory_add"], "nested": {"a": None}}, "version": "1.0"}},
    {"memory_type": "function", "content": "Issues a signed token — für alle Nutzer 🚀",
     "metadata": {"name": "issue_token", "signature": "def issue_token(user) -> str", "file_path": "auth/session.py",
                  "start_line": 1, "end_line": 3, "language": "python"}},
    {"memory_type": "test_history", "content": "test_login failed: KeyError 'sub'",
     "metadata": {"test_name": "test_login", "test_file": "tests/test_auth.py", "status": "Failed", "design_alignment_score": 0.25}},
    {"memory_type": "session", "content": "Moved token signing to a rotating key.\r\nCRLF kept.\n"},
    {"memory_type": "user_preference", "content": "Tests use pytest fixtures",
     "metadata": {"category": "Tool", "key": "tests", "value": {"runner": "pytest", "flags": ["-q", "null"]}, "scope": "Project"}},
]


def _add_all(svc) -> dict[str, str]:  # noqa: ANN001
    ids: dict[str, str] = {}
    for spec in MEMORIES:
        ids[spec["memory_type"]] = svc.memory.memory_add(MemoryAddInput(**spec, importance_score=0.7)).memory_id
    svc.memory.memory_update(MemoryUpdateInput(memory_id=ids["design"], memory_type="design", metadata={"consequences": "Keys rotate daily."}))
    svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Reviewed ADR-7",
                                  relationships=[{"type": "RELATES_TO", "target_id": ids["design"], "properties": {"why": "review"}}]))
    return ids


def _rows(svc) -> dict[str, dict[str, Any]]:  # noqa: ANN001
    rows = {}
    for row in svc.memory.ledger.iter_memories(include_deleted=True):
        out, _ = svc.memory.ledger.relationships_of(row.id)
        rows[row.id] = {
            "memory_type": row.memory_type, "content": row.content, "metadata": row.metadata, "created_at": row.created_at,
            "updated_at": row.updated_at, "importance_score": row.importance_score, "deleted": row.deleted,
            "relationships": sorted((r.rel_type, r.target_id, r.target_kind, json.dumps(r.properties)) for r in out),
        }
    return rows


def test_markdown_export_import_into_a_fresh_project_keeps_every_memory(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    svc = service_factory(first)
    ids = _add_all(svc)
    result = svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    assert result.exported_count == len(MEMORIES) + 1 and result.removed_count == 0
    files = sorted(p.relative_to(first / "memories").as_posix() for p in (first / "memories").rglob("*.md"))
    assert f"design/adr-7-tokens-{ids['design'][:8]}.md" in files
    assert {f.split("/")[0] for f in files} == {spec["memory_type"] for spec in MEMORIES}
    design = (first / "memories" / f"design/adr-7-tokens-{ids['design'][:8]}.md").read_text(encoding="utf-8")
    assert design.startswith(f"---\nid: {ids['design']}\nmemory_type: design\n") and "version: 2\n" in design
    assert "tags:\n- auth\n- api\n" in design and design.endswith("\n---\nSessions are JWTs signed with a rotating key.\n")

    shutil.copytree(first / "memories", second / "memories")
    fresh = service_factory(second)
    imported = fresh.memory.import_memory(ImportMemoryInput(format="markdown", input_path="memories"))
    assert (imported.imported, imported.skipped, imported.errors) == (len(MEMORIES) + 1, 0, [])
    assert _rows(fresh) == _rows(svc)
    again = fresh.memory.import_memory(ImportMemoryInput(format="markdown", input_path="memories"))
    assert (again.imported, again.skipped) == (0, len(MEMORIES) + 1)  # skip is the default: idempotent


def test_markdown_reexport_mirrors_the_store(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(tmp_path)
    ids = _add_all(svc)
    svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    (tmp_path / "memories" / "README.md").write_text("# our memories\n")
    (tmp_path / "memories" / "design" / "notes.md").write_text("hand-written, no front matter\n")
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "memories").rglob("*.md")}
    same = svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    assert same.removed_count == 0
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (tmp_path / "memories").rglob("*.md")} == before  # untouched

    svc.memory.memory_delete(MemoryDeleteInput(memory_id=ids["function"], memory_type="function"))
    svc.memory.memory_update(MemoryUpdateInput(memory_id=ids["design"], memory_type="design", metadata={"title": "ADR-7 rotating keys"}))
    mirrored = svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    assert mirrored.removed_count == 2  # the deleted function's file, and the design's file under its old title
    names = {p.name for p in (tmp_path / "memories").rglob("*.md")}
    assert f"adr-7-rotating-keys-{ids['design'][:8]}.md" in names and f"adr-7-tokens-{ids['design'][:8]}.md" not in names
    assert not any(ids["function"][:8] in name for name in names)
    assert {"README.md", "notes.md"} <= names  # files that are not memory files are never removed

    with pytest.raises(ToolError, match="is a file"):
        svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories/README.md"))
    with pytest.raises(ToolError, match="within project directory"):
        svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="../outside"))


def test_markdown_import_errors_name_the_file_and_field_and_conflict_modes(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(tmp_path)
    ids = _add_all(svc)
    svc.memory.export_memory(ExportMemoryInput(format="markdown", output_path="memories"))
    inbox = tmp_path / "inbox"
    (inbox / "design").mkdir(parents=True)
    (inbox / "bad-yaml.md").write_text("---\nmemory_type: design\nmetadata:\n  title: a: b\n---\nx\n")
    (inbox / "unknown-type.md").write_text("---\nmemory_type: decision\n---\nUse OAuth2\n")
    (inbox / "bad-metadata.md").write_text("---\nmemory_type: design\nmetadata:\n  title: T\n  design_type: ADR\n  status: Maybe\n---\nx\n")
    (inbox / "no-front-matter.md").write_text("just text\n")
    (inbox / "latin1.md").write_bytes("---\nmemory_type: session\n---\ncaf\xe9\n".encode("latin-1"))
    (inbox / "new.md").write_text("---\nmemory_type: session\nmetadata:\n  outcome: shipped\n---\nHand-written session note.\n")
    design_file = next((tmp_path / "memories" / "design").glob(f"*{ids['design'][:8]}.md"))
    edited = design_file.read_text().replace("Sessions are JWTs", "Sessions are PASETO tokens")
    (inbox / "design" / design_file.name).write_text(edited)

    refused = svc.memory.import_memory(ImportMemoryInput(format="markdown", input_path="inbox", conflict_resolution="error"))
    assert refused.imported == 0 and len(refused.errors) == 6
    errors = {e["file"]: e["error"] for e in refused.errors}
    assert "line 4, column 11" in errors["inbox/bad-yaml.md"]
    assert "Unknown memory type 'decision'" in errors["inbox/unknown-type.md"]
    assert "metadata.status: must be one of Proposed, Accepted, Deprecated, Superseded (got 'Maybe')" in errors["inbox/bad-metadata.md"]
    assert "no YAML front matter" in errors["inbox/no-front-matter.md"]
    assert "not UTF-8" in errors["inbox/latin1.md"]
    assert "already exists (conflict_resolution='error')" in errors[f"inbox/design/{design_file.name}"]

    skipped = svc.memory.import_memory(ImportMemoryInput(format="markdown", input_path="inbox"))
    assert (skipped.imported, skipped.skipped, len(skipped.errors)) == (1, 1, 5)
    overwritten = svc.memory.import_memory(ImportMemoryInput(format="markdown", input_path=f"inbox/design/{design_file.name}", conflict_resolution="overwrite"))
    assert (overwritten.overwritten, overwritten.errors) == (1, [])
    assert svc.memory.ledger.get(ids["design"]).content == "Sessions are PASETO tokens signed with a rotating key."
    with pytest.raises(ToolError, match="does not exist"):
        svc.memory.import_memory(ImportMemoryInput(format="markdown", input_path="nowhere"))


# -- git notes -------------------------------------------------------------------------------------
def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with two commits and no global git identity (codemem brings its own for notes)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text(".codemem/\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "first")
    (root / "app.py").write_text("print('hi')\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "second")
    return root


def test_git_notes_export_and_import(repo: Path, tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    first_commit = _git(repo, "rev-parse", "HEAD~1")
    head = _git(repo, "rev-parse", "HEAD")
    svc = service_factory(repo)
    ids = _add_all(svc)
    svc.memory.memory_update(MemoryUpdateInput(memory_id=ids["design"], memory_type="design", metadata={"commit_sha": first_commit[:10]}))
    stray = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="Work on a lost branch", metadata={"commit": "deadbeef" * 5})).memory_id

    result = svc.memory.export_memory(ExportMemoryInput(format="git_notes"))
    assert result.output_path == "refs/notes/codemem" and result.exported_count == 3  # design + 2 sessions
    assert [e["memory_id"] for e in result.errors] == [stray] and "not in this repository" in result.errors[0]["error"]
    listed = dict(reversed(line.split()) for line in _git(repo, "notes", "--ref", "refs/notes/codemem", "list").splitlines())
    assert set(listed) == {first_commit, head}
    on_first = _git(repo, "notes", "--ref", "refs/notes/codemem", "show", first_commit)
    assert on_first.startswith("codemem memories: 1 (boundary ") and f"id: {ids['design']}" in on_first
    assert "Moved token signing" in _git(repo, "log", "-1", "--notes=codemem", "--format=%N", head)
    notes_tip = _git(repo, "rev-parse", "refs/notes/codemem")
    assert svc.memory.export_memory(ExportMemoryInput(format="git_notes")).exported_count == 3
    assert _git(repo, "rev-parse", "refs/notes/codemem") == notes_tip  # unchanged notes are not rewritten

    # The design memory moves to HEAD: it leaves the first commit's note (one note per memory).
    svc.memory.memory_update(MemoryUpdateInput(memory_id=ids["design"], memory_type="design", metadata={"commit_sha": head}))
    svc.memory.memory_delete(MemoryDeleteInput(memory_id=ids["session"], memory_type="session"))
    moved = svc.memory.export_memory(ExportMemoryInput(format="git_notes", memory_types=["design"]))
    assert moved.exported_count == 1 and moved.removed_count == 1  # and the deleted session left HEAD's note
    assert _git(repo, "notes", "--ref", "refs/notes/codemem", "list").count("\n") == 0  # only HEAD has a note now

    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    _git(clone, "fetch", "-q", "origin", "refs/notes/codemem:refs/notes/codemem")
    fresh = service_factory(clone)
    imported = fresh.memory.import_memory(ImportMemoryInput(format="git_notes"))
    assert (imported.imported, imported.errors) == (2, [])
    original = _rows(svc)
    assert _rows(fresh) == {memory_id: original[memory_id] for memory_id in _rows(fresh)}
    assert set(_rows(fresh)) == {ids["design"], next(i for i, r in original.items() if r["content"] == "Reviewed ADR-7")}
    again = fresh.memory.import_memory(ImportMemoryInput(format="git_notes"))
    assert (again.imported, again.skipped) == (0, 2)  # idempotent by memory id

    with pytest.raises(ToolError, match="git notes hold session and design memories, not component"):
        svc.memory.export_memory(ExportMemoryInput(format="git_notes", memory_types=["component"]))
    with pytest.raises(ValueError, match="git_notes writes notes to notes_ref"):
        ExportMemoryInput(format="git_notes", output_path="x")
    with pytest.raises(ValueError, match="format markdown needs input_path"):
        ImportMemoryInput(format="markdown")
    (tmp_path / "not-a-repo").mkdir()
    empty = service_factory(tmp_path / "not-a-repo")
    with pytest.raises(ToolError, match="not in a git repository"):
        empty.memory.import_memory(ImportMemoryInput(format="git_notes"))


def test_git_notes_import_reports_a_foreign_note(repo: Path, service_factory) -> None:  # noqa: ANN001
    _git(repo, "notes", "--ref", "refs/notes/codemem", "add", "-m", "someone else's note", "HEAD")
    svc = service_factory(repo)
    result = svc.memory.import_memory(ImportMemoryInput(format="git_notes"))
    assert result.imported == 0 and result.errors[0]["note"] == _git(repo, "rev-parse", "HEAD")
    assert "not a codemem note" in result.errors[0]["error"]
    svc.memory.memory_add(MemoryAddInput(memory_type="session", content="A session"))
    refused = svc.memory.export_memory(ExportMemoryInput(format="git_notes"))
    assert refused.exported_count == 0 and "cannot read" in refused.errors[0]["error"]
    assert _git(repo, "notes", "--ref", "refs/notes/codemem", "show", "HEAD") == "someone else's note"  # left as it was


def test_cli_markdown_and_git_notes(repo: Path) -> None:
    runner = CliRunner()

    def run(*args: str, code: int = 0):  # noqa: ANN202
        result = runner.invoke(main, [*args, "--project", str(repo)])
        assert result.exit_code == code, (args, result.output)
        assert "Traceback" not in result.output
        return result

    run("memory", "add", "design", "Use JWTs", "--meta", "title=ADR-7", "--meta", "design_type=ADR", "--meta", "status=Accepted")
    assert "exported 1 memories to" in run("export", "--markdown", "mem").output
    assert len(list((repo / "mem" / "design").glob("adr-7-*.md"))) == 1
    assert json.loads(run("import", "--markdown", "mem", "--json").stdout)["skipped"] == 1
    (repo / "mem" / "design" / "broken.md").write_text("---\nmemory_type: design\n---\nx\n")
    refused = run("import", "--markdown", "mem", "--on-conflict", "error", code=2)
    flat = " ".join(refused.output.split())  # rich wraps long lines
    assert "mem/design/broken.md: invalid design metadata — metadata.design_type: required for design memories" in flat
    assert "exported 1 memories to refs/notes/codemem" in run("export", "--git-notes").output
    assert json.loads(run("import", "--git-notes", "--json").stdout)["skipped"] == 1
    assert "not several" in run("export", "--markdown", "mem", "--git-notes", code=2).output
    assert "pass PATH" in run("import", code=2).output

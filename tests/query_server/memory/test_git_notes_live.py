"""Git notes as a live memory store, through the service, the CLI and git itself (seed 003 US-001,
US-007, US-009, US-017, FR-004..FR-008, FR-018, FR-021, NFR-005/006): two clones of a bare remote,
real ledgers, the real local model, `codemem init --git-notes` and its post-commit hook."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from query_server.claude_setup import find_launcher, git_hooks
from query_server.cli import main
from query_server.service import ToolError
from resources.memory.markdown import parse_note
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryGetInput,
    MemorySearchInput,
    MemoryUpdateInput,
)
from resources.schemas.memory.notes import (
    NotesCaptureInput,
    NotesSyncInput,
    RecordReviewInput,
    ReviewFindingsInput,
)
from resources.schemas.tools import IndexInput
from tests.git_clones import commit_file, git, isolate_git, remote_and_clones
from tests.reliability.children import child_env
from tests.reliability.graph_servers import stop_graph_servers

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _no_user_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote and two clones, both with live git notes turned on as `codemem init --git-notes` does."""
    bare, (a, b) = remote_and_clones(tmp_path, "a", "b")
    for clone in (a, b):
        git_hooks.apply(git_hooks.plan_git_notes(clone, find_launcher()))
    return bare, a, b


def _decision(content: str, **metadata: object) -> MemoryAddInput:
    return MemoryAddInput(memory_type="design", content=content, metadata={
        "design_type": "ADR", "title": content[:40], "status": "Accepted", **metadata})


def _note(root: Path, namespace: str, commit: str) -> list[dict]:
    done = subprocess.run(["git", "-C", str(root), "notes", "--ref", f"cs/{namespace}", "show", commit], capture_output=True, text=True)
    return parse_note(done.stdout) if done.returncode == 0 else []


def _found(svc, query: str) -> list[str]:  # noqa: ANN001
    return [hit.content for hit in svc.memory.memory_search(MemorySearchInput(query=query, limit=5)).results]


def test_us001_a_memory_tied_to_a_commit_is_a_note_at_once(clones: tuple[Path, Path, Path], tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """US-001/FR-006: a decision stored with the commit it belongs to is in refs/notes/cs/decisions right
    away; a blocker (metadata.namespace) in cs/blockers. Bad input: an unknown namespace, a namespace of
    another memory type, a commit this clone lacks, notes turned off, no git repository."""
    _, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    svc = service_factory(a)
    added = svc.memory.memory_add(_decision("Tokens are JWTs signed with a rotating key", commit_sha=head))
    assert [r["id"] for r in _note(a, "decisions", head)] == [added.memory_id]
    blocker = svc.memory.memory_add(MemoryAddInput(memory_type="session", content="CI has no Docker", metadata={"namespace": "blockers", "commit": head}))
    assert [r["id"] for r in _note(a, "blockers", head)] == [blocker.memory_id]
    assert "Tokens are JWTs" in git(a, "log", "-1", "--format=%N")  # notes.displayRef: git log shows them

    with pytest.raises(ToolError, match="unknown namespace 'ideas'"):
        svc.memory.memory_add(_decision("x", namespace="ideas", commit_sha=head))
    with pytest.raises(ToolError, match="namespace blockers holds session memories, not design — use one of inception, research, decisions"):
        svc.memory.memory_add(_decision("x", namespace="blockers", commit_sha=head))
    stray = svc.memory.memory_add(_decision("Decided on a branch never pushed", commit_sha="deadbeef" * 5))
    result = svc.memory.notes_sync(NotesSyncInput())
    assert [e["memory_id"] for e in result.errors] == [stray.memory_id] and "not in this clone — `git fetch` it" in result.errors[0]["error"]
    assert result.namespaces == {"decisions": 2, "blockers": 1}
    with pytest.raises(ToolError, match="not in this repository"):
        svc.memory.notes_capture(NotesCaptureInput(commit="no-such-branch"))

    git(b, "config", "codemem.notes", "false")
    off = service_factory(b)
    off.memory.memory_add(_decision("Not shared", commit_sha=head))
    assert _note(b, "decisions", head) == []
    with pytest.raises(ToolError, match="git notes are off in this repository — `codemem init --git-notes` turns them on"):
        off.memory.notes_sync(NotesSyncInput())
    (tmp_path / "plain").mkdir()
    with pytest.raises(ToolError, match="not in a git repository"):
        service_factory(tmp_path / "plain").memory.notes_sync(NotesSyncInput())


def test_fr008_memories_fetched_from_another_clone_are_searchable_after_the_next_index(clones: tuple[Path, Path, Path], service_factory) -> None:  # noqa: ANN001
    """FR-008/FR-011/NFR-005: plain `git push` and `git fetch` carry the notes (the refspecs init set);
    both clones wrote a note on the same commit meanwhile (a conflicting concurrent edit); the next
    `codemem index` merges them — no note lost — and the fetched memories come up in memory_search."""
    bare, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    svc_a, svc_b = service_factory(a), service_factory(b)
    mine = svc_a.memory.memory_add(_decision("The graph store is FalkorDB embedded in a child process", commit_sha=head))
    theirs = svc_b.memory.memory_add(_decision("Search latency budget is 500 ms per query", commit_sha=head))
    git(a, "push", "-q")
    assert git(bare, "rev-parse", "refs/notes/cs/decisions") == git(a, "rev-parse", "refs/notes/cs/decisions")
    git(b, "fetch", "-q")
    assert "FalkorDB" not in " ".join(_found(svc_b, "which graph database do we use"))

    report = svc_b.index(IndexInput(embed=False))
    assert any("git notes: 1 memories imported" in note for note in report["notes"]), report["notes"]
    assert any("FalkorDB" in content for content in _found(svc_b, "which graph database do we use"))
    assert sorted(r["id"] for r in _note(b, "decisions", head)) == sorted([mine.memory_id, theirs.memory_id])
    git(b, "push", "-q")  # the merge commit has both tips as parents: a fast-forward for the remote

    git(a, "fetch", "-q")
    synced = svc_a.memory.notes_sync(NotesSyncInput())
    assert (synced.imported, synced.merged_refs) == (1, ["refs/notes/cs/decisions"])
    assert any("500 ms" in content for content in _found(svc_a, "search latency budget"))
    again = svc_a.memory.notes_sync(NotesSyncInput(rebuild=True))
    assert (again.imported, again.updated, again.notes_written) == (0, 0, 0)  # US-009: a rebuild is idempotent


def test_nfr006_a_process_killed_before_its_note_loses_nothing(clones: tuple[Path, Path, Path], tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """NFR-006: a process SIGKILLed after the ledger committed a memory and before its note was written;
    and git failing under a write (a locked notes ref): the ledger keeps the memory, the next sync
    (here the next index run) writes the note."""
    _, a, _ = clones
    head = git(a, "rev-parse", "HEAD")
    script = textwrap.dedent(f"""
        from query_server.service import CodeMemService
        from resources.schemas.memory import MemoryAddInput
        from resources.settings import Settings
        svc = CodeMemService(Settings(project_root={str(a)!r}))
        svc.memory.memory_add(MemoryAddInput(memory_type="design", content="Decided just before the crash",
            metadata={{"design_type": "ADR", "title": "crash", "status": "Accepted", "commit_sha": {head!r}}}))
        print("NOT KILLED")
    """)
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300,
                              env=child_env("git_notes:before_write"))
    finally:
        stop_graph_servers(tmp_path)
    assert done.returncode == -9 and "NOT KILLED" not in done.stdout, done.stderr[-2000:]
    assert _note(a, "decisions", head) == []
    svc = service_factory(a)
    [row] = list(svc.memory.ledger.iter_memories(memory_types=["design"]))
    assert row.content == "Decided just before the crash"

    lock = a / ".git" / "refs" / "notes" / "cs" / "decisions.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    later = svc.memory.memory_add(_decision("Decided while the ref was locked", commit_sha=head))  # the write stands
    assert svc.memory.memory_get(MemoryGetInput(memory_id=later.memory_id, memory_type="design")).content.endswith("locked")
    assert _note(a, "decisions", head) == []
    lock.unlink()
    svc.index(IndexInput(embed=False))
    assert sorted(r["id"] for r in _note(a, "decisions", head)) == sorted([row.id, later.memory_id])


def test_us007_level3_hydration_returns_the_files_as_they_were_at_the_commit(clones: tuple[Path, Path, Path], service_factory) -> None:  # noqa: ANN001
    """US-007: summary (level 1), the whole memory (level 2), and with include_files the files it
    concerns as `git show <sha>:<path>` gives them (level 3), cut to the response budget."""
    _, a, _ = clones
    first = git(a, "rev-parse", "HEAD")
    big = commit_file(a, "data/big.py", "x = 1  # filler\n" * 20_000, "a large file")
    commit_file(a, "app.py", "def handler():\n    return 2\n", "changed later")
    svc = service_factory(a)
    named = svc.memory.memory_add(_decision("Handlers return plain ints", commit_sha=first, files=["app.py", "gone.py"]))
    record = svc.memory.memory_get(MemoryGetInput(memory_id=named.memory_id, memory_type="design", include_files=True))
    assert [(f.path, f.content, f.error) for f in record.files] == [
        ("app.py", "def handler():\n    return 1\n", None),
        ("gone.py", None, f"not in commit {first[:12]} (added later, renamed or removed)"),
    ]
    assert svc.memory.memory_get(MemoryGetInput(memory_id=named.memory_id, memory_type="design")).files is None

    by_commit = svc.memory.memory_add(_decision("Big data lives in data/", commit_sha=big))  # no files named: the commit's
    record = svc.memory.memory_get(MemoryGetInput(memory_id=by_commit.memory_id, memory_type="design", include_files=True))
    [shown] = record.files
    assert shown.path == "data/big.py" and shown.truncated and f"git show {big[:12]}:data/big.py" in shown.content
    assert len(record.model_dump_json()) // 3 < 50_000

    loose = svc.memory.memory_add(_decision("Not tied to any commit"))
    with pytest.raises(ToolError, match="is not tied to a commit — level-3 hydration"):
        svc.memory.memory_get(MemoryGetInput(memory_id=loose.memory_id, memory_type="design", include_files=True))


def test_us017_review_findings_on_the_reviewed_commit_and_their_resolution(clones: tuple[Path, Path, Path], service_factory) -> None:  # noqa: ANN001
    """US-017/FR-018: each finding of a review is a memory in the reviews namespace attached to the
    reviewed commit (one note per commit holds them all); US-018/FR-021: a fix marks one resolved and
    the note says so; the findings are read back most severe first."""
    _, a, _ = clones
    reviewed = git(a, "rev-parse", "HEAD")
    commit_file(a, "app.py", "def handler():\n    return 3\n", "after the review")
    svc = service_factory(a)
    request = RecordReviewInput(commit=reviewed[:8], request_id="review-1", findings=[
        {"severity": "Medium", "category": "tests", "summary": "handler has no test", "file": "app.py", "line": 1},
        {"severity": "critical", "category": "security", "summary": "SQL built by string concatenation",
         "details": "Use bound parameters.", "file": "app.py", "line": 2},
    ])
    recorded = svc.memory.record_review(request)
    assert recorded.commit == reviewed and recorded.note_written and recorded.summary == "Code review: 2 findings (1 critical, 1 medium)"
    assert svc.memory.record_review(request).finding_ids == recorded.finding_ids  # a retry stores nothing twice
    note = _note(a, "reviews", reviewed)
    assert sorted(r["id"] for r in note) == sorted(recorded.finding_ids)
    assert {r["metadata"]["severity"] for r in note} == {"critical", "medium"}

    found = svc.memory.review_findings(ReviewFindingsInput(commit=reviewed))
    assert [(f.severity, f.summary, f.details) for f in found.results] == [
        ("critical", "SQL built by string concatenation", "Use bound parameters."), ("medium", "handler has no test", "")]
    assert svc.memory.review_findings(ReviewFindingsInput(commit="HEAD")).total == 0  # another commit: none
    svc.memory.memory_update(MemoryUpdateInput(memory_id=found.results[0].id, memory_type="session",
                                               metadata={"status": "resolved", "resolution": "parameterized in app.py"}))
    assert [f.summary for f in svc.memory.review_findings(ReviewFindingsInput()).results] == ["handler has no test"]
    [resolved] = svc.memory.review_findings(ReviewFindingsInput(status="resolved")).results
    assert resolved.resolution == "parameterized in app.py"
    assert {r["metadata"]["status"] for r in _note(a, "reviews", reviewed)} == {"resolved", "open"}

    with pytest.raises(ToolError, match="commit 'nope' is not in this repository"):
        svc.memory.record_review(RecordReviewInput(commit="nope", findings=[{"severity": "low", "category": "quality", "summary": "x"}]))
    with pytest.raises(ValueError, match="severity"):
        RecordReviewInput(findings=[{"severity": "urgent", "category": "quality", "summary": "x"}])


def test_post_commit_hook_attaches_the_sessions_decisions_to_the_new_commit(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """US-001 (attach to the commit) with NFR-007 (no manual step): after `codemem init --git-notes`,
    `git commit` runs the post-commit hook, which answers at once and, in the background, ties the
    decisions recorded since the previous commit to the new one."""
    _, (a,) = remote_and_clones(tmp_path, "a")
    runner = CliRunner()
    done = runner.invoke(main, ["init", "--git-notes", "--project", str(a)])
    assert done.exit_code == 0, done.output
    hook = a / ".git" / "hooks" / "post-commit"
    assert "GitPostCommit" in hook.read_text() and hook.stat().st_mode & 0o111
    svc = service_factory(a)
    older = svc.memory.memory_add(_decision("Tied already", commit_sha=git(a, "rev-parse", "HEAD")))
    fresh = svc.memory.memory_add(_decision("Retry failed projections with exponential backoff"))
    svc.close()  # the hook's worker becomes the project's owner

    started = time.monotonic()
    new = commit_file(a, "app.py", "def handler():\n    return 4\n", "backoff")
    assert time.monotonic() - started < 10  # the hook does not make git wait for the capture
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not _note(a, "decisions", new):
        time.sleep(0.5)
    assert [r["id"] for r in _note(a, "decisions", new)] == [fresh.memory_id], (a / ".codemem/logs/hooks-worker.log").read_text()
    assert older.memory_id not in json.dumps(_note(a, "decisions", new))
    deadline = time.monotonic() + 60  # the worker closes its stores before the next owner opens them
    while time.monotonic() < deadline and (a / ".codemem/logs/hooks-worker.log").read_text().count("GitPostCommit") < 1:
        time.sleep(0.2)
    time.sleep(1)
    again = service_factory(a)
    row = again.memory.ledger.get(fresh.memory_id)
    assert row.metadata["commit_sha"] == new
    stop_graph_servers(tmp_path)


def test_init_git_notes_configures_git_and_undo_takes_it_back(tmp_path: Path) -> None:
    """FR-008: init --git-notes sets the switch, the refspecs (fetched notes beside the local ones, pushed
    with the branch), rewriteRef/displayRef and the hook; --dry-run shows it; --undo restores the hook
    file byte for byte and removes the config. Bad input: not a git repository, a hook that is not a
    shell script."""
    _, (a,) = remote_and_clones(tmp_path, "a")
    runner = CliRunner()
    hook = a / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    dry = runner.invoke(main, ["init", "--git-notes", "--dry-run", "--project", str(a)])
    assert dry.exit_code == 0 and "git config --add remote.origin.fetch '+refs/notes/cs/*:refs/notes/remotes/origin/cs/*'" in dry.output
    assert git(a, "config", "--get-all", "remote.origin.fetch") == "+refs/heads/*:refs/remotes/origin/*"
    done = runner.invoke(main, ["init", "--git-notes", "--project", str(a)])
    assert done.exit_code == 0, done.output
    assert git(a, "config", "--bool", "codemem.notes") == "true"
    assert git(a, "config", "--get-all", "remote.origin.push").splitlines() == ["HEAD", "refs/notes/cs/*:refs/notes/cs/*"]
    assert hook.read_text().startswith("#!/bin/sh\necho mine\n# codemem:begin post-commit")
    assert runner.invoke(main, ["init", "--git-notes", "--project", str(a)]).output.count("git config") == 0  # twice adds nothing
    undone = runner.invoke(main, ["init", "--undo", "--project", str(a)])
    assert undone.exit_code == 0, undone.output
    assert hook.read_text() == "#!/bin/sh\necho mine\n"
    assert subprocess.run(["git", "-C", str(a), "config", "--get-all", "remote.origin.push"], capture_output=True).returncode == 1
    left = git(a, "config", "--local", "--list")
    assert "codemem" not in left and "refs/notes" not in left, left

    launcher = find_launcher()
    command = [*launcher.hook_argv("GitPostCommit")]
    profiled = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=a, stdin=subprocess.DEVNULL,
                              env={**child_env(), "PYTHONPROFILEIMPORTTIME": "1"})
    assert profiled.returncode == 0 and profiled.stdout == ""
    imported = {line.split("|")[-1].strip() for line in profiled.stderr.splitlines() if line.startswith("import time:")}
    if launcher.python is not None:  # the fast form: no site, nothing but the standard library and the hook's readers
        foreign = {m for m in imported - {"imported package"} if m.split(".")[0] not in sys.stdlib_module_names}
        assert "site" not in imported and foreign <= {
            "query_server", "query_server.hooks", "query_server.hooks.relay", "query_server.hooks.common",
            "query_server.hooks.dispatch", "query_server.hooks.post_commit", "resources", "resources.memory", "resources.memory.ledger_reader",
            "resources.sqlite_readonly"}, foreign

    hook.write_text("#!/usr/bin/env python3\nprint('mine')\n")
    refused = runner.invoke(main, ["init", "--git-notes", "--project", str(a)])
    assert refused.exit_code == 2 and "is not a shell script — add this line to it yourself" in refused.output
    assert not (a / ".mcp.json").exists()  # refused before anything was written
    (tmp_path / "plain").mkdir()
    plain = runner.invoke(main, ["init", "--git-notes", "--project", str(tmp_path / "plain")])
    assert plain.exit_code == 2 and "is not in a git repository" in " ".join(plain.output.split())


def test_cli_notes_and_review_commands(clones: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The commands a person runs: notes sync, notes capture, review record/show/resolve, memory get --files."""
    _, a, _ = clones
    runner = CliRunner()

    def run(*args: str, code: int = 0, stdin: str | None = None):  # noqa: ANN202
        result = runner.invoke(main, [*args, "--project", str(a)], input=stdin)
        assert result.exit_code == code, (args, result.output)
        assert "Traceback" not in result.output
        return " ".join(result.output.split())

    head = git(a, "rev-parse", "HEAD")
    assert "memories imported │ 0" in run("notes", "sync")
    assert "unknown field" in run("review", "record", "-", stdin='[{"severity": "high", "category": "security", "summry": "x"}]', code=2)
    recorded = run("review", "record", "-", stdin='{"findings": [{"severity": "high", "category": "security", "summary": "Secrets in logs", "file": "app.py", "line": 2}]}')
    assert f"Code review: 1 finding (1 high) — stored on {head[:12]} (refs/notes/cs/reviews)" in recorded
    shown = json.loads(runner.invoke(main, ["review", "show", "HEAD", "--json", "--project", str(a)]).output)
    [finding] = shown["results"]
    assert "Secrets" in run("review", "show") and "high" in run("review", "show")
    assert "resolved" in run("review", "resolve", finding["id"], "masked in the logger")
    assert "no open review findings" in run("review", "show")
    rebuilt = run("notes", "sync", "--rebuild")  # US-009 from the command line: the index rebuilt from every refs/notes/cs/*
    assert "namespace reviews │ 1" in rebuilt and "memories imported │ 0" in rebuilt  # the finding read back, nothing doubled
    got = json.loads(runner.invoke(main, ["memory", "get", finding["id"], "--type", "session", "--files", "--json", "--project", str(a)]).output)
    assert got["files"][0]["content"] == "def handler():\n    return 1\n"
    assert "0 decision(s) attached" in run("notes", "capture")
    assert "is not in this repository" in run("notes", "capture", "no-such-commit", code=2)
    git(a, "config", "codemem.notes", "false")
    assert "git notes are off in this repository" in run("notes", "sync", code=2)


def test_review_tools_over_http(clones: tuple[Path, Path, Path]) -> None:
    """record_review and review_findings are registry tools: the HTTP route (like the MCP tool) takes the
    same JSON; bad input is a 4xx with what to do, never a 500."""
    from fastapi.testclient import TestClient

    from query_server.http_api import build_http_app
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    _, a, _ = clones
    handle = ProjectHandle(Settings(project_root=a))
    try:
        with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as client:
            bad = client.post("/tools/record_review", json={"findings": [{"severity": "urgent", "category": "tests", "summary": "x"}]})
            assert bad.status_code == 422 and "severity" in bad.json()["error"]
            missing = client.post("/tools/record_review", json={"commit": "nope", "findings": [{"severity": "low", "category": "tests", "summary": "x"}]})
            assert missing.status_code == 400 and "is not in this repository" in missing.json()["error"]
            good = client.post("/tools/record_review", json={"findings": [{"severity": "high", "category": "performance", "summary": "N+1 query in the loop"}]})
            assert good.status_code == 200 and good.json()["note_written"], good.text
            read = client.post("/tools/review_findings", json={"commit": "HEAD"})
            assert [f["summary"] for f in read.json()["results"]] == ["N+1 query in the loop"]
    finally:
        handle.close()

"""Git notes as a live store at the ledger's level (seed 003 FR-004..FR-008, FR-023, NFR-004..NFR-006):
real ledgers, real git repositories and a bare remote, no service."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from resources.faults import FaultInjected, raising_at
from resources.memory.git_repo import GitNotesError, GitRepo
from resources.memory.ledger import Ledger, NewMemory
from resources.memory.markdown import parse_note, render_note
from resources.memory.notes_merge import merge_texts
from resources.memory.notes_sync import META_SEQ, NotesSync, SyncReport
from tests.git_clones import commit_file, git, isolate_git, remote_and_clones

FETCH = "+refs/notes/cs/*:refs/notes/remotes/origin/cs/*"
PUSH = "refs/notes/cs/*:refs/notes/cs/*"


@pytest.fixture(autouse=True)
def _no_user_git_config(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch)


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote and two clones whose notes travel with fetch and push (the refspecs init sets)."""
    bare, (a, b) = remote_and_clones(tmp_path, "a", "b")
    for clone in (a, b):
        git(clone, "config", "--add", "remote.origin.fetch", FETCH)
        git(clone, "config", "--add", "remote.origin.push", PUSH)
    return bare, a, b


def _ledger(root: Path) -> Ledger:
    (root / ".codemem").mkdir(exist_ok=True)
    return Ledger(root / ".codemem" / "memory.db")


def _decision(content: str, commit: str, **metadata: object) -> NewMemory:
    return NewMemory(memory_type="design", content=content, metadata={
        "design_type": "ADR", "title": content[:30], "status": "Accepted", "commit_sha": commit, **metadata})


def _sync(ledger: Ledger, root: Path, *, rebuild: bool = False) -> SyncReport:
    return NotesSync(ledger, GitRepo(root)).run(rebuild=rebuild)


def _note_ids(root: Path, ref: str, commit: str) -> list[str]:
    return [r["id"] for r in parse_note(git(root, "notes", "--ref", ref, "show", commit) + "\n")]


def test_fr006_a_memory_tied_to_a_commit_becomes_a_note_in_its_namespace(clones: tuple[Path, Path, Path]) -> None:
    """FR-004/FR-005/FR-006: namespaces are refs/notes/cs/<namespace>; a decision goes to cs/decisions, a
    blocker (a session memory whose metadata names the namespace) to cs/blockers; C-005: readable by git."""
    _, a, _ = clones
    head = git(a, "rev-parse", "HEAD")
    ledger = _ledger(a)
    [decision, blocker, loose] = ledger.add([
        _decision("Sessions are JWTs", head[:10]),
        NewMemory(memory_type="session", content="CI runners lack Docker", metadata={"namespace": "blockers", "commit": "HEAD"}),
        NewMemory(memory_type="design", content="No commit named", metadata={"design_type": "ADR", "title": "x", "status": "Accepted"}),
    ])
    report = _sync(ledger, a)
    assert report.notes_written == 2 and report.errors == []
    assert _note_ids(a, "refs/notes/cs/decisions", head) == [decision.id]
    assert _note_ids(a, "refs/notes/cs/blockers", head) == [blocker.id]
    assert "Sessions are JWTs" in git(a, "notes", "--ref", "cs/decisions", "show", head)
    assert loose.id not in git(a, "notes", "--ref", "cs/decisions", "show", head)
    assert _sync(ledger, a).notes_written == 0  # nothing changed: nothing rewritten
    ledger.close()


def test_nfr005_notes_of_two_clones_merge_and_travel_through_a_bare_remote(clones: tuple[Path, Path, Path]) -> None:
    """NFR-005, FR-008: both clones write notes on the same commit before either fetched (a conflicting
    concurrent edit of refs/notes/cs/decisions); after push/fetch and a sync each holds both memories, no
    note lost, and the merged ref pushes as a fast-forward."""
    bare, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    ledger_a, ledger_b = _ledger(a), _ledger(b)
    [mem_a] = ledger_a.add([_decision("Use PostgreSQL for the ledger in server mode", head)])
    [mem_b] = ledger_b.add([_decision("Use FalkorDB embedded for the graph", head)])
    _sync(ledger_a, a)
    _sync(ledger_b, b)
    git(a, "push", "-q", "origin")
    rejected = subprocess.run(["git", "-C", str(b), "push", "-q", "origin", PUSH], capture_output=True, text=True)
    assert rejected.returncode != 0  # the remote moved: b must fetch and merge first

    git(b, "fetch", "-q", "origin")
    assert git(b, "rev-parse", "refs/notes/remotes/origin/cs/decisions") == git(a, "rev-parse", "refs/notes/cs/decisions")
    report = _sync(ledger_b, b)
    assert report.merged_refs == ["refs/notes/cs/decisions"] and report.imported == [mem_a.id]
    assert sorted(_note_ids(b, "refs/notes/cs/decisions", head)) == sorted([mem_a.id, mem_b.id])
    assert ledger_b.get(mem_a.id).content == mem_a.content and ledger_b.get(mem_a.id).version == mem_a.version
    git(b, "push", "-q", "origin", PUSH)  # a fast-forward now

    git(a, "fetch", "-q", "origin")
    assert _sync(ledger_a, a).imported == [mem_b.id]
    assert sorted(_note_ids(a, "refs/notes/cs/decisions", head)) == sorted([mem_a.id, mem_b.id])
    assert git(bare, "rev-parse", "refs/notes/cs/decisions") == git(a, "rev-parse", "refs/notes/cs/decisions")

    # an edit in one clone wins over the older version in the other, both ways
    ledger_b.update(mem_a.id, content="Use PostgreSQL for the ledger and the jobs in server mode")
    _sync(ledger_b, b)
    git(b, "push", "-q", "origin", PUSH)
    git(a, "fetch", "-q", "origin")
    assert _sync(ledger_a, a).updated == [mem_a.id]
    assert ledger_a.get(mem_a.id).content.endswith("the jobs in server mode")
    assert [e["operation"] for e in ledger_a.audit_of(mem_a.id)] == ["create", "notes_import"]  # the old text is in the audit
    ledger_a.close()
    ledger_b.close()


class RacingRepo(GitRepo):
    """A repository where another writer (a real ``git notes`` process) changes the notes ref right
    after codemem staged its write and before it moves the ref — once."""

    raced = False

    def stage_notes(self, base: str | None, changes: dict) -> str | None:  # type: ignore[override]
        staged = super().stage_notes(base, changes)
        if not RacingRepo.raced and base is not None:
            RacingRepo.raced = True
            git(self.root, "notes", "--ref", "cs/decisions", "add", "-f", "-m", "written by hand", "HEAD~1")
        return staged


def test_fr023_a_concurrent_edit_of_the_notes_ref_is_merged_not_overwritten(clones: tuple[Path, Path, Path]) -> None:
    """FR-022/FR-023: git notes add would replace the ref without looking; codemem's compare-and-swap
    sees the other writer, re-reads and writes again — both notes stay."""
    _, a, _ = clones
    first = git(a, "rev-parse", "HEAD")
    second = commit_file(a, "app.py", "def handler():\n    return 2\n", "second")
    ledger = _ledger(a)
    ledger.add([_decision("First decision", second)])
    NotesSync(ledger, GitRepo(a)).export(SyncReport())
    ledger.add([_decision("Second decision", second)])
    RacingRepo.raced = False
    report = SyncReport()
    NotesSync(ledger, RacingRepo(a)).export(report)
    assert RacingRepo.raced and report.notes_written == 1
    assert git(a, "notes", "--ref", "cs/decisions", "show", first) == "written by hand"
    assert len(_note_ids(a, "refs/notes/cs/decisions", second)) == 2
    ledger.close()


def test_nfr006_a_failed_or_killed_notes_write_loses_nothing(clones: tuple[Path, Path, Path]) -> None:
    """NFR-006: killed between the ledger write and the note (a fault point), or with git failing (a
    locked ref), the ledger keeps the memory and the watermark stays; the next export writes the note."""
    _, a, _ = clones
    head = git(a, "rev-parse", "HEAD")
    ledger = _ledger(a)
    [memory] = ledger.add([_decision("Written before the crash", head)])
    with raising_at("git_notes:before_write"), pytest.raises(FaultInjected):
        _sync(ledger, a)
    assert ledger.get(memory.id) is not None and ledger.meta(META_SEQ) in (None, "0")
    assert subprocess.run(["git", "-C", str(a), "notes", "--ref", "cs/decisions", "show", head], capture_output=True).returncode != 0

    lock = a / ".git" / "refs" / "notes" / "cs" / "decisions.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    with pytest.raises(GitNotesError, match="cannot lock ref"):  # git cannot move the ref: nothing written, nothing lost
        _sync(ledger, a)
    lock.unlink()
    gone = subprocess.Popen(["true"])  # only its pid matters: a writer that died mid-write
    gone.wait()
    git(a, "update-ref", f"refs/notes/codemem-tmp/{gone.pid}-0123456789ab", head)
    assert _sync(ledger, a).notes_written == 1
    assert git(a, "for-each-ref", "refs/notes/codemem-tmp/") == ""  # its temporary ref is cleaned up
    assert _note_ids(a, "refs/notes/cs/decisions", head) == [memory.id]
    ledger.close()


def test_nfr004_rebuild_from_notes_is_idempotent_and_keeps_ledger_only_memories(clones: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """US-009/NFR-004: a new ledger rebuilt from every refs/notes/cs/* namespace holds what the notes
    hold; a second rebuild changes nothing; memories only the ledger has are kept (and written out)."""
    _, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    ledger_a = _ledger(a)
    written = ledger_a.add([
        _decision("One", head), _decision("Two", head),
        NewMemory(memory_type="session", content="Finished the parser", metadata={"commit_sha": head}),
    ])
    _sync(ledger_a, a)
    git(a, "push", "-q", "origin")
    git(b, "fetch", "-q", "origin")
    ledger_b = _ledger(b)
    [own] = ledger_b.add([_decision("Only in b", head)])
    first = _sync(ledger_b, b, rebuild=True)
    assert sorted(first.imported) == sorted(m.id for m in written) and first.errors == []
    again = _sync(ledger_b, b, rebuild=True)
    assert (again.imported, again.updated, again.notes_written) == ([], [], 0)
    assert ledger_b.get(own.id) is not None and own.id in _note_ids(b, "refs/notes/cs/decisions", head)
    assert set(_note_ids(b, "refs/notes/cs/progress", head)) == {written[2].id}
    ledger_a.close()
    ledger_b.close()


def test_a_deleted_memory_stays_deleted_in_every_clone(clones: tuple[Path, Path, Path]) -> None:
    """A soft delete travels as a tombstone; a hard delete leaves one without the content; a merge with
    an older note never brings either back."""
    _, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    ledger_a, ledger_b = _ledger(a), _ledger(b)
    [soft, hard] = ledger_a.add([_decision("Soft-deleted later", head), _decision("Secret, hard-deleted later", head)])
    _sync(ledger_a, a)
    git(a, "push", "-q", "origin")
    git(b, "fetch", "-q", "origin")
    assert len(_sync(ledger_b, b).imported) == 2
    ledger_a.soft_delete(soft.id)
    ledger_a.hard_delete([hard.id])
    _sync(ledger_a, a)
    note = git(a, "notes", "--ref", "cs/decisions", "show", head)
    assert "Secret" not in note and note.count("deleted: true") == 2
    git(a, "push", "-q", "origin")
    git(b, "fetch", "-q", "origin")
    report = _sync(ledger_b, b)
    assert sorted(report.updated) == sorted([soft.id, hard.id])
    assert ledger_b.get(soft.id).deleted and ledger_b.get(hard.id).deleted
    _sync(ledger_a, a)  # a's older view of nothing: the hard-deleted memory is not revived
    assert ledger_a.get(hard.id) is None
    ledger_a.close()
    ledger_b.close()


def test_bad_input_is_reported_and_left_alone(clones: tuple[Path, Path, Path]) -> None:
    """Bad input: an unknown namespace ref, a note codemem did not write, a commit this clone lacks, a
    link to a deleted memory — each named with what to do; nothing is lost or overwritten."""
    _, a, b = clones
    head = git(a, "rev-parse", "HEAD")
    git(a, "notes", "--ref", "cs/ideas", "add", "-m", "not a namespace", head)
    git(a, "notes", "--ref", "cs/learnings", "add", "-m", "a learning written by hand", head)
    ledger = _ledger(a)
    [gone] = ledger.add([_decision("Deleted target", head)])
    ledger.soft_delete(gone.id)
    missing = "deadbeef" * 5
    [stray] = ledger.add([_decision("On a commit elsewhere", missing)])
    report = _sync(ledger, a)
    errors = {e.get("memory_id") or e.get("note"): e["error"] for e in report.errors}
    assert "unknown namespace 'ideas'" in errors["refs/notes/cs/ideas"]
    assert "not a codemem note" in errors[f"refs/notes/cs/learnings:{head[:12]}"]
    assert "not in this clone" in errors[stray.id] and "git fetch" in errors[stray.id]
    assert git(a, "notes", "--ref", "cs/learnings", "show", head) == "a learning written by hand"
    assert json.loads(ledger.meta("git_notes_retry")) == [stray.id]  # tried again at every sync

    ledger_b = _ledger(b)
    head_b = git(b, "rev-parse", "HEAD")
    [target] = ledger_b.add([_decision("Target", head_b)])
    ledger_b.soft_delete(target.id)
    note = render_note([{"id": "5f0c0000-0000-4000-8000-000000000001", "memory_type": "design", "content": "Links to it",
                         "metadata": {"design_type": "ADR", "title": "t", "status": "Accepted"}, "version": 1,
                         "relationships": [{"type": "RELATES_TO", "target_id": target.id, "target_kind": "memory:design"}]}])
    git(b, "notes", "--ref", "cs/decisions", "add", "-f", "-m", note, head_b)
    linked = _sync(ledger_b, b)
    assert linked.imported == ["5f0c0000-0000-4000-8000-000000000001"]
    assert any("which is deleted here" in e["error"] for e in linked.errors)
    ledger.close()
    ledger_b.close()


def test_merge_texts_keeps_both_sides() -> None:
    """A union per memory id, the newest version winning; a note that is not codemem's is kept whole."""
    a = render_note([{"id": "1", "memory_type": "design", "content": "old", "version": 1, "metadata": {}}])
    b = render_note([{"id": "1", "memory_type": "design", "content": "new", "version": 2, "metadata": {}},
                     {"id": "2", "memory_type": "design", "content": "other", "version": 1, "metadata": {}}])
    merged = parse_note(merge_texts(a, b))
    assert [(r["id"], r["content"]) for r in merged] == [("1", "new"), ("2", "other")]
    assert merge_texts("hand note", "other hand note") == "hand note\n\nother hand note"
    assert merge_texts("hand note", "hand note\nmore") == "hand note\nmore"

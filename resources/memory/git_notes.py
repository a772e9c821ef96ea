"""Memories as git notes in one dedicated notes ref (seed 003), through the ``git`` command line.

``export_notes`` attaches each memory to the commit its metadata names (``commit_sha``, ``commit`` or
``git_commit``) or else to HEAD; the memories of one commit share its note
(``resources.memory.markdown.render_note``). A memory lives on one commit only: exported again after
it moved, it leaves its old note. ``import_notes`` reads every note of the ref back.

Notes are written from a blob (``git notes add -C``), which git stores verbatim; ``-m``/``-F``
would strip trailing whitespace and blank lines from the memories' content.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resources.memory.git_repo import GitNotesError, GitRepo
from resources.memory.markdown import MarkdownMemoryError, parse_note, render_note
from resources.schemas.memory.notes import COMMIT_KEYS, named_commit

__all__ = ["COMMIT_KEYS", "NOTE_TYPES", "GitNotes", "GitNotesError", "NotesExport", "export_notes", "full_notes_ref",
           "import_notes", "named_commit"]

NOTE_TYPES = ("session", "design")
"""The memory types that git notes hold: what was done and decided, attached to the code it concerns."""


def full_notes_ref(ref: str) -> str:
    """The full name of a notes ref, as ``git notes --ref`` reads it: ``codemem`` and ``notes/codemem``
    are ``refs/notes/codemem``."""
    ref = ref.strip()
    if ref.startswith("refs/notes/"):
        return ref
    if ref.startswith("notes/"):
        return f"refs/{ref}"
    return f"refs/notes/{ref}"


class GitNotes:
    """The notes of one notes ref in the git repository that holds ``root``."""

    def __init__(self, root: Path, ref: str) -> None:
        """Check that ``root`` is inside a git work tree and that ``ref`` is a valid ref name.

        Raises:
            GitNotesError: Naming what is wrong and what to do.
        """
        self.root = root
        self.ref = full_notes_ref(ref)
        self.repo = GitRepo(root)
        if self.repo.git("check-ref-format", self.ref, check=False).returncode != 0:
            raise GitNotesError(f"{ref!r} is not a valid notes ref name — use e.g. refs/notes/codemem")

    def resolve(self, rev: str) -> str | None:
        """The full SHA of the commit ``rev`` names (a SHA, a short SHA, a tag...), or None when the
        repository has no such commit."""
        return self.repo.resolve(rev)

    def head(self) -> str:
        """The SHA of HEAD.

        Raises:
            GitNotesError: The repository has no commit yet.
        """
        sha = self.resolve("HEAD")
        if sha is None:
            raise GitNotesError("the repository has no commit yet — commit once, then export to git notes")
        return sha

    def read_all(self) -> dict[str, str]:
        """Every note of the ref: commit SHA -> note text (empty when the ref does not exist yet)."""
        return self.repo.notes_at(self.repo.tip(self.ref))

    def write(self, commit: str, text: str) -> None:
        """Replace the note of ``commit`` with ``text``, byte for byte."""
        blob = self.repo.git("hash-object", "-w", "--stdin", data=text.encode("utf-8")).stdout.decode().strip()
        self.repo.git("notes", "--ref", self.ref, "add", "-f", "-C", blob, commit, identity=True)

    def remove(self, commit: str) -> None:
        """Remove the note of ``commit`` (nothing when it has none)."""
        self.repo.git("notes", "--ref", self.ref, "remove", "--ignore-missing", commit, identity=True)


@dataclass
class NotesExport:
    """What ``export_notes`` did."""

    exported: int = 0
    removed: int = 0
    notes_written: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)


def export_notes(notes: GitNotes, records: Sequence[Mapping[str, Any]], *, drop: Callable[[str], bool] = lambda _id: False) -> NotesExport:
    """Attach memories to commits as notes; notes whose text would not change are not rewritten.

    Args:
        notes: The repository and notes ref.
        records: The memories (as ``render_memory`` takes them).
        drop: Memory ids to take out of the notes they are in (memories deleted since an earlier export).

    Returns:
        Counts, and {memory_id, error} for each memory that names a commit the repository does not have,
        or whose commit carries a note in this ref that is not codemem's (left as it is).

    Raises:
        GitNotesError: A git command failed, or the repository has no commit (and a memory needs HEAD).
    """
    report = NotesExport()
    targets: dict[str, list[Mapping[str, Any]]] = {}
    head: str | None = None
    for record in records:
        named = named_commit(record.get("metadata") or {})
        if named is None:
            head = head or notes.head()
            sha: str | None = head
        else:
            sha = notes.resolve(named[1])
            if sha is None:
                report.errors.append({"memory_id": record["id"], "error": (
                    f"metadata.{named[0]} names commit {named[1]!r}, which is not in this repository — "
                    "fetch it, or correct the metadata (memory_update)")})
                continue
        targets.setdefault(sha, []).append(record)
    existing = notes.read_all()
    parsed: dict[str, list[dict[str, Any]]] = {}
    for commit, text in existing.items():
        try:
            parsed[commit] = parse_note(text)
        except MarkdownMemoryError as exc:
            for record in targets.pop(commit, []):
                report.errors.append({"memory_id": record["id"], "error": (
                    f"commit {commit[:12]} already has a note in {notes.ref} that codemem cannot read ({exc}) — "
                    f"remove it (git notes --ref {notes.ref} remove {commit[:12]}) or export to another ref")})
    moving = {str(record["id"]) for batch in targets.values() for record in batch}
    for commit, batch in sorted({**{c: [] for c in parsed}, **targets}.items()):
        old = parsed.get(commit, [])
        kept = [r for r in old if str(r.get("id")) not in moving and not (r.get("id") and drop(str(r["id"])))]
        report.removed += sum(1 for r in old if str(r.get("id")) not in moving) - len(kept)
        merged = sorted([*kept, *batch], key=lambda r: (str(r.get("created_at") or ""), str(r.get("id"))))
        if not merged:
            notes.remove(commit)
            continue
        text = render_note(merged)
        if text != existing.get(commit):
            notes.write(commit, text)
            report.notes_written += 1
    report.exported = len(moving)
    return report


def import_notes(notes: GitNotes) -> list[tuple[str, dict[str, Any] | MarkdownMemoryError]]:
    """Every memory in the ref's notes, with the commit it is attached to; a memory in several notes
    (exported from two clones before their notes were merged) once, its latest version."""
    return latest_records(notes.read_all())


def record_rank(record: Mapping[str, Any]) -> tuple[int, str]:
    """Which of two versions of a memory is newer: the higher version, then the later update."""
    return int(record.get("version") or 0), str(record.get("updated_at") or "")


def latest_records(texts: Mapping[str, str]) -> list[tuple[str, dict[str, Any] | MarkdownMemoryError]]:
    """The memories of notes (commit -> note text), each with its commit: a memory in several notes
    once, its latest version (``record_rank``); a note that does not parse as its error."""
    found: list[tuple[str, dict[str, Any] | MarkdownMemoryError]] = []
    latest: dict[str, int] = {}
    for commit, text in sorted(texts.items()):
        try:
            records = parse_note(text)
        except MarkdownMemoryError as exc:
            found.append((commit, exc))
            continue
        for record in records:
            memory_id = record.get("id")
            if memory_id is None:
                found.append((commit, record))
                continue
            if memory_id in latest:
                index = latest[memory_id]
                held = found[index][1]
                assert isinstance(held, dict)
                if record_rank(record) > record_rank(held):
                    found[index] = (commit, record)
                continue
            latest[memory_id] = len(found)
            found.append((commit, record))
    return found

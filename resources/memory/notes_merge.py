"""Merging notes that two clones wrote: a union of their memories, never a lost note (seed 003 NFR-005).

``git fetch`` brings another clone's notes into ``refs/notes/remotes/<remote>/cs/<namespace>`` (the
refspec ``codemem init --git-notes`` configures), never over the local ``refs/notes/cs/<namespace>``.
``merge_fetched_ref`` then merges them in: a fast-forward when only one side wrote; otherwise every
note of both sides, merged note by note (``merge_texts``: the memories of both, each memory's newest
version), committed as a merge commit whose parents are both tips — so the next ``git push`` of the
local ref is a fast-forward for the remote. Git's own ``union`` strategy would concatenate two
codemem notes into one that no longer parses; ``cat_sort_uniq`` would scramble them.
"""

from __future__ import annotations

from typing import Any

from resources.memory.git_notes import record_rank
from resources.memory.git_repo import GitRepo, NotesRefMoved
from resources.memory.markdown import MarkdownMemoryError, parse_note, render_note

MAX_ATTEMPTS = 5
"""Compare-and-swap attempts before a write gives up (another writer kept moving the ref)."""


def merge_records(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The memories of both notes, each id once in its newest version (``record_rank``; ours on a tie),
    ordered by creation time and id (as ``render_note`` is given them)."""
    merged: dict[str, dict[str, Any]] = {}
    anonymous: list[dict[str, Any]] = []
    for record in [*ours, *theirs]:
        memory_id = record.get("id")
        if memory_id is None:
            anonymous.append(record)
        elif memory_id not in merged or record_rank(record) > record_rank(merged[memory_id]):
            merged[str(memory_id)] = record
    return sorted([*merged.values(), *anonymous], key=lambda r: (str(r.get("created_at") or ""), str(r.get("id"))))


def merge_texts(ours: str, theirs: str) -> str:
    """One note from two versions of it: the union of their memories; when either is not a codemem
    note, both texts (the one that already contains the other, else ours, a blank line, theirs)."""
    if ours == theirs:
        return ours
    try:
        return render_note(merge_records(parse_note(ours), parse_note(theirs)))
    except MarkdownMemoryError:
        if theirs.startswith(ours):
            return theirs
        if ours.startswith(theirs):
            return ours
        return ours.rstrip("\n") + "\n\n" + theirs


def merge_fetched_ref(repo: GitRepo, ref: str, incoming: str) -> bool:
    """Merge the notes commit ``incoming`` (a fetched tip) into the local notes ref ``ref``.

    Returns:
        True when ``ref`` changed.

    Raises:
        NotesRefMoved: The ref kept moving under the merge (nothing lost: it holds what the other
            writer left; the fetched tip is merged at the next sync).
        GitNotesError: A git command failed.
    """
    for _ in range(MAX_ATTEMPTS):
        local = repo.tip(ref)
        if local == incoming or (local is not None and repo.is_ancestor(incoming, local)):
            return False
        if local is None or repo.is_ancestor(local, incoming):
            if repo.update_ref(ref, incoming, local, "codemem: fast-forward fetched notes"):
                return True
            continue
        ours, theirs = repo.notes_at(local), repo.notes_at(incoming)
        changes: dict[str, str | None] = {}
        for commit, text in theirs.items():
            merged = merge_texts(ours[commit], text) if commit in ours else text
            if merged != ours.get(commit):
                changes[commit] = merged
        staged = repo.stage_notes(local, changes) or local
        merge = repo.merge_commit(staged, (local, incoming), f"codemem: merge fetched notes into {ref}")
        if repo.update_ref(ref, merge, local, "codemem: merge fetched notes"):
            return True
    raise NotesRefMoved(f"{ref} kept changing while codemem merged fetched notes into it — run `codemem notes sync` again")

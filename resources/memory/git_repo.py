"""One git repository through the ``git`` command line: run git, resolve revisions, read its
config and refs, read notes at any notes commit, write notes with compare-and-swap, and read files
as they were at a commit.

Notes are written on a private temporary ref and then moved onto the real ref with
``git update-ref <ref> <new> <old>``: when another writer (a second process, a person running
``git notes``, a fetch) moved the ref meanwhile, the update is refused (``NotesRefMoved``) instead
of silently replacing their notes — ``git notes add`` itself updates the ref without that check.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Mapping
from pathlib import Path

from resources.processes import pid_alive

GIT_TIMEOUT_S = 60
ZERO_SHA = "0" * 40
_FALLBACK_IDENTITY = {
    "GIT_AUTHOR_NAME": "codemem", "GIT_AUTHOR_EMAIL": "codemem@localhost",
    "GIT_COMMITTER_NAME": "codemem", "GIT_COMMITTER_EMAIL": "codemem@localhost",
}
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
TEMP_REFS = "refs/notes/codemem-tmp/"
"""Where a notes write is prepared before it replaces the real ref."""


class GitNotesError(RuntimeError):
    """git is missing, the project is no git repository, or a git command failed (the message says which)."""


class NotesRefMoved(GitNotesError):
    """The notes ref changed while a write was being prepared (re-read and write again)."""


class GitRepo:
    """The git repository that holds ``root`` (a work tree, or a directory inside one)."""

    def __init__(self, root: Path) -> None:
        """Find the repository.

        Raises:
            GitNotesError: git is missing, or ``root`` is not in a git work tree (what to do is in the message).
        """
        self.root = Path(root)
        self._identity: dict[str, str] | None | bool = False
        done = self.git("rev-parse", "--show-toplevel", "--git-common-dir", check=False)
        lines = done.stdout.decode("utf-8", "replace").splitlines()
        if done.returncode != 0 or len(lines) < 2:
            raise GitNotesError(f"{root} is not in a git repository — git notes need one (git init, and a first commit)")
        self.toplevel = Path(lines[0])
        common = Path(lines[1])
        self.common_dir = common if common.is_absolute() else (self.root / common).resolve()

    # -- running git ------------------------------------------------------------------------------
    def git(self, *args: str, data: bytes | None = None, check: bool = True, identity: bool = False) -> subprocess.CompletedProcess[bytes]:
        """Run ``git -C root <args>``; ``identity`` adds codemem's committer identity when none is configured.

        Raises:
            GitNotesError: git is missing, timed out, or (with ``check``) failed; the message has git's last line.
        """
        env = self._commit_env() if identity else None
        try:
            done = subprocess.run(
                ["git", "-C", str(self.root), *args], input=data, capture_output=True, timeout=GIT_TIMEOUT_S, env=env, check=False,
            )
        except FileNotFoundError as exc:
            raise GitNotesError("git is not installed (or not on PATH) — install git to use git notes") from exc
        except subprocess.TimeoutExpired as exc:
            raise GitNotesError(f"git {args[0]} did not finish in {GIT_TIMEOUT_S} s") from exc
        if check and done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GitNotesError(f"git {' '.join(args[:3])} failed: {message[-1] if message else done.returncode}")
        return done

    def out(self, *args: str) -> str:
        """The stripped standard output of a git command that must succeed."""
        return self.git(*args).stdout.decode("utf-8", "replace").strip()

    def _commit_env(self) -> dict[str, str] | None:
        """Writing a note makes a commit on the notes ref: without a configured identity, use codemem's."""
        if self._identity is False:
            known = self.git("var", "GIT_COMMITTER_IDENT", check=False).returncode == 0
            self._identity = None if known else {**os.environ, **_FALLBACK_IDENTITY}
        return self._identity  # type: ignore[return-value]

    # -- commits ----------------------------------------------------------------------------------
    def resolve(self, rev: str) -> str | None:
        """The full SHA of the commit ``rev`` names (a SHA, a short SHA, a tag...), or None when the
        repository has no such commit."""
        rev = rev.strip()
        if not rev or rev.startswith("-") or any(ch.isspace() or ord(ch) < 32 for ch in rev):
            return None
        done = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        sha = done.stdout.decode("ascii", "replace").strip()
        return sha if done.returncode == 0 and _SHA.fullmatch(sha) else None

    def commit(self, rev: str) -> str:
        """The full SHA of the commit ``rev`` names.

        Raises:
            GitNotesError: No such commit, with what to do.
        """
        sha = self.resolve(rev)
        if sha is None:
            if rev.strip() == "HEAD":
                raise GitNotesError("the repository has no commit yet — commit once, then attach notes")
            raise GitNotesError(f"commit {rev!r} is not in this repository — pass a SHA, branch or tag that `git log` shows "
                                "(or `git fetch` the commit first)")
        return sha

    def parent_time(self, sha: str) -> str | None:
        """The committer time (ISO 8601) of the first parent of ``sha``; None for a root commit."""
        lines = self.out("log", "-2", "--first-parent", "--format=%cI", sha).splitlines()
        return lines[1] if len(lines) > 1 else None

    def changed_files(self, sha: str, limit: int) -> list[str]:
        """Paths (relative to the repository's top) the commit changed against its first parent."""
        listed = self.out("diff-tree", "--root", "--no-commit-id", "--name-only", "-r", "-m", "--first-parent", sha)
        return list(dict.fromkeys(line for line in listed.splitlines() if line))[:limit]

    def show_file(self, sha: str, path: str) -> bytes | None:
        """The bytes of ``path`` (relative to the repository's top) at commit ``sha`` (``git show
        <sha>:<path>``); None when that commit has no such file."""
        done = self.git("show", f"{sha}:{path}", check=False)
        if done.returncode != 0 or done.stdout.startswith(f"tree {sha}:".encode()):
            return None
        return done.stdout

    def prefix(self) -> str:
        """Where ``root`` is below the repository's top ('' at the top, else 'sub/dir/')."""
        return self.out("rev-parse", "--show-prefix")

    # -- config and refs --------------------------------------------------------------------------
    def config_bool(self, key: str) -> bool:
        """A boolean git config value (False when unset)."""
        done = self.git("config", "--bool", "--get", key, check=False)
        return done.returncode == 0 and done.stdout.strip() == b"true"

    def config_values(self, key: str) -> list[str]:
        """Every value of a multi-valued git config key (repository and user config)."""
        done = self.git("config", "--get-all", key, check=False)
        return done.stdout.decode("utf-8", "replace").splitlines() if done.returncode == 0 else []

    def refs(self, prefix: str) -> dict[str, str]:
        """Ref name -> object SHA for every ref under ``prefix``."""
        listed = self.out("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        return dict(line.split(" ", 1) for line in listed.splitlines() if " " in line)  # type: ignore[misc]

    def tip(self, ref: str) -> str | None:
        """What ``ref`` points at (None when it does not exist)."""
        done = self.git("rev-parse", "--verify", "--quiet", ref, check=False)
        return done.stdout.decode("ascii").strip() if done.returncode == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when ``ancestor`` is ``descendant`` or in its history."""
        return self.git("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0

    def update_ref(self, ref: str, new: str, old: str | None, message: str) -> bool:
        """Move ``ref`` to ``new`` if it still points at ``old`` (None: if it does not exist); False when it moved.

        Raises:
            GitNotesError: git could not move it although it did not move (a stale lock file, a full disk).
        """
        done = self.git("update-ref", "-m", message, ref, new, old or ZERO_SHA, check=False)
        if done.returncode == 0:
            return True
        if self.tip(ref) != old:
            return False
        problem = " ".join(done.stderr.decode("utf-8", "replace").split())[:400]
        raise GitNotesError(f"git update-ref {ref} failed: {problem or done.returncode} — if a git process crashed, "
                            "remove the stale .lock file it names")

    # -- notes ------------------------------------------------------------------------------------
    def notes_at(self, tip: str | None) -> dict[str, str]:
        """Every note of the notes commit ``tip``: annotated object SHA -> note text ({} for None)."""
        if tip is None:
            return {}
        listed = self.git("ls-tree", "-r", "-z", tip).stdout.decode("utf-8", "replace").split("\0")
        pairs: list[tuple[str, str]] = []
        for entry in listed:
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            name = path.replace("/", "")
            if len(parts) == 3 and parts[1] == "blob" and _SHA.fullmatch(name):
                pairs.append((parts[2], name))
        if not pairs:
            return {}
        batch = self.git("cat-file", "--batch", data="".join(f"{blob}\n" for blob, _ in pairs).encode()).stdout
        notes: dict[str, str] = {}
        offset = 0
        for _, commit in pairs:
            header_end = batch.index(b"\n", offset)
            size = int(batch[offset:header_end].split()[2])
            notes[commit] = batch[header_end + 1 : header_end + 1 + size].decode("utf-8", "replace")
            offset = header_end + 1 + size + 1
        return notes

    def note(self, ref: str, commit: str) -> str | None:
        """The note of ``commit`` in ``ref`` (None when it has none)."""
        done = self.git("notes", "--ref", ref, "show", commit, check=False)
        return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None

    def stage_notes(self, base: str | None, changes: Mapping[str, str | None]) -> str | None:
        """A notes commit: the notes of ``base`` (None: none) with ``changes`` applied — a text sets a
        commit's note verbatim (``git notes add -C <blob>``: ``-m`` would strip trailing blank lines),
        None removes it. Built on a private temporary ref; no other ref moves.

        Returns:
            The new notes commit (``base`` when nothing changed; None when there never was one).
        """
        temp = f"{TEMP_REFS}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            if base is not None:
                self.git("update-ref", temp, base)
            for commit, text in changes.items():
                if text is None:
                    self.git("notes", "--ref", temp, "remove", "--ignore-missing", commit, identity=True)
                else:
                    blob = self.git("hash-object", "-w", "--stdin", data=text.encode("utf-8")).stdout.decode().strip()
                    self.git("notes", "--ref", temp, "add", "-f", "-C", blob, commit, identity=True)
            return self.tip(temp)
        finally:
            self.git("update-ref", "-d", temp, check=False)

    def write_notes(self, ref: str, changes: Mapping[str, str | None], expected: str | None, message: str) -> str | None:
        """Set (text) or remove (None) the notes of several commits in one move of ``ref``, provided
        the ref still points at ``expected`` (None: it does not exist).

        Returns:
            The ref's new tip (``expected`` when nothing changed).

        Raises:
            NotesRefMoved: The ref moved since ``expected`` was read; nothing was written.
            GitNotesError: A git command failed; nothing was written.
        """
        new = self.stage_notes(expected, changes)
        if new is None or new == expected:
            return expected
        if not self.update_ref(ref, new, expected, message):
            raise NotesRefMoved(f"{ref} changed while codemem was writing it")
        return new

    def drop_stale_temps(self) -> None:
        """Delete the temporary refs of writers that died mid-write (their process is gone)."""
        for ref in self.refs(TEMP_REFS):
            pid = ref.removeprefix(TEMP_REFS).split("-", 1)[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                self.git("update-ref", "-d", ref, check=False)

    def merge_commit(self, tree_of: str, parents: tuple[str, ...], message: str) -> str:
        """A commit with the tree of ``tree_of`` and ``parents`` (a notes merge commit)."""
        args = ["commit-tree", f"{tree_of}^{{tree}}", "-m", message]
        for parent in parents:
            args += ["-p", parent]
        return self.git(*args, identity=True).stdout.decode().strip()


LIVE_NOTES_KEY = "codemem.notes"
"""The git config key that turns git notes on as a live memory store in a clone (``codemem init
--git-notes`` sets it)."""


def live_notes_on(root: Path) -> bool:
    """True when the clone holding ``root`` turned live notes on (False outside a git repository,
    or without git)."""
    try:
        return GitRepo(root).config_bool(LIVE_NOTES_KEY)
    except GitNotesError:
        return False

"""The switch and the entry points of git notes as a live memory store (``resources.memory.notes_sync``).

Live notes are opt-in per clone: ``codemem init --git-notes`` sets ``codemem.notes = true`` in the
repository's git config (with the fetch/push refspecs and the post-commit hook). While it is on:

- every write of a project memory is followed by an export of what changed into the notes
  (``after_write``, from ``MemoryStores.project``): best effort — a failure is logged, the ledger keeps
  the memory and the next export writes its note;
- every index run, ``codemem notes sync`` and the post-commit capture run a whole sync (``sync``): merge
  fetched notes, import them, export.

The switch is read from git once and then again only when the config file changes (a stat per write).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from query_server.paging import ToolError
from resources.memory.git_repo import LIVE_NOTES_KEY, GitNotesError, GitRepo
from resources.memory.ledger import Ledger
from resources.memory.notes_sync import NotesSync, SyncReport

log = structlog.get_logger("codemem.memory")

NO_REPO_RECHECK_S = 30.0
"""How long "not a git repository" is believed before git is asked again."""
TURN_ON = "`codemem init --git-notes` turns them on (refspecs, post-commit hook)"


class LiveNotes:
    """The project's git notes as a live store, when the repository says so."""

    def __init__(self, root: Path, ledger: Callable[[], Ledger]) -> None:
        """For the project at ``root``, whose project-scope ledger ``ledger()`` returns (a restore replaces it)."""
        self.root = root
        self._ledger = ledger
        self._lock = threading.Lock()
        self._repo: GitRepo | None = None
        self._no_repo_until = 0.0
        self._config_mtime: int | None = None
        self._enabled = False

    def repo(self) -> GitRepo | None:
        """The git repository holding the project (None: none, or git is missing)."""
        if self._repo is None and time.monotonic() >= self._no_repo_until:
            try:
                self._repo = GitRepo(self.root)
            except GitNotesError:
                self._no_repo_until = time.monotonic() + NO_REPO_RECHECK_S
        return self._repo

    def enabled(self) -> bool:
        """True when this clone's git config has ``codemem.notes = true``."""
        repo = self.repo()
        if repo is None:
            return False
        try:
            mtime = (repo.common_dir / "config").stat().st_mtime_ns
        except OSError:
            return False
        if mtime != self._config_mtime:
            self._enabled = repo.config_bool(LIVE_NOTES_KEY)
            self._config_mtime = mtime
        return self._enabled

    def require(self) -> GitRepo:
        """The repository, when live notes are on.

        Raises:
            ToolError: Not a git repository, or live notes are off (with what to do).
        """
        repo = self.repo()
        if repo is None:
            raise ToolError(f"{self.root} is not in a git repository — git notes need one (git init, and a first commit)")
        if not self.enabled():
            raise ToolError(f"git notes are off in this repository — {TURN_ON}")
        return repo

    def sync(self, *, rebuild: bool = False) -> SyncReport:
        """Merge fetched notes, import them, export the ledger's changes (one sync at a time).

        Raises:
            ToolError: Live notes are off, or git failed (nothing is lost: the next sync does it again).
        """
        repo = self.require()
        with self._lock:
            try:
                return NotesSync(self._ledger(), repo).run(rebuild=rebuild)
            except GitNotesError as exc:
                raise ToolError(f"{exc} — nothing was lost; run `codemem notes sync` again") from exc

    def export(self) -> SyncReport:
        """Write what the ledger changed since the last export into the notes (nothing when off).

        Raises:
            GitNotesError: git failed; the next export writes it.
        """
        report = SyncReport()
        if not self.enabled():
            return report
        with self._lock:
            NotesSync(self._ledger(), self._repo).export(report)  # type: ignore[arg-type]
        return report

    def after_write(self) -> None:
        """After a project memory was written: its note, best effort (a failure waits for the next sync)."""
        try:
            self.export()
        except Exception as exc:  # noqa: BLE001 - the ledger has the memory; the note follows at the next sync
            log.warning("git notes not written; the next sync writes them", error=str(exc))

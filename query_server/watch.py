"""``codemem watch``: keep the index current while files are saved, without the Dagster daemon.

A watchdog ``Observer`` reports created, modified, deleted and moved files under the project
root. Paths discovery would never index are dropped at once (the state dir, ``.git`` and the
other vendored or generated directories of ``pipelines.discovery``, extensions outside the
filter, files git or ``.codememignore`` ignore). The rest are collected until no event has come
for the debounce interval (300 ms by default; at most ``max_wait_s`` after the first one), then
the batch goes to the project's ``index`` through its ``ProjectHandle`` — the stores' owner,
this process or a codemem server — as ``IndexInput(paths=[...])``: only those files are hashed,
parsed and written, and those that vanished are deleted from the index.

``index`` refuses paths that no longer exist, so a deleted file is passed as its nearest
existing directory (the files under it are hashed, only changed ones rewritten); a deleted file
at the root, or a changed ``.gitignore``/``.codememignore``, means an incremental index of the
whole project.

Inotify watches every directory of a recursive watch, so the root is watched on its own and each
top-level directory recursively, except the excluded ones (``.venv``, ``node_modules``, ``.git``,
``.codemem`` … and git-ignored ones): those trees cost no watches at all.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pathspec
import structlog
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from pipelines.discovery import DEFAULT_EXCLUDED_DIRS, DiscoveryError, confine_path, resolve_project_root
from resources.schemas.tools import IndexInput
from resources.settings import Settings

log = structlog.get_logger("codemem.watch")

DEFAULT_DEBOUNCE_MS = 300
DEFAULT_MAX_WAIT_S = 5.0
IGNORE_FILES = frozenset({".gitignore", ".codememignore"})
WHOLE_PROJECT = ""
"""The scope that stands for the whole project (an incremental index of everything)."""

_EVENTS = [
    FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent, FileClosedEvent,
    DirCreatedEvent, DirDeletedEvent, DirMovedEvent,
]


class PathFilter:
    """Which paths under the root can matter to the index (the cheap, per-event part)."""

    def __init__(self, settings: Settings) -> None:
        """Filter for the project of ``settings``."""
        self.root = resolve_project_root(settings.resolved_root())
        self.state_dir = settings.resolved_state_dir()
        self.extensions = {e.lower() for e in settings.extensions}

    def relative(self, absolute: str | bytes) -> str | None:
        """The repo-relative POSIX path of an event path, or None outside the root."""
        text = absolute.decode("utf-8", errors="surrogateescape") if isinstance(absolute, bytes) else absolute
        path = Path(text)
        if path.is_relative_to(self.state_dir):
            return None
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            return None
        return None if rel == "." else rel

    def relevant(self, rel: str, is_directory: bool) -> str | None:
        """``rel`` when a change there can change the index, ``WHOLE_PROJECT`` for an ignore
        file (what is indexed may change anywhere), else None."""
        parts = PurePosixPath(rel).parts
        dirs = parts if is_directory else parts[:-1]
        if any(part in DEFAULT_EXCLUDED_DIRS for part in dirs):
            return None
        if is_directory:
            return rel
        name = parts[-1]
        if name in IGNORE_FILES:
            return WHOLE_PROJECT
        return rel if PurePosixPath(name).suffix.lower() in self.extensions else None


def in_git_tree(root: Path) -> bool:
    """True when ``root`` lies in a git work tree (discovery then follows git's ignore rules)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def ignored_paths(root: Path, paths: Iterable[str], *, git: bool) -> set[str]:
    """The paths discovery would leave out by ignore rules: git's (tracked files are never
    ignored, as with ``git ls-files --cached --others --exclude-standard``) and the root's
    ``.codememignore``. A directory is given with a trailing ``/``."""
    paths = [p for p in paths if p != WHOLE_PROJECT]
    found: set[str] = set()
    if not paths:
        return found
    codememignore = root / ".codememignore"
    if codememignore.is_file():
        spec = pathspec.GitIgnoreSpec.from_lines(codememignore.read_text(encoding="utf-8", errors="replace").splitlines())
        found |= {p for p in paths if spec.match_file(p)}
    if git:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), "check-ignore", "-z", "--stdin"],
                input="\0".join(paths).encode("utf-8", errors="surrogateescape") + b"\0",
                capture_output=True, timeout=30, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return found
        if done.returncode in (0, 1):
            found |= {p for p in done.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p}
    return found


def index_scopes(root: Path, paths: Iterable[str]) -> list[str] | None:
    """What to pass as ``IndexInput.paths`` for a batch of changed paths (None: everything).

    An existing path is its own scope; a vanished one (deleted, renamed away, or now a symlink
    out of the root) is replaced by its nearest existing directory inside the root, whose
    files are then compared with the index (so the vanished file is deleted from it). Scopes
    inside another scope are dropped.
    """
    scopes: set[str] = set()
    for rel in paths:
        scope = rel.rstrip("/")
        while scope:
            try:
                if confine_path(root, scope).exists():
                    break
            except DiscoveryError:
                pass
            scope = PurePosixPath(scope).parent.as_posix()
            scope = "" if scope == "." else scope
        if scope == WHOLE_PROJECT:
            return None
        scopes.add(scope)
    return sorted(s for s in scopes if not any(s.startswith(other + "/") for other in scopes))


@dataclass
class Batch:
    """One debounced batch of changes and what indexing it did."""

    paths: list[str]
    scopes: list[str] | None
    started_at: float = field(default_factory=time.time)
    seconds: float = 0.0
    report: dict[str, Any] | None = None
    error: str | None = None

    def line(self) -> str:
        """One line for the terminal: when, which files, what the index did, how long."""
        stamp = time.strftime("%H:%M:%S", time.localtime(self.started_at))
        shown = [p or "(project)" for p in self.paths[:5]]
        names = ", ".join(shown) + (f" +{len(self.paths) - 5} more" if len(self.paths) > 5 else "")
        whole = self.paths == [WHOLE_PROJECT]
        count = "project" if whole else f"{len(self.paths)} file{'s' if len(self.paths) != 1 else ''}"
        if self.error is not None:
            return f"[{stamp}] {count}: FAILED after {self.seconds:.2f} s: {self.error} ({names})"
        r = self.report or {}
        failed = len(r.get("failed", []))
        what = f"{r.get('files_indexed', 0)} indexed, {r.get('files_deleted', 0)} deleted" + (f", {failed} failed" if failed else "")
        scope = "" if self.scopes is not None or whole else " (whole project)"
        return f"[{stamp}] {count}: {what}{scope} in {self.seconds:.2f} s" + ("" if whole else f" — {names}")


class ChangeBuffer:
    """Changed paths collected until the events pause (thread-safe)."""

    def __init__(self) -> None:
        """An empty buffer."""
        self._cond = threading.Condition()
        self._pending: set[str] = set()
        self._first = 0.0
        self._last = 0.0

    def add(self, paths: Iterable[str]) -> None:
        """Record changed paths (``WHOLE_PROJECT`` included) now."""
        paths = list(paths)
        if not paths:
            return
        with self._cond:
            now = time.monotonic()
            if not self._pending:
                self._first = now
            self._pending.update(paths)
            self._last = now
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake a waiting ``take`` (to notice a stop)."""
        with self._cond:
            self._cond.notify_all()

    def take(self, debounce_s: float, max_wait_s: float, stop: threading.Event) -> list[str] | None:
        """Block until ``debounce_s`` passed without an event (or ``max_wait_s`` since the first
        one) and return the batch, or None once ``stop`` is set."""
        with self._cond:
            while not stop.is_set():
                if not self._pending:
                    self._cond.wait(0.5)
                    continue
                due = min(self._last + debounce_s, self._first + max_wait_s)
                now = time.monotonic()
                if now >= due:
                    batch = sorted(self._pending)
                    self._pending.clear()
                    return batch
                self._cond.wait(due - now)
        return None


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        try:
            self.watcher._on_event(event)
        except Exception:  # noqa: BLE001 - a bad event must not stop the observer thread
            log.exception("watch event failed", operation="watch", path=str(event.src_path))


class Watcher:
    """Watch a project and index each debounced batch of changed files through ``handle``.

    Use ``start()`` / ``stop()`` (or ``with Watcher(...)``); ``on_batch`` gets each ``Batch``
    after it was indexed (from the watcher's thread).
    """

    def __init__(
        self,
        handle: Any,
        *,
        debounce_s: float = DEFAULT_DEBOUNCE_MS / 1000,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        embed: bool = True,
        on_batch: Callable[[Batch], None] | None = None,
    ) -> None:
        """Prepare to watch the project of ``handle`` (a ``ProjectHandle``)."""
        self.handle = handle
        self.filter = PathFilter(handle.settings)
        self.root = self.filter.root
        self.debounce_s = max(0.0, debounce_s)
        self.max_wait_s = max(self.debounce_s, max_wait_s)
        self.embed = embed
        self.on_batch = on_batch
        self.git = in_git_tree(self.root)
        self.batches = 0
        self._buffer = ChangeBuffer()
        self._stop = threading.Event()
        self._observer: Any = None
        self._worker: threading.Thread | None = None
        self._watches: dict[str, Any] = {}

    # -- observer -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start watching (returns at once; batches are indexed on a background thread)."""
        self._observer = Observer()
        self._observer.schedule(_Handler(self), str(self.root), recursive=False, event_filter=_EVENTS)
        top = sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.is_symlink())
        candidates = [name for name in top if self.filter.relevant(name, True) is not None]
        ignored = ignored_paths(self.root, [n + "/" for n in candidates], git=self.git)
        for name in candidates:
            if name + "/" not in ignored:
                self._watch_dir(name)
        self._observer.start()
        self._worker = threading.Thread(target=self._run, name="codemem-watch", daemon=True)
        self._worker.start()
        log.info("watching", operation="watch", root=str(self.root), directories=len(self._watches))

    def _watch_dir(self, name: str) -> None:
        if name in self._watches or self._observer is None:
            return
        try:
            self._watches[name] = self._observer.schedule(
                _Handler(self), str(self.root / name), recursive=True, event_filter=_EVENTS
            )
        except OSError as exc:  # vanished meanwhile, or out of inotify watches
            log.warning("cannot watch directory", operation="watch", path=name, error=str(exc))

    def _unwatch_dir(self, name: str) -> None:
        watch = self._watches.pop(name, None)
        if watch is not None and self._observer is not None:
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError):
                pass

    def _on_event(self, event: FileSystemEvent) -> None:
        changed: list[str] = []
        sources = [event.src_path] + ([event.dest_path] if event.event_type == "moved" and event.dest_path else [])
        for index, raw in enumerate(sources):
            rel = self.filter.relative(raw)
            if rel is None:
                continue
            if event.is_directory and "/" not in rel:  # a top-level directory came or went
                gone = index == 0 and event.event_type in ("deleted", "moved")
                if gone:
                    self._unwatch_dir(rel)
                elif self.filter.relevant(rel, True) is not None and not ignored_paths(self.root, [rel + "/"], git=self.git):
                    self._watch_dir(rel)
            relevant = self.filter.relevant(rel, event.is_directory)
            if relevant is not None:
                changed.append(relevant)
        self._buffer.add(changed)

    # -- indexing -------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            paths = self._buffer.take(self.debounce_s, self.max_wait_s, self._stop)
            if paths:
                self.index_paths(paths)

    def index_paths(self, paths: list[str]) -> Batch | None:
        """Index a batch of changed repo-relative paths now (``WHOLE_PROJECT`` for everything);
        None when ignore rules leave nothing to do."""
        ignored = ignored_paths(self.root, paths, git=self.git)
        paths = [p for p in paths if p not in ignored]
        if not paths:
            return None
        started = time.perf_counter()
        batch = Batch(paths=[p for p in paths if p != WHOLE_PROJECT] or [WHOLE_PROJECT], scopes=None)
        try:
            batch.report = self._index(paths, batch)
        except Exception as exc:  # noqa: BLE001 - report the batch and keep watching
            batch.error = f"{type(exc).__name__}: {exc}"
            log.warning("watch batch failed", operation="watch", error=batch.error, paths=paths[:20])
        batch.seconds = time.perf_counter() - started
        self.batches += 1
        if self.on_batch is not None:
            self.on_batch(batch)
        return batch

    def catch_up(self) -> None:
        """Queue an incremental index of the whole project (what changed while nobody watched);
        it runs on the watcher's thread like any batch."""
        self._buffer.add([WHOLE_PROJECT])

    def _index(self, paths: list[str], batch: Batch) -> dict[str, Any]:
        from query_server.service import ToolError
        from query_server.tools import TOOLS

        kwargs: dict[str, Any] = {"stop": self._stop} if self.handle.is_owner else {}
        for attempt in range(2):
            batch.scopes = index_scopes(self.root, paths)
            try:
                return self.handle.call(TOOLS["index"], IndexInput(paths=batch.scopes, embed=self.embed), **kwargs)
            except ToolError:  # a path vanished between the scope check and the index
                if attempt or batch.scopes is None:
                    raise
        raise AssertionError("unreachable")

    # -- lifecycle ------------------------------------------------------------------------------
    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop watching; an index in progress stops after its current step (this process owns
        the stores) or finishes in the owner. Changes not yet indexed are left to the next
        ``codemem watch`` (which catches up) or ``codemem index``."""
        self._stop.set()
        self._buffer.wake()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=timeout_s)
            self._observer = None
        self._watches.clear()
        if self._worker is not None:
            self._worker.join(timeout=None if self.handle.is_owner else timeout_s)
            self._worker = None

    @property
    def stopped(self) -> threading.Event:
        """Set once ``stop`` was called."""
        return self._stop

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

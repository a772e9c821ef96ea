"""Find the files of a project that should be indexed.

Git-aware: inside a git work tree the candidate list comes from ``git ls-files`` (tracked plus
untracked-but-not-ignored files, so git's own ignore rules apply exactly); elsewhere the tree is
walked and every ``.gitignore`` on the way is honoured with ``pathspec``. ``.codememignore``
(gitignore syntax, at the root) is applied in both cases. Vendored and generated trees,
minified files and lockfiles are skipped by default, as are files with an extension outside the
configured filter, files over the size limit, symlinks that leave the root, and special files.
Every skip carries its reason so the summary can say why a file is not indexed; a folder that
cannot be listed is one skip (its path ends in ``/``) with the system's reason. A file listed
but gone when it is looked at (a tracked file deleted from the work tree, or one deleted
meanwhile) is not part of the tree: it is left out.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from stat import S_ISLNK, S_ISREG
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

DEFAULT_EXCLUDED_DIRS: frozenset[str] = frozenset(
    {
        ".git", ".hg", ".svn", ".codemem", "node_modules", "bower_components", ".venv", "venv",
        "__pycache__", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "dist",
        "build", "target", "vendor", "third_party", ".next", ".nuxt", "coverage", ".gradle",
        "obj", ".idea", ".vscode", "site-packages", ".eggs",
    }
)
LOCKFILES: frozenset[str] = frozenset(
    {
        "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "Cargo.lock", "poetry.lock",
        "Pipfile.lock", "composer.lock", "Gemfile.lock", "go.sum", "uv.lock", "packages.lock.json",
    }
)
MINIFIED_SUFFIXES: tuple[str, ...] = (".min.js", ".min.mjs", ".min.css", ".bundle.js", "-min.js")
GENERATED_SUFFIXES: tuple[str, ...] = (".pb.go", "_pb2.py", "_pb2_grpc.py", ".g.cs", ".designer.cs", ".d.ts.map")
MINIFIED_LINE_LENGTH = 1000
_GIT_UNREADABLE = re.compile(r"^warning: could not open directory '(.*)': (.*)$", re.MULTILINE)
"""git's warning for a folder it cannot list (``LC_ALL=C``: the English text)."""


class DiscoveryError(ValueError):
    """The project root cannot be indexed; the message says what to do."""


@dataclass(slots=True, frozen=True)
class SourceFile:
    """A file to index: repo-relative POSIX path, absolute path, size, mtime and language."""

    path: str
    absolute_path: Path
    size: int
    mtime_ns: int
    language: str

    @property
    def project_root(self) -> Path:
        """The root the repo-relative ``path`` is relative to."""
        return self.absolute_path.parents[self.path.count("/")]


@dataclass(slots=True, frozen=True)
class SkippedFile:
    """A file that is not indexed, and why."""

    path: str
    reason: str


@dataclass(slots=True)
class Discovery:
    """The outcome of a discovery pass."""

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    git_aware: bool = False


_LISTINGS: dict[tuple[str, tuple[str, ...], int, tuple[str, ...]], Discovery] | None = None
"""The listings of the current ``one_listing`` block (None outside one)."""
_CANDIDATES: dict[str, Candidates] | None = None
"""The trees' candidate paths listed in the current ``one_listing`` block (None outside one)."""


@dataclass(frozen=True)
class Candidates:
    """Every path of a tree that git lists, or a walk honouring the .gitignore files finds."""

    paths: tuple[str, ...]
    git_aware: bool
    unreadable: tuple[SkippedFile, ...]
    """The folders that could not be listed."""


@contextmanager
def one_listing() -> Iterator[None]:
    """Within the block, ``discover`` lists a tree once: a later call with the same arguments gets
    (a copy of) the first one's outcome. For one command that lists a tree several times in a few
    seconds — ``codemem index``: its answer when nothing changed, the run's own check, the run —
    the tree as it was when the command started; each listing of the Linux kernel took 1.9 s. The
    documents' listing (``pipelines.design.ingest``) takes the same paths (``candidates``).
    Never for a long-lived process (a server's next index must see the files added meanwhile)."""
    global _LISTINGS, _CANDIDATES
    outer, outer_candidates = _LISTINGS, _CANDIDATES
    if outer is None:
        _LISTINGS, _CANDIDATES = {}, {}
    try:
        yield
    finally:
        _LISTINGS, _CANDIDATES = outer, outer_candidates


def candidates(root: Path) -> Candidates:
    """The paths of the tree at ``root`` (resolved) that git lists (tracked, and untracked not
    ignored), else that a walk honouring the .gitignore files finds: the code's listing and the
    documents' share one within a ``one_listing`` block (the Linux kernel's walk: ~1.5 s)."""
    listed = _CANDIDATES
    if listed is not None and str(root) in listed:
        return listed[str(root)]
    unreadable: list[SkippedFile] = []
    git_paths = _git_candidates(root, unreadable)
    paths = git_paths if git_paths is not None else list(_walk_candidates(root, unreadable))
    found = Candidates(tuple(paths), git_paths is not None, tuple(unreadable))
    if listed is not None:
        listed[str(root)] = found
    return found


def resolve_project_root(root: Path) -> Path:
    """The absolute, symlink-resolved project root.

    Raises:
        DiscoveryError: if the path does not exist or is not a directory.
    """
    path = Path(root).expanduser()
    if not path.exists():
        raise DiscoveryError(f"path does not exist: {path} — pass the directory of a repository, e.g. `codemem index .`")
    if not path.is_dir():
        raise DiscoveryError(f"not a directory: {path} — pass the repository's root directory, not a file")
    return path.resolve()


def _load_ignore(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec  # here: the CLI and the memory tools import this module for its paths only

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _unreadable_folder(rel: str, reason: str) -> SkippedFile:
    """The skip of a folder that cannot be listed (``rel`` repo-relative, "" for the root)."""
    return SkippedFile(rel.rstrip("/") + "/" if rel not in ("", ".") else "./", f"unreadable folder: {reason}")


def _git_candidates(root: Path, unreadable: list[SkippedFile] | None = None) -> list[str] | None:
    """Paths from git (tracked + untracked not ignored), or None when root is not a git tree;
    the folders git could not list are appended to ``unreadable`` (when given)."""
    try:
        inside = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if inside.returncode != 0:
        return None
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, timeout=300, check=False, env={**os.environ, "LC_ALL": "C"},
    )
    if listed.returncode != 0:
        return None
    top = Path(inside.stdout.strip())  # git names folders from the top of the work tree
    for folder, reason in _GIT_UNREADABLE.findall(listed.stderr.decode("utf-8", errors="replace")):
        rel = Path(os.path.relpath(top / folder, root)).as_posix()
        if unreadable is not None and not rel.startswith("../"):
            unreadable.append(_unreadable_folder(rel, reason))
    names = listed.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return sorted({name for name in names if name})


def _walk_candidates(root: Path, unreadable: list[SkippedFile] | None = None) -> Iterator[str]:
    """Walk the tree without following directory symlinks, honouring nested .gitignore files; the
    folders that cannot be listed are appended to ``unreadable`` (when given)."""

    def cannot_list(exc: OSError) -> None:
        if unreadable is None:
            return
        folder = Path(exc.filename).relative_to(root).as_posix() if exc.filename else ""
        unreadable.append(_unreadable_folder(folder, exc.strerror or str(exc)))

    in_force: dict[str, list[tuple[str, pathspec.GitIgnoreSpec]]] = {}
    """Per folder walked, the .gitignore files of it and its ancestors (only those apply there: a
    tree like the Linux kernel has ~300, each file tested against all of them took ~8 s a walk)."""
    for directory, dirnames, filenames in os.walk(root, onerror=cannot_list, followlinks=False):
        rel_dir = Path(directory).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        parent = rel_dir[:-1].rpartition("/")[0]
        specs = [] if rel_dir == "" else list(in_force.get(parent + "/" if parent else "", []))
        if ".gitignore" in filenames:
            spec = _load_ignore(Path(directory) / ".gitignore")
            if spec is not None:
                specs.append((rel_dir, spec))
        in_force[rel_dir] = specs

        def ignored(rel: str, is_dir: bool, specs: list[tuple[str, pathspec.GitIgnoreSpec]] = specs) -> bool:
            for base, spec in reversed(specs):  # as git: the deepest file with a matching pattern decides
                verdict = spec.check_file(rel[len(base):] + ("/" if is_dir else "")).include
                if verdict is not None:
                    return verdict
            return False

        dirnames[:] = sorted(
            d for d in dirnames if d not in DEFAULT_EXCLUDED_DIRS and not ignored(rel_dir + d, True)
        )
        for name in sorted(filenames):
            rel = rel_dir + name
            if not ignored(rel, False):
                yield rel


def ignored_source_file(root: Path, extensions: Iterable[str], *, budget: int = 50_000) -> str | None:
    """A file under ``root`` with an indexed extension, looked for without any ignore file (vendored
    and generated folders still left out): when ``discover`` found none, one here means the ignore
    files excluded them all (Debian's kernel source ignores ``/*``). None after ``budget`` entries."""
    allowed = {ext.lower() for ext in extensions}
    seen = 0
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_EXCLUDED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            seen += 1
            if PurePosixPath(name).suffix.lower() in allowed:
                return Path(directory, name).relative_to(root).as_posix()
        seen += len(dirnames)
        if seen > budget:
            return None
    return None


def _default_skip_reason(rel: str) -> str | None:
    parts = PurePosixPath(rel).parts
    for part in parts[:-1]:
        if part in DEFAULT_EXCLUDED_DIRS:
            return f"vendored or generated directory '{part}/'"
    name = parts[-1]
    if name in LOCKFILES:
        return "lockfile"
    lower = name.lower()
    if lower.endswith(MINIFIED_SUFFIXES):
        return "minified file"
    if lower.endswith(GENERATED_SUFFIXES):
        return "generated file"
    return None


def _looks_minified(path: Path, size: int) -> bool:
    """A JS/TS file whose average line is very long is minified or bundled output."""
    if size < 20_000 or path.suffix not in {".js", ".mjs", ".cjs", ".ts"}:
        return False
    with path.open("rb") as handle:
        head = handle.read(65_536)
    return len(head) / (head.count(b"\n") + 1) > MINIFIED_LINE_LENGTH


def discover(
    root: Path,
    *,
    extensions: Iterable[str],
    max_file_bytes: int,
    extra_ignore_patterns: Iterable[str] = (),
) -> Discovery:
    """List the files under ``root`` that should be indexed, and why others are skipped.

    Args:
        root: The project root (resolved by ``resolve_project_root``).
        extensions: File extensions to index (with the dot, lower case).
        max_file_bytes: Larger files are skipped.
        extra_ignore_patterns: More gitignore-style patterns (from settings).

    Returns:
        The files to index (sorted by path) and the skipped files and unreadable folders with
        reasons. Files with an extension outside the filter are not reported individually (there
        would be thousands).
    """
    root = resolve_project_root(root)
    allowed = {ext.lower() for ext in extensions}
    listings = _LISTINGS
    key = (str(root), tuple(sorted(allowed)), max_file_bytes, tuple(extra_ignore_patterns))
    if listings is not None and key in listings:
        listed = listings[key]
        return replace(listed, files=list(listed.files), skipped=list(listed.skipped))
    result = _discover(root, allowed, max_file_bytes, key[3])
    if listings is not None:
        listings[key] = replace(result, files=list(result.files), skipped=list(result.skipped))
    return result


def _discover(root: Path, allowed: set[str], max_file_bytes: int, extra_ignore_patterns: Iterable[str]) -> Discovery:
    """``discover`` of a resolved root: its paths listed now, or as the current ``one_listing``
    block first listed them (each file's stat is taken now)."""
    from pipelines.parsing import language_for_path  # the parsers' package, only where files are listed
    listed = candidates(root)
    ignore_lines = list(extra_ignore_patterns)
    codememignore = root / ".codememignore"
    if codememignore.is_file():
        ignore_lines += codememignore.read_text(encoding="utf-8", errors="replace").splitlines()
    import pathspec

    ignore = pathspec.GitIgnoreSpec.from_lines(ignore_lines) if ignore_lines else None

    result = Discovery(git_aware=listed.git_aware)
    for folder in listed.unreadable:  # those skipped anyway (vendored, ignored) are not worth a line
        vendored = any(part in DEFAULT_EXCLUDED_DIRS for part in PurePosixPath(folder.path).parts)
        if not vendored and (ignore is None or not ignore.match_file(folder.path)):
            result.skipped.append(folder)
    for rel in listed.paths:
        suffix = os.path.splitext(rel)[1].lower()  # PurePosixPath.suffix, without building a path (0.5 s a kernel listing)
        if suffix not in allowed:
            continue
        reason = _default_skip_reason(rel)
        if reason is None and ignore is not None and ignore.match_file(rel):
            reason = "matched .codememignore"
        if reason is not None:
            result.skipped.append(SkippedFile(rel, reason))
            continue
        absolute = root / rel
        link = False
        try:
            stat = absolute.lstat()  # one system call for a plain file (the kernel's 55k files: ~2 s a listing with three)
            link = S_ISLNK(stat.st_mode)
            if link:
                target = absolute.resolve(strict=True)
                if not target.is_relative_to(root):
                    result.skipped.append(SkippedFile(rel, "symlink points outside the project root"))
                    continue
                stat = absolute.stat()
        except RuntimeError:  # symlink loop (Python < 3.13 raises RuntimeError)
            result.skipped.append(SkippedFile(rel, "symlink loop"))
            continue
        except FileNotFoundError:
            if link:
                result.skipped.append(SkippedFile(rel, "broken symlink"))
            continue  # listed, but not in the tree (deleted since git's index or the walk saw it)
        except OSError as exc:
            reason = "symlink loop" if exc.errno == 40 else f"cannot stat: {exc.strerror}"
            result.skipped.append(SkippedFile(rel, reason))
            continue
        if not S_ISREG(stat.st_mode):
            result.skipped.append(SkippedFile(rel, "not a regular file"))
            continue
        if stat.st_size > max_file_bytes:
            result.skipped.append(
                SkippedFile(rel, f"larger than the {max_file_bytes:,}-byte limit ({stat.st_size:,} bytes)")
            )
            continue
        try:
            minified = _looks_minified(absolute, stat.st_size)
        except FileNotFoundError:
            continue
        except OSError as exc:
            result.skipped.append(SkippedFile(rel, f"cannot read: {exc.strerror}"))
            continue
        if minified:
            result.skipped.append(SkippedFile(rel, "minified file"))
            continue
        language = language_for_path(rel)
        if language is None:
            continue
        result.files.append(SourceFile(rel, absolute, stat.st_size, stat.st_mtime_ns, language))
    return result


def confine_path(root: Path, candidate: str | Path) -> Path:
    """Resolve ``candidate`` (relative to root or absolute) and refuse anything outside root.

    Raises:
        DiscoveryError: if the resolved path (symlinks included) leaves the project root.
    """
    root = root.resolve()
    try:
        path = Path(candidate)
        resolved = (path if path.is_absolute() else root / path).resolve()
        resolved.exists()  # a name too long for the file system raises here, not in the caller
    except (OSError, RuntimeError, ValueError) as exc:  # NUL byte, symlink loop, name too long
        reason = "symlink loop" if isinstance(exc, RuntimeError) else (getattr(exc, "strerror", None) or str(exc))
        raise DiscoveryError(
            f"path {str(candidate)[:200]!r} cannot be resolved ({reason}) — give a plain path inside the project"
        ) from exc
    if resolved != root and not resolved.is_relative_to(root):
        raise DiscoveryError(
            f"path {str(candidate)!r} resolves outside the project root {root} — only files inside "
            "the project can be indexed or read"
        )
    return resolved

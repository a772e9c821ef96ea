"""Where a tool or command may write a file the caller names (exports, backups).

An output path is confined to the project (resolved, symlinks included), may not point into
codemem's own state (the state directory, the global memory directory) or into a ``.git``
directory, and may not replace an existing file unless the call says ``overwrite``. One export
with ``output_path=".codemem/memory.db"`` once replaced the memory ledger: every memory was lost.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from pipelines.discovery import DiscoveryError, confine_path


class OutputPathRefused(ValueError):
    """The output path is not a safe place to write; the message says what to do."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def checked_output_path(
    root: Path, raw: str, *, protected: Iterable[Path], overwrite: bool = False, directory: bool = False,
) -> Path:
    """The resolved path ``raw`` names, when a tool may write there.

    Args:
        root: The project root.
        raw: The caller's path (relative to ``root`` or absolute).
        protected: Folders that hold codemem's state (never written by an output).
        overwrite: The caller allows replacing an existing file.
        directory: The output is a directory (Markdown export, backup) rather than a file.

    Raises:
        OutputPathRefused: outside the project, into state or ``.git``, over an existing file
            without ``overwrite``, or a file where a directory is wanted (and the reverse).
    """
    try:
        path = confine_path(root, raw)
    except DiscoveryError as exc:
        raise OutputPathRefused(f"Path must be within project directory: {raw!r} — {exc}") from exc
    shown = repr(raw[:200])
    for folder in protected:
        folder = folder.expanduser().resolve()
        if _inside(path, folder):
            raise OutputPathRefused(
                f"{shown} is inside codemem's state directory {folder} — writing there could replace the memory "
                "ledger or an index; pass a path elsewhere in the project, e.g. exports/memories.jsonl"
            )
    relative = path.relative_to(root.resolve()).parts if path != root.resolve() else ()
    if ".git" in relative:
        raise OutputPathRefused(
            f"{shown} is inside a .git directory — codemem never writes there (hooks and objects live there); "
            "pass a path elsewhere in the project"
        )
    if directory:
        if path.exists() and not path.is_dir():
            raise OutputPathRefused(f"{shown} is a file — this output is a directory; pass a directory path")
        return path
    if path.is_dir():
        raise OutputPathRefused(f"{shown} is a directory — pass a file path, e.g. {raw.rstrip('/')}/memories.jsonl")
    if path.exists() and not overwrite:
        raise OutputPathRefused(
            f"{shown} already exists — pass overwrite=true (`--overwrite` on the command line) to replace it, "
            "or another path"
        )
    return path


def write_file_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, flushed to disk and
    renamed into place: a reader sees the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

"""Level-3 hydration (seed 003 US-007): the files a memory concerns, as they were at its commit.

Level 1 is a search hit's summary, level 2 the whole memory (``memory_get``), level 3 adds the files:
those its metadata names (``files``, ``files_modified``, ``file_path``, ``file``, ``test_file``,
``example_implementations``, ``source_document``, its anchors' files), else the files its commit
changed — each read with ``git show <sha>:<path>`` and cut to what is left of the response budget.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

from query_server.memory.stores import MemoryStores
from query_server.paging import CHARS_PER_TOKEN, ToolError, cut_text
from resources.memory.git_repo import GitNotesError
from resources.schemas.memory.notes import CommitFile, named_commit

FILE_KEYS = ("files", "files_modified", "file_path", "file", "test_file", "example_implementations", "source_document")
"""Metadata that names the files a memory is about (a path or a list of paths), in this order."""
MAX_FILES = 20
MIN_FILE_CHARS = 200
"""Below this much budget left, a file is listed without its content."""


def concerned_paths(metadata: Mapping[str, Any]) -> list[str]:
    """The project-relative paths a memory's metadata names, first mention first."""
    paths: list[str] = []
    for key in FILE_KEYS:
        value = metadata.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item.strip():
                paths.append(item.strip())
    for anchor in metadata.get("anchors") or []:
        if isinstance(anchor, dict) and isinstance(anchor.get("file_path"), str):
            paths.append(anchor["file_path"])
    return list(dict.fromkeys(paths))


def files_at_commit(stores: MemoryStores, metadata: Mapping[str, Any], memory_id: str, budget_tokens: int) -> list[CommitFile]:
    """The files ``metadata`` concerns at the commit it names, within ``budget_tokens``.

    Raises:
        ToolError: The memory names no commit, the commit is not in this clone, or there is no repository.
    """
    named = named_commit(metadata)
    if named is None:
        raise ToolError(f"memory {memory_id} is not tied to a commit — level-3 hydration shows files as they were at a memory's "
                        "commit; tie it with memory_update (metadata.commit_sha), or read the files as they are now")
    repo = stores.notes.repo()
    if repo is None:
        raise ToolError(f"{stores.settings.resolved_root()} is not in a git repository — files at a commit need one")
    try:
        sha = repo.commit(named[1])
        prefix = repo.prefix()
        paths = concerned_paths(metadata)
        if not paths:
            paths = [p.removeprefix(prefix) for p in repo.changed_files(sha, MAX_FILES * 5) if p.startswith(prefix)]
    except GitNotesError as exc:
        raise ToolError(f"memory {memory_id}: {exc}") from exc
    budget = max(0, budget_tokens) * CHARS_PER_TOKEN
    files: list[CommitFile] = []
    for raw in paths[:MAX_FILES]:
        path = posixpath.normpath(raw.replace("\\", "/"))
        if path.startswith(("../", "/")) or path == "..":
            files.append(CommitFile(path=raw, commit=sha, error="outside the project — not shown"))
            continue
        data = repo.show_file(sha, prefix + path)
        if data is None:
            files.append(CommitFile(path=path, commit=sha, error=f"not in commit {sha[:12]} (added later, renamed or removed)"))
            continue
        if b"\0" in data[:8_000]:
            files.append(CommitFile(path=path, commit=sha, error="a binary file — not shown"))
            continue
        if budget < MIN_FILE_CHARS:
            files.append(CommitFile(path=path, commit=sha, error=f"over the response budget — read it with `git show {sha[:12]}:{prefix + path}`"))
            continue
        text = data.decode("utf-8", "replace")
        hint = f"the rest: `git show {sha[:12]}:{prefix + path}`"
        shown, cut = cut_text(text, budget, hint)
        encoded = len(json.dumps(shown))
        if encoded > budget:  # escapes (newlines, quotes) make JSON longer than the text
            shown, cut = cut_text(text, max(0, budget * budget // encoded - len(hint) - 40), hint)
            encoded = len(json.dumps(shown))
        budget -= encoded + len(path) + 120
        files.append(CommitFile(path=path, commit=sha, content=shown, truncated=cut))
    return files

"""Real git repositories for the git notes tests: a bare remote and clones of it, without the user's
git configuration (codemem brings its own identity for notes commits)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def git(root: Path, *args: str) -> str:
    """Run git in ``root`` as a user with an identity; its stripped output."""
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True, capture_output=True, text=True,
    ).stdout.strip()


def isolate_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """No global or system git config, no identity in the environment."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)


def commit_file(root: Path, rel: str, text: str, message: str) -> str:
    """Write ``rel`` and commit it; the new commit's SHA."""
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)
    git(root, "add", rel)
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def remote_and_clones(base: Path, *names: str) -> tuple[Path, list[Path]]:
    """A bare repository with one commit on ``main`` and a clone of it per name (remote ``origin``)."""
    bare = base / "remote.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(bare))
    seed = base / "seed"
    git(base, "init", "-q", "-b", "main", str(seed))
    (seed / ".gitignore").write_text(".codemem/\n")
    commit_file(seed, "app.py", "def handler():\n    return 1\n", "first")
    git(seed, "push", "-q", str(bare), "main")
    clones = []
    for name in names:
        git(base, "clone", "-q", str(bare), str(base / name))
        clones.append(base / name)
    return bare, clones

"""GitPostCommit: after ``git commit``, attach the decisions recorded since the previous commit to the
new one as git notes (``refs/notes/cs/decisions``), without making git wait.

``codemem init --git-notes`` installs ``.git/hooks/post-commit`` (``query_server.claude_setup.git_hooks``),
which runs ``codemem hook GitPostCommit``. This module asks git for the new commit and its parent's
time (one ``git log``), looks in the ledger, read-only, for design memories of the decisions namespace
that name no commit and were recorded after the parent commit, and only when there are some starts a
detached ``query_server.hooks.notes_worker``, which ties them to the commit through the project's
owner (``notes_capture``). Standard library only (see ``query_server.hooks.dispatch``).
"""

import os
import subprocess
import sys

from query_server.hooks.common import BUSY_TIMEOUT_S, Project, spawn_detached
from resources.memory.ledger_reader import LedgerReader

GIT_TIMEOUT_S = 10


def _utc(stamp: str) -> str:
    """A git ISO 8601 time (any offset) in the ledger's form (UTC, microseconds), so strings compare."""
    from datetime import UTC, datetime

    return datetime.fromisoformat(stamp).astimezone(UTC).isoformat(timespec="microseconds")


def post_commit(project: Project, payload: dict) -> None:  # noqa: ARG001 - git passes no payload
    """Start the worker that ties the new commit's decisions to it, when there are any; return at once."""
    if not os.path.isfile(project.ledger_path):
        return
    done = subprocess.run(
        ["git", "-C", str(project.root), "log", "-2", "--first-parent", "--format=%H %cI", "HEAD"],
        capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
    )
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"git log failed: {done.stderr.strip()[-300:]}")
    commit = lines[0][0]
    since = _utc(lines[1][1]) if len(lines) > 1 else None
    reader = LedgerReader.open(project.ledger_path, BUSY_TIMEOUT_S, project.kept)
    if reader is None:
        return
    try:
        pending = reader.untied_decisions(since, 1)
    finally:
        reader.close()
    if not pending:
        return
    spawn_detached(project, [
        sys.executable, "-m", "query_server.hooks.notes_worker", "--commit", commit,
        "--project", str(project.root), "--state-dir", str(project.state_dir),
    ])

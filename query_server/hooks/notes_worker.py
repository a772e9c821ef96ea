"""The background half of the git post-commit hook: tie the decisions recorded since the previous
commit to the new one (``notes_capture`` through the project's owner), which writes their notes.

``query_server.hooks.post_commit`` starts it detached (``python -m query_server.hooks.notes_worker``,
output to ``<state>/logs/hooks-worker.log``) only when there are such decisions.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path


def capture(commit: str, project: Path, state_dir: Path) -> str:
    """Tie the decisions to ``commit``; returns what was done."""
    from query_server.ownership import ProjectHandle
    from query_server.tools import TOOLS
    from resources.schemas.memory.notes import NotesCaptureInput
    from resources.settings import Settings

    handle = ProjectHandle(Settings(project_root=project, state_dir=state_dir))
    try:
        result = handle.call(TOOLS["notes_capture"], NotesCaptureInput(commit=commit))
    finally:
        handle.close()
    done = f"tied {len(result.captured)} decision(s) to {result.commit[:12]} ({result.note_ref})"
    return done + "".join(f"; {error.get('memory_id', '')} {error['error']}" for error in result.errors[:5])


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments the hook passes and capture (a failure is one line in the worker log)."""
    parser = argparse.ArgumentParser(prog="python -m query_server.hooks.notes_worker")
    parser.add_argument("--commit", required=True)
    parser.add_argument("--project", required=True)
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args(argv)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        done = capture(args.commit, Path(args.project).resolve(), Path(args.state_dir).resolve())
    except Exception as exc:  # noqa: BLE001 - one line in the worker log, like the other hooks
        print(f"{stamp} GitPostCommit {args.commit[:12]}: failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"{stamp} GitPostCommit {args.commit[:12]}: {done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PreCompact and SessionEnd: record the session as a memory, without making Claude Code wait.

The hook answers nothing and returns at once; a detached ``query_server.hooks.worker`` process
reads the transcript (up to its size when the hook fired) and stores one session memory through
the normal memory_add/memory_update path. Standard library only (see ``query_server.hooks.dispatch``).
"""

import os
import sys

from query_server.hooks.common import Project, spawn_detached


def record_session(project: Project, payload: dict, event: str) -> None:
    """Start a detached worker that writes this session's memory; return at once."""
    if not project.indexed:
        return
    session_id = str(payload.get("session_id") or "")
    transcript = payload.get("transcript_path")
    if not session_id or not isinstance(transcript, str) or not transcript:
        return
    transcript = os.path.expanduser(transcript)
    try:
        size = os.stat(transcript).st_size
    except OSError:
        return
    detail = str(payload.get("trigger") or payload.get("reason") or "")
    argv = [
        sys.executable, "-m", "query_server.hooks.worker",
        "--event", event, "--session-id", session_id, "--transcript", transcript, "--upto", str(size),
        "--project", str(project.root), "--state-dir", str(project.state_dir), "--detail", detail,
    ]
    spawn_detached(project, argv)

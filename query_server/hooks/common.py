"""What every hook shares: the project and its state dir, the JSON in and out, error logging,
atomic writes, detached workers and the one-line rendering of a memory.

Standard library only (see ``query_server.hooks.dispatch``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

BUSY_TIMEOUT_S = 0.02
"""How long a hook's read waits for a writer's lock on the ledger or the manifest."""
LOG_MAX_BYTES = 1_000_000
_TITLE_KEYS = ("title", "pattern_name", "name", "test_name", "key", "requirement_id", "component_id")


class Project:
    """Where the project and its state dir are (the same rules as ``resources.settings``)."""

    def __init__(self, payload: dict) -> None:
        """Find the project from the environment, else the hook payload's ``cwd``, else the process's."""
        env = os.environ
        start = env.get("CODEMEM_PROJECT_ROOT") or env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd()
        root = Path(str(start)).expanduser().resolve()
        explicit = env.get("CODEMEM_STATE_DIR")
        if explicit:
            self.root = root
            self.state_dir = Path(explicit).expanduser().resolve()
        else:
            found = next((d for d in (root, *root.parents) if (d / ".codemem").is_dir()), None)
            self.root = found or root
            self.state_dir = self.root / ".codemem"
        self.ledger_path = self.state_dir / "memory.db"
        self.index_path = self.state_dir / "index.db"
        self.indexed = self.ledger_path.is_file() or self.index_path.is_file()
        self.hooks_dir = self.state_dir / "hooks"

    def relative(self, raw: str, cwd: str | None = None) -> str | None:
        """``raw`` as a repo-relative POSIX path, or None when it is outside the project."""
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = Path(cwd or self.root) / path
        path = Path(os.path.normpath(path))
        for candidate in (path, Path(os.path.realpath(path))):
            try:
                return candidate.relative_to(self.root).as_posix()
            except ValueError:
                continue
        return None


def _guarded_dirs(project: Project) -> list[str]:
    dirs = {os.path.normpath(project.state_dir), os.path.normpath(project.root / ".codemem")}
    dirs |= {os.path.realpath(d) for d in list(dirs)}
    return sorted(dirs)


def in_state_dir(project: Project, raw: str, cwd: str | None = None) -> bool:
    """True when the path ``raw`` (relative to ``cwd``) is the state dir or inside it."""
    text = raw.strip()
    for name in ("CLAUDE_PROJECT_DIR", "PWD", "HOME"):
        for form in (f"${{{name}}}", f"${name}"):
            if form in text:
                value = str(project.root) if name == "CLAUDE_PROJECT_DIR" else (cwd if name == "PWD" else os.path.expanduser("~"))
                text = text.replace(form, value or "")
    text = os.path.expanduser(text)
    if not text:
        return False
    path = text if os.path.isabs(text) else os.path.join(cwd or str(project.root), text)
    candidates = {os.path.normpath(path)}
    candidates.add(os.path.realpath(path))
    for guarded in _guarded_dirs(project):
        for candidate in candidates:
            if candidate == guarded or candidate.startswith(guarded.rstrip(os.sep) + os.sep):
                return True
    return False


# -- the hook contract: JSON on stdin, JSON on stdout, failures to a log ----------------------------


def read_payload() -> dict:
    """The hook JSON Claude Code writes on stdin ({} when there is none)."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    stream = getattr(sys.stdin, "buffer", None)
    raw = stream.read().decode("utf-8", "replace") if stream is not None else sys.stdin.read()
    if not raw.strip():
        return {}
    payload = json.loads(raw)
    if not isinstance(payload, dict):
        raise ValueError(f"hook input is a JSON {type(payload).__name__}, not an object")
    return payload


def write_answer(output: dict) -> None:
    """Answer Claude Code on stdout (ASCII JSON, \\u escapes: whatever the locale's encoding)."""
    sys.stdout.write(json.dumps(output))
    sys.stdout.flush()


def additional_context(event: str, text: str) -> dict:
    """The documented answer that adds ``text`` to Claude's context."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def log_error(project: Project | None, event: str, exc: BaseException) -> None:
    """One line in ``<state>/logs/hooks.log`` (only when the state dir exists); never raises."""
    try:
        if project is None or not project.state_dir.is_dir():
            return
        logs = project.state_dir / "logs"
        logs.mkdir(exist_ok=True)
        log = logs / "hooks.log"
        try:
            if log.stat().st_size > LOG_MAX_BYTES:
                os.replace(log, logs / "hooks.log.1")
        except OSError:
            pass
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {event or '-'} {message}\n")
    except Exception:  # noqa: BLE001 - logging must never break the hook
        pass


# -- files and processes ----------------------------------------------------------------------------


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds (the ledger's format)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="microseconds")


def session_key(session_id: str) -> str:
    """A file-name-safe key for a session id (UUIDs pass through unchanged)."""
    clean = re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:64]
    if clean != session_id:
        import zlib

        clean = f"{clean[:48]}-{zlib.crc32(session_id.encode()):08x}"
    return clean or "unknown"


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (readers see the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def spawn_detached(project: Project, argv: list[str]) -> None:
    """Start ``argv`` detached (new session, stdin /dev/null, output to ``<state>/logs/hooks-worker.log``)."""
    logs = project.state_dir / "logs"
    logs.mkdir(exist_ok=True)
    log = str(logs / "hooks-worker.log")
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    try:
        os.posix_spawn(
            sys.executable, argv, env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
    except (AttributeError, NotImplementedError):  # no posix_spawn/setsid here: the portable way
        import subprocess

        with open(log, "ab") as out:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                             start_new_session=True, close_fds=True)


# -- memory rendering -------------------------------------------------------------------------------


def _first_line(text: str, limit: int) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def memory_label(memory_type: str, content: str, metadata: str | dict, limit: int = 160) -> str:
    """``[type] Title: first line`` for a memory (``metadata`` as stored JSON or decoded)."""
    meta = metadata
    if isinstance(metadata, str):
        try:
            meta = json.loads(metadata)
        except ValueError:
            meta = {}
    if not isinstance(meta, dict):
        meta = {}
    kind = memory_type
    if memory_type == "design" and meta.get("design_type"):
        kind = f"design/{meta['design_type']}"
    elif memory_type == "test_history" and meta.get("status"):
        kind = f"test {meta['status']}"
    title = next((str(meta[k]) for k in _TITLE_KEYS if isinstance(meta.get(k), str | int) and str(meta[k]).strip()), "")
    if memory_type == "session":
        title = ""
    head = _first_line(content, limit)
    if title and not head.startswith(title):
        head = f"{_first_line(title, 80)}: {head}"
    return f"[{kind}] {head}"

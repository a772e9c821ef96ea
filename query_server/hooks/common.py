"""What every hook shares: the project and its state dir, the JSON in and out, error logging,
atomic writes, detached workers and the one-line rendering of a memory.

Standard library only (see ``query_server.hooks.dispatch``), and not ``re``, ``json``, ``pathlib``
or ``enum`` either: under ``python -S`` importing them costs a hook ~10 ms, a third of a bare
interpreter start. Paths are ``os.path`` strings; JSON goes through ``json_loads``/``json_dumps``.
The modules a hook process imports do without ``from __future__ import annotations`` (importing
``__future__`` costs ~0.3 ms): an annotation that names what only type checkers import is quoted.
"""

import os
import sys
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs a hook ~4 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from resources.sqlite_readonly import KeptConnections

    _Scanner = Callable[[str, int], tuple[object, int]]  # (text, start) -> (value, end), as json's scanner
    _Encoder = Callable[[object, int], Iterable[str]]  # (value, indent level 0) -> chunks, as json's encoder

BUSY_TIMEOUT_S = 0.02
"""How long a hook's read waits for a writer's lock on the ledger or the manifest."""
LOG_MAX_BYTES = 1_000_000
STATE_FILES = ("memory.db", "index.db", "memory-server-copy.db", "index-in-postgres")
"""Any of these in the state dir means codemem ran for the project: its ledger and manifest, or in
server mode the query server's copy of the ledger (``ledger_reader.SERVER_COPY_FILE``) and the
manifest's marker (``manifest_reader.SERVER_MARKER``)."""
_TITLE_KEYS = ("title", "pattern_name", "name", "test_name", "key", "requirement_id", "component_id")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class Project:
    """Where the project and its state dir are (the same rules as ``resources.settings``)."""

    def __init__(self, payload: dict, environ: dict | None = None, cwd: str | None = None) -> None:
        """Find the project from the environment, else the hook payload's ``cwd``, else the process's.

        ``environ`` and ``cwd`` stand for the hook process's (``os.environ``, ``os.getcwd()``) where
        another process answers it (``query_server.hooks.relay_server``). Every path is an
        absolute, resolved ``str`` (``os.path``: see the module's docstring).
        """
        env = os.environ if environ is None else environ
        start = (env.get("CODEMEM_PROJECT_ROOT") or env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd")
                 or cwd or os.getcwd())
        root = os.path.realpath(os.path.expanduser(str(start)))
        explicit = env.get("CODEMEM_STATE_DIR")
        if explicit:
            self.root = root
            self.state_dir = os.path.realpath(os.path.expanduser(explicit))
        else:
            self.root = _holding_state_dir(root) or root
            self.state_dir = os.path.join(self.root, ".codemem")
        self._ledger_path: str | None = None
        self.index_path = os.path.join(self.state_dir, "index.db")
        self.indexed = any(os.path.isfile(os.path.join(self.state_dir, name)) for name in STATE_FILES)
        self.hooks_dir = os.path.join(self.state_dir, "hooks")
        self.kept: KeptConnections | None = None
        """The connections a long-lived process keeps open between hooks (the hook relay's); None in a
        hook process, which opens and closes its own."""

    @property
    def ledger_path(self) -> str:
        """The ledger file to read (``resources.memory.ledger_reader.ledger_file``: in server mode the
        query server's copy), found when first asked: only the hooks that read it import its reader."""
        if self._ledger_path is None:
            from resources.memory.ledger_reader import ledger_file

            self._ledger_path = ledger_file(self.state_dir)
        return self._ledger_path

    @ledger_path.setter
    def ledger_path(self, path: str) -> None:
        self._ledger_path = path

    def relative(self, raw: str, cwd: str | None = None) -> str | None:
        """``raw`` as a repo-relative POSIX path (``.`` for the root), or None when it is outside the project."""
        path = os.path.normpath(os.path.join(cwd or self.root, os.path.expanduser(raw)))
        prefix = self.root.rstrip(os.sep) + os.sep
        for candidate in (path, os.path.realpath(path)):
            if candidate == self.root:
                return "."
            if candidate.startswith(prefix):
                return candidate[len(prefix):].replace(os.sep, "/")
        return None


def _holding_state_dir(directory: str) -> str | None:
    """``directory`` or the nearest directory above it that holds a ``.codemem`` directory."""
    while not os.path.isdir(os.path.join(directory, ".codemem")):
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    return directory


def _guarded_dirs(project: Project) -> list[str]:
    dirs = {os.path.normpath(project.state_dir), os.path.normpath(os.path.join(project.root, ".codemem"))}
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


# JSON through CPython's C accelerator ``_json``, which ``json`` itself uses: importing ``json`` imports
# ``re`` (~10 ms of a hook under -S), the accelerator alone a fraction of a millisecond.

_WHITESPACE = " \t\n\r"
"""What JSON counts as whitespace around a value (``json.decoder.WHITESPACE``)."""


def _c_json() -> "tuple[_Scanner, Callable[[], _Encoder]] | None":
    """CPython's JSON accelerator (``_json``): (the scanner ``json.loads`` uses, a factory of the encoder
    ``json.dumps`` uses), or None where it is missing or answers a probe otherwise than ``json`` would."""
    try:
        import _json

        class Defaults:  # what json.JSONDecoder() hands make_scanner
            strict = True
            object_hook = object_pairs_hook = None
            parse_float, parse_int = float, int
            parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__

        def encoder() -> "_Encoder":  # a new one per call: its circular-reference markers
            return _json.make_encoder({}, _unserializable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)

        scanner = _json.make_scanner(Defaults)
        probe, value = '{"a": [1, 2.5, null, true, "\\u00e9"]}', {"a": [1, 2.5, None, True, "\u00e9"]}
        if scanner(probe + " ", 0) != (value, len(probe)) or "".join(encoder()(value, 0)) != probe:
            return None
        return scanner, encoder
    except Exception:  # noqa: BLE001 - another implementation or signature: json does it all
        return None


def _unserializable(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_C_JSON = _c_json()


def json_loads(text: str) -> object:
    """``json.loads(text)``: the same values, and the same errors (which ``json`` itself raises)."""
    if _C_JSON is not None and isinstance(text, str) and not text.startswith("\ufeff"):
        try:
            value, end = _C_JSON[0](text, len(text) - len(text.lstrip(_WHITESPACE)))
        except (StopIteration, ValueError):
            pass
        else:
            if not text[end:].lstrip(_WHITESPACE):
                return value
    import json  # bad input (or no accelerator): json's own answer and error

    return json.loads(text)


def json_dumps(value: object) -> str:
    """``json.dumps(value)`` (ASCII, default separators), byte for byte; the same errors."""
    if _C_JSON is not None:
        try:
            return "".join(_C_JSON[1]()(value, 0))
        except (TypeError, ValueError):
            pass
    import json

    return json.dumps(value)


def read_payload(data: bytes | None = None) -> dict:
    """The hook JSON Claude Code writes on stdin, or ``data`` when it was read already ({} when
    there is none)."""
    if data is not None:
        raw = data.decode("utf-8", "replace")
    elif sys.stdin is None or sys.stdin.isatty():
        return {}
    else:
        stream = getattr(sys.stdin, "buffer", None)
        raw = stream.read().decode("utf-8", "replace") if stream is not None else sys.stdin.read()
    if not raw.strip():
        return {}
    payload = json_loads(raw)
    if not isinstance(payload, dict):
        raise ValueError(f"hook input is a JSON {type(payload).__name__}, not an object")
    return payload


def write_answer(output: dict) -> None:
    """Answer Claude Code on stdout (ASCII JSON, \\u escapes: whatever the locale's encoding)."""
    sys.stdout.write(json_dumps(output))
    sys.stdout.flush()


def additional_context(event: str, text: str) -> dict:
    """The documented answer that adds ``text`` to Claude's context."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def log_error(project: Project | None, event: str, exc: BaseException) -> None:
    """One line in ``<state>/logs/hooks.log`` (only when the state dir exists); never raises."""
    try:
        if project is None or not os.path.isdir(project.state_dir):
            return
        logs = os.path.join(project.state_dir, "logs")
        make_dir(logs)
        log = os.path.join(logs, "hooks.log")
        try:
            if os.stat(log).st_size > LOG_MAX_BYTES:
                os.replace(log, os.path.join(logs, "hooks.log.1"))
        except OSError:
            pass
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {event or '-'} {message}\n")
    except Exception:  # noqa: BLE001 - logging must never break the hook
        pass


# -- files and processes ----------------------------------------------------------------------------


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds (the ledger's format:
    ``datetime.now(UTC).isoformat(timespec="microseconds")``, without importing datetime)."""
    now_ns = time.time_ns()
    seconds, micros = divmod(now_ns // 1_000, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}+00:00"


def session_key(session_id: str) -> str:
    """A file-name-safe key for a session id (UUIDs pass through unchanged)."""
    clean = "".join(ch for ch in session_id if ch in _KEY_CHARS)[:64]
    if clean != session_id:
        import zlib

        clean = f"{clean[:48]}-{zlib.crc32(session_id.encode()):08x}"
    return clean or "unknown"


def edited_file(project: Project, session_id: str) -> str:
    """Where the files a session edited are noted, one per line (PostToolUse writes, UserPromptSubmit reads)."""
    return os.path.join(project.hooks_dir, f"edited-{session_key(session_id)}.txt")


def make_dir(path: str, *, parents: bool = False) -> None:
    """Create the directory ``path`` unless it exists (``Path.mkdir(parents=parents, exist_ok=True)``)."""
    if parents:
        os.makedirs(path, exist_ok=True)
        return
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def read_text(path: str) -> str:
    """The UTF-8 text of the file ``path`` (read through ``os``: a text-mode ``open`` builds three
    objects and looks the codec up, a tenth of a millisecond of a hook)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        size = os.fstat(fd).st_size + 1  # one read for a file that is not growing (no 1 MiB buffer)
        while chunk := os.read(fd, size):
            chunks.append(chunk)
            size = 1 << 16
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def write_atomic(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` in one step (readers see the old file or the new one); its
    directory is created when missing."""
    tmp = f"{path}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileNotFoundError:
        make_dir(os.path.dirname(path), parents=True)
        fd = os.open(tmp, flags, 0o666)
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def spawn_detached(project: Project, argv: list[str]) -> None:
    """Start ``argv`` detached (new session, stdin /dev/null, output to ``<state>/logs/hooks-worker.log``)."""
    logs = os.path.join(project.state_dir, "logs")
    make_dir(logs)
    log = os.path.join(logs, "hooks-worker.log")
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
            meta = json_loads(metadata)
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

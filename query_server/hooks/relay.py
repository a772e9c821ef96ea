"""A hook's fast path: the codemem server that runs for the project answers it.

A hook process pays the interpreter's start, then its own imports (``os``, ``sqlite3``, the hook
modules: ~5 ms under ``python -S``) and its reads of the ledger and the manifest (~5–25 ms), two
to three times a bare ``python -c pass`` of a regular install. While ``codemem mcp`` or
``codemem serve`` runs for the project, it listens on ``<state>/hooks.sock``
(``query_server.hooks.relay_server``) and runs the same hook functions in its own process, where
all of that is loaded and open: the hook process only sends Claude Code's JSON there and copies
the answer to stdout. Without a server (no socket, a stale one, another state dir, a timeout) the
hook runs here as before (``query_server.hooks.dispatch``); both give the same answer.

This module imports only ``sys``, ``posix`` and ``_socket``: under ``python -S`` even ``os``
costs a hook ~3 ms, more than the whole exchange with the server.
"""

import posix
import sys

SOCKET_FILE = "hooks.sock"
"""The relay's socket in the state dir."""
RELAYED_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PostToolUse", "PreToolUse"})
"""The events the server answers: the ones Claude Code waits for (SessionEnd and PreCompact only
start a detached worker, which the hook process does at the same cost)."""
PROTOCOL = b"codemem-hook/1"
ANSWERED = b"="
"""The first byte of a reply that is the hook's answer (the stdout that follows, maybe empty);
any other reply, or none, means: answer it here."""
REPLY_TIMEOUT_S = 2.0
"""How long a hook waits for the server (connect, send, answer) before it answers by itself."""
_UNSET = b""


def request(event: str, raw: bytes, environ: dict | None = None, cwd: bytes | None = None) -> bytes:
    """The bytes a hook sends: protocol, event, the environment the project is found by, the
    process's directory and Claude Code's JSON, separated by NUL (which none of them holds)."""
    env = posix.environ if environ is None else environ
    return b"\0".join((
        PROTOCOL, event.encode(), env.get(b"CODEMEM_PROJECT_ROOT", _UNSET), env.get(b"CLAUDE_PROJECT_DIR", _UNSET),
        posix.getcwdb() if cwd is None else cwd, raw,
    ))


def socket_path(environ: dict | None = None) -> bytes | None:
    """Where the project's server would listen, as this hook finds the project (the variables of
    ``query_server.hooks.common.Project``, else the process's directory); None when
    ``CODEMEM_STATE_DIR`` names the state dir elsewhere (the hook answers by itself)."""
    env = posix.environ if environ is None else environ
    if env.get(b"CODEMEM_STATE_DIR"):
        return None
    root = env.get(b"CODEMEM_PROJECT_ROOT") or env.get(b"CLAUDE_PROJECT_DIR") or posix.getcwdb()
    return root.rstrip(b"/") + b"/.codemem/" + SOCKET_FILE.encode()


def ask_server(event: str, raw: bytes) -> bytes | None:
    """The server's answer to the hook of ``event`` (stdout bytes, maybe empty), or None when no
    server answered it: the caller then runs the hook itself."""
    path = socket_path()
    if path is None or event not in RELAYED_EVENTS:
        return None
    try:
        posix.stat(path)  # no server has run here: not even _socket is imported
    except OSError:
        return None
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(REPLY_TIMEOUT_S)
        sock.connect(path)  # no file, a stale one, a path too long for a socket: OSError
        sock.sendall(request(event, raw))
        sock.shutdown(_socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # socket.timeout is an OSError too
        return None
    finally:
        sock.close()
    reply = b"".join(chunks)
    return reply[1:] if reply[:1] == ANSWERED else None


def run_and_exit(argv: list) -> None:
    """A hook process's whole life: answer (``main``), flush stdout and stderr, and leave at once.
    ``posix._exit`` skips the interpreter's teardown of every module and object, ~3 ms of a hook
    that takes ~20 ms; by then every file the hook wrote is closed and every worker it starts is
    started. A failed flush (Claude Code stopped reading) changes nothing: hooks exit 0."""
    code = main(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    posix._exit(code)


def main(argv: list) -> int:
    """Run the hook of ``argv[0]``: answered by the project's server when one runs, else here."""
    event = argv[0] if argv else ""
    raw = None
    if event in RELAYED_EVENTS and sys.stdin is not None and not sys.stdin.isatty():
        raw = sys.stdin.buffer.read()
        answer = ask_server(event, raw)
        if answer is not None:
            sys.stdout.buffer.write(answer)
            sys.stdout.flush()
            return 0
    from query_server.hooks.dispatch import main as answer_here

    return answer_here(argv, raw)

"""The embedded graph's server: the ``redis-server`` child process that falkordblite starts.

Finding a server a killed owner left running (reused when it answers, cleaned up when stale),
killing orphans, compacting the append-only file, and stopping the server when its last client
closes. The store that talks to it is :class:`resources.graph.falkor.FalkorGraphStore`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from resources.graph.model import GraphUnavailable

logger = logging.getLogger(__name__)

DB_FILENAME = "graph.rdb"
"""redis ``dbfilename`` inside ``db_dir``: the registry is ``graph.rdb.settings``; the data itself
lives in ``appendonlydir/`` (an RDB file of this name appears only after an explicit SAVE)."""

SERVER_CONFIG: dict[str, str] = {
    "appendonly": "yes",
    "appendfsync": "everysec",
    "aof-use-rdb-preamble": "yes",
    "aof-load-truncated": "yes",
    "auto-aof-rewrite-percentage": "100",
    "auto-aof-rewrite-min-size": "16mb",
    "save": '""',
}
"""``redis-server`` settings on top of redislite's defaults (unix socket only, no TCP port)."""

_STOP_TIMEOUT_S = 60.0
COMPACT_AOF_BYTES = 4 * 1024 * 1024
"""Rewrite the AOF (to an RDB base) on close, waited for, when its increment exceeds this, so the
next open loads a snapshot instead of replaying many writes (a larger bound than on open: a
server's shutdown has ~0.3 s, and a rewrite of a few MB takes ~0.1 s)."""
OPEN_COMPACT_AOF_BYTES = 1024 * 1024
"""Rewrite the AOF on open, in the server's background, when its increment exceeds this: opening
replays the increment's writes (~0.1 s per MB on a 2-core machine, the snapshot ~0.15 s in all),
and a 5-file change appends ~0.3 MB, so without it every small index's graph start grew by
~30 ms until the increment reached ``COMPACT_AOF_BYTES`` (0.5 s at 4 MB)."""


def _load_drivers_first() -> None:
    """Import falkordb's Python driver (and its asyncio half) before anything of ``redislite``.

    Importing ``redislite`` otherwise looks for that driver with site-packages taken off
    ``sys.path`` (so that a ``falkordb.so`` it ships beside it does not shadow the driver), and an
    import in another thread during that window fails: ``codemem index`` started the graph server
    in the background while it parsed, and a file failed with ``ModuleNotFoundError: No module named
    'tree_sitter_python'``. With the driver in ``sys.modules``, redislite uses it and leaves
    ``sys.path`` alone. Every import of ``redislite`` goes through this.
    """
    import falkordb  # noqa: F401
    import falkordb.asyncio  # noqa: F401


def import_falkordblite() -> Any:
    """falkordblite's ``FalkorDB`` client class (raises ``GraphUnavailable`` when not installed)."""
    try:
        _load_drivers_first()
        from redislite.falkordb_client import FalkorDB
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise GraphUnavailable(
            "falkordblite is not installed: `pip install falkordblite` (Python >= 3.12), "
            "or set NEO4J_URI to use a Neo4j server"
        ) from exc
    return FalkorDB


def start_errors() -> tuple[type[Exception], ...]:
    """The exceptions redislite raises when its server does not start."""
    _load_drivers_first()
    from redislite.client import RedisLiteException, RedisLiteServerStartError

    return (RedisLiteException, RedisLiteServerStartError)


def forget_failed_clients(db_dir: Path) -> None:
    """Drop redislite's exit hook of a client whose server did not start: at exit it would try to
    reach the dead server and print a traceback."""
    import gc

    _load_drivers_first()
    from redislite.client import RedisMixin

    for obj in gc.get_objects():
        if isinstance(obj, RedisMixin) and getattr(obj, "dbdir", None) == str(db_dir):
            atexit.unregister(obj._cleanup)  # noqa: SLF001 - redislite's own hook
            run_dir = getattr(obj, "redis_dir", None)
            if run_dir and Path(run_dir).parent == Path(tempfile.gettempdir()):
                shutil.rmtree(run_dir, ignore_errors=True)
            obj.pidfile = None  # and its __del__: nothing left to stop
            obj.redis_dir = None
            obj.cleanupregistry = False
            obj.running = False


def read_pid(pidfile: Path) -> int:
    """The pid a server's pid file holds (0 when it is missing or unreadable)."""
    try:
        return int(pidfile.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def server_process(pid: int, socket_path: str) -> psutil.Process | None:
    """The live (non-zombie) redis-server with this pid serving ``socket_path``, if any."""
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    if "redis-server" not in cmdline or (socket_path and socket_path not in cmdline):
        return None
    return proc


def _answers(socket_path: str) -> bool:
    client = redis.Redis(
        unix_socket_path=socket_path,
        socket_timeout=5,
        socket_connect_timeout=5,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        client.ping()
        return True
    except redis.BusyLoadingError:
        return True
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _wait_gone(proc: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return True
        time.sleep(0.02)
    return False


def _kill(proc: psutil.Process) -> None:
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return
        if _wait_gone(proc, wait):
            return


def remove_server_files(registry: Path, pidfile: str, socket_path: str) -> None:
    """Remove a server's registry record, pid file, socket and redislite temp directory."""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(registry.read_text()).get("pidfile") == pidfile:
            registry.unlink()
    for name in (pidfile, socket_path):
        if name:
            with contextlib.suppress(OSError):
                Path(name).unlink()
    run_dir = Path(socket_path).parent if socket_path else None
    if (
        run_dir is not None
        and run_dir.parent == Path(tempfile.gettempdir())
        and run_dir.name.startswith("tmp")
        and (run_dir / "redis.config").exists()
    ):
        shutil.rmtree(run_dir, ignore_errors=True)


def recover_stale_server(db_dir: Path) -> str:
    """Make ``db_dir`` openable after a killed owner.

    Reads the redislite registry. If it names a live redis-server that answers on its socket,
    it is left alone (opening reuses it: the killed owner's latest writes are in its memory).
    Otherwise the record is stale: a hung server is killed, and the record, pid file, socket and
    temp directory are removed, so the next open starts a fresh server from the AOF.

    Args:
        db_dir: The store directory.

    Returns:
        ``"none"`` (no record), ``"reuse"`` (live server) or ``"cleaned"`` (stale record removed).
    """
    registry = db_dir / f"{DB_FILENAME}.settings"
    if not registry.exists():
        _kill_orphans(db_dir)
        return "none"
    try:
        record = json.loads(registry.read_text())
        pidfile, socket_path = str(record["pidfile"]), str(record["unixsocket"])
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            registry.unlink()
        return "cleaned"
    proc = server_process(read_pid(Path(pidfile)), socket_path)
    if proc is not None and Path(socket_path).exists() and _answers(socket_path):
        return "reuse"
    if proc is not None:
        logger.warning("killing unresponsive graph server pid %s", proc.pid)
        _kill(proc)
    remove_server_files(registry, pidfile, socket_path)
    _kill_orphans(db_dir)
    return "cleaned"


def _kill_orphans(db_dir: Path) -> int:
    """Kill graph servers running in ``db_dir`` that no registry names: an owner killed while its
    server was starting leaves one behind (daemonized before it was recorded). Only one process
    may own ``db_dir``, so any such server is an orphan on the same AOF."""
    killed = 0
    target = str(db_dir)
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] != "redis-server" or proc.cwd() != target:
                continue
            logger.warning("killing orphaned graph server pid %s in %s", proc.pid, db_dir)
            _kill(proc)
            killed += 1
        except (psutil.Error, OSError):
            continue
    return killed


def _aof_increment(client: Any) -> int:
    info = client.info("persistence")
    if not info.get("aof_enabled"):
        return 0
    return int(info.get("aof_current_size", 0)) - int(info.get("aof_base_size", 0))


def compact_aof(client: Any, wait_s: float = 0.0, min_bytes: int = COMPACT_AOF_BYTES) -> bool:
    """Start an AOF rewrite if the increment is at least ``min_bytes``; optionally wait for it to finish.

    Args:
        client: The redis client of the embedded server.
        wait_s: Seconds to wait for the rewrite (0: return at once).
        min_bytes: The increment below which nothing is rewritten.

    Returns:
        True if a rewrite was started.
    """
    if _aof_increment(client) < min_bytes:
        return False
    with contextlib.suppress(redis.ResponseError):  # "already in progress"
        client.bgrewriteaof()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            break
        time.sleep(0.02)
    return True


def stop_server(db: Any, registry: Path, client_name: str) -> None:
    """Stop the embedded server (data saved) unless other clients use it; clean up its files.

    Runs from :meth:`FalkorGraphStore.close` or a finalizer, so it must not reference the store.
    """
    client = db.client
    pidfile, socket_path = client.pidfile or "", client.socket_file or ""
    proc = server_process(read_pid(Path(pidfile)), socket_path) if pidfile else None
    client.set_retry(Retry(NoBackoff(), 0))  # a shutdown drops the connection: don't retry
    try:
        if proc is not None:
            others = [c for c in client.client_list() if c.get("name") != client_name]
            if others:
                logger.info("graph server still has %d other client(s); leaving it running", len(others))
                proc = None
            else:
                compact_aof(client, wait_s=_STOP_TIMEOUT_S)
                with contextlib.suppress(redis.ConnectionError):
                    client.execute_command("SHUTDOWN", "NOW", "FORCE")
                if not _wait_gone(proc, _STOP_TIMEOUT_S):
                    logger.warning("graph server pid %s did not stop; killing it", proc.pid)
                    _kill(proc)
                remove_server_files(registry, pidfile, socket_path)
    except redis.RedisError as exc:
        logger.warning("graph server shutdown failed (%s); killing it", exc)
        if proc is not None:
            _kill(proc)
            remove_server_files(registry, pidfile, socket_path)
    finally:
        client.connection_pool.disconnect()
        # Neutralize redislite's own atexit/__del__ cleanup (its SHUTDOWN retries for seconds).
        client.pidfile = None
        client.redis_dir = None
        client.cleanupregistry = False
        client.running = False

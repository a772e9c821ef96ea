"""``codemem repair``: check every state file of a project and fix what is broken.

Checks: each SQLite file (the memory ledger ``memory.db``, the index manifest ``index.db``, the
embedding cache, Dagster's run/event/schedule storage) with ``PRAGMA integrity_check``; each
embedded vector collection by opening it and counting its points; the embedded graph by starting
its server and pinging it.

Fixes, never dropping a memory silently:
- the ledger (the system of record): restored from the newest ``codemem backup`` found under the
  project (a directory with ``BACKUP.json`` and ``memory.db``) or given with ``--backup``; without
  one, the corrupted file is kept aside as ``memory.db.corrupt-<time>`` and every row SQLite can
  still read is salvaged into a new ledger (``iterdump``, statement by statement). Either way the
  corrupted file stays for inspection and the report says how many memories came back;
- derived state is rebuilt: the manifest, a vector collection or the graph is moved aside
  (``.corrupt-<time>``) and the index is rebuilt from the files (``codemem index --repair``), the
  memory projections from the ledger; a corrupted embedding cache is dropped; corrupted Dagster
  storage is moved aside (run history only).

It needs the stores to itself: it refuses while a codemem server of the project runs. The checks
themselves are ``query_server.cli.state_files``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from query_server.cli.common import InputError, console, failure, main, open_handle, settings_for
from query_server.cli.state_files import LEDGER, Finding, disk_full, scan, sqlite_problem

PENDING = "repair-pending.json"
"""Written before a repair moves a store aside, removed after its rebuild: a repair that stopped
half-way is finished by the next one."""


# -- fixes -------------------------------------------------------------------------------------


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S")


def _aside(path: Path) -> Path:
    """Move ``path`` (and a SQLite file's -wal/-shm) to ``<path>.corrupt-<time>``; the new path."""
    target = path.with_name(f"{path.name}.corrupt-{_stamp()}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.corrupt-{_stamp()}-{n}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target


def _drop(path: Path) -> None:
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if p.exists():
            p.unlink()


def latest_backup(root: Path) -> Path | None:
    """The newest ``codemem backup`` directory under ``root`` (by its BACKUP.json's time)."""
    best: tuple[str, Path] | None = None
    skip = {".git", ".codemem", "node_modules", ".venv", "venv", "__pycache__"}
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name == "BACKUP.json" and (folder / LEDGER).is_file():
                try:
                    created = str(json.loads(entry.read_text()).get("created_at", ""))
                except (OSError, ValueError):
                    continue
                if sqlite_problem(folder / LEDGER) is None and (best is None or created > best[0]):
                    best = (created, folder)
            elif entry.is_dir() and not entry.is_symlink() and entry.name not in skip and depth < 3:
                stack.append((entry, depth + 1))
    return best[1] if best else None


def salvage_sqlite(source: Path, target: Path) -> dict[str, int]:
    """Copy what SQLite can still read of ``source`` into a new database ``target``: its dump,
    statement by statement, until the dump itself fails. Returns rows per table."""
    rows: dict[str, int] = {}
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dest = sqlite3.connect(target)
    try:
        try:
            for statement in src.iterdump():
                try:
                    dest.execute(statement)
                except sqlite3.DatabaseError:
                    continue
                if statement.startswith("INSERT INTO "):
                    table = statement.split(" ", 3)[2].strip('"')
                    rows[table] = rows.get(table, 0) + 1
        except sqlite3.DatabaseError:
            pass  # the dump stops at the first unreadable page: keep what came before
        if not rows:  # the schema itself was unreadable: table by table
            for (name,) in _quiet(src, "SELECT name FROM sqlite_master WHERE type='table'"):
                got = _quiet(src, f'SELECT * FROM "{name}"')
                rows[name] = len(got)
        dest.commit()
    finally:
        dest.close()
        src.close()
    return rows


def _quiet(conn: sqlite3.Connection, sql: str) -> list[Any]:
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.DatabaseError:
        return []


def _repair_ledger(finding: Finding, root: Path, backup: Path | None) -> bool:
    """Restore or salvage the ledger; True when the memory projections must be rebuilt."""
    from resources.memory.ledger import Ledger

    path = Path(finding.path)
    source = backup or latest_backup(root)
    aside = _aside(path)
    finding.details["corrupted_file_kept_at"] = str(aside)
    if source is not None:
        shutil.copy2(source / LEDGER, path)
        finding.action = f"restored from the backup in {source}; the corrupted ledger is kept at {aside}"
        finding.details["backup"] = str(source)
    else:
        salvage = path.with_name(path.name + ".salvage")
        _drop(salvage)
        salvaged = salvage_sqlite(aside, salvage)
        if salvage.exists() and salvage.stat().st_size > 0:
            salvage.rename(path)
        else:  # nothing readable: the ledger starts empty (the damaged file stays aside)
            _drop(salvage)
        finding.details["salvaged_rows"] = salvaged
        finding.action = (f"no backup found: salvaged {salvaged.get('memories', 0)} memories "
                          f"({sum(salvaged.values())} rows) into a new ledger; the corrupted one is kept at {aside}")
    ledger = Ledger(path)  # creates what the salvage could not bring back (schema, indexes)
    try:
        finding.details["memories"] = sum(c["total"] for c in ledger.counts().values())
        with ledger._transaction() as conn:  # noqa: SLF001 - everything goes through the outbox again
            conn.execute("UPDATE memories SET sync_status='pending'")
    except sqlite3.DatabaseError as exc:
        finding.details["note"] = f"the restored ledger did not open cleanly: {exc}"
    finally:
        ledger.close()
    return True


@main.command()
@click.option("--project", default=".", show_default=True, help="The indexed repository.")
@click.option("--check", "check_only", is_flag=True, help="Only report what is broken; change nothing.")
@click.option("--backup", "backup_dir", default=None, help="Restore a corrupted ledger from this `codemem backup` directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
def repair(project: str, check_only: bool, backup_dir: str | None, as_json: bool) -> None:
    """Check every state file (ledger, manifest, caches, vector collections, graph, Dagster storage)
    and restore or rebuild what is corrupted, keeping damaged files aside."""
    from query_server.owner_lock import OwnerLock

    settings = settings_for(project)
    state_dir = settings.resolved_state_dir()
    backup = Path(backup_dir).resolve() if backup_dir else None
    if backup is not None and not (backup / LEDGER).is_file():
        raise InputError(f"{backup_dir} holds no {LEDGER} — pass a directory written by `codemem backup`")
    full = disk_full(state_dir)
    if full:
        raise click.ClickException(f"not repairing: {full}")
    lock = OwnerLock(state_dir)
    if not lock.try_acquire():
        raise click.ClickException("a codemem process (server, mcp or index) is using this project — stop it, "
                                   "then run `codemem repair` again")
    lock.release()

    try:
        report = _repair(settings, backup, check_only)
    except click.ClickException:
        raise
    except Exception as exc:  # one line, never a traceback
        raise failure("repair", exc) from exc
    broken = report["broken"]
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        if not broken:
            console.print(f"[green]all {report['checked']} state files are sound — nothing to repair[/green]")
        for f in broken:
            console.print(f"[red]{f['store']}[/red] {f['path']}: {f['problem']}")
            console.print(f"  → {f['action'] or 'run `codemem repair` without --check to fix it'}")
    if broken and check_only:
        raise SystemExit(1)


def _repair(settings: Any, backup: Path | None, check_only: bool) -> dict[str, Any]:
    root, state_dir = settings.resolved_root(), settings.resolved_state_dir()
    findings = scan(state_dir)
    broken = [f for f in findings if f.problem]
    pending_file = state_dir / PENDING
    pending = json.loads(pending_file.read_text()) if pending_file.exists() else {}
    if pending:  # a repair moved files aside and did not finish its rebuild
        broken.append(Finding("rebuild", str(pending_file), "an earlier repair did not finish rebuilding",
                              "rebuilt now" if not check_only else None))
    reindex, rebuild = bool(pending.get("reindex")), bool(pending.get("rebuild"))
    if not check_only:
        for finding in broken:
            path = Path(finding.path)
            if finding.store == "ledger":
                pending_file.write_text(json.dumps({"reindex": reindex, "rebuild": True}))
                rebuild |= _repair_ledger(finding, root, backup)
            elif finding.store == "manifest":
                finding.action = f"moved aside to {_aside(path)}; the index is rebuilt from the files"
                reindex = True
            elif finding.store == "embedding cache":
                _drop(path)
                finding.action = "dropped (a cache: vectors are computed again when needed)"
            elif finding.store == "dagster storage":
                finding.action = f"moved aside to {_aside(path)} (Dagster run history only)"
            elif finding.store in ("vector collection", "graph"):
                pending_file.write_text(json.dumps({"reindex": True, "rebuild": True}))
                finding.action = f"moved aside to {_aside(path)}; rebuilt from the index and the ledger"
                reindex = rebuild = True
            if finding.store == "manifest":
                pending_file.write_text(json.dumps({"reindex": True, "rebuild": rebuild}))
        if reindex or rebuild:
            _rebuild(str(root), reindex=reindex, rebuild=rebuild, broken=broken)
        pending_file.unlink(missing_ok=True)
    return {"project": str(root), "state_dir": str(state_dir), "checked": len(findings),
            "broken": [asdict(f) for f in broken], "reindexed": reindex, "projections_rebuilt": rebuild,
            "check_only": check_only}


def _rebuild(project: str, *, reindex: bool, rebuild: bool, broken: list[Finding]) -> None:
    from pipelines.stages import repair_index
    from resources.schemas.tools import IndexInput
    from resources.vectors.store import VectorStoreError

    handle = open_handle(project)
    try:
        if reindex:  # drop what the manifest does not know, then write every file again (plain run: seconds)
            try:
                repair_index(handle.backend.ctx)
            except VectorStoreError:  # the code collection was moved aside: the re-index creates it
                pass
            report = handle.backend.index(IndexInput(embed=True, reembed=True))
            for f in broken:
                if f.store in ("manifest", "vector collection", "graph"):
                    f.details["files_indexed"] = report["files_indexed"]
        if rebuild:
            result = handle.backend.memory.rebuild_projections()
            for f in broken:
                if f.store == "ledger":
                    f.details["projected"] = result.get("projected")
    finally:
        handle.close()

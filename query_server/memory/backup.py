"""Backup and restore of the project's memory ledger (and the embedding cache beside it).

A backup is a consistent online copy into a new directory inside the project; a restore
replaces the ledger with a backup's (keeping the current one beside it) and rebuilds the memory
projections from it.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from query_server.memory.stores import MemoryStores
from query_server.paging import ToolError
from resources.memory.ledger import Ledger
from resources.private_files import make_private_dir, make_private_file
from resources.sqlite import copy_database, remove_sidecars
from resources.schemas.memory import BackupInput, BackupResult, RestoreInput, RestoreResult


def backup_ledger(stores: MemoryStores, request: BackupInput) -> BackupResult:
    """A consistent online copy of the ledger (and the embedding cache) into a project directory."""
    target = stores.output_path(request.path, directory=True)
    if target.exists() and any(target.iterdir()):
        raise ToolError(f"{request.path} is not empty — pass a new directory for the backup")
    make_private_dir(target)  # a backup holds every memory: only its owner may read it
    stores.ledger.backup_to(target / "memory.db")
    cache = getattr(stores.embedder, "cache", None)
    if cache is not None and Path(str(getattr(cache, "path", ":memory:"))).is_file():  # (not a PostgreSQL cache)
        copy_database(Path(cache.path), target / "embeddings.db")
    counts = Ledger(target / "memory.db")
    try:
        total = sum(c["total"] for c in counts.counts().values())
    finally:
        counts.close()
    make_private_file(target / "BACKUP.json").write_text(json.dumps({
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "memories": total,
        "embedding_model": stores.embedder.model_id, "restore": "codemem restore <this directory>",
    }, indent=2))
    files = {p.name: p.stat().st_size for p in sorted(target.iterdir()) if p.is_file()}
    return BackupResult(path=str(target), files=files, memories=total)


def restore_ledger(stores: MemoryStores, request: RestoreInput) -> RestoreResult:
    """Replace the ledger with a backup's (the current one is kept beside it), then rebuild the
    memory projections from it."""
    source = stores.confined(request.path) / "memory.db"
    if not source.is_file():
        raise ToolError(f"{request.path} holds no memory.db — pass a directory written by `codemem backup`")
    import shutil
    import sqlite3

    check = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        if check.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            raise ToolError(f"{source} is corrupt (integrity_check failed) — pick another backup")
    finally:
        check.close()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    live = stores.ledger.path
    if live is None:  # server mode: the rows replaced in PostgreSQL, the current ones kept in the state dir
        kept = stores.settings.resolved_state_dir() / f"memory.db.pre-restore-{stamp}"
        with stores.projector.write_lock:
            stores.ledger.backup_to(kept)
            stores.ledger.load_from(source)
            stores.projector.refresh_generation()
        stores.refresh_hook_copy()
        return _rebuilt(stores, kept)
    kept = live.with_name(f"memory.db.pre-restore-{stamp}")
    with stores.projector.write_lock:
        stores.ledger.backup_to(kept)
        stores.ledger.close()
        remove_sidecars(live)
        tmp = live.with_name(f".memory.db.restore-{stamp}")
        shutil.copyfile(source, tmp)
        os.replace(tmp, live)
        stores.ledger = Ledger(live)
        stores.projector.ledger = stores.ledger
        stores.scopes.set_project(stores.ledger)
        stores.projector.refresh_generation()
    return _rebuilt(stores, kept)


def _rebuilt(stores: MemoryStores, kept: Path) -> RestoreResult:
    """After a restore: the projections rebuilt from the restored ledger."""
    stores.ledger.set_meta("embedding_model", stores.embedder.model_id)
    report = stores.rebuild_projections()
    total = sum(c["total"] for c in stores.ledger.counts().values())
    return RestoreResult(restored_memories=total, previous_ledger=str(kept), projection=report)

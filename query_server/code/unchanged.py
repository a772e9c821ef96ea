"""``codemem index`` with nothing to do, answered before the stores open.

A no-change index used to cost a full start: the service's imports, every store opened (the
model's cache, the vector collections' handles, the memory sync), a Dagster recorder started and
let go, and all of it closed again, to find in the manifest that nothing changed. This answers
from the manifest and the ledgers alone (``pipelines.dagster.run.answer_from_manifest``), under
the project's owner lock, with none of that loaded. Anything else goes to the full run: another
process owns the stores (that server indexes), git notes are a live store here (every run syncs
them), or there may be work.
"""

from __future__ import annotations

from typing import Any

from resources.memory.git_repo import live_notes_on
from resources.settings import Settings

from query_server.owner_lock import OwnerLock


def answer_unchanged(settings: Settings, *, embed: bool) -> dict[str, Any] | None:
    """The report of an index of ``settings``' project that has nothing to do, the full run's
    ``index`` tool answer when nothing changed; None when the full run must answer (see the
    module)."""
    from pipelines.dagster.run import answer_from_manifest

    lock = OwnerLock(settings.resolved_state_dir())
    if not lock.try_acquire(shared=settings.shared_stores):  # (shared stores: beside the servers of this state dir)
        return None
    try:
        if live_notes_on(settings.resolved_root()):
            return None
        report = answer_from_manifest(settings, embed=embed)
        return report.as_dict() if report is not None else None
    finally:
        lock.release()

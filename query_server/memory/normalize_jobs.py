"""Normalization jobs: deduplicate, detect orphans, refresh embeddings, clean up and swap the
memory projections (``resources.memory.normalization``) in a background thread, one at a time,
with the job's phase and percent to poll."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from datetime import UTC, datetime

import structlog

from query_server.memory.stores import MemoryStores
from query_server.paging import ToolError
from resources.memory.ledger_model import LedgerError
from resources.memory.normalization import Normalizer
from resources.schemas.memory import NormalizationJob, NormalizeMemoryInput, NormalizeStatusInput

log = structlog.get_logger("codemem.memory")
LAST_NORMALIZATION = "last_normalization"
"""Ledger meta key: the latest normalization job, recorded when it starts and when it ends (any
replica's normalize_status reads it)."""
NORMALIZATION = "normalization"
"""What one process of a project does at a time with its ledger (``Ledger.alone``)."""


class NormalizationJobs:
    """The normalization jobs of this process (the latest one's outcome is kept in the ledger)."""

    def __init__(self, stores: MemoryStores) -> None:
        """Normalize the memories of ``stores``."""
        self.stores = stores
        self._jobs: dict[str, NormalizationJob] = {}
        self._job_lock = threading.Lock()

    def normalize_memory(self, request: NormalizeMemoryInput) -> NormalizationJob:
        """Start normalization in the background (one at a time); returns the job at once. With
        ``restore_links``, put back the links an earlier run removed instead (one transaction, done
        when it returns)."""
        if request.restore_links is not None:
            return self._restore_links(request.restore_links)
        with self._job_lock:
            running = next((j for j in self._jobs.values() if j.status == "running"), None)
            if running is not None:
                raise ToolError(
                    f"normalization {running.job_id} is already running ({running.phase}, {running.percent:.0f}%) — "
                    "poll normalize_status with its job_id"
                )
            alone = self._alone_or_refuse()  # (server mode: not on another replica either)
            job = NormalizationJob(
                job_id=str(uuid.uuid4()), status="running", dry_run=request.dry_run, phase="starting",
                started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            self._jobs[job.job_id] = job
            try:
                self.stores.ledger.set_meta(LAST_NORMALIZATION, job.model_dump_json())  # (what another replica shows)
            except BaseException:
                alone.close()
                del self._jobs[job.job_id]
                raise

        def progress(phase: str, percent: float) -> None:
            job.phase, job.percent = phase, round(percent, 1)

        def run() -> None:
            normalizer = Normalizer(
                self.stores.ledger, self.stores.projector, state_dir=self.stores.settings.resolved_state_dir(),
                threshold=self.stores.settings.memory_dedup_threshold, progress=progress,
                code_exists=self.stores.code_links() if self.stores.code_links else None,
                memory_exists=lambda memory_id: self.stores.scopes.locate(memory_id) is not None,
            )
            try:
                report = normalizer.run(phases=request.phases, dry_run=request.dry_run)
                job.report = report.as_dict()
                job.status, job.phase, job.percent = "done", "done", 100.0
                self.stores.wake.set()
            except Exception as exc:  # noqa: BLE001 - the job reports its failure
                log.exception("normalization failed", operation="normalize")
                job.errors.append(f"{type(exc).__name__}: {exc}")
                job.status = "failed"
            finally:
                job.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
                try:
                    self.stores.ledger.set_meta(LAST_NORMALIZATION, job.model_dump_json())
                finally:
                    alone.close()

        threading.Thread(target=run, name="codemem-normalize", daemon=True).start()
        return job

    def _alone_or_refuse(self) -> contextlib.ExitStack:
        """Hold "normalization" on the ledger until the returned stack is closed; a ``ToolError``
        when another process (a replica) normalizes it now."""
        held = contextlib.ExitStack()
        try:
            held.enter_context(self.stores.ledger.alone(NORMALIZATION, wait=False))
        except LedgerError as exc:
            raise ToolError(
                f"a normalization is running in another codemem process of this project ({exc}) — "
                "normalize_status shows it; start another when it is done"
            ) from exc
        return held

    def _recorded(self, last: str) -> NormalizationJob:
        """The job another process recorded: still running there, or interrupted (its process
        stopped: no process holds the normalization)."""
        job = NormalizationJob.model_validate_json(last)
        if job.status == "running":
            try:
                with self.stores.ledger.alone(NORMALIZATION, wait=False):
                    job.status = "failed"
                    job.errors.append("interrupted: the process running it stopped — nothing was swapped; run it again")
            except LedgerError:
                pass  # running in another process
        return job

    def _restore_links(self, request_id: str) -> NormalizationJob:
        """The orphaned links removed by the normalization with ``request_id``, put back from the
        audit; refused while a normalization runs (its swap could remove them again)."""
        if not self.stores.ledger.unlinked_by(request_id):
            raise ToolError(f"no normalization removed links under {request_id!r} — use the restore_links id of its report")
        with self._job_lock:
            running = next((j for j in self._jobs.values() if j.status == "running"), None)
            if running is not None:
                raise ToolError(f"normalization {running.job_id} is running — restore the links when it is done")
            started = datetime.now(UTC).isoformat(timespec="seconds")
            with self._alone_or_refuse():
                restored = self.stores.ledger.restore_links(request_id)
            job = NormalizationJob(
                job_id=str(uuid.uuid4()), status="done", dry_run=False, phase="done", percent=100.0, started_at=started,
                finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
                report={"links_restored": restored, "restored_from": request_id},
            )
            self._jobs[job.job_id] = job
        self.stores.wake.set()
        return job

    def normalize_status(self, request: NormalizeStatusInput) -> NormalizationJob:
        """A normalization job's phase, percent, errors and report (the latest when no id is given)."""
        if request.job_id is None:
            if self._jobs:
                return max(self._jobs.values(), key=lambda j: j.started_at)
            last = self.stores.ledger.meta(LAST_NORMALIZATION)
            if last:
                return self._recorded(last)
            raise ToolError("no normalization has run yet — start one with normalize_memory (dry_run=true to preview)")
        job = self._jobs.get(request.job_id)
        if job is None:
            last = self.stores.ledger.meta(LAST_NORMALIZATION)
            if last and json.loads(last).get("job_id") == request.job_id:
                return self._recorded(last)
            raise ToolError(
                f"unknown normalization job {request.job_id!r} — jobs are kept while the server runs; "
                "normalize_status without job_id shows the latest"
            )
        return job

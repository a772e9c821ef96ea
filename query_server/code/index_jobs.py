"""Index work off the caller's thread: the background index and dense embedding the server starts,
index_directory and reindex as polled jobs (``job_status``), index_file in the call, and the
paths they take (confined to the project). Every run goes through the service's one index entry
point (``CodeMemService._run_index``), which alone takes the index lock."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from datetime import UTC, datetime
from collections.abc import Iterator
from typing import Any

import structlog

from pipelines.design.ingest import embed_pending_documents
from pipelines.discovery import DiscoveryError, confine_path
from pipelines.indexer import embed_pending
from query_server.code.lookups import CodeLookups
from query_server.import_phase import wait_for_end
from query_server.paging import ToolError, cap_report
from resources.manifest import INDEX_RUN, JOBS_KEPT
from resources.manifest_store import ManifestError
from resources.schemas.code import CALLABLE_KINDS
from resources.schemas.tools import (
    IndexDirectoryInput,
    IndexFileInput,
    IndexFileResult,
    IndexInput,
    JobState,
    JobStatusInput,
    ReindexInput,
)

log = structlog.get_logger("codemem.service")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


HEARTBEAT_S = 5.0
"""How often a running job's state (its progress) is recorded in the manifest, where any process reads it."""


def _job_lock_name(job_id: str) -> str:
    """What the process running a job holds while it runs (``Manifest.alone``): a recorded job
    nobody holds is not running anywhere."""
    return f"index job {job_id}"


class IndexJobs(CodeLookups):
    """Background index runs and embedding, and the index jobs callers poll."""

    def __init__(self, service: Any) -> None:
        """Start nothing yet; the threads are started on demand."""
        super().__init__(service)
        self._dense_thread: threading.Thread | None = None
        self._index_thread: threading.Thread | None = None

    def background_threads(self) -> list[threading.Thread]:
        """The background index and embedding threads started (``CodeMemService.close`` joins them)."""
        return [thread for thread in (self._index_thread, self._dense_thread) if thread is not None]

    def start_background_embedding(self) -> None:
        """Fill missing dense vectors in a background thread (search works meanwhile)."""
        if not self.settings.dense_embeddings:
            return
        if self._dense_thread is not None and self._dense_thread.is_alive():
            return

        def run() -> None:
            try:
                embed_pending(self.ctx, progress=lambda *_: self.foreground.pause_for_foreground(), stop=self._stop)
                embed_pending_documents(
                    self.service.design.stores(), stop=self._stop, guard=self._as_an_index_run,
                    progress=lambda *_: self.foreground.pause_for_foreground(),
                )
            except Exception:  # noqa: BLE001 - background work logs and stops
                log.exception("background embedding failed", operation="embed_pending")

        self._dense_thread = threading.Thread(target=run, name="codemem-dense", daemon=True)
        self._dense_thread.start()

    @contextlib.contextmanager
    def _as_an_index_run(self) -> Iterator[None]:
        """What every run that ingests documents holds: the service's index lock and, in server
        mode, the project's index-run lock among replicas."""
        with self.service._index_lock, self.manifest.alone(INDEX_RUN, stop=self._stop):  # noqa: SLF001 - the service's own lock
            yield

    @property
    def background_index_running(self) -> bool:
        """True while a background index run (``start_background_index``) is going."""
        return self._index_thread is not None and self._index_thread.is_alive()

    def start_background_index(self) -> None:
        """Bring the index up to date in the background (the MCP server does it at start-up).

        Unchanged files cost a stat and a hash, so this is cheap on a current index; on a new
        one, symbols become searchable by words batch by batch and dense vectors follow.
        """
        if self._index_thread is not None and self._index_thread.is_alive():
            return

        def run() -> None:
            wait_for_end()  # `codemem mcp` imports the MCP SDK meanwhile: two threads importing at once can see a module half-initialized
            try:
                self.service.index(IndexInput(embed=False), stop=self._stop)
            except Exception:  # noqa: BLE001 - background work logs and stops
                log.exception("background index failed", operation="index")

        self._index_thread = threading.Thread(target=run, name="codemem-index", daemon=True)
        self._index_thread.start()

    def _scope_path(self, raw: str, *, want_dir: bool | None = None, allow_vanished: bool = False) -> str:
        """A repo-relative path for ``raw`` (confined to the project), '' for the root.

        ``allow_vanished`` accepts a path that is no longer on disk but is indexed (an index of
        it removes it from the stores)."""
        root = self.settings.resolved_root()
        try:
            resolved = confine_path(root, raw)
        except DiscoveryError as exc:
            raise ToolError("Path must be within project directory — " + str(exc)) from exc
        if not resolved.exists():
            rel = resolved.relative_to(root).as_posix()
            indexed = self.manifest.file(rel) is not None or any(p.startswith(rel + "/") for p in self.manifest.paths())
            if allow_vanished and indexed:
                return rel
            raise ToolError(f"path does not exist: {raw} — give a path inside {root}")
        if want_dir is True and not resolved.is_dir():
            raise ToolError(f"not a directory: {raw} — use index_file for a single file")
        if want_dir is False and not resolved.is_file():
            raise ToolError(f"not a file: {raw} — use index_directory for a directory")
        rel = resolved.relative_to(root).as_posix()
        return "" if rel == "." else rel

    def start_index_job(self, kind: str, **options: Any) -> JobState:
        """Run an index in a background thread; the returned job is polled with ``job_status``."""
        job = JobState(job_id=uuid.uuid4().hex[:12], kind=kind, status="queued", started_at=_now_iso())

        def progress(phase: str, done: int, total: int) -> None:
            job.status, job.phase, job.done, job.total = "running", phase, done, total
            job.percent = round(100.0 * done / total, 1) if total else 0.0

        over, recording = threading.Event(), threading.Lock()
        running = contextlib.ExitStack()  # held while it runs: another process tells a live job from a dead one
        running.enter_context(self.manifest.alone(_job_lock_name(job.job_id), wait=False))

        def record(attempts: int = 1) -> None:  # the state where any process (a replica, the next server) finds it
            with recording:  # (the heartbeat's last write cannot land after the final one)
                finished = over.is_set()  # (read before the copy: a copy of a running job is never stored as finished)
                stored = job.model_copy()
                stored.report = cap_report(stored.report)
                for attempt in range(attempts):
                    try:
                        self.manifest.save_job(job.job_id, stored.model_dump_json(), finished=finished, at=time.time())
                        return
                    except Exception as exc:  # noqa: BLE001 - the job goes on; job_status in this process still answers
                        log.warning("an index job's state could not be recorded", job_id=job.job_id, error=str(exc))
                        if attempt + 1 < attempts:
                            time.sleep(1.0)

        def beat() -> None:
            while not over.wait(HEARTBEAT_S):
                record()

        try:
            record()
        except BaseException:
            running.close()
            raise
        self.jobs[job.job_id] = job  # (only once it holds its lock: a job that could not start is not left queued)
        threading.Thread(target=beat, name=f"codemem-job-{job.job_id}-heartbeat", daemon=True).start()

        def run() -> None:
            try:
                report = self.service._run_index(progress=progress, stop=self._stop, **options)  # noqa: SLF001
                job.report = report.as_dict()
                job.status = "failed" if report.failed else "done"
                if report.failed:
                    job.error = report.failure_summary()
            except Exception as exc:  # noqa: BLE001 - the job reports it
                log.exception("index job failed", operation=kind, job_id=job.job_id)
                job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                job.finished_at = _now_iso()
                if job.status == "done":
                    job.percent = 100.0
                over.set()
                try:
                    record(attempts=5)
                finally:
                    running.close()

        threading.Thread(target=run, name=f"codemem-job-{job.job_id}", daemon=True).start()
        copy = job.model_copy()
        copy.report = cap_report(copy.report)
        return copy

    def index_directory(self, request: IndexDirectoryInput) -> JobState:
        """Start indexing a directory (incremental unless ``force``) as a background job."""
        scope = self._scope_path(request.directory_path, want_dir=True)
        return self.start_index_job(
            "index_directory", only_paths=[scope], force=request.force,
            extensions=request.extensions, exclude=request.exclude,
        )

    def reindex(self, request: ReindexInput) -> JobState:
        """Start a re-index: ``changed`` is incremental, ``full`` re-processes everything in scope."""
        scope = self._scope_path(request.directory_path, want_dir=True)
        full = request.scope == "full"
        return self.start_index_job(
            "reindex", only_paths=[scope], force=full, reembed=full and scope == "" and not request.extensions and not request.exclude,
            extensions=request.extensions, exclude=request.exclude,
        )

    def index_file(self, request: IndexFileInput) -> IndexFileResult:
        """Index one file now (short work: runs in the call) and report what it extracted."""
        rel = self._scope_path(request.file_path, want_dir=False)
        report = self.service._run_index(only_paths=[rel], force=request.force)  # noqa: SLF001
        for path, reason in report.skipped:
            if path == rel:
                return IndexFileResult(status="skipped", file_path=rel, reason=reason)
        for path, error in report.failed:
            if path == rel:
                raise ToolError(f"indexing {rel} failed: {error}")
        if report.files_indexed == 0 and report.files_unchanged == 0:
            return IndexFileResult(
                status="skipped", file_path=rel,
                reason="not an indexed kind of file (extension filter, ignore rules or default skips)",
            )
        kinds = [s.kind for s in self.manifest.find_symbols_in(rel)]
        imports = len(self.manifest.refs_of([rel]).get(rel, {}).get("imports", []))
        return IndexFileResult(
            status="indexed" if report.files_indexed else "unchanged", file_path=rel,
            functions_extracted=sum(k in CALLABLE_KINDS for k in kinds),
            classes_extracted=sum(k not in CALLABLE_KINDS for k in kinds),
            imports_extracted=imports,
        )

    def job_status(self, request: JobStatusInput) -> JobState:
        """A background job's state (phase, percent, and the report when it is over)."""
        job = self.jobs.get(request.job_id or "")
        if job is not None:
            return job.model_copy()
        recorded = self.manifest.job(request.job_id) if request.job_id else None
        if recorded is None:
            raise ToolError(
                f"Job not found: {request.job_id!r} — job ids come from index_directory or reindex (the last "
                f"{JOBS_KEPT} finished jobs are kept); omit job_id for the overall statistics"
            )
        state, finished, heartbeat_at = recorded
        job = JobState.model_validate_json(state)
        if not finished:
            try:
                with self.manifest.alone(_job_lock_name(job.job_id), wait=False):  # held by no process: it ended or stopped
                    again = self.manifest.job(job.job_id)  # (it may have ended between the read and the lock)
                    if again is not None and again[1]:
                        return JobState.model_validate_json(again[0])
                    since = datetime.fromtimestamp(heartbeat_at, UTC).isoformat(timespec="seconds")
                    job.status = "failed"
                    job.error = (f"interrupted: the process running this job stopped (last recorded at {since}) — "
                                 "what it indexed is kept; start it again (index_directory or reindex) to finish")
            except ManifestError:
                pass  # running in another process (a replica): its last recorded progress
        return job

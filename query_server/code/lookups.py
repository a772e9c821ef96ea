"""What every code tool shares: the stores of the ``CodeMemService`` (read through it, so each
tool sees the service's state as it is now: the index run in progress, the background jobs) and
the lookups the tools make in them — dense coverage, the index job running, code points'
payloads, and a code hit (snippet, docstring, provenance) from a point.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, NamedTuple

from pipelines.indexer import CODE_COLLECTION
from pipelines.parsing import EXTENSIONS
from resources.schemas.tools import CodeHit, JobState, Provenance

SUPPORTED_LANGUAGES = frozenset(EXTENSIONS.values())
SNIPPET_LINES = 30
SUMMARY_LINES = 8
"""Lines of code in a ``detail="summary"`` code hit (``full``: ``SNIPPET_LINES``)."""
SUMMARY_DOC_CHARS = 300


def being_rebuilt(job: JobState) -> str:
    """Why something indexed may be missing now, and when to ask again."""
    return (f"the index is being rebuilt ({job.kind} job {job.job_id}, {job.percent:.0f}% done) — "
            "retry when index_status(job_id) says done")


class FileVersion(NamedTuple):
    """A file as its code points' hits report it: its indexed content hash, when it was indexed,
    and whether the file on disk differs from it."""

    content_hash: str
    indexed_at: str
    stale: bool


class CodeLookups:
    """The stores of one project, as its ``CodeMemService`` holds them, and the lookups every code
    tool makes in them."""

    def __init__(self, service: Any) -> None:
        """Use the stores and the state of ``service`` (a ``CodeMemService``)."""
        self.service = service

    @property
    def settings(self) -> Any:
        return self.service.settings

    @property
    def vectors(self) -> Any:
        return self.service.vectors

    @property
    def graph(self) -> Any:
        return self.service.graph

    @property
    def manifest(self) -> Any:
        return self.service.manifest

    @property
    def embedder(self) -> Any:
        return self.service.embedder

    @property
    def embedder_status(self) -> Any:
        return self.service.embedder_status

    @property
    def ctx(self) -> Any:
        return self.service.ctx

    @property
    def foreground(self) -> Any:
        return self.service.foreground

    @property
    def jobs(self) -> dict[str, JobState]:
        return self.service.jobs

    @property
    def background_index_progress(self) -> tuple[str, int, int] | None:
        return self.service.background_index_progress

    @property
    def _stop(self) -> threading.Event:
        return self.service._stop  # noqa: SLF001 - the service's stop event, set by its close

    def _running_job(self) -> JobState | None:
        """The background index job in progress, if any."""
        return next((job for job in list(self.jobs.values()) if job.status in ("queued", "running")), None)

    def _dense_coverage(self) -> tuple[int, int, float]:
        done, total = self.manifest.dense_counts()
        return done, total, (done / total if total else 0.0)

    def _payloads(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Code points' payloads by id; a point gone meanwhile (a concurrent re-index) is absent."""
        return {hit.id: hit.payload for hit in self.vectors.retrieve(CODE_COLLECTION, ids)}

    def _version(self, path: str, payload: dict[str, Any], cache: dict[str, FileVersion]) -> FileVersion:
        """The version of the file a code point belongs to, as the manifest indexed it (a point is
        rewritten only when what it holds of its symbol changed: ``pipelines.index_writes.
        write_vectors``; it carries no file version of its own, but a point of an earlier release
        does, read where the manifest has no row), and whether the file on disk differs from it."""
        if path in cache:
            return cache[path]
        state = self.manifest.file(path)
        indexed = state.content_hash if state is not None else str(payload.get("content_hash") or "")
        indexed_at = state.indexed_at if state is not None else str(payload.get("indexed_at") or "")
        absolute = self.settings.resolved_root() / path
        try:
            stat = absolute.stat()
            if state is not None and state.mtime_ns == stat.st_mtime_ns and state.size == stat.st_size:
                stale = False
            else:
                stale = hashlib.sha256(absolute.read_bytes()).hexdigest() != indexed
        except OSError:
            stale = True
        cache[path] = FileVersion(indexed, indexed_at, stale)
        return cache[path]

    def _to_hit(
        self, pid: str, score: float, payload: dict[str, Any], versions: dict[str, FileVersion], *, detail: str = "full"
    ) -> CodeHit:
        code = payload.get("code") or ""
        lines = code.splitlines()
        keep = SUMMARY_LINES if detail == "summary" else SNIPPET_LINES
        snippet = "\n".join(lines[:keep])
        cut = len(lines) > keep or bool(payload.get("code_truncated"))
        if cut:
            snippet += f"\n… [{len(lines) - keep if len(lines) > keep else 'more'} lines cut — read {payload.get('file_path')}:{payload.get('start_line')}-{payload.get('end_line')}]"
        docstring = payload.get("docstring")
        version = self._version(payload.get("file_path", ""), payload, versions)
        if detail == "summary" and docstring:
            first = docstring.strip().split("\n\n", 1)[0]
            short = first if len(first) <= SUMMARY_DOC_CHARS else first[:SUMMARY_DOC_CHARS].rsplit(" ", 1)[0] + " …"
            cut = cut or short != docstring.strip()
            docstring = short
        return CodeHit(
            id=pid,
            kind=payload.get("kind", ""),
            name=payload.get("name", ""),
            qualified_name=payload.get("qualified_name", ""),
            file_path=payload.get("file_path", ""),
            start_line=int(payload.get("start_line", 0)),
            end_line=int(payload.get("end_line", 0)),
            language=payload.get("language", ""),
            signature=payload.get("signature", ""),
            docstring=docstring,
            score=round(float(score), 6),
            snippet=snippet,
            next=(f"get_symbol(symbol={pid!r}, include_code=true) returns the whole symbol" if cut else None),
            provenance=Provenance(
                content_hash=version.content_hash,
                indexed_at=version.indexed_at,
                stale=version.stale,
            ),
        )


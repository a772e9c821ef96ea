"""The service layer: the code tools as plain methods over the project's stores.

MCP tools, HTTP routes and CLI commands are thin wrappers over ``CodeMemService``; a process
that does not own the project's embedded stores uses ``query_server.ownership.RemoteService``,
which offers the same methods over loopback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

import structlog

from pipelines.dagster.project import OwnedStores
from pipelines.design.derive import symbols_by_qualified_name
from pipelines.discovery import DiscoveryError, confine_path
from pipelines.indexer import CODE_COLLECTION, IndexContext, IndexReport, Progress, embed_pending, index_project
from resources.manifest import Manifest
from pipelines.parsing import EXTENSIONS, parse_source
from pipelines.records import embedding_text, file_id, graph_label
from resources.vectors import sparse
from resources.code_similarity import STRUCTURE_COSINE_FLOOR, Candidate, score_candidates
from resources.private_files import make_private_dir
from resources.ranking import minmax_fuse
from resources.schemas.tools import (
    CodeHit,
    CodeSearchInput,
    CodeSearchResult,
    DuplicateHit,
    FindDuplicatesInput,
    FindDuplicatesResult,
    GetRelatedInput,
    GetRelatedResult,
    GetSymbolInput,
    GetSymbolResult,
    GraphQueryInput,
    GraphQueryResult,
    HealthResult,
    IndexDirectoryInput,
    IndexFileInput,
    IndexFileResult,
    IndexInput,
    IndexStatusResult,
    JobState,
    JobStatusInput,
    Provenance,
    ReindexInput,
    RelatedEntity,
)
from resources.settings import Settings
from resources.vectors.store import PayloadFilter, VectorHit, VectorStoreError

from query_server.foreground import ForegroundGate
from query_server.paging import CHARS_PER_TOKEN, MAX_RESPONSE_TOKENS, ToolError, cap_report, cut_text, estimate_tokens
from query_server.paging import decode_cursor as _decode_cursor
from query_server.paging import encode_cursor as _encode_cursor

log = structlog.get_logger("codemem.service")

SUPPORTED_LANGUAGES = frozenset(EXTENSIONS.values())
SNIPPET_LINES = 30
SUMMARY_LINES = 8
"""Lines of code in a ``detail="summary"`` code hit (``full``: ``SNIPPET_LINES``)."""
SUMMARY_DOC_CHARS = 300


def _being_rebuilt(job: JobState) -> str:
    """Why something indexed may be missing now, and when to ask again."""
    return (f"the index is being rebuilt ({job.kind} job {job.job_id}, {job.percent:.0f}% done) — "
            "retry when index_status(job_id) says done")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class CodeMemService:
    """The code tools for one project, over stores this process owns."""

    def __init__(self, settings: Settings) -> None:
        """Open the project's stores (embedded by default, servers when configured)."""
        from resources.embeddings import create_embedder
        from resources.graph.factory import create_graph_store
        from resources.vectors.factory import create_vector_store

        self.settings = settings
        self._index_lock = threading.Lock()
        self._dense_thread: threading.Thread | None = None
        self._index_thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.background_index_progress: tuple[str, int, int] | None = None
        self.jobs: dict[str, JobState] = {}
        self.foreground = ForegroundGate()
        """Tool calls in flight (counted by the project handle and the owner's RPC): index runs
        and background embedding pause between steps while there are any."""
        state = make_private_dir(settings.resolved_state_dir())
        with contextlib.ExitStack() as opened:  # a store that fails to open closes the ones before it
            self.embedder, self.embedder_status = create_embedder(settings)
            self.vectors = create_vector_store(settings)
            opened.callback(self.vectors.close)
            self.graph = create_graph_store(settings)
            opened.callback(self.graph.close)
            self.manifest = Manifest(state / "index.db")
            opened.callback(self.manifest.close)
            self.ctx = IndexContext(
                settings=settings, vectors=self.vectors, graph=self.graph, manifest=self.manifest, embedder=self.embedder
            )
            from query_server.memory.service import MemoryService

            self.memory = MemoryService(
                settings, vectors=self.vectors, graph=self.graph, embedder=self.embedder, resolve_code=self._code_target,
                lookup_symbols=lambda names: symbols_by_qualified_name(self.vectors, names),
            )
            opened.callback(self.memory.close)
            self.memory.start_sync()
            from query_server.design.service import DesignService

            self.design = DesignService(self)
            opened.pop_all()

    # -- lifecycle -------------------------------------------------------------------------
    def start_background_embedding(self) -> None:
        """Fill missing dense vectors in a background thread (search works meanwhile)."""
        if not self.settings.dense_embeddings:
            return
        if self._dense_thread is not None and self._dense_thread.is_alive():
            return

        def run() -> None:
            try:
                embed_pending(self.ctx, progress=lambda *_: self.foreground.pause_for_foreground(), stop=self._stop)
            except Exception:  # noqa: BLE001 - background work logs and stops
                log.exception("background embedding failed", operation="embed_pending")

        self._dense_thread = threading.Thread(target=run, name="codemem-dense", daemon=True)
        self._dense_thread.start()

    def start_background_index(self) -> None:
        """Bring the index up to date in the background (the MCP server does it at start-up).

        Unchanged files cost a stat and a hash, so this is cheap on a current index; on a new
        one, symbols become searchable by words batch by batch and dense vectors follow.
        """
        if self._index_thread is not None and self._index_thread.is_alive():
            return

        def run() -> None:
            try:
                self.index(IndexInput(embed=False), stop=self._stop)
            except Exception:  # noqa: BLE001 - background work logs and stops
                log.exception("background index failed", operation="index")

        self._index_thread = threading.Thread(target=run, name="codemem-index", daemon=True)
        self._index_thread.start()

    def close(self) -> None:
        """Stop background work and close every store."""
        self._stop.set()
        for thread in (self._index_thread, self._dense_thread):
            if thread is not None:
                thread.join(timeout=60)
        for closer in (self.memory.close, self.vectors.close, self.graph.close, self.manifest.close):
            try:
                closer()
            except Exception:  # noqa: BLE001 - closing must go on
                log.exception("close failed", operation="close")

    # -- tools -------------------------------------------------------------------------------
    def index(
        self, request: IndexInput, progress: Progress | None = None, stop: threading.Event | None = None,
        *, through_dagster: bool = False, repair: bool = False,
    ) -> dict[str, Any]:
        """Index the project (or the given paths) incrementally and return the report.

        Args:
            request: The paths to index (all by default) and whether to embed or re-embed.
            progress: Receives (phase, done, total).
            stop: Set to end a plain run between steps (the next run finishes the work).
            through_dagster: Materialize the Dagster assets in-process, the run the Dagster UI
                shows (``codemem index``), instead of calling the indexing functions; it always
                covers the whole project.
            repair: First drop stray entries from the stores, then re-index every file from disk.
        """
        if through_dagster and (request.paths or request.reembed):
            raise ToolError("a Dagster index run covers the whole project as it is: index paths or re-embed without it")
        paths = [self._scope_path(raw, allow_vanished=True) for raw in request.paths] if request.paths else None
        report = self._run_index(
            progress=progress, stop=stop, embed=request.embed, only_paths=paths, reembed=request.reembed,
            through_dagster=through_dagster, repair=repair,
        )
        return report.as_dict()

    def owned_stores(self) -> OwnedStores:
        """This process's stores as the Dagster assets take them (the ``codemem`` resource of a run
        in this process, which writes through them)."""
        return OwnedStores(self.ctx, self.design.stores)

    def _run_index(
        self, *, progress: Progress | None = None, embed: bool = False, through_dagster: bool = False,
        repair: bool = False, **options: Any,
    ) -> IndexReport:
        """Every index run goes through here, the only place that takes the index lock for one:
        runs are serialized, the design layer is refreshed and the run is recorded as the last.

        A plain run is tracked for ``index_status``, gives way to the tool calls in flight, and
        leaves the dense vectors it did not compute to the background; a Dagster run refreshes the
        design layer with its own design assets.
        """
        if repair:
            options["force"] = True
        with self._index_lock:
            repaired = self._repair_stores() if repair else []
            if through_dagster:
                report = self._materialize(progress, embed=embed, force=options.get("force", False))
            else:
                report = self._index_plain(progress, embed=embed, **options)
        report.notes = repaired + report.notes
        if not through_dagster:
            self._refresh_design(report)
        self.manifest.set_meta("last_index", json.dumps(report.as_dict()))
        if not embed and not through_dagster:
            self.start_background_embedding()
        return report

    def _index_plain(self, progress: Progress | None, *, embed: bool, **options: Any) -> IndexReport:
        """The indexing functions, tracked for ``index_status`` (callers hold the index lock)."""

        def track(phase: str, done: int, total: int) -> None:
            self.background_index_progress = (phase, done, total)
            if progress is not None:
                progress(phase, done, total)
            self.foreground.pause_for_foreground()  # calls being served go first

        try:
            return index_project(self.ctx, progress=track, embed=embed, **options)
        finally:
            self.background_index_progress = None

    def _materialize(self, progress: Progress | None, *, embed: bool, force: bool) -> IndexReport:
        """The Dagster assets over this process's stores, code index then design layer (callers
        hold the index lock)."""
        from pipelines.dagster.run import materialize_index

        return materialize_index(self.owned_stores(), embed=embed, force=force, progress=progress)

    def _repair_stores(self) -> list[str]:
        """Drop stray points, graph nodes and dangling edges; returns the report's note on it."""
        from pipelines.stages import repair_index

        fixed = repair_index(self.ctx)
        return [f"repair: removed {fixed['stray_points']} stray points, {fixed['stray_nodes']} stray graph nodes, "
                f"{fixed['dangling_edges']} dangling edges; every file re-indexed"]

    def _refresh_design(self, report: IndexReport) -> None:
        """After an index run: documents, requirement links, patterns, components and anchors."""
        try:
            design = self.design.refresh()
        except Exception as exc:  # noqa: BLE001 - the code index stands; the design layer says what failed
            log.exception("design step failed", operation="design")
            report.notes.append(f"design layer not refreshed: {type(exc).__name__}: {exc} (the code index is up to date)")
            return
        report.notes.extend(design.notes[:20])
        report.design = design.as_dict()

    def refresh_design(self) -> dict[str, Any]:
        """Bring the design layer up to date now: changed documents; links, patterns, components and
        anchors when their inputs changed (``pipelines.design.derive.derive_when_changed``)."""
        with self._index_lock:
            return self.design.refresh().as_dict()

    # -- background index jobs -------------------------------------------------------------------
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
            indexed = self.manifest.file(rel) is not None or any(p.startswith(rel + "/") for p in self.manifest.files())
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
        self.jobs[job.job_id] = job

        def progress(phase: str, done: int, total: int) -> None:
            job.status, job.phase, job.done, job.total = "running", phase, done, total
            job.percent = round(100.0 * done / total, 1) if total else 0.0

        def run() -> None:
            try:
                report = self._run_index(progress=progress, stop=self._stop, **options)
                job.report = report.as_dict()
                job.status = "failed" if report.failed else "done"
                if report.failed:
                    job.error = f"{len(report.failed)} file(s) failed: " + ", ".join(p for p, _ in report.failed[:10])
            except Exception as exc:  # noqa: BLE001 - the job reports it
                log.exception("index job failed", operation=kind, job_id=job.job_id)
                job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
            finally:
                job.finished_at = _now_iso()
                if job.status == "done":
                    job.percent = 100.0

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
        report = self._run_index(only_paths=[rel], force=request.force)
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
        imports = len((self.manifest.all_refs().get(rel) or ("", {}))[1].get("imports", []))
        return IndexFileResult(
            status="indexed" if report.files_indexed else "unchanged", file_path=rel,
            functions_extracted=sum(k in ("function", "method") for k in kinds),
            classes_extracted=sum(k not in ("function", "method") for k in kinds),
            imports_extracted=imports,
        )

    def _running_job(self) -> JobState | None:
        """The background index job in progress, if any."""
        return next((job for job in list(self.jobs.values()) if job.status in ("queued", "running")), None)

    def job_status(self, request: JobStatusInput) -> JobState:
        """A background job's state (phase, percent, and the report when it is over)."""
        job = self.jobs.get(request.job_id or "")
        if job is None:
            raise ToolError(
                f"Job not found: {request.job_id!r} — job ids come from index_directory or reindex "
                "(jobs live until the server restarts); omit job_id for the overall statistics"
            )
        return job.model_copy()

    def _dense_coverage(self) -> tuple[int, int, float]:
        done, total = self.manifest.dense_counts()
        return done, total, (done / total if total else 0.0)

    def code_search(self, request: CodeSearchInput) -> CodeSearchResult:
        """Hybrid code search: dense and sparse candidates from Qdrant, fused (see resources.ranking)."""
        key_source = json.dumps([request.query, request.language, request.path_prefix, request.kind])
        query_key = hashlib.sha1(key_source.encode()).hexdigest()[:12]
        offset = _decode_cursor(request.cursor, query_key)
        must: dict[str, list[Any]] = {}
        if request.language:
            must["language"] = [request.language.lower()]
        if request.kind:
            must["kind"] = [request.kind]
        if request.path_prefix:
            prefix = request.path_prefix.strip().strip("/")
            if prefix and prefix != ".":
                must["path_prefixes"] = [prefix + "/"]
        done, total, coverage = self._dense_coverage()
        dense = None
        mode = "sparse-only"
        if not total:
            mode = "empty index — run `codemem index` on the project (nothing is indexed yet)"
        elif done > 0:
            dense = self.embedder.embed_query(request.query)
            mode = "hybrid" if done == total else f"hybrid (dense vectors {coverage:.0%} computed; rest by words)"
        elif total:
            mode = "sparse-only (dense vectors not computed yet; run `codemem index` or wait for the server)"
        wanted = offset + request.limit + 1
        candidates = max(self.settings.search_candidates, wanted)
        try:
            if self.settings.fusion == "rrf":
                hits = self.vectors.hybrid_query(
                    CODE_COLLECTION, dense=dense, sparse=sparse.query_vector(request.query), limit=wanted,
                    payload_filter=PayloadFilter(must), candidates=candidates,
                )
            else:
                # Ids and scores of every candidate, payloads of the page only: the store converts
                # payloads while holding the GIL, and 2 x 100 candidates' code was most of a
                # search's time in it (every other request of the server waited meanwhile).
                dense_hits, sparse_hits = self.vectors.ranked_lists(
                    CODE_COLLECTION, dense=dense, sparse=sparse.query_vector(request.query),
                    candidates=candidates, payload_filter=PayloadFilter(must), with_payload=False,
                )
                hits = minmax_fuse(dense_hits, sparse_hits, self.settings.dense_weight)[:wanted]
            page = hits[offset : offset + request.limit]
            if any(not hit.payload for hit in page):
                page = self._with_payloads(page)
        except VectorStoreError as exc:
            running = self.background_index_progress
            if running is not None:
                raise ToolError(
                    f"the index is being built ({running[0]} {running[1]}/{running[2]}) — retry in a moment"
                ) from exc
            raise ToolError(str(exc)) from exc
        if self.background_index_progress is not None:
            mode += " — indexing in progress, results may be incomplete"
        more = len(hits) > offset + request.limit
        results: list[CodeHit] = []
        budget = MAX_RESPONSE_TOKENS - 500
        truncated = False
        stale_cache: dict[str, bool] = {}
        for hit in page:
            code_hit = self._to_hit(hit.id, hit.score, hit.payload, stale_cache, detail=request.detail)
            cost = estimate_tokens(code_hit.model_dump_json())
            if cost > budget:
                truncated = True
                more = True
                break
            budget -= cost
            results.append(code_hit)
        next_offset = offset + len(results)
        return CodeSearchResult(
            results=results,
            next_cursor=_encode_cursor(next_offset, query_key) if more else None,
            search_mode=mode,
            dense_coverage=round(coverage, 4),
            truncated=truncated,
        )

    def _payloads(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Code points' payloads by id; a point gone meanwhile (a concurrent re-index) is absent."""
        return {hit.id: hit.payload for hit in self.vectors.retrieve(CODE_COLLECTION, ids)}

    def _with_payloads(self, page: list[VectorHit]) -> list[VectorHit]:
        """The hits of ``page`` with their payloads, in order; a hit whose point is gone meanwhile is
        left out."""
        found = self._payloads([hit.id for hit in page])
        return [VectorHit(id=hit.id, score=hit.score, payload=found[hit.id]) for hit in page if hit.id in found]

    def _is_stale(self, path: str, content_hash: str, cache: dict[str, bool]) -> bool:
        if path in cache:
            return cache[path]
        absolute = self.settings.resolved_root() / path
        state = self.manifest.file(path)
        try:
            stat = absolute.stat()
        except OSError:
            cache[path] = True
            return True
        if state is not None and state.content_hash == content_hash and state.mtime_ns == stat.st_mtime_ns and state.size == stat.st_size:
            cache[path] = False
            return False
        try:
            stale = hashlib.sha256(absolute.read_bytes()).hexdigest() != content_hash
        except OSError:
            stale = True
        cache[path] = stale
        return stale

    def _to_hit(
        self, pid: str, score: float, payload: dict[str, Any], stale_cache: dict[str, bool], *, detail: str = "full"
    ) -> CodeHit:
        code = payload.get("code") or ""
        lines = code.splitlines()
        keep = SUMMARY_LINES if detail == "summary" else SNIPPET_LINES
        snippet = "\n".join(lines[:keep])
        cut = len(lines) > keep or bool(payload.get("code_truncated"))
        if cut:
            snippet += f"\n… [{len(lines) - keep if len(lines) > keep else 'more'} lines cut — read {payload.get('file_path')}:{payload.get('start_line')}-{payload.get('end_line')}]"
        docstring = payload.get("docstring")
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
                content_hash=payload.get("content_hash", ""),
                indexed_at=payload.get("indexed_at", ""),
                stale=self._is_stale(payload.get("file_path", ""), payload.get("content_hash", ""), stale_cache),
            ),
        )

    def graph_query(self, request: GraphQueryInput) -> GraphQueryResult:
        """Run read-only Cypher over the code graph."""
        from resources.graph.store import GraphQueryError, ReadOnlyViolation

        try:
            columns, rows, truncated = self.graph.read_query(
                request.cypher, request.parameters or {}, request.limit, timeout_s=self.settings.graph_query_timeout_s
            )
        except ReadOnlyViolation as exc:
            raise ToolError(str(exc)) from exc
        except GraphQueryError as exc:
            raise ToolError(str(exc)) from exc
        result = GraphQueryResult(columns=columns, results=rows, truncated=truncated)
        while estimate_tokens(result.model_dump_json()) > MAX_RESPONSE_TOKENS and result.results:
            result.results = result.results[: len(result.results) // 2]
            result.truncated = True
        return result

    # -- symbols and their neighbourhood ---------------------------------------------------------
    def _resolve_entity(self, entity: str) -> tuple[str, str, dict[str, Any]]:
        """(id, graph label, description) of a symbol id, a qualified name or a file path."""
        rows = self.manifest.find_symbols(symbol_id=entity) or self.manifest.find_symbols(qualified_name=entity)
        if len(rows) > 1:
            choices = ", ".join(f"{r.id} ({r.path} {r.local_name})" for r in rows[:5])
            raise ToolError(f"{entity!r} names {len(rows)} symbols (overloads) — pass one id: {choices}")
        if rows:
            row = rows[0]
            return row.id, graph_label(row.kind), {
                "id": row.id, "kind": row.kind, "qualified_name": row.qualified_name, "file_path": row.path,
            }
        path = entity.strip().lstrip("./")
        if self.manifest.file(path) is not None:
            return file_id(path), "File", {"id": file_id(path), "kind": "file", "file_path": path}
        running = self._running_job()
        if running is not None:
            raise ToolError(f"Entity not found: {entity!r} — {_being_rebuilt(running)}")
        raise ToolError(
            f"Entity not found: {entity!r} — pass an id from code_search, a qualified name such as "
            "'pkg.module.Class.method', or a repo-relative file path that is indexed"
        )

    def _code_target(self, entity: str) -> tuple[str, str, str | None] | None:
        """A code entity a memory may point at: (node id, label, display name), None if unknown."""
        try:
            node_id, label, info = self._resolve_entity(entity)
        except ToolError as exc:
            if str(exc).startswith("Entity not found"):
                return None
            raise
        return node_id, label, info.get("qualified_name") or info.get("file_path")

    def get_symbol(self, request: GetSymbolInput) -> GetSymbolResult:
        """A symbol's summary, callers and callees; its full code with ``include_code``."""
        from resources.graph.cypher import callers_and_callees_query

        sid, label, _ = self._resolve_entity(request.symbol)
        if label == "File":
            raise ToolError(f"{request.symbol!r} is a file — get_symbol takes a function or class; use get_related for files")
        points = self.vectors.retrieve(CODE_COLLECTION, [sid])
        if not points:
            raise ToolError(f"symbol {sid} is in the index but not in the vector store — run `codemem index` to repair it")
        hit = self._to_hit(sid, 1.0, points[0].payload, {})
        _, rows, _ = self.graph.read_query(callers_and_callees_query(label), {"id": sid, "limit": 200}, 200)
        callers = [{k: v for k, v in r.items() if k != "role"} for r in rows if r["role"] == "caller"]
        callees = [{k: v for k, v in r.items() if k != "role"} for r in rows if r["role"] == "callee"]
        code = None
        if request.include_code:
            path = confine_path(self.settings.resolved_root(), hit.file_path)
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise ToolError(f"cannot read {hit.file_path}: {exc.strerror} — re-run `codemem index`") from exc
            code = "\n".join(lines[hit.start_line - 1 : hit.end_line])
            if estimate_tokens(code) > MAX_RESPONSE_TOKENS - 5_000:
                code = code[: (MAX_RESPONSE_TOKENS - 5_000) * CHARS_PER_TOKEN] + "\n… [cut at the response limit]"
        return GetSymbolResult(symbol=hit, callers=callers, callees=callees, code=code)

    def get_related(self, request: GetRelatedInput) -> GetRelatedResult:
        """Entities within ``depth`` hops of a symbol or file, nearest first (breadth-first)."""
        from resources.graph.cypher import one_hop_query

        sid, label, entity = self._resolve_entity(request.entity_id)
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor"}), sort_keys=True)
        offset = _decode_cursor(request.cursor, key)
        wanted = offset + request.limit
        types = request.relationship_types or []
        visited = {sid}
        frontier: dict[str, tuple[str, list[str]]] = {sid: (label, [])}  # id -> (label, relationship path)
        results: list[RelatedEntity] = []
        truncated = False
        for distance in range(1, request.depth + 1):
            by_label: dict[str, list[str]] = {}
            for node_id, (node_label, _) in frontier.items():
                by_label.setdefault(node_label, []).append(node_id)
            reached: dict[str, tuple[str, list[str]]] = {}
            for node_label, ids in sorted(by_label.items()):
                room = wanted + 1 - len(results)
                if room <= 0:
                    break
                _, rows, _ = self.graph.read_query(
                    one_hop_query(node_label, types, request.direction), {"ids": ids, "limit": room * 4}, room * 4
                )
                for row in rows:
                    if row["id"] in visited:
                        continue
                    visited.add(row["id"])
                    node_type = (row.get("labels") or ["?"])[0]
                    via = [*frontier[row["source"]][1], row["rel"]]
                    reached[row["id"]] = (node_type, via)
                    results.append(
                        RelatedEntity(
                            id=row["id"], label=node_type, name=row.get("name"),
                            qualified_name=row.get("qualified_name"), file_path=row.get("file_path"),
                            start_line=row.get("start_line"), kind=row.get("kind"), distance=distance, via=via,
                        )
                    )
            if len(results) > wanted:
                truncated = True
                break
            frontier = reached
            if not frontier:
                break
        page = results[offset:wanted]
        budget = MAX_RESPONSE_TOKENS - 1_000 - estimate_tokens(json.dumps(entity))
        kept: list[RelatedEntity] = []
        for item in page:
            budget -= estimate_tokens(item.model_dump_json())
            if budget < 0:
                truncated = True
                break
            kept.append(item)
        return GetRelatedResult(
            entity=entity, results=kept, truncated=truncated,
            next_cursor=_encode_cursor(offset + len(kept), key) if truncated and kept else None,
        )

    def find_duplicates(self, request: FindDuplicatesInput) -> FindDuplicatesResult:
        """Existing functions similar to the given code, with the location and a reuse advice."""
        threshold = request.threshold if request.threshold is not None else self.settings.duplicate_threshold
        language = (request.language or "python").lower()
        if language not in SUPPORTED_LANGUAGES:
            raise ToolError(f"Unknown language {request.language!r} — use one of {', '.join(sorted(SUPPORTED_LANGUAGES))}")
        done, total, coverage = self._dense_coverage()
        running = self._running_job()
        if not done and running is not None:
            # an empty answer now would read as "no duplicates": say why there is none
            raise ToolError(_being_rebuilt(running))
        if not total:
            raise ToolError("nothing is indexed yet — run `codemem index` on the project first")
        if done < total:
            log.info("find_duplicates with partial dense coverage", coverage=coverage)
        if not done:
            raise ToolError("dense vectors are still being computed — retry in a moment (`index_status` shows progress)")
        parsed = parse_source("snippet", request.code.encode("utf-8"), language)  # type: ignore[arg-type]
        functions = [s for s in parsed.symbols if s.kind in ("function", "method")]
        text = embedding_text(parsed, functions[0], functions[0].qualified_name) if functions else request.code
        vector = self.embedder.embed_documents([text])[0]
        must: dict[str, list[Any]] = {"kind": ["function", "method"]}
        if request.language:
            must["language"] = [language]
        # More candidates than wanted, re-scored by structure (resources.code_similarity): the
        # embedding alone rates renamed copies low and same-shape opposites (min/max) high.
        dense_hits, _ = self.vectors.ranked_lists(
            CODE_COLLECTION, dense=vector, sparse=None, candidates=max(request.limit * 5, 50),
            payload_filter=PayloadFilter(must), with_payload=False,
        )
        # Code only of the candidates that can be shown or compared by structure: one under both
        # floors keeps its cosine as its score, below the threshold (payloads cost GIL time).
        floor = min(STRUCTURE_COSINE_FLOOR, threshold)
        payloads = self._payloads([hit.id for hit in dense_hits if hit.score >= floor])
        dense_hits = [VectorHit(id=hit.id, score=hit.score, payload=payloads.get(hit.id, {})) for hit in dense_hits
                      if hit.score < floor or hit.id in payloads]
        snippet = functions[0] if functions else None
        scores = score_candidates(
            snippet.code if snippet else request.code, snippet.name if snippet else None, language,
            [
                Candidate(hit.payload.get("code") or "", hit.payload.get("name"), hit.payload.get("language"),
                          hit.score, bool(hit.payload.get("code_truncated")))
                for hit in dense_hits
            ],
            self.embedder.embed_documents,
        )
        ranked = sorted(zip(dense_hits, scores, strict=True), key=lambda pair: -pair[1][0])
        duplicates = []
        budget = MAX_RESPONSE_TOKENS - 500
        truncated = False
        for hit, (score, _comparison) in ranked[: request.limit]:
            if score < threshold:
                break
            payload = hit.payload
            advice = (
                "near-identical: reuse it instead of writing a new one"
                if score >= 0.95
                else "similar: reuse or extend it rather than duplicating it"
            )
            duplicates.append(
                DuplicateHit(
                    id=hit.id, name=payload.get("name", ""), qualified_name=payload.get("qualified_name", ""),
                    file_path=payload.get("file_path", ""), start_line=int(payload.get("start_line", 0)),
                    end_line=int(payload.get("end_line", 0)), signature=payload.get("signature", ""),
                    docstring=cut_text(payload["docstring"], 1_500, "get_symbol returns the whole")[0] if payload.get("docstring") else None,
                    similarity=round(score, 4),
                    recommendation=f"{advice} ({payload.get('file_path')}:{payload.get('start_line')})",
                )
            )
            budget -= estimate_tokens(duplicates[-1].model_dump_json())
            if budget < 0:
                duplicates.pop()
                truncated = True
                break
        return FindDuplicatesResult(
            threshold=threshold, duplicate_count=len(duplicates), duplicates=duplicates, truncated=truncated
        )

    def health(self) -> HealthResult:
        """The state of each dependency, with degraded states named."""
        components: dict[str, dict[str, Any]] = {}
        try:
            points = self.vectors.count(CODE_COLLECTION)
            components["vector_store"] = {"status": "ok", "points": points}
        except VectorStoreError as exc:
            empty = not self.manifest.counts()["files"]
            components["vector_store"] = (
                {"status": "ok", "points": 0, "note": "nothing indexed yet — run `codemem index`"}
                if empty
                else {"status": "error", "error": str(exc)}
            )
        except Exception as exc:  # noqa: BLE001 - health reports, never raises
            components["vector_store"] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        graph = self.graph.health()
        components["graph_store"] = {"status": "ok" if graph.get("ok") else "error", **graph}
        status = self.embedder_status
        embedder = {
            "status": "degraded" if status.degraded else "ok",
            "backend": status.backend,
            "model": status.model_id,
            "message": status.message,
        }
        cache = getattr(self.embedder, "cache", None)
        if cache is not None:
            embedder["cache_hit_rate"] = round(cache.hit_rate, 4)
        components["embedder"] = embedder
        done, total, coverage = self._dense_coverage()
        components["index"] = {
            "status": "ok" if done == total else "degraded",
            "symbols": total,
            "dense_coverage": round(coverage, 4),
            **({"note": "dense vectors pending: search uses words for the rest"} if done < total else {}),
        }
        states = {c["status"] for c in components.values()}
        overall = "error" if "error" in states else "degraded" if "degraded" in states else "ok"
        return HealthResult(status=overall, components=components)  # type: ignore[arg-type]

    def index_status(self, request: JobStatusInput | None = None) -> IndexStatusResult:
        """Counts, dense coverage and the last run's summary; with a ``job_id``, also that background
        job's state (``job_status``)."""
        counts = self.manifest.counts()
        done, total, coverage = self._dense_coverage()
        last = self.manifest.get_meta("last_index")
        try:
            graph_counts = self.graph.counts()
        except Exception as exc:  # noqa: BLE001 - status must answer even when the graph is down
            graph_counts = {"error": str(exc)}  # type: ignore[dict-item]
        running = self.background_index_progress
        if running is not None:
            phase, done_files, all_files = running
            mode = f"indexing in progress ({phase} {done_files}/{all_files}); results may be incomplete"
        elif not total:
            mode = "empty index — run `codemem index`"
        elif done == total:
            mode = "hybrid"
        elif done:
            mode = f"hybrid with {coverage:.0%} dense vectors (the rest is searched by words until embedded)"
        else:
            mode = "sparse-only (dense vectors pending)"
        status = IndexStatusResult(
            project_root=str(self.settings.resolved_root()),
            files=counts["files"],
            symbols=counts["symbols"],
            resolved_edges=counts["resolved_edges"],
            dense_vectors=done,
            dense_coverage=round(coverage, 4),
            search_mode=mode,
            embedder=self.embedder_status.message,
            vector_store="qdrant server" if self.settings.server_mode_vectors else "qdrant-edge (embedded)",
            graph_store="neo4j server" if self.settings.server_mode_graph else "falkordb (embedded)",
            last_index=cap_report(json.loads(last)) if last else None,
            graph_counts=graph_counts,
        )
        if request is not None and request.job_id is not None:
            status.job = self.job_status(request)
        return status

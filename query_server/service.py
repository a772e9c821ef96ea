"""The service layer: the code tools as plain methods over the project's stores.

MCP tools, HTTP routes and CLI commands are thin wrappers over ``CodeMemService``; a process
that does not own the project's embedded stores uses ``query_server.ownership.RemoteService``,
which offers the same methods over loopback.

``CodeMemService`` opens the stores and holds the one index entry point (``index`` /
``_run_index``: the index lock, the design refresh, ``last_index``); each code tool method hands
the work to the module of ``query_server/code/`` that does that job: ``search`` (code_search),
``symbols`` (graph_query, get_symbol, get_related), ``duplicates`` (find_duplicates),
``index_jobs`` (background index and embedding, index_directory, reindex, index_file,
job_status) and ``status`` (health, index_status), all over the shared ``lookups``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from pipelines.index_context import IndexContext, remember_report
from query_server.foreground import ForegroundGate
from query_server.paging import ToolError
from resources.manifest import INDEX_RUN, open_manifest
from resources.manifest_store import ManifestError
from resources.private_files import make_private_dir
from resources.schemas.tools import (
    CodeSearchInput,
    CodeSearchResult,
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
    ReindexInput,
)
from resources.settings import Settings

if TYPE_CHECKING:
    from pipelines.dagster.project import OwnedStores
    from pipelines.indexer import IndexReport, Progress
    from query_server.code.duplicates import DuplicateFinder
    from query_server.code.index_jobs import IndexJobs
    from query_server.code.search import CodeSearch
    from query_server.code.status import StatusReports
    from query_server.code.symbols import SymbolTools
    from query_server.design.service import DesignService

__all__ = ["CodeMemService", "ToolError"]

log = structlog.get_logger("codemem.service")


class CodeMemService:
    """The code tools for one project, over stores this process owns.

    Opening it imports only what the stores and the memory tools need: each code tool's part
    (``searches``, ``symbols``, ``duplicates``, ``index_jobs``, ``status``) and the design layer
    (``design``) are built, their modules imported, on first use (``_part``). A session's first
    memory_search does not wait for the parsers, the design layer or the code tools to load.
    """

    def __init__(self, settings: Settings) -> None:
        """Open the project's stores (embedded by default, servers when configured)."""
        from resources.embeddings import create_embedder
        from resources.graph.factory import create_graph_store
        from resources.vectors.factory import create_vector_store

        self.settings = settings
        self._index_lock = threading.Lock()
        self._stop = threading.Event()
        self.background_index_progress: tuple[str, int, int] | None = None
        self.jobs: dict[str, JobState] = {}
        self.foreground = ForegroundGate()
        """Tool calls in flight (counted by the project handle and the owner's RPC): index runs
        and background embedding pause between steps while there are any."""
        self._parts: dict[str, Any] = {}
        self._parts_lock = threading.RLock()  # (a part built while another is: no deadlock)
        make_private_dir(settings.resolved_state_dir())
        with contextlib.ExitStack() as opened:  # a store that fails to open closes the ones before it
            self.embedder, self.embedder_status = create_embedder(settings)
            self.vectors = create_vector_store(settings)
            opened.callback(self.vectors.close)
            self.graph = create_graph_store(settings)
            opened.callback(self.graph.close)
            self.manifest = open_manifest(settings)
            opened.callback(self.manifest.close)
            self.ctx = IndexContext(
                settings=settings, vectors=self.vectors, graph=self.graph, manifest=self.manifest, embedder=self.embedder
            )
            from query_server.memory.service import MemoryService

            self.memory = MemoryService(
                settings, vectors=self.vectors, graph=self.graph, embedder=self.embedder,
                resolve_code=lambda entity: self.symbols._code_target(entity),  # noqa: SLF001 - the code tools' own resolver
                code_links=lambda: self.symbols.code_link_checker(),
                lookup_symbols=self._symbols_by_qualified_name,
            )
            opened.callback(self.memory.close)
            self.memory.start_sync()
            opened.pop_all()

    # -- parts built on first use ----------------------------------------------------------
    def _part(self, name: str, build: Callable[[], Any]) -> Any:
        """The part called ``name``, built by ``build`` (which imports its module) on first use;
        one instance whichever thread asks first."""
        part = self._parts.get(name)
        if part is None:
            with self._parts_lock:
                part = self._parts.get(name)
                if part is None:
                    part = self._parts[name] = build()
        return part

    @property
    def searches(self) -> CodeSearch:
        """code_search."""
        from query_server.code.search import CodeSearch

        return self._part("searches", lambda: CodeSearch(self))

    @property
    def symbols(self) -> SymbolTools:
        """graph_query, get_symbol, get_related and the code targets of memory links."""
        from query_server.code.symbols import SymbolTools

        return self._part("symbols", lambda: SymbolTools(self))

    @property
    def duplicates(self) -> DuplicateFinder:
        """find_duplicates."""
        from query_server.code.duplicates import DuplicateFinder

        return self._part("duplicates", lambda: DuplicateFinder(self))

    @property
    def index_jobs(self) -> IndexJobs:
        """Background index and embedding, index_directory, reindex, index_file, job_status."""
        from query_server.code.index_jobs import IndexJobs

        return self._part("index_jobs", lambda: IndexJobs(self))

    @property
    def status(self) -> StatusReports:
        """health and index_status."""
        from query_server.code.status import StatusReports

        return self._part("status", lambda: StatusReports(self))

    @property
    def design(self) -> DesignService:
        """The design tools and the design layer's refresh."""
        from query_server.design.service import DesignService

        return self._part("design", lambda: DesignService(self))

    def _symbols_by_qualified_name(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """Indexed symbols by qualified name (memory_add's links to code)."""
        from pipelines.design.derive import symbols_by_qualified_name

        return symbols_by_qualified_name(self.vectors, names)

    # -- lifecycle -------------------------------------------------------------------------
    def start_background_embedding(self) -> None:
        """Fill missing dense vectors in a background thread (search works meanwhile)."""
        self.index_jobs.start_background_embedding()

    def start_background_index(self) -> None:
        """Bring the index up to date in the background (the MCP server does it at start-up).

        Unchanged files cost a stat and a hash, so this is cheap on a current index; on a new
        one, symbols become searchable by words batch by batch and dense vectors follow.
        """
        self.index_jobs.start_background_index()

    @property
    def closing(self) -> bool:
        """True once ``close`` began (background work stops at its next step)."""
        return self._stop.is_set()

    def close(self) -> None:
        """Stop background work and close every store."""
        self._stop.set()
        jobs = self._parts.get("index_jobs")  # (none built: nothing ran in the background)
        for thread in jobs.background_threads() if jobs is not None else ():
            thread.join(timeout=60)
        # the vector store last: closing its shards costs ~20 ms each (qdrant-edge), and an exiting
        # server's deadline may cut it short; the graph server is stopped by then (no process left)
        cache = getattr(self.embedder, "cache", None)  # the embedding cache (a PostgreSQL pool in server mode)
        closers = (self.memory.close, self.graph.close, self.manifest.close, *((cache.close,) if cache is not None else ()), self.vectors.close)
        for closer in closers:
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
        scope = self.index_jobs._scope_path  # noqa: SLF001 - the paths the index jobs take
        paths = [scope(raw, allow_vanished=True) for raw in request.paths] if request.paths else None
        report = self._run_index(
            progress=progress, stop=stop, embed=request.embed, only_paths=paths, reembed=request.reembed,
            through_dagster=through_dagster, repair=repair,
        )
        return report.as_dict()

    def index_run(self, request: IndexInput) -> dict[str, Any]:
        """Index what changed for a ``codemem_index`` run that another process records (a sensor
        or UI run handed to this owner): ``{"messages": the run's messages but its end, "report"}``,
        the messages each touched bucket with its own files, the checks, normalized_graph and the
        design assets (``pipelines.dagster.run.index_messages``)."""
        messages: list[dict[str, Any]] = []
        report = self._run_index(embed=request.embed, record=messages.append)
        return {"messages": messages, "report": report.as_dict()}

    def owned_stores(self) -> OwnedStores:
        """This process's stores as the Dagster assets take them (the ``codemem`` resource of a run
        in this process, which writes through them)."""
        from pipelines.dagster.project import OwnedStores

        return OwnedStores(self.ctx, self.design.stores)

    def _run_index(
        self, *, progress: Progress | None = None, embed: bool = False, through_dagster: bool = False,
        repair: bool = False, record: Callable[[dict[str, Any]], None] | None = None, **options: Any,
    ) -> IndexReport:
        """Every index run goes through here, the only place that takes the index lock for one:
        runs are serialized, the design layer is refreshed and the run is recorded as the last.

        A plain run is tracked for ``index_status``, gives way to the tool calls in flight, and
        leaves the dense vectors it did not compute to the background; a Dagster run refreshes the
        design layer with its own design assets, and so does a run whose messages go to ``record``
        (a Dagster run in another process records them). Every run then syncs the git notes when
        they are a live store here (``_sync_notes``).
        """
        if repair:
            options["force"] = True
        with self._index_lock, self.manifest.alone(INDEX_RUN, stop=self._stop, guard=True):
            repaired = self._repair_stores() if repair else []
            if through_dagster:
                report = self._materialize(progress, embed=embed, force=options.get("force", False))
            elif record is not None:
                report = self._index_for_record(record, embed=embed, force=options.get("force", False))
            else:
                report = self._index_plain(progress, embed=embed, **options)
        report.notes = repaired + report.notes
        try:
            # the index lock too: the background filler of doc chunks' vectors holds both (no ingest meanwhile)
            with self._index_lock, self.manifest.alone(INDEX_RUN, stop=self._stop):  # (server mode: no other replica refreshes or syncs meanwhile)
                if not through_dagster and record is None:
                    self._refresh_design(report, embed=embed)
                self._sync_notes(report)
        except ManifestError as exc:  # the index is written: say what was not done after it
            report.notes.append(f"design layer and git notes not refreshed after this run: {exc} (the code index is up to date)")
        remember_report(self.manifest, report)
        if not embed and not through_dagster:
            self.start_background_embedding()
        return report

    def _index_plain(self, progress: Progress | None, *, embed: bool, **options: Any) -> IndexReport:
        """The indexing functions, tracked for ``index_status`` (callers hold the index lock): the
        index counts as being built while a first build runs, and from the moment a run found
        files to write, not while it only compares the files with the manifest (a run that finds
        nothing changed says nothing)."""
        first_build = not self.manifest.counts().get("files")

        def track(phase: str, done: int, total: int) -> None:
            comparing = phase == "discover" or (phase == "parse" and done == 0)
            if phase == "parse" and done >= total:
                self.background_index_progress = None  # parsed and written (or nothing to write)
            elif first_build or not comparing:
                self.background_index_progress = (phase, done, total)
            if progress is not None:
                progress(phase, done, total)
            self.foreground.pause_for_foreground()  # calls being served go first

        from pipelines.indexer import index_project

        try:
            return index_project(self.ctx, progress=track, embed=embed, **options)
        finally:
            self.background_index_progress = None

    def _index_for_record(self, record: Callable[[dict[str, Any]], None], *, embed: bool, force: bool) -> IndexReport:
        """The index run of a Dagster run in another process, its messages sent to ``record``
        (callers hold the index lock)."""
        from pipelines.dagster.run import index_messages

        return index_messages(self.owned_stores(), record, embed=embed, force=force, progress=lambda *_: None)

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

    def _refresh_design(self, report: IndexReport, *, embed: bool) -> None:
        """After an index run: documents, requirement links, patterns, components and anchors
        (the doc chunks' dense vectors with ``embed``, else in the background)."""
        try:
            design = self.design.refresh(embed=embed)
        except Exception as exc:  # noqa: BLE001 - the code index stands; the design layer says what failed
            log.exception("design step failed", operation="design")
            report.notes.append(f"design layer not refreshed: {type(exc).__name__}: {exc} (the code index is up to date)")
            return
        report.notes.extend(design.notes[:20])
        report.design = design.as_dict()

    def _sync_notes(self, report: IndexReport) -> None:
        """After an index run, when git notes are a live store here: merge what ``git fetch``
        brought, import it (searchable at once) and write the ledger's changes (three ``git
        for-each-ref`` when nothing arrived). A failure is a note of the report; nothing is lost."""
        if not self.memory.stores.notes.enabled():
            return
        from resources.schemas.memory.notes import NotesSyncInput

        try:
            done = self.memory.notes_sync(NotesSyncInput())
        except Exception as exc:  # noqa: BLE001 - the code index stands; the next run (or `codemem notes sync`) syncs
            log.exception("git notes sync failed", operation="notes_sync")
            report.notes.append(f"git notes not synced: {exc}")
            return
        if done.imported or done.updated or done.merged_refs or done.notes_written:
            report.notes.append(f"git notes: {done.imported} memories imported, {done.updated} updated, "
                                f"{done.notes_written} notes written, {len(done.merged_refs)} fetched refs merged")
        report.notes.extend(f"git notes: {error.get('memory_id') or error.get('note')}: {error['error']}" for error in done.errors[:5])

    def refresh_design(self) -> dict[str, Any]:
        """Bring the design layer up to date now: changed documents; links, patterns, components and
        anchors when their inputs changed (``pipelines.design.derive.derive_when_changed``)."""
        with self._index_lock, self.manifest.alone(INDEX_RUN, stop=self._stop):
            return self.design.refresh().as_dict()

    # -- background index jobs ------------------------------------------------------------
    def start_index_job(self, kind: str, **options: Any) -> JobState:
        """Run an index in a background thread; the returned job is polled with ``job_status``."""
        return self.index_jobs.start_index_job(kind, **options)

    def index_directory(self, request: IndexDirectoryInput) -> JobState:
        """Start indexing a directory (incremental unless ``force``) as a background job."""
        return self.index_jobs.index_directory(request)

    def reindex(self, request: ReindexInput) -> JobState:
        """Start a re-index: ``changed`` is incremental, ``full`` re-processes everything in scope."""
        return self.index_jobs.reindex(request)

    def index_file(self, request: IndexFileInput) -> IndexFileResult:
        """Index one file now (short work: runs in the call) and report what it extracted."""
        return self.index_jobs.index_file(request)

    def job_status(self, request: JobStatusInput) -> JobState:
        """A background job's state (phase, percent, and the report when it is over)."""
        return self.index_jobs.job_status(request)

    # -- search and the graph -------------------------------------------------------------
    def code_search(self, request: CodeSearchInput) -> CodeSearchResult:
        """Hybrid code search: dense and sparse candidates from Qdrant, fused (see resources.ranking)."""
        return self.searches.code_search(request)

    def graph_query(self, request: GraphQueryInput) -> GraphQueryResult:
        """Run read-only Cypher over the code graph."""
        return self.symbols.graph_query(request)

    def get_symbol(self, request: GetSymbolInput) -> GetSymbolResult:
        """A symbol's summary, callers and callees; its full code with ``include_code``."""
        return self.symbols.get_symbol(request)

    def get_related(self, request: GetRelatedInput) -> GetRelatedResult:
        """Entities within ``depth`` hops of a symbol or file, nearest first (breadth-first)."""
        return self.symbols.get_related(request)

    def find_duplicates(self, request: FindDuplicatesInput) -> FindDuplicatesResult:
        """Existing functions similar to the given code, with the location and a reuse advice."""
        return self.duplicates.find_duplicates(request)

    # -- health and status ----------------------------------------------------------------
    def health(self) -> HealthResult:
        """The state of each dependency, with degraded states named."""
        return self.status.health()

    def index_status(self, request: JobStatusInput | None = None) -> IndexStatusResult:
        """Counts, dense coverage and the last run's summary; with a ``job_id``, also that background
        job's state (``job_status``)."""
        return self.status.index_status(request)

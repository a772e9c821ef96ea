"""The memory tools as plain methods — add, update, delete, get, bulk add, list, search, context,
statistics, export and import, backup and restore, normalization — over the ledger (system of
record) and its projections.

``MemoryService`` is the facade the tool registry and the other faces call; each method hands
the work to the module that does that job: ``writes`` (add, bulk add, update, delete, conflicts),
``extract`` (memory_extract), ``reads`` (get, list, search, context and their ranking), ``export_import``, ``backup``,
``statistics``, ``normalize_jobs``, ``notes`` (git notes as a live store) and ``reviews`` (review findings), all over
the shared ``stores``.

Every write commits to the ledger first, then projects; a projection that fails stays in the
outbox and is retried in the background (``MemoryService.start_sync``), so a write never fails
because Qdrant or the graph is down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import Any

from query_server.memory import export_import, notes, reviews, statistics
from query_server.memory.normalize_jobs import NormalizationJobs
from query_server.memory.reads import MemoryReads
from query_server.memory.stores import CodeLinkChecker, CodeResolver, MemoryStores, SymbolLookup
from query_server.memory.writes import MemoryWrites
from resources.memory.ledger import Ledger
from resources.memory.projection import MemoryProjector
from resources.memory.scopes import MemoryScopes
from resources.schemas.memory import (
    BackupInput,
    BackupResult,
    ExportMemoryInput,
    ExportMemoryResult,
    ImportMemoryInput,
    ImportMemoryResult,
    MemoryAddInput,
    MemoryAddResult,
    MemoryBulkAddInput,
    MemoryBulkAddResult,
    MemoryContextInput,
    MemoryContextResult,
    MemoryDeleteInput,
    MemoryDeleteResult,
    MemoryExtractInput,
    MemoryExtractResult,
    MemoryGetInput,
    MemoryListInput,
    MemoryListResult,
    MemoryRecord,
    MemorySearchInput,
    MemorySearchResult,
    MemoryStatisticsResult,
    MemoryUpdateInput,
    MemoryUpdateResult,
    NormalizationJob,
    NormalizeMemoryInput,
    NormalizeStatusInput,
    RestoreInput,
    RestoreResult,
)
from resources.schemas.memory.notes import (
    NotesCaptureInput,
    NotesCaptureResult,
    NotesSyncInput,
    NotesSyncResult,
    RecordReviewInput,
    RecordReviewResult,
    ReviewFindingsInput,
    ReviewFindingsResult,
)
from resources.settings import Settings
from resources.vectors.store import VectorStore

SYNC_INTERVAL_S = 2.0


class MemoryService:
    """Typed project memories for one project, never lost: ledger first, projections second."""

    def __init__(
        self,
        settings: Settings,
        *,
        vectors: VectorStore,
        graph: Any,
        embedder: Any,
        resolve_code: CodeResolver | None = None,
        lookup_symbols: SymbolLookup | None = None,
        code_links: CodeLinkChecker | None = None,
    ) -> None:
        """Open the project's memory ledger and project it into ``vectors`` and ``graph``."""
        self.settings = settings
        self.stores = MemoryStores(
            settings, vectors=vectors, graph=graph, embedder=embedder, resolve_code=resolve_code,
            lookup_symbols=lookup_symbols, code_links=code_links,
        )
        self.writes = MemoryWrites(self.stores)
        self.reads = MemoryReads(self.stores)
        self.normalization = NormalizationJobs(self.stores)
        self._stop = threading.Event()
        self._sync_thread: threading.Thread | None = None

    @cached_property
    def extraction(self) -> Any:
        """memory_extract's engine (``MemoryExtraction``), imported when first used: its cue rules
        cost ~50 ms to import, which every ``codemem`` command would otherwise pay."""
        from query_server.memory.extract import MemoryExtraction

        return MemoryExtraction(self.stores, self.writes)

    @property
    def ledger(self) -> Ledger:
        """The project scope's ledger (replaced by a restore)."""
        return self.stores.ledger

    @property
    def projector(self) -> MemoryProjector:
        """The project scope's projector into the vector store and the graph."""
        return self.stores.projector

    @property
    def scopes(self) -> MemoryScopes:
        """The project, local, global and enterprise memory stores this project sees."""
        return self.stores.scopes

    # -- background sync ---------------------------------------------------------------------
    def start_sync(self) -> None:
        """Project what the outbox holds (left by a crash or a store outage), then keep doing so."""
        if self._sync_thread is not None and self._sync_thread.is_alive():
            return

        def run() -> None:
            while not self._stop.is_set():
                self.stores.drain()
                self.stores.wake.wait(SYNC_INTERVAL_S)
                self.stores.wake.clear()

        self._sync_thread = threading.Thread(target=run, name="codemem-memory-sync", daemon=True)
        self._sync_thread.start()

    def stop_sync(self) -> None:
        """Stop the background projection thread (bulk loaders that project themselves use it)."""
        self._stop.set()
        self.stores.wake.set()
        if self._sync_thread is not None:
            self._sync_thread.join(timeout=30)
            self._sync_thread = None
        self._stop.clear()

    def sync(self) -> dict[str, Any]:
        """Project everything queued now, in every scope (retrying failed projections at once)."""
        return self.stores.drain(retry_now=True)

    def rebuild_projections(self) -> dict[str, Any]:
        """Recreate the memory collections and graph nodes from the ledgers alone (the project
        scope first: it clears every memory node; then local and global add theirs back)."""
        return self.stores.rebuild_projections()

    def open_collections(self, stop: Callable[[], bool] = lambda: False) -> int:
        """Load every memory collection a search reads (each memory type with live memories, every
        scope with a ledger), so that the first memory_search does not pay their loading (~20 ms
        each); returns how many (fewer when ``stop()`` turned true: the process is closing)."""
        from resources.schemas.memory.kinds import MEMORY_TYPES

        opened = 0
        for store in self.scopes.opened():
            held = store.projected.memory_types(MEMORY_TYPES)
            for memory_type in (t for t in MEMORY_TYPES if t in held):
                if stop():
                    return opened
                self.stores.vectors.count(store.projector.collection(str(memory_type)))
                opened += 1
        return opened

    def close(self) -> None:
        """Stop the sync thread and close the ledgers."""
        self.stop_sync()
        self.stores.close()

    # -- writes ------------------------------------------------------------------------------
    def memory_add(self, request: MemoryAddInput) -> MemoryAddResult:
        """Store a memory in its scope (project by default); returns its id and the stored memories
        it may duplicate or contradict."""
        return self.writes.memory_add(request)

    def memory_bulk_add(self, request: MemoryBulkAddInput) -> MemoryBulkAddResult:
        """Store many memories in one ledger transaction: all of them, or none when one is invalid.
        One batch writes one scope (each memory's, else the batch's, else project)."""
        return self.writes.memory_bulk_add(request)

    def memory_update(self, request: MemoryUpdateInput, *, request_id: str | None = None) -> MemoryUpdateResult:
        """Change a memory in whichever scope holds it; refused with the current version when
        ``expected_version`` is stale. A repeated ``request_id`` returns the first outcome."""
        return self.writes.memory_update(request, request_id=request_id)

    def memory_delete(self, request: MemoryDeleteInput, *, request_id: str | None = None) -> MemoryDeleteResult:
        """Soft-delete (kept 30 days) or hard-delete a memory in whichever scope holds it; its graph
        relationships go with it. A repeated ``request_id`` returns the first outcome."""
        return self.writes.memory_delete(request, request_id=request_id)

    def memory_extract(self, request: MemoryExtractInput) -> MemoryExtractResult:
        """Propose typed memories (decisions, requirements, preferences, test results, gotchas) from a
        transcript, diff, commit message or text, with their source spans, duplicates and conflicts;
        ``commit`` stores the new ones in one transaction (all or none)."""
        return self.extraction.memory_extract(request)

    # -- reads -------------------------------------------------------------------------------
    def memory_get(self, request: MemoryGetInput) -> MemoryRecord:
        """One memory in full, from whichever scope holds it (soft-deleted ones too, flagged), with
        its relationships on request."""
        return self.reads.memory_get(request)

    def memory_list(self, request: MemoryListInput) -> MemoryListResult:
        """Memories of every scope, most recently updated first (for browsing; search ranks by meaning)."""
        return self.reads.memory_list(request)

    def memory_search(self, request: MemorySearchInput) -> MemorySearchResult:
        """Memories by meaning (dense + keyword) across the scopes this project sees (project, local,
        global), ranked by similarity × importance × recency; summaries unless ``detail="full"``."""
        return self.reads.memory_search(request)

    def memory_context(self, request: MemoryContextInput) -> MemoryContextResult:
        """A topic's memories for a conversation (``/codemem:context``): the most relevant first,
        grouped by type, each group and the whole with a token estimate, within ``max_tokens``."""
        return self.reads.memory_context(request)

    def memory_statistics(self) -> MemoryStatisticsResult:
        """Counts per type, sync states, store and cache health, the projection queue: totals over
        every scope in use, and each scope on its own."""
        return statistics.memory_statistics(self.stores)

    # -- export, import, backup, restore -----------------------------------------------------
    def export_memory(self, request: ExportMemoryInput) -> ExportMemoryResult:
        """Memories as JSONL (to a project file or inline), Markdown files or git notes."""
        return export_import.export_memory(self.stores, request)

    def import_memory(self, request: ImportMemoryInput, *, request_id: str | None = None) -> ImportMemoryResult:
        """Memories from JSONL, a directory of Markdown memory files, or git notes; a repeated
        ``request_id`` imports nothing twice and counts as the first call did."""
        return export_import.import_memory(self.stores, request, request_id=request_id)

    def backup(self, request: BackupInput) -> BackupResult:
        """A consistent online copy of the ledger (and the embedding cache) into a project directory."""
        from query_server.memory import backup  # imported when used (~35 ms)

        return backup.backup_ledger(self.stores, request)

    def restore(self, request: RestoreInput) -> RestoreResult:
        """Replace the ledger with a backup's (the current one is kept beside it), then rebuild the
        memory projections from it."""
        from query_server.memory import backup

        return backup.restore_ledger(self.stores, request)

    # -- git notes and reviews ---------------------------------------------------------------
    def notes_sync(self, request: NotesSyncInput) -> NotesSyncResult:
        """Merge fetched git notes, import them into the ledger (searchable at once), write the
        ledger's changes into ``refs/notes/cs/*``; ``rebuild`` re-reads and rewrites them all."""
        return notes.notes_sync(self.stores, request)

    def notes_capture(self, request: NotesCaptureInput) -> NotesCaptureResult:
        """Tie the decisions recorded since a commit's parent to the commit (its note in cs/decisions)."""
        return notes.notes_capture(self.stores, self.writes, request)

    def record_review(self, request: RecordReviewInput) -> RecordReviewResult:
        """Store a code review's findings, one memory each, attached to the reviewed commit (cs/reviews)."""
        return reviews.record_review(self.stores, self.writes, request)

    def review_findings(self, request: ReviewFindingsInput) -> ReviewFindingsResult:
        """Stored review findings (of one commit, or all), most severe first."""
        return reviews.review_findings(self.stores, request)

    # -- normalization -----------------------------------------------------------------------
    def normalize_memory(self, request: NormalizeMemoryInput) -> NormalizationJob:
        """Start normalization in the background (one at a time); returns the job at once."""
        return self.normalization.normalize_memory(request)

    def normalize_status(self, request: NormalizeStatusInput) -> NormalizationJob:
        """A normalization job's phase, percent, errors and report (the latest when no id is given)."""
        return self.normalization.normalize_status(request)

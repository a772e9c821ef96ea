"""Every service method another face can call, once: the loopback RPC of the project's owner
(``query_server.ownership``) and the HTTP routes (``query_server.http_api``) are built from it.

Each method says what a caller may do when the owner process dies while running it
(``Method.retry``), so a call in flight during an owner hand-over gives one result and changes
the stores once:

- ``read``: changes nothing the caller sees (reads; access counts are statistics) — retried.
- ``natural``: running it again leaves the same state — retried. The index methods re-index from
  disk and converge (a dead owner's background job died with it, so the retry starts it on the
  new owner); projections (``sync_memory``, ``rebuild_projections``, ``refresh_design``) are
  rebuilt from the ledger; ``normalize_memory`` converges (a second run merges nothing new).
- ``key``: applied once per idempotency key — retried with the same key, and the ledger returns
  the first outcome. The key is the input's ``request_id`` field where it has one
  (``memory_add``, ``memory_bulk_add``; a key the caller gives wins), else the method's
  ``request_id`` keyword (``memory_update``, ``memory_delete``, ``import_memory``,
  ``record_test_run``). ``ProjectHandle`` makes one per call when the caller gives none.
- ``once``: a repeat would not give the first result (``export_memory`` and ``backup`` refuse the
  target the first attempt wrote; a second ``restore`` could put the restored ledger where the
  first kept the replaced one) — retried only when the request never reached the owner; otherwise
  the caller is told it may have completed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from resources.schemas.design import (
    CheckConsistencyInput,
    CheckConsistencyResult,
    DesignContextInput,
    DesignContextResult,
    ImpactOfChangeInput,
    ImpactOfChangeResult,
    MemoryHealthResult,
    RecordTestRunInput,
    RecordTestRunResult,
    TraceRequirementsInput,
    TraceRequirementsResult,
    ValidateFixInput,
    ValidateFixResult,
)
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


RetryPolicy = Literal["read", "natural", "key", "once"]
READ: RetryPolicy = "read"
NATURAL: RetryPolicy = "natural"
KEYED: RetryPolicy = "key"
ONCE: RetryPolicy = "once"


@dataclass(frozen=True)
class Method:
    """A service method: its input model, its result model (None: a plain dict), the summary of
    its ``POST /tools/<name>`` route (None: no plain route — internal, or served specially), and
    what a caller may do when the owner dies while running it (see the module's docstring)."""

    input: type[BaseModel] | None
    result: type[BaseModel] | None
    route: str | None = None
    retry: RetryPolicy = ONCE


METHODS: dict[str, Method] = {
    "code_search": Method(CodeSearchInput, CodeSearchResult, "Find functions, methods and classes by meaning and by name.", retry=READ),
    "graph_query": Method(GraphQueryInput, GraphQueryResult, "Read-only Cypher over the code graph; writes are refused.", retry=READ),
    "index_status": Method(None, IndexStatusResult, retry=READ),
    "health": Method(None, HealthResult, retry=READ),
    "get_symbol": Method(GetSymbolInput, GetSymbolResult, "A symbol with its callers and callees (and its code).", retry=READ),
    "get_related": Method(GetRelatedInput, GetRelatedResult, "The graph neighbourhood of a symbol or file, nearest first.", retry=READ),
    "find_duplicates": Method(FindDuplicatesInput, FindDuplicatesResult, "Existing functions similar to the given code.", retry=READ),
    "index_file": Method(IndexFileInput, IndexFileResult, "Index one file now and report what it extracted.", retry=NATURAL),
    "index_directory": Method(IndexDirectoryInput, JobState, "Start indexing a directory in the background (a job).", retry=NATURAL),
    "reindex": Method(ReindexInput, JobState, "Start a re-index (changed or full) in the background (a job).", retry=NATURAL),
    "job_status": Method(JobStatusInput, JobState, retry=READ),
    "index": Method(IndexInput, None, retry=NATURAL),
    "memory_add": Method(MemoryAddInput, MemoryAddResult, "Store a memory; returns its id and possible conflicts.", retry=KEYED),
    "memory_update": Method(MemoryUpdateInput, MemoryUpdateResult, "Change a memory (optimistic concurrency).", retry=KEYED),
    "memory_delete": Method(MemoryDeleteInput, MemoryDeleteResult, "Soft-delete (30 days) or hard-delete a memory.", retry=KEYED),
    "memory_get": Method(MemoryGetInput, MemoryRecord, "One memory in full, optionally with relationships.", retry=READ),
    "memory_bulk_add": Method(MemoryBulkAddInput, MemoryBulkAddResult, "Store many memories, all or nothing.", retry=KEYED),
    "memory_search": Method(MemorySearchInput, MemorySearchResult, "Memories by meaning, type, time and metadata.", retry=READ),
    "memory_statistics": Method(None, MemoryStatisticsResult, "Counts per type, sync state, stores, cache.", retry=READ),
    "export_memory": Method(ExportMemoryInput, ExportMemoryResult, "Memories as JSONL, to a project file or inline.", retry=ONCE),
    "import_memory": Method(ImportMemoryInput, ImportMemoryResult, "Memories from JSONL (skip/overwrite/error).", retry=KEYED),
    "sync_memory": Method(None, None, retry=NATURAL),
    "normalize_memory": Method(NormalizeMemoryInput, NormalizationJob, "Start a normalization job (dedup, cleanup, swap).", retry=NATURAL),
    "normalize_status": Method(NormalizeStatusInput, NormalizationJob, "A normalization job's phase, percent and report.", retry=READ),
    "memory_list": Method(MemoryListInput, MemoryListResult, retry=READ),
    "memory_context": Method(MemoryContextInput, MemoryContextResult, "A topic's memories grouped by type, most relevant first, within a token budget.", retry=READ),
    "backup": Method(BackupInput, BackupResult, retry=ONCE),
    "restore": Method(RestoreInput, RestoreResult, retry=ONCE),
    "rebuild_projections": Method(None, None, retry=NATURAL),
    "check_consistency": Method(CheckConsistencyInput, CheckConsistencyResult, "A class or component against its patterns: deviations and a score.", retry=READ),
    "validate_fix": Method(ValidateFixInput, ValidateFixResult, "A proposed fix against the ADRs, designs and requirements.", retry=READ),
    "get_design_context": Method(DesignContextInput, DesignContextResult, "Designs, requirements, patterns and docs for a component or feature.", retry=READ),
    "trace_requirements": Method(TraceRequirementsInput, TraceRequirementsResult, "A requirement's implementing code, tests (with results) and designs.", retry=READ),
    "record_test_run": Method(RecordTestRunInput, RecordTestRunResult, "Record a JUnit XML report as test history.", retry=KEYED),
    "impact_of_change": Method(ImpactOfChangeInput, ImpactOfChangeResult, "What a diff or file list affects: callers, tests, requirements, designs.", retry=READ),
    "memory_health": Method(None, MemoryHealthResult, "Stale, orphaned, broken and duplicated memories.", retry=READ),
    "refresh_design": Method(None, None, retry=NATURAL),
}
"""Name → method. ``index_status`` has no plain route: HTTP merges a job's state into it."""


def call_method(service: Any, name: str, request: BaseModel | None, request_id: str | None = None, **options: Any) -> Any:
    """Run ``service``'s method ``name`` on ``request`` with the call's idempotency key (ignored
    unless the method's retry policy is ``key``): into the input's ``request_id`` field when it
    has one and the caller left it empty, else as the ``request_id`` keyword."""
    if request_id is not None and METHODS[name].retry == KEYED:
        if request is not None and "request_id" in type(request).model_fields:
            if getattr(request, "request_id", None) is None:
                request = request.model_copy(update={"request_id": request_id})
        else:
            options["request_id"] = request_id
    fn = getattr(service, name)
    return fn(request, **options) if request is not None else fn(**options)

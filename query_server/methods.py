"""Every service method another face can call, once: the loopback RPC of the project's owner
(``query_server.ownership``) and the HTTP routes (``query_server.http_api``) are built from it."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Method:
    """A service method: its input model, its result model (None: a plain dict), and the summary
    of its ``POST /tools/<name>`` route (None: no plain route — internal, or served specially)."""

    input: type[BaseModel] | None
    result: type[BaseModel] | None
    route: str | None = None


METHODS: dict[str, Method] = {
    "code_search": Method(CodeSearchInput, CodeSearchResult, "Find functions, methods and classes by meaning and by name."),
    "graph_query": Method(GraphQueryInput, GraphQueryResult, "Read-only Cypher over the code graph; writes are refused."),
    "index_status": Method(None, IndexStatusResult),
    "health": Method(None, HealthResult),
    "get_symbol": Method(GetSymbolInput, GetSymbolResult, "A symbol with its callers and callees (and its code)."),
    "get_related": Method(GetRelatedInput, GetRelatedResult, "The graph neighbourhood of a symbol or file, nearest first."),
    "find_duplicates": Method(FindDuplicatesInput, FindDuplicatesResult, "Existing functions similar to the given code."),
    "index_file": Method(IndexFileInput, IndexFileResult, "Index one file now and report what it extracted."),
    "index_directory": Method(IndexDirectoryInput, JobState, "Start indexing a directory in the background (a job)."),
    "reindex": Method(ReindexInput, JobState, "Start a re-index (changed or full) in the background (a job)."),
    "job_status": Method(JobStatusInput, JobState),
    "index": Method(IndexInput, None),
    "memory_add": Method(MemoryAddInput, MemoryAddResult, "Store a memory; returns its id and possible conflicts."),
    "memory_update": Method(MemoryUpdateInput, MemoryUpdateResult, "Change a memory (optimistic concurrency)."),
    "memory_delete": Method(MemoryDeleteInput, MemoryDeleteResult, "Soft-delete (30 days) or hard-delete a memory."),
    "memory_get": Method(MemoryGetInput, MemoryRecord, "One memory in full, optionally with relationships."),
    "memory_bulk_add": Method(MemoryBulkAddInput, MemoryBulkAddResult, "Store many memories, all or nothing."),
    "memory_search": Method(MemorySearchInput, MemorySearchResult, "Memories by meaning, type, time and metadata."),
    "memory_statistics": Method(None, MemoryStatisticsResult, "Counts per type, sync state, stores, cache."),
    "export_memory": Method(ExportMemoryInput, ExportMemoryResult, "Memories as JSONL, to a project file or inline."),
    "import_memory": Method(ImportMemoryInput, ImportMemoryResult, "Memories from JSONL (skip/overwrite/error)."),
    "sync_memory": Method(None, None),
    "normalize_memory": Method(NormalizeMemoryInput, NormalizationJob, "Start a normalization job (dedup, cleanup, swap)."),
    "normalize_status": Method(NormalizeStatusInput, NormalizationJob, "A normalization job's phase, percent and report."),
    "memory_list": Method(MemoryListInput, MemoryListResult),
    "memory_context": Method(MemoryContextInput, MemoryContextResult, "A topic's memories grouped by type, most relevant first, within a token budget."),
    "backup": Method(BackupInput, BackupResult),
    "restore": Method(RestoreInput, RestoreResult),
    "rebuild_projections": Method(None, None),
    "check_consistency": Method(CheckConsistencyInput, CheckConsistencyResult, "A class or component against its patterns: deviations and a score."),
    "validate_fix": Method(ValidateFixInput, ValidateFixResult, "A proposed fix against the ADRs, designs and requirements."),
    "get_design_context": Method(DesignContextInput, DesignContextResult, "Designs, requirements, patterns and docs for a component or feature."),
    "trace_requirements": Method(TraceRequirementsInput, TraceRequirementsResult, "A requirement's implementing code, tests (with results) and designs."),
    "record_test_run": Method(RecordTestRunInput, RecordTestRunResult, "Record a JUnit XML report as test history."),
    "impact_of_change": Method(ImpactOfChangeInput, ImpactOfChangeResult, "What a diff or file list affects: callers, tests, requirements, designs."),
    "memory_health": Method(None, MemoryHealthResult, "Stale, orphaned, broken and duplicated memories."),
    "refresh_design": Method(None, None),
}
"""Name → method. ``index_status`` has no plain route: HTTP merges a job's state into it."""

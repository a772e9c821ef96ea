"""The memory tools: what Claude Code calls to write down and recall what it learns
(``query_server.memory.service.MemoryService``, the service's ``memory`` part)."""

from __future__ import annotations

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

from query_server.memory.service import MemoryService
from query_server.tools.registry import KEYED, NATURAL, ONCE, READ, Tool, describe, on_memory

MEMORY_TOOLS: tuple[Tool, ...] = (
    Tool(
        "memory_add", on_memory(MemoryService.memory_add), MemoryAddInput, MemoryAddResult, KEYED,
        route="Store a memory; returns its id and possible conflicts.",
        description=describe("""
            Write down something worth remembering across sessions: a requirement, a design decision
            or ADR, a code pattern, a test outcome, a user preference, a session summary.

            Call it right after deciding or learning something. The result lists `conflicts`: stored
            memories that say the same thing (update them instead) or contradict it (same preference
            key or requirement id with other content). `scope` says who sees it: this project (default),
            only you in this project (local), or you in every project (global).
        """),
    ),
    Tool(
        "memory_search", on_memory(MemoryService.memory_search), MemorySearchInput, MemorySearchResult, READ,
        route="Memories by meaning, type, time and metadata.",
        description=describe("""
            Recall project memories by meaning: requirements, ADRs and designs, patterns, past test
            failures and fixes, preferences, earlier sessions. Use it BEFORE implementing or fixing
            something, to follow what was decided. Ranked by similarity x importance x recency. Searches
            the project, your local and global memories, and your organisation's enterprise ones when
            that scope is on (each hit says its `scope`); hits are
            summaries — memory_get reads one in full.
        """),
    ),
    Tool(
        "memory_context", on_memory(MemoryService.memory_context), MemoryContextInput, MemoryContextResult, READ,
        route="A topic's memories grouped by type, most relevant first, within a token budget.",
        description=describe("""
            Load what the project remembers about a topic before working on it: its memories grouped
            by type (requirements, designs, patterns, test history, sessions, preferences...), the most
            relevant first, with a token estimate per group and in total, kept within max_tokens (long
            memories are summarized; memory_get reads one in full).
        """),
    ),
    Tool(
        "memory_get", on_memory(MemoryService.memory_get), MemoryGetInput, MemoryRecord, READ,
        route="One memory in full, optionally with relationships.",
        description=describe("""
            One memory in full (search hits cut long content), with its version for memory_update
            and, on request, what it is linked to.
        """),
    ),
    Tool(
        "memory_update", on_memory(MemoryService.memory_update), MemoryUpdateInput, MemoryUpdateResult, KEYED,
        route="Change a memory (optimistic concurrency).",
        description=describe("""
            Correct or extend a memory (a decision changed, a requirement was implemented). Pass
            expected_version from memory_get so a concurrent edit is not overwritten silently. A memory
            flagged stale (its anchored code changed) is confirmed with confirm_anchors=true.
        """),
    ),
    Tool(
        "memory_delete", on_memory(MemoryService.memory_delete), MemoryDeleteInput, MemoryDeleteResult, KEYED,
        route="Soft-delete (30 days) or hard-delete a memory.",
        description=describe("""
            Delete a memory that is wrong or obsolete: soft by default (hidden from search, restorable
            for 30 days); its graph links go with it.
        """),
    ),
    Tool(
        "memory_bulk_add", on_memory(MemoryService.memory_bulk_add), MemoryBulkAddInput, MemoryBulkAddResult, KEYED,
        route="Store many memories, all or nothing.",
        description=describe("""
            Store several memories at once, all or nothing: if one is invalid, none is stored and
            `errors` says which and why.
        """),
    ),
    Tool(
        "memory_extract", on_memory(MemoryService.memory_extract), MemoryExtractInput, MemoryExtractResult, NATURAL,
        route="Propose typed memories from a transcript, diff, commit message or text (dry run unless commit).",
        description=describe("""
            Turn a piece of work into memories: pass a conversation transcript, a diff, a commit message
            or notes, and get typed candidates — decisions (design), requirements, user preferences, test
            results, gotchas and conventions (code_pattern) — each with a confidence and the span of the
            text it comes from. Each candidate says whether a stored memory already says it
            (`duplicate_of`) and which stored memories it contradicts (`conflicts_with`: review them, e.g.
            a decision that reverses an ADR). A dry run by default; commit=true stores the new ones
            (duplicates skipped, all or none), tagged "extracted".
        """),
    ),
    Tool(
        "memory_statistics", on_memory(MemoryService.memory_statistics), None, MemoryStatisticsResult, READ,
        route="Counts per type, sync state, stores, cache.",
        description=describe("""
            How many memories of each type exist (active and deleted), whether the search index and
            graph are in sync with the ledger, store connectivity and cache hit rate.
        """),
    ),
    Tool(
        "export_memory", on_memory(MemoryService.export_memory), ExportMemoryInput, ExportMemoryResult, ONCE,
        route="Memories as JSONL, to a project file or inline.",
        description=describe("""
            Export memories for backup, review or sharing: JSONL, Markdown files (readable, diffable,
            committable) or git notes on the commits they belong to.
        """),
    ),
    Tool(
        "import_memory", on_memory(MemoryService.import_memory), ImportMemoryInput, ImportMemoryResult, KEYED,
        route="Memories from JSONL (skip/overwrite/error).",
        description="Import memories as export_memory writes them (jsonl: exactly one of input_path or data).",
    ),
    Tool(
        "normalize_memory", on_memory(MemoryService.normalize_memory), NormalizeMemoryInput, NormalizationJob, NATURAL,
        route="Start a normalization job (dedup, cleanup, swap).",
        description=describe("""
            Tidy the memory store in the background: merge near-duplicates (>= 0.95 similar, metadata
            merged, audited), find links to code that no longer exists, refresh stale embeddings, purge
            soft-deletes older than 30 days, then swap in rebuilt indexes atomically. Start with
            dry_run=true to see what it would do. Poll normalize_status(job_id).
        """),
    ),
    Tool(
        "normalize_status", on_memory(MemoryService.normalize_status), NormalizeStatusInput, NormalizationJob, READ,
        route="A normalization job's phase, percent and report.",
        description="Phase, percent, errors and (when done) the report of a normalization job.",
    ),
    Tool(
        "record_review", on_memory(MemoryService.record_review), RecordReviewInput, RecordReviewResult, KEYED,
        route="Store code review findings, attached to the reviewed commit (notes namespace cs/reviews).",
        description=describe("""
            Record the findings of a code review of a commit: each finding (severity, category, file,
            line, summary, details with the remediation) becomes a memory in the `reviews` namespace,
            attached to the reviewed commit (a git note in refs/notes/cs/reviews when git notes are on),
            so later reviews and fixes find it. Before reviewing, memory_search the reviews for
            findings seen before.
        """),
    ),
    Tool(
        "review_findings", on_memory(MemoryService.review_findings), ReviewFindingsInput, ReviewFindingsResult, READ,
        route="Stored review findings of a commit (or all), most severe first.",
        description=describe("""
            Read back the findings of code reviews, of one commit or all, open ones by default, most
            severe first — what to fix. When one is fixed, memory_update it (memory_type session) with
            metadata {"status": "resolved", "resolution": "what was done"}.
        """),
    ),
    # internal: the owner RPC and the CLI
    Tool("memory_list", on_memory(MemoryService.memory_list), MemoryListInput, MemoryListResult, READ),
    Tool("backup", on_memory(MemoryService.backup), BackupInput, BackupResult, ONCE),
    Tool("restore", on_memory(MemoryService.restore), RestoreInput, RestoreResult, ONCE),
    Tool("sync_memory", on_memory(MemoryService.sync), None, None, NATURAL),
    Tool("rebuild_projections", on_memory(MemoryService.rebuild_projections), None, None, NATURAL),
    Tool("notes_sync", on_memory(MemoryService.notes_sync), NotesSyncInput, NotesSyncResult, NATURAL),
    Tool("notes_capture", on_memory(MemoryService.notes_capture), NotesCaptureInput, NotesCaptureResult, NATURAL),
)

"""MCP face of the memory tools: what Claude Code calls to write down and recall what it learns.

Each tool is one line over the shared tool-call path of ``query_server.mcp_server`` (validation,
telemetry, actionable errors); the service is ``query_server.memory.service.MemoryService``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from resources.schemas.memory import (
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
    MemoryRecord,
    MemorySearchInput,
    MemorySearchResult,
    MemoryStatisticsResult,
    MemoryUpdateInput,
    MemoryUpdateResult,
    NormalizationJob,
    NormalizationPhase,
    NormalizeMemoryInput,
    NormalizeStatusInput,
    RelationshipSpec,
    TimeRange,
)

SCOPE_HELP = (
    "project (default): this project's memories, shared with the team through exports; local: your personal "
    "notes on this project, never shared; global: yours, seen from every project (e.g. your coding preferences)."
)
Scope = Literal["project", "local", "global"]

TYPES_HELP = (
    "requirements (REQ-XXX-NNN statements), design (ADRs and decisions), code_pattern (templates and "
    "conventions), component, function, test_history, session (what a session did), user_preference."
)


def register_memory_tools(server: MCPServer, call: Callable[..., Awaitable[Any]]) -> None:
    """Add the memory tools to ``server``; ``call`` is the shared tool-call path."""

    @server.tool(name="memory_add")
    async def memory_add(
        memory_type: Annotated[str, Field(description=TYPES_HELP)],
        content: Annotated[str, Field(description="The memory itself, in plain words (max 100,000 characters).")],
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description=MemoryAddInput.model_fields["metadata"].description or "Type-specific fields."),
        ] = None,
        relationships: Annotated[
            list[RelationshipSpec] | None,
            Field(description="Links: [{type: ADDRESSES|IMPLEMENTS_REQ|DEPENDS_ON|USES_PATTERN|TESTS|RELATES_TO..., "
                  "target_id: memory id, REQ id, code qualified name or file path}]."),
        ] = None,
        importance_score: Annotated[float | None, Field(description="0-1, default 0.5.")] = None,
        request_id: Annotated[str | None, Field(description="Idempotency key for safe retries.")] = None,
        scope: Annotated[Scope, Field(description=SCOPE_HELP)] = "project",
    ) -> MemoryAddResult:
        """Write down something worth remembering across sessions: a requirement, a design decision
        or ADR, a code pattern, a test outcome, a user preference, a session summary.

        Call it right after deciding or learning something. The result lists `conflicts`: stored
        memories that say the same thing (update them instead) or contradict it (same preference
        key or requirement id with other content). `scope` says who sees it: this project (default),
        only you in this project (local), or you in every project (global)."""
        return await call(
            "memory_add", MemoryAddInput, memory_type=memory_type, content=content, metadata=metadata or {},
            relationships=relationships or [], importance_score=importance_score, request_id=request_id, scope=scope,
        )

    @server.tool(name="memory_search")
    async def memory_search(
        query: Annotated[str, Field(description="What you want to recall, in plain words.")],
        memory_types: Annotated[list[str] | None, Field(description="Only these types: " + TYPES_HELP)] = None,
        time_range: Annotated[TimeRange | None, Field(description='{"start": ISO, "end": ISO} on creation time.')] = None,
        metadata_filters: Annotated[
            dict[str, Any] | None, Field(description='Exact match on metadata, e.g. {"status": "Accepted"}.')
        ] = None,
        min_importance: Annotated[float | None, Field(description="Only memories at least this important (0-1).")] = None,
        limit: Annotated[int, Field(description="Results per page, 1-100.")] = 10,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
        include_deleted: Annotated[bool, Field(description="Also soft-deleted memories.")] = False,
        scopes: Annotated[
            list[Scope] | None, Field(description="Only these scopes: project, local, global (all when omitted).")
        ] = None,
        detail: Annotated[
            Literal["summary", "full"],
            Field(description="summary (default, cheap): ~300 characters per hit, `next` names the memory_get call for the rest; full: up to 4,000."),
        ] = "summary",
    ) -> MemorySearchResult:
        """Recall project memories by meaning: requirements, ADRs and designs, patterns, past test
        failures and fixes, preferences, earlier sessions. Use it BEFORE implementing or fixing
        something, to follow what was decided. Ranked by similarity x importance x recency. Searches
        the project, your local and your global memories (each hit says its `scope`); hits are
        summaries — memory_get reads one in full."""
        return await call(
            "memory_search", MemorySearchInput, query=query, memory_types=memory_types, time_range=time_range,
            metadata_filters=metadata_filters, min_importance=min_importance, limit=limit, cursor=cursor,
            include_deleted=include_deleted, scopes=scopes, detail=detail,
        )

    @server.tool(name="memory_context")
    async def memory_context(
        topic: Annotated[str, Field(description="The feature, component, requirement or question to load the context of.")],
        memory_types: Annotated[list[str] | None, Field(description="Only these types: " + TYPES_HELP)] = None,
        scopes: Annotated[
            list[Scope] | None, Field(description="Only these scopes: project, local, global (all when omitted).")
        ] = None,
        max_tokens: Annotated[int, Field(description="Token budget of the whole answer (200-40,000).")] = 4_000,
        min_score: Annotated[float | None, Field(description="Leave out memories scoring below this (0-1).")] = None,
    ) -> MemoryContextResult:
        """Load what the project remembers about a topic before working on it: its memories grouped
        by type (requirements, designs, patterns, test history, sessions, preferences...), the most
        relevant first, with a token estimate per group and in total, kept within max_tokens (long
        memories are summarized; memory_get reads one in full)."""
        return await call(
            "memory_context", MemoryContextInput, topic=topic, memory_types=memory_types, scopes=scopes,
            max_tokens=max_tokens, min_score=min_score,
        )

    @server.tool(name="memory_get")
    async def memory_get(
        memory_id: Annotated[str, Field(description="Id from memory_add or memory_search.")],
        memory_type: Annotated[str, Field(description="Its type: " + TYPES_HELP)],
        include_relationships: Annotated[bool, Field(description="Also its links to memories and code.")] = False,
    ) -> MemoryRecord:
        """One memory in full (search hits cut long content), with its version for memory_update
        and, on request, what it is linked to."""
        return await call(
            "memory_get", MemoryGetInput, memory_id=memory_id, memory_type=memory_type,
            include_relationships=include_relationships,
        )

    @server.tool(name="memory_update")
    async def memory_update(
        memory_id: Annotated[str, Field(description="Id of the memory.")],
        memory_type: Annotated[str, Field(description="Its type: " + TYPES_HELP)],
        content: Annotated[str, Field(description="New content (re-embedded); omit to keep it.")] = "",
        metadata: Annotated[dict[str, Any] | None, Field(description="Metadata fields to change (merged).")] = None,
        importance_score: Annotated[float | None, Field(description="New importance 0-1.")] = None,
        expected_version: Annotated[
            int | None, Field(description="The version you read; refused with the current one if it moved on.")
        ] = None,
        confirm_anchors: Annotated[
            bool, Field(description="The memory still holds for the code it is anchored to: clear its stale flag (re-anchor to the code as indexed now).")
        ] = False,
    ) -> MemoryUpdateResult:
        """Correct or extend a memory (a decision changed, a requirement was implemented). Pass
        expected_version from memory_get so a concurrent edit is not overwritten silently. A memory
        flagged stale (its anchored code changed) is confirmed with confirm_anchors=true."""
        return await call(
            "memory_update", MemoryUpdateInput, memory_id=memory_id, memory_type=memory_type, content=content or None,
            metadata=metadata, importance_score=importance_score, expected_version=expected_version,
            confirm_anchors=confirm_anchors,
        )

    @server.tool(name="memory_delete")
    async def memory_delete(
        memory_id: Annotated[str, Field(description="Id of the memory.")],
        memory_type: Annotated[str, Field(description="Its type: " + TYPES_HELP)],
        hard_delete: Annotated[bool, Field(description="Delete for good now (default: soft, kept 30 days).")] = False,
    ) -> MemoryDeleteResult:
        """Delete a memory that is wrong or obsolete: soft by default (hidden from search, restorable
        for 30 days); its graph links go with it."""
        return await call(
            "memory_delete", MemoryDeleteInput, memory_id=memory_id, memory_type=memory_type, hard_delete=hard_delete
        )

    @server.tool(name="memory_bulk_add")
    async def memory_bulk_add(
        memories: Annotated[
            list[MemoryAddInput], Field(description="1-1000 memories, each as memory_add's arguments.")
        ],
        request_id: Annotated[str | None, Field(description="Idempotency key for safe retries.")] = None,
        scope: Annotated[Scope | None, Field(description="Scope of the memories that name none (default project); one batch, one scope. " + SCOPE_HELP)] = None,
    ) -> MemoryBulkAddResult:
        """Store several memories at once, all or nothing: if one is invalid, none is stored and
        `errors` says which and why."""
        return await call("memory_bulk_add", MemoryBulkAddInput, memories=memories, request_id=request_id, scope=scope)

    @server.tool(name="memory_statistics")
    async def memory_statistics() -> MemoryStatisticsResult:
        """How many memories of each type exist (active and deleted), whether the search index and
        graph are in sync with the ledger, store connectivity and cache hit rate."""
        return await call("memory_statistics")

    @server.tool(name="export_memory")
    async def export_memory(
        memory_types: Annotated[list[str] | None, Field(description="Only these types: " + TYPES_HELP)] = None,
        filters: Annotated[dict[str, Any] | None, Field(description="Exact match on metadata keys.")] = None,
        include_deleted: Annotated[bool, Field(description="Also soft-deleted memories.")] = False,
        output_path: Annotated[
            str | None, Field(description="File (jsonl) or directory (markdown) inside the project; jsonl comes back inline when omitted.")
        ] = None,
        format: Annotated[
            Literal["jsonl", "markdown", "git_notes"],
            Field(description="jsonl (one per line); markdown (one readable file per memory with YAML front matter); git_notes (session and design memories as notes on commits)."),
        ] = "jsonl",
        notes_ref: Annotated[str, Field(description="git_notes: the notes ref.")] = "refs/notes/codemem",
        scopes: Annotated[
            list[Scope] | None,
            Field(description="Only these scopes. Default: all for jsonl; project only for markdown and git_notes (they get committed)."),
        ] = None,
        overwrite: Annotated[
            bool, Field(description="Replace an existing file at output_path (never inside .codemem/ or .git/).")
        ] = False,
    ) -> ExportMemoryResult:
        """Export memories for backup, review or sharing: JSONL, Markdown files (readable, diffable,
        committable) or git notes on the commits they belong to."""
        return await call(
            "export_memory", ExportMemoryInput, memory_types=memory_types, filters=filters,
            include_deleted=include_deleted, output_path=output_path, format=format, notes_ref=notes_ref, scopes=scopes,
            overwrite=overwrite,
        )

    @server.tool(name="import_memory")
    async def import_memory(
        input_path: Annotated[str, Field(description="JSONL file, or Markdown directory, inside the project.")] = "",
        data: Annotated[str, Field(description="JSONL text instead of a file.")] = "",
        conflict_resolution: Annotated[
            Literal["skip", "overwrite", "error"], Field(description="When an id exists: skip, overwrite or error.")
        ] = "skip",
        format: Annotated[
            Literal["jsonl", "markdown", "git_notes"], Field(description="What export_memory wrote: jsonl, markdown or git_notes.")
        ] = "jsonl",
        notes_ref: Annotated[str, Field(description="git_notes: the notes ref.")] = "refs/notes/codemem",
        scope: Annotated[
            Scope | None, Field(description="Scope to import into (default: the scope each JSONL line names, else project).")
        ] = None,
    ) -> ImportMemoryResult:
        """Import memories as export_memory writes them (jsonl: exactly one of input_path or data)."""
        return await call(
            "import_memory", ImportMemoryInput, input_path=input_path or None, data=data or None,
            conflict_resolution=conflict_resolution, format=format, notes_ref=notes_ref, scope=scope,
        )

    @server.tool(name="normalize_memory")
    async def normalize_memory(
        phases: Annotated[
            list[NormalizationPhase] | None,
            Field(description="Only these phases: snapshot, deduplication, orphan_detection, embedding_refresh, "
                  "cleanup, validation, swap (all when omitted; without swap nothing is applied)."),
        ] = None,
        dry_run: Annotated[bool, Field(description="Report what would change, change nothing.")] = False,
    ) -> NormalizationJob:
        """Tidy the memory store in the background: merge near-duplicates (>= 0.95 similar, metadata
        merged, audited), find links to code that no longer exists, refresh stale embeddings, purge
        soft-deletes older than 30 days, then swap in rebuilt indexes atomically. Start with
        dry_run=true to see what it would do. Poll normalize_status(job_id)."""
        return await call("normalize_memory", NormalizeMemoryInput, phases=phases, dry_run=dry_run)

    @server.tool(name="normalize_status")
    async def normalize_status(
        job_id: Annotated[str | None, Field(description="Job id from normalize_memory; the latest when omitted.")] = None,
    ) -> NormalizationJob:
        """Phase, percent, errors and (when done) the report of a normalization job."""
        return await call("normalize_status", NormalizeStatusInput, job_id=job_id)

"""MCP face of the service: the code tools for Claude Code, over stdio (``codemem mcp``).

Each tool is a few lines over ``ProjectHandle.call``; the descriptions tell an LLM when to use
the tool. Errors come back as MCP tool errors (``isError``) with an actionable message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import anyio
import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
from pydantic import BaseModel, Field, ValidationError

from resources.schemas.tools import (
    CodeKind,
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
    IndexDirectoryInput,
    IndexFileInput,
    IndexFileResult,
    IndexStatusResult,
    JobState,
    JobStatusInput,
    ReindexInput,
    RelationshipType,
    describe_validation_error,
)

from query_server.mcp_design_tools import register_design_tools
from query_server.mcp_memory_tools import register_memory_tools
from query_server.ownership import ProjectHandle
from query_server.service import ToolError
from query_server.telemetry import ToolTelemetry

log = structlog.get_logger("codemem.mcp")

INSTRUCTIONS = (
    "codemem knows this repository's code: search it by meaning before writing new code "
    "(code_search, find_duplicates), read a symbol with its callers and callees (get_symbol), walk "
    "calls/imports/inheritance (get_related, or read-only Cypher with graph_query), and check how "
    "complete and current the index is (index_status). It also keeps the project's memory across "
    "sessions: recall requirements, designs/ADRs, patterns, test history and preferences before "
    "implementing or fixing (memory_search), and record decisions and learnings when they happen "
    "(memory_add; memory_update when something changes)."
)


ToolCall = Callable[..., Awaitable[Any]]
"""``await call(method, input_model, **fields)``: validate, run on the project, record, map errors."""


def make_tool_call(handle: ProjectHandle, telemetry: ToolTelemetry) -> ToolCall:
    """The one path every MCP tool takes: input validation, the service call in a worker thread,
    a telemetry record, and errors turned into MCP tool errors (``isError``) that say what to do."""

    async def call(method: str, model: type[BaseModel] | None = None, /, **fields: Any) -> Any:
        with telemetry.call(method, fields or None, face="mcp"):
            request = None
            if model is not None:
                try:
                    request = model(**fields)
                except ValidationError as exc:
                    raise MCPToolError(describe_validation_error(exc)) from exc
            args = (request,) if request is not None else ()
            try:
                return await anyio.to_thread.run_sync(lambda: handle.call(method, *args))
            except ToolError as exc:
                raise MCPToolError(str(exc)) from exc
            except Exception as exc:
                log.exception("tool failed", tool=method)
                raise MCPToolError(
                    f"{method} failed: {type(exc).__name__}: {exc} — see the server log; "
                    "`codemem health` shows each store"
                ) from exc

    return call


def build_mcp_server(handle: ProjectHandle, telemetry: ToolTelemetry | None = None) -> MCPServer:
    """An MCP server exposing the code and memory tools of the project behind ``handle``."""
    server = MCPServer(name="codemem", instructions=INSTRUCTIONS)
    call = make_tool_call(handle, telemetry or ToolTelemetry())

    @server.tool(name="code_search")
    async def code_search(
        query: Annotated[str, Field(description="What the code does, in words, or a code snippet.")],
        language: Annotated[
            str | None,
            Field(description="Only this language (python, typescript, tsx, javascript, java, go, rust, csharp)."),
        ] = None,
        path_prefix: Annotated[str | None, Field(description="Only files under this repo-relative directory.")] = None,
        kind: Annotated[CodeKind | None, Field(description="Only this kind of symbol.")] = None,
        limit: Annotated[int, Field(description="Results per page, 1-100.")] = 10,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
        detail: Annotated[
            Literal["summary", "full"],
            Field(description="summary (default, cheap): signature, first docstring paragraph, 8 lines of code; full: whole docstring, 30 lines."),
        ] = "summary",
    ) -> CodeSearchResult:
        """Find functions, methods and classes in this repository by meaning and by name.

        Use it BEFORE writing new code (an existing function may already do it), to locate where
        something is implemented, or to find examples of a pattern. Results carry file path,
        lines, signature, docstring, a snippet, and provenance (stale=true means the file changed
        since indexing). Combines semantic (dense) and keyword (sparse) search. Hits are summaries
        by default; get_symbol (include_code=true) reads one in full, detail="full" widens all.
        """
        return await call(
            "code_search", CodeSearchInput,
            query=query, language=language, path_prefix=path_prefix, kind=kind, limit=limit, cursor=cursor,
            detail=detail,
        )

    @server.tool(name="graph_query")
    async def graph_query(
        cypher: Annotated[str, Field(description="Read-only Cypher: MATCH ... RETURN ...")],
        parameters: Annotated[dict[str, Any] | None, Field(description="Query parameters referenced as $name.")] = None,
        limit: Annotated[int, Field(description="Maximum rows, 1-1000.")] = 100,
    ) -> GraphQueryResult:
        """Run a read-only Cypher query over the code graph.

        Nodes: File {path, language, content_hash, indexed_at}, Function and Class {id,
        name, qualified_name, file_path, language, kind, signature, start_line, end_line},
        Module {name, language}. Relationships: CONTAINS (File/Class -> Function/Class), CALLS
        (Function -> Function, line_number), IMPORTS (File -> File/Module, items), EXTENDS and
        IMPLEMENTS (Class -> Class). Example: callers of a function:
        MATCH (c:Function)-[:CALLS]->(f:Function {name: $name}) RETURN c.qualified_name, c.file_path.
        Writes (CREATE, MERGE, SET, DELETE, ...) are refused.
        """
        return await call("graph_query", GraphQueryInput, cypher=cypher, parameters=parameters, limit=limit)

    @server.tool(name="find_duplicates")
    async def find_duplicates(
        code: Annotated[str, Field(description="The function you are about to write (or a snippet of it).")],
        language: Annotated[
            str | None, Field(description="Its language: python, typescript, tsx, javascript, java, go, rust, csharp.")
        ] = None,
        threshold: Annotated[float | None, Field(description="Similarity threshold 0.70-0.95 (default 0.85).")] = None,
        limit: Annotated[int, Field(description="Maximum duplicates, 1-100.")] = 10,
    ) -> FindDuplicatesResult:
        """Check whether the repository already has a function like the one you are about to write.

        Call it BEFORE implementing a helper or utility: it returns existing functions above the
        similarity threshold with their location, signature, docstring and a reuse recommendation.
        """
        return await call(
            "find_duplicates", FindDuplicatesInput, code=code, language=language, threshold=threshold, limit=limit
        )

    @server.tool(name="get_symbol")
    async def get_symbol(
        symbol: Annotated[
            str, Field(description="An id from code_search or a qualified name such as pkg.module.Class.method.")
        ],
        include_code: Annotated[bool, Field(description="Also return the full source.")] = False,
    ) -> GetSymbolResult:
        """One function or class: signature, docstring, location, callers and callees; its full
        source with include_code=true. Use it after code_search to read a hit in depth."""
        return await call("get_symbol", GetSymbolInput, symbol=symbol, include_code=include_code)

    @server.tool(name="get_related")
    async def get_related(
        entity_id: Annotated[str, Field(description="A symbol id, a qualified name, or a repo-relative file path.")],
        relationship_types: Annotated[
            list[RelationshipType] | None,
            Field(description="Only these: CALLS, IMPORTS, EXTENDS, IMPLEMENTS, CONTAINS."),
        ] = None,
        direction: Annotated[
            Literal["outgoing", "incoming", "both"],
            Field(description="outgoing (what it uses), incoming (what uses it) or both."),
        ] = "both",
        depth: Annotated[int, Field(description="Hops, 1-5.")] = 1,
        limit: Annotated[int, Field(description="Results per page, 1-500.")] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor from the previous page.")] = None,
    ) -> GetRelatedResult:
        """Walk the code graph from a function, class or file: its callers (incoming CALLS), its
        callees (outgoing CALLS), imports, base classes and implementations, up to 5 hops, nearest
        first. Use it to see what a change would affect or how something is used."""
        return await call(
            "get_related", GetRelatedInput,
            entity_id=entity_id, relationship_types=relationship_types, direction=direction, depth=depth, limit=limit,
            cursor=cursor,
        )

    @server.tool(name="index_status")
    async def index_status(
        job_id: Annotated[
            str | None, Field(description="A job id from index_directory/reindex; omit for overall statistics.")
        ] = None,
    ) -> IndexStatusResult:
        """How much of the repository is indexed (files, symbols, edges, dense-vector coverage, the
        search mode in effect, stores and embedder, last run); with job_id also that background
        job's phase, percent and final report. Call it when results look incomplete or stale."""
        status = await call("index_status")
        if job_id is not None:
            status.job = await call("job_status", JobStatusInput, job_id=job_id)
        return status

    @server.tool(name="index_file")
    async def index_file(
        file_path: Annotated[str, Field(description="Path to the file (must be within the project).")],
        force: Annotated[bool, Field(description="Re-index even if unchanged.")] = False,
    ) -> IndexFileResult:
        """Index one file now, e.g. right after editing it, so searches see the new code."""
        return await call("index_file", IndexFileInput, file_path=file_path, force=force)

    @server.tool(name="index_directory")
    async def index_directory(
        directory_path: Annotated[str, Field(description="Directory inside the project ('.' for all).")] = ".",
        extensions: Annotated[
            list[str] | None, Field(description="Only these extensions this run, e.g. ['.py'].")
        ] = None,
        exclude: Annotated[
            list[str] | None, Field(description="Gitignore-style patterns to leave alone this run.")
        ] = None,
        force: Annotated[bool, Field(description="Re-index every file, changed or not.")] = False,
    ) -> JobState:
        """Index a directory recursively in the background (only changed files are re-parsed).
        Returns a job at once; poll index_status(job_id) for phase, percent and the report."""
        return await call(
            "index_directory", IndexDirectoryInput,
            directory_path=directory_path, extensions=extensions, exclude=exclude, force=force,
        )

    @server.tool(name="reindex")
    async def reindex(
        directory_path: Annotated[str, Field(description="Directory to re-index ('.' for all).")] = ".",
        scope: Annotated[
            Literal["full", "changed"], Field(description="'changed' (incremental, default) or 'full' (clear first).")
        ] = "changed",
        extensions: Annotated[list[str] | None, Field(description="Only these extensions.")] = None,
        exclude: Annotated[list[str] | None, Field(description="Patterns to leave alone.")] = None,
    ) -> JobState:
        """Re-index in the background; scope='full' re-processes everything (and, for the whole
        project, rebuilds vectors too). Returns a job; poll index_status(job_id)."""
        return await call(
            "reindex", ReindexInput, directory_path=directory_path, scope=scope, extensions=extensions, exclude=exclude
        )

    register_memory_tools(server, call)
    register_design_tools(server, call)
    return server


def run_stdio(handle: ProjectHandle) -> None:
    """Serve MCP over stdio until the client closes the stream."""
    server = build_mcp_server(handle)
    anyio.run(server.run_stdio_async)

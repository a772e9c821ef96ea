"""The code tools: search, the code graph, symbols, duplicates and indexing (``CodeMemService``)."""

from __future__ import annotations

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

from query_server.service import CodeMemService
from query_server.tools.registry import NATURAL, READ, Tool, describe

CODE_TOOLS: tuple[Tool, ...] = (
    Tool(
        "code_search", CodeMemService.code_search, CodeSearchInput, CodeSearchResult, READ,
        route="Find functions, methods and classes by meaning and by name.",
        description=describe("""
            Find functions, methods and classes in this repository by meaning and by name.

            Use it BEFORE writing new code (an existing function may already do it), to locate where
            something is implemented, or to find examples of a pattern. Results carry file path,
            lines, signature, docstring, a snippet, and provenance (stale=true means the file changed
            since indexing). Combines semantic (dense) and keyword (sparse) search. Hits are summaries
            by default; get_symbol (include_code=true) reads one in full, detail="full" widens all.
        """),
    ),
    Tool(
        "graph_query", CodeMemService.graph_query, GraphQueryInput, GraphQueryResult, READ,
        route="Read-only Cypher over the code graph; writes are refused.",
        description=describe("""
            Run a read-only Cypher query over the code graph.

            Nodes: File {path, language, content_hash, indexed_at}, Function and Class {id,
            name, qualified_name (as the language writes it), path_qualified_name (the dotted
            file path + name of earlier releases), file_path, language, kind, signature,
            start_line, end_line}, Module {name, language}. Relationships: CONTAINS (File/Class -> Function/Class), CALLS
            (Function -> Function, line_number), IMPORTS (File -> File/Module, items), EXTENDS and
            IMPLEMENTS (Class -> Class). Example: callers of a function:
            MATCH (c:Function)-[:CALLS]->(f:Function {name: $name}) RETURN c.qualified_name, c.file_path.
            Writes (CREATE, MERGE, SET, DELETE, ...) are refused.
        """),
    ),
    Tool(
        "find_duplicates", CodeMemService.find_duplicates, FindDuplicatesInput, FindDuplicatesResult, READ,
        route="Existing functions similar to the given code.",
        description=describe("""
            Check whether the repository already has a function like the one you are about to write.

            Call it BEFORE implementing a helper or utility: it returns existing functions above the
            similarity threshold with their location, signature, docstring and a reuse recommendation.
        """),
    ),
    Tool(
        "get_symbol", CodeMemService.get_symbol, GetSymbolInput, GetSymbolResult, READ,
        route="A symbol with its callers and callees (and its code).",
        description=describe("""
            One function or class: signature, docstring, location, callers and callees; its full
            source with include_code=true. Use it after code_search to read a hit in depth.
        """),
    ),
    Tool(
        "get_related", CodeMemService.get_related, GetRelatedInput, GetRelatedResult, READ,
        route="The graph neighbourhood of a symbol, file or memory, nearest first.",
        description=describe("""
            Walk the code and memory graph from a function, class, file or memory id: callers
            (incoming CALLS), callees, imports, base classes and implementations, and the memories
            linked to code or to each other (ADDRESSES, IMPLEMENTS_REQ, FOLLOWS_DESIGN, TESTS,
            USES_PATTERN, DEPENDS_ON, RELATES_TO...), up to 5 hops, nearest first; each result says
            whether it is a symbol, file or memory, the edge and its direction. Use it to see what a
            change would affect, how something is used, or which decisions and requirements apply.
        """),
    ),
    Tool(
        "index_status", CodeMemService.index_status, JobStatusInput, IndexStatusResult, READ,
        route="Overall index statistics; with ``job_id`` also that background job's state.", optional_input=True,
        description=describe("""
            How much of the repository is indexed (files, symbols, edges, dense-vector coverage, the
            search mode in effect, stores and embedder, last run); with job_id also that background
            job's phase, percent and final report. Call it when results look incomplete or stale.
        """),
    ),
    Tool(
        "index_file", CodeMemService.index_file, IndexFileInput, IndexFileResult, NATURAL, foreground=False,
        route="Index one file now and report what it extracted.",
        description="Index one file now, e.g. right after editing it, so searches see the new code.",
    ),
    Tool(
        "index_directory", CodeMemService.index_directory, IndexDirectoryInput, JobState, NATURAL,
        route="Start indexing a directory in the background (a job).",
        description=describe("""
            Index a directory recursively in the background (only changed files are re-parsed).
            Returns a job at once; poll index_status(job_id) for phase, percent and the report.
        """),
    ),
    Tool(
        "reindex", CodeMemService.reindex, ReindexInput, JobState, NATURAL,
        route="Start a re-index (changed or full) in the background (a job).",
        description=describe("""
            Re-index in the background; scope='full' re-processes everything (and, for the whole
            project, rebuilds vectors too). Returns a job; poll index_status(job_id).
        """),
    ),
    # internal: the owner RPC and the CLI
    Tool("health", CodeMemService.health, None, HealthResult, READ),
    Tool("job_status", CodeMemService.job_status, JobStatusInput, JobState, READ),
    Tool("index", CodeMemService.index, IndexInput, None, NATURAL, foreground=False, progress=True),
    Tool("refresh_design", CodeMemService.refresh_design, None, None, NATURAL, foreground=False),
    Tool("index_run", CodeMemService.index_run, IndexInput, None, NATURAL, foreground=False),
)

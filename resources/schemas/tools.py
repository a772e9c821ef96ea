"""Inputs and results of the code tools (shared/API.md shapes); MCP and HTTP schemas come from here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from resources.schemas.base import Schema
from resources.schemas.limits import MAX_TEXT_CHARS, JsonObject, ToolInput

MAX_QUERY_CHARS = MAX_TEXT_CHARS
CodeKind = Literal[
    "function", "method", "constructor", "class", "record", "interface", "annotation", "struct", "trait", "enum", "type", "doc_chunk",
]


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming each bad field and what it must be (for MCP errors and the CLI)."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
    return f"invalid input — {problems}"


class CodeSearchInput(ToolInput):
    """Search the indexed code by meaning and by words."""

    query: str = Field(description="A code snippet or a description of what the code does.", min_length=1, max_length=MAX_QUERY_CHARS)
    language: str | None = Field(default=None, description="Only this language: python, javascript, typescript, tsx, java, go, rust, csharp.")
    path_prefix: str | None = Field(default=None, description="Only files under this repo-relative directory, e.g. 'src/api'.")
    kind: CodeKind | None = Field(default=None, description="Only this kind of symbol.")
    limit: int = Field(default=10, ge=1, le=100, description="Results per page (max 100).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")
    detail: Literal["summary", "full"] = Field(default="summary", description="summary (default, cheap): signature, the docstring's first paragraph and the first 8 lines of code, with `next` naming get_symbol for the rest; full: the whole docstring and up to 30 lines.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank — describe the code you are looking for")
        return value


class Provenance(Schema):
    """Where a hit comes from and whether it is still current."""

    content_hash: str
    indexed_at: str
    stale: bool = Field(description="True when the file changed on disk since it was indexed (re-run `codemem index`).")


class CodeHit(Schema):
    """One code search result."""

    id: str
    kind: str
    name: str
    qualified_name: str
    file_path: str
    start_line: int
    end_line: int
    language: str
    signature: str
    docstring: str | None = None
    score: float
    snippet: str
    provenance: Provenance
    next: str | None = Field(default=None, description="When the snippet or docstring was cut: the call that returns the whole symbol.")


class CodeSearchResult(Schema):
    """A page of code hits."""

    results: list[CodeHit]
    next_cursor: str | None = None
    search_mode: str = Field(description="hybrid, or sparse-only while dense vectors are still being computed.")
    dense_coverage: float = Field(description="Share of indexed symbols that have a dense vector (0–1).")
    truncated: bool = False


class GraphQueryInput(ToolInput):
    """A read-only Cypher query over the code graph."""

    cypher: str = Field(min_length=1, max_length=20_000, description="Cypher (read-only: MATCH ... RETURN).")
    parameters: JsonObject | None = Field(default=None, description="Query parameters, referenced in the query as $name.")
    limit: int = Field(default=100, ge=1, le=1000, description="Maximum rows returned, 1-1000.")


class GraphQueryResult(Schema):
    """Rows of a graph query."""

    columns: list[str]
    results: list[dict[str, Any]]
    truncated: bool


class IndexInput(ToolInput):
    """Index (incrementally) the project or part of it."""

    paths: list[str] | None = Field(default=None, description="Repo-relative files or directories; all of the project when omitted.")
    embed: bool = Field(default=True, description="Also compute dense vectors before returning.")
    reembed: bool = Field(default=False, description="Rebuild the whole index, vectors included (after a model change).")


class IndexStatusResult(Schema):
    """How complete and current the index is."""

    project_root: str
    files: int
    symbols: int
    resolved_edges: int
    dense_vectors: int
    dense_coverage: float
    doc_chunks_dense_pending: int = Field(default=0, description="Doc chunks still searched by words only: their dense vectors are computed in the background.")
    search_mode: str
    embedder: str
    vector_store: str
    graph_store: str
    last_index: dict[str, Any] | None = None
    graph_counts: dict[str, int] = Field(default_factory=dict)
    job: JobState | None = Field(default=None, description="The requested background job, when job_id was given.")


class HealthResult(Schema):
    """Each dependency's state: ok, degraded (works with less) or error (does not work)."""

    status: Literal["ok", "degraded", "error"]
    components: dict[str, dict[str, Any]]


RelationshipType = Literal["CONTAINS", "IMPORTS", "CALLS", "EXTENDS", "IMPLEMENTS"]
RelatedEdgeType = Literal[
    "CONTAINS", "IMPORTS", "CALLS", "EXTENDS", "IMPLEMENTS",
    "IMPLEMENTS_REQ", "ADDRESSES", "DEPENDS_ON", "USES_PATTERN", "TESTS", "SATISFIES", "FOLLOWS_PATTERN",
    "FOLLOWS_DESIGN", "TESTED_BY", "RELATES_TO",
]
"""What get_related follows: the code graph's edges and the memories' (one walk over both)."""


class FindDuplicatesInput(ToolInput):
    """Code you are about to write, to check against what the repository already has."""

    code: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The function you are about to write (or a snippet of it), to check.")
    language: str | None = Field(default=None, description="Its language: python, typescript, tsx, javascript, java, go, rust, csharp (python when omitted).")
    threshold: float | None = Field(default=None, description="Similarity threshold 0.70-0.95 (default from settings, 0.85).")
    limit: int = Field(default=10, ge=1, le=100, description="Maximum duplicates, 1-100.")

    @field_validator("threshold")
    @classmethod
    def _threshold_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.70 <= value <= 0.95:
            raise ValueError("Threshold must be between 0.70 and 0.95")
        return value


class DuplicateHit(Schema):
    """An existing function similar to the given code."""

    id: str
    name: str
    qualified_name: str
    file_path: str
    start_line: int
    end_line: int
    signature: str
    docstring: str | None = None
    similarity: float
    differences: list[str] = Field(
        default_factory=list,
        description="What differs from the given code: names, annotations, docstring, comments, statements "
        "written another way, or the tokens that change behaviour; empty for the same code.",
    )
    recommendation: str


class FindDuplicatesResult(Schema):
    """Existing functions at or above the threshold, most similar first."""

    threshold: float
    duplicate_count: int
    duplicates: list[DuplicateHit]
    truncated: bool = Field(default=False, description="More duplicates exist than fit in one response.")


class GetRelatedInput(ToolInput):
    """A graph neighbourhood of a symbol, a file or a memory."""

    entity_id: str = Field(min_length=1, max_length=2_000, description="An id from code_search/get_symbol, a qualified name (pkg.module.Class.method), a repo-relative file path, or a memory id (memory_search/memory_get).")
    relationship_types: list[RelatedEdgeType] | None = Field(default=None, description="Only these relationship types: code edges CALLS, IMPORTS, EXTENDS, IMPLEMENTS, CONTAINS; memory edges ADDRESSES, IMPLEMENTS_REQ, FOLLOWS_DESIGN, TESTS, USES_PATTERN, DEPENDS_ON, SATISFIES, FOLLOWS_PATTERN, TESTED_BY, RELATES_TO (all when omitted).")
    direction: Literal["outgoing", "incoming", "both"] = Field(default="both", description="outgoing (what it uses or links to), incoming (what uses or links to it) or both.")
    depth: int = Field(default=1, ge=1, le=5, description="Traversal depth 1-5.")
    limit: int = Field(default=50, ge=1, le=500, description="Results per page, 1-500 (nearest first).")
    cursor: str | None = Field(default=None, description="The next_cursor of a previous page.")


class RelatedEntity(Schema):
    """A node reached from the start entity: a symbol, a file or a memory, and the edge it was reached by."""

    id: str
    label: str
    name: str | None = None
    qualified_name: str | None = None
    file_path: str | None = None
    start_line: int | None = None
    kind: str | None = None
    distance: int = Field(description="Hops from the start entity (the depth it was reached at).")
    via: list[str] = Field(description="The relationship types of the path from the start entity, in order.")
    node_kind: Literal["symbol", "file", "module", "memory"] | None = Field(default=None, description="What the node is: a code symbol, a file, a module or a memory (its memory_type says which).")
    memory_type: str | None = Field(default=None, description="The memory's type, for a memory.")
    title: str | None = Field(default=None, description="A short label: a symbol's qualified name, a file's path, a memory's title or first words.")
    edge: str | None = Field(default=None, description="The relationship it was reached by (the last of via).")
    edge_direction: Literal["outgoing", "incoming"] | None = Field(default=None, description="outgoing: reached_from points at it; incoming: it points at reached_from.")
    reached_from: str | None = Field(default=None, description="The id of the node it was reached from.")


class GetRelatedResult(Schema):
    """The start entity and what is related to it, nearest first."""

    entity: dict[str, Any]
    results: list[RelatedEntity]
    truncated: bool = Field(description="More entities are reachable than this page holds (see next_cursor).")
    next_cursor: str | None = None


class GetSymbolInput(ToolInput):
    """One symbol, hydrated progressively."""

    symbol: str = Field(min_length=1, max_length=2_000, description="An id from code_search or a qualified name (pkg.module.Class.method).")
    include_code: bool = Field(default=False, description="Also return the full source of the symbol (read from the file).")


class GetSymbolResult(Schema):
    """A symbol's summary, its callers and callees, and optionally its code."""

    symbol: CodeHit
    callers: list[dict[str, Any]]
    callees: list[dict[str, Any]]
    code: str | None = None


class IndexFileInput(ToolInput):
    """Index one file now."""

    file_path: str = Field(min_length=1, max_length=4_096, description="Path of the file, inside the project.")
    force: bool = Field(default=False, description="Re-index even if unchanged.")


class IndexFileResult(Schema):
    """What indexing one file extracted."""

    status: Literal["indexed", "unchanged", "skipped"]
    file_path: str
    functions_extracted: int = 0
    classes_extracted: int = 0
    imports_extracted: int = 0
    reason: str | None = None


class IndexDirectoryInput(ToolInput):
    """Index a directory recursively, as a background job."""

    directory_path: str = Field(default=".", max_length=4_096, description="Directory inside the project ('.' for all of it).")
    extensions: list[str] | None = Field(default=None, description="Only these extensions this run, e.g. ['.py', '.ts'].")
    exclude: list[str] | None = Field(default=None, description="Gitignore-style patterns to leave alone this run.")
    force: bool = Field(default=False, description="Re-index every file, changed or not.")


class ReindexInput(ToolInput):
    """Re-index a directory, incrementally or from scratch, as a background job."""

    directory_path: str = Field(default=".", max_length=4_096, description="Directory inside the project ('.' for all of it).")
    scope: Literal["full", "changed"] = Field(default="changed", description="'changed' (incremental, default) or 'full' (clear first).")
    extensions: list[str] | None = Field(default=None, description="Only these extensions this run, e.g. ['.py', '.ts'].")
    exclude: list[str] | None = Field(default=None, description="Gitignore-style patterns to leave alone this run.")


class JobStatusInput(ToolInput):
    """Which job to report on."""

    job_id: str | None = Field(default=None, description="A job id from index_directory/reindex; overall statistics when omitted.")


class JobState(Schema):
    """A background indexing job."""

    job_id: str
    kind: str
    status: Literal["queued", "running", "done", "failed"]
    phase: str | None = None
    done: int = 0
    total: int = 0
    percent: float = 0.0
    started_at: str
    finished_at: str | None = None
    report: dict[str, Any] | None = None
    error: str | None = None


"""Moving memories in and out: export_memory and import_memory (JSONL, Markdown files, git notes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from resources.schemas.base import Schema
from resources.schemas.limits import MAX_DOCUMENT_CHARS, JsonObject, ToolInput
from resources.schemas.memory.kinds import (
    SCOPE_HELP,
    TYPES_HELP,
    MemoryTypesInput,
    ScopeInput,
    ScopesInput,
)

ExportFormat = Literal["jsonl", "markdown", "git_notes"]
DEFAULT_NOTES_REF = "refs/notes/codemem"


class ExportMemoryInput(ToolInput):
    """Export memories as JSONL (a file inside the project or inline), as Markdown files (a directory),
    or as git notes on commits (session and design memories)."""

    memory_types: MemoryTypesInput | None = Field(default=None, description="Only these types (all when omitted): " + TYPES_HELP)
    filters: JsonObject | None = Field(default=None, description="Exact match on metadata keys, as memory_search's metadata_filters.")
    include_deleted: bool = Field(default=False, description="Also export soft-deleted memories.")
    output_path: str | None = Field(default=None, max_length=4_096, description="jsonl: file to write, inside the project directory (the JSONL comes back inline when omitted); markdown: the directory to write, inside the project.")
    format: ExportFormat = Field(default="jsonl", description="jsonl (one memory per line); markdown (one file per memory, YAML front matter, <dir>/<type>/<slug>-<id>.md); git_notes (session and design memories as notes on the commit their metadata names — commit_sha, commit or git_commit — else HEAD).")
    notes_ref: str = Field(default=DEFAULT_NOTES_REF, min_length=1, max_length=200, description="git_notes: the notes ref to write.")
    overwrite: bool = Field(default=False, description="Replace an existing file at output_path (jsonl), or a file in the markdown directory that is not this memory's earlier export. Never allowed into .codemem/ or .git/.")
    scopes: ScopesInput | None = Field(default=None, description="Only memories of these scopes. Default: every scope for jsonl (each line names its scope); only project for markdown and git_notes, which are meant to be committed (local memories are personal, global ones belong to no project).")

    @model_validator(mode="after")
    def _destination(self) -> ExportMemoryInput:
        has_path = bool(self.output_path and self.output_path.strip())
        if self.format == "markdown" and not has_path:
            raise ValueError("format markdown needs output_path: the directory to write, inside the project")
        if self.format == "git_notes" and has_path:
            raise ValueError("format git_notes writes notes to notes_ref, not a file — leave output_path out")
        return self


class ExportMemoryResult(Schema):
    """How many memories were exported, and where (or the JSONL itself)."""

    exported_count: int
    output_path: str | None = Field(default=None, description="The file or directory written (the notes ref for git_notes).")
    data: str | None = Field(default=None, description="The JSONL, only when no output_path was given.")
    removed_count: int = Field(default=0, description="markdown: files of memories no longer exported (deleted, or renamed) removed from the directory.")
    errors: list[dict[str, Any]] = Field(default_factory=list, description="{memory_id, error} for each memory not exported (git_notes: a commit that is not in the repository).")


class ImportMemoryInput(ToolInput):
    """Import memories from JSONL (one memory per line, as export_memory writes), from a directory of
    Markdown memory files, or from the git notes export_memory wrote."""

    input_path: str | None = Field(default=None, max_length=4_096, description="jsonl: a JSONL file inside the project directory; markdown: a directory (or one .md file) inside the project.")
    data: str | None = Field(default=None, max_length=MAX_DOCUMENT_CHARS, description="jsonl: JSONL text, instead of input_path.")
    conflict_resolution: Literal["skip", "overwrite", "error"] = Field(default="skip", description="When a memory id already exists: skip it, overwrite it, or stop with an error.")
    format: ExportFormat = Field(default="jsonl", description="jsonl, markdown (files as export_memory format=markdown writes) or git_notes (the notes in notes_ref).")
    notes_ref: str = Field(default=DEFAULT_NOTES_REF, min_length=1, max_length=200, description="git_notes: the notes ref to read.")
    scope: ScopeInput | None = Field(default=None, description="The scope to import into: " + SCOPE_HELP + ". Default: the scope each JSONL line names (as export_memory writes it), else project.")

    @model_validator(mode="after")
    def _one_source(self) -> ImportMemoryInput:
        has_path, has_data = bool(self.input_path and self.input_path.strip()), bool(self.data and self.data.strip())
        if self.format == "git_notes":
            if has_path or has_data:
                raise ValueError("format git_notes reads the notes ref (notes_ref) — pass no input_path or data")
            return self
        if self.format == "markdown" and not has_path:
            raise ValueError("format markdown needs input_path: a directory of memory files inside the project")
        if has_path and has_data:
            raise ValueError("pass either input_path or data, not both")
        if not (has_path or has_data):
            raise ValueError("pass input_path (a JSONL file inside the project) or data (the JSONL text)")
        return self


class ImportMemoryResult(Schema):
    """What the import did with each line."""

    imported: int
    skipped: int
    overwritten: int
    errors: list[dict[str, Any]] = Field(default_factory=list, description="For each memory not imported: {line, error} (jsonl), {file, error} (markdown) or {note, error} (git_notes: the commit).")

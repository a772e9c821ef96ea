"""Memories: the 8 typed metadata schemas (seed 001 §5) and the memory tools' inputs and results (seed 004).

`validate_metadata` is the one gate for a memory's metadata (memory_add, memory_update after merging,
memory_bulk_add, import_memory); the tool input models check only its shape and its size and nesting
(`resources.schemas.limits.JsonObject`, a bound on what a caller may send, not on what pipelines derive).

The models live by job: the memory types and scopes and their lenient readers (``kinds``), the typed
metadata and its validation (``metadata``), the write tools (``writes``: add, update, delete, bulk add),
the read tools (``reads``: get, search, list, context), export and import (``transfer``) and the upkeep
tools (``upkeep``: statistics, normalization, backup, restore). Every public name is importable from
here, as before.
"""

from __future__ import annotations

from resources.schemas.memory.extract import (
    MAX_EXTRACT_CHARS,
    ExtractedMemory,
    ExtractSource,
    MemoryExtractInput,
    MemoryExtractResult,
)
from resources.schemas.memory.kinds import (
    MAX_CONTENT_CHARS,
    MEMORY_SCOPES,
    MEMORY_TYPES,
    RELATIONSHIP_TYPE_PATTERN,
    REQUIREMENT_ID_PATTERN,
    SCOPE_HELP,
    SCOPES_FILTER_HELP,
    SHARED_SCOPES,
    SUMMARY_CHARS,
    TYPES_HELP,
    Detail,
    IsoTimestamp,
    MemoryScope,
    MemoryType,
    MemoryTypeInput,
    MemoryTypesInput,
    MemoryValidationError,
    ScopeInput,
    ScopesInput,
    parse_memory_type,
)
from resources.schemas.memory.metadata import (
    METADATA_MODELS,
    CodePatternMetadata,
    ComponentMetadata,
    DesignMetadata,
    FunctionMetadata,
    IdList,
    Priority,
    RequirementsMetadata,
    SessionMetadata,
    TestHistoryMetadata,
    UserPreferenceMetadata,
    validate_metadata,
)
from resources.schemas.memory.reads import (
    MAX_CONTEXT_TOKENS,
    FilterScalar,
    MemoryContextEntry,
    MemoryContextGroup,
    MemoryContextInput,
    MemoryContextResult,
    MemoryGetInput,
    MemoryHit,
    MemoryListInput,
    MemoryListResult,
    MemoryProvenance,
    MemoryRecord,
    MemoryRelationship,
    MemorySearchInput,
    MemorySearchResult,
    TimeRange,
)
from resources.schemas.memory.transfer import (
    DEFAULT_NOTES_REF,
    ExportFormat,
    ExportMemoryInput,
    ExportMemoryResult,
    ImportMemoryInput,
    ImportMemoryResult,
)
from resources.schemas.memory.upkeep import (
    BackupInput,
    BackupResult,
    MemoryStatisticsResult,
    NormalizationJob,
    NormalizationPhase,
    NormalizeMemoryInput,
    NormalizeStatusInput,
    RestoreInput,
    RestoreResult,
)
from resources.schemas.memory.writes import (
    ContentText,
    MemoryAddInput,
    MemoryAddResult,
    MemoryBulkAddInput,
    MemoryBulkAddResult,
    MemoryConflict,
    MemoryDeleteInput,
    MemoryDeleteResult,
    MemoryUpdateInput,
    MemoryUpdateResult,
    RelationshipSpec,
)

__all__ = [
    "MAX_EXTRACT_CHARS", "ExtractSource", "ExtractedMemory", "MemoryExtractInput", "MemoryExtractResult",
    "BackupInput", "BackupResult", "CodePatternMetadata", "ComponentMetadata", "ContentText", "DEFAULT_NOTES_REF",
    "DesignMetadata", "Detail", "ExportFormat", "ExportMemoryInput", "ExportMemoryResult", "FilterScalar",
    "FunctionMetadata", "IdList", "ImportMemoryInput", "ImportMemoryResult", "IsoTimestamp", "MAX_CONTENT_CHARS",
    "MAX_CONTEXT_TOKENS", "MEMORY_SCOPES", "MEMORY_TYPES", "SHARED_SCOPES", "METADATA_MODELS", "MemoryAddInput", "MemoryAddResult",
    "MemoryBulkAddInput", "MemoryBulkAddResult", "MemoryConflict", "MemoryContextEntry", "MemoryContextGroup",
    "MemoryContextInput", "MemoryContextResult", "MemoryDeleteInput", "MemoryDeleteResult", "MemoryGetInput",
    "MemoryHit", "MemoryListInput", "MemoryListResult", "MemoryProvenance", "MemoryRecord", "MemoryRelationship",
    "MemoryScope", "MemorySearchInput", "MemorySearchResult", "MemoryStatisticsResult", "MemoryType", "MemoryTypeInput",
    "MemoryTypesInput", "MemoryUpdateInput", "MemoryUpdateResult", "MemoryValidationError", "NormalizationJob",
    "NormalizationPhase", "NormalizeMemoryInput", "NormalizeStatusInput", "Priority", "RELATIONSHIP_TYPE_PATTERN",
    "REQUIREMENT_ID_PATTERN", "RelationshipSpec", "RequirementsMetadata", "RestoreInput", "RestoreResult",
    "SCOPES_FILTER_HELP", "SCOPE_HELP", "SUMMARY_CHARS", "ScopeInput", "ScopesInput", "SessionMetadata", "TYPES_HELP",
    "TestHistoryMetadata", "TimeRange", "UserPreferenceMetadata", "parse_memory_type", "validate_metadata",
]

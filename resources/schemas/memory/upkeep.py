"""Looking after the memories: memory_statistics, normalize_memory and its status, backup and restore."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from resources.schemas.base import Schema
from resources.schemas.limits import ToolInput


class MemoryStatisticsResult(Schema):
    """Counts per memory type, sync state, and the health of storage, cache and outbox."""

    memory_counts: dict[str, dict[str, int]] = Field(description="Per memory type: total, active, deleted.")
    sync_status: dict[str, int] = Field(description="Memories per sync status: synced, pending, failed.")
    storage: dict[str, dict[str, Any]]
    cache: dict[str, Any]
    outbox: dict[str, Any]
    scopes: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Per scope in use (project, local, global, enterprise): its ledger, memory counts per type, sync status and outbox (the totals above add them up); a scope that is on but unreachable (an enterprise directory not mounted) says why under `skipped`.")


NormalizationPhase = Literal["snapshot", "deduplication", "orphan_detection", "embedding_refresh", "cleanup", "validation", "swap"]


class NormalizeMemoryInput(ToolInput):
    """Start a normalization job (deduplicate, detect orphans, refresh embeddings, clean up, swap)."""

    phases: list[NormalizationPhase] | None = Field(default=None, description="Only these phases (all when omitted). Without 'swap' nothing is applied.")
    dry_run: bool = Field(default=False, description="Report what would change without changing anything.")
    restore_links: str | None = Field(
        default=None, min_length=1, max_length=200,
        description="Instead of normalizing: put back the orphaned links an earlier normalization removed "
                    "(the restore_links id of its report). Nothing else changes; running it twice restores once.",
    )


class NormalizeStatusInput(ToolInput):
    """Which normalization job to report on."""

    job_id: str | None = Field(default=None, description="A job id from normalize_memory; the latest job when omitted.")


class NormalizationJob(Schema):
    """A normalization job: phase, percent, errors and, when done, its report."""

    job_id: str
    status: Literal["running", "done", "failed"]
    dry_run: bool
    phase: str | None = None
    percent: float = 0.0
    started_at: str
    finished_at: str | None = None
    errors: list[str] = Field(default_factory=list)
    report: dict[str, Any] | None = None


class BackupInput(ToolInput):
    """Where to write a backup (a directory inside the project, created if needed)."""

    path: str = Field(min_length=1, max_length=4_096, description="Backup directory inside the project, e.g. backups/2026-11-22.")


class BackupResult(Schema):
    """What a backup holds."""

    path: str
    files: dict[str, int] = Field(description="File name -> bytes.")
    memories: int


class RestoreInput(ToolInput):
    """A backup directory made by backup."""

    path: str = Field(min_length=1, max_length=4_096, description="A backup directory inside the project.")


class RestoreResult(Schema):
    """What a restore replaced and rebuilt."""

    restored_memories: int
    previous_ledger: str = Field(description="The ledger that was replaced, kept beside the new one.")
    projection: dict[str, Any]

"""``file_change_sensor``: keeps the index current while the Dagster daemon runs.

Each tick diffs the tree against the manifest (a stat per file; a hash only when size or mtime
moved) and, when some bucket has new pending work (new, changed or deleted files), requests one
run of ``codemem_index``: the same job as ``codemem index``, so the run indexes everything that
changed (a burst of edits over many buckets is one run) and records each bucket it touched as
that bucket's own partition, leaving the other buckets' records as they were; it refreshes the
design assets when their inputs changed. The cursor holds each pending bucket's fingerprint, so
a repeated tick (or a tick while the run is still going) requests nothing new, and a first tick
after downtime catches up with everything that changed meanwhile, because the diff is against
what is indexed, not against the last tick.
"""

from __future__ import annotations

import hashlib
import json

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    in_process_executor,
    sensor,
)

from pipelines.dagster.assets import CODE_INDEX_ASSETS
from pipelines.dagster.index_job import codemem_index_job
from resources.manifest import open_manifest
from pipelines.stages import plan_buckets
from pipelines.dagster.resources import fail_orphaned_runs, project_settings

index_buckets_job = define_asset_job(
    "index_buckets",
    selection=AssetSelection.assets(*CODE_INDEX_ASSETS),
    description="Index the files of one bucket (or a range of buckets) and re-resolve cross-file edges (UI launches).",
    executor_def=in_process_executor,  # one process opens the project once, not one per step
)

RUN_CONFIG = {
    "ops": {"index_changes": {"config": {"embed": True, "force": False}}},
    "loggers": {"console": {"config": {"log_level": "INFO"}}},
}
"""A sensor run: dense vectors included; steps logged at INFO (Dagster's default DEBUG prints
~180 lines per run)."""
BUCKETS_TAG_MAX = 40
"""Pending buckets named in a run's ``codemem/buckets`` tag (the rest are counted)."""
PATHS_TAG_MAX = 20
"""Changed or deleted files named in a run's ``codemem/paths`` tag (the rest are counted)."""

SENSOR_INTERVAL_S = 5


def pending_buckets(previous_cursor: str | None) -> tuple[list[tuple[str, str]], str, list[str]]:
    """Buckets whose pending work is new since ``previous_cursor``, the next cursor, and the
    changed or deleted files of those buckets.

    Returns:
        ``[(bucket, fingerprint)]`` to request, the cursor (JSON ``{bucket: fingerprint}`` of
        every bucket with pending work now), and the pending paths of the requested buckets.
    """
    settings = project_settings()
    manifest = open_manifest(settings)
    try:
        plans = plan_buckets(settings, manifest, trust_mtime=True)
    finally:
        manifest.close()
    seen = json.loads(previous_cursor) if previous_cursor else {}
    now = {bucket: plan.digest for bucket, plan in sorted(plans.items()) if plan.pending}
    wanted = [(bucket, digest) for bucket, digest in now.items() if seen.get(bucket) != digest]
    paths = sorted({source.path for bucket, _ in wanted for source, _ in plans[bucket].changed} | {
        path for bucket, _ in wanted for path in plans[bucket].deleted})
    return wanted, json.dumps(now, sort_keys=True), paths


def paths_tag(paths: list[str]) -> str:
    """The ``codemem/paths`` tag of a sensor run: the changed or deleted files it was requested for."""
    named = ",".join(paths[:PATHS_TAG_MAX])
    return named + (f",+{len(paths) - PATHS_TAG_MAX} more" if len(paths) > PATHS_TAG_MAX else "")


def buckets_tag(buckets: list[str]) -> str:
    """The ``codemem/buckets`` tag of a sensor run: the pending buckets it was requested for."""
    named = ",".join(buckets[:BUCKETS_TAG_MAX])
    return named + (f",+{len(buckets) - BUCKETS_TAG_MAX} more" if len(buckets) > BUCKETS_TAG_MAX else "")


@sensor(
    job=codemem_index_job,
    minimum_interval_seconds=SENSOR_INTERVAL_S,
    default_status=DefaultSensorStatus.RUNNING,
    description="Diffs the tree against the index and runs codemem_index when a bucket has new pending work.",
)
def file_change_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    """One codemem_index run when some bucket has new pending work; a no-op when nothing changed
    since the last tick."""
    if context.instance is not None:
        orphaned = fail_orphaned_runs(context.instance)
        if orphaned:
            context.log.warning(f"marked failed {len(orphaned)} run(s) whose process is gone: {orphaned}")
    wanted, cursor, paths = pending_buckets(context.cursor)
    if not wanted:
        context.update_cursor(cursor)
        return SkipReason("the index is current")
    fingerprint = hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:16]
    return SensorResult(
        run_requests=[
            # No run_key: Dagster never launches a run key twice, and the buckets may come back to
            # a pending state they had before (X → Y → X → Y); the cursor already prevents repeats.
            RunRequest(
                run_config=RUN_CONFIG,
                tags={"codemem/trigger": "file_change_sensor", "codemem/fingerprint": fingerprint,
                      "codemem/buckets": buckets_tag([bucket for bucket, _ in wanted]), "codemem/paths": paths_tag(paths)},
            )
        ],
        cursor=cursor,
    )

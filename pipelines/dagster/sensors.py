"""``file_change_sensor``: keeps the index current while the Dagster daemon runs.

Each tick diffs the tree against the manifest (a stat per file; a hash only when size or mtime
moved) and requests one run per bucket with pending work — new, changed or deleted files. The
cursor holds each pending bucket's fingerprint, so a repeated tick (or a tick while the run is
still going) requests nothing new, and a first tick after downtime catches up with everything
that changed meanwhile, because the diff is against what is indexed, not against the last tick.
"""

from __future__ import annotations

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
from resources.manifest import Manifest
from pipelines.stages import plan_buckets
from pipelines.dagster.resources import fail_orphaned_runs, project_settings

index_buckets_job = define_asset_job(
    "index_buckets",
    selection=AssetSelection.assets(*CODE_INDEX_ASSETS),
    description="Index the files of one bucket (or a range of buckets) and re-resolve cross-file edges.",
    executor_def=in_process_executor,  # one process opens the project once, not one per step
)

RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}
"""Runs log steps at INFO (Dagster's default DEBUG prints ~180 lines per run)."""

SENSOR_INTERVAL_S = 5


def pending_buckets(previous_cursor: str | None) -> tuple[list[tuple[str, str]], str]:
    """Buckets whose pending work is new since ``previous_cursor``, and the next cursor.

    Returns:
        ``[(bucket, fingerprint)]`` to request, and the cursor (JSON ``{bucket: fingerprint}`` of
        every bucket with pending work now).
    """
    settings = project_settings()
    manifest = Manifest(settings.resolved_state_dir() / "index.db")
    try:
        plans = plan_buckets(settings, manifest, trust_mtime=True)
    finally:
        manifest.close()
    seen = json.loads(previous_cursor) if previous_cursor else {}
    now = {bucket: plan.digest for bucket, plan in sorted(plans.items()) if plan.pending}
    wanted = [(bucket, digest) for bucket, digest in now.items() if seen.get(bucket) != digest]
    return wanted, json.dumps(now, sort_keys=True)


@sensor(
    job=index_buckets_job,
    minimum_interval_seconds=SENSOR_INTERVAL_S,
    default_status=DefaultSensorStatus.RUNNING,
    description="Diffs the tree against the index and runs index_buckets for each bucket that changed.",
)
def file_change_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    """One run per bucket with new pending work; a no-op when nothing changed since the last tick."""
    if context.instance is not None:
        orphaned = fail_orphaned_runs(context.instance)
        if orphaned:
            context.log.warning(f"marked failed {len(orphaned)} run(s) whose process is gone: {orphaned}")
    wanted, cursor = pending_buckets(context.cursor)
    if not wanted:
        context.update_cursor(cursor)
        return SkipReason("the index is current")
    return SensorResult(
        run_requests=[
            # No run_key: Dagster never launches a run key twice, and a bucket may come back to a
            # pending state it had before (X → Y → X → Y); the cursor already prevents repeats.
            RunRequest(
                partition_key=bucket, run_config=RUN_CONFIG,
                tags={"codemem/trigger": "file_change_sensor", "codemem/fingerprint": digest},
            )
            for bucket, digest in wanted
        ],
        cursor=cursor,
    )

"""``codemem index`` through the Dagster assets, in-process, recorded in the project's instance.

The run is the one the Dagster UI shows (same assets, same instance under the state dir): the
pending buckets are planned first, then one run materializes the key range that covers them
(single-run backfill policy) together with the design assets, so a first index is one run and an
edit is one run over the range of the touched buckets. Nothing pending and the design inputs
unchanged means no run at all, and no Dagster instance opened: the answer comes from the
manifest. Only changed design inputs (documents, requirements, anchored memories) make a run of
the design assets alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pipelines.buckets import ALL_BUCKETS
from pipelines.design.derive import design_unchanged
from pipelines.dagster.project import ProjectStores
from pipelines.index_context import RUN_FAILED, IndexReport, Progress, _no_progress
from pipelines.indexer import finish_report
from pipelines.stages import BucketPlan, PreparedBucket, plan_buckets
from resources.private_files import make_private_dir


def dagster_home(state_dir: Path) -> Path:
    """The project's Dagster instance directory (run and event storage in SQLite)."""
    home = make_private_dir(state_dir / "dagster")
    config = home / "dagster.yaml"
    wanted = DAGSTER_YAML
    if not config.exists() or config.read_text() != wanted:
        config.write_text(wanted)
    return home


DAGSTER_YAML = (
    "# Written by codemem (rewritten on start): run, event and schedule storage in SQLite under\n"
    "# this directory; one run at a time, since every run needs the project's stores.\n"
    "telemetry:\n  enabled: false\n"
    "concurrency:\n  runs:\n    max_concurrent_runs: 1\n"
)


def project_instance(state_dir: Path) -> Any:
    """The project's persistent Dagster instance."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    return DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home(state_dir))))


def _run_tags() -> dict[str, str]:
    """Tags of a ``codemem index`` run: its trigger, and this process's pid (so that
    ``fail_orphaned_runs`` can tell a run whose process was killed from one still going)."""
    from pipelines.dagster.resources import RUN_PID_TAG

    return {"codemem/trigger": "codemem index", RUN_PID_TAG: str(os.getpid())}


def _design_outputs(result: Any, report: IndexReport) -> None:
    """The design assets' numbers and notes from a run that materialized them."""
    design = dict(result.output_for_node("design_documents") or {})
    for key, value in (result.output_for_node("design_links") or {}).items():
        design[key] = design.get(key, 0) + value if isinstance(value, int) else (design.get(key) or []) + value
    report.design = design
    report.notes.extend(design.get("notes", [])[:20])


def _materialize_design(project: ProjectStores, report: IndexReport, instance: Any) -> None:
    """Run the design assets (documents, links, patterns, anchors) on their own: the code index
    had nothing to do, the design inputs changed."""
    from dagster import materialize

    from pipelines.dagster.definitions import pipeline_resources
    from pipelines.dagster.design_assets import DESIGN_ASSETS

    result = materialize(
        DESIGN_ASSETS, instance=instance, resources=pipeline_resources(project),
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        tags=_run_tags(), raise_on_error=False,
    )
    if not result.success:
        report.notes.append(f"design layer not refreshed: Dagster run {result.run_id} failed (the code index is up to date)")
        return
    _design_outputs(result, report)


NOTHING_CHANGED = "nothing changed: answered from the manifest (nothing to run)"


def materialize_index(
    project: ProjectStores, *, embed: bool = True, force: bool = False, progress: Progress | None = None,
    instance: Any = None,
) -> IndexReport:
    """Index the project by materializing the assets in-process, over stores this process owns.

    The assets receive ``project`` itself as their ``codemem`` resource (Dagster hands a plain
    object to the run as it is, never a copy), so they write through the caller's stores.

    Args:
        project: The stores this process owns (``index_context()`` is not None), e.g. the
            service's ``OwnedStores``.
        embed: Compute dense vectors (for the changed symbols in the run, then any left pending).
        force: Re-process every file.
        progress: Receives (phase, done, total), if given.
        instance: A Dagster instance (the project's persistent one by default).

    Returns:
        The same report ``index_project`` gives.

    Raises:
        ValueError: ``project`` does not own the stores.
    """
    ctx = project.index_context()
    if ctx is None:
        raise ValueError("materialize_index runs over stores this process owns; another process owns them")
    started = time.perf_counter()
    progress = progress or _no_progress
    settings = ctx.settings
    report = IndexReport(root=str(ctx.root))
    progress("discover", 0, 1)
    plans = plan_buckets(settings, ctx.manifest, force=force)
    progress("discover", 1, 1)
    pending = sorted(b for b, plan in plans.items() if plan.pending)
    changed_files = sum(len(p.changed) for p in plans.values())
    ran: set[str] = set()
    run_plans: dict[str, BucketPlan] = {}
    code_work = bool(pending) or ctx.manifest.dirty()
    idle = None if code_work or not plans else design_unchanged(project.design_stores())
    if idle is not None:  # nothing to index, nothing to derive: no Dagster at all
        report.design = idle.as_dict()
        report.notes.append(NOTHING_CHANGED)
    elif code_work:
        from dagster import materialize

        from pipelines.dagster.assets import CODE_INDEX_ASSETS, CODE_INDEX_CHECKS
        from pipelines.dagster.definitions import pipeline_resources
        from pipelines.dagster.design_assets import DESIGN_ASSETS
        from pipelines.dagster.resources import fail_orphaned_runs

        progress("parse", 0, changed_files)
        if instance is None:
            instance = project_instance(settings.resolved_state_dir())
        fail_orphaned_runs(instance)
        if not ctx.manifest.files():  # a first index covers every bucket, so the UI shows none missing
            first, last = ALL_BUCKETS[0], ALL_BUCKETS[-1]
        else:
            first, last = (pending[0], pending[-1]) if pending else (ALL_BUCKETS[0], ALL_BUCKETS[0])
        run_config = {
            "ops": {name: {"config": {"embed": embed, "force": force}} for name in ("source_files", "embedded_symbols")},
            "loggers": {"console": {"config": {"log_level": "WARNING"}}},
        }
        result = materialize(
            [*CODE_INDEX_ASSETS, *CODE_INDEX_CHECKS, *DESIGN_ASSETS],
            instance=instance,
            resources=pipeline_resources(project, str(settings.resolved_state_dir() / "dagster" / "io")),
            run_config=run_config,
            tags={
                "dagster/asset_partition_range_start": first,
                "dagster/asset_partition_range_end": last,
                **_run_tags(),
            },
            raise_on_error=False,
        )
        if not result.success:
            failure = next((e for e in result.all_events if e.is_failure), None)
            detail = failure.event_specific_data.error.message.strip() if failure is not None and failure.event_specific_data else "see the Dagster run"
            report.failed.append((RUN_FAILED, f"Dagster run {result.run_id} failed: {detail}"))
            report.notes.append(f"design layer not refreshed: Dagster run {result.run_id} failed")
        else:
            buckets: dict[str, PreparedBucket] = result.output_for_node("graph_loaded") or {}
            run_plans = result.output_for_node("source_files") or {}
            for key, bucket in buckets.items():
                if bucket is None:
                    continue
                ran.add(key)
                report.files_indexed += len(bucket.prepared)
                report.files_deleted += len(bucket.deleted)
                report.failed += bucket.failed
                report.skipped += bucket.skipped
                report.vanished += bucket.vanished
                report.symbols_written += bucket.points_written
                report.files_with_syntax_errors += [p.state.path for p in bucket.prepared if p.state.error_count]
            normalized = result.asset_materializations_for_node("normalized_graph")
            if normalized:
                meta = normalized[-1].metadata
                report.edges_added = int(meta["edges_added"].value)
                report.edges_removed = int(meta["edges_removed"].value)
            report.notes.append(f"Dagster run {result.run_id} over buckets {first}..{last}")
            _design_outputs(result, report)
        progress("parse", changed_files, changed_files)
    else:  # the code index is current, the design inputs changed
        _materialize_design(project, report, instance if instance is not None else project_instance(settings.resolved_state_dir()))
    # A bucket's numbers come from the listing its files were indexed against: the run's own (it
    # lists the tree again) for the buckets it ran, the one above for the others. A file the first
    # listing saw and the run's did not was deleted while the run started: it vanished.
    counted = {**plans, **{key: run_plans[key] for key in ran if key in run_plans}}
    between = sorted(
        path for key in ran if key in run_plans and key in plans for path in set(plans[key].listed) - set(run_plans[key].listed)
    )
    report.vanished += between
    report.files_seen = sum(p.seen for p in counted.values()) + len(between)
    report.files_unchanged = sum(p.unchanged for p in counted.values())
    report.skipped += [s for key, p in plans.items() if key not in ran for s in p.skipped]
    report.failed += [f for key, p in plans.items() if key not in ran for f in p.failed]
    report.failed += [(s.path, "not indexed: the Dagster run failed") for key, p in plans.items() if key not in ran
                      for s, _ in p.changed]
    report.vanished += [v for key, p in plans.items() if key not in ran for v in p.vanished]
    return finish_report(ctx, report, started, embed=embed, progress=progress)

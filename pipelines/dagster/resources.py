"""The pipeline's own Dagster resources and run bookkeeping.

``BucketIOManager`` keeps each bucket's stage output; ``fail_orphaned_runs`` frees the run queue
of runs whose process died. The project's stores reach the assets as the ``codemem`` resource,
whose interface is ``pipelines.dagster.project.ProjectStores``.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, InputContext, OutputContext

from pipelines.dagster.tags import RUN_PID_TAG
from resources.settings import Settings

__all__ = ["PARENT_RUN_TAG", "RUN_PID_TAG", "BucketIOManager", "fail_orphaned_runs", "project_settings"]


def project_settings(project_root: str = "") -> Settings:
    """Settings of the project a code location serves (``CODEMEM_PROJECT_ROOT`` or the cwd)."""
    root = project_root or os.environ.get("CODEMEM_PROJECT_ROOT") or os.getcwd()
    return Settings(project_root=Path(root))


class BucketIOManager(ConfigurableIOManager):
    """Keeps each bucket's stage output as its own pickle under the state dir, so a run may
    cover one bucket or a range of them (single-run backfills) and a later run reads only the
    buckets it needs. Outputs are ``{bucket: value}``; inputs come back the same way."""

    base_dir: str = ""

    def _root(self) -> Path:
        return Path(self.base_dir) if self.base_dir else project_settings().resolved_state_dir() / "dagster" / "io"

    def _path(self, asset: str, bucket: str) -> Path:
        return self._root() / asset / f"{bucket}.pkl"

    def handle_output(self, context: OutputContext, obj: dict[str, Any]) -> None:
        """Write one pickle per bucket (atomically: temp file, then rename)."""
        asset = "_".join(context.asset_key.path)
        for bucket, value in obj.items():
            path = self._path(asset, bucket)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, path)

    def load_input(self, context: InputContext) -> dict[str, Any]:
        """Read the buckets this step covers (a missing one reads as None)."""
        asset = "_".join(context.asset_key.path)
        keys = context.asset_partition_keys if context.has_asset_partitions else []
        result: dict[str, Any] = {}
        for bucket in keys:
            path = self._path(asset, bucket)
            result[bucket] = pickle.loads(path.read_bytes()) if path.exists() else None
        return result


PARENT_RUN_TAG = "dagster/parent_run_id"
"""The tag Dagster gives a re-executed run (it also copies the parent's tags, ``RUN_PID_TAG`` included)."""


def fail_orphaned_runs(instance: Any) -> list[str]:
    """Mark failed the runs still STARTED whose process is gone (kill -9, OOM, power cut).

    Dagster's default run launcher does not watch its run processes, and with one run at a time
    (codemem's dagster.yaml) such a run would hold the queue forever: the sensor's runs would
    never start again. Returns the run ids marked failed.
    """
    from dagster import DagsterRunStatus, RunsFilter

    failed: list[str] = []
    for run in instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED, DagsterRunStatus.STARTING])):
        pid = run.tags.get(RUN_PID_TAG)
        if not pid or (run.status == DagsterRunStatus.STARTING and PARENT_RUN_TAG in run.tags):
            continue  # a re-executed run carries its parent's pid until its own process starts and tags it
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except (PermissionError, ValueError):
            continue
        instance.report_run_failed(run, f"its process {pid} is gone (killed?); codemem marked the run failed")
        failed.append(run.run_id)
    return failed

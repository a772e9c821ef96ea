"""codemem's stores as Dagster resources: one project per code location.

``CodememProject`` opens the project once per run. If no other process owns the project's
embedded stores, the run owns them (``handle.is_owner``) and the assets write through the
indexing stages directly. If another codemem process owns them (an MCP server of a Claude Code
session), the embedded stores cannot be opened twice, so a bucket's work is handed to that owner
as one incremental index of the bucket's files, and the assets report that in their metadata.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from dagster import ConfigurableIOManager, ConfigurableResource, InitResourceContext, InputContext, OutputContext
from pydantic import PrivateAttr

from resources.settings import Settings

RUN_PID_TAG = "codemem/pid"
"""Run tag holding the pid of the process that executes the run."""

INJECTED_HANDLES: dict[str, Any] = {}
"""Project root → a ``ProjectHandle`` this process already holds (``codemem index`` runs the
assets in-process with its own handle instead of opening the stores a second time)."""


def project_settings(project_root: str = "") -> Settings:
    """Settings of the project a code location serves (``CODEMEM_PROJECT_ROOT`` or the cwd)."""
    root = project_root or os.environ.get("CODEMEM_PROJECT_ROOT") or os.getcwd()
    return Settings(project_root=Path(root))


class CodememProject(ConfigurableResource):
    """The project's stores for the length of a run."""

    project_root: str = ""
    _handle: Any = PrivateAttr(default=None)
    _owned: bool = PrivateAttr(default=True)

    def settings(self) -> Settings:
        """The project's settings."""
        return project_settings(self.project_root)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        """Open the project (own its stores, or reach their owner)."""
        from query_server.ownership import ProjectHandle

        injected = INJECTED_HANDLES.get(str(self.settings().resolved_root()))
        self._owned = injected is None
        self._handle = injected if injected is not None else ProjectHandle(self.settings())
        run = context.run
        if context.instance is not None and run is not None:
            # lets fail_orphaned_runs tell a run whose process was killed from one still going
            context.instance.add_run_tags(run.run_id, {RUN_PID_TAG: str(os.getpid())})

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        """Close the stores (or the connection to their owner) unless the caller lent them."""
        if self._handle is not None and self._owned:
            self._handle.close()
        self._handle = None

    @property
    def handle(self) -> Any:
        """The ``ProjectHandle`` of this run."""
        if self._handle is None:  # used outside a run (tests calling the asset functions)
            from query_server.ownership import ProjectHandle

            self._handle = ProjectHandle(self.settings())
        return self._handle

    def index_context(self) -> Any | None:
        """The ``IndexContext`` when this run owns the stores, else None (see the module doc)."""
        handle = self.handle
        return handle.backend.ctx if handle.is_owner else None

    def design_stores(self) -> Any | None:
        """The design step's stores (``pipelines.design.derive.DesignStores``) when this run owns them."""
        handle = self.handle
        return handle.backend.design.stores() if handle.is_owner else None

    def manifest(self) -> Any:
        """The manifest to plan against: the owned one, or a read-only connection to the file."""
        ctx = self.index_context()
        if ctx is not None:
            return ctx.manifest
        from resources.manifest import Manifest

        return Manifest(self.settings().resolved_state_dir() / "index.db")


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
        if not pid:
            continue
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

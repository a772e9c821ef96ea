"""The project's Dagster storage keeps the event log's databases open (``pipelines.dagster.event_storage``).

- The instance ``dagster_home`` configures uses ``ReusingSqliteEventLogStorage``; what one instance
  records, a second one (another process, as the UI is) reads, while the first still holds its
  connections.
- Many runs keep at most ``KEEP_RUN_ENGINES`` run databases open, and every run stays readable.
- ``wipe`` and ``dispose`` close what is open; a wiped instance records again.

Everything is real: Dagster's instance and SQLite files under a temporary state dir, a real job.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, AssetMaterialization, DagsterInstance, job, op
from dagster._core.instance.ref import InstanceRef

from pipelines.dagster.event_storage import (
    INDEX_SHARD_NAME,
    KEEP_RUN_ENGINES,
    ReusingSqliteEventLogStorage,
)
from pipelines.dagster.run import dagster_home

ASSET = AssetKey("source_files")


@op
def _materialize_three(context) -> None:  # noqa: ANN001 - Dagster's context
    for n in range(3):
        context.log_event(AssetMaterialization(asset_key=ASSET, metadata={"n": n}))


@job
def _three_materializations() -> None:
    _materialize_three()


def _instance(state_dir: Path) -> DagsterInstance:
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home(state_dir))))


def test_the_project_instance_keeps_its_event_databases_open_and_another_process_reads_them(tmp_path: Path) -> None:
    instance = _instance(tmp_path)
    try:
        storage = instance.event_log_storage
        assert isinstance(storage, ReusingSqliteEventLogStorage)
        result = _three_materializations.execute_in_process(instance=instance)
        assert result.success
        assert set(storage._engines) == {INDEX_SHARD_NAME, result.run_id}
        assert len(instance.fetch_materializations(ASSET, limit=10).records) == 3

        reader = subprocess.run(
            [sys.executable, "-c", (
                "import sys; from dagster import AssetKey, DagsterInstance\n"
                "from dagster._core.instance.ref import InstanceRef\n"
                "i = DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1]))\n"
                "records = i.fetch_materializations(AssetKey('source_files'), limit=10).records\n"
                "print(len(records), len(i.get_runs()), i.all_logs(sys.argv[2])[-1].dagster_event_type)\n"
            ), str(tmp_path / "dagster"), result.run_id],
            capture_output=True, text=True, check=True, timeout=120,
        )
        assert reader.stdout.split() == ["3", "1", "DagsterEventType.RUN_SUCCESS"]
    finally:
        instance.dispose()
    assert storage._engines == {}


def test_many_runs_keep_a_bounded_number_of_databases_open_and_every_run_stays_readable(tmp_path: Path) -> None:
    instance = _instance(tmp_path)
    try:
        storage = instance.event_log_storage
        runs = [_three_materializations.execute_in_process(instance=instance).run_id for _ in range(KEEP_RUN_ENGINES + 2)]
        open_runs = [name for name in storage._engines if name != INDEX_SHARD_NAME]
        assert open_runs == runs[-KEEP_RUN_ENGINES:]
        for run_id in runs:  # a closed one opens again
            assert sum(1 for entry in instance.all_logs(run_id) if entry.is_dagster_event
                       and entry.dagster_event.is_step_materialization) == 3
        assert len(instance.fetch_materializations(ASSET, limit=100).records) == 3 * len(runs)
    finally:
        instance.dispose()


def test_a_wiped_instance_closes_its_databases_and_records_again(tmp_path: Path) -> None:
    instance = _instance(tmp_path)
    try:
        first = _three_materializations.execute_in_process(instance=instance).run_id
        instance.wipe()
        assert not (tmp_path / "dagster" / "history" / "runs" / f"{first}.db").exists()
        assert instance.fetch_materializations(ASSET, limit=10).records == []
        second = _three_materializations.execute_in_process(instance=instance)
        assert second.success
        assert len(instance.fetch_materializations(ASSET, limit=10).records) == 3
    finally:
        instance.dispose()

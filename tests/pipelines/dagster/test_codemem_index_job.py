"""The job ``codemem_index`` as the Dagster UI launches it, from the code location
(``query_server.dagster_location:defs``): the index runs inside the op over the stores the run
opens, and the run records each touched bucket as its own partition."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.buckets import bucket_of
from tests.conftest import FIXTURE_REPOS


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    return root


def _materialized(result: object) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = {}
    for event in result.all_events:  # type: ignore[attr-defined]
        if event.event_type_value == "ASSET_MATERIALIZATION":
            out.setdefault(event.asset_key.to_user_string(), set()).add(event.partition)
    return out


def test_a_ui_launch_indexes_in_the_op_and_records_the_touched_buckets(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.dagster.run import project_instance
    from query_server.dagster_location import defs

    monkeypatch.setenv("CODEMEM_PROJECT_ROOT", str(repo))
    monkeypatch.setenv("CODEMEM_DENSE_EMBEDDINGS", "false")
    job = defs.resolve_job_def("codemem_index")
    config = {"ops": {"index_changes": {"config": {"embed": False}}}}
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.py"))
    with project_instance(repo / ".codemem") as instance:
        first = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
        assert first.success
        assert _materialized(first)["graph_loaded"] == {bucket_of(f) for f in files}

        edited = repo / files[0]
        edited.write_text(edited.read_text() + "\n\ndef added_by_the_test():\n    return 1\n")
        second = job.execute_in_process(instance=instance, run_config=config, raise_on_error=False)
        assert second.success
        touched = _materialized(second)
        for asset in ("source_files", "parsed_files", "embedded_symbols", "graph_loaded"):
            assert touched[asset] == {bucket_of(files[0])}, (asset, touched)
        assert touched["normalized_graph"] == {None}
        record = next(e for e in second.all_events if e.event_type_value == "ASSET_MATERIALIZATION"
                      and e.asset_key.to_user_string() == "graph_loaded")
        table = record.event_specific_data.materialization.metadata["indexed_versions"].value
        assert files[0] in table and all(f not in table for f in files[1:] if bucket_of(f) != bucket_of(files[0]))
        assert instance.get_run_by_id(second.run_id).tags.get("codemem/pid")

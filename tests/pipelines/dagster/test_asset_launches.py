"""One per-bucket asset launched alone, as the Dagster UI can (issue 24, item 4).

- ``graph_loaded`` alone for a bucket whose file changed since the last full run reads the bucket
  again from disk: the stores get the file's new version (graph, manifest and points), never the
  old one its upstream's stored output holds, and the materialization names the re-read file.
- ``embedded_symbols`` alone does the same for the points; a launch without ``source_files``
  never deletes a file its stored plan lists as deleted but that is back on disk.
- A file that changes during the run fails ``bucket_matches_disk``: the run fails and the
  partition keeps its last materialization (nothing recorded as freshly materialized).

Everything is real: the stores of a ``CodeMemService``, the asset definitions, Dagster's
ephemeral instance, the bucket I/O manager's pickles in a temporary folder.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from pipelines.buckets import bucket_of
from tests.conftest import FIXTURE_REPOS

SESSION = "client/session.py"
PER_BUCKET = ("source_files", "parsed_files", "embedded_symbols", "graph_loaded")


@pytest.fixture
def launched(tmp_path: Path):  # noqa: ANN201 - (service, root, instance, run)
    """A project whose bucket of ``client/session.py`` was materialized by a full per-bucket run;
    yields (service, root, instance, run(selection) → result)."""
    from pipelines.dagster.assets import CODE_INDEX_ASSETS
    from pipelines.dagster.definitions import pipeline_resources
    from query_server.service import CodeMemService
    from resources.settings import Settings

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    service = CodeMemService(Settings(project_root=root))
    resources = pipeline_resources(service.owned_stores(), io_dir=str(tmp_path / "io"))
    per_bucket = [a for a in CODE_INDEX_ASSETS if a.key.to_user_string() in PER_BUCKET]

    def run(selection: list[str]):  # noqa: ANN202
        return materialize(per_bucket, selection=selection, partition_key=bucket_of(SESSION), instance=instance,
                           resources=resources, raise_on_error=False)

    with DagsterInstance.ephemeral() as instance:
        try:
            assert run(list(PER_BUCKET)).success
            yield service, root, instance, run
        finally:
            service.close()


def _edit(root: Path, marker: str) -> str:
    path = root / SESSION
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef {marker}():\n    return 1\n", encoding="utf-8")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _indexed(service, name: str) -> tuple[str, bool, bool]:  # noqa: ANN001
    """(the manifest's hash of the file, whether ``name`` is a graph node, whether it has a point)."""
    from pipelines.index_context import CODE_COLLECTION

    ctx = service.ctx
    _, rows, _ = ctx.graph.read_query("MATCH (n:Function) WHERE n.name = $name RETURN n.id", {"name": name}, 10)
    ids = [s.id for s in ctx.manifest.find_symbols_in(SESSION) if s.name == name]
    points = ctx.vectors.retrieve(CODE_COLLECTION, ids) if ids else []
    return ctx.manifest.file(SESSION).content_hash, bool(rows), bool(points)


def _latest(instance, asset: str):  # noqa: ANN001, ANN202
    event = instance.get_latest_materialization_event(AssetKey(asset))
    return event.asset_materialization if event is not None else None


def test_graph_loaded_alone_reads_a_changed_bucket_again_instead_of_writing_the_old_version(launched) -> None:  # noqa: ANN001
    service, root, instance, run = launched
    new_hash = _edit(root, "added_after_the_full_run")
    result = run(["graph_loaded"])
    assert result.success
    assert _indexed(service, "added_after_the_full_run") == (new_hash, True, True)
    materialization = _latest(instance, "graph_loaded")
    assert SESSION in materialization.metadata["reread_from_disk"].value
    assert new_hash[:12] in materialization.metadata["indexed_versions"].value
    checks = {e.event_specific_data.check_name: e.event_specific_data.passed for e in result.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert checks == {"bucket_matches_disk": True}


def test_embedded_symbols_alone_writes_the_points_of_the_version_on_disk(launched) -> None:  # noqa: ANN001
    service, root, instance, run = launched
    _edit(root, "pointed_after_the_full_run")
    assert run(["embedded_symbols"]).success
    from pipelines.index_context import CODE_COLLECTION

    names = {hit.payload.get("name") for hit in service.ctx.vectors.scroll(CODE_COLLECTION)}
    assert "pointed_after_the_full_run" in names
    assert SESSION in _latest(instance, "embedded_symbols").metadata["reread_from_disk"].value


def test_a_launch_without_source_files_never_deletes_a_file_that_is_back_on_disk(launched) -> None:  # noqa: ANN001
    service, root, _, run = launched
    path = root / SESSION
    text = path.read_text(encoding="utf-8")
    path.unlink()
    assert run(list(PER_BUCKET)).success  # the stored plan now lists the file as deleted
    assert service.ctx.manifest.file(SESSION) is None
    path.write_text(text, encoding="utf-8")
    assert run(["parsed_files", "embedded_symbols", "graph_loaded"]).success
    assert service.ctx.manifest.file(SESSION).content_hash == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_changed_during_the_run_fails_the_check_and_records_no_materialization(launched, monkeypatch) -> None:  # noqa: ANN001
    from pipelines.dagster import assets

    _, root, instance, run = launched
    before = _latest(instance, "graph_loaded")
    real_load = assets.load_bucket_graph

    def load_then_edit(ctx, bucket):  # noqa: ANN001, ANN202 - the file changes while the run writes it
        loaded = real_load(ctx, bucket)
        _edit(root, "changed_while_writing")
        return loaded

    monkeypatch.setattr(assets, "load_bucket_graph", load_then_edit)
    _edit(root, "edited_before_the_run")
    result = run(list(PER_BUCKET))
    assert not result.success
    checks = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert [(c.check_name, c.passed) for c in checks] == [("bucket_matches_disk", False)]
    assert not any(e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key.to_user_string() == "graph_loaded"
                   for e in result.all_events)
    assert _latest(instance, "graph_loaded").metadata == before.metadata


def test_a_run_over_a_range_of_buckets_records_each_buckets_own_files(tmp_path: Path) -> None:
    """A backfill from the UI runs the per-bucket assets once over a range of buckets; each
    partition's materialization holds its own bucket's files, not the run's (issue 24, item 1)."""
    from pipelines.buckets import ALL_BUCKETS
    from pipelines.dagster.assets import CODE_INDEX_ASSETS
    from pipelines.dagster.definitions import pipeline_resources
    from query_server.service import CodeMemService
    from resources.settings import Settings

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    files = ["client/__init__.py", SESSION]
    first, last = sorted(bucket_of(f) for f in files)
    assert first != last
    service = CodeMemService(Settings(project_root=root))
    try:
        with DagsterInstance.ephemeral() as instance:
            result = materialize(
                [a for a in CODE_INDEX_ASSETS if a.key.to_user_string() in PER_BUCKET], instance=instance,
                resources=pipeline_resources(service.owned_stores(), io_dir=str(tmp_path / "io")),
                tags={"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last},
            )
            assert result.success
            loaded = {e.partition: e.event_specific_data.materialization.metadata for e in result.all_events
                      if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key.to_user_string() == "graph_loaded"}
            assert set(loaded) == set(ALL_BUCKETS[ALL_BUCKETS.index(first):ALL_BUCKETS.index(last) + 1])
            for path in files:
                own = loaded[bucket_of(path)]
                other = next(f for f in files if f != path)
                assert own["files_written"].value == 1, (path, own["files_written"])
                assert path in own["indexed_versions"].value and other not in own["indexed_versions"].value
            empty = next(m for key, m in loaded.items() if key not in {first, last})
            assert empty["files_written"].value == 0 and empty["run_buckets"].value == len(loaded)
    finally:
        service.close()


def test_a_run_that_writes_nothing_in_a_bucket_keeps_showing_what_is_indexed(launched) -> None:  # noqa: ANN001
    """Launching the bucket again with nothing changed records the files as indexed, unchanged
    (issue 24, item 3: such a run used to blank the bucket's record)."""
    _, _, instance, run = launched
    assert run(list(PER_BUCKET)).success
    record = _latest(instance, "graph_loaded").metadata
    assert record["files_written"].value == 0 and record["files_unchanged"].value == 1
    assert SESSION in record["indexed_versions"].value and "unchanged" in record["indexed_versions"].value

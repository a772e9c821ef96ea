"""``file_change_sensor`` on a real indexed project: one ``codemem_index`` RunRequest naming the
buckets with new pending work (new, changed, deleted, renamed files), nothing on a repeated tick,
a catch-up after downtime, and a requested run that, executed for real, leaves the index current
and records only the buckets it touched."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.buckets import bucket_of
from tests.conftest import FIXTURE_REPOS

NEW_FUNCTION = '''
def reconcile_ledger_entries(entries):
    """Pair debit and credit ledger entries and return the unmatched ones."""
    return [e for e in entries if not e.get("matched")]
'''


@pytest.fixture
def indexed_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the python fixture repository, indexed (stores closed), served by the code
    location through ``CODEMEM_PROJECT_ROOT``."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    svc = CodeMemService(Settings(project_root=root))
    try:
        report = svc.index(IndexInput())
        assert report["files_indexed"] >= 2 and not report["failed"], report
    finally:
        svc.close()
    monkeypatch.setenv("CODEMEM_PROJECT_ROOT", str(root))
    return root


@pytest.fixture
def instance() -> Iterator:
    from dagster import DagsterInstance

    with DagsterInstance.ephemeral() as inst:
        yield inst


def _tick(instance, cursor: str | None) -> tuple[list, str | None, bool]:  # noqa: ANN001
    """Evaluate one sensor tick: (run requests, next cursor, skipped)."""
    from dagster import SensorResult, SkipReason, build_sensor_context

    from pipelines.dagster.sensors import file_change_sensor

    context = build_sensor_context(cursor=cursor, instance=instance)
    result = file_change_sensor(context)
    if isinstance(result, SkipReason):
        return [], context.cursor, True
    assert isinstance(result, SensorResult)
    return list(result.run_requests or []), result.cursor, False


def _same_bucket_names(count: int, directory: str = "client") -> list[str]:
    """``count`` new repo-relative paths that fall into one bucket."""
    by_bucket: dict[str, list[str]] = {}
    for i in range(10_000):
        path = f"{directory}/batch_{i}.py"
        group = by_bucket.setdefault(bucket_of(path), [])
        group.append(path)
        if len(group) == count:
            return group
    raise AssertionError("no bucket collision found")


def _other_bucket_name(avoid: set[str], stem: str) -> str:
    """A new path whose bucket is none of ``avoid``."""
    for i in range(1000):
        path = f"client/{stem}_{i}.py"
        if bucket_of(path) not in avoid:
            return path
    raise AssertionError("every candidate fell into an avoided bucket")


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _bump_mtime(path: Path) -> None:
    later = time.time() + 5
    os.utime(path, (later, later))


def _assert_requests(requests: list, buckets: set[str]) -> None:
    """One codemem_index run for all of ``buckets`` (a burst is one run)."""
    from pipelines.dagster.sensors import file_change_sensor

    assert file_change_sensor.job_name == "codemem_index"
    [request] = requests
    assert request.job_name in (None, "codemem_index") and request.partition_key is None
    assert sorted(request.tags["codemem/buckets"].split(",")) == sorted(buckets), request.tags
    assert request.run_key is None  # buckets may return to an earlier pending state; the cursor dedups
    assert request.tags["codemem/fingerprint"]
    assert request.tags.get("codemem/trigger") == "file_change_sensor"


def _run(request, instance, **options):  # noqa: ANN001, ANN202
    """Execute a requested run as the daemon would, from the code location."""
    from query_server.dagster_location import defs

    job = defs.resolve_job_def("codemem_index")
    return job.execute_in_process(run_config=request.run_config, instance=instance, tags=request.tags, **options)


def _cursor_buckets(cursor: str | None) -> set[str]:
    return set(json.loads(cursor)) if cursor else set()


def test_no_change_skips_and_keeps_a_valid_cursor(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    requests, cursor, skipped = _tick(instance, None)
    assert skipped and requests == []
    assert json.loads(cursor) == {}
    requests, again, skipped = _tick(instance, cursor)
    assert skipped and again == cursor


def test_new_file_requests_its_bucket_once(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    _, cursor, _ = _tick(instance, None)
    _write(indexed_repo, "client/ledger.py", NEW_FUNCTION)
    requests, cursor, skipped = _tick(instance, cursor)
    assert not skipped
    _assert_requests(requests, {bucket_of("client/ledger.py")})
    assert _cursor_buckets(cursor) == {bucket_of("client/ledger.py")}
    # The run has not happened: the bucket is still pending with the same fingerprint.
    requests, again, _ = _tick(instance, cursor)
    assert requests == [] and again == cursor


def test_changed_file_requests_its_bucket(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    _, cursor, _ = _tick(instance, None)
    session = indexed_repo / "client" / "session.py"
    session.write_text(session.read_text(encoding="utf-8") + NEW_FUNCTION, encoding="utf-8")
    _bump_mtime(session)
    requests, cursor, _ = _tick(instance, cursor)
    _assert_requests(requests, {bucket_of("client/session.py")})
    # A second edit of the same file while the run is still pending: a new fingerprint, a new request.
    session.write_text(session.read_text(encoding="utf-8") + "\n\ndef another_one():\n    return 2\n", encoding="utf-8")
    _bump_mtime(session)
    second, _, _ = _tick(instance, cursor)
    _assert_requests(second, {bucket_of("client/session.py")})
    assert second[0].tags["codemem/fingerprint"] != requests[0].tags["codemem/fingerprint"]


def test_deleted_file_requests_its_bucket(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    _, cursor, _ = _tick(instance, None)
    (indexed_repo / "client" / "session.py").unlink()
    requests, _, _ = _tick(instance, cursor)
    _assert_requests(requests, {bucket_of("client/session.py")})


def test_rename_requests_old_and_new_bucket(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    _, cursor, _ = _tick(instance, None)
    old = "client/session.py"
    new = _other_bucket_name({bucket_of(old)}, "renamed_session")
    (indexed_repo / old).rename(indexed_repo / new)
    requests, _, _ = _tick(instance, cursor)
    _assert_requests(requests, {bucket_of(old), bucket_of(new)})


def test_many_files_in_one_bucket_make_one_request(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    _, cursor, _ = _tick(instance, None)
    names = _same_bucket_names(3)
    for i, name in enumerate(names):
        _write(indexed_repo, name, f"def batch_function_{i}():\n    return {i}\n")
    requests, cursor, _ = _tick(instance, cursor)
    _assert_requests(requests, {bucket_of(names[0])})
    requests, _, skipped = _tick(instance, cursor)
    assert requests == [] and skipped


def test_first_tick_after_downtime_catches_up_and_a_run_makes_it_current(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    from query_server.service import CodeMemService
    from resources.schemas.tools import CodeSearchInput
    from resources.settings import Settings

    # Changes made while the daemon was off: a new file, an edited one, a deleted one.
    added = _other_bucket_name({bucket_of("client/session.py"), bucket_of("client/__init__.py")}, "ledger")
    _write(indexed_repo, added, NEW_FUNCTION)
    session = indexed_repo / "client" / "session.py"
    session.write_text(session.read_text(encoding="utf-8") + "\n\ndef session_extra():\n    return 3\n", encoding="utf-8")
    _bump_mtime(session)
    (indexed_repo / "client" / "__init__.py").unlink()
    touched = {bucket_of(added), bucket_of("client/session.py"), bucket_of("client/__init__.py")}

    requests, cursor, skipped = _tick(instance, None)
    assert not skipped
    _assert_requests(requests, touched)
    assert sorted(requests[0].tags["codemem/paths"].split(",")) == sorted([added, "client/__init__.py", "client/session.py"])

    # Run what the sensor asked for, as the daemon would. The stores are closed here, so the run
    # owns them for its duration; it records the buckets it touched, and no other.
    [request] = requests
    result = _run(request, instance)
    assert result.success
    assert len(instance.get_runs()) == 1
    recorded = {e.partition for e in result.all_events
                if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key.to_user_string() == "graph_loaded"}
    assert recorded == touched, recorded
    written = next(e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"
                   and e.asset_key.to_user_string() == "graph_loaded" and e.partition == bucket_of(added))
    assert added in written.event_specific_data.materialization.metadata["indexed_versions"].value

    requests, cursor, skipped = _tick(instance, cursor)
    assert skipped and requests == [] and json.loads(cursor) == {}

    svc = CodeMemService(Settings(project_root=indexed_repo))
    try:
        hits = svc.code_search(CodeSearchInput(query="reconcile ledger entries debit credit")).results
        assert any(h.name == "reconcile_ledger_entries" and h.file_path == added for h in hits), [h.qualified_name for h in hits]
        hits = svc.code_search(CodeSearchInput(query="session_extra")).results
        assert any(h.name == "session_extra" for h in hits)
        assert "client/__init__.py" not in svc.ctx.manifest.files()
    finally:
        svc.close()


def _run_while_owned(root: Path, instance, change) -> tuple:  # noqa: ANN001
    """Hold the stores in a ``ProjectHandle`` (as a Claude Code session's MCP server does), make
    ``change``, tick, and execute the requested run: the job's resource cannot own the stores, so
    the owner indexes. Returns (run results, owner's manifest files, owner's search hits for the
    new function)."""
    from query_server.ownership import ProjectHandle
    from resources.schemas.tools import CodeSearchInput
    from resources.settings import Settings

    owner = ProjectHandle(Settings(project_root=root))
    try:
        assert owner.is_owner
        _, cursor, _ = _tick(instance, None)
        change()
        requests, _, _ = _tick(instance, cursor)
        assert requests
        results = [_run(r, instance, raise_on_error=False) for r in requests]
        files = set(owner.backend.ctx.manifest.files())
        hits = owner.call("code_search", CodeSearchInput(query="reconcile ledger entries")).results
        return results, files, hits
    finally:
        owner.close()


def _bucket_record(results, asset: str, bucket: str) -> dict:  # noqa: ANN001
    """The metadata ``asset`` was materialized with for ``bucket`` in ``results`` (one record)."""
    [record] = [e.event_specific_data.materialization.metadata for r in results for e in r.all_events
                if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key.to_user_string() == asset
                and e.partition == bucket]
    return record


def test_run_hands_new_files_to_the_owning_process(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    """The owner indexes; the run records what it did per bucket: the touched bucket with its own
    new file, and no other bucket (issue 24, item 2)."""
    results, files, hits = _run_while_owned(indexed_repo, instance, lambda: _write(indexed_repo, "client/ledger.py", NEW_FUNCTION))
    assert all(r.success for r in results)
    assert "client/ledger.py" in files
    assert any(h.name == "reconcile_ledger_entries" for h in hits)
    recorded = {e.partition for r in results for e in r.all_events
                if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key.to_user_string() == "graph_loaded"}
    assert recorded == {bucket_of("client/ledger.py")}
    graph = _bucket_record(results, "graph_loaded", bucket_of("client/ledger.py"))
    assert graph["files_written"].value == 1
    assert "client/ledger.py" in graph["indexed_versions"].value
    assert "client/ledger.py" in _bucket_record(results, "source_files", bucket_of("client/ledger.py"))["changed_files"].value
    checks = {e.event_specific_data.check_name: e.event_specific_data.passed for r in results for e in r.all_events
              if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert checks and all(checks.values()), checks


def test_run_hands_deletions_to_the_owning_process(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    results, files, _ = _run_while_owned(indexed_repo, instance, (indexed_repo / "client" / "session.py").unlink)
    assert all(r.success for r in results)
    assert "client/session.py" not in files
    graph = _bucket_record(results, "graph_loaded", bucket_of("client/session.py"))
    assert graph["files_deleted"].value == 1
    assert "client/session.py" in graph["deleted_files"].value


def test_a_bucket_returning_to_an_earlier_state_is_requested_again(indexed_repo: Path, instance) -> None:  # noqa: ANN001
    """X → Y → X → Y: the last Y must be requested although Y was requested before."""
    session = indexed_repo / "client" / "session.py"
    original = session.read_text(encoding="utf-8")
    edited = original + "\n\ndef flip():\n    return 1\n"
    session.write_text(edited, encoding="utf-8")
    _bump_mtime(session)
    first, cursor, _ = _tick(instance, None)
    session.write_text(original, encoding="utf-8")
    _bump_mtime(session)
    _, cursor, _ = _tick(instance, cursor)  # back to the indexed state: nothing pending
    session.write_text(edited, encoding="utf-8")
    _bump_mtime(session)
    again, _, _ = _tick(instance, cursor)
    _assert_requests(again, {bucket_of("client/session.py")})
    assert again[0].tags["codemem/fingerprint"] == first[0].tags["codemem/fingerprint"]

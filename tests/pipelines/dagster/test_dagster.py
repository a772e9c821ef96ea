"""The Dagster code location: defs load, the assets index a real project in-process, and a
Dagster run and the plain indexer produce identical stores on the same tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
from dagster import ResourceParam

from pipelines.buckets import ALL_BUCKETS, bucket_of
from pipelines.dagster.project import ProjectStores
from tests.conftest import FIXTURE_REPOS


def _snapshot(svc) -> dict:  # noqa: ANN001
    """What the stores hold, minus times: manifest files and symbols, resolved edges, vector ids
    and payloads, graph nodes (with their properties) and edges."""
    from pipelines.indexer import CODE_COLLECTION

    ctx = svc.ctx
    files = {p: (s.content_hash, s.symbol_count, s.error_count) for p, s in ctx.manifest.files().items()}
    symbols = sorted((s.id, s.qualified_name, s.kind, s.has_dense) for s in ctx.manifest.all_symbols())
    ids = sorted(ctx.vectors.ids(CODE_COLLECTION))
    payloads = {h.id: {k: v for k, v in h.payload.items() if k not in ("indexed_at",)} for h in ctx.vectors.retrieve(CODE_COLLECTION, ids)}
    dense = ctx.vectors.dense_vectors(CODE_COLLECTION, ids)
    code = "(n:File OR n:Module OR n:Class OR n:Function)"
    _, nodes, _ = ctx.graph.read_query(
        f"MATCH (n) WHERE {code} RETURN labels(n)[0] AS label, n.id AS id, properties(n) AS props ORDER BY id", {}, 100_000
    )
    for node in nodes:  # a node written over another keeps nothing of it (its properties all replaced)
        node["props"] = {k: v for k, v in dict(node["props"]).items() if k != "indexed_at"}
    _, edges, _ = ctx.graph.read_query(
        f"MATCH (a)-[r]->(n) WHERE {code} RETURN a.id AS a, type(r) AS t, n.id AS b ORDER BY a, t, b", {}, 100_000
    )
    # the design layer's memories (components, patterns) get fresh UUIDs per project: compare their shape
    _, memory_nodes, _ = ctx.graph.read_query(
        f"MATCH (n) WHERE NOT {code} RETURN labels(n)[0] AS label, count(*) AS n ORDER BY label", {}, 1_000
    )
    return {
        "memory_nodes": memory_nodes,
        "files": files, "symbols": symbols, "ids": ids,
        "edges": sorted((*edge, json.dumps(props, sort_keys=True))  # (source, type, target, properties)
                        for edge, props in ctx.manifest.resolved_edge_properties(ctx.manifest.resolved_edges()).items()),
        "payloads": payloads, "dense": {k: [round(x, 5) for x in v] for k, v in dense.items()},
        "nodes": nodes, "graph_edges": edges,
    }


@pytest.fixture
def python_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    return root


def test_defs_load_with_the_assets_checks_job_and_sensor() -> None:
    from query_server.dagster_location import defs

    graph = defs.resolve_asset_graph()
    keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    assert keys == ["design_documents", "design_links", "embedded_symbols", "graph_loaded", "normalized_graph", "parsed_files", "source_files"]
    assert {c.name for c in graph.asset_check_keys} == {"bucket_matches_disk", "stores_agree", "no_dangling_edges", "counts_match_parse"}
    assert defs.resolve_job_def("index_buckets") is not None
    assert defs.resolve_job_def("codemem_index") is not None  # what `codemem index` records its runs as
    assert defs.resolve_sensor_def("file_change_sensor") is not None


def test_buckets_are_stable_and_cover_256_keys() -> None:
    assert len(ALL_BUCKETS) == 256 and ALL_BUCKETS[0] == "b00" and ALL_BUCKETS[-1] == "bff"
    assert bucket_of("src/app/main.py") == bucket_of("src/app/main.py")
    spread = {bucket_of(f"pkg/module_{i}.py") for i in range(2000)}
    assert len(spread) > 240


def test_dagster_run_and_plain_indexer_build_identical_stores(python_repo: Path, tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from pipelines.dagster.run import materialize_index
    from query_server.ownership import ProjectHandle
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    other = tmp_path / "same-tree"
    shutil.copytree(python_repo, other)

    plain = CodeMemService(Settings(project_root=other))
    try:
        plain.index(IndexInput())
        expected = _snapshot(plain)
    finally:
        plain.close()

    handle = ProjectHandle(Settings(project_root=python_repo))
    try:
        assert handle.is_owner
        with DagsterInstance.ephemeral() as instance:
            report = materialize_index(handle.backend.owned_stores(), instance=instance)
            assert report.ok and report.files_indexed == len(expected["files"]), report.as_dict()
            got = _snapshot(handle.backend)
            assert got == expected
            again = materialize_index(handle.backend.owned_stores(), instance=instance)
            assert again.files_indexed == 0 and again.files_unchanged == len(expected["files"])
            assert not any("Dagster run" in n for n in again.notes)  # nothing pending: no code-index run
            runs = list(instance.get_runs())
            assert len(runs) == 1  # one run (code index and design layer); nothing changed: none
            assert runs[0].job_name == "codemem_index" and runs[0].is_success, runs[0]
            assert runs[0].tags["codemem/trigger"] == "codemem index"
            assert not any(t.startswith("dagster/asset_partition_range") for t in runs[0].tags)
            recorded = materializations(instance, runs[0].run_id)
            buckets = {bucket_of(p) for p in expected["files"]}
            assert {m.partition for m in recorded if m.asset == "graph_loaded"} == buckets
            assert {m.asset for m in recorded if m.partition is None} >= {"normalized_graph", "design_documents", "design_links"}
            assert all(passed for passed in check_results(instance, runs[0].run_id).values())
    finally:
        handle.close()


def test_an_in_process_run_gets_the_callers_own_stores_not_a_copy(python_repo: Path) -> None:
    """Dagster re-creates a configurable resource per run (losing what was put in it); the stores a
    process lends to its in-process run must reach the assets as the very same objects."""
    from dagster import DagsterInstance, asset, materialize

    from pipelines.dagster.definitions import pipeline_resources
    from query_server.service import CodeMemService
    from resources.settings import Settings

    seen: list[object] = []

    @asset
    def probe(codemem: ResourceParam[ProjectStores]) -> None:
        seen.extend([codemem, codemem.index_context(), codemem.design_stores().ledger])

    service = CodeMemService(Settings(project_root=python_repo))
    try:
        stores = service.owned_stores()
        with DagsterInstance.ephemeral() as instance:
            assert materialize([probe], instance=instance, resources=pipeline_resources(stores)).success
        assert seen[0] is stores and seen[1] is service.ctx and seen[2] is service.design.ledger
    finally:
        service.close()


def test_codemem_index_is_one_service_call_that_locks_repairs_and_records_the_run(python_repo: Path) -> None:
    """`codemem index` (a Dagster run) and the plain index tools share one entry point: it takes the
    index lock for the run, refreshes the design layer and records the run as the last index."""
    import json

    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    service = CodeMemService(Settings(project_root=python_repo))
    locked: list[bool] = []
    try:
        report = service.index(IndexInput(), lambda *_: locked.append(service._index_lock.locked()), through_dagster=True)  # noqa: SLF001
        assert report["failed"] == [] and report["files_indexed"] == len(service.manifest.files()) > 0, report
        assert locked and all(locked)
        assert any(n.startswith("Dagster run ") for n in report["notes"]) and report["design"] is not None
        assert json.loads(service.manifest.get_meta("last_index")) == report

        repaired = service.index(IndexInput(), through_dagster=True, repair=True)
        assert repaired["notes"][0].startswith("repair: removed 0 stray points"), repaired["notes"]
        assert repaired["files_indexed"] == report["files_indexed"]  # every file re-indexed from disk
        assert json.loads(service.manifest.get_meta("last_index")) == repaired
    finally:
        service.close()


class Recorded(NamedTuple):
    """One asset materialization of a run: asset, partition (None: unpartitioned), metadata
    (Markdown as its text, numbers as numbers)."""

    asset: str
    partition: str | None
    metadata: dict


def materializations(instance, run_id: str) -> list[Recorded]:  # noqa: ANN001
    """The ASSET_MATERIALIZATION events of a run, in order."""
    from dagster import DagsterEventType

    out = []
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
        m = entry.dagster_event.event_specific_data.materialization
        out.append(Recorded(m.asset_key.to_user_string(), m.partition, {k: v.value for k, v in m.metadata.items()}))
    return out


def check_results(instance, run_id: str) -> dict[str, bool]:  # noqa: ANN001
    """Each asset check evaluated in a run: its name and whether it passed."""
    from dagster import DagsterEventType

    out = {}
    for entry in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data
        out[evaluation.check_name] = evaluation.passed
    return out


def _runs(service) -> list:  # noqa: ANN001
    """The runs recorded in the project's persistent Dagster instance (the one `codemem index` uses)."""
    from pipelines.dagster.run import project_instance

    with project_instance(service.settings.resolved_state_dir()) as instance:
        return list(instance.get_runs())


def test_a_no_change_codemem_index_starts_no_dagster_run(python_repo: Path) -> None:
    """Nothing changed (code or documents): `codemem index` answers from the manifest — no run in
    the instance — with every file counted unchanged, and is still recorded as the last index."""
    import json

    from pipelines.dagster.run import NOTHING_CHANGED
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    for n in range(12):
        (python_repo / "client" / f"extra_{n}.py").write_text(f"def extra_{n}(x):\n    return x + {n}\n")
    service = CodeMemService(Settings(project_root=python_repo, dense_embeddings=False))
    try:
        first = service.index(IndexInput(embed=False), through_dagster=True)
        assert first["files_indexed"] == 14 and not first["failed"], first
        runs = len(_runs(service))
        assert runs == 1  # the code index and the design layer in one run

        again = service.index(IndexInput(embed=False), through_dagster=True)
        assert len(_runs(service)) == runs
        assert again["files_seen"] == again["files_unchanged"] == 14 and again["files_indexed"] == 0, again
        assert NOTHING_CHANGED in again["notes"] and again["design"]["derivation_skipped"]
        assert json.loads(service.manifest.get_meta("last_index")) == again

        (python_repo / "README.md").write_text("# Client\n\nA document: design work, so a (design) run.\n")
        documented = service.index(IndexInput(embed=False), through_dagster=True)
        assert len(_runs(service)) == runs + 1 and NOTHING_CHANGED not in documented["notes"]
        assert documented["design"]["documents_changed"] == 1 and documented["files_unchanged"] == 14
        assert NOTHING_CHANGED in service.index(IndexInput(embed=False), through_dagster=True)["notes"]
        assert len(_runs(service)) == runs + 1
    finally:
        service.close()


def test_a_five_file_change_is_one_run_over_the_touched_buckets(python_repo: Path) -> None:
    """Five edited files: one `codemem_index` run (code index and design layer together) that
    materializes the code-index assets for exactly the touched buckets, each with its own files;
    only the five files are re-indexed."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    paths = [f"client/extra_{n}.py" for n in range(40)]
    for n, rel in enumerate(paths):
        (python_repo / rel).write_text(f"def extra_{n}(x):\n    return x + {n}\n")
    service = CodeMemService(Settings(project_root=python_repo, dense_embeddings=False))
    try:
        service.index(IndexInput(embed=False), through_dagster=True)
        before = {r.run_id for r in _runs(service)}
        edited = paths[::8]
        assert len(edited) == 5
        for rel in edited:
            with (python_repo / rel).open("a") as out:
                out.write("\n\ndef added(y):\n    return y\n")
        report = service.index(IndexInput(embed=False), through_dagster=True)
        new = [r for r in _runs(service) if r.run_id not in before]
        assert len(new) == 1, [r.tags for r in new]
        assert new[0].job_name == "codemem_index" and new[0].is_success, new[0]
        assert "dagster/asset_partition_range_start" not in new[0].tags
        touched = {bucket_of(rel) for rel in edited}
        from pipelines.dagster.run import project_instance

        with project_instance(service.settings.resolved_state_dir()) as instance:
            recorded = materializations(instance, new[0].run_id)
            checks = check_results(instance, new[0].run_id)
        per_bucket = [m for m in recorded if m.partition is not None]
        for asset in ("source_files", "parsed_files", "embedded_symbols", "graph_loaded"):
            got = sorted(m.partition for m in per_bucket if m.asset == asset)
            assert got == sorted(touched), (asset, got, touched)  # each touched bucket once, no other
        for m in per_bucket:
            if m.asset == "graph_loaded":
                mine = [rel for rel in edited if bucket_of(rel) == m.partition]
                table = m.metadata["indexed_versions"]
                assert all(rel in table for rel in mine), (m.partition, table)
                assert not any(rel in table for rel in paths if rel not in mine), (m.partition, table)
                assert m.metadata["files_written"] == len(mine) and m.metadata["files_deleted"] == 0
        assert {m.asset for m in recorded if m.partition is None} == {"normalized_graph", "design_documents", "design_links"}
        assert checks and all(checks.values()), checks
        assert report["files_indexed"] == 5 and report["files_unchanged"] == 37, report
        assert report["design"] is not None and any(new[0].run_id in n for n in report["notes"])
    finally:
        service.close()


def test_the_project_instance_sends_no_telemetry_and_shows_no_newsletter_prompt(tmp_path: Path) -> None:
    """Issue 24, item 6: the UI's first visit opened Dagster's newsletter modal."""
    from pipelines.dagster.run import project_instance

    with project_instance(tmp_path / ".codemem") as instance:
        assert instance.nux_enabled is False
        assert instance.telemetry_enabled is False

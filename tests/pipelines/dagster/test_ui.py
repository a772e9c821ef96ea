"""``codemem ui`` end to end: the Dagster webserver and daemon over a real indexed project.

The UI is started as a subprocess in its own process group, asked over GraphQL for the asset
graph, the partitions, the checks and the sensor, made to index an edit through
``file_change_sensor``, and stopped with SIGTERM; nothing of it may be left running or listening.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipelines.buckets import ALL_BUCKETS, bucket_of
from tests.conftest import FIXTURE_REPOS

REPO_ROOT = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT_S = 90
CODEMEM = [sys.executable, "-c", "from query_server.cli import main; main(prog_name='codemem')"]
"""The command line as the console script runs it (the package's ``main``, every command registered)."""
CHAIN = ["source_files", "parsed_files", "embedded_symbols", "graph_loaded", "normalized_graph"]
PER_FILE = CHAIN[:4]

ASSET_GRAPH = """
query {
  assetNodes {
    assetKey { path }
    groupName
    dependencyKeys { path }
    isPartitioned
    partitionDefinition { type }
    partitionKeys
    backfillPolicy { policyType }
    assetChecksOrError { __typename ... on AssetChecks { checks { name blocking } } }
    assetPartitionStatuses { __typename ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } }
  }
}
"""

WORKSPACE = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on PythonError { message }
          ... on RepositoryLocation {
            repositories {
              jobs { name }
              sensors { name sensorState { status ticks(limit: 5) { status skipReason } } }
            }
          }
        }
      }
    }
  }
}
"""

RUNS = """
query {
  runsOrError(limit: 20) {
    __typename
    ... on Runs { results { runId jobName status tags { key value } repositoryOrigin { repositoryLocationName repositoryName } } }
  }
}
"""

REEXECUTE = """
mutation {
  launchPipelineReexecution(reexecutionParams: {parentRunId: "%s", strategy: ALL_STEPS}) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never through a proxy


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _graphql(port: int, query: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with DIRECT.open(request, timeout=30) as response:
        body = json.loads(response.read())
    assert not body.get("errors"), body["errors"]
    return body["data"]


def _wait_for(what: str, condition: Any, timeout_s: float, ui: subprocess.Popen[bytes], log: Path) -> Any:
    """Poll ``condition`` until it returns something truthy; fail with the UI's log otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert ui.poll() is None, f"codemem ui exited ({ui.returncode}) while waiting for {what}:\n{log.read_text()[-4000:]}"
        try:
            value = condition()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} after {timeout_s} s:\n{log.read_text()[-4000:]}"
        time.sleep(0.5)


def _tags(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


@pytest.fixture
def indexed_repo(tmp_path: Path) -> Path:
    """A copy of the Python fixture repository after one `codemem index` (one Dagster run)."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    done = subprocess.run(
        [*CODEMEM, "index", str(root), "--no-embed", "--json"],
        cwd=str(REPO_ROOT), env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, (done.stderr[-4000:], done.stdout[-4000:])
    assert json.loads(done.stdout)["files_indexed"] == 2
    return root


@pytest.fixture
def ui_process(indexed_repo: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """`codemem ui` on the indexed repository, in its own process group; killed whatever happens."""
    port = _free_port()
    log = tmp_path / "ui.log"
    with log.open("wb") as sink:
        ui = subprocess.Popen(
            [*CODEMEM, "ui", "--project", str(indexed_repo), "--port", str(port)],
            cwd=str(REPO_ROOT), env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        yield ui, port, log
    finally:
        # the UI's own group (its dagster dev child has a group of its own, whose pgid is that child's pid)
        for pgid in _dagster_groups(indexed_repo) + [ui.pid]:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if ui.poll() is None:
            ui.wait(timeout=30)


def _dagster_groups(root: Path) -> list[int]:
    """Process groups of live processes serving this project (CODEMEM_PROJECT_ROOT in their env)."""
    wanted = f"CODEMEM_PROJECT_ROOT={root.resolve()}".encode()
    groups: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                groups.add(os.getpgid(int(entry.name)))
        except (OSError, ProcessLookupError):
            continue
    return sorted(groups)


@pytest.mark.slow
def test_codemem_ui_serves_the_asset_graph_runs_the_sensor_and_stops_cleanly(
    indexed_repo: Path, ui_process: tuple[subprocess.Popen[bytes], int, Path]
) -> None:
    ui, port, log = ui_process
    _wait_for("answer on /server_info", lambda: DIRECT.open(f"http://127.0.0.1:{port}/server_info", timeout=2).status == 200,
              STARTUP_TIMEOUT_S, ui, log)
    groups = _dagster_groups(indexed_repo)
    assert groups, "no process serves the project"

    # the asset graph: five code assets in one group, a chain, four of them on the 256 bucket
    # partitions; the design group's two assets hang off normalized_graph
    every = {"/".join(n["assetKey"]["path"]): n for n in _graphql(port, ASSET_GRAPH)["assetNodes"]}
    nodes = {k: n for k, n in every.items() if n["groupName"] == "code_index"}
    assert sorted(nodes) == sorted(CHAIN)
    design = {k: n for k, n in every.items() if n["groupName"] == "design"}
    assert sorted(design) == ["design_documents", "design_links"]
    assert sorted(k["path"][0] for k in design["design_links"]["dependencyKeys"]) == ["design_documents", "normalized_graph"]
    for upstream, downstream in zip([None, *CHAIN], CHAIN, strict=False):
        assert [k["path"] for k in nodes[downstream]["dependencyKeys"]] == ([[upstream]] if upstream else [])
    for name in PER_FILE:
        node = nodes[name]
        assert node["isPartitioned"] and node["partitionDefinition"]["type"] == "STATIC"
        assert node["partitionKeys"] == list(ALL_BUCKETS) and len(node["partitionKeys"]) == 256
        assert node["backfillPolicy"]["policyType"] == "SINGLE_RUN"
    assert not nodes["normalized_graph"]["isPartitioned"] and nodes["normalized_graph"]["partitionDefinition"] is None

    # the checks: a blocking one on each bucket of graph_loaded, three on the whole index
    checks = {name: {c["name"]: c["blocking"] for c in node["assetChecksOrError"].get("checks", [])} for name, node in nodes.items()}
    assert checks["graph_loaded"] == {"bucket_matches_disk": True}
    assert checks["normalized_graph"] == {"stores_agree": False, "no_dangling_edges": False, "counts_match_parse": False}
    assert all(not checks[name] for name in ("source_files", "parsed_files", "embedded_symbols"))

    # the UI reads the instance `codemem index` recorded its run in: the files' buckets, and only
    # those (the run materializes the buckets it touched), are materialized
    file_buckets = {bucket_of("client/__init__.py"), bucket_of("client/session.py")}
    for name in PER_FILE:
        statuses = nodes[name]["assetPartitionStatuses"]
        assert set(statuses["materializedPartitions"]) == file_buckets and not statuses["failedPartitions"], (name, statuses)
    runs = _graphql(port, RUNS)["runsOrError"]["results"]  # one run: the code index and its design assets
    assert [_tags(r).get("codemem/trigger") for r in runs] == ["codemem index"]
    assert [r["jobName"] for r in runs] == ["codemem_index"]
    assert all(r["status"] == "SUCCESS" for r in runs)
    assert not any(k.startswith("dagster/asset_partition_range") for r in runs for k in _tags(r))

    # the code location `codemem`, its job and the sensor, which the daemon ticks
    def sensor_state() -> dict[str, Any] | None:
        entries = _graphql(port, WORKSPACE)["workspaceOrError"]["locationEntries"]
        assert [e["name"] for e in entries] == ["codemem"], entries
        repository = entries[0]["locationOrLoadError"]["repositories"][0]
        assert {"index_buckets", "codemem_index"} <= {j["name"] for j in repository["jobs"]}
        sensors = {s["name"]: s["sensorState"] for s in repository["sensors"]}
        assert set(sensors) == {"file_change_sensor"}
        return sensors["file_change_sensor"] if sensors["file_change_sensor"]["ticks"] else None

    state = _wait_for("tick of file_change_sensor", sensor_state, 60, ui, log)
    assert state["status"] == "RUNNING"
    assert state["ticks"][0] == {"status": "SKIPPED", "skipReason": "the index is current"}
    state_dir = indexed_repo / ".codemem"
    assert not (state_dir / "owner.json").exists(), "codemem ui (or an idle daemon) opened the project's stores"

    # an edit: the sensor requests one run for the file's bucket, and that run indexes it
    session = indexed_repo / "client" / "session.py"
    session.write_text(session.read_text() + "\n\ndef added_while_the_ui_runs():\n    return 42\n")
    edited_bucket = bucket_of("client/session.py")

    def sensor_run() -> dict[str, Any] | None:
        for run in _graphql(port, RUNS)["runsOrError"]["results"]:
            tags = _tags(run)
            if tags.get("codemem/trigger") == "file_change_sensor" and run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                return run
        return None

    run = _wait_for("finished run of file_change_sensor", sensor_run, 180, ui, log)
    assert run["status"] == "SUCCESS", log.read_text()[-4000:]
    assert run["jobName"] == "codemem_index" and _tags(run)["codemem/buckets"] == edited_bucket
    sensor_runs = [r for r in _graphql(port, RUNS)["runsOrError"]["results"] if _tags(r).get("codemem/trigger") == "file_change_sensor"]
    assert len(sensor_runs) == 1, "one edit is one run"
    # the run recorded the edited file's bucket, with that file in its record, and no other bucket
    from dagster import DagsterEventType, DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(indexed_repo / ".codemem" / "dagster"))) as instance:
        records = [e.dagster_event for e in instance.all_logs(run["runId"], of_type=DagsterEventType.ASSET_MATERIALIZATION)]
    loaded = [e for e in records if e.asset_key.to_user_string() == "graph_loaded"]
    assert [e.partition for e in loaded] == [edited_bucket], [e.partition for e in loaded]
    assert "client/session.py" in loaded[0].event_specific_data.materialization.metadata["indexed_versions"].value

    # the run `codemem index` recorded names the code location, and the UI re-executes it there
    # (issue 24, item 5): the re-executed run indexes what changed since (nothing) and succeeds
    [indexed] = [r for r in _graphql(port, RUNS)["runsOrError"]["results"] if _tags(r).get("codemem/trigger") == "codemem index"]
    assert indexed["repositoryOrigin"] == {"repositoryLocationName": "codemem", "repositoryName": "__repository__"}
    launched = _graphql(port, REEXECUTE % indexed["runId"])["launchPipelineReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched

    def rerun() -> dict[str, Any] | None:
        for run in _graphql(port, RUNS)["runsOrError"]["results"]:
            if run["runId"] == launched["run"]["runId"] and run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                return run
        return None

    again = _wait_for("finished re-execution of the codemem index run", rerun, 180, ui, log)
    assert again["status"] == "SUCCESS", log.read_text()[-4000:]
    assert again["jobName"] == "codemem_index" and _tags(again)["dagster/parent_run_id"] == indexed["runId"]

    # SIGTERM stops the webserver, the daemon and the code server; nothing is left listening
    ui.send_signal(signal.SIGTERM)
    assert ui.wait(timeout=90) == 0, log.read_text()[-4000:]
    for pgid in groups:
        assert not _group_alive(pgid), f"process group {pgid} outlived codemem ui"
    assert _dagster_groups(indexed_repo) == []
    assert not _listening(port)
    assert not (state_dir / "owner.json").exists()

    from resources.manifest import Manifest

    manifest = Manifest(state_dir / "index.db")
    try:
        import hashlib

        assert manifest.file("client/session.py").content_hash == hashlib.sha256(session.read_bytes()).hexdigest()
    finally:
        manifest.close()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium to render the Dagster UI in (apt-get install chromium)")
def test_the_partition_page_in_a_browser_shows_the_buckets_own_file(
    indexed_repo: Path, ui_process: tuple[subprocess.Popen[bytes], int, Path], tmp_path: Path
) -> None:
    """The page a person opens for one bucket of graph_loaded, rendered by headless Chromium, lists
    that bucket's file in its indexed versions, and not the other bucket's (issue 24, item 1)."""
    from bench.ui_screenshot import DevTools, stop_group

    ui, port, log = ui_process
    _wait_for("answer on /server_info", lambda: DIRECT.open(f"http://127.0.0.1:{port}/server_info", timeout=2).status == 200,
              STARTUP_TIMEOUT_S, ui, log)
    own, other = "client/session.py", "client/__init__.py"
    assert bucket_of(own) != bucket_of(other)
    debug_port = _free_port()
    chrome = subprocess.Popen(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}",
         "--window-size=1600,1000", f"--remote-debugging-port={debug_port}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        tools = DevTools(debug_port)
        try:
            tools.call("Page.navigate", url=f"http://127.0.0.1:{port}/assets/graph_loaded?view=partitions&partition={bucket_of(own)}")

            def page_text() -> str | None:
                text = tools.evaluate("document.body && document.body.innerText")
                return text if text and own in text else None

            text = _wait_for(f"{own} on the partition page", page_text, 90, ui, log)
        finally:
            tools.close()
    finally:
        stop_group(chrome, timeout=10)
    assert "indexed_versions" in text and bucket_of(own) in text
    assert other not in text


def test_ui_refuses_a_remote_host_without_allow_remote(tmp_path: Path) -> None:
    from query_server import cli

    result = CliRunner().invoke(cli.main, ["ui", "--project", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "no authentication" in result.output and "--allow-remote" in result.output
    assert not (tmp_path / ".codemem").exists()


def test_ui_refuses_a_port_in_use(tmp_path: Path) -> None:
    from query_server import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli.main, ["ui", "--project", str(tmp_path), "--port", str(port)])
    assert result.exit_code == 2 and "in use" in result.output


def test_ui_workspace_names_the_location_and_keeps_the_project_off_sys_path(tmp_path: Path) -> None:
    import yaml

    from query_server.cli.ui import ui_url, write_workspace

    workspace = yaml.safe_load(write_workspace(tmp_path).read_text())
    module = workspace["load_from"][0]["python_module"]
    assert module["module_name"] == "query_server.dagster_location" and module["attribute"] == "defs"
    assert module["location_name"] == "codemem"
    assert Path(module["working_directory"]) == REPO_ROOT
    assert ui_url("127.0.0.1", 3000) == "http://127.0.0.1:3000" and ui_url("::1", 3000) == "http://[::1]:3000"

"""The `codemem` query commands on a real indexed project: rich tables, exact --json, exit codes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from query_server import cli
from query_server.cli import common
from query_server.ownership import OWNER_FILE, ProjectHandle
from resources.settings import Settings
from tests.conftest import FIXTURE_REPOS

# merge_settings of tests/fixtures/repos/python/client/session.py, copied as someone might paste it
COPIED_FUNCTION = '''def merge_settings(request_setting, session_setting):
    """Merge two settings dicts.

    Request values win.
    """
    if session_setting is None:
        return request_setting
    merged = dict(session_setting)
    merged.update(request_setting)
    return merged
'''
UNRELATED = "def parse_xml(doc):\n    return etree.fromstring(doc)\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python fixture repository, indexed once (vectors included) through `codemem index`."""
    root = tmp_path_factory.mktemp("cli") / "python"
    shutil.copytree(FIXTURE_REPOS / "python", root)
    indexed = CliRunner().invoke(cli.main, ["index", str(root), "--json"])
    assert indexed.exit_code == 0, indexed.output
    report = json.loads(indexed.stdout)
    assert report["files_indexed"] == 2 and report["dense_done"] == report["dense_total"] > 0
    return root


@pytest.fixture(autouse=True)
def wide_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as on a wide terminal, so cells are not folded in the middle of a name."""
    monkeypatch.setattr(common, "out", Console(width=200))


@pytest.fixture
def run(project: Path) -> Iterator:
    """Invoke `codemem ARGS --project PROJECT`; every invocation must give the stores back."""

    def invoke(*args: str, stdin: str | None = None) -> Result:
        result = CliRunner().invoke(cli.main, [*args, "--project", str(project)], input=stdin)
        assert not (project / ".codemem" / OWNER_FILE).exists(), "the command left the stores open"
        assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output, result.output
        return result

    yield invoke


def test_search_table_and_json(run) -> None:
    found = run("search", "merge two settings dicts", "--json")
    assert found.exit_code == 0, found.output
    data = json.loads(found.stdout)
    assert data["results"][0]["qualified_name"] == "client.session.merge_settings"
    assert data["search_mode"] == "hybrid" and data["dense_coverage"] == 1.0
    table = run("search", "merge two settings dicts", "--limit", "2")
    assert table.exit_code == 0
    assert "client.session.merge_settings" in table.stdout and "client/session.py:20" in table.stdout
    assert "┃ score" in table.stdout
    too_many = run("search", "x", "--limit", "1000")
    assert too_many.exit_code == 2 and "limit: Input should be less than or equal to 100" in too_many.stderr


def test_query_prints_the_returned_columns(run) -> None:
    table = run("query", "MATCH (f:Function) RETURN f.name ORDER BY f.name LIMIT 3")
    assert table.exit_code == 0, table.output
    names = [row["f.name"] for row in json.loads(run("query", "MATCH (f:Function) RETURN f.name ORDER BY f.name LIMIT 3", "--json").stdout)["results"]]
    assert len(names) == 3
    assert "f.name" in table.stdout and all(name in table.stdout for name in names) and "3 row(s)" in table.stdout
    by_name = run("query", "MATCH (f:Function {name: $name}) WHERE f.start_line > $after RETURN f.qualified_name AS q",
                  "--param", "name=merge_settings", "--param", "after=1", "--json")
    assert json.loads(by_name.stdout) == {"columns": ["q"], "results": [{"q": "client.session.merge_settings"}], "truncated": False}
    capped = json.loads(run("query", "MATCH (f:Function) RETURN f.name", "--limit", "2", "--json").stdout)
    assert len(capped["results"]) == 2 and capped["truncated"] is True
    assert "no rows" in run("query", "MATCH (f:Function {name: 'nope'}) RETURN f").stdout


def test_query_refuses_writes_and_bad_input_with_exit_2(run) -> None:
    write = run("query", "CREATE (n) RETURN n")
    assert write.exit_code == 2 and "read-only" in write.stderr and "refused" in write.stderr
    assert write.stdout == ""
    syntax = run("query", "MATC (n) RETURN n")
    assert syntax.exit_code == 2 and "Cypher" in syntax.stderr
    bad_param = run("query", "MATCH (n) RETURN n", "--param", "no-equals-sign")
    assert bad_param.exit_code == 2 and "expected key=value" in bad_param.stderr


def test_graph_is_a_hidden_alias_of_query(run) -> None:
    rows = run("graph", "MATCH (f:Function {name: 'gather'}) RETURN f.qualified_name AS q", "--json")
    assert rows.exit_code == 0 and json.loads(rows.stdout)["results"] == [{"q": "client.session.gather"}]
    listing = CliRunner().invoke(cli.main, ["--help"]).output
    assert "\n  query " in listing and "\n  graph " not in listing


def test_params_are_json_when_they_parse() -> None:
    assert common.parse_params(("a=1", "b=x", "c=[1, 2]", "d=", "e=a=b", 'f="1"')) == {
        "a": 1, "b": "x", "c": [1, 2], "d": "", "e": "a=b", "f": "1",
    }


def test_duplicates_from_a_file_stdin_or_code(run, tmp_path: Path) -> None:
    pasted = tmp_path / "new_code.py"
    pasted.write_text(COPIED_FUNCTION, encoding="utf-8")
    table = run("duplicates", str(pasted))
    assert table.exit_code == 0, table.output
    assert "client/session.py:20" in table.stdout and "def merge_settings(request_setting, session_setting)" in table.stdout
    assert "reuse it" in table.stdout and "similarity" in table.stdout
    from_stdin = run("duplicates", "-", "--json", stdin=COPIED_FUNCTION)
    data = json.loads(from_stdin.stdout)
    assert data["threshold"] == 0.85 and data["duplicate_count"] >= 1
    assert data["duplicates"][0]["qualified_name"] == "client.session.merge_settings" and data["duplicates"][0]["similarity"] >= 0.95
    none = run("duplicates", "--code", UNRELATED)
    assert none.exit_code == 0 and "no existing function above the threshold (0.85)" in none.stdout
    strict = run("duplicates", "--code", UNRELATED, "--threshold", "0.95")
    assert "no existing function above the threshold (0.95)" in strict.stdout


def test_duplicates_bad_input_exits_2(run) -> None:
    low = run("duplicates", "-", "--threshold", "0.5", stdin=COPIED_FUNCTION)
    assert low.exit_code == 2 and "Threshold must be between 0.70 and 0.95" in low.stderr
    nothing = run("duplicates")
    assert nothing.exit_code == 2 and "exactly one of them" in nothing.stderr
    both = run("duplicates", "-", "--code", "x", stdin="y")
    assert both.exit_code == 2
    cobol = run("duplicates", "--code", "x", "--language", "cobol")
    assert cobol.exit_code == 2 and "Unknown language" in cobol.stderr


def test_related_and_symbol(run) -> None:
    callers = run("related", "client.session.merge_settings", "--type", "CALLS", "--direction", "incoming")
    assert callers.exit_code == 0, callers.output
    assert "client.session.Session.request" in callers.stdout and "client/session.py:50" in callers.stdout
    data = json.loads(run("related", "client.session.merge_settings", "--type", "CALLS", "--direction", "incoming", "--json").stdout)
    assert [(r["qualified_name"], r["distance"], r["via"]) for r in data["results"]] == [("client.session.Session.request", 1, ["CALLS"])]
    missing = run("related", "no.such.symbol")
    assert missing.exit_code == 2 and "Entity not found" in missing.stderr
    symbol = run("symbol", "client.session.merge_settings", "--code")
    assert symbol.exit_code == 0
    assert "callers (1)" in symbol.stdout and "no callees in the index" in symbol.stdout
    assert "    merged.update(request_setting)\n    return merged" in symbol.stdout
    as_json = json.loads(run("symbol", "client.session.merge_settings", "--json").stdout)
    assert as_json["symbol"]["signature"] == "def merge_settings(request_setting, session_setting)" and as_json["code"] is None


def test_status_and_health(run, project: Path) -> None:
    status = run("status", "--json")
    assert status.exit_code == 0
    handle = ProjectHandle(Settings(project_root=project))  # the CLI gave the stores back: this one owns them
    try:
        assert handle.is_owner
        assert json.loads(status.stdout) == handle.call("index_status").model_dump(mode="json")
    finally:
        handle.close()
    table = run("status").stdout
    assert "symbols" in table and "dense vectors" in table and "hybrid" in table
    health = run("health", "--json")
    assert health.exit_code == 0
    body = json.loads(health.stdout)
    assert body["status"] == "ok" and set(body["components"]) == {"vector_store", "graph_store", "embedder", "index"}
    table = run("health").stdout
    assert "codemem health: ok" in table and "vector_store" in table and "graph_store" in table


def test_other_failures_exit_1_without_a_traceback(run, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, method, *args, **kwargs):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(ProjectHandle, "call", broken)
    failed = run("status")
    assert failed.exit_code == 1 and "index_status failed: RuntimeError: the disk is on fire" in failed.stderr
    missing = CliRunner().invoke(cli.main, ["status", "--project", "/no/such/dir"])
    assert missing.exit_code == 2 and "path does not exist" in missing.stderr


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("CODEMEM_GRAPH_QUERY_TIMEOUT_S", "-1", "greater than 0"),
    ("CODEMEM_DAGSTER_RECORD_WAIT_S", "soon", "valid number"),
])
def test_a_setting_that_is_not_valid_is_named_with_what_to_do(
    variable: str, value: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad value of a settings variable: exit 2 and one line naming the variable, its value and
    what is wrong, not pydantic's traceback."""
    monkeypatch.setenv(variable, value)
    (tmp_path / "app.py").write_text("def f():\n    return 1\n")
    failed = CliRunner().invoke(cli.main, ["index", str(tmp_path), "--plain"])
    assert failed.exit_code == 2, failed.output
    assert f"{variable}={value}: " in failed.stderr and says in failed.stderr and "unset it" in failed.stderr
    assert "Traceback" not in failed.stderr and not (tmp_path / ".codemem").exists()


def test_help_lists_the_hook_command_and_it_runs_the_hook() -> None:
    runner = CliRunner()
    listed = runner.invoke(cli.main, ["--help"])
    assert listed.exit_code == 0 and "hook" in listed.output and "Claude Code hook" in listed.output
    usage = runner.invoke(cli.main, ["hook", "--help"])  # the hook module's own usage, not click's
    assert usage.exit_code == 0 and "SessionStart" in usage.output
    unknown = runner.invoke(cli.main, ["hook", "NoSuchEvent"], input="{}")
    assert unknown.exit_code == 0 and unknown.output == ""  # an unknown event is ignored quietly

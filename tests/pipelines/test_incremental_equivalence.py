"""Incremental indexing equals a clean rebuild (issue 25, item 5).

A property test: any sequence of file adds, edits (imports, calls, functions, classes changed,
or content no longer indexable), deletes and interrupted runs, each followed by an index run, and then one complete run, leaves a
graph and a vector index equal to those a clean index of the final tree builds into a fresh state
directory: the same node ids per label, the same (source, target) pairs per relationship type, the
same point ids with the same payloads and dense vectors.

Everything is real: files on disk in ``tmp_path``, the embedded FalkorDB, qdrant-edge, the
manifest and (in the Dagster and SIGKILL tests) the local embedding model. An interrupted run is the run that reaches one of the
indexer's fault points (``resources.faults``) and is abandoned there: in-process, the point raises
``FaultInjected`` (no handler on the way can catch it, as none can catch a kill) and the service
is closed and opened again; the real SIGKILL of a ``codemem index`` process at the same points is
``test_sigkilled_cli_runs_converge``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st

from resources.faults import FaultInjected, raising_at
from tests.conftest import write_files
from tests.pipelines.dagster.test_dagster import _snapshot
from tests.reliability.children import CODEMEM, REPO_ROOT, child_env
from tests.reliability.graph_servers import stop_graph_servers

FILES = ("pkg/m0.py", "pkg/m1.py", "pkg/m2.py", "pkg/m3.py", "tools/util.py")
IMPORTS = (
    "import os", "import json", "import getpass", "import html", "import mmap",  # external modules
    "from pkg.m0 import alpha", "from pkg.m1 import beta", "import pkg.m2", "from . import m3",  # local while they exist
    "from tools.util import gamma",
)
FUNCTIONS = ("alpha", "beta", "gamma", "delta")  # shared names: unique, ambiguous or absent as files change
CLASSES = ("Base", "Child")  # Child extends Base wherever Base is
FAULT_POINTS = ("index:before_graph", "index:before_manifest", "index:deleting", "index:before_resolve", "index:resolving")

file_specs = st.fixed_dictionaries({
    "imports": st.lists(st.sampled_from(IMPORTS), unique=True, max_size=3),
    "functions": st.dictionaries(st.sampled_from(FUNCTIONS), st.lists(st.sampled_from(FUNCTIONS), unique=True, max_size=2), max_size=3),
    "classes": st.lists(st.sampled_from(CLASSES), unique=True, max_size=2),
})
file_ops = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), file_specs),  # an add or an edit
    st.tuples(st.just("delete"), st.sampled_from(FILES), st.none()),
    st.tuples(st.just("binary"), st.sampled_from(FILES), st.none()),  # no longer indexable: skipped
)
steps = st.tuples(st.lists(file_ops, min_size=1, max_size=3), st.sampled_from((None, None, *FAULT_POINTS)))
"""A step: some file changes, then an index run (complete, or interrupted at a fault point)."""

C_FILES = ("src/a.c", "src/b.c", "lib/c.c", "src/x.h", "inc/x.h", "inc/y.h")
"""Two headers named x.h: an include of "x.h" names the one beside the includer, else the nearest."""
C_INCLUDES = ('#include "x.h"', '#include "y.h"', '#include "../inc/x.h"', "#include <x.h>", "#include <stdio.h>")
c_file_specs = st.fixed_dictionaries({
    "imports": st.lists(st.sampled_from(C_INCLUDES), unique=True, max_size=2),
    "functions": st.dictionaries(st.sampled_from(FUNCTIONS), st.lists(st.sampled_from(FUNCTIONS), unique=True, max_size=2), max_size=3),
    "classes": st.just([]),
})
c_file_ops = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(C_FILES), c_file_specs),
    st.tuples(st.just("delete"), st.sampled_from(C_FILES), st.none()),
)
c_steps = st.tuples(st.lists(c_file_ops, min_size=1, max_size=3), st.sampled_from((None, None, *FAULT_POINTS)))
"""C: headers declare the functions of a spec, sources define them (a call prefers the definition
whose file includes the declaring header: ``pipelines.c_family``)."""


def spec(imports: tuple[str, ...] = (), classes: tuple[str, ...] = (), **functions: list[str]) -> dict[str, Any]:
    """A file spec written out: its imports, functions (name: callees) and classes."""
    return {"imports": list(imports), "functions": functions, "classes": list(classes)}


def render(written: dict[str, Any], path: str = "m.py") -> str:
    """The source of a file spec: Python, or C for a ``.c`` or ``.h`` path (prototypes in a header)."""
    if path.endswith((".c", ".h")):
        lines = list(written["imports"]) + [""]
        for name, callees in written["functions"].items():
            body = " + ".join(f"{c}()" for c in callees) or "0"
            lines += [f"int {name}(void);" if path.endswith(".h") else f"int {name}(void) {{ return {body}; }}"]
        return "\n".join(lines) + "\n"
    lines = list(written["imports"]) + [""]
    for name, callees in written["functions"].items():
        body = " + ".join(f"{c}()" for c in callees) or "0"
        lines += [f"def {name}():", f"    return {body}", ""]
    for cls in written["classes"]:
        lines += [f"class {cls}{'(Base)' if cls == 'Child' else ''}:", "    def run(self):", "        return self.run()", ""]
    return "\n".join(lines)


def apply(root: Path, ops: list[tuple[str, str, dict[str, Any] | None]]) -> None:
    """Make the changes on disk."""
    for kind, path, spec in ops:
        if kind == "write":
            write_files(root, {path: render(spec, path)})  # type: ignore[arg-type]
        elif kind == "binary":
            write_files(root, {path: b"\x00\x01" * 64})
        else:
            (root / path).unlink(missing_ok=True)


CODE_EDGES = (
    "MATCH (a)-[r]->(b) WHERE (a:File OR a:Module OR a:Class OR a:Function) AND (b:File OR b:Module OR b:Class OR b:Function) "
    "RETURN a.id AS a, type(r) AS t, b.id AS b, properties(r) AS props ORDER BY a, t, b"
)


def code_index(svc: Any) -> dict[str, Any]:
    """The code graph and vector index of a service: ``_snapshot`` (node ids with labels, point
    ids, payloads, dense vectors, manifest rows) with the relationships between code nodes only
    and their properties (the design layer's memory nodes get fresh ids per project), plus the graph's counts per label
    and relationship type, and whether anything is left for a later run."""
    from resources.graph.cypher import EDGE_TYPES, NODE_LABELS

    snap = _snapshot(svc)
    _, edges, truncated = svc.graph.read_query(CODE_EDGES, {}, 100_000)
    assert not truncated
    for edge in edges:  # a call's line among them
        edge["props"] = {k: v for k, v in dict(edge["props"]).items() if k != "created_at"}
    snap["graph_edges"] = edges
    counts = svc.graph.counts()
    snap["counts"] = {k: counts[k] for k in (*NODE_LABELS, *EDGE_TYPES)}
    snap["dirty"] = sorted(svc.manifest.dirty()) + sorted(f"rewritten: {path}" for path in svc.manifest.rewritten())
    return snap


def open_service(root: Path, dense: bool = True) -> Any:
    """A service over ``root`` (state in ``root/.codemem``), with or without dense vectors."""
    from query_server.service import CodeMemService
    from resources.settings import Settings

    return CodeMemService(Settings(project_root=root, dense_embeddings=dense))


@contextmanager
def opened(root: Path, dense: bool = True) -> Iterator[Any]:
    """``open_service``, closed at the end."""
    svc = open_service(root, dense)
    try:
        yield svc
    finally:
        svc.close()


def plain_index(svc: Any, dense: bool) -> dict[str, Any]:
    """One run of the plain indexer function (what ``codemem index --plain`` runs, without the
    design layer after it) over a service's stores, dense vectors filled before it returns."""
    from pipelines.indexer import index_project

    return index_project(svc.ctx, embed=dense).as_dict()


class Incremental:
    """``plain_index`` runs in this process over one project: one service, closed and opened
    again after an interrupted run, as the process a kill ends would be started again."""

    def __init__(self, root: Path, dense: bool = True) -> None:
        """Open the project's service."""
        self.root, self.dense = root, dense
        self.svc = open_service(root, dense)

    def run(self, fault: str | None = None) -> dict[str, Any] | None:
        """One run; with ``fault``, abandoned at that fault point (None when it was)."""
        with raising_at(fault) if fault else nullcontext():
            try:
                return plain_index(self.svc, self.dense)
            except FaultInjected:
                self.svc.close()
                self.svc = open_service(self.root, self.dense)
                return None

    def close(self) -> None:
        """Close the service."""
        self.svc.close()


def clean_index(root: Path, scratch: Path, *, dense: bool = True) -> dict[str, Any]:
    """What a clean index of the tree at ``root`` holds (a copy indexed into a fresh state dir)."""
    fresh = scratch / "clean"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(root, fresh, ignore=shutil.ignore_patterns(".codemem"))
    with opened(fresh, dense) as svc:
        report = plain_index(svc, dense)
        assert report["failed"] == [], report["failed"]
        return code_index(svc)


def assert_equal_indexes(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal, with the differing parts named (the first assertion that fails says which)."""
    assert got.keys() == want.keys()
    for key in ("counts", "nodes", "graph_edges", "ids", "payloads", "files", "symbols", "edges", "dirty"):
        assert got[key] == want[key], f"{key} differ"
    # dense vectors: the same points have one, equal up to the model's batch-size noise (~3e-8)
    assert got["dense"].keys() == want["dense"].keys(), "points with a dense vector differ"
    for point, vector in got["dense"].items():
        assert max(abs(a - b) for a, b in zip(vector, want["dense"][point], strict=True)) < 1e-4, f"dense vector of {point}"


SLOW_CASES = settings(deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
"""Every property test here: real stores, seconds a case."""
QUICK = settings(SLOW_CASES, derandomize=True, phases=(Phase.explicit, Phase.generate))  # shrinking would cost minutes; cases are small
"""The default run's: the same cases every run."""
SOAK = settings(SLOW_CASES, max_examples=150, derandomize=False)
"""The soak's (``-m soak``): new cases every run."""


def run_steps(tmp_path: Path, initial: dict[str, dict[str, Any]], plan: list[Any]) -> None:
    """Index ``initial``, run the steps, finish with a complete run, and compare with a clean index.

    Sparse vectors only (loading the embedding model per opened service would cost ~2 s): dense
    vectors under changes and kills are the Dagster and SIGKILL tests' part."""
    note(f"initial files: {initial!r}")
    note(f"steps (changes, fault point): {plan!r}")
    base = Path(tempfile.mkdtemp(dir=tmp_path))  # hypothesis runs every example in the same tmp_path
    root = base / "repo"
    root.mkdir()
    apply(root, [("write", path, spec) for path, spec in initial.items()])
    project = Incremental(root, dense=False)
    try:
        project.run()
        for ops, fault in plan:
            apply(root, ops)
            project.run(fault)
        final = project.run()
        assert final is not None and final["failed"] == [], final
        got = code_index(project.svc)
    finally:
        project.close()
    try:
        assert_equal_indexes(got, clean_index(root, base, dense=False))
    finally:
        stop_graph_servers(base)
        shutil.rmtree(base, ignore_errors=True)


@settings(QUICK, max_examples=15)
@given(initial=st.dictionaries(st.sampled_from(FILES), file_specs, min_size=2), plan=st.lists(steps, min_size=1, max_size=3))
# found by the soak: a resolution killed after it changed the graph, then the change undone by the
# next run's tree (an edge added, then ambiguous; an edge removed, then unique again) ...
@example(initial={"pkg/m0.py": spec(alpha=["beta"]), "pkg/m1.py": spec(gamma=[])},
         plan=[([("write", "pkg/m2.py", spec(beta=[]))], "index:resolving"), ([("write", "pkg/m3.py", spec(beta=[]))], None)])
@example(initial={"pkg/m0.py": spec(alpha=["beta"]), "pkg/m1.py": spec(beta=[])},
         plan=[([("write", "pkg/m2.py", spec(beta=[]))], "index:resolving"), ([("delete", "pkg/m2.py", None)], None)])
# a deletion killed after the points went, then the file back with the content it had
@example(initial={"pkg/m0.py": spec(alpha=[]), "pkg/m1.py": spec(beta=["alpha"])},
         plan=[([("delete", "pkg/m1.py", None)], "index:deleting"), ([("write", "pkg/m1.py", spec(beta=["alpha"]))], None)])
# an indexed file that becomes binary (skipped) leaves the index, as a clean index never has it
@example(initial={"pkg/m0.py": spec(alpha=[]), "pkg/m1.py": spec(beta=["alpha"])}, plan=[([("binary", "pkg/m0.py", None)], None)])
def test_any_sequence_of_changes_and_kills_ends_equal_to_a_clean_index(
    tmp_path: Path, initial: dict[str, dict[str, Any]], plan: list[Any]
) -> None:
    run_steps(tmp_path, initial, plan)


@settings(QUICK, max_examples=10)
@given(initial=st.dictionaries(st.sampled_from(C_FILES), c_file_specs, min_size=2), plan=st.lists(c_steps, min_size=1, max_size=3))
# a second x.h takes the include of the file beside it, then goes again
@example(initial={"inc/x.h": spec(alpha=[]), "src/a.c": spec(('#include "x.h"',), alpha=[]), "lib/c.c": spec(alpha=[]),
                  "src/b.c": spec(('#include "../inc/x.h"',), beta=["alpha"])},
         plan=[([("write", "src/x.h", spec(gamma=[]))], None), ([("delete", "src/x.h", None)], None)])
def test_c_sequences_of_changes_and_kills_end_equal_to_a_clean_index(
    tmp_path: Path, initial: dict[str, dict[str, Any]], plan: list[Any]
) -> None:
    run_steps(tmp_path, initial, plan)


@pytest.mark.soak
@settings(SOAK)
@given(initial=st.dictionaries(st.sampled_from(C_FILES), c_file_specs, min_size=1), plan=st.lists(c_steps, min_size=1, max_size=8))
def test_soak_c_sequences_of_changes_and_kills_end_equal_to_a_clean_index(
    tmp_path: Path, initial: dict[str, dict[str, Any]], plan: list[Any]
) -> None:
    run_steps(tmp_path, initial, plan)


@pytest.mark.soak
@settings(SOAK)
@given(initial=st.dictionaries(st.sampled_from(FILES), file_specs, min_size=1), plan=st.lists(steps, min_size=1, max_size=8))
def test_soak_any_sequence_of_changes_and_kills_ends_equal_to_a_clean_index(
    tmp_path: Path, initial: dict[str, dict[str, Any]], plan: list[Any]
) -> None:
    run_steps(tmp_path, initial, plan)


def test_a_deleted_or_edited_file_takes_the_modules_only_it_imported(tmp_path: Path) -> None:
    """The issue's probe, small: modules imported by one file only leave the graph with the
    import (file deleted, or edited to stop importing them); shared ones stay."""
    root = tmp_path / "repo"
    write_files(root, {
        "a.py": "import os\nimport getpass\nimport html\n\ndef a():\n    return 1\n",
        "b.py": "import os\nimport mmap\n\ndef b():\n    return 2\n",
        "c.py": "import json\n\ndef c():\n    return 3\n",
    })
    project = Incremental(root)
    try:
        project.run()
        modules = "MATCH (m:Module) RETURN m.name AS name"
        assert {r["name"] for r in project.svc.graph.read_query(modules)[1]} == {"os", "getpass", "html", "mmap", "json"}
        (root / "a.py").unlink()
        write_files(root, {"c.py": "def c():\n    return 3\n"})
        project.run()
        assert {r["name"] for r in project.svc.graph.read_query(modules)[1]} == {"os", "mmap"}
        got = code_index(project.svc)
    finally:
        project.close()
    assert_equal_indexes(got, clean_index(root, tmp_path))


def test_edges_written_in_chunks_end_as_written_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolved edges go to the graph in chunks (``EDGE_WRITE_CHUNK``, bounded memory on large
    trees): with chunks of 2, a first index and an edit that removes and adds edges end equal to a
    clean index written in one chunk."""
    import pipelines.index_writes as index_writes

    root = tmp_path / "repo"
    apply(root, [("write", path, spec((imp, "import os"), ("Base", "Child") if i == 2 else (), **{name: ["alpha", "beta"]}))
                 for i, (path, imp, name) in enumerate(zip(FILES, IMPORTS[5:], FUNCTIONS * 2, strict=False))])
    monkeypatch.setattr(index_writes, "EDGE_WRITE_CHUNK", 2)
    project = Incremental(root, dense=False)
    try:
        project.run()
        apply(root, [("write", FILES[1], spec(("import json",), beta=["gamma"]))])
        project.run()
        got = code_index(project.svc)
    finally:
        project.close()
    monkeypatch.undo()
    assert len(got["graph_edges"]) > 10
    assert_equal_indexes(got, clean_index(root, tmp_path, dense=False))


def test_the_dagster_run_ends_equal_to_a_clean_index(tmp_path: Path) -> None:
    """The default ``codemem index`` path (the Dagster asset run) over adds, an edit that drops an
    import and a call, a delete and a file turned binary, against a clean index of the final tree."""
    from dagster import DagsterInstance

    from pipelines.dagster.run import materialize_index
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    root = tmp_path / "repo"
    apply(root, [("write", "pkg/m0.py", spec(("import getpass", "from pkg.m1 import beta"), ("Base",), alpha=["beta"])),
                 ("write", "pkg/m1.py", spec(("import html", "import os"), ("Child",), beta=[])),
                 ("write", "tools/util.py", spec(("import mmap", "import os"), gamma=["alpha"]))])
    changes = [
        [("write", "pkg/m0.py", spec(("import json",), ("Base",), alpha=[]))],
        [("delete", "tools/util.py", None), ("binary", "pkg/m1.py", None),
         ("write", "pkg/m2.py", spec(("import pkg.m2", "from tools.util import gamma"), delta=["gamma"]))],
    ]
    with DagsterInstance.ephemeral() as instance:
        for ops in [[], *changes]:
            apply(root, ops)
            handle = ProjectHandle(Settings(project_root=root))
            try:
                assert handle.is_owner
                report = materialize_index(handle.backend.owned_stores(), instance=instance)
                assert report.ok, report.as_dict()
                got = code_index(handle.backend)
            finally:
                handle.close()
    assert_equal_indexes(got, clean_index(root, tmp_path))


def run_codemem(args: list[str], fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """``codemem ARGS`` as a child, to its end (exit 0) or, with ``fault``, to its SIGKILL there."""
    done = subprocess.run([*CODEMEM, *args], capture_output=True, text=True, env=child_env(fault), cwd=REPO_ROOT, timeout=300)
    expected = -9 if fault else 0
    assert done.returncode == expected, (done.returncode, done.stderr[-2000:])
    return done


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "plain"),
    [pytest.param("index:before_manifest", True, id="plain-before-manifest"),
     pytest.param("index:before_resolve", False, id="dagster-before-resolve"),
     pytest.param("index:before_graph", False, id="dagster-before-graph", marks=pytest.mark.soak),
     pytest.param("index:deleting", True, id="plain-deleting", marks=pytest.mark.soak),
     pytest.param("index:resolving", True, id="plain-resolving", marks=pytest.mark.soak)],
)
def test_sigkilled_cli_runs_converge(fault: str, plain: bool, tmp_path: Path) -> None:
    """``codemem index`` (``--plain`` or the Dagster run) SIGKILLed at a fault point after a
    delete and an edit, the tree changed again while nothing runs, then one complete run: the
    stores equal a clean index of the final tree."""
    root = tmp_path / "repo"
    apply(root, [("write", path, spec((imp, "import os"), ("Base",) if i else (), **{name: ["alpha"]}))
                 for i, (path, imp, name) in enumerate(zip(FILES, IMPORTS[1:], FUNCTIONS * 2, strict=False))])
    args = ["index", str(root), "--json", *(["--plain"] if plain else [])]
    try:
        run_codemem(args)
        # the killed run writes points of a function the manifest never records (delta), in a file
        # deleted before the next run
        apply(root, [("delete", FILES[0], None), ("write", FILES[1], spec(("import json",), delta=[]))])
        run_codemem(args, fault)
        stop_graph_servers(root)  # the daemonized graph server outlives its owner; a restart finds the AOF
        apply(root, [("delete", FILES[1], None), ("write", FILES[2], spec(("import html",)))])
        run_codemem(args)
        with opened(root) as svc:
            got = code_index(svc)
        assert_equal_indexes(got, clean_index(root, tmp_path))
    finally:
        stop_graph_servers(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "args"),
    [pytest.param("index:before_resolve", ["--plain"], id="plain-after-manifest"),
     pytest.param("index:before_resolve", [], id="dagster-after-manifest"),
     pytest.param("embed:after_mark", ["--plain"], id="plain-after-dense-marked")],
)
def test_points_the_manifest_records_survive_a_kill(fault: str, args: list[str], tmp_path: Path) -> None:
    """The code collection keeps no write-ahead log (``CODE_WRITE_AHEAD_LOG``): ``codemem index``
    SIGKILLed once the manifest has recorded an edited file's points and a deleted file's absence
    (or a batch of dense vectors), the tree left as it is, then one complete run: the stores equal
    a clean index. Without the flush before each manifest commit the points were lost while the
    manifest said they were there, and the next run, finding the files unchanged, never wrote them
    again."""
    root = tmp_path / "repo"
    apply(root, [("write", path, spec((imp,), **{name: ["alpha"]}))
                 for path, imp, name in zip(FILES, IMPORTS, FUNCTIONS * 2, strict=False)])
    command = ["index", str(root), "--json", *args]
    try:
        if fault.startswith("index:"):  # a first complete run; the killed one then writes an edit, kept afterwards
            run_codemem(command)
            apply(root, [("write", FILES[1], spec(("import json",), beta=["alpha"], epsilon=[])), ("delete", FILES[3], None)])
        run_codemem(command, fault)
        stop_graph_servers(root)
        run_codemem(command)
        with opened(root) as svc:
            got = code_index(svc)
        assert_equal_indexes(got, clean_index(root, tmp_path))
    finally:
        stop_graph_servers(tmp_path)

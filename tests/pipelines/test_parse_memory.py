"""The index run's memory budget (issue 21, item 5: ``CODEMEM_INDEX_MEMORY_MB``): each parse
worker is held to its share, so a file whose parse needs more is skipped with the reason and the
run goes on, in-process runs and worker pools alike (real parsers, real worker processes, a real
source that takes ~600 MB inside tree-sitter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipelines.discovery import SourceFile
from pipelines.index_prepare import (
    MIN_WORKER_MEMORY_MB,
    PARALLEL_THRESHOLD,
    ParseLimits,
    _prepare_all,
    parse_workers,
    skip_records,
    worker_memory_mb,
)
from query_server import cli
from resources.manifest import MANIFEST_FILE, Manifest
from resources.settings import Settings
from tests.conftest import write_files

pytestmark = pytest.mark.slow

HUNGRY = "X = [" + "1," * 1_500_000 + "]\n"
"""3 MB on one line: tree-sitter holds ~600 MB of nodes while it parses it (~5 s unbounded)."""


def _source(root: Path, rel: str) -> SourceFile:
    path = root / rel
    stat = path.stat()
    return SourceFile(path=rel, absolute_path=path, size=stat.st_size, mtime_ns=stat.st_mtime_ns, language="python")


def test_the_budget_is_shared_among_the_parse_workers() -> None:
    workers = parse_workers()
    assert worker_memory_mb(12_000) == 12_000 // (workers + 2)
    assert worker_memory_mb(100) == MIN_WORKER_MEMORY_MB  # never below what a worker needs
    assert worker_memory_mb(0) >= MIN_WORKER_MEMORY_MB  # 0: half the machine's memory
    # skip records follow a budget the user set, not the default one (a manifest shared by machines)
    assert ParseLimits(10.0, 256, budget_set=True).tag != ParseLimits(10.0, 512, budget_set=True).tag
    assert ParseLimits(10.0, 256).tag == ParseLimits(10.0, 512).tag == ParseLimits(10.0).tag


@pytest.mark.parametrize("recycled", [False, True], ids=["one-pool", "after-a-recycle"])
def test_a_worker_pool_loses_one_file_to_the_budget_and_prepares_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recycled: bool,
) -> None:
    """A pool's worker ends inside the hungry file: the files it had in flight are prepared again
    one at a time, the hungry one alone is skipped, every other is prepared, in order — also when
    the file lands just after the pool was replaced, an older pool's files still in flight."""
    from pipelines import index_prepare

    monkeypatch.setattr(index_prepare, "parse_workers", lambda: 2)  # the pool path on any machine
    if recycled:
        monkeypatch.setattr(index_prepare, "FILES_PER_POOL", 50)
        monkeypatch.setattr(index_prepare, "MAX_IN_FLIGHT", 16)
    files = {f"pkg/m{i:03d}.py": f"def f{i}(a):\n    return a + {i}\n" for i in range(PARALLEL_THRESHOLD + 20)}
    files["pkg/m049_hungry.py"] = HUNGRY  # the 51st file: the first of the second pool when recycled
    write_files(tmp_path, files)
    changed = [(_source(tmp_path, rel), "") for rel in sorted(files)]
    limits = ParseLimits(60.0, MIN_WORKER_MEMORY_MB)
    outcomes = list(_prepare_all(changed, limits))
    assert [source.path for source, _ in outcomes] == sorted(files)  # every file once, in order
    kinds = {source.path: kind for source, (kind, _) in outcomes}
    assert kinds.pop("pkg/m049_hungry.py") == "skip" and set(kinds.values()) == {"ok"}
    reason = next(value.reason for source, (_, value) in outcomes if source.path == "pkg/m049_hungry.py")
    assert "CODEMEM_INDEX_MEMORY_MB" in reason and str(MIN_WORKER_MEMORY_MB) in reason


def test_hungry_files_in_a_row_are_each_skipped_alone(tmp_path: Path) -> None:
    """A run that parses in-process sends each large file to a worker of its own: three in a row
    end three workers, each skipped, the small files between them prepared in-process."""
    files = {"a_hungry.py": HUNGRY, "b_hungry.py": HUNGRY, "c_small.py": "def c():\n    return 3\n", "d_hungry.py": HUNGRY}
    write_files(tmp_path, files)
    outcomes = list(_prepare_all([(_source(tmp_path, rel), "") for rel in sorted(files)], ParseLimits(60.0, MIN_WORKER_MEMORY_MB)))
    assert [(source.path, kind) for source, (kind, _) in outcomes] == [
        ("a_hungry.py", "skip"), ("b_hungry.py", "skip"), ("c_small.py", "ok"), ("d_hungry.py", "skip"),
    ]


def test_codemem_index_skips_a_file_over_the_budget_and_indexes_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's command on a small change (parsed in-process): the large file is parsed in a
    worker held to the budget, skipped with the reason; a larger budget reads it again."""
    root = tmp_path / "project"
    write_files(root, {"app/main.py": "def main():\n    return helper()\n", "app/util.py": "def helper():\n    return 1\n",
                       "app/generated.py": HUNGRY})
    monkeypatch.setenv("CODEMEM_DENSE_EMBEDDINGS", "false")
    monkeypatch.setenv("CODEMEM_MAX_FILE_BYTES", str(10 * 2**20))
    monkeypatch.setenv("CODEMEM_PARSE_TIMEOUT_S", "60")
    monkeypatch.setenv("CODEMEM_INDEX_MEMORY_MB", "400")
    result = CliRunner().invoke(cli.main, ["index", str(root), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["files_indexed"] == 2
    skipped = {entry["path"]: entry["reason"] for entry in report["skipped"]}
    assert "CODEMEM_INDEX_MEMORY_MB" in skipped["app/generated.py"]
    manifest = Manifest(root / ".codemem" / MANIFEST_FILE)
    try:
        under = Settings(project_root=root, index_memory_mb=400, parse_timeout_s=60)
        assert "app/generated.py" in skip_records(manifest, ParseLimits.of(under))
        raised = Settings(project_root=root, index_memory_mb=64_000, parse_timeout_s=60)
        assert skip_records(manifest, ParseLimits.of(raised)) == {}  # another budget reads it again
    finally:
        manifest.close()

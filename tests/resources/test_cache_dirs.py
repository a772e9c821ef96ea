"""codemem writes nothing into the user's home directory outside ~/.codemem (issue 18, item 5).

Before, a first index created ``~/.SuiteSparse/GrB<version>/`` (the JIT kernels of the graph
engine's GraphBLAS, in the redis-server child) and ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/``
(onnxruntime's telemetry device id and event queue).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from resources import cache_dirs


def test_graph_cache_goes_under_codemem_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(cache_dirs.GRAPHBLAS_CACHE_ENV, raising=False)
    path = Path(cache_dirs.use_codemem_graph_cache() or "")
    assert os.environ[cache_dirs.GRAPHBLAS_CACHE_ENV] == str(path)
    assert path.parent == tmp_path / ".codemem" / "cache" / "graphblas" and path.is_dir()
    for folder in (tmp_path / ".codemem", tmp_path / ".codemem/cache", path.parent, path):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_users_own_settings_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(cache_dirs.GRAPHBLAS_CACHE_ENV, "/opt/kernels")
    monkeypatch.setenv(cache_dirs.ORT_TELEMETRY_ENV, "0")
    assert cache_dirs.use_codemem_graph_cache() == "/opt/kernels"
    cache_dirs.disable_onnxruntime_telemetry()
    assert os.environ[cache_dirs.ORT_TELEMETRY_ENV] == "0"
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_home_leaves_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(blocker))
    monkeypatch.delenv(cache_dirs.GRAPHBLAS_CACHE_ENV, raising=False)
    assert cache_dirs.use_codemem_graph_cache() is None
    assert cache_dirs.GRAPHBLAS_CACHE_ENV not in os.environ


@pytest.mark.slow
def test_index_and_search_write_nothing_in_home_outside_codemem(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("codemem")
    if not script.exists():
        pytest.skip(f"no console script at {script} (install the package: pip install -e .)")
    home, project = tmp_path / "home", tmp_path / "shop"
    home.mkdir()
    project.mkdir()
    (project / "app.py").write_text(
        'def total(cents: int) -> int:\n    """Sum money in cents."""\n    return cents\n\n\n'
        "class Cart:\n    def add(self, item):\n        return total(item)\n"
    )
    env = {key: value for key, value in os.environ.items()
           if key not in (cache_dirs.GRAPHBLAS_CACHE_ENV, cache_dirs.ORT_TELEMETRY_ENV, "XDG_CACHE_HOME")}
    env["HOME"] = str(home)
    for argv in (["index", "."], ["search", "money in cents"]):
        done = subprocess.run([str(script), *argv], cwd=project, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    assert "app.total" in done.stdout
    assert sorted(p.name for p in home.iterdir()) in ([], [".codemem"])
    kernels = home / ".codemem" / "cache" / "graphblas"
    assert kernels.is_dir() and any(kernels.rglob("*")), "the graph engine's kernels are cached under ~/.codemem"

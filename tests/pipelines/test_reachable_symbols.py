"""A resolution scoped to some files reads only the symbols their lookups can reach
(``pipelines.resolution_scope.reachable_symbols``), not every symbol of the repository (a million
on the Linux kernel): from those it finds exactly the edges it finds from every symbol.

Real indexes of real code: the fixture repositories of every language in one project (names
shared across languages, C/C++ headers and definitions, Java and C# hierarchies), and codemem's own
``pipelines`` and ``resources`` packages (Python classes, bases, ``self.`` calls through them). Each
file is resolved alone, and files in groups, both ways."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from pipelines.resolution import resolve
from pipelines.resolution_scope import reachable_symbols
from resources.schemas.tools import IndexInput
from tests.conftest import FIXTURE_REPOS

REPO = Path(__file__).resolve().parents[2]


def _assert_scoped_equals_whole(root: Path, service_factory, groups: int) -> int:  # noqa: ANN001
    """Index ``root``; resolve each file alone and ``groups`` random groups of files from the
    reachable symbols and from every symbol; return how many scopes were compared."""
    svc = service_factory(root, dense_embeddings=False)
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] == []
    manifest = svc.ctx.manifest
    every = manifest.all_symbols()
    refs = manifest.all_refs(calls_of=())
    paths = sorted(refs)
    rng = random.Random(21)
    scopes = [{path} for path in paths] + [set(rng.sample(paths, min(len(paths), 12))) for _ in range(groups)]
    found_edges = 0
    for only in scopes:
        reachable = reachable_symbols(manifest, only)
        assert len(reachable) <= len(every)
        scoped = resolve(reachable, refs, only, calls=manifest.calls_by_file)
        whole = resolve(every, refs, only, calls=manifest.calls_by_file)
        assert scoped.edges == whole.edges, f"scope {sorted(only)}"
        assert scoped.external_modules == whole.external_modules
        found_edges += len(whole.edges)
    assert found_edges > 0
    return len(scopes)


def test_every_language_resolves_from_the_reachable_symbols_as_from_all(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    root = tmp_path / "all"
    for language in sorted(p.name for p in FIXTURE_REPOS.iterdir()):
        shutil.copytree(FIXTURE_REPOS / language, root / language)
    assert _assert_scoped_equals_whole(root, service_factory, groups=20) > 20


@pytest.mark.slow
def test_a_real_python_codebase_resolves_from_the_reachable_symbols_as_from_all(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    root = tmp_path / "codemem"
    for package in ("pipelines", "resources"):
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert _assert_scoped_equals_whole(root, service_factory, groups=10) > 100


def test_the_reachable_symbols_are_a_small_part_of_a_large_repository(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """One file calling one function of 200 files of unrelated functions reads its own symbols and
    the one it calls, not the 2,000 others."""
    root = tmp_path / "wide"
    for n in range(200):
        body = "\n\n".join(f"def f{n}_{k}():\n    return {k}\n" for k in range(10))
        (root / "lib").mkdir(parents=True, exist_ok=True)
        (root / "lib" / f"m{n}.py").write_text(body)
    (root / "app.py").write_text("from lib.m7 import f7_3\n\n\ndef main():\n    return f7_3()\n")
    svc = service_factory(root, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    reachable = {s.qualified_name.rpartition(".")[2] for s in reachable_symbols(svc.ctx.manifest, {"app.py"})}
    assert reachable == {"main", "f7_3"}

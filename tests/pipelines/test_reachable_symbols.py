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
        reachable = reachable_symbols(manifest, only, refs)
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
    reachable = {s.qualified_name.rpartition(".")[2] for s in reachable_symbols(svc.ctx.manifest, {"app.py"}, svc.ctx.manifest.all_refs(calls_of=()))}
    assert reachable == {"main", "f7_3"}


def _cpp_hierarchy(root: Path) -> None:
    """C++ classes inheriting across headers (the leaf's calls reach the base's members only through
    the middle class, which no scoped file names), beside C structs nobody names."""
    files = {
        "geo/base.hpp": "class Base {\npublic:\n    int helper() { return 1; }\n    virtual int area() { return 0; }\n};\n",
        "geo/mid.hpp": '#include "base.hpp"\n\nclass Mid : public Base {\npublic:\n    int twice() { return 2; }\n};\n',
        "geo/leaf.hpp": '#include "mid.hpp"\n\nclass Leaf : public Mid {\npublic:\n    int run();\n};\n',
        "geo/leaf.cpp": '#include "leaf.hpp"\n\nint Leaf::run() {\n    return helper() + twice() + area();\n}\n',
        "app/main.cpp": '#include "../geo/leaf.hpp"\n\nint main() {\n    Leaf leaf;\n    return leaf.run();\n}\n',
        "drivers/table.c": "struct unrelated_table { int size; };\n\nint table_size(struct unrelated_table *t) {\n    return t->size;\n}\n",
        # a member function finds its class by a qualified name its file need not mention, and a
        # C struct of that name sorts before the C++ class with a base
        "dup/a/x.c": "struct Shade { int v; };\n",
        "dup/y.h": "class Tint {\npublic:\n    void g();\n};\n\nclass Shade : public Tint {\npublic:\n    void f();\n};\n",
        "dup/c.h": "class Hue {\npublic:\n    void g();\n};\n",
        "dup/a.h": '#include "y.h"\n',
        "dup/a.cpp": '#include "a.h"\n\nvoid Shade::f() {\n    g();\n}\n',
    }
    for n in range(30):
        files[f"include/dev{n}.h"] = f"struct dev{n}_ops {{ int (*probe)(void); }};\ntypedef int dev{n}_id;\nenum dev{n}_state {{ DEV{n}_UP }};\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_cpp_hierarchies_across_headers_resolve_from_the_reachable_symbols_as_from_all(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """C and C++ types are reached by name or through a hierarchy only: a member inherited through
    a class no scoped file names still resolves as from every symbol, and the structs, typedefs and
    enums nobody names are not read."""
    root = tmp_path / "cpp"
    _cpp_hierarchy(root)
    alone = tmp_path / "alone"
    shutil.copytree(root, alone)
    assert _assert_scoped_equals_whole(root, service_factory, groups=10) > 10
    svc = service_factory(alone, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    manifest = svc.ctx.manifest
    reachable = {s.name for s in reachable_symbols(manifest, {"geo/leaf.cpp"}, manifest.all_refs(calls_of=()))}
    assert {"Base", "Mid", "helper", "twice", "area"} <= reachable  # through the hierarchy, and called
    assert not any(name.startswith("dev") for name in reachable) and "unrelated_table" not in reachable

"""Pattern families found from the manifest (the types and their bases read there, only the
families' payloads from the vector store) are those found by reading every type's payload: same
bases, same implementations in the same order, same whole payloads."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.design.links import file_imports
from pipelines.design.patterns import pattern_families
from resources.schemas.tools import IndexInput
from tests.conftest import FIXTURE_REPOS, write_files

DESIGN_PROJECT = Path(__file__).resolve().parents[2] / "fixtures" / "design_project"


def test_families_from_the_manifest_are_those_from_every_payload(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    root = tmp_path / "p"
    shutil.copytree(DESIGN_PROJECT, root / "design", ignore=shutil.ignore_patterns("__pycache__", ".codemem"))
    for language in ("java", "csharp", "typescript", "python", "cpp"):
        shutil.copytree(FIXTURE_REPOS / language, root / language)
    write_files(root, {  # families in other languages, one base name in two of them, generics, a nested base
        "jv/Shape.java": "package jv;\npublic interface Shape { double area(); }\n",
        "jv/Square.java": "package jv;\npublic class Square implements Shape { public double area() { return 1; } }\n",
        "jv/Circle.java": "package jv;\npublic class Circle implements Shape { public double area() { return 3; } }\n",
        "jv/Box.java": "package jv;\npublic class Box<T> extends Square implements java.io.Serializable, Shape {}\n",
        "ts/shape.ts": "export abstract class Shape { abstract area(): number; }\n",
        "ts/square.ts": "import { Shape } from './shape';\nexport class Square extends Shape { area() { return 1; } }\n",
        "ts/disc.ts": "import { Shape } from './shape';\nexport class Disc extends Shape { area() { return 3; } }\n",
        "cc/node.h": "class Node { public: virtual int size() = 0; };\nclass Leaf : public Node { public: int size() { return 1; } };\n"
                     "class Pair : public Node { public: int size() { return 2; } };\n",
    })
    svc = service_factory(root, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    for least in (2, 3):
        scrolled = pattern_families(svc.ctx.vectors, least)
        read = pattern_families(svc.ctx.vectors, least, svc.ctx.manifest)
        assert read == scrolled
        assert scrolled and all("code" in f.base for f in read)
    found = {(f.base["language"], f.base["name"], len(f.implementations)) for f in pattern_families(svc.ctx.vectors, 2, svc.ctx.manifest)}
    assert {("java", "Shape", 3), ("typescript", "Shape", 2), ("cpp", "Node", 2), ("python", "BaseAgent", 12)} <= found, found


def test_the_files_and_imports_read_from_the_manifest_are_the_graphs(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """What the components are derived from (``links.file_imports``): the manifest's copy of the
    graph's files and file-to-file imports, read without a graph query."""
    from dataclasses import replace

    root = tmp_path / "p"
    shutil.copytree(DESIGN_PROJECT, root / "design", ignore=shutil.ignore_patterns("__pycache__", ".codemem"))
    for language in ("c", "cpp", "python", "typescript", "go", "java"):
        shutil.copytree(FIXTURE_REPOS / language, root / language)
    svc = service_factory(root, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    stores = svc.owned_stores().design_stores()
    assert stores.manifest is not None
    paths, imports = file_imports(stores)
    graph_paths, graph_imports = file_imports(replace(stores, manifest=None))
    assert sorted(paths) == sorted(graph_paths) and len(paths) > 30
    assert sorted(imports) == sorted(graph_imports) and len(imports) > 10
    assert any(a.startswith("c/") for a, _ in imports) and any(a.startswith("design/") for a, _ in imports)

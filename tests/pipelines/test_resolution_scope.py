"""Cross-file resolution at the cost of the change (``pipelines.resolution_scope``): an edit
re-resolves the edited files and the files that mention a name they define or defined, the whole
repository when the change can reach any file, and the index still equals a clean one.

Real files, the real embedded stores; which files a run resolved is read from the ``only`` the
indexer passes to ``pipelines.resolution.resolve``."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipelines import index_writes, resolution_scope
from pipelines.records import file_id
from pipelines.resolution import resolve
from resources.manifest import REF_NAMES_COMPLETE
from resources.schemas.tools import IndexInput
from tests.conftest import write_files
from tests.pipelines.dagster.test_dagster import _snapshot

PYTHON = {
    "pkg/__init__.py": "",
    "pkg/m1.py": "def alpha():\n    return 1\n",
    "pkg/m2.py": "from pkg.m1 import alpha\n\n\ndef uses_alpha():\n    return alpha()\n",
    "pkg/m3.py": "def uses_beta():\n    return beta()\n",
    "pkg/m4.py": "def beta():\n    return 2\n",
    "pkg/m5.py": "def gamma():\n    return 3\n",
    "pkg/shapes.py": (
        "class Base:\n    def area(self):\n        return 0\n\n\nclass Square(Base):\n    def size(self):\n        return self.area()\n"
    ),
}
C = {
    "lib/helper.h": "int helper(int x);\nint other(int x);\n",
    "lib/helper.c": '#include "helper.h"\n\nint helper(int x) { return x + 1; }\n',
    "lib/other.c": '#include "helper.h"\n\nint other(int x) { return x * 2; }\n',
    "app/main.c": '#include "../lib/helper.h"\n\nint run(void) { return helper(1); }\n',
    "app/side.c": "static int quiet(void) { return 0; }\nint side(void) { return quiet(); }\n",
}


@pytest.fixture()
def scopes(monkeypatch: pytest.MonkeyPatch) -> list[set[str] | None]:
    """The ``only`` of every resolution the indexer runs."""
    seen: list[set[str] | None] = []

    def recording(symbols, refs, only=None, calls=None):  # noqa: ANN001, ANN202
        seen.append(None if only is None else set(only))
        return resolve(symbols, refs, only, calls)

    monkeypatch.setattr(index_writes, "resolve", recording)
    return seen


@dataclass
class _Project:
    """An indexed project, and ``edit``: write files, index, check the edges against a clean
    index of the same tree, return the scope the run resolved."""

    root: Path
    svc: Any
    edit: Callable[[dict[str, str]], set[str] | None]


@pytest.fixture()
def indexed(tmp_path: Path, service_factory, scopes) -> Callable[[dict[str, str]], _Project]:  # noqa: ANN001
    """Index ``files`` in a project of their own."""

    def make(files: dict[str, str]) -> _Project:
        root = tmp_path / "p"
        write_files(root, files)
        svc = service_factory(root, dense_embeddings=False)
        svc.index(IndexInput(embed=False))

        def edit(changed: dict[str, str]) -> set[str] | None:
            write_files(root, changed)
            svc.index(IndexInput(embed=False))
            scope = scopes[-1]
            clean = tmp_path / f"clean{len(scopes)}"
            shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".codemem"))
            twin = service_factory(clean, dense_embeddings=False)
            twin.index(IndexInput(embed=False))
            assert _snapshot(svc)["edges"] == _snapshot(twin)["edges"]
            return scope

        return _Project(root, svc, edit)

    return make


def test_an_edit_resolves_the_files_that_mention_its_names(indexed, scopes) -> None:  # noqa: ANN001
    p = indexed(PYTHON)

    assert scopes == [None]  # a first index: every file

    # alpha is defined as it was: m2's import of m1 and call of alpha are put back, not resolved again
    assert p.edit({"pkg/m1.py": "def alpha():\n    return 10\n"}) == {"pkg/m1.py"}
    alpha_call = (_id(p.svc, "pkg.m2.uses_alpha"), "CALLS", _id(p.svc, "pkg.m1.alpha"))
    assert alpha_call in p.svc.ctx.manifest.resolved_edges()
    assert p.svc.ctx.manifest.resolved_edge_properties([alpha_call]) == {alpha_call: {"line_number": 5}}

    two_betas = {"pkg/m5.py": "def gamma():\n    return 3\n\n\ndef beta():\n    return 4\n"}
    assert p.edit(two_betas) == {"pkg/m5.py", "pkg/m3.py"}  # beta() in m3 is ambiguous now: its edge goes
    edges = {(s, t, d) for s, t, d in p.svc.ctx.manifest.resolved_edges() if t == "CALLS"}
    assert not any(s == _id(p.svc, "pkg.m3.uses_beta") for s, _, _ in edges)

    assert p.edit({"pkg/m5.py": "def gamma():\n    return 3\n"}) == {"pkg/m5.py", "pkg/m3.py"}  # beta is unique again: the call links back
    assert (_id(p.svc, "pkg.m3.uses_beta"), "CALLS", _id(p.svc, "pkg.m4.beta")) in p.svc.ctx.manifest.resolved_edges()


def test_a_file_that_comes_or_goes_resolves_its_importers_and_the_callers_of_its_names(
    indexed, scopes, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    monkeypatch.setattr(resolution_scope, "WHOLE_WHEN_PATHS_CHANGE", (1 / 8, 1))  # the share alone, in a small tree
    p = indexed(PYTHON | {f"other/f{n}.py": f"def f{n}():\n    return {n}\n" for n in range(4)})

    assert p.edit({"pkg/m6.py": "def delta():\n    return alpha()\n"}) == {"pkg/m6.py"}  # nothing names m6 or delta
    assert p.edit({"pkg/m3.py": "import pkg.m7\n\n\ndef uses_beta():\n    return beta()\n"}) == {"pkg/m3.py"}
    assert p.edit({"pkg/m7.py": "def beta():\n    return 5\n"}) == {"pkg/m7.py", "pkg/m3.py"}  # m3 imports it, and calls beta
    assert (file_id("pkg/m3.py"), "IMPORTS", file_id("pkg/m7.py")) in p.svc.ctx.manifest.resolved_edges()

    (p.root / "pkg/m1.py").unlink()  # m2 imports it and calls its alpha; m6 calls alpha
    assert p.edit({}) == {"pkg/m2.py", "pkg/m6.py"}
    (p.root / "pkg/m7.py").unlink()
    assert p.edit({}) == {"pkg/m3.py"}
    for name in ("pkg/m6.py", "other/f0.py"):
        (p.root / name).unlink()
    assert p.edit({}) is None  # more than an eighth of the files came or went: every file


def test_the_whole_repository_when_a_hierarchy_changes(indexed, scopes) -> None:  # noqa: ANN001
    p = indexed(PYTHON)

    no_base = {"pkg/shapes.py": PYTHON["pkg/shapes.py"].replace("class Square(Base)", "class Square")}
    assert p.edit(no_base) is None  # bases changed: inherited members are found through them
    assert p.edit({"pkg/shapes.py": PYTHON["pkg/shapes.py"] + "\n\ndef unrelated():\n    return 0\n"}) is None  # Square extends Base again
    assert p.edit({"pkg/shapes.py": PYTHON["pkg/shapes.py"]}) == {"pkg/shapes.py"}
    assert p.edit({"pkg/more.py": "from pkg.shapes import Base\n\n\nclass Cube(Base):\n    pass\n"}) is None  # a new file's bases
    (p.root / "pkg/more.py").unlink()
    assert p.edit({}) is None  # and a file with bases that goes


def test_a_new_header_an_include_now_names_puts_the_callers_of_the_includer_in_scope(indexed) -> None:  # noqa: ANN001
    """``#include "x.h"`` in a.c named inc/x.h, the header declaring foo; a new a/x.h beside a.c
    takes the include, so a.c's foo no longer defines the declared one: the calls that reach the
    declaration are resolved again, in g.c (which includes inc/x.h) and in inc/x.h itself (which
    mentions only foo: a name a.c defines), and the files that mention neither are not."""
    p = indexed({
        "inc/x.h": "int foo(int a);\nstatic inline int twice(void) { return foo(2); }\n",
        "a/a.c": '#include "x.h"\nint foo(int a) { return a; }\n',
        "b/b.c": "int foo(int a) { return a + 1; }\n",
        "g/g.c": '#include "../inc/x.h"\nint use(void) { return foo(1); }\n',
        "h/h.c": "int other(void) { return 0; }\n",
        "h/i.c": "int more(void) { return 0; }\n",
        "h/j.c": "int most(void) { return 0; }\n",
        "h/k.c": "int last(void) { return 0; }\n",
    })
    use, in_a = _id(p.svc, "use"), _id(p.svc, "foo", path="a/a.c")
    assert (use, "CALLS", in_a) in p.svc.ctx.manifest.resolved_edges()
    twice = _id(p.svc, "twice")
    assert (twice, "CALLS", in_a) in p.svc.ctx.manifest.resolved_edges()
    scope = p.edit({"a/x.h": "int bar(int b);\n"})
    assert scope is not None and {"a/x.h", "a/a.c", "g/g.c", "inc/x.h"} <= scope and "h/h.c" not in scope
    edges = p.svc.ctx.manifest.resolved_edges()  # the clean index's (checked by edit)
    assert (use, "CALLS", in_a) not in edges and (twice, "CALLS", in_a) not in edges
    (p.root / "a/x.h").unlink()
    scope = p.edit({})
    assert scope is not None and {"a/a.c", "g/g.c", "inc/x.h"} <= scope
    assert {(use, "CALLS", in_a), (twice, "CALLS", in_a)} <= p.svc.ctx.manifest.resolved_edges()


def test_c_definitions_and_the_files_that_call_them(indexed) -> None:  # noqa: ANN001
    p = indexed(C)

    run, helper = _id(p.svc, "run"), _id(p.svc, "helper", path="lib/helper.c")
    assert (run, "CALLS", helper) in p.svc.ctx.manifest.resolved_edges()  # the definition, not the prototype

    assert p.edit({"lib/helper.c": '#include "helper.h"\n\nint helper(int x) { return x + 2; }\n'}) == {
        "lib/helper.c"}  # the same definitions: main.c's call into the rewritten helper is put back as it was
    assert (run, "CALLS", helper) in p.svc.ctx.manifest.resolved_edges()

    side = {"app/side.c": "static int quiet(void) { return 1; }\nint side(void) { return quiet(); }\n"}
    assert p.edit(side) == {"app/side.c"}  # nothing else mentions quiet or side

    side["app/side.c"] += "int helper(int x) { return x; }\n"  # a second definition of helper
    assert p.edit(side) == {"app/side.c", "app/main.c", "lib/helper.c", "lib/other.c"}  # #include "helper.h" mentions the name


def test_a_c_file_that_starts_including_a_header_can_change_which_definition_a_call_reaches(indexed) -> None:  # noqa: ANN001
    """Two definitions of one declared function: a call reaches the one whose file includes the
    declaration's header. When the other file starts including it too, the call's file (which
    mentions nothing the edit changed the definition of) must be resolved again."""
    p = indexed({
        "inc/x.h": "int foo(int a);\n",
        "a/a.c": '#include "../inc/x.h"\nint foo(int a) { return a; }\n',
        "b/b.c": "int foo(int a) { return a + 1; }\n",
        "g/g.c": '#include "../inc/x.h"\nint use(void) { return foo(1); }\n',
    })
    use, in_a = _id(p.svc, "use"), _id(p.svc, "foo", path="a/a.c")
    assert (use, "CALLS", in_a) in p.svc.ctx.manifest.resolved_edges()
    scope = p.edit({"b/b.c": '#include "../inc/x.h"\nint foo(int a) { return a + 1; }\n'})
    assert scope is not None and "g/g.c" in scope  # its edge is the clean index's (checked by edit)


def test_a_manifest_without_recorded_names_is_resolved_whole_once(indexed) -> None:  # noqa: ANN001
    p = indexed(PYTHON)

    with p.svc.ctx.manifest.transaction() as conn:  # as an earlier release left it
        conn.execute("DELETE FROM ref_names")
        conn.execute("DELETE FROM meta WHERE key = ?", (REF_NAMES_COMPLETE,))
    assert p.edit({"pkg/m1.py": "def alpha():\n    return 11\n"}) is None
    assert p.svc.ctx.manifest.get_meta(REF_NAMES_COMPLETE) == "1"
    assert p.edit({"pkg/m1.py": "def alpha():\n    return 12\n"}) == {"pkg/m1.py"}


def _id(svc, qualified: str, path: str | None = None) -> str:  # noqa: ANN001
    found = [s for s in svc.ctx.manifest.all_symbols() if s.qualified_name == qualified and (path is None or s.path == path)]
    assert len(found) == 1, (qualified, found)
    return found[0].id


@pytest.mark.parametrize("files", [PYTHON, C], ids=["python", "c"])
def test_calls_read_a_few_files_at_a_time_resolve_as_calls_read_at_once(indexed, files) -> None:  # noqa: ANN001
    """What the indexer runs (the structure of every file, the calls streamed from the manifest a
    chunk of files at a time) gives the edges, with their properties, of a resolution over every
    file's references read at once, and of one scoped to a few files."""
    manifest = indexed(files).svc.ctx.manifest
    symbols = manifest.all_symbols()
    streamed = resolve(symbols, manifest.all_refs(calls_of=()), None, calls=lambda paths: manifest.calls_by_file(paths, chunk=2))
    at_once = resolve(symbols, manifest.all_refs(), None)
    assert streamed.edges == at_once.edges and streamed.external_modules == at_once.external_modules
    assert any(t == "CALLS" for _, t, _ in streamed.edges) and manifest.resolved_edges() == set(streamed.edges)
    some = set(sorted(manifest.files())[:2])
    assert resolve(symbols, manifest.all_refs(calls_of=()), some, calls=manifest.calls_by_file).edges == resolve(
        symbols, manifest.all_refs(calls_of=some), some).edges
    assert [path for path, _ in manifest.calls_by_file(chunk=2)] == sorted(manifest.files())


def test_a_name_in_any_script_puts_its_callers_in_scope(indexed) -> None:  # noqa: ANN001
    """计算 defined a second time (the last definition is the one that runs): its caller, which
    mentions no ASCII name the edit changed, is resolved again and links to the new one."""
    p = indexed({
        "m.py": "def 计算():\n    return 1\n",
        "f.py": "from m import 计算\n\n\ndef g():\n    return 计算()\n",
    })
    assert p.edit({"m.py": "def 计算():\n    return 1\n\n\ndef 计算():\n    return 2\n"}) == {"m.py", "f.py"}


def test_a_base_resolved_otherwise_resolves_everything_again(indexed) -> None:  # noqa: ANN001
    """Base redefined in its file: Child (which names it) now extends the new one, so Grand's
    inherited self.run() no longer reaches Base.run, though grand.py mentions neither Base nor
    anything else the edit changed."""
    p = indexed({
        "base.py": "class Base:\n    def run(self):\n        return 1\n",
        "child.py": "from base import Base\n\n\nclass Child(Base):\n    pass\n",
        "grand.py": "from child import Child\n\n\nclass Grand(Child):\n    def go(self):\n        return self.run()\n",
    })
    go, run = _id(p.svc, "grand.Grand.go"), _id(p.svc, "base.Base.run")
    assert (go, "CALLS", run) in p.svc.ctx.manifest.resolved_edges()
    assert p.edit({"base.py": "class Base:\n    def run(self):\n        return 1\n\n\nclass Base:\n    pass\n"}) is None


def test_a_type_defined_twice_resolves_as_in_a_clean_index_whatever_the_scope_reads(indexed) -> None:  # noqa: ANN001
    """Two Java classes of one qualified name, and two C++ classes of one name with other bases:
    which one a call reaches must not depend on the order the resolution reads the symbols in (a
    scoped resolution reads a part of them, in another order than a whole one)."""
    dup = "package p;\n\npublic class Dup {\n    public void m() {}\n}\n"
    p = indexed({
        "a/p/Dup.java": dup, "b/p/Dup.java": dup,
        "c/p/Use.java": "package p;\n\npublic class Use {\n    public void run(Dup d) {\n        d.m();\n    }\n}\n",
        "base1.h": "class B1 {\npublic:\n    void helper() {}\n};\n",
        "base2.h": "class B2 {\npublic:\n    void helper() {}\n};\n",
        "x/derived.h": '#include "../base1.h"\nclass Derived : public B1 {\npublic:\n    void run();\n};\n',
        "y/derived.h": '#include "../base2.h"\nclass Derived : public B2 {\npublic:\n    void run();\n};\n',
        "run.cpp": '#include "y/derived.h"\nvoid Derived::run() {\n    helper();\n}\n',
    })
    p.edit({"b/p/Dup.java": "// edited\n" + dup,
            "c/p/Use.java": "package p;\n\npublic class Use {\n    public void run(Dup d) {\n        d.m();\n    }\n}\n// edited\n"})
    p.edit({"y/derived.h": '// edited\n#include "../base2.h"\nclass Derived : public B2 {\npublic:\n    void run();\n};\n',
            "run.cpp": '#include "y/derived.h"\nvoid Derived::run() {\n    helper();\n}\n// edited\n'})


def test_a_java_file_s_package_does_not_depend_on_which_of_its_methods_are_read(indexed) -> None:  # noqa: ANN001
    """Holder's last method is an overload (local name ``Holder.m#2``): its file's package is read
    from its class, so ``h.helper.go()`` reaches p's Helper in a scoped run as in a clean one."""
    p = indexed({
        "p/Holder.java": "package p;\n\npublic class Holder {\n    public Helper helper;\n    public void m() {}\n"
                         "    public void m(int x) {}\n}\n",
        "p/Helper.java": "package p;\n\npublic class Helper {\n    public void go() {}\n}\n",
        "q/Helper.java": "package q;\n\npublic class Helper {\n    public void go() {}\n}\n",
        "p/Use.java": "package p;\n\npublic class Use {\n    public void run(Holder h) {\n        h.m();\n    }\n}\n",
    })
    p.edit({"p/Use.java": "package p;\n\npublic class Use {\n    public void run(Holder h) {\n        h.m();\n"
                          "        h.helper.go();\n    }\n}\n"})
    go = _id(p.svc, "p.Helper.go", path="p/Helper.java")
    assert any(t == "CALLS" and d == go for _, t, d in p.svc.ctx.manifest.resolved_edges())


def test_a_renamed_function_takes_its_edges_along(indexed) -> None:  # noqa: ANN001
    """``old`` renamed ``new``: the edge from the removed ``old`` is not put back as the edge of a
    caller out of scope would be (it dangled in the manifest)."""
    from pipelines.stages import dangling_edges

    p = indexed({"lib.py": "def g():\n    return 1\n", "app.py": "from lib import g\n\n\ndef old():\n    return g()\n"})
    p.edit({"app.py": "from lib import g\n\n\ndef new():\n    return g()\n"})
    assert dangling_edges(p.svc.ctx) == []


CAME_OR_WENT = {
    "js-import-of-dot-gets-an-index": (  # `from "."` names no identifier of lib/index.js
        {"lib/a.js": 'import { helper } from ".";\n\nexport function run() {\n  return helper();\n}\n',
         "other/b.js": "export function unrelated() {\n  return 1;\n}\n"},
        {"lib/index.js": "export function other() {\n  return 2;\n}\n"}, ()),
    "js-import-of-dot-loses-its-index": (
        {"lib/a.js": 'import { helper } from ".";\n\nexport function run() {\n  return helper();\n}\n',
         "lib/index.js": "export function other() {\n  return 2;\n}\n"},
        {}, ("lib/index.js",)),
    "js-import-of-dotdot-gets-a-sibling": (  # `".."` in a/b/c.js names a.js
        {"a/b/c.js": 'import "..";\n\nexport function run() {\n  return 1;\n}\n',
         "other/b.js": "export function unrelated() {\n  return 1;\n}\n"},
        {"a.js": "export function other() {\n  return 2;\n}\n"}, ()),
    "ts-barrel-index": (  # a re-exporting index defines nothing
        {"src/ui/button.ts": "export function button(): number {\n  return 1;\n}\n",
         "src/ui/page.ts": 'import { button } from ".";\n\nexport function page(): number {\n  return button();\n}\n'},
        {"src/ui/index.ts": 'export { button } from "./button";\n'}, ()),
    "js-index-of-a-directory-without-identifier": (  # `"./2024"` mentions no identifier at all
        {"src/app.js": 'import "./2024";\n\nexport function run() {\n  return 1;\n}\n',
         "src/other.js": "export function unrelated() {\n  return 1;\n}\n"},
        {"src/2024/index.js": "export function year() {\n  return 2024;\n}\n"}, ()),
    "go-package-gets-a-file-of-another-language": (  # a Go import names every file of the directory
        {"billing/bill.go": "package billing\n\nfunc Total() int {\n\treturn 1\n}\n",
         "app/main.go": 'package main\n\nimport "example.com/shop/billing"\n\nfunc main() {\n\tbilling.Total()\n}\n'},
        {"billing/gen.py": "def gen():\n    return 1\n"}, ()),
    "cpp-class-of-the-same-name-comes": (  # A::run's helper() is found through A's base, by A's name
        {"base1.h": "class B1 {\npublic:\n    void helper() {}\n};\n",
         "base2.h": "class B2 {\npublic:\n    void helper() {}\n};\n",
         "z/a.h": '#include "../base1.h"\nclass A : public B1 {\npublic:\n    void run();\n};\n',
         "run.cpp": '#include "z/a.h"\nvoid A::run() {\n    helper();\n}\n'},
        {"other/thing.h": "class A {\npublic:\n    void other();\n};\n"}, ()),
    "java-same-package-type-shadows-a-wildcard-import": (  # Z reads x.f.go(): f's type is found by name
        {"q/Helper.java": "package q;\n\npublic class Helper {\n    public void go() {}\n}\n",
         "p/C.java": "package p;\n\nimport q.*;\n\npublic class C {\n    public Helper f;\n}\n",
         "p/Z.java": "package p;\n\npublic class Z {\n    public void run(C x) {\n        x.f.go();\n    }\n}\n"},
        {"p/Helper.java": "package p;\n\npublic class Helper {\n    public void stop() {}\n}\n"}, ()),
}


@pytest.mark.parametrize("case", list(CAME_OR_WENT))
def test_a_file_that_comes_or_goes_ends_as_a_clean_index_where_imports_climb_or_types_are_found_by_name(
    indexed, case: str,  # noqa: ANN001
) -> None:
    """Imports that name a file without an identifier of its path, a Go package's directory, and
    types found by a name the reading file need not mention (cases found in review): the edges
    equal a clean index's (``edit`` compares them)."""
    files, added, deleted = CAME_OR_WENT[case]
    p = indexed(files)
    for path in deleted:
        (p.root / path).unlink()
    p.edit(added)


def test_a_c_struct_that_comes_resolves_by_names_and_a_cpp_class_with_members_everything(indexed) -> None:  # noqa: ANN001
    p = indexed(C | {"lib/point.h": "struct point { int x; };\n"})

    assert p.edit({"lib/shape.h": "struct shape { int sides; };\n"}) is not None  # a struct has no members to look up
    assert p.edit({"lib/widget.hpp": "class Widget {\npublic:\n    void draw();\n};\nvoid Widget::draw() {}\n"}) is None

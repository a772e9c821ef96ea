"""C and C++ (issue 21, item 1): what the parser keeps and drops, and, on a real index, how
headers and sources are linked: ``#include`` edges to files, calls to a function declared in a
header linked to its definition in the ``.c``/``.cpp`` file, C++ members through their class."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.c_family import IncludeIndex, qualified_callee
from pipelines.parsing import parse_source
from pipelines.records import file_id
from tests.conftest import FIXTURE_REPOS, write_files

Edge = tuple[str, str, str]


def _edges(root: Path) -> set[Edge]:
    """Index ``root`` (plain, no dense vectors); its edges as (``path:local`` or ``path``, type,
    ``path:local``, ``path`` or the external module's name)."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    service = CodeMemService(Settings(project_root=root, dense_embeddings=False))
    try:
        report = service.index(IndexInput(embed=False))
        assert report["failed"] == []
        names = {s.id: f"{s.path}:{s.local_name}" for s in service.ctx.manifest.all_symbols()}
        names.update({file_id(p): p for p in (s.path for s in service.ctx.manifest.all_symbols())})
        return {(names.get(s, s), kind, names.get(d, d)) for s, kind, d in service.ctx.manifest.resolved_edges()}
    finally:
        service.close()


@pytest.fixture(scope="module")
def c_edges(tmp_path_factory: pytest.TempPathFactory) -> set[Edge]:
    root = tmp_path_factory.mktemp("c") / "repo"
    shutil.copytree(FIXTURE_REPOS / "c", root)
    (root / "tools.py").write_text("def free(block):\n    return block\n\n\ndef rb_new():\n    return free(None)\n")
    return _edges(root)


@pytest.fixture(scope="module")
def cpp_edges(tmp_path_factory: pytest.TempPathFactory) -> set[Edge]:
    root = tmp_path_factory.mktemp("cpp") / "repo"
    shutil.copytree(FIXTURE_REPOS / "cpp", root)
    return _edges(root)


# ---- parsing ----------------------------------------------------------------------------------


def test_prototypes_are_declarations_and_local_variables_are_not_prototypes() -> None:
    source = b"int api(int x);\nint api(int x) { Widget w(x); int (*fp)(int); return x; }\n"
    parsed = parse_source("a.c", source, "c")
    assert [(s.qualified_name, s.is_declaration) for s in parsed.symbols] == [("api", True), ("api", False)]
    cpp = parse_source("a.cpp", source.replace(b"int (*fp)(int); ", b"A a(b); "), "cpp")
    assert [(s.qualified_name, s.is_declaration) for s in cpp.symbols] == [("api", True), ("api", False)]


def test_typedefs_name_their_struct_once() -> None:
    source = (
        b"typedef struct node { struct node *next; } node_t;\n"
        b"typedef struct { int x; } point;\n"
        b"typedef struct node *node_ptr;\n"
        b"struct tagged { int y; };\n"
        b"typedef enum { A, B } mode;\n"
    )
    for language in ("c", "cpp"):
        parsed = parse_source("t.h", source, language)  # type: ignore[arg-type]
        assert [(s.kind, s.name) for s in parsed.symbols] == [
            ("struct", "node_t"), ("struct", "point"), ("type", "node_ptr"), ("struct", "tagged"), ("enum", "mode"),
        ], language


def test_cpp_constructors_destructors_templates_and_macro_invocations() -> None:
    source = b"""
namespace a::b {
template <typename T>
class Box : public Base<T> {
public:
    Box() = default;
    explicit Box(T value);
    ~Box();
    DISALLOW_COPY(Box);
    T get() const { return value_; }
private:
    T value_;
};
}
template <typename T> a::b::Box<T>::Box(T value) : value_(make(value)) {}
template <typename T> a::b::Box<T>::~Box() { release(); }
TEST(Box, Gets) { check(); }
"""
    parsed = parse_source("box.hpp", source, "cpp")
    got = [(s.kind, s.qualified_name, s.container, s.namespace, s.is_declaration) for s in parsed.symbols]
    assert got == [
        ("class", "Box", None, "a::b", False),
        ("constructor", "Box.Box", "Box", "a::b", False),
        ("constructor", "Box.Box", "Box", "a::b", True),
        ("method", "Box.~Box", "Box", "a::b", True),
        ("method", "Box.get", "Box", "a::b", False),
        ("constructor", "a.b.Box.Box", "a.b.Box", None, False),
        ("method", "a.b.Box.~Box", "a.b.Box", None, False),
        ("function", "TEST", None, None, False),
    ]
    assert parsed.symbols[0].signature == "template <typename T> class Box : public Base<T>"
    assert parsed.symbols[0].extends == ["Base"]
    assert parsed.symbols[5].signature == "template <typename T> a::b::Box<T>::Box(T value)"
    # a member initializer's calls belong to the constructor
    assert [(c.caller, c.callee) for c in parsed.calls] == [
        ("a.b.Box.Box", "make"), ("a.b.Box.~Box", "release"), ("TEST", "check"),
    ]


def test_includes_macros_and_calls() -> None:
    source = (
        b'#include "util/ring.h"\n#include <stdio.h>\n#include CONFIG_HEADER\n'
        b"#define TWICE(x) ((x) * 2)\n"
        b"void f(struct s *p) { p->cb(1); obj.m(); (*fp)(2); TWICE(3); ns::g(); new T<int>(4); }\n"
    )
    parsed = parse_source("f.cpp", source, "cpp")
    assert [(i.module, i.line) for i in parsed.imports] == [("util/ring.h", 1), ("stdio.h", 2)]
    assert [(s.kind, s.name, s.signature) for s in parsed.symbols] == [
        ("function", "TWICE", "#define TWICE(x)"), ("function", "f", "void f(struct s *p)"),
    ]
    assert [(c.callee, c.callee_name) for c in parsed.calls] == [
        ("p->cb", "cb"), ("obj.m", "m"), ("(*fp)", "fp"), ("TWICE", "TWICE"), ("ns::g", "g"), ("T", "T"),
    ]


def test_doc_comments_of_any_style() -> None:
    source = b"/* Block. */\nint a(void);\n\n// Line one\n// line two\nint b(void);\n\n/** Doxygen. */\nint c(void);\n"
    parsed = parse_source("d.h", source, "cpp")
    assert [s.docstring for s in parsed.symbols] == ["Block.", "Line one\nline two", "Doxygen."]


# ---- resolution helpers -----------------------------------------------------------------------


def test_include_targets() -> None:
    index = IncludeIndex(["src/ring.h", "src/ring.c", "include/ring/api.h", "a/config.h", "b/config.h", "a/x/main.c"])
    assert index.resolve("src/ring.c", "ring.h") == {"src/ring.h"}  # beside the includer
    assert index.resolve("src/main.c", "ring/api.h") == {"include/ring/api.h"}  # an include directory
    assert index.resolve("a/x/main.c", "config.h") == {"a/config.h"}  # the nearest of two
    assert index.resolve("c/main.c", "config.h") == {"a/config.h", "b/config.h"}  # as near: both
    assert index.resolve("src/main.c", "stdio.h") == set()
    assert index.resolve("a/x/main.c", "../config.h") == {"a/config.h"}


def test_qualified_callees() -> None:
    assert qualified_callee("A::f") == "A::f"
    assert qualified_callee("ns::Registry<std::vector<int>>::instance") == "ns::Registry::instance"
    assert qualified_callee("::free") == "free"
    assert qualified_callee("f") is None
    assert qualified_callee("A::make().run") is None
    assert qualified_callee("p->m") is None


# ---- C: header and source ---------------------------------------------------------------------


def test_c_includes_link_to_header_files(c_edges: set[Edge]) -> None:
    assert ("main.c", "IMPORTS", "ringbuf.h") in c_edges
    assert ("ringbuf.c", "IMPORTS", "ringbuf.h") in c_edges
    assert not any(target == "stdio.h" for _, kind, target in c_edges if kind == "IMPORTS")  # an external module node


def test_c_calls_reach_the_definition_not_the_prototype(c_edges: set[Edge]) -> None:
    calls = {(s, d) for s, kind, d in c_edges if kind == "CALLS"}
    for name in ("rb_new", "rb_push", "rb_pop", "rb_free"):
        assert ("main.c:main", f"ringbuf.c:{name}") in calls
        assert ("main.c:main", f"ringbuf.h:{name}") not in calls
    assert ("main.c:main", "ringbuf.h:RB_MIN") in calls  # a function-like macro
    assert ("ringbuf.c:rb_pop", "ringbuf.h:rb_is_empty") in calls  # defined in the header
    # a forward declaration above stands for the definition below, and calls belong to the body
    assert ("ringbuf.c:rb_push", "ringbuf.c:advance#2") in calls
    assert not any(s == "ringbuf.c:advance" or d == "ringbuf.c:advance" for s, d in calls)


def test_c_and_python_names_do_not_link_across_languages(c_edges: set[Edge]) -> None:
    calls = {(s, d) for s, kind, d in c_edges if kind == "CALLS"}
    assert ("ringbuf.c:rb_free", "tools.py:free") not in calls  # libc free() is not a Python function
    assert ("tools.py:rb_new", "tools.py:free") in calls
    assert not any(s.startswith("tools.py") and d.startswith("ringbuf") for s, d in calls)


# ---- C++: classes across header and source ----------------------------------------------------


def test_cpp_calls_reach_out_of_line_definitions(cpp_edges: set[Edge]) -> None:
    calls = {(s, d) for s, kind, d in cpp_edges if kind == "CALLS"}
    main = "src/main.cc:main"
    assert (main, "src/shape.cpp:shapes.Circle.unit") in calls  # Circle::unit()
    assert (main, "src/shape.cpp:shapes.Registry.instance") in calls  # Registry<Shape>::instance()
    assert (main, "include/shapes/shape.hpp:Registry.add") in calls  # defined in its class
    assert (main, "src/shape.cpp:Shape.describe") in calls  # round->describe()
    assert (main, "src/shape.cpp:shapes.total_area") in calls  # declared in the included header
    assert (main, "src/legacy.c:legacy_checksum") in calls  # a C function through a .h header
    # s->area(): Shape::area is pure virtual and Circle::area overrides it: which one runs is unknown
    assert not any(s == main and d.endswith(".area") for s, d in calls)


def test_cpp_members_resolve_through_their_class(cpp_edges: set[Edge]) -> None:
    calls = {(s, d) for s, kind, d in cpp_edges if kind == "CALLS"}
    describe = "src/shape.cpp:Shape.describe"
    assert (describe, "include/shapes/shape.hpp:Shape.name") in calls  # name(): a member, defined in class
    assert (describe, "include/shapes/shape.hpp:Shape.area") in calls  # this->area(): the pure virtual one
    assert ("src/shape.cpp:shapes.Circle.unit", "include/shapes/shape.hpp:Circle") in calls  # new Circle(...)
    assert not any(d.endswith(":move") for _, d in calls)  # std::move()
    assert ("include/shapes/shape.hpp:Circle", "EXTENDS", "include/shapes/shape.hpp:Shape") in cpp_edges
    assert ("src/shape.cpp", "IMPORTS", "include/shapes/shape.hpp") in cpp_edges
    assert ("src/main.cc", "IMPORTS", "src/legacy.h") in cpp_edges


def test_a_declaration_stands_for_the_definition_beside_its_header(tmp_path: Path) -> None:
    write_files(tmp_path, {
        "lib/api.h": "int run(void);\n",
        "lib/api.c": '#include "api.h"\nint run(void) { return 1; }\n',
        "tools/run.c": "int run(void) { return 2; }\n",
        "app/main.c": '#include "../lib/api.h"\nint main(void) { return run(); }\n',
        "app/scoped.cpp": (
            "namespace util { int move(int x) { return x; } }\n"
            "int twice(int x) { return std::move(x) + util::move(x); }\n"
        ),
    })
    calls = {(s, d) for s, kind, d in _edges(tmp_path) if kind == "CALLS"}
    assert ("app/main.c:main", "lib/api.c:run") in calls
    assert ("app/scoped.cpp:twice", "app/scoped.cpp:move") in calls
    assert len([d for s, d in calls if s == "app/scoped.cpp:twice"]) == 1  # std::move() is not util::move


def test_a_qualified_name_shared_by_a_declaration_and_its_definition_names_the_definition(
    tmp_path: Path, service_factory
) -> None:
    from resources.schemas.tools import GetSymbolInput, IndexInput

    shutil.copytree(FIXTURE_REPOS / "cpp", tmp_path / "repo")
    svc = service_factory(tmp_path / "repo", dense_embeddings=False)
    assert svc.index(IndexInput(embed=False))["failed"] == []
    found = svc.get_symbol(GetSymbolInput(symbol="shapes::Circle::area"))
    assert (found.symbol.file_path, found.symbol.start_line) == ("src/shape.cpp", 20)
    assert svc.get_symbol(GetSymbolInput(symbol="shapes::Shape::area")).symbol.file_path == "include/shapes/shape.hpp"
    callers = svc.get_symbol(GetSymbolInput(symbol="shapes::total_area")).callers
    assert [c["qualified_name"] for c in callers] == ["main"]


def test_a_member_defined_after_using_namespace_is_its_declaration_s_definition(tmp_path: Path) -> None:
    write_files(tmp_path, {
        "geo/shape.h": "namespace geo {\nclass Shape {\npublic:\n    int sides() const;\n};\n}\n",
        "geo/shape.cpp": '#include "shape.h"\nusing namespace geo;\nint Shape::sides() const { return 4; }\n',
        "main.cpp": '#include "geo/shape.h"\nint count(const geo::Shape& s) { return s.sides(); }\n',
    })
    calls = {(s, d) for s, kind, d in _edges(tmp_path) if kind == "CALLS"}
    assert calls == {("main.cpp:count", "geo/shape.cpp:Shape.sides")}

"""Call forms the resolution links to the one definition Python runs (issue 19, item 2), on a real
index: a function nested in the caller, a name defined several times (typing overloads, one
definition per platform), a bare name that is also some class's method name, and ``self.m()``
for a method inherited from a base class in another module."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import indexed_calls, write_files

FILES = {
    "pkg/base.py": textwrap.dedent(
        '''
        class Loader:
            def read(self, name):
                return open(name).read()


        class CachedLoader(Loader):
            pass
        '''
    ),
    "pkg/tools.py": textwrap.dedent(
        '''
        import sys
        import typing as t

        from pkg.base import CachedLoader


        @t.overload
        def convert(value: int) -> int: ...
        @t.overload
        def convert(value: str) -> str: ...
        def convert(value):
            return value


        if sys.platform == "win32":
            def isatty(stream):
                return False
        else:
            def isatty(stream):
                return stream.isatty()


        class Stream:
            def isatty(self):
                return True

            def convert(self, value):
                return convert(value)


        def wrap(function):
            def decorator(inner):
                return inner
            return decorator(function)


        def other(function):
            def decorator(inner):
                return function
            return decorator(function)


        def check(stream):
            return isatty(stream)


        class Settings(CachedLoader):
            def load(self):
                return self.read("settings.toml")
        '''
    ),
}


@pytest.fixture(scope="module")
def calls(tmp_path_factory) -> set[tuple[str, str]]:  # noqa: ANN001
    root: Path = tmp_path_factory.mktemp("calls") / "project"
    root.mkdir()
    write_files(root, FILES)
    return indexed_calls(root)


def test_a_call_to_a_function_nested_in_the_caller_is_linked_to_that_one(calls: set[tuple[str, str]]) -> None:
    assert ("wrap", "wrap.decorator") in calls
    assert ("other", "other.decorator") in calls
    assert not {("wrap", "other.decorator"), ("other", "wrap.decorator")} & calls


def test_a_name_defined_several_times_links_to_the_definition_that_runs(calls: set[tuple[str, str]]) -> None:
    assert ("Stream.convert", "convert#3") in calls  # the implementation after two @overload stubs
    assert ("check", "isatty#2") in calls  # one definition per platform: the last


def test_a_bare_python_name_never_links_to_a_method(calls: set[tuple[str, str]]) -> None:
    assert not {("check", "Stream.isatty"), ("Stream.convert", "Stream.convert")} & calls


def test_self_calls_reach_a_method_inherited_from_another_module(calls: set[tuple[str, str]]) -> None:
    assert ("Settings.load", "Loader.read") in calls


def test_new_this_and_super_of_a_java_constructor_link_to_the_class(tmp_path: Path) -> None:
    # `new Order(1)` names both the class Order and its constructors Order(int), Order(): before,
    # that ambiguity left the call unlinked (bench.callgraph_java: 145 of 244 `new T()` sites)
    write_files(tmp_path / "p", {
        "src/shop/Order.java": "package shop;\n\npublic class Order {\n    private final int n;\n\n"
                               "    public Order(int n) { this.n = n; }\n\n    public Order() { this(0); }\n}\n",
        "src/shop/Cart.java": "package shop;\n\npublic class Cart {\n    public Order add() {\n"
                              "        return new Order(1);\n    }\n}\n",
        "src/shop/RushOrder.java": "package shop;\n\npublic class RushOrder extends Order {\n"
                                   "    public RushOrder() { super(1); }\n}\n",
    })
    calls = indexed_calls(tmp_path / "p")
    assert ("Cart.add", "Order") in calls
    # explicit constructor calls: `this(0)` runs the class's own constructor, `super(1)` its base's
    assert any(caller.startswith("Order.Order") and callee == "Order" for caller, callee in calls)
    assert ("RushOrder.RushOrder", "Order") in calls

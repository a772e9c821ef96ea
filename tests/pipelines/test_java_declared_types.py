"""Java calls resolved through the receiver's declared type (issue 19, item 2), on a real index.

Every receiver below has a method named like a method of other classes (``start``, ``report``,
``size``), and the calling class declares a ``start`` of its own: a guess by name would link the
wrong one, or the one method of that name when the receiver's type is outside the repository.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import indexed_calls, write_files

FILES = {
    "src/shop/Engine.java": "package shop;\n\npublic class Engine {\n    public void start() {}\n}\n",
    "src/shop/Motor.java": "package shop;\n\npublic class Motor {\n    public void start() {}\n\n"
                           "    public void report() {}\n}\n",
    "src/shop/Base.java": "package shop;\n\npublic class Base {\n    protected Engine engine;\n\n"
                          "    public void stop() {}\n}\n",
    "src/shop/Registry.java": "package shop;\n\npublic class Registry {\n"
                              "    public static Engine find() { return new Engine(); }\n}\n",
    # a second Base elsewhere: the simple name is not unique, Java's scoping finds shop.Base
    "src/other/Base.java": "package other;\n\npublic class Base {\n    public void stop() {}\n}\n",
    "src/shop/Sports.java": "package shop;\n\npublic class Sports extends Base {\n}\n",
    "src/shop/Truck.java": "package shop;\n\npublic class Truck extends Base {\n    Truck(int axles) { stop(); }\n}\n",
    "src/shop/Part.java": "package shop;\n\npublic class Part {\n    Engine engine;\n\n"
                          "    public int size() { return 1; }\n}\n",
    "src/shop/Failure.java": "package shop;\n\npublic class Failure extends RuntimeException {\n"
                             "    public void report() {}\n}\n",
    "src/shop/Car.java": textwrap.dedent(
        """
        package shop;

        import java.util.List;

        public class Car extends Base {
            private Motor motor;
            private Part part;

            public void start() {}

            Engine make() { return new Engine(); }

            Engine find() { return make(); }

            void statics() { Registry.find(); }

            void param(Engine e) { e.start(); }

            void local() { Engine e = make(); e.start(); }

            void inferred() { var e = new Engine(); e.start(); }

            void loop(List<Engine> engines) { for (Engine e : engines) { e.start(); } }

            void caught() { try { make(); } catch (Failure f) { f.report(); } }

            void field() { motor.start(); }

            void thisField() { this.motor.start(); }

            void shadowed() { Engine motor = make(); motor.start(); }

            void inheritedField() { engine.start(); }

            void chain() { part.engine.start(); }

            void inheritedMethod(Sports s) { s.stop(); }

            void outside(List<String> names) { names.size(); }
        }
        """
    ),
}


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    root: Path = tmp_path_factory.mktemp("java_types") / "project"
    root.mkdir()
    write_files(root, FILES)
    return indexed_calls(root)


def _targets(calls: set[tuple[str, str]], caller: str) -> set[str]:
    return {callee for source, callee in calls if source == caller}


@pytest.mark.parametrize(
    ("caller", "callee"),
    [
        ("Car.param", "Engine.start"),  # a parameter
        ("Car.local", "Engine.start"),  # a local: Engine e = ...
        ("Car.inferred", "Engine.start"),  # var e = new Engine()
        ("Car.loop", "Engine.start"),  # an enhanced-for variable
        ("Car.caught", "Failure.report"),  # a catch parameter
        ("Car.field", "Motor.start"),  # a field of the enclosing class
        ("Car.thisField", "Motor.start"),  # this.field
        ("Car.shadowed", "Engine.start"),  # a local shadows the field of the same name
        ("Car.inheritedField", "Engine.start"),  # a field declared in the base class, another file
        ("Car.chain", "Engine.start"),  # a field of a field's type, declared in another file
        ("Car.inheritedMethod", "Base.stop"),  # Sports declares no stop(): the one it inherits (same-package Base)
        ("Car.statics", "Registry.find"),  # a static call Type.m(), though Car has a find() too
    ],
)
def test_a_call_links_to_the_method_of_the_receivers_declared_type(
    calls: set[tuple[str, str]], caller: str, callee: str
) -> None:
    assert callee in _targets(calls, caller)
    wrong = {"Car.start", "Car.find", "Motor.start", "Engine.start", "Motor.report", "Failure.report"} - {callee}
    assert not _targets(calls, caller) & wrong


def test_a_receiver_declared_outside_the_repository_is_not_guessed_by_name(calls: set[tuple[str, str]]) -> None:
    # names is a java.util.List: its size() is not Part.size, the only size() in the repository
    assert "Part.size" not in _targets(calls, "Car.outside")


def test_a_class_without_a_constructor_calls_the_one_it_extends(calls: set[tuple[str, str]]) -> None:
    # the default constructor's body is super() (JLS 8.8.9): the class stands for its constructor
    assert _targets(calls, "Sports") == {"Base"}
    # a declared constructor is not a default one; an exception's base is outside the repository
    assert not _targets(calls, "Truck") and not _targets(calls, "Failure")

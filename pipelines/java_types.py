"""Which class a Java type name written in a file denotes, by Java's own scoping rules.

A simple name is looked up as javac does, simplified: a type declared in the same file, a
single-type import, the file's package, an on-demand import (``pkg.*``, ``Outer.*``), then
``java.lang``. A dotted name is a fully qualified one or a type followed by its nested types.
Used by resolution to reach the method a call binds to through its receiver's declared type
(``pipelines.parsing.declared``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from resources.manifest import SymbolRow

PRIMITIVES = frozenset({"boolean", "byte", "char", "short", "int", "long", "float", "double", "void"})
JAVA_LANG = frozenset({
    "Appendable", "AutoCloseable", "Boolean", "Byte", "CharSequence", "Character", "Class", "ClassLoader",
    "Cloneable", "Comparable", "Double", "Enum", "Error", "Exception", "Float", "Integer", "Iterable", "Long",
    "Math", "Module", "Number", "Object", "Package", "Process", "ProcessBuilder", "Readable", "Record",
    "Runnable", "Runtime", "RuntimeException", "SecurityManager", "Short", "StackTraceElement", "StrictMath",
    "String", "StringBuffer", "StringBuilder", "System", "Thread", "ThreadGroup", "ThreadLocal", "Throwable",
    "Void", "ArithmeticException", "ArrayIndexOutOfBoundsException", "ClassCastException",
    "ClassNotFoundException", "CloneNotSupportedException", "IllegalAccessException",
    "IllegalArgumentException", "IllegalStateException", "IndexOutOfBoundsException",
    "InterruptedException", "NoSuchFieldException", "NoSuchMethodException", "NullPointerException",
    "NumberFormatException", "ReflectiveOperationException", "SecurityException",
    "UnsupportedOperationException", "AssertionError", "LinkageError", "OutOfMemoryError",
    "StackOverflowError", "NoClassDefFoundError", "ExceptionInInitializerError",
})
"""``java.lang``'s types (implicitly imported; never in a corpus but the JDK's)."""


class TypeRef(NamedTuple):
    """What a written type name denotes.

    Attributes:
        symbol: The class (interface, enum, record) in the repository, or None.
        outside: True when the type is known to be declared outside the repository (the JDK, a
            dependency, a primitive, an array); False with no symbol: unknown.
    """

    symbol: SymbolRow | None
    outside: bool


UNKNOWN = TypeRef(None, False)
OUTSIDE = TypeRef(None, True)


class JavaTypeNames:
    """The repository's Java types, and each Java file's package and imports."""

    def __init__(self, symbols: list[SymbolRow], refs: dict[str, tuple[str, dict[str, Any]]],
                 class_kinds: frozenset[str]) -> None:
        java = [s for s in symbols if s.language == "java"]
        types = [s for s in java if s.kind in class_kinds]
        self._qualified = {s.qualified_name: s for s in types}
        self._named: dict[str, list[SymbolRow]] = defaultdict(list)
        self._in_file: dict[tuple[str, str], list[SymbolRow]] = defaultdict(list)
        for s in types:
            self._named[s.name].append(s)
            self._in_file[(s.path, s.name)].append(s)
        # a file's package from its types (a scoped resolution reads all of them, not all its methods;
        # an overload's local name ``A.m#2`` is no suffix of its qualified name)
        self._package = {s.path: s.qualified_name.removesuffix(s.local_name.partition("#")[0]).rstrip(".") for s in types}
        self._packages = set(self._package.values())
        self._single: dict[str, dict[str, str]] = defaultdict(dict)
        self._on_demand: dict[str, list[str]] = defaultdict(list)
        for path, (language, file_refs) in refs.items():
            if language == "java":
                self._read_imports(path, file_refs.get("imports", []))

    def _read_imports(self, path: str, imports: list[dict[str, Any]]) -> None:
        for imp in imports:
            for item in imp.get("items", []):
                if item == "*":
                    self._on_demand[path].append(imp["module"])
                else:
                    self._single[path][item] = f"{imp['module']}.{item}"

    def resolve(self, path: str, written: str, stated: bool = True) -> TypeRef:
        """The type ``written`` (type arguments stripped) denotes in file ``path``.

        Args:
            path: The file the name is written in.
            written: ``Foo``, ``Outer.Inner``, ``java.util.List``, ``Foo[]``, ``int``.
            stated: Whether ``written`` is known to be a type (a declaration states it); when
                False, only a type the file can name is an answer.

        Returns:
            The class, ``OUTSIDE``, or ``UNKNOWN``.
        """
        if written.endswith("]") or written in PRIMITIVES:
            return OUTSIDE
        names = written.split(".")
        found, used = self.resolve_prefix(path, names, stated)
        if found.symbol is not None and used < len(names):
            return UNKNOWN  # no such nested type in the repository
        if found == UNKNOWN and len(names) > 1 and stated and not self._in_corpus_package(written):
            return OUTSIDE  # a qualified name outside the repository's packages (java.util.List)
        return found

    def resolve_prefix(self, path: str, names: list[str], stated: bool = False) -> tuple[TypeRef, int]:
        """The type the longest leading run of ``names`` denotes in file ``path`` (``Outer``,
        ``Inner`` of ``Outer.Inner.f``), and how many names it took.

        Args:
            path: The file the names are written in.
            names: A dotted name, split (``["Html", "VOID_ELEMENTS"]``).
            stated: As for ``resolve``, for the first name.

        Returns:
            The type (``OUTSIDE`` or ``UNKNOWN`` possibly) and the number of names it spans.
        """
        for used in range(len(names), 1, -1):  # a fully qualified name: org.jpype.Foo
            qualified = self._qualified.get(".".join(names[:used]))
            if qualified is not None:
                return TypeRef(qualified, False), used
        found, used = self._simple(path, names[0], stated), 1
        while found.symbol is not None and used < len(names):
            inner = self._qualified.get(f"{found.symbol.qualified_name}.{names[used]}")
            if inner is None:
                break
            found, used = TypeRef(inner, False), used + 1
        return found, used

    def _simple(self, path: str, name: str, stated: bool) -> TypeRef:
        """A simple type name, by the scoping rules in the module docstring."""
        local = self._in_file.get((path, name), [])
        if len(local) == 1:
            return TypeRef(local[0], False)
        if local:
            return UNKNOWN  # two nested types of the file share the name
        imported = self._single[path].get(name)
        if imported is not None:
            return TypeRef(self._qualified.get(imported), imported not in self._qualified)
        for qualified in (f"{self._package.get(path, '')}.{name}".lstrip("."),
                          *(f"{module}.{name}" for module in self._on_demand[path])):
            if qualified in self._qualified:
                return TypeRef(self._qualified[qualified], False)
        if name in JAVA_LANG:
            return OUTSIDE
        named = self._named.get(name, [])
        if len(named) == 1:  # a nested type inherited or named another way the rules miss
            return TypeRef(named[0], False)
        return OUTSIDE if stated and not named else UNKNOWN

    def _in_corpus_package(self, written: str) -> bool:
        """Whether a dotted name could start with one of the repository's packages."""
        return any(written.startswith(f"{package}.") for package in self._packages if package)

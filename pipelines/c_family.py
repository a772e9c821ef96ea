"""C and C++ resolution helpers: ``#include`` targets, and the definition a declaration stands for.

A C/C++ function is often declared in one file (a prototype in a header, a member function in its
class body) and defined in another (the ``.c``/``.cpp`` file). Both are symbols; the parser marks
the declaration (``ParsedSymbol.is_declaration``) and the file's references list it
(``refs["declarations"]``). Resolution then:

* resolves ``#include "a/b.h"`` to the file beside the includer first, else to the repository
  file whose path ends with ``a/b.h`` nearest to the includer (``#include <a/b.h>`` alike: include
  directories are not known), else to an external module;
* prefers, among candidates of one name, a definition to a declaration of the same qualified name;
* turns a declaration it linked to into its definition: the one definition of that qualified name,
  or of several, the one in the declaration's own file, else the one in a file that includes the
  declaration's header (``x.c`` includes ``x.h``); still several, the declaration stays linked.

"The same qualified name" also pairs ``ns::A::f`` declared in its namespace with ``A::f`` defined
after ``using namespace ns;`` (a definition's name that ends the declaration's at a ``::``).
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable

from resources.manifest import SymbolRow
from resources.schemas.code import CALLABLE_KINDS

C_FAMILY = frozenset({"c", "cpp"})
"""The languages resolved here (a ``.h`` header parses as ``cpp``; a ``.c`` file as ``c``)."""

_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")
_SCOPED_NAME = re.compile(r"[A-Za-z_~][\w~]*(?:::[A-Za-z_~][\w~]*)*")


class IncludeIndex:
    """The repository files an ``#include`` names."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._paths = set(paths)
        self._by_name: dict[str, list[str]] = defaultdict(list)
        for path in self._paths:
            self._by_name[posixpath.basename(path)].append(path)
        self._found: dict[tuple[str, str], frozenset[str]] = {}
        """Per (includer's directory, include as written), the files it names: the Linux kernel's
        351,432 includes are 116,738 such pairs."""

    def resolve(self, importer: str, written: str) -> frozenset[str]:
        """The files ``#include <written>`` or ``#include "written"`` in ``importer`` names.

        Args:
            importer: The including file's repo-relative path.
            written: The included path as written, without its quotes or brackets.

        Returns:
            The file beside the includer; else the files whose path ends with ``written``, those
            sharing the longest directory prefix with the includer; else nothing.
        """
        key = (posixpath.dirname(importer), written)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = frozenset(self._resolve(key[0], written))
        return found

    def _resolve(self, directory: str, written: str) -> set[str]:
        """``resolve`` for an includer in ``directory`` (only its directory decides)."""
        written = written.strip().replace("\\", "/")
        if not written:
            return set()
        beside = posixpath.normpath(posixpath.join(directory, written))
        if beside in self._paths:
            return {beside}
        tail = "/".join(part for part in written.split("/") if part not in ("", ".", ".."))
        candidates = [
            p for p in self._by_name.get(posixpath.basename(tail), []) if p == tail or p.endswith("/" + tail)
        ]
        if len(candidates) <= 1:
            return set(candidates)
        shared = {p: _common_dirs(directory, p) for p in candidates}
        best = max(shared.values())
        return {p for p, n in shared.items() if n == best}


def _common_dirs(directory: str, path: str) -> int:
    """How many leading directories a directory and a file's path share."""
    count = 0
    for x, y in zip(directory.split("/") if directory else [], path.split("/")[:-1], strict=False):
        if x != y:
            break
        count += 1
    return count


def _defines(definition: str, declaration: str) -> bool:
    """Whether a definition's qualified name names a declaration's: the same, or its end at a
    ``::`` (``A::f`` defined after ``using namespace ns;`` for ``ns::A::f``)."""
    return definition == declaration or declaration.endswith("::" + definition)


def _definition_order(symbol: SymbolRow) -> int:
    """1 for a name's first definition in a file, n for its ``#n``-th."""
    _, _, count = symbol.local_name.rpartition("#")
    return int(count) if count.isdigit() else 1


class Definitions:
    """The C/C++ declarations of a repository and the definitions they stand for."""

    def __init__(self, symbols: Iterable[SymbolRow], declared: set[str], includes: dict[str, set[str]]) -> None:
        """Index the repository's C/C++ function definitions by qualified and simple name.

        Args:
            symbols: Every symbol of the repository.
            declared: The ids of the symbols that only declare a function.
            includes: Per C/C++ file, the repository files it includes (filled before
                ``definition_of`` is asked).
        """
        self.declared = declared
        self._includes = includes
        self._by_name: dict[str, list[SymbolRow]] = defaultdict(list)
        self._by_simple_name: dict[str, list[SymbolRow]] = defaultdict(list)
        for symbol in symbols:
            if symbol.language in C_FAMILY and symbol.kind in CALLABLE_KINDS and symbol.id not in declared:
                self._by_name[symbol.qualified_name].append(symbol)
                self._by_simple_name[symbol.name].append(symbol)

    def prefer_definitions(self, candidates: list[SymbolRow]) -> list[SymbolRow]:
        """The candidates without the declarations whose qualified name one of them defines."""
        if len(candidates) < 2 or not any(c.id in self.declared for c in candidates):
            return candidates
        defined = [c.qualified_name for c in candidates if c.id not in self.declared]
        return [
            c for c in candidates
            if c.id not in self.declared or not any(_defines(name, c.qualified_name) for name in defined)
        ]

    def definition_of(self, symbol: SymbolRow) -> SymbolRow:
        """The definition a declaration stands for (see the module docstring), else itself."""
        if symbol.id not in self.declared:
            return symbol
        found = self._by_name.get(symbol.qualified_name) or [
            d for d in self._by_simple_name.get(symbol.name, []) if _defines(d.qualified_name, symbol.qualified_name)
        ]
        if len(found) > 1:
            found = [d for d in found if d.path == symbol.path] or [
                d for d in found if symbol.path in self._includes.get(d.path, ())
            ] or found
        if len(found) > 1 and len({d.path for d in found}) == 1:
            return max(found, key=_definition_order)  # overloads: as for any name defined twice in one place
        return found[0] if len(found) == 1 else symbol


def constructs(symbol: SymbolRow, cls: SymbolRow) -> bool:
    """C++: whether ``symbol`` is a constructor of ``cls``, wherever it is defined (``A::A()`` in
    ``a.cpp`` for ``class A`` in ``a.h``)."""
    return (
        symbol.kind == "constructor"
        and symbol.language in C_FAMILY
        and symbol.qualified_name == f"{cls.qualified_name}::{symbol.name}"
    )


def qualified_callee(callee: str) -> str | None:
    """``A::f``, ``ns::A<T>::f``, ``::f`` -> the scoped name without template arguments or a leading
    ``::``; None for a callee that is not a plain scoped name (``a.b``, ``f``, ``A::make().run``)."""
    if "::" not in callee:
        return None
    name = callee
    while "<" in name:
        stripped = _TEMPLATE_ARGS.sub("", name)
        if stripped == name:
            return None
        name = stripped
    name = name.removeprefix("::")
    return name if _SCOPED_NAME.fullmatch(name) else None


def class_of(caller: SymbolRow) -> str | None:
    """The qualified name of the class a C++ member function belongs to (``ns::A`` for
    ``ns::A::f``), or None for a free function."""
    if not caller.container:
        return None
    owner, _, _ = caller.qualified_name.rpartition("::")
    return owner or None

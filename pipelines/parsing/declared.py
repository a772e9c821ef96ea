"""Declared types in scope: what type the source states for the receiver of a call.

A language whose query captures declarations (role ``decl``, see ``captures``) gets, for each
call whose receiver starts with a declared name, the type that name's declaration states
(``CallSite.receiver_type``): a parameter, a local (``var x = new T()`` and ``var x = (T) e``
included), a loop or catch variable, a resource, or a field of a type declared in the file
(``this.f`` too); ``((T) e).m()`` states ``T``. The innermost declaration visible at the call
wins, so a local shadows a field of the same name. ``var`` stands for a declared name whose type
the source does not state (a lambda's inferred parameter, ``var x = f()``): a variable, of
unknown type. Each type's fields and their stated types go on its symbol (``ParsedSymbol.fields``),
so that resolution can follow ``x.f.g.m()`` across files and reach inherited fields, and turn the
type into the class that declares the method (``pipelines.java_types``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

UNSTATED = "var"
"""The receiver is a variable whose type the source does not state (or the file cannot follow)."""


class Declaration(NamedTuple):
    """A name whose declaration states its type.

    Attributes:
        name: The declared name.
        type: The stated type, type arguments stripped (``Map``, ``a.b.Outer.Inner``, ``Foo[]``),
            or ``var`` (``UNSTATED``).
        start: First byte where the name is visible (a field: its whole class body).
        end: The byte one past its scope.
        owner: For a field, the simple name of the type declaring it; None for a local or a
            parameter.
    """

    name: str
    type: str
    start: int
    end: int
    owner: str | None


class Receiver(NamedTuple):
    """A call's receiver as far as declarations can type it (``this.f.g`` in ``this.f.g.m()``).

    Attributes:
        variable: The declared name it starts with (``f``), or None for a cast.
        cast: The type a cast states (``T`` in ``((T) e).m()``), or None.
        member: Whether the name must be a field (``this.f``).
        fields: The fields read after it, in order (``("g",)``).
    """

    variable: str | None
    cast: str | None
    member: bool
    fields: tuple[str, ...]


class DeclaredTypes:
    """One file's declarations, asked by name and position."""

    def __init__(self, declarations: list[Declaration]) -> None:
        self._by_name: dict[str, list[Declaration]] = defaultdict(list)
        for declaration in declarations:
            self._by_name[declaration.name].append(declaration)

    def variable(self, name: str, position: int, member: bool = False) -> Declaration | None:
        """The innermost declaration of ``name`` visible at ``position`` (fields only when
        ``member``)."""
        visible = [
            d for d in self._by_name.get(name, ())
            if d.start <= position < d.end and (d.owner is not None or not member)
        ]
        return max(visible, key=lambda d: (d.start, -d.end), default=None)

    def receiver_type(self, receiver: Receiver, position: int) -> str | None:
        """The stated type of the name or cast ``receiver`` starts with at ``position``, or None
        when it starts with neither (the fields it goes on to read are resolution's)."""
        if receiver.cast is not None:
            return receiver.cast
        declared = self.variable(receiver.variable or "", position, receiver.member)
        return None if declared is None else declared.type


def fields_by_type(declarations: list[Declaration]) -> dict[tuple[int, int], dict[str, str]]:
    """The fields each type declares, keyed by the type declaration's byte range."""
    fields: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
    for d in declarations:
        if d.owner is not None:
            fields[(d.start, d.end)][d.name] = d.type
    return fields

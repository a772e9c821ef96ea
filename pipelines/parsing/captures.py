"""The capture vocabulary of ``queries/<language>.scm`` and how a pattern's role is derived.

Each language has one query file; every pattern in it plays exactly one role, recognised from
the capture names it uses:

Definitions (role ``def``)
    ``@def.<kind>`` the definition node (kind: one of ``resources.schemas.code.SymbolKind``:
    function, method, constructor, class, record, interface, annotation, struct, trait, enum,
    type: a named type or alias of any other underlying type, as Go's
    ``type Labels map[string]string`` or TypeScript's ``type Handler = (e: string) => void``); ``@name`` its identifier; optional ``@fn`` the function node when it differs
    from the definition node (``const f = async (x) => ...``: the definition is the declaration,
    the function is the arrow function); optional ``@body`` an explicit body node (default: the
    ``body`` field of ``@fn`` or of the definition); optional ``@receiver`` (Go: the receiver
    type; C++: the qualified name of an out-of-line member, ``A::f``), which names the container
    (``LanguageHooks.receiver_container``). A ``function`` whose nearest enclosing definition is a
    type (or a Rust impl block) is reported as a ``method``.
Inheritance (role ``inherit``)
    ``@inherit`` the same node as the definition's ``@def.*``; ``@extends`` or ``@implements``
    one base type (one match per base).
Impl blocks (role ``impl``, Rust)
    ``@impl`` the block (a container, not a symbol); ``@impl.type`` the implementing type;
    optional ``@impl.trait`` the implemented trait.
Calls (role ``call``)
    ``@call.callee`` the called expression, or ``@call`` + ``@call.name`` (Java
    ``method_invocation``: the callee runs from the call start to the end of the name), or
    ``@call.new`` the constructed type of ``new T(...)``; ``@call.args`` the argument list.
Declared types (role ``decl``, see ``declared``)
    ``@decl.name`` a declared name, ``@decl.type`` its stated type (absent: not stated),
    optional ``@decl.value`` its initializer; ``@decl.scope`` the node it is visible in (from the
    name on: a local, a parameter), or ``@decl.member`` the type declaration of a field (visible
    throughout) with ``@decl.owner`` that type's name.
Imports (role ``import``)
    ``@import`` an import statement, split into ``ImportRef``s by the language hook.
Namespaces (role ``namespace``)
    ``@namespace`` a declaration whose body holds its members (C# ``namespace A { }``, Rust
    ``mod a { }``, TypeScript ``namespace A { }``), or ``@namespace.file`` one that covers the
    rest of the file (Java ``package``, C# ``namespace A;``); ``@namespace.name`` its name. The
    names enclosing a definition, joined, are its ``namespace``; they are not containers.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tree_sitter import Query

_CAPTURE = re.compile(r"@([A-Za-z_][\w.]*)")


class PatternRole(NamedTuple):
    """What one query pattern extracts.

    Attributes:
        role: One of ``def``, ``inherit``, ``impl``, ``call``, ``decl``, ``import``,
            ``namespace`` or ``""`` (unused).
        kind: For ``def`` patterns, the declared symbol kind; for ``call`` patterns, the capture
            naming the callee (``call.callee``, ``call.new`` or ``call.name``); for ``decl``
            patterns, the capture of the scope (``decl.scope`` or ``decl.member``); for
            ``namespace`` patterns, the capture of the declaration (``namespace`` or
            ``namespace.file``); else ``""``.
    """

    role: str
    kind: str


def pattern_roles(query: Query, source: str) -> list[PatternRole]:
    """Classify every pattern of a compiled query by the capture names in its source text.

    Args:
        query: The compiled query.
        source: The query source it was compiled from.

    Returns:
        One ``PatternRole`` per pattern index.
    """
    encoded = source.encode("utf-8")
    roles: list[PatternRole] = []
    for i in range(query.pattern_count):
        text = encoded[
            query.start_byte_for_pattern(i) : query.end_byte_for_pattern(i)
        ].decode()
        names = set(_CAPTURE.findall(text))
        kind = next((n[4:] for n in names if n.startswith("def.")), "")
        if kind:
            roles.append(PatternRole("def", kind))
        elif names & {"call.callee", "call.new", "call.name"}:
            callee = next(
                n for n in ("call.callee", "call.new", "call.name") if n in names
            )
            roles.append(PatternRole("call", callee))
        elif "decl.name" in names:
            roles.append(PatternRole("decl", "decl.member" if "decl.member" in names else "decl.scope"))
        elif "inherit" in names:
            roles.append(PatternRole("inherit", ""))
        elif "impl" in names:
            roles.append(PatternRole("impl", ""))
        elif "import" in names:
            roles.append(PatternRole("import", ""))
        elif names & {"namespace", "namespace.file"}:
            roles.append(PatternRole("namespace", "namespace.file" if "namespace.file" in names else "namespace"))
        else:
            roles.append(PatternRole("", ""))
    return roles

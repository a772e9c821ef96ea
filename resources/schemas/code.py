"""Models of parsed source code: symbols, imports, call sites and a parsed file.

These are produced by ``pipelines.parsing`` and consumed by the indexer, the vector store
payloads and the graph loader. Qualified names here are *file-local*: ``Session.request`` for a
method, ``outer.inner`` for a nested function. The indexer prefixes the module, package or
namespace to make the global qualified name as the language writes it
(``pipelines.qualified_names``), and the deterministic id is derived from
``(file_path, qualified_name)``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from resources.schemas.base import Schema

SymbolKind = Literal[
    "function", "method", "constructor", "class", "record", "interface", "annotation", "struct", "trait", "enum", "type",
]
"""Kinds of code symbol extracted by the parsers, as each language calls them (a Java or C#
``record``, a Java ``annotation`` type, a ``constructor``; ``type``: a named type or alias of any
other underlying type, as Go's ``type Labels map[string]string``)."""

CALLABLE_KINDS: frozenset[str] = frozenset({"function", "method", "constructor"})
"""The kinds that are code one calls (duplicates, outlines and evaluation look at these)."""

CLASS_KINDS: frozenset[str] = frozenset({"class", "record", "interface", "annotation", "struct", "trait", "enum", "type"})
"""The kinds that are types (a ``Class`` node in the graph; they contain methods)."""

Language = Literal["python", "javascript", "typescript", "tsx", "java", "go", "rust", "csharp", "c", "cpp"]
"""Languages the parsers support (``tsx`` is TypeScript with JSX; ``.jsx`` parses as javascript;
``.h`` headers parse as ``cpp``, see ``pipelines.parsing.languages``)."""


class ParsedSymbol(Schema):
    """A function, method or type definition found in one file.

    Attributes:
        kind: What the symbol is. Functions defined inside a class/struct/impl/trait body are
            ``method`` (constructors ``constructor`` where the language declares them apart);
            functions nested in functions are ``function``.
        name: The bare identifier (``request``).
        qualified_name: File-local dotted path of containers and name (``Session.request``).
        signature: The declaration line(s) up to the body, whitespace collapsed
            (``def request(self, method, url, **kwargs)``).
        docstring: The docstring or doc comment text with comment markers stripped, or None.
        start_line: 1-based first line of the definition (decorators/attributes included).
        end_line: 1-based last line of the definition.
        container: File-local qualified name of the enclosing class/struct/trait/function, or None.
        namespace: The package/namespace/inline module the file declares around the symbol, as
            written (Java ``package com.acme``, C# ``namespace A.B``, nested ones joined: ``A.B``;
            Rust ``mod a { mod b { } }``: ``a::b``; TypeScript ``namespace A``; C++
            ``namespace a { namespace b { } }``: ``a::b``), or None.
        is_async: True for async functions/methods.
        is_declaration: True for a function declared without its body where the language keeps
            the two apart (C/C++: a prototype, a member function declared in its class body,
            pure virtual ones included); resolution links calls to the definition when the
            repository has it.
        extends: Base classes / super types as written (``BaseAdapter``, ``ns.Base``).
        implements: Implemented interfaces / traits as written.
        fields: A type's fields and their declared types as written, type arguments stripped
            (Java; ``var`` where not stated), for resolving calls through them.
        code: The exact source text of the definition.
    """

    kind: SymbolKind
    name: str
    qualified_name: str
    signature: str
    docstring: str | None = None
    start_line: int
    end_line: int
    container: str | None = None
    namespace: str | None = None
    is_async: bool = False
    is_declaration: bool = False
    extends: list[str] = Field(default_factory=list)
    implements: list[str] = Field(default_factory=list)
    fields: dict[str, str] = Field(default_factory=dict)
    code: str = ""


class ImportRef(Schema):
    """One import statement (or one imported module of a multi-module statement).

    Attributes:
        module: The module/package/path imported as written (``os.path``, ``./util``,
            ``java.util.List``'s package ``java.util``, ``std::collections``).
        items: Names imported from the module (``["join", "exists"]``); empty for a whole-module
            import.
        alias: The local alias if any (``np`` for ``import numpy as np``).
        line: 1-based line of the statement.
    """

    module: str
    items: list[str] = Field(default_factory=list)
    alias: str | None = None
    line: int


class CallSite(Schema):
    """A call expression inside the file.

    Attributes:
        caller: File-local qualified name of the innermost enclosing function/method, or None
            when the call is at module/class level.
        callee: The called expression as written, without arguments (``self.send``,
            ``requests.get``, ``fmt.Println``, ``Vec::new``).
        callee_name: The last identifier of the callee (``send``, ``get``, ``Println``, ``new``).
        line: 1-based line of the call.
        receiver_type: The type the source declares for the receiver (Java: the parameter,
            local, field or cast ``callee`` starts with, before the fields it reads; type
            arguments stripped; ``var`` when the receiver is a variable whose type is not
            stated), or None (no declared receiver, or a language that types none).
    """

    caller: str | None = None
    callee: str
    callee_name: str
    line: int
    receiver_type: str | None = None


class ParsedFile(Schema):
    """Everything extracted from one source file.

    Attributes:
        path: Repo-relative POSIX path.
        language: The language the file was parsed as.
        symbols: Definitions in source order (by start line, then nesting).
        imports: Import statements in source order.
        calls: Call sites in source order.
        error_count: Number of syntax-error regions tree-sitter reported (0 for a clean parse);
            what parses is still extracted.
        module_docstring: The file's leading docstring/doc comment, if any.
    """

    path: str
    language: Language
    symbols: list[ParsedSymbol] = Field(default_factory=list)
    imports: list[ImportRef] = Field(default_factory=list)
    calls: list[CallSite] = Field(default_factory=list)
    error_count: int = 0
    module_docstring: str | None = None

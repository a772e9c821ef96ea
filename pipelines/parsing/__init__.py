"""Source parsing: tree-sitter grammars + per-language queries -> ``ParsedFile``.

Public API:
    ``language_for_path(path)``: the language of a file from its extension, or None.
    ``parse_source(path, source, language, timeout_s=10.0)``: symbols, imports and calls.
    ``ParseTimeout``: raised when one file's parse exceeds its time limit.

Extraction rules (documented heuristics):
    * Qualified names are file-local dotted container paths; namespaces/packages/modules
      (Java ``package``, C# ``namespace``, TS ``namespace``, Rust inline ``mod``, C++
      ``namespace``) are not containers: the ones around a symbol, joined, are its ``namespace``
      (``Shop.Inventory``, ``a::b``). Go methods use the receiver's base type (``Server.Start``);
      Rust impl blocks are not symbols, their functions get the implementing type as container
      (``Circle.new``); a C++ member defined out of line gets its qualifier as container
      (``void geo::Shape::area()`` -> ``geo.Shape.area``: the parser cannot tell a namespace from
      a class there, so ``void ns::f() {}`` is a method of ``ns``).
    * C and C++ (``.h`` parses as C++, see ``languages``): functions, prototypes and member
      functions declared in their class (``is_declaration``), function-like macros (functions),
      structs/unions (``struct``), enums, typedefs and ``using`` aliases (``type``; a typedef of
      a struct body is that ``struct``, named by the typedef), C++ classes; a template is its
      function or class. A typeless C++ function named after its class is a ``constructor``; a
      destructor is a method ``~A``. Every base class is ``extends``.
    * A function directly in a class/interface/struct/trait/enum/impl body is a ``method``;
      body-less interface/trait/abstract members are extracted as methods too. Functions nested
      in functions are ``function`` with the enclosing function as container.
    * Names bound to arrow/function expressions are functions (class fields: methods); their
      signature runs from the declaration start to the arrow: ``const f = async (x) =>``.
    * ``extends``/``implements`` hold base names with type arguments stripped
      (``BaseService<Order>`` -> ``BaseService``). C#: every base-list type goes to ``extends``
      unless its name matches ``^I[A-Z]`` (then ``implements``). Go: embedded types are
      ``extends``. Rust: supertraits are ``extends`` of the trait; ``impl Trait for Type`` adds
      ``Trait`` to ``implements`` of ``Type`` when ``Type`` is defined in the same file.
    * Docstrings: Python body strings (``inspect.cleandoc``); otherwise the doc comment block
      directly above the definition or its decorators (``/** */`` for JS/TS/Java, ``///`` for
      Rust/C#, any ``//`` block for Go, any comment for C/C++). C# ``<summary>`` tags are
      removed, other XML is kept.
    * Calls: see ``calls`` (inner argument lists shortened to ``()``); Rust macros and anonymous
      immediately-invoked functions are not calls; Java's ``this(...)``/``super(...)`` are; a C
      macro invocation looks like a call and is one; C++ ``new T(...)`` is a call of ``T``, a base
      or member initializer (``: Base(x)``) is not, though the calls inside it are the
      constructor's.
      The caller is the innermost enclosing named function's body. Java calls carry the
      declared type of their receiver, and Java types their fields' (``declared``).
    * Imports: one ``ImportRef`` per statement (per module for multi-module statements; a C/C++
      ``#include`` names the path inside its quotes or brackets); the
      ``alias`` of a multi-name import is set only when exactly one name is imported (or from
      a JS default/namespace binding).
    * Not extracted: anonymous functions/lambdas/closures, object-literal methods, properties,
      fields, type aliases, namespaces/modules. Qualified names can repeat within a file
      (overloads, property setters, conditional definitions).

Cost model: one parse (with a read + progress callback for the time limit), one pass of one
compiled query, then Python work proportional to the number of captures. ``Node.parent`` and
sibling lookups are O(depth) in tree-sitter; they are used a few times per definition only.
"""

from resources.schemas.code import Language

from pipelines.parsing.engine import parse_source
from pipelines.parsing.errors import ParseTimeout
from pipelines.parsing.languages import EXTENSIONS, language_for_path

__all__ = [
    "EXTENSIONS",
    "Language",
    "ParseTimeout",
    "language_for_path",
    "parse_source",
]

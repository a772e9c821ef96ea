"""C and C++ hooks: any comment block directly above documents, ``#include`` directives,
prototypes and in-class declarations marked as declarations, C++ constructors and out-of-line
members.

What the queries cannot say is decided here from the node's surroundings:

* a prototype counts at file, namespace, ``extern "C"`` or class level only (``T x(y);`` in a
  function body is a local variable, however it parses);
* a struct/union/enum inside a ``typedef`` is named by the typedef (its own pattern), not twice;
* a C++ function without a return type is a constructor when it is named after its class (in the
  class body, or ``A::A`` out of line), else a plain function (``TEST(A, b) { }``); a typeless
  *declaration* that is not a constructor is a macro invocation (``DISALLOW_COPY(A);``) and is
  dropped.
"""

from __future__ import annotations

from tree_sitter import Node

from pipelines.parsing.hooks.base import LanguageHooks, text_of
from resources.schemas.code import ImportRef

_PREPROC_BLOCKS = frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"})
_PROTOTYPE_SCOPES = frozenset(
    {"translation_unit", "declaration_list", "linkage_specification", "field_declaration_list", "template_declaration"}
)
_TAGGED = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_DECLARATIONS = frozenset({"declaration", "field_declaration"})
_FUNCTIONS = _DECLARATIONS | {"function_definition"}
_CLASS_BODY_OWNERS = frozenset({"class_specifier", "struct_specifier", "union_specifier"})


class CHooks(LanguageHooks):
    """Hooks for C (and the base of C++'s)."""

    wrapper_types = frozenset({"template_declaration", "linkage_specification", "declaration", "field_declaration"})

    def is_doc_comment(self, head: str) -> bool:
        """Any comment directly above a declaration documents it (C has no doc-comment syntax of
        its own; ``/** */``, ``///`` and plain ``/* */``/``//`` blocks are all used)."""
        return True

    def signature_start(self, node: Node) -> int:
        """From the wrapper on: ``template <typename T>``, ``extern "C"``, ``static struct``."""
        return self.outer_node(node).start_byte

    def signature_end(self, node: Node, body: Node | None) -> int:
        """Before the body, and before a constructor's member initializer list."""
        if body is not None:
            prev = body.prev_sibling
            while prev is not None and prev.type in self.comment_types:
                prev = prev.prev_sibling
            if prev is not None and prev.type == "field_initializer_list":
                before = prev.prev_sibling
                return before.end_byte if before is not None else prev.start_byte
        return super().signature_end(node, body)

    def call_scope(self, fn: Node, body: Node | None) -> Node:
        """A constructor's member initializer list calls too (``: name_(std::move(name))``)."""
        if body is not None:
            prev = body.prev_named_sibling
            if prev is not None and prev.type == "field_initializer_list":
                return fn
        return super().call_scope(fn, body)

    def definition_kind(self, kind: str, node: Node, name: Node, source: bytes) -> str | None:
        """The kind of a captured definition, or None to drop it (see the module docstring).

        Args:
            kind: The kind the query pattern declares.
            node: The ``@def.*`` node.
            name: The ``@name`` node.
            source: The file's bytes.
        """
        node_type = node.type
        if node_type in _TAGGED:
            parent = node.parent
            return None if parent is not None and parent.type == "type_definition" else kind
        if node_type in _DECLARATIONS and not _at_declaration_level(node):
            return None
        if (
            node_type in _FUNCTIONS
            and node.child_by_field_name("type") is None
            and name.type not in ("destructor_name", "operator_name")
        ):
            return self.typeless_kind(kind, node, name, source)
        return kind

    def typeless_kind(self, kind: str, node: Node, name: Node, source: bytes) -> str | None:
        """A function without a return type: a K&R definition (``main() { }``) is a function, a
        typeless declaration is a macro invocation (``FOO(bar);``) and is dropped."""
        return kind if node.type == "function_definition" else None

    def is_declaration(self, node: Node) -> bool:
        """A prototype or an in-class member declaration (its definition is elsewhere)."""
        return node.type in _DECLARATIONS

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """``#include "a/b.h"`` and ``#include <a/b.h>`` -> module ``a/b.h`` (a macro include is
        skipped)."""
        path = node.child_by_field_name("path")
        if path is None or path.type not in ("string_literal", "system_lib_string"):
            return []
        written = text_of(path, source).strip()
        module = written[1:-1].strip() if len(written) >= 2 else ""
        if not module:
            return []
        return [ImportRef(module=module, line=node.start_point[0] + 1)]


class CppHooks(CHooks):
    """Hooks for C++: ``::`` namespaces, out-of-line members, constructors."""

    namespace_separator = "::"

    def typeless_kind(self, kind: str, node: Node, name: Node, source: bytes) -> str | None:
        """A constructor when named after its class (``A::A``, or ``A(...)`` in the body of ``A``);
        else a function definition stays one and a declaration (a macro invocation) is dropped."""
        if kind == "method":  # out of line: `A::A` names its class last
            scope = _last_scope(name)
            same = scope is not None and text_of(scope, source) == text_of(name, source)
            return "constructor" if same else kind
        owner = _enclosing_class_name(node)
        if owner is not None and text_of(owner, source) == text_of(name, source):
            return "constructor"
        return super().typeless_kind(kind, node, name, source)

    def receiver_container(self, receiver: Node, source: bytes) -> str:
        """``ns::A<T>::f`` -> ``ns.A`` (the qualifiers, template arguments dropped)."""
        parts: list[str] = []
        node: Node | None = receiver
        while node is not None and node.type == "qualified_identifier":
            scope = node.child_by_field_name("scope")
            if scope is not None:
                if scope.type == "template_type":
                    scope = scope.child_by_field_name("name") or scope
                parts.append("".join(text_of(scope, source).split()))
            node = node.child_by_field_name("name")
        return ".".join(parts)


def _at_declaration_level(node: Node) -> bool:
    """Whether a declaration sits at file, namespace, ``extern "C"``, template or class level
    (through ``#if`` blocks), not in a function body."""
    parent = node.parent
    while parent is not None and parent.type in _PREPROC_BLOCKS:
        parent = parent.parent
    return parent is not None and parent.type in _PROTOTYPE_SCOPES


def _last_scope(name: Node) -> Node | None:
    """The qualifier right before a qualified name's last part (``A`` in ``ns::A::A``), with its
    template arguments dropped."""
    parent = name.parent
    scope = parent.child_by_field_name("scope") if parent is not None else None
    if scope is not None and scope.type == "template_type":
        return scope.child_by_field_name("name")
    return scope


def _enclosing_class_name(node: Node) -> Node | None:
    """The name of the class whose body holds ``node`` (through a template declaration and ``#if``
    blocks), or None."""
    parent = node.parent
    while parent is not None and (parent.type in _PREPROC_BLOCKS or parent.type == "template_declaration"):
        parent = parent.parent
    if parent is None or parent.type != "field_declaration_list":
        return None
    owner = parent.parent
    if owner is None or owner.type not in _CLASS_BODY_OWNERS:
        return None
    name = owner.child_by_field_name("name")
    if name is not None and name.type == "template_type":
        return name.child_by_field_name("name")
    return name

"""Java hooks: Javadoc, annotations inside ``modifiers``, import declarations, declared types."""

from __future__ import annotations

import re

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.declared import UNSTATED, Receiver
from pipelines.parsing.hooks.base import LanguageHooks, text_of
from pipelines.parsing.text import strip_type_args

_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")
_CAST = re.compile(r"\(\((?P<type>[A-Za-z_$][\w.$]*)(?:<[^()]*>)?\)[\w.$]+(?:\(\))?\)(?P<fields>(?:\.[A-Za-z_$][\w$]*)*)")
"""A cast receiver as ``calls`` writes it: ``((T)e)``, ``((T<A>)a.b)``, ``((T)f())``, then field reads."""
_INFERRED_FROM = {"object_creation_expression", "cast_expression"}
"""Initializers whose ``type`` field states the type of a ``var``."""


class JavaHooks(LanguageHooks):
    """Hooks for Java."""

    decorator_types = frozenset({"marker_annotation", "annotation"})
    modifier_types = frozenset({"modifiers"})
    comment_types = frozenset({"block_comment", "line_comment"})

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """``import a.b.C;`` -> (a.b, [C]); ``import a.b.*;`` -> (a.b, [*]); static alike."""
        path = None
        wildcard = False
        for child in node.named_children:
            if child.type in ("scoped_identifier", "identifier"):
                path = child
            elif child.type == "asterisk":
                wildcard = True
        if path is None:
            return []
        text = "".join(text_of(path, source).split())
        if wildcard:
            module, items = text, ["*"]
        elif "." in text:
            module, item = text.rsplit(".", 1)
            items = [item]
        else:
            module, items = text, []
        return [ImportRef(module=module, items=items, line=node.start_point[0] + 1)]

    def declared_type(self, type_node: Node | None, value: Node | None, source: bytes) -> str:
        """Java: ``Foo<A>`` -> ``Foo``; ``Foo[]`` stays an array; ``var`` takes the type of a
        ``new T(...)`` or ``(T) e`` initializer; a multi-catch (``A | B``) is not one type."""
        if type_node is None or type_node.type == "catch_type" and type_node.named_child_count != 1:
            return UNSTATED
        if type_node.type == "array_type":
            element = type_node.child_by_field_name("element")
            return f"{self.declared_type(element, None, source)}[]" if element is not None else UNSTATED
        written = strip_type_args(text_of(type_node, source))
        if written == "var":
            inferred = value.child_by_field_name("type") if value is not None and value.type in _INFERRED_FROM else None
            return UNSTATED if inferred is None else self.declared_type(inferred, None, source)
        return written or UNSTATED

    def receiver(self, callee: str) -> Receiver | None:
        """See ``receiver_of``."""
        return receiver_of(callee)


def receiver_of(callee: str) -> Receiver | None:
    """A Java call's receiver as a chain of names: ``x.f.m`` -> x then f; ``this.f.m`` -> field f;
    ``((T)e).f.m`` -> T then f; None when it is no such chain (a call result, an index,
    ``super``, no receiver)."""
    receiver = callee.rpartition(".")[0]
    if receiver.startswith("(("):
        cast = _CAST.fullmatch(receiver)
        if cast is None:
            return None
        return Receiver(None, strip_type_args(cast["type"]), False, tuple(cast["fields"].split(".")[1:]))
    names = receiver.split(".")
    if not receiver or not all(_IDENTIFIER.fullmatch(n) for n in names) or names[0] == "super":
        return None
    if names[0] == "this":
        return Receiver(names[1], None, True, tuple(names[2:])) if len(names) > 1 else None
    return Receiver(names[0], None, False, tuple(names[1:]))

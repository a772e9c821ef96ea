"""Python hooks: body docstrings, ``decorated_definition`` wrappers, import statements."""

from __future__ import annotations

import ast
import warnings

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.text import cleandoc
from pipelines.parsing.hooks.base import LanguageHooks, first_named, text_of

_STRING_PREFIX_CHARS = "rRbBuUfFtT"


def string_literal_value(text: str) -> str | None:
    """Return the value of a Python string literal as written, or None if it is not a str.

    Byte strings and f-/t-strings are not docstrings (Python ignores them too).

    Args:
        text: The literal's source text.

    Returns:
        The string value.
    """
    prefix_len = 0
    while prefix_len < len(text) and text[prefix_len] in _STRING_PREFIX_CHARS:
        prefix_len += 1
    prefix = text[:prefix_len].lower()
    if any(c in prefix for c in "bft"):
        return None
    quoted = text[prefix_len:]
    q = 3 if quoted[:3] in ('"""', "'''") else 1
    if len(quoted) < 2 * q:
        return None
    inner = quoted[q:-q] if quoted.endswith(quoted[:q]) else quoted[q:]
    if "\\" not in inner or "r" in prefix:
        return inner
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return inner
    return value if isinstance(value, str) else None


def first_string_statement(block: Node | None, source: bytes) -> str | None:
    """Return the cleaned docstring of a module/class/function body.

    Args:
        block: The body (``block`` or ``module``) node.
        source: The file's bytes.

    Returns:
        ``inspect.cleandoc`` of the first statement when it is a plain string, else None.
    """
    stmt = first_named(block)
    while stmt is not None and stmt.type == "comment":
        stmt = stmt.next_named_sibling
    if stmt is not None:
        if stmt.type != "expression_statement" or stmt.named_child_count != 1:
            return None
        literal = stmt.named_child(0)
        if literal is None or literal.type != "string":
            return None
        value = string_literal_value(text_of(literal, source))
        if value is None:
            return None
        return cleandoc(value) or None
    return None


class PythonHooks(LanguageHooks):
    """Hooks for Python."""

    wrapper_types = frozenset({"decorated_definition"})
    async_capable = True

    def locate(self, node: Node, source: bytes) -> tuple[Node, list[Node]]:
        """Start at the decorators; Python documents with docstrings, not comments."""
        return self.outer_node(node), []

    def docstring(
        self, body: Node | None, docs: list[Node], source: bytes
    ) -> str | None:
        """First string statement of the body."""
        return first_string_statement(body, source)

    def module_docstring(
        self, root: Node, source: bytes, claimed: set[int]
    ) -> str | None:
        """First string statement of the module."""
        return first_string_statement(root, source)

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """``import a.b as c, d`` -> one ref per module; ``from x import y as z, w`` -> one ref.

        For ``from`` imports ``alias`` is set only when exactly one name is imported.
        """
        line = node.start_point[0] + 1
        if node.type == "import_statement":
            refs = []
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    name = child.child_by_field_name("name")
                    alias = child.child_by_field_name("alias")
                    refs.append(
                        ImportRef(
                            module=text_of(name, source) if name else "",
                            alias=text_of(alias, source) if alias else None,
                            line=line,
                        )
                    )
                else:
                    refs.append(ImportRef(module=text_of(child, source), line=line))
            return refs
        if node.type == "future_import_statement":
            module = "__future__"
        else:
            mod = node.child_by_field_name("module_name")
            module = "".join(text_of(mod, source).split()) if mod else ""
        items: list[str] = []
        aliases: list[str | None] = []
        for child in node.named_children:
            if child.type == "wildcard_import":
                items.append("*")
                aliases.append(None)
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = child.child_by_field_name("name")
                alias = child.child_by_field_name("alias")
                items.append(text_of(name, source) if name else "")
                aliases.append(text_of(alias, source) if alias else None)
            else:
                items.append(text_of(child, source))
                aliases.append(None)
        return [
            ImportRef(
                module=module,
                items=items,
                alias=aliases[0] if len(items) == 1 else None,
                line=line,
            )
        ]

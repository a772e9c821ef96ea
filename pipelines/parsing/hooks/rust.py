"""Rust hooks: ``///`` doc comments, ``#[attr]`` siblings, ``//!`` module docs, ``use`` trees."""

from __future__ import annotations

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.text import clean_line_comments
from pipelines.parsing.hooks.base import LanguageHooks, text_of

_PATH_TYPES = (
    "identifier",
    "scoped_identifier",
    "self",
    "super",
    "crate",
    "metavariable",
)


class RustHooks(LanguageHooks):
    """Hooks for Rust."""

    decorator_types = frozenset({"attribute_item"})
    comment_types = frozenset({"line_comment", "block_comment"})
    async_capable = True
    namespace_separator = "::"

    def is_doc_comment(self, head: str) -> bool:
        """Outer doc comments: ``///`` (not ``////``) and ``/** */``."""
        if head.startswith("///"):
            return not head.startswith("////")
        return super().is_doc_comment(head)

    def module_docstring(
        self, root: Node, source: bytes, claimed: set[int]
    ) -> str | None:
        """Leading ``//!`` inner doc comments."""
        texts = []
        for child in root.named_children:
            if child.type != "line_comment":
                break
            text = text_of(child, source)
            if not text.startswith("//!"):
                break
            texts.append(text)
        return clean_line_comments(texts) if texts else None

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """Flatten a ``use`` tree into one ImportRef per module path.

        ``use a::b::{c, d as e}`` -> (a::b, [c, d]); ``use a::B as C`` -> (a, [B], alias C);
        ``use a::*`` -> (a, [*]); nested groups give one ref per distinct prefix.
        """
        arg = node.child_by_field_name("argument")
        if arg is None:
            return []
        line = node.start_point[0] + 1
        order: list[str] = []
        groups: dict[str, tuple[list[str], list[str | None]]] = {}

        def add(module: str, item: str | None, alias: str | None) -> None:
            if module not in groups:
                groups[module] = ([], [])
                order.append(module)
            if item is not None:
                groups[module][0].append(item)
                groups[module][1].append(alias)

        stack: list[tuple[str, Node]] = [("", arg)]
        while stack:
            prefix, tree = stack.pop()
            kind = tree.type
            if kind == "use_as_clause":
                path = tree.child_by_field_name("path")
                alias = tree.child_by_field_name("alias")
                if path is not None:
                    module, item = _split(_join(prefix, text_of(path, source)))
                    add(
                        module,
                        item,
                        text_of(alias, source) if alias is not None else None,
                    )
            elif kind == "use_wildcard":
                inner = next(
                    (c for c in tree.named_children if c.type in _PATH_TYPES), None
                )
                module = (
                    _join(prefix, text_of(inner, source))
                    if inner is not None
                    else prefix
                )
                add(module, "*", None)
            elif kind == "scoped_use_list":
                path = tree.child_by_field_name("path")
                lst = tree.child_by_field_name("list")
                new_prefix = (
                    _join(prefix, text_of(path, source)) if path is not None else prefix
                )
                if lst is not None:
                    stack.extend((new_prefix, c) for c in reversed(lst.named_children))
            elif kind == "use_list":
                stack.extend((prefix, c) for c in reversed(tree.named_children))
            elif kind in _PATH_TYPES:
                module, item = _split(_join(prefix, text_of(tree, source)))
                add(module, item, None)
        refs = []
        for module in order:
            items, aliases = groups[module]
            refs.append(
                ImportRef(
                    module=module,
                    items=items,
                    alias=aliases[0] if len(items) == 1 else None,
                    line=line,
                )
            )
        return refs


def _join(prefix: str, path: str) -> str:
    """``a::b`` + ``c`` -> ``a::b::c``."""
    path = "".join(path.split())
    return f"{prefix}::{path}" if prefix else path


def _split(path: str) -> tuple[str, str | None]:
    """``a::b::c`` -> (``a::b``, ``c``); a bare ``a`` is a whole-module import."""
    if "::" in path:
        module, item = path.rsplit("::", 1)
        return module, item
    return path, None

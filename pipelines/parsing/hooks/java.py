"""Java hooks: Javadoc, annotations inside ``modifiers``, import declarations."""

from __future__ import annotations

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.hooks.base import LanguageHooks, text_of


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

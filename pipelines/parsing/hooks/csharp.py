"""C# hooks: ``///`` XML doc comments, attribute lists, ``using`` directives, base lists."""

from __future__ import annotations

import re

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.text import clean_line_comments, strip_xml_summary
from pipelines.parsing.hooks.base import LanguageHooks, text_of

_INTERFACE_NAME = re.compile(r"^I[A-Z]")


class CSharpHooks(LanguageHooks):
    """Hooks for C#."""

    decorator_types = frozenset({"attribute_list"})
    async_capable = True

    def is_doc_comment(self, head: str) -> bool:
        """``///`` XML doc comments (and ``/** */``)."""
        return (
            head.startswith("///") and not head.startswith("////")
        ) or super().is_doc_comment(head)

    def docstring(
        self, body: Node | None, docs: list[Node], source: bytes
    ) -> str | None:
        """Comment text with ``<summary>`` tags removed; other XML tags kept as written."""
        if not docs:
            return None
        texts = [text_of(d, source) for d in docs]
        if texts[0].startswith("/*"):
            return super().docstring(body, docs, source)
        return strip_xml_summary(clean_line_comments(texts))

    def classify_base(self, relation: str, name: str) -> str:
        """Heuristic: base-list names matching ``^I[A-Z]`` (after any namespace) are interfaces."""
        return (
            "implements"
            if _INTERFACE_NAME.match(name.rsplit(".", 1)[-1])
            else "extends"
        )

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """``using A.B;`` / ``using static A.B;`` -> module A.B; ``using X = A.B;`` -> alias X."""
        alias_node = node.child_by_field_name("name")
        target = None
        for child in node.named_children:
            if child.type in (
                "qualified_name",
                "identifier",
                "generic_name",
                "alias_qualified_name",
            ):
                if alias_node is not None and child.start_byte == alias_node.start_byte:
                    continue
                target = child
        if target is None:
            return []
        return [
            ImportRef(
                module="".join(text_of(target, source).split()),
                alias=text_of(alias_node, source) if alias_node is not None else None,
                line=node.start_point[0] + 1,
            )
        ]

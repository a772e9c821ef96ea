"""Go hooks: ``//`` doc comments, single-spec ``type`` declarations (aliases too), import specs."""

from __future__ import annotations

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.text import clean_line_comments
from pipelines.parsing.hooks.base import LanguageHooks, text_of


class GoHooks(LanguageHooks):
    """Hooks for Go."""

    def outer_node(self, node: Node) -> Node:
        """A ``type_spec`` (or ``type_alias``) alone in its ``type`` declaration starts at the
        ``type`` keyword."""
        parent = node.parent
        if (
            node.type in ("type_spec", "type_alias")
            and parent is not None
            and parent.type == "type_declaration"
            and parent.named_child_count == 1
        ):
            return parent
        return node

    def is_doc_comment(self, head: str) -> bool:
        """Any comment directly above a declaration documents it."""
        return True

    def docstring(
        self, body: Node | None, docs: list[Node], source: bytes
    ) -> str | None:
        """Join the comment lines, dropping ``//go:`` directives."""
        if not docs:
            return None
        texts = [text_of(d, source) for d in docs]
        if texts[0].startswith("/*"):
            return super().docstring(body, docs, source)
        return clean_line_comments([t for t in texts if not t.startswith("//go:")])

    def module_docstring(
        self, root: Node, source: bytes, claimed: set[int]
    ) -> str | None:
        """The comment block directly above the ``package`` clause."""
        for child in root.named_children:
            if child.type == "package_clause":
                _, docs = self.locate(child, source)
                return self.docstring(None, docs, source)
            if child.type != "comment":
                return None
        return None

    def signature_start(self, node: Node) -> int:
        """Single-spec type declarations include the ``type`` keyword."""
        return self.outer_node(node).start_byte

    def signature_end(self, node: Node, body: Node | None) -> int:
        """Interfaces end their signature before ``{`` (the body is the ``interface_type``)."""
        if body is not None and body.type == "interface_type":
            for child in body.children:
                if child.type == "{":
                    return child.start_byte
            return body.end_byte
        return super().signature_end(node, body)

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """``f "fmt"`` -> module fmt, alias f (``_`` and ``.`` aliases are kept as written)."""
        path = node.child_by_field_name("path")
        if path is None:
            return []
        name = node.child_by_field_name("name")
        return [
            ImportRef(
                module=text_of(path, source).strip('"`'),
                alias=text_of(name, source) if name is not None else None,
                line=node.start_point[0] + 1,
            )
        ]

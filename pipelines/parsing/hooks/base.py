"""Default per-language behaviour; each language overrides only what its grammar needs.

The hooks answer the questions queries cannot: where a definition really starts (decorators,
attributes, ``export``), which comments document it, where its signature starts and ends,
whether it is async, how an import statement splits into ``ImportRef``s.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from resources.schemas.code import ImportRef

from pipelines.parsing.declared import UNSTATED, Receiver
from pipelines.parsing.text import clean_block_comment, clean_line_comments, decode, strip_type_args

_ASYNC = re.compile(r"\basync\b")


def end_row(node: Node) -> int:
    """0-based row of a node's last character (a trailing newline does not count).

    Args:
        node: Any node.

    Returns:
        The row.
    """
    row, col = node.end_point
    if col == 0 and row > node.start_point[0]:
        return row - 1
    return row


class LanguageHooks:
    """Per-language extraction hooks with comment-style defaults.

    Class attributes configure the defaults:

    Attributes:
        wrapper_types: Parent node types that wrap a definition and belong to it
            (``decorated_definition``, ``export_statement``).
        decorator_types: Decorator/attribute node types, found either as leading children of a
            definition or as its preceding siblings; skipped by the signature, counted in
            ``start_line``.
        modifier_types: Child node types holding modifiers that may include decorators
            (Java ``modifiers``).
        comment_types: Comment node types.
        async_capable: Whether the language has ``async`` functions.
        namespace_separator: What joins nested namespace names (``A.B``; Rust ``a::b``).
    """

    wrapper_types: frozenset[str] = frozenset()
    decorator_types: frozenset[str] = frozenset()
    modifier_types: frozenset[str] = frozenset()
    comment_types: frozenset[str] = frozenset({"comment"})
    async_capable: bool = False
    namespace_separator: str = "."

    # ---- location ---------------------------------------------------------------------------

    def outer_node(self, node: Node) -> Node:
        """Return the node that owns the definition's leading decorations and doc comment.

        Args:
            node: The ``@def.*`` node.

        Returns:
            The wrapper (decorated/exported definition) or the node itself.
        """
        parent = node.parent
        if parent is not None and parent.type in self.wrapper_types:
            return parent
        return node

    def locate(self, node: Node, source: bytes) -> tuple[Node, list[Node]]:
        """Find the definition's first node (decorators included) and its doc comments.

        Walks back over preceding siblings: decorators/attributes extend the start until the
        first comment; adjacent doc comments (no blank line between) are collected.

        Args:
            node: The ``@def.*`` node.
            source: The file's bytes.

        Returns:
            ``(start_node, doc_comment_nodes_in_source_order)``.
        """
        outer = self.outer_node(node)
        start = outer
        docs: list[Node] = []
        boundary = outer.start_point[0]
        prev = outer.prev_named_sibling
        decorators = self.decorator_types
        comments = self.comment_types
        while prev is not None:
            kind = prev.type
            if kind in decorators:
                if not docs:
                    start = prev
                boundary = prev.start_point[0]
            elif kind in comments:
                if end_row(prev) < boundary - 1:
                    break
                text = decode(
                    source, prev.start_byte, min(prev.end_byte, prev.start_byte + 4)
                )
                if not self.is_doc_comment(text):
                    break
                if docs and text.startswith("/*"):
                    break
                docs.append(prev)
                if text.startswith("/*"):
                    break
                boundary = prev.start_point[0]
            else:
                break
            prev = prev.prev_named_sibling
        docs.reverse()
        return start, docs

    def is_doc_comment(self, head: str) -> bool:
        """Whether a comment (given by its first few characters) is a doc comment.

        Args:
            head: Up to the first four characters of the comment.

        Returns:
            True for ``/**`` block comments by default.
        """
        return head.startswith("/**") and not head.startswith("/**/")

    # ---- docstrings -------------------------------------------------------------------------

    def docstring(
        self, body: Node | None, docs: list[Node], source: bytes
    ) -> str | None:
        """Return the cleaned documentation of a definition.

        Args:
            body: The definition's body node, if any.
            docs: Doc comment nodes found by ``locate``.
            source: The file's bytes.

        Returns:
            The docstring, or None.
        """
        if not docs:
            return None
        texts = [decode(source, d.start_byte, d.end_byte) for d in docs]
        if texts[0].startswith("/*"):
            return clean_block_comment(texts[0])
        return clean_line_comments(texts)

    def module_docstring(
        self, root: Node, source: bytes, claimed: set[int]
    ) -> str | None:
        """Return the file's leading doc comment when no definition claimed it.

        Args:
            root: The tree's root node.
            source: The file's bytes.
            claimed: Start bytes of the comments used as symbol docstrings.

        Returns:
            The module docstring, or None.
        """
        first = first_named(root)
        if (
            first is None
            or first.type not in self.comment_types
            or first.start_byte in claimed
        ):
            return None
        text = decode(source, first.start_byte, first.end_byte)
        if not self.is_doc_comment(text[:4]) or not text.startswith("/*"):
            return None
        return clean_block_comment(text)

    # ---- signature --------------------------------------------------------------------------

    def signature_start(self, node: Node) -> int:
        """Byte offset where the signature starts: after leading decorators/attributes.

        Args:
            node: The ``@def.*`` node.

        Returns:
            A byte offset inside the node.
        """
        if not self.decorator_types:
            return node.start_byte
        skip = self.decorator_types | self.comment_types
        for child in node.children:
            kind = child.type
            if kind in skip:
                continue
            if kind in self.modifier_types:
                for sub in child.children:
                    if sub.type not in skip:
                        return sub.start_byte
                continue
            return child.start_byte
        return node.start_byte

    def signature_end(self, node: Node, body: Node | None) -> int:
        """Byte offset where the signature ends: the end of the last token before the body.

        Args:
            node: The ``@def.*`` node.
            body: The body node, or None for body-less declarations.

        Returns:
            A byte offset.
        """
        if body is None:
            return node.end_byte
        prev = body.prev_sibling
        while prev is not None and prev.type in self.comment_types:
            prev = prev.prev_sibling
        return prev.end_byte if prev is not None else body.start_byte

    def is_async(self, signature: str) -> bool:
        """Whether the signature declares an async function (``async`` before the parameters).

        Args:
            signature: The cleaned signature.

        Returns:
            True for async functions and methods.
        """
        if not self.async_capable:
            return False
        return _ASYNC.search(signature.split("(", 1)[0]) is not None

    # ---- inheritance ------------------------------------------------------------------------

    def classify_base(self, relation: str, name: str) -> str:
        """Decide whether a base goes to ``extends`` or ``implements``.

        Args:
            relation: The capture name (``extends`` or ``implements``).
            name: The base type with type arguments stripped.

        Returns:
            ``extends`` or ``implements``.
        """
        return relation

    # ---- declared types ---------------------------------------------------------------------

    def declared_type(self, type_node: Node | None, value: Node | None, source: bytes) -> str:
        """The type a declaration states (``@decl.type``, with ``@decl.value`` its initializer).

        Args:
            type_node: The declared type, or None when the grammar has none (inferred).
            value: The initializer, if captured.
            source: The file's bytes.

        Returns:
            The type with type arguments stripped, or ``var`` when the source does not state it.
        """
        return UNSTATED if type_node is None else strip_type_args(text_of(type_node, source)) or UNSTATED

    def receiver(self, callee: str) -> Receiver | None:
        """The part of a call's receiver that declarations can type (``declared.Receiver``).

        Args:
            callee: The callee as ``calls`` writes it (``a.f.m``).

        Returns:
            None by default: the language types no receivers.
        """
        return None

    # ---- definitions ------------------------------------------------------------------------

    def definition_kind(self, kind: str, node: Node, name: Node, source: bytes) -> str | None:
        """The kind of a captured definition, or None to drop it (what a pattern cannot decide).

        Args:
            kind: The kind the query pattern declares (``@def.<kind>``).
            node: The ``@def.*`` node.
            name: The ``@name`` node.
            source: The file's bytes.

        Returns:
            ``kind`` by default.
        """
        return kind

    def is_declaration(self, node: Node) -> bool:
        """Whether a function definition node only declares it (its body is elsewhere: C/C++).

        Args:
            node: The ``@def.*`` node of a function, method or constructor.

        Returns:
            False by default.
        """
        return False

    def call_scope(self, fn: Node, body: Node | None) -> Node:
        """The node whose calls a function makes (they name it as their caller).

        Args:
            fn: The function node.
            body: Its body, or None.

        Returns:
            The body by default, else the function node.
        """
        return body if body is not None else fn

    def receiver_container(self, receiver: Node, source: bytes) -> str:
        """The container a ``@receiver`` names (Go ``*Server`` -> ``Server``).

        Args:
            receiver: The captured receiver node.
            source: The file's bytes.

        Returns:
            The container's file-local qualified name.
        """
        return strip_type_args(text_of(receiver, source))

    # ---- imports ----------------------------------------------------------------------------

    def parse_import(self, node: Node, source: bytes) -> list[ImportRef]:
        """Split an ``@import`` node into ImportRefs.

        Args:
            node: The captured import statement.
            source: The file's bytes.

        Returns:
            The imports it declares (possibly none).
        """
        raise NotImplementedError


def first_named(node: Node | None) -> Node | None:
    """First named child, or None (``Node.named_child`` raises when out of range).

    Args:
        node: Any node, or None.

    Returns:
        The child, or None.
    """
    if node is None or node.named_child_count == 0:
        return None
    return node.named_child(0)


def text_of(node: Node, source: bytes) -> str:
    """Decoded text of a node.

    Args:
        node: Any node.
        source: The file's bytes.

    Returns:
        The node's source text.
    """
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")

"""Turn definition captures into ``ParsedSymbol``s: containers, kinds, signatures, docs.

Nesting is computed from byte ranges with one sort and a stack (no tree walk): each
definition's container is the innermost definition (or Rust impl block) whose range encloses
it. A ``function`` directly inside a type (class/interface/struct/trait/enum/impl) becomes a
``method``. The namespaces enclosing a definition (package, namespace, inline module) are
swept the same way and joined into its ``namespace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tree_sitter import Node

from pipelines.parsing.hooks.base import LanguageHooks, end_row
from pipelines.parsing.text import clean_signature, strip_type_args
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS

TYPE_KINDS = CLASS_KINDS | {"impl"}


@dataclass(slots=True)
class DefCapture:
    """One definition (or Rust impl block) as captured by the query.

    Attributes:
        kind: The declared kind from ``@def.<kind>``, or ``impl``.
        node: The definition node.
        name: The name node (the implementing type for an impl block).
        fn: The function node when distinct from ``node`` (arrow functions bound to names).
        body: An explicit body node, if captured.
        receiver: The Go receiver type node, if any.
        trait: The implemented trait of a Rust impl block, if any.
    """

    kind: str
    node: Node
    name: Node
    fn: Node | None = None
    body: Node | None = None
    receiver: Node | None = None
    trait: Node | None = None


@dataclass(slots=True)
class Scope:
    """A function/method body range, used to attribute calls to their caller.

    Attributes:
        start: First byte of the body.
        end: Byte one past the body.
        qualified_name: The function's file-local qualified name.
    """

    start: int
    end: int
    qualified_name: str


class NamespaceRange(NamedTuple):
    """A namespace declaration: the bytes it covers and its name as written (``A.B``)."""

    start: int
    end: int
    name: str


class _NamespaceSweep:
    """The namespaces enclosing increasing byte offsets, in one pass (declarations nest)."""

    def __init__(self, ranges: list[NamespaceRange], separator: str) -> None:
        self._pending = sorted(ranges, key=lambda r: (r.start, -r.end))
        self._next = 0
        self._open: list[NamespaceRange] = []
        self._separator = separator

    def at(self, offset: int) -> str | None:
        """The joined names of the namespaces around ``offset`` (not smaller than the last one
        asked for), outermost first, or None."""
        while self._open and self._open[-1].end <= offset:
            self._open.pop()
        while self._next < len(self._pending) and self._pending[self._next].start <= offset:
            declared = self._pending[self._next]
            self._next += 1
            if declared.end > offset:
                self._open.append(declared)
        return self._separator.join(r.name for r in self._open) or None


def build_symbols(
    defs: list[DefCapture],
    bases: dict[int, list[tuple[int, str, str]]],
    source: bytes,
    hooks: LanguageHooks,
    namespaces: list[NamespaceRange] | None = None,
    fields: dict[tuple[int, int], dict[str, str]] | None = None,
) -> tuple[list[dict[str, object]], list[Scope], set[int]]:
    """Build symbols from definition captures in one sorted pass.

    Args:
        defs: Definitions and impl blocks, in any order.
        bases: ``node.id`` of a definition -> ``(position, relation, base name)`` entries.
        source: The file's bytes.
        hooks: The language's hooks.
        namespaces: The file's namespace declarations (``@namespace`` captures), if any.
        fields: The fields each type declares with their stated types, keyed by the type
            declaration's byte range (``declared.fields_by_type``).

    Returns:
        ``(ParsedSymbol field dicts in source order, function body scopes, start bytes of claimed
        doc comments)``; the dicts are validated in bulk with the ParsedFile.
    """
    located: list[tuple[int, int, int, DefCapture, Node, list[Node]]] = []
    for i, cap in enumerate(defs):
        node = cap.node
        if cap.kind == "impl":
            located.append((node.start_byte, -node.end_byte, i, cap, node, []))
        else:
            start_node, docs = hooks.locate(node, source)
            located.append(
                (start_node.start_byte, -node.end_byte, i, cap, start_node, docs)
            )
    located.sort()

    symbols: list[dict[str, object]] = []
    scopes: list[Scope] = []
    claimed: set[int] = set()
    top_types: dict[str, dict[str, object]] = {}
    impls: list[tuple[str, Node]] = []
    sweep = _NamespaceSweep(namespaces or [], hooks.namespace_separator)
    # open containers: (start, end, qualified_name, kind)
    stack: list[tuple[int, int, str, str]] = []
    for start, neg_end, _, cap, start_node, docs in located:
        end = -neg_end
        while stack and (
            stack[-1][1] <= start or (stack[-1][0] == start and stack[-1][1] == end)
        ):
            stack.pop()
        parent = stack[-1] if stack else None
        name_node = cap.name
        name = source[name_node.start_byte : name_node.end_byte].decode(
            "utf-8", "replace"
        )
        if cap.kind == "impl":
            type_name = strip_type_args(name)
            stack.append((start, end, type_name, "impl"))
            if cap.trait is not None:
                impls.append((type_name, cap.trait))
            continue

        receiver = cap.receiver
        if receiver is not None:
            container: str | None = hooks.receiver_container(receiver, source) or None
        else:
            container = parent[2] if parent is not None else None
        qualified_name = f"{container}.{name}" if container else name
        kind = cap.kind
        if kind == "function" and parent is not None and parent[3] in TYPE_KINDS:
            kind = "method"
        stack.append((start, end, qualified_name, kind))

        node = cap.node
        fn = cap.fn if cap.fn is not None else node
        body = cap.body if cap.body is not None else fn.child_by_field_name("body")
        sig_start = hooks.signature_start(node)
        sig_end = hooks.signature_end(node, body)
        if sig_end <= sig_start:
            sig_end = node.end_byte
        signature = clean_signature(
            source[sig_start:sig_end].decode("utf-8", "replace")
        )
        if docs:
            claimed.update(doc.start_byte for doc in docs)
        extends: list[str] = []
        implements: list[str] = []
        own_bases = bases.get(node.id)
        if own_bases:
            for _, relation, base in sorted(own_bases):
                (implements if relation == "implements" else extends).append(base)
        is_function = kind in CALLABLE_KINDS
        symbol = {
            "kind": kind,
            "name": name,
            "qualified_name": qualified_name,
            "signature": signature,
            "docstring": hooks.docstring(body, docs, source),
            "start_line": start_node.start_point[0] + 1,
            "end_line": end_row(node) + 1,
            "container": container,
            "namespace": sweep.at(start),
            "is_async": is_function and hooks.is_async(signature),
            "is_declaration": is_function and hooks.is_declaration(node),
            "extends": extends,
            "implements": implements,
            "fields": (fields or {}).get((node.start_byte, node.end_byte), {}),
            "code": source[start:end].rstrip(b"\r\n").decode("utf-8", "replace"),  # a C macro ends with its newline
        }
        symbols.append(symbol)
        if is_function:
            scope_node = hooks.call_scope(fn, body)
            scopes.append(
                Scope(scope_node.start_byte, scope_node.end_byte, qualified_name)
            )
        elif container is None:
            top_types.setdefault(name, symbol)

    # Rust: `impl Trait for Type` records the trait on the type defined in this file.
    for type_name, trait in impls:
        target = top_types.get(type_name)
        if target is not None:
            trait_name = strip_type_args(
                source[trait.start_byte : trait.end_byte].decode("utf-8", "replace")
            )
            implemented: list[str] = target["implements"]  # type: ignore[assignment]
            if trait_name not in implemented:
                implemented.append(trait_name)
    return symbols, scopes, claimed

"""``parse_source``: one parse, one query pass, then cheap per-capture Python.

The file is parsed under a time limit (``ParseTimeout``), the language's compiled query is run
once over the tree, and each match is dispatched by its pattern's role (see ``captures``).
No Python code walks the whole tree; nothing recurses, so deeply nested input is safe.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from tree_sitter import Node, QueryCursor

from resources.schemas.code import ImportRef, Language, ParsedFile

from pipelines.parsing.calls import RawCall, ReceiverTyper, build_calls
from pipelines.parsing.declared import Declaration, DeclaredTypes, fields_by_type
from pipelines.parsing.errors import ParseTimeout
from pipelines.parsing.hooks.base import LanguageHooks
from pipelines.parsing.languages import LanguageSpec, get_parser, get_spec
from pipelines.parsing.symbols import DefCapture, NamespaceRange, build_symbols
from pipelines.parsing.text import decode, strip_type_args
from pipelines.parsing.tree import count_errors, parse_tree

logger = logging.getLogger(__name__)


def parse_source(
    path: str, source: bytes, language: Language, timeout_s: float = 10.0
) -> ParsedFile:
    """Parse one file and extract its symbols, imports and calls.

    Never raises on bad input: syntax errors are counted in ``error_count`` and whatever parses
    is still extracted; invalid UTF-8 is decoded with replacement characters.

    Args:
        path: Repo-relative POSIX path (copied into the result).
        source: The file's bytes.
        language: The language to parse it as.
        timeout_s: Parse time limit in seconds.

    Returns:
        The parsed file.

    Raises:
        ParseTimeout: When parsing exceeds ``timeout_s`` (the caller should skip the file).
        ValueError: For an unsupported ``language``.
    """
    spec = get_spec(language)
    deadline = time.perf_counter() + timeout_s
    tree = parse_tree(get_parser(language), source, path, timeout_s)
    root = tree.root_node

    def expired(_state: object = None) -> bool:
        """The query cursors' progress callback: stop a match pass that runs past the limit
        (pathologically nested input makes the queries, not the parse, the slow part)."""
        return time.perf_counter() > deadline

    try:
        parsed = _extract(path, source, spec, root, expired)
    except ParseTimeout:  # pragma: no cover - extraction does not time out
        raise
    except Exception:  # defensive: one odd file must not stop an index run
        logger.warning(
            "extraction failed for %s; returning an empty result", path, exc_info=True
        )
        return ParsedFile(
            path=path, language=language, error_count=max(1, _safe_errors(spec, root, expired))
        )
    if expired():  # a query pass was cut short: the result is partial
        raise ParseTimeout(path, timeout_s)
    return parsed


def _safe_errors(spec: LanguageSpec, root: Node, expired: Callable[..., bool] | None = None) -> int:
    """Error count that cannot raise."""
    try:
        return count_errors(root, spec.error_query, expired)
    except Exception:  # noqa: BLE001  # pragma: no cover - last-resort fallback
        return 1


def _extract(
    path: str, source: bytes, spec: LanguageSpec, root: Node, expired: Callable[..., bool] | None = None
) -> ParsedFile:
    """Run the query once and build the ParsedFile."""
    hooks = spec.hooks
    roles = spec.roles
    defs: list[DefCapture] = []
    seen_defs: set[tuple[int, int]] = set()
    bases: dict[int, list[tuple[int, str, str]]] = {}
    raw_calls: list[RawCall] = []
    args: list[tuple[int, int]] = []
    import_nodes: dict[int, Node] = {}
    namespaces: list[NamespaceRange] = []
    declarations: list[Declaration] = []

    # No progress_callback on the query cursor: py-tree-sitter 0.26.1 segfaults with one on real
    # files (measured); the parse itself has the deadline, and the result is checked after.
    for pattern, caps in QueryCursor(spec.query).matches(root):
        role, kind = roles[pattern]
        if role == "call":
            if kind == "call.callee":
                node = caps["call.callee"][0]
                raw_calls.append(
                    (node.end_byte, node.start_byte, node.end_point[0], False)
                )
            elif kind == "call.new":
                node = caps["call.new"][0]
                raw_calls.append(
                    (node.end_byte, node.start_byte, node.end_point[0], True)
                )
            else:
                name = caps["call.name"][0]
                raw_calls.append(
                    (
                        name.end_byte,
                        caps["call"][0].start_byte,
                        name.end_point[0],
                        False,
                    )
                )
            arg = caps.get("call.args")
            if arg is not None:
                args.append(arg[0].byte_range)
        elif role == "def":
            node = caps["def." + kind][0]
            name = caps["name"][0]
            key = (node.id, name.start_byte)
            if key in seen_defs:
                continue
            seen_defs.add(key)
            def_kind = hooks.definition_kind(kind, node, name, source)
            if def_kind is None:
                continue
            fn = caps.get("fn")
            body = caps.get("body")
            receiver = caps.get("receiver")
            defs.append(
                DefCapture(
                    def_kind,
                    node,
                    name,
                    fn[0] if fn else None,
                    body[0] if body else None,
                    receiver[0] if receiver else None,
                )
            )
        elif role == "decl":
            declarations.append(_declaration(kind, caps, source, hooks))
        elif role == "import":
            node = caps["import"][0]
            import_nodes[node.id] = node
        elif role == "inherit":
            owner = caps["inherit"][0]
            relation = "implements" if "implements" in caps else "extends"
            base = caps[relation][0]
            text = strip_type_args(decode(source, base.start_byte, base.end_byte))
            if text:
                bases.setdefault(owner.id, []).append(
                    (base.start_byte, hooks.classify_base(relation, text), text)
                )
        elif role == "namespace":
            node = caps[kind][0]
            name = caps["namespace.name"][0]
            end = len(source) if kind == "namespace.file" else node.end_byte
            namespaces.append(
                NamespaceRange(node.start_byte, end, "".join(decode(source, name.start_byte, name.end_byte).split()))
            )
        elif role == "impl":
            node = caps["impl"][0]
            trait = caps.get("impl.trait")
            defs.append(
                DefCapture(
                    "impl",
                    node,
                    caps["impl.type"][0],
                    trait=trait[0] if trait else None,
                )
            )

    symbols, scopes, claimed = build_symbols(defs, bases, source, hooks, namespaces, fields_by_type(declarations))
    calls = build_calls(raw_calls, args, scopes, source, _receiver_typer(declarations, hooks))
    imports: list[ImportRef] = []
    for node in sorted(import_nodes.values(), key=lambda n: n.start_byte):
        imports.extend(hooks.parse_import(node, source))
    return ParsedFile.model_validate(
        {
            "path": path,
            "language": spec.name,
            "symbols": symbols,
            "imports": imports,
            "calls": calls,
            "error_count": count_errors(root, spec.error_query, expired),
            "module_docstring": hooks.module_docstring(root, source, claimed),
        }
    )


def _declaration(kind: str, caps: dict[str, list[Node]], source: bytes, hooks: LanguageHooks) -> Declaration:
    """A ``decl`` match as a ``Declaration``: a field is visible in its whole type, a local or a
    parameter from its name to the end of its scope."""
    scope = caps[kind][0]
    name = caps["decl.name"][0]
    type_node = caps.get("decl.type")
    value = caps.get("decl.value")
    owner = caps.get("decl.owner")
    return Declaration(
        decode(source, name.start_byte, name.end_byte),
        hooks.declared_type(type_node[0] if type_node else None, value[0] if value else None, source),
        scope.start_byte if owner else name.end_byte,
        scope.end_byte,
        decode(source, owner[0].start_byte, owner[0].end_byte) if owner else None,
    )


def _receiver_typer(declarations: list[Declaration], hooks: LanguageHooks) -> ReceiverTyper | None:
    """What types a call's receiver in this file (None when the file declares nothing)."""
    if not declarations:
        return None
    declared = DeclaredTypes(declarations)

    def receiver_type(callee: str, position: int) -> str | None:
        receiver = hooks.receiver(callee)
        return None if receiver is None else declared.receiver_type(receiver, position)

    return receiver_type

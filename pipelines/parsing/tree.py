"""Parsing bytes into a tree under a time limit, and counting syntax-error regions."""

from __future__ import annotations

import time
from collections.abc import Callable

from tree_sitter import Node, Parser, Query, QueryCursor, Tree

from pipelines.parsing.errors import ParseTimeout

_CHUNK = 1 << 16


def parse_tree(parser: Parser, source: bytes, path: str, timeout_s: float) -> Tree:
    """Parse ``source``, cancelling through tree-sitter's progress callback after ``timeout_s``.

    The source is fed through a read callback (the progress callback is only available with
    one), in 64 KiB slices.

    Args:
        parser: A parser bound to the file's grammar.
        source: The file's bytes.
        path: The file's path (for the error message).
        timeout_s: The time limit in seconds.

    Returns:
        The syntax tree. Nodes do not carry their text: slice ``source`` by byte offsets.

    Raises:
        ParseTimeout: When the limit is exceeded.
    """
    deadline = time.perf_counter() + timeout_s
    clock = time.perf_counter
    size = len(source)

    def read(offset: int, _point: object) -> bytes:
        if offset >= size:
            return b""
        return source[offset : offset + _CHUNK]

    def progress(_offset: int, _has_error: bool) -> bool:
        return clock() > deadline

    try:
        tree = parser.parse(read, progress_callback=progress)
    except ValueError as exc:  # "Parsing failed": cancelled by the progress callback
        parser.reset()
        if clock() > deadline:
            raise ParseTimeout(path, timeout_s) from exc
        raise
    if tree is None:  # pragma: no cover - older bindings return None on cancellation
        parser.reset()
        raise ParseTimeout(path, timeout_s)
    return tree


def count_errors(root: Node, error_query: Query, progress: Callable[..., bool] | None = None) -> int:
    """Count syntax-error regions: outermost ``ERROR`` nodes plus ``MISSING`` nodes.

    Args:
        root: The tree's root node.
        error_query: The language's ``(ERROR) @error (MISSING) @missing`` query.
        progress: The query cursor's progress callback (True stops the pass: the count is partial).

    Returns:
        0 for a clean parse.
    """
    if not root.has_error:
        return 0
    if root.is_error:
        return 1
    del progress  # a query cursor progress_callback segfaults in py-tree-sitter 0.26.1 (see engine.py)
    captures = QueryCursor(error_query).captures(root)
    errors = sorted(
        captures.get("error", []), key=lambda n: (n.start_byte, -n.end_byte)
    )
    count = len(captures.get("missing", []))
    covered_start, covered_end = 0, -1
    for node in errors:
        if node.end_byte <= covered_end and node.start_byte >= covered_start:
            continue
        covered_start, covered_end = node.start_byte, node.end_byte
        count += 1
    return max(count, 1)

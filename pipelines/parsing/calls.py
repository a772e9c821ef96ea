"""Turn call captures into ``CallSite``s with their callers.

Callee rule: the text of the called expression with whitespace removed, where the argument
lists of calls *inside* the callee are shortened to ``()``: ``a.b(x).c(y)`` has callees
``a.b`` and ``a.b().c``. ``new T<A>(...)`` has callee ``T``. The call's line is the line of the
callee's last character (where the called name is), and calls are ordered by that position.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from pipelines.parsing.symbols import Scope
from pipelines.parsing.text import callee_name, strip_type_args

RawCall = tuple[int, int, int, bool]
"""A call as captured (a plain tuple, for speed): ``(end, start, row, is_new)`` = the byte one
past the callee, the callee's first byte, the 0-based row of the callee's end, and whether it is
``new T(...)`` (whose type arguments are stripped)."""
ReceiverTyper = Callable[[str, int], "str | None"]
"""(callee, byte offset of the call) -> the receiver's declared type, or None (``declared``)."""


def _elide_inner_args(
    start: int,
    end: int,
    source: bytes,
    arg_starts: list[int],
    args: list[tuple[int, int]],
) -> bytes:
    """Callee bytes with the argument lists of calls inside it replaced by ``()``."""
    pieces = []
    cursor = start
    i = bisect_left(arg_starts, start)
    n = len(args)
    while i < n:
        a_start, a_end = args[i]
        if a_start >= end:
            break
        if a_start >= cursor and a_end <= end:
            pieces.append(source[cursor:a_start])
            pieces.append(b"()")
            cursor = a_end
        i += 1
    pieces.append(source[cursor:end])
    return b"".join(pieces)


def _clean_callee(raw: bytes, is_new: bool) -> str:
    """Decode a callee, remove whitespace, strip a constructed type's type arguments."""
    text = raw.decode("utf-8", "replace")
    if " " in text or "\n" in text or "\t" in text or "\r" in text:
        text = "".join(text.split())
    if is_new:
        text = strip_type_args(text)
    return text


def build_calls(
    raw_calls: list[RawCall],
    args: list[tuple[int, int]],
    scopes: list[Scope],
    source: bytes,
    receiver_type: ReceiverTyper | None = None,
) -> list[dict[str, object]]:
    """Build call sites, attributing each to the innermost enclosing function body.

    One sort of the calls by callee end, one sweep over the sorted function bodies; callee
    texts without inner calls are memoised per file.

    Args:
        raw_calls: Captured calls, in any order.
        args: Byte ranges of every captured argument list.
        scopes: Function/method body ranges with qualified names.
        source: The file's bytes.
        receiver_type: Types the receiver of a call with one (``receiver_type`` is set only
            where it answers).

    Returns:
        ``CallSite`` field dicts (validated later, in bulk, with the ParsedFile), ordered by the
        callee's end position.
    """
    if not raw_calls:
        return []
    raw_calls.sort()
    args.sort()
    arg_starts = [a[0] for a in args]
    bodies = sorted((s.start, -s.end, s.qualified_name) for s in scopes)
    n_bodies = len(bodies)
    open_ends: list[int] = []
    open_names: list[str] = []
    memo: dict[bytes, tuple[str, str]] = {}
    out: list[dict[str, object]] = []
    append = out.append
    i = 0
    for end, start, row, is_new in raw_calls:
        pos = end - 1
        while i < n_bodies and bodies[i][0] <= pos:
            b_start, neg_end, b_name = bodies[i]
            while open_ends and open_ends[-1] <= b_start:
                open_ends.pop()
                open_names.pop()
            open_ends.append(-neg_end)
            open_names.append(b_name)
            i += 1
        while open_ends and open_ends[-1] <= pos:
            open_ends.pop()
            open_names.pop()
        raw = source[start:end]
        key = raw if not is_new else b"new " + raw
        hit = memo.get(key)
        if hit is None:
            if b"(" in raw:
                callee = _clean_callee(
                    _elide_inner_args(start, end, source, arg_starts, args), is_new
                )
                hit = (callee, callee_name(callee))
            else:
                callee = _clean_callee(raw, is_new)
                hit = memo[key] = (callee, callee_name(callee))
        call: dict[str, object] = {
            "caller": open_names[-1] if open_names else None,
            "callee": hit[0],
            "callee_name": hit[1],
            "line": row + 1,
        }
        if receiver_type is not None and "." in hit[0]:
            typed = receiver_type(hit[0], pos)
            if typed is not None:
                call["receiver_type"] = typed
        append(call)
    return out

"""Small text helpers shared by the extractors: decoding, signatures, comments, callee names.

Everything here works on plain ``bytes``/``str`` (never on ``Node.text``: trees are parsed
through a read callback, so nodes do not carry their source).
"""

from __future__ import annotations

import re

_WS = re.compile(r"\s+")
_TRAILING_IDENT = re.compile(r"[A-Za-z_$\w]+$")
_ANY_IDENT = re.compile(r"[A-Za-z_$\w]+")
_LINE_COMMENT_PREFIX = re.compile(r"^\s*//[/!]?")
_XML_SUMMARY = re.compile(r"</?summary>")
_CLOSERS = {")": "(", "]": "[", ">": "<"}


def decode(source: bytes, start: int, end: int) -> str:
    """Decode ``source[start:end]`` as UTF-8, replacing invalid bytes.

    Args:
        source: The file's bytes.
        start: First byte offset.
        end: Byte offset one past the end.

    Returns:
        The decoded text.
    """
    return source[start:end].decode("utf-8", "replace")


def collapse_ws(text: str) -> str:
    """Collapse every whitespace run to one space and strip the ends.

    Args:
        text: Any text.

    Returns:
        The text with whitespace normalised.
    """
    return " ".join(text.split())


def clean_signature(text: str) -> str:
    """Normalise a declaration header: collapse whitespace, drop a trailing ``:``, ``{`` or ``;``.

    Args:
        text: Source text from the definition start up to its body.

    Returns:
        The signature, e.g. ``def f(x)`` or ``public int add(int a, int b)``.
    """
    sig = " ".join(text.split())
    if sig and sig[-1] in ":{;":
        sig = sig[:-1].rstrip()
    return sig


def strip_type_args(text: str) -> str:
    """Drop generic/type arguments from a type reference, collapsing whitespace.

    ``BaseService<Order>`` -> ``BaseService``; ``Generic[T]`` -> ``Generic``;
    ``*Base`` (Go pointer receiver) -> ``Base``.

    Args:
        text: A type as written.

    Returns:
        The bare (possibly qualified) type name.
    """
    cut = len(text)
    for opener in "<[(":
        i = text.find(opener)
        if 0 <= i < cut:
            cut = i
    return "".join(text[:cut].split()).lstrip("*&")


def callee_name(callee: str) -> str:
    """Return the last identifier of a callee expression.

    Trailing balanced ``(...)``, ``[...]`` and ``<...>`` groups (call results, indexes, type
    arguments, Rust turbofish) are skipped: ``a.b().c`` -> ``c``, ``sum::<f64>`` -> ``sum``,
    ``Map[int]`` -> ``Map``, ``Vec::<i32>::new`` -> ``new``.

    Args:
        callee: The callee text with whitespace removed.

    Returns:
        The identifier, or the callee itself when none can be found.
    """
    tail = callee[max(callee.rfind("."), callee.rfind(":")) + 1 :]
    if tail.isidentifier():
        return tail
    t = callee
    while t and t[-1] in _CLOSERS:
        closer = t[-1]
        opener = _CLOSERS[closer]
        depth = 0
        i = len(t) - 1
        while i >= 0:
            c = t[i]
            if c == closer:
                depth += 1
            elif c == opener:
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i <= 0:
            break
        t = t[:i].rstrip(":.")
    m = _TRAILING_IDENT.search(t)
    if m:
        return m.group()
    found = _ANY_IDENT.findall(callee)
    return found[-1] if found else callee


def cleandoc(doc: str) -> str:
    """Exactly ``inspect.cleandoc`` (Python 3.12), with fewer intermediate steps.

    Args:
        doc: The raw docstring value.

    Returns:
        The cleaned docstring.
    """
    lines = doc.expandtabs().split("\n")
    if len(lines) == 1:
        return lines[0].lstrip()
    rest = lines[1:]
    indents = [len(line) - len(body) for line in rest if (body := line.lstrip())]
    margin = min(indents) if indents else 0
    out = [lines[0].lstrip()]
    out.extend(line[margin:] for line in rest)
    while out and not out[-1]:
        out.pop()
    start = 0
    while start < len(out) and not out[start]:
        start += 1
    return "\n".join(out[start:])


def _dedent_lines(lines: list[str]) -> str | None:
    """Remove the common indentation and blank edge lines; None when nothing is left."""
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return None
    margin = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
    return "\n".join(ln[margin:].rstrip() for ln in lines)


def clean_block_comment(text: str) -> str | None:
    """Strip ``/** ... */`` (or ``/* ... */``) markers and leading ``*`` gutters.

    Args:
        text: The comment as written.

    Returns:
        The cleaned text, or None when empty.
    """
    body = text[3:] if text.startswith("/**") else text[2:]
    body = body.removesuffix("*/")
    lines = []
    for line in body.split("\n"):
        s = line.strip()
        if s.startswith("*"):
            s = line.lstrip()[1:]
            lines.append(s)
        else:
            lines.append(line.rstrip())
    return _dedent_lines(lines)


def clean_line_comments(texts: list[str]) -> str | None:
    """Strip ``//``, ``///`` or ``//!`` markers from consecutive line comments and join them.

    Args:
        texts: The comments in source order, one line each.

    Returns:
        The cleaned text, or None when empty.
    """
    lines = [_LINE_COMMENT_PREFIX.sub("", t.rstrip("\r\n"), count=1) for t in texts]
    return _dedent_lines(lines)


def strip_xml_summary(text: str | None) -> str | None:
    """Drop C# ``<summary>`` tags from an XML doc comment (other tags are kept as written).

    Args:
        text: A cleaned ``///`` comment.

    Returns:
        The text without summary tags, or None when empty.
    """
    if text is None:
        return None
    return _dedent_lines([ln for ln in _XML_SUMMARY.sub("", text).split("\n")])

"""Signatures as comparable shapes: parameter names and types without the receiver, and the
return type, for the languages the parser reads."""

from __future__ import annotations

import re

_RECEIVERS = {"self", "cls", "this", "&self", "&mut self", "mut self"}


def _split_params(text: str) -> list[str]:
    depth, current, parts = 0, "", []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def signature_shape(signature: str, language: str) -> tuple[list[tuple[str, str]], str]:
    """A signature's parameters as (name, type) without the receiver, and its return type.

    Python, TypeScript, JavaScript, Rust: ``name: type``; Go: ``name type``; Java, C#, C, C++:
    ``type name`` (a C ``(void)`` list is empty).
    """
    start = signature.find("(")
    if start < 0:
        return [], ""
    depth, end = 0, len(signature)
    for index in range(start, len(signature)):
        if signature[index] == "(":
            depth += 1
        elif signature[index] == ")":
            depth -= 1
            if depth == 0:
                end = index
                break
    params = []
    for raw in _split_params(signature[start + 1:end]):
        item = raw.split("=")[0].strip()
        if not item or item in _RECEIVERS or item in ("*", "/") or (item == "void" and language in ("c", "cpp")):
            continue
        if language in ("java", "csharp", "c", "cpp"):
            words = item.replace("final ", "").split()
            name, kind = (words[-1], " ".join(words[:-1])) if words else (item, "")
        elif language == "go":
            words = item.split(None, 1)
            name, kind = words[0], (words[1] if len(words) > 1 else "")
        else:
            name, _, kind = item.partition(":")
        name = name.strip().lstrip("*&").removeprefix("mut ").strip()
        if name in _RECEIVERS:
            continue
        params.append((name, re.sub(r"\s+", "", kind.strip())))
    tail = signature[end + 1:].strip().rstrip(":{").strip()
    returns = re.sub(r"\s+", "", tail.lstrip("-").lstrip(">").lstrip(":").strip()) if tail else ""
    return params, returns


def describe_shape(params: list[tuple[str, str]], returns: str) -> str:
    inner = ", ".join(f"{n}: {t}" if t else n for n, t in params)
    return f"({inner})" + (f" -> {returns}" if returns else "")


def compatible(shape: tuple[list[tuple[str, str]], str], want: tuple[list[tuple[str, str]], str]) -> bool:
    """Same parameter names in order, and types/returns equal where both sides state them."""
    (params, returns), (want_params, want_returns) = shape, want
    if [n for n, _ in params] != [n for n, _ in want_params]:
        return False
    for (_, a), (_, b) in zip(params, want_params, strict=True):
        if a and b and a != b:
            return False
    return not (returns and want_returns and returns != want_returns)

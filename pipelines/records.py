"""Turn a parsed file into store records: ids, payloads, graph nodes and the text to embed.

Ids are deterministic (UUIDv5 of repo-relative path + file-local qualified name, with an
ordinal for overloads), so re-indexing the same content writes the same points and nodes.
Qualified names are the language's own (``pipelines.qualified_names``); the path-based name of
earlier releases goes along as ``path_qualified_name``.
"""

from __future__ import annotations

import functools
import hashlib
import re
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pipelines.index_context import CALLABLE_LANGUAGE
from pipelines.qualified_names import file_module, language_qualified_name, path_qualified_name
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS, ParsedFile, ParsedSymbol
from resources.text.identifiers import identifier_words

ID_NAMESPACE = uuid.UUID("5b0e7c1e-6a43-4c4f-9a55-2f6f3c0de111")
MAX_PAYLOAD_CODE = 2_500  # enough for the 30-line snippet; the file holds the rest
MAX_SPARSE_CODE = 6_000
MAX_PAYLOAD_DOC = 2_000
# What the dense model sees of a body. Measured (docs/benchmarks.md): 300 characters beat 1,200 on
# four corpora, because name, signature and path then weigh more in the averaged vector, and the
# texts are ~20% shorter to embed. Bump EMBEDDING_TEXT_VERSION when the recipe changes: an index
# made with another recipe is rebuilt rather than mixing vectors of two recipes.
MAX_EMBED_BODY_CHARS = 300
EMBEDDING_TEXT_VERSION = 3  # 3: payloads carry requirement_ids, is_test and symbol_hash
_LEADING_DOCSTRING = re.compile(r'^\s*[rRuUbB]{0,2}("""|\'\'\'|"|\')(?:.|\n)*?(?<!\\)\1', re.DOTALL)
REQUIREMENT_ID = re.compile(r"\bREQ-[A-Z0-9]+(?:-[A-Z0-9]+)*-\d{3,}\b", re.I)
"""Requirement ids cited in code (comments, docstrings, markers); documents use the settings' patterns."""
_REQUIREMENT_IN_NAME = re.compile(r"(?:^|_)req_([a-z0-9]+(?:_[a-z0-9]+)*?)_(\d{3,})(?=_|$)", re.I)
_TEST_DIRS = {"tests", "test", "__tests__", "spec", "specs", "testing"}
_TEST_FILE = re.compile(r"(^test_.*|.*_test\.[a-z]+|.*\.(test|spec)\.[a-z]+|.*Tests?\.(java|cs|kt))$")


def symbol_id(path: str, local_qualified_name: str) -> str:
    """The deterministic id of a symbol (a UUID string, valid for Qdrant and the graph)."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{path}::{local_qualified_name}"))


@functools.lru_cache(maxsize=1 << 17)
def file_id(path: str) -> str:
    """The deterministic id of a File node (remembered: a resolution names each file many times,
    and its edges then share one string per file)."""
    return str(uuid.uuid5(ID_NAMESPACE, f"file::{path}"))


def file_node_ids(symbol_ids: dict[str, list[str]]) -> set[str]:
    """The ids of the File and symbol nodes of files, from their symbol ids by path (what a
    file's subgraph replacement or deletion takes with it)."""
    return {i for ids in symbol_ids.values() for i in ids} | {file_id(path) for path in symbol_ids}


def module_id(name: str, language: str) -> str:
    """The deterministic id of an external Module node."""
    return str(uuid.uuid5(ID_NAMESPACE, f"module::{language}::{name}"))


def split_identifier(name: str) -> str:
    """``getHTTPResponse`` / ``get_http_response`` → ``get http response``."""
    return " ".join(identifier_words(name))


def path_prefixes(path: str) -> list[str]:
    """Directory prefixes of a path for prefix filtering: ``a/b/c.py`` → ``["a/", "a/b/"]``."""
    parts = PurePosixPath(path).parts[:-1]
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


@dataclass(slots=True)
class SymbolRecord:
    """One symbol ready for the stores."""

    id: str
    symbol: ParsedSymbol
    local_name: str
    qualified_name: str
    path_qualified_name: str
    payload: dict[str, Any]
    embed_text: str
    sparse_text: str


def _body_after_signature(symbol: ParsedSymbol) -> str:
    """The code after the declaration, without a leading docstring (it is embedded already).

    The signature is the declaration with whitespace collapsed, so its non-space characters
    appear in order in the code: matching them finds where the body starts, even for a
    declaration spread over several lines or a one-line function.
    """
    code = symbol.code
    compact_positions = [i for i, ch in enumerate(code) if not ch.isspace()]
    compact = "".join(code[i] for i in compact_positions)
    target = "".join(symbol.signature.split())
    found = compact.find(target) if target else -1
    body = code if found < 0 else code[compact_positions[found + len(target) - 1] + 1 :]
    body = body.lstrip().removeprefix("=>").removeprefix(":").removeprefix("{")
    if symbol.docstring:
        body = _LEADING_DOCSTRING.sub("", body, count=1)
    return "\n".join(line for line in body.splitlines() if line.strip())


def embedding_text(parsed: ParsedFile, symbol: ParsedSymbol, qualified_name: str) -> str:
    """What the dense model sees for a symbol.

    Natural-language handles first (the name and its container split into words, the
    docstring), then the signature and the start of the body: all-MiniLM-L6-v2 reads only 256
    word pieces, and queries are mostly phrased in words, not code.
    """
    words = split_identifier(symbol.name)
    container = f" of {split_identifier(symbol.container.split('.')[-1])}" if symbol.container else ""
    lines = [f"{symbol.kind} {words}{container}"]
    if symbol.docstring:
        lines.append(symbol.docstring[:600])
    lines.append(symbol.signature)
    lines.append(_body_after_signature(symbol)[:MAX_EMBED_BODY_CHARS])
    lines.append(f"in {parsed.path}")
    return "\n".join(lines)


def class_outline(parsed: ParsedFile, symbol: ParsedSymbol) -> str:
    """A type's code with its methods' bodies cut out (their declaration lines kept)."""
    lines = symbol.code.splitlines()
    keep = [bool(line.strip()) for line in lines]
    for member in parsed.symbols:
        if member.container != symbol.qualified_name or member.kind not in ("method", "constructor"):
            continue
        first = member.start_line - symbol.start_line
        last = member.end_line - symbol.start_line
        if first < 0 or last >= len(lines):  # defined outside the body (Go receivers, Rust impls)
            continue
        declaration_end = first
        while declaration_end < last and not lines[declaration_end].rstrip().endswith((":", "{", ";")):
            declaration_end += 1
        for index in range(max(declaration_end + 1, 0), min(last + 1, len(lines))):
            keep[index] = False
    return "\n".join(line for line, kept in zip(lines, keep, strict=True) if kept)


def sparse_text(parsed: ParsedFile, symbol: ParsedSymbol) -> str:
    """What the sparse (BM25) vector indexes: name thrice, container, docstring, code, path.

    A type contributes its outline (fields and method declarations): its methods are indexed
    on their own, and repeating their bodies would let every big class match every query.
    """
    parts = [symbol.name, symbol.name, symbol.name]
    if symbol.container:
        parts.append(symbol.container)
    if symbol.docstring:
        parts.append(symbol.docstring)
    if symbol.kind in CLASS_KINDS:
        parts.append(class_outline(parsed, symbol)[:MAX_SPARSE_CODE])
    else:
        parts.append((symbol.code or symbol.signature)[:MAX_SPARSE_CODE])
    parts.append(parsed.path)
    return "\n".join(parts)


def is_test_symbol(path: str, symbol: ParsedSymbol) -> bool:
    """A test: a symbol in a test file or directory, or a function named ``test…``/class ``Test…``."""
    parts = PurePosixPath(path).parts
    if any(part in _TEST_DIRS for part in parts[:-1]) or _TEST_FILE.match(parts[-1]):
        return True
    return symbol.name.startswith("test_") or (symbol.kind in CLASS_KINDS and symbol.name.startswith("Test"))


def cited_requirements(parsed: ParsedFile, symbol: ParsedSymbol) -> list[str]:
    """Requirement ids a symbol cites in its own text: docstring, comments, decorators (pytest
    markers) and its name (``test_req_auth_001_login``); a type's methods cite for themselves."""
    own = class_outline(parsed, symbol) if symbol.kind in CLASS_KINDS else symbol.code
    found = {m.group(0).upper(): None for m in REQUIREMENT_ID.finditer(f"{symbol.docstring or ''}\n{own}")}
    for match in _REQUIREMENT_IN_NAME.finditer(symbol.name):
        found[f"REQ-{match.group(1).upper().replace('_', '-')}-{match.group(2)}"] = None
    return list(found)


def callable_language(kind: str, language: str) -> dict[str, str]:
    """The ``callable_language`` field of a symbol's payload: its language for a function,
    method or constructor, nothing for any other kind (``pipelines.index_context.CALLABLE_LANGUAGE``)."""
    return {CALLABLE_LANGUAGE: language} if kind in CALLABLE_KINDS else {}


def build_symbol_records(parsed: ParsedFile, root: Path | None = None) -> list[SymbolRecord]:
    """Store records for every symbol of a parsed file (overloads get ``#2``, ``#3`` ids). A
    payload holds its symbol and nothing of the file's version (its hash, when it was indexed: the
    manifest's): a symbol that did not change keeps its point as it is when its file is written
    again (``pipelines.index_writes.write_vectors``).

    ``root``: the project root, where a Go file's ``go.mod`` and a Rust file's ``Cargo.toml``
    are looked for (None: the names follow the repo-relative path alone).
    """
    records: list[SymbolRecord] = []
    seen: dict[str, int] = {}
    module = file_module(parsed.path, parsed.language, root)
    prefixes = path_prefixes(parsed.path)
    for symbol in parsed.symbols:
        count = seen.get(symbol.qualified_name, 0) + 1
        seen[symbol.qualified_name] = count
        local = symbol.qualified_name if count == 1 else f"{symbol.qualified_name}#{count}"
        qualified = language_qualified_name(parsed.language, module, symbol.namespace, symbol.qualified_name)
        by_path = path_qualified_name(parsed.path, symbol.qualified_name)
        sid = symbol_id(parsed.path, local)
        code = symbol.code
        payload = {
            "id": sid,
            "kind": symbol.kind,
            "name": symbol.name,
            "qualified_name": qualified,
            "path_qualified_name": by_path,
            "local_name": local,
            "container": symbol.container,
            "file_path": parsed.path,
            "path_prefixes": prefixes,
            "language": parsed.language,
            **callable_language(symbol.kind, parsed.language),
            "start_line": symbol.start_line,
            "end_line": symbol.end_line,
            "signature": symbol.signature,
            "docstring": (symbol.docstring or "")[:MAX_PAYLOAD_DOC] or None,
            "code": code[:MAX_PAYLOAD_CODE],
            "code_truncated": len(code) > MAX_PAYLOAD_CODE,
            "is_async": symbol.is_async,
            "extends": symbol.extends,
            "implements": symbol.implements,
            "symbol_hash": hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest(),
            "requirement_ids": cited_requirements(parsed, symbol),
            "is_test": is_test_symbol(parsed.path, symbol),
        }
        records.append(
            SymbolRecord(
                id=sid,
                symbol=symbol,
                local_name=local,
                qualified_name=qualified,
                path_qualified_name=by_path,
                payload=payload,
                embed_text=embedding_text(parsed, symbol, qualified),
                sparse_text=sparse_text(parsed, symbol),
            )
        )
    return records


def graph_label(kind: str) -> str:
    """Graph node label of a symbol kind (types are ``Class`` nodes, callables ``Function``)."""
    return "Class" if kind in CLASS_KINDS else "Function"

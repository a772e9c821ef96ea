"""Language registry: file extensions, grammars, compiled queries and hooks (all cached).

Each grammar's ``Query`` is compiled once per process and shared; parsers are per thread.

A ``.h`` header parses as C++: the language is decided from the path alone, and
tree-sitter-cpp, built on tree-sitter-c's grammar, reads C headers nearly as well (measured on
cffi 1.17.1's headers: 68 of the 71 function definitions the C grammar finds), while C++
headers read as C lose most of their definitions (pybind11 2.13.6: thousands of error regions
against tens). C and C++ share one naming and resolution scheme, so a C header's prototypes
still pair with the ``.c`` file's definitions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tree_sitter import Language as TSLanguage
from tree_sitter import Parser, Query

from resources.schemas.code import Language

from pipelines.parsing.captures import PatternRole, pattern_roles
from pipelines.parsing.hooks import (
    CHooks,
    CppHooks,
    CSharpHooks,
    EcmaScriptHooks,
    GoHooks,
    JavaHooks,
    LanguageHooks,
    PythonHooks,
    RustHooks,
)

QUERIES_DIR = Path(__file__).parent / "queries"

EXTENSIONS: dict[str, Language] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".java": "java",
    ".go": "go",
    ".rs": "rust",
    ".cs": "csharp",
    ".c": "c",
    ".h": "cpp",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
}


def language_for_path(path: str) -> Language | None:
    """Return the language of a file from its extension.

    Args:
        path: A file path (only the suffix is looked at, case-insensitively).

    Returns:
        The language, or None for unsupported files.
    """
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:] or "\\" in path[dot:]:
        return None
    return EXTENSIONS.get(path[dot:].lower())


def _grammar(language: Language) -> object:
    """Return the grammar capsule of a language (imports the wheel lazily)."""
    if language == "python":
        import tree_sitter_python as mod

        return mod.language()
    if language == "javascript":
        import tree_sitter_javascript as mod

        return mod.language()
    if language in ("typescript", "tsx"):
        import tree_sitter_typescript as mod

        return mod.language_tsx() if language == "tsx" else mod.language_typescript()
    if language == "java":
        import tree_sitter_java as mod

        return mod.language()
    if language == "go":
        import tree_sitter_go as mod

        return mod.language()
    if language == "rust":
        import tree_sitter_rust as mod

        return mod.language()
    if language == "csharp":
        import tree_sitter_c_sharp as mod

        return mod.language()
    if language == "c":
        import tree_sitter_c as mod

        return mod.language()
    if language == "cpp":
        import tree_sitter_cpp as mod

        return mod.language()
    raise ValueError(f"unsupported language: {language}")


_QUERY_FILES: dict[str, str] = {"tsx": "typescript"}

_HOOKS: dict[str, Callable[[], LanguageHooks]] = {
    "python": PythonHooks,
    "javascript": EcmaScriptHooks,
    "typescript": EcmaScriptHooks,
    "tsx": EcmaScriptHooks,
    "java": JavaHooks,
    "go": GoHooks,
    "rust": RustHooks,
    "csharp": CSharpHooks,
    "c": CHooks,
    "cpp": CppHooks,
}

_ERROR_QUERY = "(ERROR) @error\n(MISSING) @missing\n"


@dataclass(frozen=True)
class LanguageSpec:
    """Everything needed to parse and extract one language.

    Attributes:
        name: The language.
        ts_language: The tree-sitter grammar.
        query: The compiled extraction query (``queries/<name>.scm``).
        roles: The role of each pattern of ``query``.
        error_query: A query capturing ``ERROR`` and ``MISSING`` nodes.
        hooks: The language's extraction hooks.
    """

    name: Language
    ts_language: TSLanguage
    query: Query
    roles: tuple[PatternRole, ...]
    error_query: Query
    hooks: LanguageHooks


@cache
def get_spec(language: Language) -> LanguageSpec:
    """Return the (cached) spec of a language: grammar, compiled queries, hooks.

    Args:
        language: A supported language.

    Returns:
        The spec.

    Raises:
        ValueError: For an unsupported language.
    """
    if language not in _HOOKS:
        raise ValueError(f"unsupported language: {language}")
    ts_language = TSLanguage(_grammar(language))
    source = (QUERIES_DIR / f"{_QUERY_FILES.get(language, language)}.scm").read_text(
        "utf-8"
    )
    query = Query(ts_language, source)
    return LanguageSpec(
        name=language,
        ts_language=ts_language,
        query=query,
        roles=tuple(pattern_roles(query, source)),
        error_query=Query(ts_language, _ERROR_QUERY),
        hooks=_HOOKS[language](),
    )


_local = threading.local()


def get_parser(language: Language) -> Parser:
    """Return this thread's parser for a language (parsers are not thread-safe).

    Args:
        language: A supported language.

    Returns:
        A parser bound to the language's grammar.
    """
    parsers: dict[str, Parser] | None = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    parser = parsers.get(language)
    if parser is None:
        parser = parsers[language] = Parser(get_spec(language).ts_language)
    return parser

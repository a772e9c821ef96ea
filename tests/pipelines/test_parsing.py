"""Tests for pipelines.parsing: exact extraction tables per language, robustness, timeouts."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pipelines.parsing import ParseTimeout, language_for_path, parse_source
from resources.schemas.code import ParsedFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPOS = FIXTURES / "repos"
EXPECTED = FIXTURES / "expected"
LANGUAGE_DIRS = ["python", "javascript", "typescript", "java", "go", "rust", "csharp", "c", "cpp"]
ALL_LANGUAGES = [
    "python",
    "javascript",
    "typescript",
    "tsx",
    "java",
    "go",
    "rust",
    "csharp",
    "c",
    "cpp",
]


def _comparable(parsed: ParsedFile) -> dict:
    """ParsedFile as a dict without the symbols' ``code``."""
    return parsed.model_dump(exclude={"symbols": {"__all__": {"code"}}})


def _fixture_files(lang_dir: str) -> list[Path]:
    root = REPOS / lang_dir
    return sorted(
        p for p in root.rglob("*") if p.is_file() and language_for_path(p.name)
    )


@pytest.mark.parametrize("lang_dir", LANGUAGE_DIRS)
def test_fixture_tables_match_exactly(lang_dir: str) -> None:
    expected = json.loads((EXPECTED / f"{lang_dir}.json").read_text("utf-8"))
    files = _fixture_files(lang_dir)
    rel_paths = [p.relative_to(REPOS / lang_dir).as_posix() for p in files]
    assert sorted(rel_paths) == sorted(expected), (
        "every fixture file needs an expected table"
    )
    for path, rel in zip(files, rel_paths, strict=True):
        language = language_for_path(rel)
        assert language is not None
        parsed = parse_source(rel, path.read_bytes(), language)
        want = _comparable(ParsedFile.model_validate(expected[rel]))
        got = _comparable(parsed)
        for key in ("path", "language", "error_count", "module_docstring", "imports"):
            assert got[key] == want[key], f"{rel}: {key}"
        assert [s["qualified_name"] for s in got["symbols"]] == [
            s["qualified_name"] for s in want["symbols"]
        ], rel
        for got_sym, want_sym in zip(got["symbols"], want["symbols"], strict=True):
            assert got_sym == want_sym, f"{rel}: {want_sym['qualified_name']}"
        assert got["calls"] == want["calls"], f"{rel}: calls"
        assert got == want


@pytest.mark.parametrize("lang_dir", LANGUAGE_DIRS)
def test_symbol_code_is_the_definition_text(lang_dir: str) -> None:
    for path in _fixture_files(lang_dir):
        source = path.read_bytes()
        parsed = parse_source(path.name, source, language_for_path(path.name))  # type: ignore[arg-type]
        lines = source.decode("utf-8").splitlines()
        for symbol in parsed.symbols:
            assert symbol.code.strip(), symbol.qualified_name
            first = symbol.code.splitlines()[0]
            assert first.strip() in lines[symbol.start_line - 1], symbol.qualified_name
            assert symbol.code.count("\n") == symbol.end_line - symbol.start_line


def test_syntax_errors_keep_partial_extraction() -> None:
    source = (
        b"def ok(a):\n    return helper(a)\n\n"
        b"def broken(:\n    pass\n\n"
        b"class Fine:\n    def method(self):\n        return 1\n"
    )
    parsed = parse_source("broken.py", source, "python")
    assert parsed.error_count > 0
    names = [s.qualified_name for s in parsed.symbols]
    assert "ok" in names and "Fine" in names and "Fine.method" in names
    assert [c.callee for c in parsed.calls] == ["helper"]


@pytest.mark.parametrize(
    ("language", "source"),
    [
        (
            "javascript",
            b"function ok() { run(); }\nfunction bad( { \nclass K { m() {} }\n",
        ),
        ("java", b"class A { void ok() { run(); } void bad( { }\n"),
        ("go", b"package p\nfunc Ok() { run() }\nfunc Bad( {\n"),
        ("rust", b"fn ok() { run(); }\nfn bad( {\n"),
        ("csharp", b"class A { void Ok() { Run(); } void Bad( { }\n"),
        ("c", b"int ok(void) { run(); }\nint bad( {\n"),
        ("cpp", b"class A { void ok() { run(); } void bad( { };\n"),
    ],
)
def test_syntax_errors_other_languages(language: str, source: bytes) -> None:
    parsed = parse_source("x", source, language)  # type: ignore[arg-type]
    assert parsed.error_count > 0
    assert any(s.name.lower() == "ok" for s in parsed.symbols)


def test_invalid_utf8_is_replaced() -> None:
    source = b'def f():\n    """caf\xff\xfe doc"""\n    return g("\xc3\x28")\n'
    parsed = parse_source("bad_utf8.py", source, "python")
    assert [s.name for s in parsed.symbols] == ["f"]
    assert parsed.symbols[0].docstring == "caf\ufffd\ufffd doc"
    assert [c.callee for c in parsed.calls] == ["g"]
    assert "\ufffd" in parsed.symbols[0].code


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_empty_file(language: str) -> None:
    parsed = parse_source("empty", b"", language)  # type: ignore[arg-type]
    assert parsed == ParsedFile(path="empty", language=language)  # type: ignore[arg-type]


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_deeply_nested_expression_does_not_crash(language: str) -> None:
    depth = 5000
    expr = b"(" * depth + b"1" + b")" * depth
    wrappers = {
        "python": b"x = %s\n",
        "javascript": b"const x = %s;\n",
        "typescript": b"const x = %s;\n",
        "tsx": b"const x = %s;\n",
        "java": b"class A { int x = %s; }\n",
        "go": b"package p\nvar x = %s\n",
        "rust": b"fn f() { let x = %s; }\n",
        "csharp": b"class A { int x = %s; }\n",
        "c": b"int x = %s;\n",
        "cpp": b"int x = %s;\n",
    }
    parsed = parse_source("deep", wrappers[language] % expr, language)  # type: ignore[arg-type]
    assert parsed.path == "deep"


def test_deeply_nested_calls_and_functions() -> None:
    depth = 5000
    calls = b"x = " + b"f(" * depth + b"1" + b")" * depth + b"\n"
    parsed = parse_source("calls.py", calls, "python")
    assert len(parsed.calls) == depth
    assert {c.callee for c in parsed.calls} == {"f"}
    # node.parent/prev_sibling cost O(depth) in tree-sitter: keep this one moderate
    depth = 1000
    funcs = b"".join(b"function f%d() {" % i for i in range(depth)) + b"}" * depth
    parsed = parse_source("funcs.js", funcs, "javascript")
    assert len(parsed.symbols) == depth
    assert parsed.symbols[-1].container == parsed.symbols[-2].qualified_name


@pytest.mark.parametrize("language", ALL_LANGUAGES)
def test_binary_garbage(language: str) -> None:
    garbage = bytes((i * 7919 + 13) % 256 for i in range(50_000)) + b"\x00" * 100
    parsed = parse_source("garbage.bin", garbage, language)  # type: ignore[arg-type]
    assert parsed.language == language


def test_timeout_raises_parse_timeout() -> None:
    body = b"".join(
        b"def f%d(x):\n    return g(x) + [h(i) for i in range(10)]\n" % i
        for i in range(100_000)
    )
    started = time.perf_counter()
    with pytest.raises(ParseTimeout) as info:
        parse_source("big.py", body, "python", timeout_s=0.01)
    assert time.perf_counter() - started < 2.0
    assert info.value.path == "big.py"
    # the thread's parser is still usable afterwards
    assert [
        s.name
        for s in parse_source("ok.py", b"def ok():\n    pass\n", "python").symbols
    ] == ["ok"]


def test_import_forms() -> None:
    rust = parse_source(
        "lib.rs",
        b"use std::io::{self, prelude::{Read, Write as W}, BufRead};\nuse foo;\n",
        "rust",
    )
    assert [(i.module, i.items, i.alias, i.line) for i in rust.imports] == [
        ("std::io", ["self", "BufRead"], None, 1),
        ("std::io::prelude", ["Read", "Write"], None, 1),
        ("foo", [], None, 2),
    ]
    js = parse_source(
        "m.js",
        b'export { a, b as c } from "./x";\nexport * from "./y";\n'
        b'const { d, e: f } = require("z");\nconst g = other("w");\n',
        "javascript",
    )
    assert [(i.module, i.items, i.alias) for i in js.imports] == [
        ("./x", ["a", "b"], None),
        ("./y", ["*"], None),
        ("z", ["d", "e"], None),
    ]
    py = parse_source(
        "m.py", b"from a.b import c as d\nfrom . import (x, y)\n", "python"
    )
    assert [(i.module, i.items, i.alias) for i in py.imports] == [
        ("a.b", ["c"], "d"),
        (".", ["x", "y"], None),
    ]
    cs = parse_source(
        "m.cs", b"global using System.Linq;\nusing static System.Console;\n", "csharp"
    )
    assert [(i.module, i.alias) for i in cs.imports] == [
        ("System.Linq", None),
        ("System.Console", None),
    ]


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("a/b.py", "python"),
        ("b.pyi", "python"),
        ("x.js", "javascript"),
        ("x.jsx", "javascript"),
        ("x.mjs", "javascript"),
        ("x.cjs", "javascript"),
        ("x.ts", "typescript"),
        ("x.mts", "typescript"),
        ("x.cts", "typescript"),
        ("x.tsx", "tsx"),
        ("X.java", "java"),
        ("main.go", "go"),
        ("lib.rs", "rust"),
        ("Prog.cs", "csharp"),
        ("ring.c", "c"),
        ("ring.h", "cpp"),
        ("shape.cc", "cpp"),
        ("shape.cpp", "cpp"),
        ("shape.cxx", "cpp"),
        ("shape.c++", "cpp"),
        ("shape.hpp", "cpp"),
        ("shape.hh", "cpp"),
        ("shape.hxx", "cpp"),
        ("shape.h++", "cpp"),
        ("LEGACY.C", "c"),
        ("UPPER.PY", "python"),
        ("README.md", None),
        ("Makefile", None),
        ("dir.py/file", None),
        (".py", "python"),
        ("archive.tar.gz", None),
    ],
)
def test_language_for_path(path: str, language: str | None) -> None:
    assert language_for_path(path) == language


def test_unsupported_language_raises_value_error() -> None:
    with pytest.raises(ValueError):
        parse_source("x.kt", b"fun main() {}", "kotlin")  # type: ignore[arg-type]

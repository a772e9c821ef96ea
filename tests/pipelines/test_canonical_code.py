"""The canonical form of a function: each edit that keeps behaviour is undone, each one that
changes it is kept (issue 19, item 1)."""

from __future__ import annotations

import re

import pytest

from pipelines.parsing.canonical import canonical_code
from resources.code_similarity import code_tokens, compare_code


def same(a: str, b: str, language: str = "python") -> bool:
    """Whether two functions have the same canonical tokens (names abstracted)."""
    x, y = canonical_code(a, language), canonical_code(b, language)
    return [t.text for t in code_tokens(x.text, language, "f")] == [t.text for t in code_tokens(y.text, language, "f")]


ORIGINAL = '''def f(items: list[int], scale: float = 1.0) -> int:
    """Sum of the positive items, scaled."""
    total: int = 0  # running sum
    for item in items:
        if item > 0:
            total = total + item * scale
    return total
'''


@pytest.mark.parametrize(
    ("kind", "clone"),
    [
        ("annotations", ORIGINAL.replace(": list[int]", "").replace(": float", "").replace(" -> int", "").replace(": int", "")),
        ("docstring", ORIGINAL.replace('    """Sum of the positive items, scaled."""\n', "")),
        ("comments", ORIGINAL.replace("  # running sum", "")),
        ("augmented", ORIGINAL.replace("total = total + item * scale", "total += item * scale")),
        ("comparison", ORIGINAL.replace("item > 0", "0 < item")),
        ("defaults", ORIGINAL.replace("scale: float = 1.0", "scale: float = 1.")),
        ("formatting", ORIGINAL.replace("    ", "  ").replace("item * scale", "item*scale")),
    ],
)
def test_each_python_edit_that_keeps_behaviour_is_undone(kind: str, clone: str) -> None:
    assert clone != ORIGINAL
    assert same(ORIGINAL, clone), kind


def test_a_return_through_a_temporary_is_a_direct_return() -> None:
    direct = "def f(a, b):\n    x = a * 2\n    return x + b\n"
    temporary = "def f(a, b):\n    x = a * 2\n    result = x + b\n    return result\n"
    assert same(direct, temporary)
    assert "temporary" in canonical_code(temporary, "python").rewrites


@pytest.mark.parametrize(
    "variant",
    [
        "def f(a, b):\n    if a < b:\n        return a\n    else:\n        return b\n",
        "def f(a, b):\n    if a < b:\n        return a\n    return b\n",
        "def f(a, b):\n    if a < b:\n        m = a\n    else:\n        m = b\n    return m\n",
    ],
)
def test_if_else_is_a_conditional_expression(variant: str) -> None:
    assert same("def f(a, b):\n    return a if a < b else b\n", variant)


@pytest.mark.parametrize(
    "loop",
    [
        "def f(xs):\n    out = []\n    for x in xs:\n        if x % 2:\n            out.append(x * x)\n    return out\n",
        "def f(xs):\n    out = []\n    for x in xs:\n        if x % 2:\n            out.append(x * x)\n    res = out\n    return res\n",
    ],
)
def test_a_loop_of_appends_is_a_comprehension(loop: str) -> None:
    assert same("def f(xs):\n    return [x * x for x in xs if x % 2]\n", loop)


def test_typescript_types_loops_and_conditionals_are_undone() -> None:
    typed = """function f(xs: number[], limit: number = 10): number[] {
  const out: number[] = [];
  for (const x of xs) {
    if (x > limit) {
      out.push(x * 2);
    }
  }
  return out;
}"""
    plain = "function f(xs, limit = 10) {\n  return xs.filter((x) => limit < x).map((x) => x * 2);\n}"
    assert same(typed, plain, "typescript")
    pick = "function f(a: number, b: number): number {\n  if (a > b) { return a; } else { return b; }\n}"
    assert same(pick, "function f(a, b) { return b < a ? a : b; }", "typescript")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("def f(v):\n    t = 0\n    for x in v:\n        if x > 0:\n            t += x\n    return t\n",
         "def f(v):\n    t = 0\n    for x in v:\n        if x < 0:\n            t += x\n    return t\n"),
        ("def f(a, b):\n    return a if a < b else b\n", "def f(a, b):\n    return b if a < b else a\n"),
        ("def f(xs):\n    return [x for x in xs if x]\n", "def f(xs):\n    return [x for x in xs if not x]\n"),
    ],
)
def test_edits_that_change_behaviour_stay(a: str, b: str) -> None:
    comparison = compare_code(canonical_code(a, "python").text, canonical_code(b, "python").text, "python", "f", "f")
    assert comparison.verdict != "clone"


def test_operands_swapped_inside_a_statement_are_not_a_reordering() -> None:
    positive = "def f(values):\n    total = 0\n    for value in values:\n        if value > 0:\n            total += value\n    return total\n"
    negative = positive.replace("value > 0", "value < 0")
    comparison = compare_code(canonical_code(positive, "python").text, canonical_code(negative, "python").text, "python")
    assert comparison.verdict == "variant" and comparison.rearranged


def test_independent_statements_and_dict_keys_in_another_order_are_a_clone() -> None:
    a = 'def f(o):\n    n = len(o.items)\n    s = sum(o.items)\n    return {"n": n, "s": s}\n'
    b = 'def f(o):\n    s = sum(o.items)\n    n = len(o.items)\n    return {"s": s, "n": n}\n'
    comparison = compare_code(canonical_code(a, "python").text, canonical_code(b, "python").text, "python")
    assert comparison.verdict == "clone"


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "def f(items, rate):\n    subtotal = sum(items)\n    return(round_money(subtotal * rate))\n"),
        ("javascript", "function f(w, h) {\n  const area = w * h;\n  return(compute(area, h));\n}\n"),
        ("c", "int f(int n) {\n    int m = n * 2;\n    return-m>limit(n);\n}\n"),
    ],
)
def test_a_rewritten_part_never_runs_into_the_word_before_it(language: str, code: str) -> None:
    """``return(f(x))`` without its parentheses is ``return f(x)``: glued, ``returnf`` would read as
    a called name the code does not have (a spacing change would then be a behaviour change, and
    find_duplicates' clone evidence would look for a name no clone has)."""
    from resources.code_similarity import clone_evidence, code_side

    canonical = canonical_code(code, language).text
    assert "return " in canonical and not re.search(r"return\w", canonical)
    spaced = code.replace("return(", "return (").replace("return-", "return -")
    assert same(code, spaced, language)
    evidence = clone_evidence(code_side(canonical, language, "f"), language)
    assert all(any(text in code for text in entry) for entry in evidence)


def test_what_was_removed_is_reported() -> None:
    canonical = canonical_code(ORIGINAL, "python")
    assert canonical.docstring == '"""Sum of the positive items, scaled."""'
    assert canonical.comments == 1
    assert sorted(canonical.annotations) == sorted(["int", "list[int]", "float", "int"])
    assert sorted(canonical.rewrites) == ["augmented", "comparison"]


def test_broken_or_unknown_code_is_rendered_as_far_as_it_goes() -> None:
    assert canonical_code("def f(:\n    return 1\n", "python").text
    assert canonical_code("whatever", "cobol").text == "whatever"


def _functions_of_real_code() -> list[tuple[str, str]]:
    """Functions of real code: some standard-library modules and every fixture repository."""
    import sys
    from pathlib import Path

    from pipelines.parsing import parse_source
    from pipelines.parsing.languages import language_for_path

    stdlib = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    files = [stdlib / name for name in ("textwrap.py", "fractions.py", "difflib.py", "argparse.py")]
    files += sorted(p for p in (Path(__file__).parents[1] / "fixtures" / "repos").rglob("*") if p.is_file())
    found = []
    for path in files:
        language = language_for_path(str(path))
        if language is None or not path.exists():
            continue
        parsed = parse_source(str(path), path.read_bytes(), language)
        found += [(symbol.code, language) for symbol in parsed.symbols if symbol.kind in ("function", "method")]
    return found


def test_subtrees_no_rule_rewrites_are_copied_as_they_would_be_rendered(monkeypatch) -> None:
    """The renderer copies a subtree holding no node a rule may rewrite (a comment, a type, a
    comparison, a block, ...) as written instead of walking it: the canonical form of every
    function of real code is the one walking every node gives."""
    from pipelines.parsing import canonical

    functions = _functions_of_real_code()
    assert len(functions) > 300 and {language for _, language in functions} >= {"python", "typescript", "go", "java"}
    pruned = [canonical.canonical_code.__wrapped__(code, language) for code, language in functions]
    monkeypatch.setattr(canonical._Renderer, "_holds_mark", staticmethod(lambda marks, node: True))
    walked = [canonical.canonical_code.__wrapped__(code, language) for code, language in functions]
    assert pruned == walked
    assert sum(form.rewrites != () for form in pruned) > 20  # the rules did apply

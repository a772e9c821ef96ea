"""Mechanically built clones of real functions, for the duplicate-detection benchmark.

Every clone keeps the behaviour of the original function and applies one kind of
behaviour-preserving edit (``EDIT_KINDS``) or all applicable ones (``COMBINED``); the detector
under test is never consulted, so the clones are ground truth by construction. A kind whose edit
does not apply to a function gives ``None`` (never an unchanged copy). ``hard_negatives`` pairs
functions with the same signature whose bodies differ.

Python is edited with the standard library (``ast`` decides, the original text is edited by spans,
so comments and layout stay unless the kind is about them); TypeScript with tree-sitter
(``bench/clones_ts.py``).

Run: ``python -m bench.clones CORPUS_DIR LANGUAGE [--seed N] [--selfcheck]`` — prints the number of
functions, how many functions each kind applies to, validates every clone (parse check) and shows
one original/clone pair per kind. ``--selfcheck`` also executes a few pure sample functions and
their Python clones on sample inputs and compares the results.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import copy
import dataclasses
import io
import keyword
import random
import re
import sys
import tokenize
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

EDIT_KINDS: tuple[str, ...] = ("renamed", "annotations", "docstring", "comments", "formatting", "defaults",
                               "augmented", "comparison", "temporary", "conditional", "comprehension")
COMBINED = "combined"
# The order `combined` applies the kinds in (statement kinds first, layout last).
COMBINED_ORDER: tuple[str, ...] = ("comprehension", "conditional", "temporary", "augmented", "comparison",
                                   "docstring", "comments", "annotations", "defaults", "renamed", "formatting")

SKIP_DIRS = {"tests", "test", "__tests__", "docs", "examples"}


@dataclass(frozen=True)
class FunctionSource:
    """One function of a corpus, with its source dedented to column 0."""

    path: str          # path relative to the corpus root, "/" separators
    name: str          # the function's own name
    start_line: int    # 1-based line of the `def`/`function` keyword
    end_line: int      # 1-based last line
    code: str          # the function's source, dedented to column 0 (decorators/JSDoc excluded)
    language: str      # "python" or "typescript"
    params: tuple[str, ...]   # parameter names in order (without self/cls/this)
    doc: str | None    # the docstring (Python) or the JSDoc comment before it (TS), else None


# -- corpus ------------------------------------------------------------------------------------

def _source_files(root: Path, language: str) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or any(part in SKIP_DIRS for part in path.relative_to(root).parts[:-1]):
            continue
        name = path.name
        if language == "python":
            if name.endswith(".py") and not name.startswith("test_"):
                out.append(path)
        elif name.endswith(".ts") and not name.endswith((".d.ts", ".test.ts", ".spec.ts")):
            out.append(path)
    return out


def functions_of(root: Path, language: str, *, min_statements: int = 3) -> list[FunctionSource]:
    """Every function and method in the .py (or .ts, excluding .d.ts) files under root (skip folders
    named tests/test/__tests__/docs/examples and files named test_*.py / *.test.ts / *.spec.ts), with
    at least min_statements statements in its body (nested statements count; a docstring does not)."""
    root = Path(root)
    out: list[FunctionSource] = []
    for path in _source_files(root, language):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if language == "python":
            out.extend(_py_functions(rel, text, min_statements))
        elif language == "typescript":
            from bench import clones_ts
            out.extend(clones_ts.functions(rel, text, min_statements, FunctionSource))
        else:
            raise ValueError(f"unknown language {language!r}")
    return out


# -- Python: text helpers -----------------------------------------------------------------------

class _Src:
    """Source text with conversion from ast (line, UTF-8 byte column) positions to str offsets."""

    def __init__(self, code: str):
        self.code = code
        self.lines = code.split("\n")
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def off(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)

    def text(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.code[a:b]

    def line_end(self, lineno: int) -> int:
        """Offset just after line `lineno` (its newline included)."""
        return min(self.starts[lineno], len(self.code))


def _apply(code: str, edits: list[tuple[int, int, str]]) -> str | None:
    """Apply (start, end, replacement) edits; None when two of them overlap."""
    edits = sorted(set(edits), key=lambda e: (e[0], e[1]))
    for (a0, a1, _), (b0, b1, _) in zip(edits, edits[1:]):
        if b0 < a1 or (b0 == a0 and b1 == a1):
            return None
    for start, end, rep in reversed(edits):
        code = code[:start] + rep + code[end:]
    return code


def _tokens(code: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(code).readline))


def _string_lines(tokens: list[tokenize.TokenInfo]) -> set[int]:
    """Lines (1-based) that are continuation lines of a multi-line string token."""
    lines: set[int] = set()
    fstack: list[int] = []
    fs_start = getattr(tokenize, "FSTRING_START", -1)
    fs_end = getattr(tokenize, "FSTRING_END", -2)
    for tok in tokens:
        if tok.type == fs_start:
            fstack.append(tok.start[0])
        elif tok.type == fs_end and fstack:
            lines.update(range(fstack.pop() + 1, tok.end[0] + 1))
        elif tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            lines.update(range(tok.start[0] + 1, tok.end[0] + 1))
    return lines


def _fn_node(code: str) -> tuple[ast.Module, ast.FunctionDef | ast.AsyncFunctionDef]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(code)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError("not a function")
    return tree, node


def _statements(node: ast.AST) -> int:
    body = list(getattr(node, "body", []))
    if body and _is_docstring(body[0]):
        body = body[1:]
    return sum(1 for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.stmt))


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _py_params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        names.append(a.vararg.arg)
    names += [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        names.append(a.kwarg.arg)
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return tuple(names)


def _py_functions(rel: str, text: str, min_statements: int) -> list[FunctionSource]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
        toks = _tokens(text)
    except (SyntaxError, tokenize.TokenError, ValueError):
        return []
    string_lines = _string_lines(toks)
    lines = text.split("\n")
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if _statements(node) < min_statements:
            continue
        first = lines[node.lineno - 1]
        indent = first.encode("utf-8")[:node.col_offset].decode("utf-8", errors="ignore")
        if indent.strip():
            continue  # `class A: def f(...)` on one line
        body_lines = []
        for ln in range(node.lineno, node.end_lineno + 1):
            line = lines[ln - 1]
            if ln == node.lineno:
                line = line[len(indent):]
            elif ln == node.end_lineno:
                # keep only up to the end of the node (e.g. `...; other` after it is not ours)
                line = line.encode("utf-8")[:node.end_col_offset].decode("utf-8", errors="ignore")
                if ln not in string_lines:
                    line = line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")
            elif ln not in string_lines:
                line = line[len(indent):] if line.startswith(indent) else line.lstrip(" \t")
            body_lines.append(line)
        code = "\n".join(body_lines).rstrip() + "\n"
        try:
            _, parsed = _fn_node(code)
        except (SyntaxError, ValueError):
            continue
        if ast.dump(parsed) != ast.dump(node):
            continue
        out.append(FunctionSource(rel, node.name, node.lineno, node.end_lineno, code, "python",
                                  _py_params(node), ast.get_docstring(node, clean=True)))
    out.sort(key=lambda f: (f.path, f.start_line))
    return out


# -- Python: statement replacement ---------------------------------------------------------------

def _stmt_lines(src: _Src, first: ast.stmt, last: ast.stmt | None = None) -> tuple[int, int, str] | None:
    """(start, end, indent) of the full lines of statements first..last, or None when other code
    shares those lines (`if c: x = 1`, `a = 1; b = 2`) or the first line opens an `elif`."""
    last = last or first
    line = src.lines[first.lineno - 1]
    prefix = line.encode("utf-8")[:first.col_offset].decode("utf-8", errors="ignore")
    if prefix.strip() or line.lstrip().startswith("elif"):
        return None
    tail = src.lines[last.end_lineno - 1].encode("utf-8")[last.end_col_offset:].decode("utf-8", errors="ignore")
    if tail.strip() and not tail.strip().startswith("#"):
        return None
    return src.starts[first.lineno - 1], src.line_end(last.end_lineno), prefix


def _render(stmts: list[ast.stmt], indent: str) -> str | None:
    """ast.unparse of stmts indented by `indent`, or None if that would touch a multi-line string."""
    text = "\n".join(ast.unparse(ast.fix_missing_locations(s)) for s in stmts)
    try:
        if _string_lines(_tokens(text + "\n")):
            return None
    except tokenize.TokenError:
        return None
    return "".join((indent + line if line else line) + "\n" for line in text.split("\n"))


def _replace_stmts(src: _Src, first: ast.stmt, last: ast.stmt | None, new: list[ast.stmt]) -> tuple[int, int, str] | None:
    where = _stmt_lines(src, first, last)
    if where is None:
        return None
    start, end, indent = where
    text = _render(new, indent)
    if text is None:
        return None
    return start, end, text


def _bodies(root: ast.AST):
    """Every statement list (body, orelse, finalbody, handlers' bodies, match cases) under root."""
    for node in ast.walk(root):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _names_used(root: ast.AST) -> set[str]:
    names: set[str] = set()
    for n in ast.walk(root):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.Attribute):
            names.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg:
            names.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            names.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


_RESERVED = set(keyword.kwlist) | set(getattr(keyword, "softkwlist", [])) | set(dir(builtins))


def fresh_name(used: set[str], candidates: tuple[str, ...], reserved: set[str],
               rng: random.Random | None = None) -> str:
    """A name of ``candidates`` (shuffled by ``rng``), else one with a number appended, that is
    neither in ``used`` nor ``reserved``; it is added to ``used``."""
    pool = list(candidates)
    if rng is not None:
        rng.shuffle(pool)
    for name in pool:
        if name not in used and name not in reserved:
            used.add(name)
            return name
    i = 2
    while True:
        for name in pool:
            if f"{name}{i}" not in used:
                used.add(f"{name}{i}")
                return f"{name}{i}"
        i += 1


def _name_count(root: ast.AST, name: str) -> int:
    return sum(1 for n in ast.walk(root) if isinstance(n, ast.Name) and n.id == name)


# -- Python: the edit kinds ----------------------------------------------------------------------

_WORDS = ("item", "value", "acc", "node", "entry", "buf", "res", "elem", "cur", "data", "tmp", "out", "key2",
          "obj", "val", "seq", "part", "piece", "elt", "current", "target", "source", "chunk", "token", "record",
          "element", "thing", "payload", "unit", "slot", "total", "idx", "pos", "step", "state", "ctx", "spec",
          "opt", "flag", "arr", "lst", "coll", "group", "batch", "field_", "mapping", "holder", "temp", "store",
          "inp", "arg_", "elem2", "bucket", "cell", "frame", "head", "rest", "acc2", "subj", "thing2", "aux")
_FN_AFFIXES = ("{}_impl", "do_{}", "{}2", "_{}", "{}_fn", "compute_{}", "{}_new", "run_{}", "{}_v2")


def _scope_nodes(fn: ast.AST):
    """Nodes of fn's own scope (not inside nested defs, lambdas, classes)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _py_renamed(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    used = _names_used(tree)
    excluded = {"self", "cls", "__class__"}
    for n in ast.walk(fn):
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            excluded.update(n.names)
        elif isinstance(n, ast.alias):
            excluded.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            excluded.add(n.name)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            excluded.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            excluded.add(n.rest)
    for cls in (n for n in ast.walk(fn) if isinstance(n, ast.ClassDef)):
        for n in ast.walk(cls):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                excluded.add(n.id)
    a = fn.args
    all_args = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
    params = [x.arg for x in all_args if x.arg not in excluded]
    # locals of fn's own scope; comprehension variables only when every use is inside a comprehension binding them
    locals_: list[str] = []
    comp_bound: set[str] = set()
    covered: set[int] = set()
    for n in _scope_nodes(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            locals_.append(n.id)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            locals_.append(n.name)
        elif isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            bound = {t.id for g in n.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
            comp_bound |= bound
            covered |= {id(x) for x in ast.walk(n) if isinstance(x, ast.Name) and x.id in bound}
    comp_stores = {id(t) for n in ast.walk(fn) if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
                   for g in n.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
    direct_non_comp = {n.id for n in _scope_nodes(fn) if isinstance(n, ast.Name)
                       and isinstance(n.ctx, (ast.Store, ast.Del)) and id(n) not in comp_stores}
    direct_non_comp |= {n.name for n in _scope_nodes(fn) if isinstance(n, ast.ExceptHandler) and n.name}
    candidates: list[str] = []
    for name in params + locals_:
        if name in excluded or name in candidates:
            continue
        if name in comp_bound and name not in direct_non_comp and name not in params:
            if not all(id(x) in covered for x in ast.walk(fn) if isinstance(x, ast.Name) and x.id == name):
                continue
        candidates.append(name)
    if not candidates or fn.name in excluded:
        return None
    positional = a.posonlyargs + a.args
    is_method = bool(positional) and positional[0].arg in ("self", "cls")
    mapping: dict[str, str] = {}
    affixes = list(_FN_AFFIXES)
    rng.shuffle(affixes)
    if fn.name.startswith("__") and fn.name.endswith("__") and len(fn.name) > 4:  # keep dunders dunder-shaped
        affixes = [f"__{fn.name[2:-2]}_{suffix}__" for suffix in ("impl", "v2", "new", "inner")]
    else:
        affixes = [f.format(fn.name) for f in affixes]
    fn_new = next((name for name in affixes if name not in used), None)
    if fn_new is None or fn.name in candidates:
        return None
    used.add(fn_new)
    for name in candidates:
        mapping[name] = fresh_name(used, _WORDS, _RESERVED, rng)
    edits: list[tuple[int, int, str]] = []
    m = re.match(r"\s*(?:async\s+)?def\s+(\w+)", code)
    if not m or m.group(1) != fn.name:
        return None
    edits.append((m.start(1), m.end(1), fn_new))
    recursive = {} if is_method else {fn.name: fn_new}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and (n.id in mapping or n.id in recursive):
            s, e = src.span(n)
            edits.append((s, e, mapping.get(n.id) or recursive[n.id]))
        elif isinstance(n, ast.arg) and n.arg in mapping:
            s = src.off(n.lineno, n.col_offset)
            edits.append((s, s + len(n.arg), mapping[n.arg]))
        elif isinstance(n, ast.ExceptHandler) and n.name in mapping:
            s = src.off(n.lineno, n.col_offset)
            e = src.off(n.body[0].lineno, n.body[0].col_offset)
            hm = re.search(r"\bas\s+(" + re.escape(n.name) + r")\b", code[s:e])
            if not hm:
                return None
            edits.append((s + hm.start(1), s + hm.end(1), mapping[n.name]))
        elif (isinstance(n, ast.Call) and not is_method and isinstance(n.func, ast.Name) and n.func.id == fn.name):
            for kw in n.keywords:
                if kw.arg in mapping:
                    s = src.off(kw.lineno, kw.col_offset)
                    edits.append((s, s + len(kw.arg), mapping[kw.arg]))
    out = _apply(code, edits)
    if out is None:
        return None
    # check: renaming back gives the original tree
    inverse = {v: k for k, v in mapping.items()}
    inverse[fn_new] = fn.name
    ctree, cfn = _fn_node(out)
    for n in ast.walk(cfn):
        if isinstance(n, ast.Name) and n.id in inverse:
            n.id = inverse[n.id]
        elif isinstance(n, ast.arg) and n.arg in inverse:
            n.arg = inverse[n.arg]
        elif isinstance(n, ast.ExceptHandler) and n.name in inverse:
            n.name = inverse[n.name]
        elif isinstance(n, ast.keyword) and n.arg in inverse:
            n.arg = inverse[n.arg]
    cfn.name = inverse[cfn.name] if cfn.name in inverse else cfn.name
    return out if ast.dump(ctree) == ast.dump(tree) else None


def _py_annotations(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    edits: list[tuple[int, int, str]] = []
    funcs = [n for n in ast.walk(fn) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for f in funcs:
        a = f.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
            if arg.annotation is not None:
                s = src.off(arg.lineno, arg.col_offset) + len(arg.arg)
                edits.append((s, src.span(arg.annotation)[1], ""))
        if f.returns is not None:
            # from the `)` closing the parameters to the end of the annotation
            ret_end = src.span(f.returns)[1]
            head = code[:src.off(f.returns.lineno, f.returns.col_offset)]
            arrow = head.rfind("->")
            if arrow < 0:
                return None
            start = arrow
            while start > 0 and code[start - 1] in " \t":
                start -= 1
            edits.append((start, ret_end, ""))
    emptied: dict[int, list] = {}
    for block in _bodies(fn):
        for stmt in block:
            if isinstance(stmt, ast.AnnAssign):
                if stmt.value is not None:
                    s = src.span(stmt.target)[1]
                    edits.append((s, src.span(stmt.value)[0], " = "))
                else:
                    emptied.setdefault(id(block), block)
    for block in emptied.values():
        bare = [s for s in block if isinstance(s, ast.AnnAssign) and s.value is None]
        for i, stmt in enumerate(bare):
            where = _stmt_lines(src, stmt)
            if where is None:
                return None
            start, end, indent = where
            last = len(bare) == len(block) and i == len(bare) - 1
            edits.append((start, end, indent + "pass\n" if last else ""))
    if not edits:
        return None
    out = _apply(code, edits)
    if out is None:
        return None
    # check against the original with annotations removed
    expected = copy.deepcopy(tree)
    for n in ast.walk(expected):
        if isinstance(n, ast.arg):
            n.annotation = None
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n.returns = None
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                new = [ast.Assign(targets=[s.target], value=s.value) if isinstance(s, ast.AnnAssign) else s
                       for s in block if not (isinstance(s, ast.AnnAssign) and s.value is None)]
                setattr(n, field, new or [ast.Pass()])
    return out if ast.dump(ast.parse(out)) == ast.dump(expected) else None


def _py_docstring(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    if not fn.body or not _is_docstring(fn.body[0]):
        return None
    src = _Src(code)
    where = _stmt_lines(src, fn.body[0])
    if where is None:
        return None
    start, end, indent = where
    out = _apply(code, [(start, end, indent + "pass\n" if len(fn.body) == 1 else "")])
    expected = copy.deepcopy(tree)
    expected.body[0].body = expected.body[0].body[1:] or [ast.Pass()]
    return out if out and ast.dump(ast.parse(out)) == ast.dump(expected) else None


def _py_comments(code: str, rng: random.Random) -> str | None:
    toks = _tokens(code)
    comments = [t for t in toks if t.type == tokenize.COMMENT]
    if not comments:
        return None
    src = _Src(code)
    edits = []
    for tok in comments:
        line = src.lines[tok.start[0] - 1]
        before = line[:tok.start[1]]
        lstart = src.starts[tok.start[0] - 1]
        if not before.strip():
            edits.append((lstart, src.line_end(tok.start[0]), ""))
        else:
            s = lstart + len(before.rstrip())
            edits.append((s, lstart + tok.end[1], ""))
    out = _apply(code, edits)
    if out is None or ast.dump(ast.parse(out)) != ast.dump(ast.parse(code)):
        return None
    return out


def _reindent(code: str) -> str | None:
    """Re-indent with 2 spaces per level (None when nothing changes or tabs are used)."""
    toks = _tokens(code)
    strings = _string_lines(toks)
    src = _Src(code)
    starts: set[int] = set()
    owner: dict[int, int] = {}
    at_start, cur = True, 1
    skip = {tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER,
            tokenize.ENCODING}
    for tok in toks:
        if tok.type in skip:
            continue
        if at_start:
            cur = tok.start[0]
            starts.add(cur)
            at_start = False
        if tok.type == tokenize.NEWLINE:
            at_start = True
        for ln in range(tok.start[0], tok.end[0] + 1):
            owner.setdefault(ln, cur)

    def width(ln: int) -> str:
        line = src.lines[ln - 1]
        return line[:len(line) - len(line.lstrip(" \t"))]

    if any("\t" in width(ln) for ln in range(1, len(src.lines) + 1) if ln not in strings):
        return None
    levels = sorted({len(width(ln)) for ln in starts})
    new_width = {w: 2 * i for i, w in enumerate(levels)}
    if all(k == v for k, v in new_width.items()):
        return None
    edits = []
    last_delta = 0
    for ln in range(1, len(src.lines) + 1):
        line = src.lines[ln - 1]
        if ln in strings or not line.strip():
            continue
        w = len(width(ln))
        if ln in starts:
            new = new_width[w]
            last_delta = w - new
        elif ln in owner:
            base = len(width(owner[ln]))
            new = max(0, w - (base - new_width[base]))
        else:  # comment-only line
            new = new_width.get(w, max(0, w - last_delta))
        if new != w:
            edits.append((src.starts[ln - 1], src.starts[ln - 1] + w, " " * new))
    return _apply(code, edits) if edits else None


def _swap_quotes_py(token_text: str) -> str | None:
    m = re.match(r"([rRbBuU]{0,2})(['\"])(.*)\2$", token_text, re.S)
    if not m or token_text[len(m.group(1)):].startswith(("'''", '"""')):
        return None
    body = m.group(3)
    if "'" in body or '"' in body or "\n" in body:
        return None
    q = '"' if m.group(2) == "'" else "'"
    return m.group(1) + q + body + q


def _py_quotes(code: str) -> str | None:
    src = _Src(code)
    edits = []
    for tok in _tokens(code):
        if tok.type == tokenize.STRING and tok.start[0] == tok.end[0]:
            new = _swap_quotes_py(tok.string)
            if new:
                s = src.starts[tok.start[0] - 1] + tok.start[1]
                edits.append((s, s + len(tok.string), new))
    return _apply(code, edits) if edits else None


def _py_call_spaces(code: str) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    edits = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and (n.args or n.keywords):
            fend = src.span(n.func)[1]
            cend = src.span(n)[1]
            rest = code[fend:cend]
            i = len(rest) - len(rest.lstrip(" \t"))
            if rest[i:i + 1] != "(" or code[cend - 1] != ")" or code[cend - 2] in " \n(":
                continue
            if code[fend + i + 1] in " \n":
                continue
            edits.append((fend + i + 1, fend + i + 1, " "))
            edits.append((cend - 1, cend - 1, " "))
    return _apply(code, edits) if edits else None


def _py_blank_line(code: str, rng: random.Random) -> str | None:
    toks = _tokens(code)
    src = _Src(code)
    significant = [t for t in toks if t.type not in (tokenize.NL, tokenize.COMMENT)]
    # ends of simple statements (not of a block header, which an INDENT follows), not the last one
    newlines = [t for t, nxt in zip(significant, significant[1:]) if t.type == tokenize.NEWLINE
                and nxt.type not in (tokenize.INDENT, tokenize.ENDMARKER)
                and not (nxt.type == tokenize.DEDENT and all(x.type in (tokenize.DEDENT, tokenize.ENDMARKER)
                                                               for x in significant[significant.index(nxt):]))]
    if not newlines:
        return None
    tok = rng.choice(newlines)
    pos = src.starts[tok.start[0] - 1] + tok.end[1]
    return code[:pos] + "\n" + code[pos:]


def _py_formatting(code: str, rng: random.Random) -> str | None:
    original = ast.dump(ast.parse(code))
    out = code
    for step in ((_py_call_spaces, _py_blank_line)[rng.random() < 0.5], _py_quotes, _reindent):
        new = step(out, rng) if step is _py_blank_line else step(out)
        if new is not None:
            try:
                if ast.dump(ast.parse(new)) == original:
                    out = new
            except SyntaxError:
                pass
    if out == code:
        new = _py_blank_line(code, rng)
        out = new if new is not None else out
    if out == code or ast.dump(ast.parse(out)) != original:
        return None
    return out


def _respell_number(text: str, value: object) -> str | None:
    plain = text.replace("_", "")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if not plain.isdigit():
            return None
        if value >= 1000 and "_" not in text:
            return f"{value:_}"
        return hex(value)
    if isinstance(value, float):
        if re.fullmatch(r"\d+\.0+", plain):
            return plain.split(".")[0] + "."
        if re.fullmatch(r"0\.\d+", plain):
            return plain[1:]
        if re.fullmatch(r"\d+\.", plain):
            return plain + "0"
        if re.fullmatch(r"\.\d+", plain):
            return "0" + plain
        if re.fullmatch(r"\d+(\.\d*)?[eE][-+]?\d+", plain):
            return repr(value) if repr(value) != plain else None
    return None


def _py_defaults(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    edits = []
    for d in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]:
        node = d.operand if isinstance(d, ast.UnaryOp) and isinstance(d.op, (ast.USub, ast.UAdd)) else d
        if not isinstance(node, ast.Constant):
            continue
        text = src.text(node)
        if isinstance(node.value, str):
            new = _swap_quotes_py(text)
        elif isinstance(node.value, (int, float)):
            new = _respell_number(text, node.value)
        else:
            new = None
        if new is None or new == text:
            continue
        try:
            ok = ast.literal_eval(new) == node.value and type(ast.literal_eval(new)) is type(node.value)
        except (ValueError, SyntaxError):
            ok = False
        if ok:
            s, e = src.span(node)
            edits.append((s, e, new))
    if not edits:
        return None
    out = _apply(code, edits)
    return out if out and ast.dump(ast.parse(out)) == ast.dump(tree) else None


def _simple_target(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) or (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name))


def _same(a: ast.AST, b: ast.AST) -> bool:
    def norm(n: ast.AST) -> str:
        n = copy.deepcopy(n)
        for x in ast.walk(n):
            if hasattr(x, "ctx"):
                x.ctx = ast.Load()
        return ast.dump(n)
    return norm(a) == norm(b)


def _load(node: ast.expr) -> ast.expr:
    node = copy.deepcopy(node)
    for x in ast.walk(node):
        if hasattr(x, "ctx"):
            x.ctx = ast.Load()
    return node


def _py_augmented(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    fwd, inv = [], []
    for n in ast.walk(fn):
        if isinstance(n, ast.AugAssign) and _simple_target(n.target):
            new = ast.Assign(targets=[n.target], value=ast.BinOp(_load(n.target), n.op, n.value))
            e = _replace_stmts(src, n, None, [new])
            if e:
                fwd.append(e)
        elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and _simple_target(n.targets[0])
              and isinstance(n.value, ast.BinOp) and _same(n.value.left, n.targets[0])):
            new = ast.AugAssign(target=n.targets[0], op=n.value.op, value=n.value.right)
            e = _replace_stmts(src, n, None, [new])
            if e:
                inv.append(e)
    edits = fwd or inv
    return _apply(code, edits) if edits else None


_SWAP = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
_OP_TEXT = {ast.Lt: "<", ast.Gt: ">", ast.LtE: "<=", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_LOW_PREC = (ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)


def _py_comparison(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    cands = [n for n in ast.walk(fn) if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _SWAP]
    spans = {id(n): src.span(n) for n in cands}
    edits = []
    chosen = []
    for n in cands:
        s, e = spans[id(n)]
        if any(s2 <= s and e <= e2 and m is not n for m in cands for s2, e2 in [spans[id(m)]]):
            continue  # nested in another candidate: left alone

        def operand(x: ast.expr) -> str:
            t = src.text(x)
            low = isinstance(x, _LOW_PREC) or (isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not))
            return f"({t})" if low else t
        if any("\n" in src.text(x) and not isinstance(x, (ast.Call, ast.List, ast.Dict, ast.Tuple, ast.Set, ast.Subscript))
               for x in (n.left, n.comparators[0])):
            continue
        new = f"{operand(n.comparators[0])} {_OP_TEXT[type(n.ops[0])]} {operand(n.left)}"
        edits.append((s, e, new))
        chosen.append(n)
    if not edits:
        return None
    out = _apply(code, edits)
    if out is None:
        return None
    expected = copy.deepcopy(tree)
    ids = {(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset) for n in chosen}
    for n in ast.walk(expected):
        if isinstance(n, ast.Compare) and (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset) in ids:
            n.left, n.comparators = n.comparators[0], [n.left]
            n.ops = [_SWAP[type(n.ops[0])]()]
    try:
        return out if ast.dump(ast.parse(out)) == ast.dump(expected) else None
    except SyntaxError:
        return None


_RESULT_NAMES = ("result", "res", "out", "ret", "rv", "retval", "value", "answer")


def _py_temporary(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    edits = []
    for block in _bodies(fn):
        for a, b in zip(block, block[1:]):
            if (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                    and isinstance(b, ast.Return) and isinstance(b.value, ast.Name)
                    and b.value.id == a.targets[0].id and _name_count(fn, b.value.id) == 2
                    and not any(isinstance(x, (ast.Global, ast.Nonlocal)) for x in ast.walk(fn))):
                e = _replace_stmts(src, a, b, [ast.Return(value=a.value)])
                if e:
                    edits.append(e)
    if not edits:
        used = _names_used(tree)
        name = fresh_name(used, _RESULT_NAMES, _RESERVED)
        for n in ast.walk(fn):
            if isinstance(n, ast.Return) and n.value is not None and not isinstance(n.value, (ast.Name, ast.Constant)):
                new = [ast.Assign(targets=[ast.Name(name, ast.Store())], value=n.value),
                       ast.Return(value=ast.Name(name, ast.Load()))]
                e = _replace_stmts(src, n, None, new)
                if e:
                    edits.append(e)
    if not edits:
        return None
    return _apply(code, edits)


def _single(stmts: list[ast.stmt], kind: type) -> ast.stmt | None:
    return stmts[0] if len(stmts) == 1 and isinstance(stmts[0], kind) else None


def _py_conditional(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    edits = []
    for block in _bodies(fn):
        for i, st in enumerate(block):
            if not isinstance(st, ast.If):
                continue
            r1 = _single(st.body, ast.Return)
            if r1 is not None and r1.value is not None:
                r2 = _single(st.orelse, ast.Return)
                last = st
                if r2 is None and not st.orelse and i + 1 < len(block) and isinstance(block[i + 1], ast.Return):
                    r2, last = block[i + 1], block[i + 1]
                if r2 is not None and r2.value is not None:
                    new = ast.Return(value=ast.IfExp(test=st.test, body=r1.value, orelse=r2.value))
                    e = _replace_stmts(src, st, last, [new])
                    if e:
                        edits.append(e)
                continue
            a1, a2 = _single(st.body, ast.Assign), _single(st.orelse, ast.Assign)
            if (a1 and a2 and len(a1.targets) == len(a2.targets) == 1 and _simple_target(a1.targets[0])
                    and _same(a1.targets[0], a2.targets[0])):
                new = ast.Assign(targets=a1.targets, value=ast.IfExp(test=st.test, body=a1.value, orelse=a2.value))
                e = _replace_stmts(src, st, None, [new])
                if e:
                    edits.append(e)
    if not edits:
        for n in ast.walk(fn):
            if isinstance(n, ast.Return) and isinstance(n.value, ast.IfExp):
                x = n.value
                new = ast.If(test=x.test, body=[ast.Return(value=x.body)], orelse=[ast.Return(value=x.orelse)])
            elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and _simple_target(n.targets[0])
                  and isinstance(n.value, ast.IfExp)):
                x = n.value
                new = ast.If(test=x.test, body=[ast.Assign(targets=n.targets, value=x.body)],
                             orelse=[ast.Assign(targets=n.targets, value=x.orelse)])
            else:
                continue
            e = _replace_stmts(src, n, None, [new])
            if e:
                edits.append(e)
    return _apply(code, edits) if edits else None


def _py_comprehension(code: str, rng: random.Random) -> str | None:
    tree, fn = _fn_node(code)
    src = _Src(code)
    used = _names_used(tree)
    edits = []

    def simple_comp(v: ast.AST) -> bool:
        return (isinstance(v, ast.ListComp) and len(v.generators) == 1 and len(v.generators[0].ifs) <= 1
                and not v.generators[0].is_async)

    def outside_uses(names: set[str], inside: ast.AST) -> bool:
        inner = {id(x) for x in ast.walk(inside)}
        return any(isinstance(x, ast.Name) and x.id in names and id(x) not in inner for x in ast.walk(fn)) or \
            any(isinstance(x, ast.arg) and x.arg in names for x in ast.walk(fn))

    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and simple_comp(n.value):
            comp, target, ret = n.value, None, True
        elif (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
              and simple_comp(n.value)):
            comp, target, ret = n.value, n.targets[0].id, False
        else:
            continue
        gen = comp.generators[0]
        loop_names = {x.id for x in ast.walk(gen.target) if isinstance(x, ast.Name)}
        if outside_uses(loop_names, comp) or any(isinstance(x, ast.NamedExpr) for x in ast.walk(comp)):
            continue
        if target is not None and any(isinstance(x, ast.Name) and x.id == target for x in ast.walk(comp)):
            continue
        name = target or fresh_name(used, ("out", "result", "items", "acc", "collected", "values"), _RESERVED, rng)
        append = ast.Expr(ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()), [comp.elt], []))
        body = [ast.If(test=gen.ifs[0], body=[append], orelse=[])] if gen.ifs else [append]
        new = [ast.Assign(targets=[ast.Name(name, ast.Store())], value=ast.List([], ast.Load())),
               ast.For(target=gen.target, iter=gen.iter, body=body, orelse=[])]
        if ret:
            new.append(ast.Return(ast.Name(name, ast.Load())))
        e = _replace_stmts(src, n, None, new)
        if e:
            edits.append(e)
    if not edits:
        for block in _bodies(fn):
            for a, b in zip(block, block[1:]):
                if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                        and isinstance(a.value, ast.List) and not a.value.elts
                        and isinstance(b, ast.For) and not b.orelse and len(b.body) == 1):
                    continue
                name = a.targets[0].id
                inner, cond = b.body[0], None
                if isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
                    cond, inner = inner.test, inner.body[0]
                if not (isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call)
                        and isinstance(inner.value.func, ast.Attribute) and inner.value.func.attr == "append"
                        and isinstance(inner.value.func.value, ast.Name) and inner.value.func.value.id == name
                        and len(inner.value.args) == 1 and not inner.value.keywords
                        and not isinstance(inner.value.args[0], ast.Starred)):
                    continue
                elt = inner.value.args[0]
                parts = [b.iter, elt] + ([cond] if cond is not None else [])
                if any(isinstance(x, ast.Name) and x.id == name for p in parts for x in ast.walk(p)):
                    continue
                if any(isinstance(x, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for p in parts for x in ast.walk(p)):
                    continue
                loop_names = {x.id for x in ast.walk(b.target) if isinstance(x, ast.Name)}
                if not all(isinstance(x, ast.Name) for x in ast.walk(b.target) if isinstance(x, ast.expr)
                           and not isinstance(x, (ast.Tuple, ast.List))):
                    continue
                if outside_uses(loop_names, b):
                    continue
                comp = ast.ListComp(elt=elt, generators=[ast.comprehension(target=b.target, iter=b.iter,
                                                                           ifs=[cond] if cond is not None else [],
                                                                           is_async=0)])
                e = _replace_stmts(src, a, b, [ast.Assign(targets=[a.targets[0]], value=comp)])
                if e:
                    edits.append(e)
    return _apply(code, edits) if edits else None


_PY_KINDS = {
    "renamed": _py_renamed, "annotations": _py_annotations, "docstring": _py_docstring,
    "comments": _py_comments, "formatting": _py_formatting, "defaults": _py_defaults,
    "augmented": _py_augmented, "comparison": _py_comparison, "temporary": _py_temporary,
    "conditional": _py_conditional, "comprehension": _py_comprehension,
}


def _py_clone(code: str, kind: str, rng: random.Random) -> str | None:
    try:
        out = _PY_KINDS[kind](code, rng)
    except (SyntaxError, ValueError, tokenize.TokenError, RecursionError, IndexError):
        return None
    if out is None or out == code:
        return None
    try:
        _fn_node(out)
    except (SyntaxError, ValueError):
        return None
    return out


# -- public entry points -------------------------------------------------------------------------

def make_clone(fn: FunctionSource, kind: str, rng: random.Random) -> str | None:
    """fn.code with edit `kind` applied (or COMBINED: every applicable kind, in a fixed order), or
    None when the edit does not apply to this function."""
    if kind == COMBINED:
        code, applied = fn.code, 0
        for k in COMBINED_ORDER:
            new = make_clone(dataclasses.replace(fn, code=code), k, rng)
            if new is not None:
                code, applied = new, applied + 1
        return code if applied >= 3 else None
    if kind not in EDIT_KINDS:
        raise ValueError(f"unknown edit kind {kind!r}")
    if fn.language == "python":
        return _py_clone(fn.code, kind, rng)
    from bench import clones_ts
    return clones_ts.clone(fn.code, kind, rng)


def is_valid(code: str, language: str) -> bool:
    """Whether code parses (Python: ast; TypeScript: tree-sitter without ERROR/MISSING nodes)."""
    if language == "python":
        try:
            _fn_node(code)
            return True
        except (SyntaxError, ValueError):
            return False
    from bench import clones_ts
    return clones_ts.valid(code)


def _shape_tokens(fn: FunctionSource) -> list[str]:
    """fn's tokens with identifiers replaced by a placeholder, whitespace/comments/docstring dropped."""
    if fn.language == "python":
        code = fn.code
        if fn.doc is not None:
            code = _py_docstring(code, random.Random(0)) or code
        out = []
        try:
            for tok in _tokens(code):
                if tok.type == tokenize.NAME:
                    out.append(tok.string if keyword.iskeyword(tok.string) else "ID")
                elif tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                      tokenize.DEDENT, tokenize.ENDMARKER):
                    out.append(tok.string)
        except tokenize.TokenError:
            return code.split()
        return out
    from bench import clones_ts
    return clones_ts.shape_tokens(fn.code)


def _dice(a: Counter, b: Counter) -> float:
    total = sum(a.values()) + sum(b.values())
    return 2 * sum((a & b).values()) / total if total else 1.0


def hard_negatives(functions: list[FunctionSource], rng: random.Random, limit: int) -> list[tuple[FunctionSource, FunctionSource]]:
    """Pairs (a, b) of different functions with the same signature (same parameter names, else
    just the same number of parameters) whose bodies differ: pairs whose identifier-blind token
    sequence is identical or whose token-bag Dice overlap is >= 0.9 are rejected. Up to `limit`,
    seeded by rng, each function used at most once."""
    order = list(functions)
    rng.shuffle(order)
    shapes: dict[int, tuple[list[str], Counter]] = {}

    def shape(i: int) -> tuple[list[str], Counter]:
        if i not in shapes:
            toks = _shape_tokens(order[i])
            shapes[i] = (toks, Counter(toks))
        return shapes[i]

    def distinct(i: int, j: int) -> bool:
        a, b = order[i], order[j]
        if (a.path, a.start_line) == (b.path, b.start_line) or a.code == b.code:
            return False
        (ta, ca), (tb, cb) = shape(i), shape(j)
        return ta != tb and _dice(ca, cb) < 0.9

    pairs: list[tuple[FunctionSource, FunctionSource]] = []
    used: set[int] = set()
    for key in (lambda f: f.params, lambda f: len(f.params)):
        groups: dict[object, list[int]] = defaultdict(list)
        for i, f in enumerate(order):
            groups[key(f)].append(i)
        keys = list(groups)
        rng.shuffle(keys)
        for k in keys:
            members = groups[k]
            for x, i in enumerate(members):
                if len(pairs) >= limit:
                    return pairs
                if i in used:
                    continue
                for j in members[x + 1:]:
                    if j not in used and distinct(i, j):
                        used.update((i, j))
                        pairs.append((order[i], order[j]))
                        break
    return pairs


# -- self-check and command line -----------------------------------------------------------------

_SAMPLES: list[tuple[str, list[tuple]]] = [
    ('''def clamp_sum(values: list, low: int = 0, high: int = 1000) -> int:
    """Sum of values clamped to [low, high]."""
    total: int = 0
    for v in values:  # each value
        if v < low:
            total += low
        elif v > high:
            total += high
        else:
            total = total + v
    return total
''', [([1, 2, 3],), ([-5, 2000, 7], 0, 100), ([], 1, 2)]),
    ('''def evens_squared(xs, limit=16):
    # squares of the even numbers below limit
    out = []
    for x in xs:
        if x % 2 == 0:
            out.append(x * x)
    result = out[:limit]
    return result
''', [([1, 2, 3, 4],), (list(range(40)), 3)]),
    ('''def pick(a, b, flag=True, scale=0.5, tag='x'):
    if flag:
        return a * scale
    else:
        return b + len(tag)
''', [(1, 2), (3, 4, False), (1.5, 2, True, 2.0, "yy")]),
    ('''def describe(n, sep=":"):
    kind = "small" if n < 10 else "large"
    parts = [str(d) for d in range(n) if d != 3]
    if len(parts) >= 2:
        label = kind
    else:
        label = "tiny"
    count = 0
    count += len(parts) * 2 + 1
    return sep.join([label, kind, str(count)] + parts)
''', [(0,), (5,), (20, "-")]),
    ('''def fact(n, acc=1):
    if n <= 1:
        return acc
    return fact(n - 1, acc=acc * n)
''', [(5,), (1,), (10, 2)]),
]


def selfcheck(rng: random.Random) -> int:
    """Run sample functions and their Python clones on sample inputs; returns the number of mismatches."""
    bad = 0
    for code, inputs in _SAMPLES:
        fn = FunctionSource("sample.py", re.match(r"def (\w+)", code).group(1), 1, code.count("\n"), code, "python",
                            (), None)
        ns: dict = {}
        exec(code, ns)
        expected = [ns[fn.name](*args) for args in inputs]
        for kind in EDIT_KINDS + (COMBINED,):
            clone = make_clone(fn, kind, rng)
            if clone is None:
                continue
            cns: dict = {}
            exec(clone, cns)
            new_name = _fn_node(clone)[1].name
            got = [cns[new_name](*args) for args in inputs]
            if got != expected:
                bad += 1
                print(f"MISMATCH {fn.name} {kind}: {got} != {expected}\n{clone}")
    print(f"selfcheck: {bad} mismatches")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("language", choices=("python", "typescript"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-statements", type=int, default=3)
    parser.add_argument("--selfcheck", action="store_true")
    parser.add_argument("--no-examples", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    if args.selfcheck and selfcheck(rng):
        return 1
    functions = functions_of(args.corpus, args.language, min_statements=args.min_statements)
    print(f"{len(functions)} functions")
    failed = 0
    examples: dict[str, tuple[FunctionSource, str]] = {}
    for kind in EDIT_KINDS + (COMBINED,):
        applied = invalid = 0
        for fn in functions:
            clone = make_clone(fn, kind, rng)
            if clone is None:
                continue
            applied += 1
            if clone == fn.code or not is_valid(clone, fn.language):
                invalid += 1
                if invalid <= 2:
                    print(f"INVALID {kind} {fn.path}:{fn.start_line}\n{clone}", file=sys.stderr)
            elif kind not in examples or len(fn.code) < len(examples[kind][0].code):
                examples[kind] = (fn, clone)  # the shortest function shows the edit best
        failed += invalid
        print(f"{kind:14} {applied:5} applied  {invalid} invalid")
    negatives = hard_negatives(functions, rng, 100)
    print(f"hard negatives: {len(negatives)} (limit 100)")
    if not args.no_examples:
        for kind, (fn, clone) in examples.items():
            print(f"\n=== {kind}: {fn.path}:{fn.start_line} {fn.name} ===\n--- original\n{fn.code}--- clone\n{clone}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""TypeScript half of ``bench.clones``: functions of .ts files and their mechanically built clones.

Parsed with tree-sitter; the UTF-8 bytes of a function are edited by spans (non-overlapping edits,
applied from the end). A method's code does not parse on its own, so it is parsed inside a
``class __Clone__ { ... }`` wrapper that never reaches the output. Used through ``bench.clones``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator

import tree_sitter_typescript as _ts
from tree_sitter import Language, Node, Parser

from bench.clones import fresh_name

_PARSER = Parser(Language(_ts.language_typescript()))
_WRAP = (b"class __Clone__ {\n", b"\n}\n")

_STATEMENTS = {
    "expression_statement", "lexical_declaration", "variable_declaration", "if_statement", "for_statement",
    "for_in_statement", "while_statement", "do_statement", "return_statement", "break_statement",
    "continue_statement", "throw_statement", "try_statement", "switch_statement", "labeled_statement",
    "function_declaration", "generator_function_declaration", "class_declaration", "empty_statement",
}
_FUNCTION_LIKE = {"function_declaration", "generator_function_declaration", "function_expression",
                  "generator_function", "arrow_function", "method_definition", "function"}
_PRIMARY = {"identifier", "number", "string", "true", "false", "null", "undefined", "this", "member_expression",
            "subscript_expression", "call_expression", "parenthesized_expression", "array", "object",
            "template_string", "regex", "super"}
_LOW = {"sequence_expression", "assignment_expression", "augmented_assignment_expression", "arrow_function",
        "yield_expression", "conditional_expression", "function_expression", "as_expression",
        "satisfies_expression"}
_RESERVED = set("""break case catch class const continue debugger default delete do else enum export extends false
finally for function if import in instanceof new null return super switch this throw true try typeof var void while
with as implements interface let package private protected public static yield any boolean constructor declare get
module require number set string symbol type from of async await undefined arguments eval NaN Infinity Object Array
String Number Boolean Symbol Map Set WeakMap WeakSet Promise Error Math JSON Date RegExp console window document
globalThis process Reflect Proxy never unknown object keyof readonly is asserts infer""".split())
_WORDS = ("item", "value", "acc", "node", "entry", "buf", "res", "elem", "cur", "data", "tmp", "out", "key2", "obj",
          "val", "seq", "part", "piece", "elt", "current", "target", "source", "chunk", "token", "record", "element",
          "thing", "payload", "unit", "slot", "total", "idx", "pos", "step", "state", "ctx", "spec", "opt", "flag",
          "arr", "lst", "coll", "group", "batch", "field", "mapping", "holder", "temp", "store", "inp", "arg",
          "bucket", "cell", "frame", "head", "rest", "acc2", "subj", "aux", "input", "handle", "ref")
_FN_AFFIXES = ("{}Impl", "do{}", "{}2", "_{}", "{}Fn", "compute{}", "{}New", "run{}", "{}V2")


# -- parsing -------------------------------------------------------------------------------------

class _Code:
    """A function's bytes, parsed (inside the class wrapper for a method), and its function node."""

    def __init__(self, code: str):
        self.code = code
        body = code.encode("utf-8")
        self.prefix, self.suffix = b"", b""
        tree = _PARSER.parse(body)
        if tree.root_node.has_error:
            self.prefix, self.suffix = _WRAP
            tree = _PARSER.parse(self.prefix + body + self.suffix)
            if tree.root_node.has_error:
                raise ValueError("does not parse")
        self.full = self.prefix + body + self.suffix
        self.root = tree.root_node
        top = [c for c in self.root.named_children if c.type != "comment"]
        if self.prefix:
            cls = top[0].child_by_field_name("body")
            top = [c for c in cls.named_children if c.type == "method_definition"]
        if len(top) != 1:
            raise ValueError("not one function")
        self.decl = top[0]
        if self.decl.type == "lexical_declaration":
            declarator = self.decl.named_children[0]
            self.fn = declarator.child_by_field_name("value")
            self.name_node = declarator.child_by_field_name("name")
        else:
            self.fn = self.decl
            self.name_node = self.decl.child_by_field_name("name")
        if self.fn is None or self.fn.type not in _FUNCTION_LIKE:
            raise ValueError("not a function")

    def text(self, node: Node) -> str:
        return self.full[node.start_byte:node.end_byte].decode("utf-8", errors="replace")

    def apply(self, edits: list[tuple[int, int, str]]) -> str | None:
        """The code with byte-span edits applied (None when two overlap)."""
        edits = sorted(set(edits), key=lambda e: (e[0], e[1]))
        for (a0, a1, _), (b0, b1, _) in zip(edits, edits[1:]):
            if b0 < a1 or (a0 == b0 and a1 == b1):
                return None
        out = self.full
        for start, end, rep in reversed(edits):
            out = out[:start] + rep.encode("utf-8") + out[end:]
        out = out[len(self.prefix):len(out) - len(self.suffix)]
        return out.decode("utf-8")

    def line_start(self, pos: int) -> int:
        return self.full.rfind(b"\n", 0, pos) + 1

    def indent_of(self, node: Node) -> str | None:
        """The indentation of node's line when node starts its line, else None."""
        start = self.line_start(node.start_byte)
        before = self.full[start:node.start_byte]
        return before.decode() if not before.strip() else None

    def unit(self) -> str:
        """The indentation unit (2 or 4 spaces) of the function."""
        widths = {len(m.group(1)) for m in re.finditer(rb"\n( +)\S", self.full)}
        return "  " if widths and min(widths) == 2 else "    "


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def valid(code: str) -> bool:
    """Whether code parses (on its own, or as a class member) with no ERROR or MISSING node."""
    try:
        _Code(code)
        return True
    except (ValueError, IndexError, AttributeError):
        return False


def _has_ancestor(node: Node, types: set[str] | Callable[[str], bool], stop: Node) -> bool:
    n = node.parent
    while n is not None and n != stop:
        if (types(n.type) if callable(types) else n.type in types):
            return True
        n = n.parent
    return False


# -- corpus --------------------------------------------------------------------------------------

def _param_names(params: Node | None) -> tuple[str, ...]:
    if params is None:
        return ()
    if params.type == "identifier":
        return (params.text.decode(),)
    names = []
    for p in params.named_children:
        if p.type not in ("required_parameter", "optional_parameter"):
            continue
        pat = p.child_by_field_name("pattern")
        if pat is None or pat.type == "this":
            continue
        if pat.type == "rest_pattern":
            pat = pat.named_children[0] if pat.named_children else pat
        names.append(pat.text.decode())
    return tuple(names)


def functions(rel: str, text: str, min_statements: int, factory: Callable) -> list:
    """The functions of one .ts file (FunctionSource objects built by `factory`)."""
    source = text.replace("\r\n", "\n").encode("utf-8")
    root = _PARSER.parse(source).root_node
    templates = [(n.start_byte, n.end_byte) for n in _walk(root) if n.type == "template_string"]
    out = []
    for node in _walk(root):
        target, fn, name = None, None, None
        if node.type in ("function_declaration", "generator_function_declaration", "method_definition"):
            target, fn, name = node, node, node.child_by_field_name("name")
        elif node.type == "lexical_declaration" and (node.parent.type == "program" or (
                node.parent.type == "export_statement" and node.parent.parent.type == "program")):
            decls = [c for c in node.named_children if c.type == "variable_declarator"]
            value = decls[0].child_by_field_name("value") if len(decls) == 1 else None
            if value is not None and value.type in ("arrow_function", "function_expression", "function"):
                target, fn, name = node, value, decls[0].child_by_field_name("name")
        if target is None or name is None:
            continue
        body = fn.child_by_field_name("body")
        if body is None or body.type != "statement_block" or body.has_error:
            continue
        count = sum(1 for n in _walk(body) if n.type in _STATEMENTS)
        if count < min_statements:
            continue
        start, end = target.start_byte, fn.end_byte
        line_start = source.rfind(b"\n", 0, start) + 1
        col = len(source[line_start:start]) - len(source[line_start:start].lstrip(b" \t"))  # the line's indent
        pos, kept = start, []
        for i, line in enumerate(source[start:end].split(b"\n")):
            out_line = line
            if i > 0 and not any(a < pos < b for a, b in templates):
                ws = len(line) - len(line.lstrip(b" \t"))
                out_line = line[min(ws, col):]
            kept.append(out_line)
            pos += len(line) + 1
        code = b"\n".join(kept).decode("utf-8", errors="replace").rstrip() + "\n"
        if not valid(code):
            continue
        holder = target.parent if target.parent and target.parent.type == "export_statement" else target
        prev = holder.prev_sibling
        doc = None
        if prev is not None and prev.type == "comment" and prev.text.startswith(b"/**") and \
                not source[prev.end_byte:holder.start_byte].strip():
            doc = prev.text.decode("utf-8", errors="replace")
        params = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
        out.append(factory(rel, name.text.decode(), target.start_point.row + 1, fn.end_point.row + 1, code,
                           "typescript", _param_names(params), doc))
    out.sort(key=lambda f: (f.path, f.start_line))
    return out


# -- edit kinds ----------------------------------------------------------------------------------

def _used(c: _Code) -> set[str]:
    return {c.text(n) for n in _walk(c.decl) if n.child_count == 0 and n.is_named}


def _pattern_ids(pat: Node) -> list[Node]:
    """Identifiers a binding pattern declares (object patterns included, via their shorthand names)."""
    out = []
    for n in _walk(pat):
        if n.type in ("identifier", "shorthand_property_identifier_pattern"):
            if n.type == "identifier" and n.parent is not None and n.parent.type in ("object_assignment_pattern",
                                                                                      "assignment_pattern") \
                    and n.parent.child_by_field_name("right") == n:
                continue  # default value, not a binding
            out.append(n)
    return out


def _ts_renamed(c: _Code, rng: random.Random) -> str | None:
    used = _used(c)
    candidates: list[str] = []
    excluded = {"this", "arguments", "undefined"}
    for n in _walk(c.fn):
        if n != c.fn and n.type in ("function_declaration", "generator_function_declaration", "class_declaration"):
            name = n.child_by_field_name("name")
            if name is not None:
                excluded.add(c.text(name))
    params = c.fn.child_by_field_name("parameters") or c.fn.child_by_field_name("parameter")
    if params is not None:
        if params.type == "identifier":
            candidates.append(c.text(params))
        for p in params.named_children:
            if p.type not in ("required_parameter", "optional_parameter"):
                continue
            if any(ch.type in ("accessibility_modifier", "readonly", "override_modifier") for ch in p.children):
                continue  # a parameter property also names a field
            pat = p.child_by_field_name("pattern")
            if pat is not None and pat.type != "this":
                candidates += [c.text(x) for x in _pattern_ids(pat)]
    for n in _walk(c.fn):
        if n.type == "variable_declarator":
            name = n.child_by_field_name("name")
            if name is not None:
                candidates += [c.text(x) for x in _pattern_ids(name)]
        elif n.type == "for_in_statement":
            left = n.child_by_field_name("left")
            if left is not None and any(ch.type in ("const", "let", "var") for ch in n.children):
                candidates += [c.text(x) for x in _pattern_ids(left)]
        elif n.type == "catch_clause":
            p = n.child_by_field_name("parameter")
            if p is not None:
                candidates += [c.text(x) for x in _pattern_ids(p)]
    candidates = list(dict.fromkeys(x for x in candidates if x not in excluded))
    if not candidates:
        return None
    mapping = {name: fresh_name(used, _WORDS, _RESERVED, rng) for name in candidates}
    edits = []
    fn_name = c.text(c.name_node) if c.name_node is not None else None
    if c.name_node is not None and c.name_node.type in ("identifier", "property_identifier") \
            and fn_name not in ("constructor", *mapping):
        affixes = list(_FN_AFFIXES)
        rng.shuffle(affixes)
        new_name = next((f.format(fn_name[:1].upper() + fn_name[1:] if f[0].isalpha() else fn_name)
                         for f in affixes), None)
        if new_name and new_name not in used:
            used.add(new_name)
            edits.append((c.name_node.start_byte, c.name_node.end_byte, new_name))
            for n in _walk(c.fn):
                if c.name_node.type == "identifier" and n.type == "identifier" and c.text(n) == fn_name:
                    edits.append((n.start_byte, n.end_byte, new_name))   # recursive call
                elif (c.name_node.type == "property_identifier" and n.type == "member_expression"
                      and n.child_by_field_name("object") is not None
                      and n.child_by_field_name("object").type == "this"
                      and c.text(n.child_by_field_name("property")) == fn_name):
                    prop = n.child_by_field_name("property")
                    edits.append((prop.start_byte, prop.end_byte, new_name))
    for n in _walk(c.fn):
        t = c.text(n) if n.child_count == 0 else None
        if t not in mapping:
            continue
        if n.type == "identifier":
            edits.append((n.start_byte, n.end_byte, mapping[t]))
        elif n.type in ("shorthand_property_identifier", "shorthand_property_identifier_pattern"):
            edits.append((n.start_byte, n.end_byte, f"{t}: {mapping[t]}"))
    return c.apply(edits)


_TYPE_CONTEXT = {"function_type", "object_type", "type_annotation", "type_arguments", "type_alias_declaration",
                 "interface_declaration", "constructor_type", "generic_type", "union_type", "intersection_type",
                 "tuple_type", "array_type", "parenthesized_type", "type_query", "index_signature",
                 "method_signature", "property_signature", "call_signature", "construct_signature",
                 "abstract_method_signature", "conditional_type", "mapped_type_clause", "lookup_type"}
_ANNOTATIONS = {"type_annotation", "type_predicate_annotation", "asserts_annotation"}


def _remove_span(c: _Code, node: Node) -> tuple[int, int, str]:
    start = node.start_byte
    while start > 0 and c.full[start - 1:start] in (b" ", b"\t"):
        start -= 1
    return start, node.end_byte, ""


def _ts_annotations(c: _Code, rng: random.Random) -> str | None:
    edits = []
    for n in _walk(c.fn):
        if n.type not in _ANNOTATIONS or n.parent is None:
            continue
        parent = n.parent
        if _has_ancestor(n, _TYPE_CONTEXT, c.root):
            continue
        if parent.type in ("required_parameter", "optional_parameter", "catch_clause"):
            edits.append(_remove_span(c, n))
        elif parent.type == "variable_declarator":
            if any(ch.type == "!" for ch in parent.children):
                continue
            edits.append(_remove_span(c, n))
        elif parent.type in _FUNCTION_LIKE and parent.child_by_field_name("return_type") == n:
            edits.append(_remove_span(c, n))
    return c.apply(edits) if edits else None


def _comment_edits(c: _Code, pick: Callable[[Node], bool]) -> list[tuple[int, int, str]]:
    edits = []
    for n in _walk(c.decl):
        if n.type != "comment" or not pick(n):
            continue
        ls = c.line_start(n.start_byte)
        le = c.full.find(b"\n", n.end_byte)
        le = len(c.full) if le < 0 else le
        before, after = c.full[ls:n.start_byte], c.full[n.end_byte:le]
        if not before.strip() and not after.strip():
            edits.append((ls, min(le + 1, len(c.full) - len(c.suffix)), ""))
        elif not after.strip():
            start = n.start_byte
            while c.full[start - 1:start] in (b" ", b"\t"):
                start -= 1
            edits.append((start, n.end_byte, ""))
        else:
            edits.append((n.start_byte, n.end_byte, " " if before.strip() else ""))
    return edits


def _ts_docstring(c: _Code, rng: random.Random) -> str | None:
    body = c.fn.child_by_field_name("body")
    edits = _comment_edits(c, lambda n: n.text.startswith(b"/**") and body is not None
                           and body.start_byte < n.start_byte < body.end_byte)
    return c.apply(edits) if edits else None


def _ts_comments(c: _Code, rng: random.Random) -> str | None:
    edits = _comment_edits(c, lambda n: True)
    return c.apply(edits) if edits else None


def _swap_quotes(text: str) -> str | None:
    if len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0]:
        return None
    inner = text[1:-1]
    if "'" in inner or '"' in inner or "\n" in inner:
        return None
    q = '"' if text[0] == "'" else "'"
    return q + inner + q


def _leaves(c: _Code) -> list[tuple[str, str]]:
    out = []
    for n in _walk(c.decl):
        if n.child_count == 0 and n.type != "comment":
            t = c.text(n)
            if n.type in ("'", '"'):
                out.append(("Q", "Q"))
            else:
                out.append((n.type, t))
    return out


def _ts_formatting(c: _Code, rng: random.Random) -> str | None:
    # step 1: quotes and spaces inside call parentheses
    edits = []
    for n in _walk(c.decl):
        if n.type == "string":
            new = _swap_quotes(c.text(n))
            if new:
                edits.append((n.start_byte, n.end_byte, new))
        elif n.type == "arguments" and n.named_child_count and c.text(n).startswith("(") and rng.random() < 0.7:
            if c.full[n.start_byte + 1:n.start_byte + 2] not in (b" ", b"\n") and \
                    c.full[n.end_byte - 2:n.end_byte - 1] not in (b" ", b"\n", b","):
                edits.append((n.start_byte + 1, n.start_byte + 1, " "))
                edits.append((n.end_byte - 1, n.end_byte - 1, " "))
    code = c.apply(edits) if edits else c.code
    if code is None:
        return None
    try:
        c2 = _Code(code)
    except ValueError:
        return None
    # step 2: re-indent (4 spaces per level -> 2, or 2 -> 4)
    inside = [(n.start_byte, n.end_byte) for n in _walk(c2.decl) if n.type in ("template_string", "string")]
    comments = [(n.start_byte, n.end_byte) for n in _walk(c2.decl) if n.type == "comment"]
    lines = []
    pos = len(c2.prefix)
    body = c2.full[len(c2.prefix):len(c2.full) - len(c2.suffix)]
    for line in body.split(b"\n"):
        lines.append((pos, line))
        pos += len(line) + 1
    reindent = []
    widths = []
    for start, line in lines:
        if any(a < start < b for a, b in inside) or not line.strip():
            continue
        ws = line[:len(line) - len(line.lstrip(b" \t"))]
        if b"\t" in ws:
            reindent = None
            break
        in_comment = any(a < start < b for a, b in comments)
        reindent.append((start, len(ws), in_comment))
        if not in_comment:
            widths.append(len(ws))
    if reindent and widths:
        nonzero = [w for w in widths if w]
        if nonzero and all(w % 4 == 0 for w in nonzero):
            f = lambda w: (w // 4) * 2 + w % 4  # noqa: E731
        elif nonzero and all(w % 2 == 0 for w in nonzero):
            f = lambda w: (w // 2) * 4 + w % 2  # noqa: E731
        else:
            f = None
        if f is not None:
            edits2 = [(s, s + w, " " * f(w)) for s, w, _ in reindent if f(w) != w]
            if edits2:
                code = c2.apply(edits2) or code
    if code == c.code:
        return None
    try:
        if _leaves(_Code(code)) != _leaves(c):
            return None
    except ValueError:
        return None
    return code


def _js_number(text: str) -> float | None:
    t = text.replace("_", "")
    try:
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", t):
            return float(int(t, 16))
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", t):
            return float(t)
    except ValueError:
        return None
    return None


def _respell(text: str) -> str | None:
    if re.fullmatch(r"[1-9]\d*|0", text):
        value = int(text)
        if value >= 1000:
            return f"{value:_}"
        return hex(value)
    if re.fullmatch(r"\d+\.0+", text):
        return text.split(".")[0] + "."
    if re.fullmatch(r"0\.\d+", text):
        return text[1:]
    if re.fullmatch(r"\d+\.", text):
        return text + "0"
    if re.fullmatch(r"\.\d+", text):
        return "0" + text
    return None


def _ts_defaults(c: _Code, rng: random.Random) -> str | None:
    params = c.fn.child_by_field_name("parameters")
    if params is None:
        return None
    edits = []
    for p in params.named_children:
        value = p.child_by_field_name("value")
        if value is None:
            continue
        if value.type == "unary_expression" and value.named_children and value.named_children[0].type == "number":
            value = value.named_children[0]
        if value.type == "string":
            new = _swap_quotes(c.text(value))
        elif value.type == "number":
            new = _respell(c.text(value))
            if new is not None and _js_number(new) != _js_number(c.text(value)):
                new = None
        else:
            new = None
        if new:
            edits.append((value.start_byte, value.end_byte, new))
    return c.apply(edits) if edits else None


_AUG_OPS = {"+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=", "|=", "^="}


def _simple_lhs(n: Node | None) -> bool:
    if n is None:
        return False
    if n.type == "identifier":
        return True
    if n.type == "member_expression":
        obj = n.child_by_field_name("object")
        return obj is not None and obj.type in ("identifier", "this") and \
            n.child_by_field_name("property").type == "property_identifier"
    return False


def _paren(c: _Code, n: Node) -> str:
    return c.text(n) if n.type in _PRIMARY else f"({c.text(n)})"


def _ts_augmented(c: _Code, rng: random.Random) -> str | None:
    fwd, inv = [], []
    for n in _walk(c.fn):
        if n.type == "augmented_assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op = n.child_by_field_name("operator")
            op_text = c.text(op) if op is not None else None
            if _simple_lhs(left) and op_text in _AUG_OPS and right is not None:
                fwd.append((n.start_byte, n.end_byte,
                            f"{c.text(left)} = {c.text(left)} {op_text[:-1]} {_paren(c, right)}"))
        elif n.type == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if not (_simple_lhs(left) and right is not None and right.type == "binary_expression"):
                continue
            op = right.child_by_field_name("operator")
            bl, br = right.child_by_field_name("left"), right.child_by_field_name("right")
            if op is not None and c.text(op) + "=" in _AUG_OPS and bl is not None and br is not None \
                    and c.text(bl) == c.text(left):
                inv.append((n.start_byte, n.end_byte, f"{c.text(left)} {c.text(op)}= {c.text(br)}"))
    edits = _outermost(fwd) or _outermost(inv)
    return c.apply(edits) if edits else None


def _outermost(edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    return [e for e in edits if not any(o is not e and o[0] <= e[0] and e[1] <= o[1] for o in edits)]


_CMP_SWAP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "===": "===", "!==": "!==", "==": "==", "!=": "!="}
_RELATIONAL = {"<", ">", "<=", ">=", "instanceof", "in"}
_EQUALITY = {"===", "!==", "==", "!="}


def _ts_comparison(c: _Code, rng: random.Random) -> str | None:
    edits = []
    for n in _walk(c.fn):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op is None or left is None or right is None or c.text(op) not in _CMP_SWAP:
            continue
        cls = _RELATIONAL if c.text(op) in _RELATIONAL else _EQUALITY
        same = [x for x in (left, right) if x.type == "binary_expression"
                and c.text(x.child_by_field_name("operator")) in cls]
        if same or right.type in _LOW or left.type in _LOW:
            continue
        edits.append((n.start_byte, n.end_byte, f"{c.text(right)} {_CMP_SWAP[c.text(op)]} {c.text(left)}"))
    edits = _outermost(edits)
    if not edits:
        return None
    out = c.apply(edits)
    try:
        new = _Code(out)
    except ValueError:
        return None
    count = lambda cc, t: sum(1 for n in _walk(cc.decl) if n.type == t)  # noqa: E731
    for t in ("binary_expression", "type_arguments", "call_expression", "arguments"):
        if count(new, t) != count(c, t):
            return None
    return out


def _expr_child(n: Node) -> Node | None:
    kids = [k for k in n.named_children if k.type != "comment"]
    return kids[0] if kids else None


_TRIVIAL = {"identifier", "number", "string", "true", "false", "null", "undefined", "this"}
_RESULT_NAMES = ("result", "res", "out", "ret", "rv", "retval", "value", "answer")


def _declared_then(c: _Code, following: str) -> Iterator[tuple[Node, Node, Node, Node]]:
    """``(declaration, next statement, name, value)`` for each ``const name = value;`` (one
    declarator, a plain name) directly followed in its block by a statement of type ``following``."""
    for block in (n for n in _walk(c.fn) if n.type == "statement_block"):
        kids = [k for k in block.named_children if k.type != "comment"]
        for a, b in zip(kids, kids[1:]):
            if a.type != "lexical_declaration" or b.type != following:
                continue
            decls = [d for d in a.named_children if d.type == "variable_declarator"]
            if len(decls) != 1:
                continue
            name, value = decls[0].child_by_field_name("name"), decls[0].child_by_field_name("value")
            if name is not None and value is not None and name.type == "identifier":
                yield a, b, name, value


def _ts_temporary(c: _Code, rng: random.Random) -> str | None:
    edits = []
    ids: dict[str, int] = {}
    for n in _walk(c.fn):
        if n.type in ("identifier", "shorthand_property_identifier"):
            ids[c.text(n)] = ids.get(c.text(n), 0) + 1
    for a, b, name, value in _declared_then(c, "return_statement"):
        ret = _expr_child(b)
        if ret is None or ret.type != "identifier" or c.text(ret) != c.text(name) or ids.get(c.text(name)) != 2:
            continue
        edits.append((a.start_byte, b.end_byte, f"return {c.text(value)};"))
    if not edits:
        name = fresh_name(_used(c), _RESULT_NAMES, _RESERVED)
        for n in _walk(c.fn):
            if n.type != "return_statement":
                continue
            expr = _expr_child(n)
            if expr is None or expr.type in _TRIVIAL or expr.type == "sequence_expression":
                continue
            parent = n.parent
            returns_here = sum(1 for k in parent.named_children if k.type == "return_statement")
            indent = c.indent_of(n)
            value = c.text(expr)
            if parent.type == "statement_block" and returns_here == 1 and indent is not None:
                edits.append((n.start_byte, n.end_byte, f"const {name} = {value};\n{indent}return {name};"))
            else:
                edits.append((n.start_byte, n.end_byte, f"{{ const {name} = {value}; return {name}; }}"))
        edits = _outermost(edits)
    return c.apply(edits) if edits else None


def _single_stmt(n: Node | None, kind: str) -> Node | None:
    """n itself, or the only statement of block n, when it has type `kind`."""
    if n is None:
        return None
    if n.type == "statement_block":
        kids = n.named_children
        if len(kids) != 1:
            return None
        n = kids[0]
    return n if n.type == kind else None


def _cond_text(c: _Code, cond: Node) -> str:
    """A condition usable before `?`: the parenthesized text, unwrapped when that is safe."""
    inner = _expr_child(cond) if cond.type == "parenthesized_expression" else cond
    if inner is not None and inner.type not in _LOW and cond.type == "parenthesized_expression":
        return c.text(inner)
    return c.text(cond) if cond.type == "parenthesized_expression" else f"({c.text(cond)})"


def _branch(c: _Code, n: Node) -> str:
    return f"({c.text(n)})" if n.type in _LOW or c.text(n).startswith("{") else c.text(n)


def _ts_conditional(c: _Code, rng: random.Random) -> str | None:
    edits = []
    unit = c.unit()
    for n in _walk(c.fn):
        if n.type != "if_statement":
            continue
        cond, cons = n.child_by_field_name("condition"), n.child_by_field_name("consequence")
        alt = n.child_by_field_name("alternative")
        alt_body = _expr_child(alt) if alt is not None else None
        r1 = _single_stmt(cons, "return_statement")
        if r1 is not None and _expr_child(r1) is not None:
            r2, last = _single_stmt(alt_body, "return_statement"), n
            if alt is None and n.parent.type == "statement_block":
                nxt = n.next_named_sibling
                if nxt is not None and nxt.type == "return_statement":
                    r2, last = nxt, nxt
            if r2 is not None and _expr_child(r2) is not None:
                edits.append((n.start_byte, last.end_byte, f"return {_cond_text(c, cond)} ? "
                              f"{_branch(c, _expr_child(r1))} : {_branch(c, _expr_child(r2))};"))
            continue
        e1, e2 = _single_stmt(cons, "expression_statement"), _single_stmt(alt_body, "expression_statement")
        a1, a2 = (_expr_child(e1) if e1 else None), (_expr_child(e2) if e2 else None)
        if a1 is not None and a2 is not None and a1.type == a2.type == "assignment_expression":
            l1, l2 = a1.child_by_field_name("left"), a2.child_by_field_name("left")
            if _simple_lhs(l1) and c.text(l1) == c.text(l2):
                edits.append((n.start_byte, n.end_byte, f"{c.text(l1)} = {_cond_text(c, cond)} ? "
                              f"{_branch(c, a1.child_by_field_name('right'))} : "
                              f"{_branch(c, a2.child_by_field_name('right'))};"))
    edits = _outermost(edits)
    if not edits:
        for n in _walk(c.fn):
            if n.type == "return_statement":
                x = _expr_child(n)
                lead = "return "
            elif n.type == "expression_statement":
                a = _expr_child(n)
                if a is None or a.type != "assignment_expression" or not _simple_lhs(a.child_by_field_name("left")):
                    continue
                x = a.child_by_field_name("right")
                lead = f"{c.text(a.child_by_field_name('left'))} = "
            else:
                continue
            if x is None or x.type != "conditional_expression":
                continue
            cond = x.child_by_field_name("condition")
            cond_text = c.text(cond) if cond.type == "parenthesized_expression" else f"({c.text(cond)})"
            a_text = c.text(x.child_by_field_name("consequence"))
            b_text = c.text(x.child_by_field_name("alternative"))
            indent = c.indent_of(n)
            if indent is None:
                new = f"if {cond_text} {{ {lead}{a_text}; }} else {{ {lead}{b_text}; }}"
            else:
                new = (f"if {cond_text} {{\n{indent}{unit}{lead}{a_text};\n{indent}}} else {{\n"
                       f"{indent}{unit}{lead}{b_text};\n{indent}}}")
            edits.append((n.start_byte, n.end_byte, new))
        edits = _outermost(edits)
    return c.apply(edits) if edits else None


def _push_arg(c: _Code, stmt: Node | None, name: str) -> Node | None:
    """e when stmt is `name.push(e);`."""
    if stmt is None or stmt.type != "expression_statement":
        return None
    call = _expr_child(stmt)
    if call is None or call.type != "call_expression":
        return None
    fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
    if fn is None or fn.type != "member_expression" or args is None or args.type != "arguments":
        return None
    obj, prop = fn.child_by_field_name("object"), fn.child_by_field_name("property")
    if obj is None or obj.type != "identifier" or c.text(obj) != name or c.text(prop) != "push":
        return None
    kids = [k for k in args.named_children if k.type != "comment"]
    if len(kids) != 1 or kids[0].type == "spread_element":
        return None
    return kids[0]


def _mentions(c: _Code, nodes: list[Node], name: str) -> bool:
    return any(x.type in ("identifier", "shorthand_property_identifier") and c.text(x) == name
               for n in nodes for x in _walk(n))


def _has(nodes: list[Node], types: set[str]) -> bool:
    return any(x.type in types for n in nodes for x in _walk(n))


def _arrow_parts(c: _Code, arrow: Node) -> tuple[str, Node] | None:
    """(param, body expression) of `(x) => e` / `x => e`."""
    if arrow.type != "arrow_function" or any(ch.type == "async" for ch in arrow.children):
        return None
    body = arrow.child_by_field_name("body")
    if body is None or body.type == "statement_block":
        return None
    param = arrow.child_by_field_name("parameter")
    if param is not None:
        return (c.text(param), body) if param.type == "identifier" else None
    params = arrow.child_by_field_name("parameters")
    if params is None or len(params.named_children) != 1:
        return None
    p = params.named_children[0]
    pat = p.child_by_field_name("pattern")
    if p.type != "required_parameter" or pat is None or pat.type != "identifier" or len(p.named_children) != 1:
        return None
    return c.text(pat), body


def _ts_comprehension(c: _Code, rng: random.Random) -> str | None:
    edits = []
    for a, b, name, value in _declared_then(c, "for_in_statement"):
        if c.text(value).replace(" ", "") != "[]":
            continue
        out = c.text(name)
        left, right = b.child_by_field_name("left"), b.child_by_field_name("right")
        kw = [ch.type for ch in b.children if ch.type in ("const", "let", "var", "of", "in", "await")]
        if left is None or right is None or left.type != "identifier" or kw[:2] not in (["const", "of"],
                                                                                      ["let", "of"]):
            continue
        body = b.child_by_field_name("body")
        stmt = _single_stmt(body, "if_statement") or _single_stmt(body, "expression_statement")
        cond = None
        if stmt is not None and stmt.type == "if_statement":
            if stmt.child_by_field_name("alternative") is not None:
                continue
            cond = stmt.child_by_field_name("condition")
            stmt = _single_stmt(stmt.child_by_field_name("consequence"), "expression_statement")
        elt = _push_arg(c, stmt, out)
        if elt is None:
            continue
        parts = [right, elt] + ([cond] if cond is not None else [])
        if _mentions(c, parts, out) or _has(parts, {"await_expression", "yield_expression", "comment"}):
            continue
        x = c.text(left)
        xs = _paren(c, right) if right.type != "call_expression" or not c.text(right).startswith("new ") \
            else f"({c.text(right)})"
        e = _branch(c, elt)
        chain = f"{xs}.filter(({x}) => {_cond_text(c, cond)})" if cond is not None else xs
        decl_head = c.full[a.start_byte:value.start_byte].decode()
        edits.append((a.start_byte, b.end_byte, f"{decl_head}{chain}.map(({x}) => {e});"))
    if not edits:
        unit = c.unit()
        for n in _walk(c.fn):
            if n.type == "lexical_declaration":
                decls = [d for d in n.named_children if d.type == "variable_declarator"]
                if len(decls) != 1 or decls[0].child_by_field_name("name").type != "identifier":
                    continue
                call, out = decls[0].child_by_field_name("value"), c.text(decls[0].child_by_field_name("name"))
                head = c.full[n.start_byte:call.start_byte].decode() if call is not None else ""
                tail = ""
            elif n.type == "return_statement":
                call, out, head, tail = _expr_child(n), None, None, None
            else:
                continue
            if call is None or call.type != "call_expression" or n.parent.type != "statement_block":
                continue
            fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
            if fn is None or fn.type != "member_expression" or c.text(fn.child_by_field_name("property")) != "map" \
                    or args is None or len(args.named_children) != 1:
                continue
            mapped = _arrow_parts(c, args.named_children[0])
            if mapped is None:
                continue
            x, elt = mapped
            src, cond = fn.child_by_field_name("object"), None
            if src.type == "call_expression":
                f2, a2 = src.child_by_field_name("function"), src.child_by_field_name("arguments")
                if f2 is not None and f2.type == "member_expression" and \
                        c.text(f2.child_by_field_name("property")) == "filter" and a2 is not None \
                        and len(a2.named_children) == 1:
                    filt = _arrow_parts(c, a2.named_children[0])
                    if filt is not None and filt[0] == x:
                        src, cond = f2.child_by_field_name("object"), filt[1]
            indent = c.indent_of(n)
            if indent is None or src.type == "super":
                continue
            if out is None:
                out = fresh_name(_used(c), ("out", "result", "items", "acc", "collected", "values"), _RESERVED)
                head, tail = f"const {out} = ", f"\n{indent}return {out};"
            parts = [src, elt] + ([cond] if cond is not None else [])
            if _mentions(c, parts, out) or _has(parts, {"await_expression", "yield_expression", "comment"}):
                continue
            e = c.text(elt)
            e = e[1:-1] if elt.type == "parenthesized_expression" and e.startswith("({") else e
            push = f"{out}.push({e});"
            if cond is not None:
                body = (f"{indent}{unit}if ({c.text(cond)}) {{\n{indent}{unit}{unit}{push}\n"
                        f"{indent}{unit}}}")
            else:
                body = f"{indent}{unit}{push}"
            new = (f"{head}[];\n{indent}for (const {x} of {c.text(src)}) {{\n{body}\n{indent}}}{tail}")
            edits.append((n.start_byte, n.end_byte, new))
        edits = _outermost(edits)
    return c.apply(edits) if edits else None


_KINDS = {
    "renamed": _ts_renamed, "annotations": _ts_annotations, "docstring": _ts_docstring,
    "comments": _ts_comments, "formatting": _ts_formatting, "defaults": _ts_defaults,
    "augmented": _ts_augmented, "comparison": _ts_comparison, "temporary": _ts_temporary,
    "conditional": _ts_conditional, "comprehension": _ts_comprehension,
}


def clone(code: str, kind: str, rng: random.Random) -> str | None:
    """code with edit `kind` applied, or None when it does not apply (or the result would not parse)."""
    try:
        c = _Code(code)
        out = _KINDS[kind](c, rng)
    except (ValueError, IndexError, AttributeError):
        return None
    if out is None or out == code or not valid(out):
        return None
    return out


def shape_tokens(code: str) -> list[str]:
    """code's tokens with identifiers replaced by a placeholder, comments and whitespace dropped."""
    try:
        c = _Code(code)
    except ValueError:
        return code.split()
    idents = {"identifier", "property_identifier", "type_identifier", "shorthand_property_identifier",
              "shorthand_property_identifier_pattern", "statement_identifier"}
    return ["ID" if n.type in idents else c.text(n) for n in _walk(c.decl) if n.child_count == 0
            and n.type != "comment" and c.text(n)]

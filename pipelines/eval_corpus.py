"""Retrieval evaluation on a project's own code: docstrings become queries, then are hidden.

Shared by ``codemem eval`` (a user's repository) and the benchmarks in ``bench/`` (downloaded
corpora), so both measure the same way:

* **Stripping.** Python: every docstring (module, class, function) is removed with ``ast``
  keeping line numbers stable: its characters become nothing, or ``pass`` where the body would
  otherwise be empty (or where the docstring shares its line with the ``def``), and the
  newlines it spanned are kept, so every ``def`` stays on its line and the file still parses.
  Other languages: the doc comments the parser attaches to definitions (``/** */`` for
  JS/TS/Java, ``///`` for Rust/C#, the ``//`` block above a Go definition) and a file's leading
  doc comment are blanked with tree-sitter, newlines kept.
* **Queries.** One per function or method (nested ones included) whose ORIGINAL docstring's
  first line has at least ``MIN_QUERY_WORDS`` words: the docstring's first paragraph (up to the
  first blank line), whitespace collapsed (``mode="line"``: the first line only). Identical
  texts are merged into one query whose gold set holds every function that carried it.
* **BM25 baseline.** Lucene BM25 (k1=1.5, b=0.75) over each function's stripped source, with a
  code tokenizer (identifiers split on ``_`` and camelCase, lower-cased, English stop words
  dropped, Snowball-stemmed); numpy only, and rank-for-rank the same as ``bm25s`` (float32
  scores summed in the same order, the same top-k selection).
* **Metrics** at cutoff 10: R@1 (first result is a gold function), R@10 (a gold function in the
  first 10), MRR@10 (mean of 1/rank of the first gold function in the first 10, 0 when absent).
"""

from __future__ import annotations

import ast
import io
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from pipelines.discovery import discover
from pipelines.parsing import Language, parse_source
from resources.schemas.code import CALLABLE_KINDS
from resources.text.identifiers import search_tokens

CUTOFF = 10
MIN_QUERY_WORDS = 3
MIN_DOCUMENTED = 10
"""Fewer documented functions than this and an evaluation says nothing."""
FUNCTION_KINDS = tuple(sorted(CALLABLE_KINDS))


@dataclass(slots=True)
class Function:
    """One function or method of a stripped project."""

    idx: int
    path: str  # repo-relative, posix
    name: str
    local_qualified_name: str  # Class.method / outer.inner, file-local
    def_line: int  # 1-based line of `def` (the first line of the definition elsewhere)
    first_line: int  # 1-based line of the first decorator (== def_line when undecorated)
    end_line: int
    text: str  # stripped source from the first decorator to the end
    docstring: str | None  # the ORIGINAL docstring (cleaned)


@dataclass(slots=True)
class Query:
    """One query and the functions that answer it."""

    text: str
    gold: list[int]  # Function.idx


# -- docstring stripping -------------------------------------------------------------------

def _docstring_node(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    if not body:
        return None
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first
    return None


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (1-based line → offsets[line-1])."""
    starts = [0]
    for line in io.StringIO(source):
        starts.append(starts[-1] + len(line))
    return starts


def strip_docstrings(source: str) -> str:
    """Python ``source`` without docstrings, same number of lines, every statement on its old line.

    Raises:
        SyntaxError: when ``source`` does not parse (or, defensively, when the result does not).
        ValueError: when the result would not keep the line count (odd line endings).
    """
    tree = ast.parse(source)
    starts = _offsets(source)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = _docstring_node(node)
        if doc is None:
            continue
        # ast offsets are in UTF-8 bytes; convert through the line's text.
        line_start = starts[doc.lineno - 1]
        line_text = source[line_start : starts[doc.lineno]] if doc.lineno < len(starts) else source[line_start:]
        begin = line_start + len(line_text.encode("utf-8")[: doc.col_offset].decode("utf-8", "replace"))
        end_line_start = starts[doc.end_lineno - 1]
        end_text = source[end_line_start : starts[doc.end_lineno]] if doc.end_lineno < len(starts) else source[end_line_start:]
        end = end_line_start + len(end_text.encode("utf-8")[: doc.end_col_offset].decode("utf-8", "replace"))
        only_statement = len(node.body) == 1
        shares_line = bool(source[line_start:begin].strip())
        replacement = "pass" if (only_statement or shares_line) and not isinstance(node, ast.Module) else ""
        replacement += "\n" * source[begin:end].count("\n")
        edits.append((begin, end, replacement))
    out = source
    for begin, end, replacement in sorted(edits, reverse=True):
        out = out[:begin] + replacement + out[end:]
    ast.parse(out)  # must still be valid Python
    if out.count("\n") != source.count("\n"):
        raise ValueError("docstring stripping changed the number of lines")
    return out


def strip_doc_comments(source: str, language: Language, path: str = "", timeout_s: float = 10.0) -> str:
    """``source`` (not Python) without the doc comments the parser attaches to definitions.

    Each doc comment (and the file's leading doc comment) is replaced by the newlines it spanned,
    so every definition stays on its line. Other comments are kept.

    Raises:
        ParseTimeout: when the parse exceeds ``timeout_s``.
    """
    from tree_sitter import QueryCursor

    from pipelines.parsing.hooks.base import first_named
    from pipelines.parsing.languages import get_parser, get_spec
    from pipelines.parsing.tree import parse_tree

    data = source.encode("utf-8")
    spec = get_spec(language)
    hooks = spec.hooks
    root = parse_tree(get_parser(language), data, path, timeout_s).root_node
    ranges: set[tuple[int, int]] = set()
    for pattern, caps in QueryCursor(spec.query).matches(root):
        role, kind = spec.roles[pattern]
        if role != "def":
            continue
        _, docs = hooks.locate(caps["def." + kind][0], data)
        ranges.update((d.start_byte, d.end_byte) for d in docs)
    first = first_named(root)
    if first is not None and hooks.module_docstring(root, data, {start for start, _ in ranges}) is not None:
        ranges.add((first.start_byte, first.end_byte))
    out = data
    for start, end in sorted(ranges, reverse=True):
        out = out[:start] + b"\n" * data.count(b"\n", start, end) + out[end:]
    return out.decode("utf-8")


# -- functions and queries -----------------------------------------------------------------

def python_functions(path: str, original: str, stripped: str, start_idx: int) -> list[Function]:
    """The functions and methods of a Python file (``ast``), texts from the stripped source."""
    tree = ast.parse(original)
    lines = stripped.splitlines(keepends=True)
    out: list[Function] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in child.decorator_list] + [child.lineno])
                text = "".join(lines[first - 1 : child.end_lineno])
                out.append(
                    Function(
                        idx=start_idx + len(out), path=path, name=child.name,
                        local_qualified_name=".".join([*scope, child.name]), def_line=child.lineno,
                        first_line=first, end_line=child.end_lineno or child.lineno, text=text,
                        docstring=ast.get_docstring(child),
                    )
                )
                visit(child, [*scope, child.name])
            elif isinstance(child, ast.ClassDef):
                visit(child, [*scope, child.name])
            else:
                visit(child, scope)

    visit(tree, [])
    return out


def parsed_functions(path: str, original: str, stripped: str, language: Language, start_idx: int) -> list[Function]:
    """The functions and methods of a non-Python file (the product's parser).

    Lines and texts come from the stripped source (what gets indexed), docstrings from the
    original; the two are paired by qualified name and occurrence.
    """
    docs: dict[tuple[str, int], str | None] = {}
    seen: Counter[str] = Counter()
    for symbol in parse_source(path, original.encode("utf-8"), language).symbols:
        if symbol.kind in FUNCTION_KINDS:
            docs[(symbol.qualified_name, seen[symbol.qualified_name])] = symbol.docstring
            seen[symbol.qualified_name] += 1
    out: list[Function] = []
    seen.clear()
    for symbol in parse_source(path, stripped.encode("utf-8"), language).symbols:
        if symbol.kind not in FUNCTION_KINDS:
            continue
        key = (symbol.qualified_name, seen[symbol.qualified_name])
        seen[symbol.qualified_name] += 1
        out.append(
            Function(
                idx=start_idx + len(out), path=path, name=symbol.name, local_qualified_name=symbol.qualified_name,
                def_line=symbol.start_line, first_line=symbol.start_line, end_line=symbol.end_line,
                text=symbol.code, docstring=docs.get(key),
            )
        )
    return out


def strip_file(path: str, source: str, language: Language, start_idx: int = 0) -> tuple[str, list[Function]]:
    """``(stripped source, functions)`` of one file.

    Raises:
        SyntaxError / ValueError: a Python file that ``ast`` cannot parse or strip.
    """
    if language == "python":
        stripped = strip_docstrings(source)
        return stripped, python_functions(path, source, stripped, start_idx)
    stripped = strip_doc_comments(source, language, path)
    return stripped, parsed_functions(path, source, stripped, language, start_idx)


def query_text(docstring: str, mode: str = "paragraph") -> str | None:
    """The query a docstring yields, or None when its first line has < MIN_QUERY_WORDS words."""
    doc = docstring.strip()
    if not doc:
        return None
    first_line = doc.split("\n", 1)[0].strip()
    if len(first_line.split()) < MIN_QUERY_WORDS:
        return None
    if mode == "line":
        return first_line
    paragraph = doc.split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def build_queries(functions: Iterable[Function], mode: str = "paragraph") -> list[Query]:
    """Queries from original docstrings; identical texts merged (any of their functions counts)."""
    by_text: dict[str, list[int]] = {}
    for fn in functions:
        if fn.docstring:
            text = query_text(fn.docstring, mode)
            if text:
                by_text.setdefault(text, []).append(fn.idx)
    return [Query(text=t, gold=g) for t, g in by_text.items()]


def documented_count(functions: Iterable[Function], mode: str = "paragraph") -> int:
    """How many functions carry a docstring that yields a query."""
    return sum(1 for fn in functions if fn.docstring and query_text(fn.docstring, mode))


def sample_queries(queries: Sequence[Query], max_queries: int, seed: int = 0) -> list[Query]:
    """At most ``max_queries`` of ``queries``, drawn with a fixed seed, in their original order."""
    if len(queries) <= max_queries:
        return list(queries)
    chosen = sorted(random.Random(seed).sample(range(len(queries)), max_queries))
    return [queries[i] for i in chosen]


# -- a project -----------------------------------------------------------------------------

@dataclass
class MinedProject:
    """A project's indexable files with docstrings stripped, its functions and its queries."""

    root: Path
    stripped: dict[str, str] = field(default_factory=dict)  # repo-relative path -> stripped source
    functions: list[Function] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (path, why): not in the copy
    documented: int = 0


def mine_project(
    root: Path,
    *,
    extensions: Iterable[str],
    max_file_bytes: int,
    query_mode: str = "paragraph",
    progress: Callable[[int, int], None] | None = None,
) -> MinedProject:
    """Strip every indexable file of ``root`` (discovery's rules: .gitignore, size, vendored trees).

    A file that cannot be stripped (not UTF-8, Python that ``ast`` rejects, a parse timeout) is
    left out of the copy, so no docstring can leak into the evaluated index.
    """
    found = discover(root, extensions=extensions, max_file_bytes=max_file_bytes)
    mined = MinedProject(root=Path(root))
    total = len(found.files)
    for done, source_file in enumerate(found.files, 1):
        path = source_file.path
        try:
            original = source_file.absolute_path.read_bytes().decode("utf-8")
            stripped, functions = strip_file(path, original, source_file.language, len(mined.functions))
        except UnicodeDecodeError:
            mined.left_out.append((path, "not UTF-8"))
        except (SyntaxError, ValueError) as exc:
            mined.left_out.append((path, f"cannot be stripped: {type(exc).__name__}"))
        except Exception as exc:  # noqa: BLE001 - a parse timeout or an odd file: leave it out
            mined.left_out.append((path, f"cannot be stripped: {type(exc).__name__}: {exc}"))
        else:
            mined.stripped[path] = stripped
            mined.functions += functions
        if progress is not None:
            progress(done, total)
    mined.queries = build_queries(mined.functions, query_mode)
    mined.documented = documented_count(mined.functions, query_mode)
    return mined


def write_copy(stripped: dict[str, str], dest: Path) -> Path:
    """Write the stripped files under ``dest`` (a new directory) and return it."""
    dest.mkdir(parents=True, exist_ok=False)
    for path, text in stripped.items():
        target = dest / PurePosixPath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    return dest


# -- BM25 ----------------------------------------------------------------------------------

def code_tokenize(text: str) -> list[str]:
    """Words of text and code: identifiers split on ``_`` and camelCase, lower-cased, stemmed.

    The index's search tokens without its whole-identifier tokens (a Lucene-style baseline).
    """
    return search_tokens(text, keep_compound=False)


class BM25:
    """Lucene BM25 (k1=1.5, b=0.75) over texts with ``code_tokenize``.

    Same scores and order as ``bm25s.BM25()`` (method "lucene"): per (document, term) weights
    idf·tf/(tf + k1·(1-b+b·len/avg)) stored as float32, a query's score summed term by term
    (repeated query terms count again) in float32, top-k by numpy's argpartition + argsort.
    """

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        docs = [code_tokenize(t) or ["<empty>"] for t in texts]
        self.n = len(docs)
        self.vocab: dict[str, int] = {}
        counts = [Counter(doc) for doc in docs]
        for doc in docs:
            for token in doc:
                self.vocab.setdefault(token, len(self.vocab))
        df = [0] * len(self.vocab)
        for c in counts:
            for token in c:
                df[self.vocab[token]] += 1
        idf = np.array([math.log(1 + (self.n - d + 0.5) / (d + 0.5)) for d in df], dtype=np.float32)
        avg_len = np.array([len(doc) for doc in docs]).mean()
        postings: list[list[tuple[int, float]]] = [[] for _ in self.vocab]
        for doc_idx, (doc, c) in enumerate(zip(docs, counts, strict=True)):
            ids = np.array([self.vocab[t] for t in c], dtype=np.int64)
            tf = np.array(list(c.values()), dtype=np.float32)
            weights = (idf[ids] * (tf / (k1 * ((1 - b) + b * len(doc) / avg_len) + tf))).astype(np.float32)
            for token_id, weight in zip(ids.tolist(), weights, strict=True):
                postings[token_id].append((doc_idx, weight))
        self.postings = [
            (np.array([d for d, _ in p], dtype=np.int64), np.array([w for _, w in p], dtype=np.float32)) for p in postings
        ]

    def scores(self, query: str) -> np.ndarray | None:
        """float32 scores of every text for ``query`` (None when no query token is known)."""
        ids = [self.vocab[t] for t in code_tokenize(query) if t in self.vocab]
        if not ids:
            return None
        out = np.zeros(self.n, dtype=np.float32)
        for token_id in ids:
            docs, weights = self.postings[token_id]
            out[docs] += weights
        return out

    def rank(self, query: str, k: int = 100) -> list[int]:
        """Indices of the top-k texts with a positive score, best first (empty when no token is known)."""
        scores = self.scores(query)
        if scores is None:
            return []
        k = min(k, self.n)
        top = np.argpartition(scores, -k).take(indices=range(-k, 0))
        top = top[np.flip(np.argsort(scores[top]))]
        return [int(d) for d in top if scores[d] > 0]


# -- metrics -------------------------------------------------------------------------------

@dataclass
class Metrics:
    """R@1, R@10 and MRR@10 of one method over ``n`` queries."""

    mrr: float
    r1: float
    r10: float
    n: int

    def as_dict(self, digits: int | None = 4) -> dict[str, float]:
        """The figures, rounded to ``digits`` (None: exact)."""

        def shown(x: float) -> float:
            return x if digits is None else round(x, digits)

        return {"mrr": shown(self.mrr), "r1": shown(self.r1), "r10": shown(self.r10), "queries": self.n}


def first_gold_rank(ranking: Sequence[int | None], gold: Iterable[int], cutoff: int = CUTOFF) -> int | None:
    """1-based rank of the first gold id in the top ``cutoff``, or None."""
    wanted = set(gold)
    for r, doc in enumerate(ranking[:cutoff], 1):
        if doc is not None and doc in wanted:
            return r
    return None


def evaluate(rankings: Sequence[Sequence[int | None]], golds: Sequence[Iterable[int]], cutoff: int = CUTOFF) -> Metrics:
    """Metrics of rankings (one per query, best first) against gold id sets."""
    ranks = [first_gold_rank(r, g, cutoff) for r, g in zip(rankings, golds, strict=True)]
    n = len(ranks)
    if not n:
        return Metrics(0.0, 0.0, 0.0, 0)
    return Metrics(
        mrr=sum(1.0 / r for r in ranks if r) / n,
        r1=sum(1 for r in ranks if r == 1) / n,
        r10=sum(1 for r in ranks if r) / n,
        n=n,
    )


class GoldMatcher:
    """Maps a search hit to the function it is (or None).

    A hit is a function when its file matches and its ``start_line`` lies between the function's
    first decorator line and its ``def`` line, or else when its qualified name ends with the
    function's file-local qualified name and that name is unique in the file.
    """

    def __init__(self, functions: Iterable[Function]) -> None:
        self.by_line: dict[tuple[str, int], int] = {}
        self.by_name: dict[tuple[str, str], int] = {}
        seen: dict[tuple[str, str], int] = {}
        for fn in functions:
            for line in range(fn.first_line, fn.def_line + 1):
                self.by_line.setdefault((fn.path, line), fn.idx)
            key = (fn.path, fn.local_qualified_name)
            seen[key] = seen.get(key, 0) + 1
            self.by_name.setdefault(key, fn.idx)
        # A name defined twice in a file (overloads, redefinitions) is matched by line only.
        self.by_name = {k: v for k, v in self.by_name.items() if seen[k] == 1}
        self.names_by_path: dict[str, list[tuple[str, int]]] = {}
        for (path, name), idx in self.by_name.items():
            self.names_by_path.setdefault(path, []).append((name, idx))

    def match(self, file_path: str, start_line: int, qualified_name: str = "", kind: str = "") -> int | None:
        """The function a hit is: by (file, line) first, else by a name unique in its file."""
        if kind and kind not in FUNCTION_KINDS:
            return None
        idx = self.by_line.get((file_path, start_line))
        if idx is not None:
            return idx
        best: tuple[int, int] | None = None  # (len(name), idx): the longest matching suffix wins
        for name, idx in self.names_by_path.get(file_path, []):
            if (qualified_name == name or qualified_name.endswith("." + name)) and (best is None or len(name) > best[0]):
                best = (len(name), idx)
        return best[1] if best else None

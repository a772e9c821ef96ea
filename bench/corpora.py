"""Benchmark corpora: PyPI sdists downloaded at run time, docstrings stripped, queries extracted.

The retrieval-quality corpora are the sdists of ``requests`` and ``flask`` (pinned versions,
downloaded with ``pip download`` into the ignored ``bench/.cache/``; nothing of them is
committed). Every ``.py`` file of the sdist is used (``src/``, ``tests/``, ``examples/``,
``docs/``, ``setup.py``): that is the file set whose function counts are closest to the earlier
measurement (requests 706 functions here vs 711 then, flask 1,419 vs 1,463).

Stripping: every docstring (module, class, function) is removed with ``ast`` while keeping line
numbers stable: the docstring's characters become nothing, or ``pass`` where the body would
otherwise be empty (or where the docstring shares its line with the ``def``), and the newlines
it spanned are kept, so every ``def`` stays on its original line and the file still parses.

Queries: one per function (or method, nested functions included) whose ORIGINAL docstring's
first line has at least 3 words. The query text is the docstring's first paragraph (up to the
first blank line) with whitespace collapsed, which completes first lines that end mid-sentence
(``--query-mode line`` uses the first line only). Identical query texts are merged into one
query whose gold set holds every function that carried it (any of them counts as a hit).
"""

from __future__ import annotations

import ast
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
SDIST_DIR = CACHE_DIR / "sdists"
CORPUS_DIR = CACHE_DIR / "corpora"

# Pinned so numbers are comparable between runs; `--latest` in run.py ignores the pins.
PINNED = {"requests": "2.34.2", "flask": "3.1.3", "click": "8.5.1", "httpx": "0.28.1"}  # click, httpx: held-out
MIN_QUERY_WORDS = 3


@dataclass(slots=True)
class Function:
    """One function or method of a stripped corpus."""

    idx: int
    path: str  # repo-relative, posix
    name: str
    local_qualified_name: str  # Class.method / outer.inner, file-local
    def_line: int  # 1-based line of `def`
    first_line: int  # 1-based line of the first decorator (== def_line when undecorated)
    end_line: int
    text: str  # stripped source from the first decorator to the end
    docstring: str | None  # the ORIGINAL docstring (cleaned by inspect.cleandoc)


@dataclass(slots=True)
class Query:
    """One query and the functions that answer it."""

    text: str
    gold: list[int]  # Function.idx


@dataclass
class Corpus:
    """A stripped project on disk, its functions and its queries."""

    name: str
    version: str
    root: Path  # the stripped copy (a directory with the sdist's files)
    functions: list[Function] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


# -- download ------------------------------------------------------------------------------

def download_sdist(package: str, version: str | None) -> Path:
    """The sdist tarball of ``package`` (from the cache, else ``pip download``)."""
    SDIST_DIR.mkdir(parents=True, exist_ok=True)
    if version:
        for candidate in SDIST_DIR.glob(f"{package}-{version}.tar.gz"):
            return candidate
    spec = f"{package}=={version}" if version else package
    before = set(SDIST_DIR.glob("*.tar.gz"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
           "-q", "-d", str(SDIST_DIR), spec]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        # --no-build-isolation needs setuptools/flit in the venv; retry with isolation.
        cmd.remove("--no-build-isolation")
        result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip download {spec} failed:\n{result.stderr[-2000:]}")
    found = sorted(SDIST_DIR.glob(f"{package}-{version or '*'}.tar.gz"), key=lambda p: p.stat().st_mtime)
    new = [p for p in found if p not in before] or found
    if not new:
        raise RuntimeError(f"pip download {spec} left no {package}-*.tar.gz in {SDIST_DIR}")
    return new[-1]


def _extract_py_files(tarball: Path) -> dict[str, bytes]:
    """``{repo-relative path: bytes}`` of the .py files in an sdist (top folder dropped)."""
    out: dict[str, bytes] = {}
    with tarfile.open(tarball) as tf:
        for member in tf.getmembers():
            if not member.isfile() or not member.name.endswith(".py"):
                continue
            parts = Path(member.name).parts[1:]
            if not parts or any(p.startswith(".") or p in ("build", "dist") for p in parts):
                continue
            fh = tf.extractfile(member)
            if fh is not None:
                out["/".join(parts)] = fh.read()
    return out


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
    """``source`` without docstrings, same number of lines, every statement on its old line.

    Raises:
        SyntaxError: when ``source`` does not parse (or, defensively, when the result does not).
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
        raise AssertionError("docstring stripping changed the number of lines")
    return out


# -- functions and queries -----------------------------------------------------------------

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


def _functions_of(path: str, original: str, stripped: str, start_idx: int) -> list[Function]:
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


def build_queries(functions: list[Function], mode: str = "paragraph") -> list[Query]:
    """Queries from original docstrings; identical texts merged (any of their functions counts)."""
    by_text: dict[str, list[int]] = {}
    for fn in functions:
        if fn.docstring:
            text = query_text(fn.docstring, mode)
            if text:
                by_text.setdefault(text, []).append(fn.idx)
    return [Query(text=t, gold=g) for t, g in by_text.items()]


def load_corpus(package: str, version: str | None = None, query_mode: str = "paragraph") -> Corpus:
    """Download (cached), strip and write the corpus of ``package``; returns its functions and queries."""
    version = version if version is not None else PINNED.get(package)
    tarball = download_sdist(package, version)
    real_version = tarball.name.removeprefix(f"{package}-").removesuffix(".tar.gz")
    files = _extract_py_files(tarball)
    root = CORPUS_DIR / f"{package}-{real_version}"
    corpus = Corpus(name=package, version=real_version, root=root)
    stripped_files: dict[str, str] = {}
    for path in sorted(files):
        try:
            original = files[path].decode("utf-8")
            stripped_files[path] = strip_docstrings(original)
        except (UnicodeDecodeError, SyntaxError):
            continue  # not valid Python 3 (none in the pinned sdists); left out of the corpus
        corpus.functions += _functions_of(path, original, stripped_files[path], len(corpus.functions))
    corpus.files = sorted(stripped_files)
    # Re-write the stripped tree only when its content differs (keeps mtimes stable otherwise).
    digest = hashlib.sha256("".join(f"{p}\0{stripped_files[p]}" for p in corpus.files).encode()).hexdigest()
    marker = root / ".bench-digest"
    if not marker.is_file() or marker.read_text() != digest:
        if root.exists():
            shutil.rmtree(root)
        for path, text in stripped_files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        marker.write_text(digest)
    corpus.queries = build_queries(corpus.functions, query_mode)
    return corpus


def fresh_copy(corpus: Corpus, dest: Path) -> Path:
    """A copy of the stripped corpus at ``dest`` (codemem indexes copies, never the cache)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(corpus.root, dest, ignore=shutil.ignore_patterns(".bench-digest"))
    return dest

"""Benchmark corpora: PyPI sdists downloaded at run time, docstrings stripped, queries extracted.

The retrieval-quality corpora are the sdists of ``requests`` and ``flask`` (pinned versions,
downloaded with ``pip download`` into the ignored ``bench/.cache/``; nothing of them is
committed). Every ``.py`` file of the sdist is used (``src/``, ``tests/``, ``examples/``,
``docs/``, ``setup.py``): that is the file set whose function counts are closest to the earlier
measurement (requests 706 functions here vs 711 then, flask 1,419 vs 1,463).

Stripping (``ast``, line numbers kept), queries (the first paragraph of each docstring whose
first line has at least 3 words; ``--query-mode line``: the first line; identical texts merged)
and functions come from ``pipelines.eval_corpus``, the module ``codemem eval`` runs on a user's
own repository, so the benchmark and the product measure the same way.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.eval_corpus import MIN_QUERY_WORDS, Function, Query, build_queries, strip_docstrings, strip_file

__all__ = ["MIN_QUERY_WORDS", "Corpus", "Function", "Query", "load_corpus", "fresh_copy", "strip_docstrings"]

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
SDIST_DIR = CACHE_DIR / "sdists"
CORPUS_DIR = CACHE_DIR / "corpora"

# Pinned so numbers are comparable between runs; `--latest` in run.py ignores the pins.
PINNED = {"requests": "2.34.2", "flask": "3.1.3", "click": "8.5.1", "httpx": "0.28.1"}  # click, httpx: held-out


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
    names = {package, package.replace("-", "_")}  # sdists are named after the normalized project name
    if version:
        for name in names:
            for candidate in SDIST_DIR.glob(f"{name}-{version}.tar.gz"):
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
    found = sorted((p for name in names for p in SDIST_DIR.glob(f"{name}-{version or '*'}.tar.gz")),
                   key=lambda p: p.stat().st_mtime)
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


# -- docstring stripping, functions and queries: pipelines.eval_corpus (shared with `codemem eval`)

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
            stripped_files[path], functions = strip_file(path, files[path].decode("utf-8"), "python", len(corpus.functions))
        except (ValueError, SyntaxError):  # UnicodeDecodeError is a ValueError
            continue  # not valid Python 3 (none in the pinned sdists); left out of the corpus
        corpus.functions += functions
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

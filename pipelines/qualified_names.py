"""Qualified names as each language writes them (issue 19).

A symbol's global qualified name is its file's module, package or namespace, then its
file-local qualified name (``Class.method``, from the parser):

* Python: the dotted file path, as an import writes it: ``src/pkg/util.py`` → ``src.pkg.util``
  (``__init__`` dropped) → ``src.pkg.util.Session.request``.
* Java, C#: the package/namespace the file declares around the symbol (``ParsedSymbol.namespace``;
  nested C# namespaces joined): ``com.acme.billing.Invoice.total``,
  ``Acme.Billing.Invoice.Total``; none declared: the file-local name.
* Go: the package's import path, ``.``, then the names; a method is ``Receiver.Method`` with the
  receiver's base type (a pointer receiver without ``*``):
  ``github.com/acme/shop/billing.Invoice.Total``. The import path is the ``module`` line of the
  nearest ``go.mod`` above the file plus the directory below it; without one, the repo-relative
  directory (``internal/billing``); a file at the root without one: the names alone.
* Rust: the module path from the crate root, ``::`` throughout: ``src/lib.rs``/``src/main.rs`` →
  ``crate``, ``src/a/b.rs`` or ``src/a/b/mod.rs`` → ``crate::a::b``; inline ``mod x { }``
  blocks follow, then a method's type: ``crate::a::b::Type::method``. The crate root is the
  nearest ``Cargo.toml`` directory (without one, the first ``src`` folder of the path); a file
  of the crate outside ``src/`` (``tests/it.rs``) is named by its path: ``tests::it``.
* JavaScript, TypeScript: the module as an import path writes it, repo-relative, without the
  extension and a trailing ``/index``, ``/`` kept; then ``.``, a TypeScript ``namespace`` if
  any, and the names: ``src/utils/date.formatDate``.
* C, C++: no file part (a C function is called by its bare name wherever it is declared); the
  C++ namespaces around the symbol, then its class, ``::`` throughout: ``add``,
  ``geo::Shape::area``. An out-of-line member definition written ``void geo::Shape::area()``
  outside the namespace block gets the same name as its in-class declaration in the header.

The name of the earlier releases, the dotted file path plus the file-local name
(``src.main.java.com.acme.billing.Invoice.Invoice.total``), stays in each payload, manifest row
and graph node as ``path_qualified_name``, and lookups by qualified name accept it too.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache
from pathlib import Path, PurePosixPath

_MODULE_TAILS = {"__init__", "index", "mod", "lib", "main"}
_GO_MODULE = re.compile(r"^\s*module\s+\"?([^\s\"]+)", re.MULTILINE)
_ECMASCRIPT = frozenset({"javascript", "typescript", "tsx"})
_NAMESPACED = frozenset({"java", "csharp", "c", "cpp"})
_COLON_SEPARATED = frozenset({"rust", "c", "cpp"})


def module_name(path: str) -> str:
    """Dotted module name of a file: ``src/pkg/util.py`` → ``src.pkg.util`` (the path-based form).

    ``PurePosixPath(path).with_suffix("").parts`` joined, in string operations (a resolution
    names every file of the repository: 55,000 for the Linux kernel, 1.5 s through pathlib)."""
    parts = [part for part in path.split("/") if part and part != "."]
    if parts:
        name = parts[-1]
        dot = name.rfind(".")
        if 0 < dot < len(name) - 1:  # pathlib's suffix: not a leading dot, not a trailing one
            parts[-1] = name[:dot]
    if path.startswith("/"):
        parts.insert(0, "//" if path.startswith("//") and not path.startswith("///") else "/")
    if len(parts) > 1 and parts[-1] in _MODULE_TAILS:
        parts.pop()
    return ".".join(parts)


def path_qualified_name(path: str, local_name: str) -> str:
    """The path-based global name of a symbol (every language's form before issue 19)."""
    module = module_name(path)
    return f"{module}.{local_name}" if module else local_name


def file_module(path: str, language: str, root: Path | None = None) -> str:
    """The module part of the qualified names of a file's symbols (``""`` for Java, C#, C and
    C++, whose symbols carry their namespace; see the module docstring for each form).

    Args:
        path: The repo-relative POSIX path.
        language: The language the file was parsed as.
        root: The project root, where ``go.mod``/``Cargo.toml`` are looked for (None: not looked for).
    """
    if language == "go":
        return _go_import_path(posixpath.dirname(path), root)
    if language == "rust":
        return _rust_module(path, root)
    if language in _ECMASCRIPT:
        return _import_path(path)
    if language in _NAMESPACED:
        return ""
    return module_name(path)


def language_qualified_name(language: str, module: str, namespace: str | None, local_name: str) -> str:
    """A symbol's qualified name as its language writes it.

    Args:
        language: The file's language.
        module: ``file_module`` of the file.
        namespace: The symbol's declared namespace (``ParsedSymbol.namespace``), if any.
        local_name: The file-local qualified name (``Class.method``).
    """
    if language in _COLON_SEPARATED:
        return "::".join(part for part in (module, namespace, local_name.replace(".", "::")) if part)
    return ".".join(part for part in (module, namespace, local_name) if part)


def clear_module_cache() -> None:
    """Forget the ``go.mod``/``Cargo.toml`` lookups (at the start of an index run: they may have changed)."""
    _marker_dir.cache_clear()
    _go_module_line.cache_clear()


def _import_path(path: str) -> str:
    """``src/utils/date.ts`` → ``src/utils/date``; ``src/ui/index.tsx`` → ``src/ui``; ``x.d.ts`` → ``x``."""
    stem = str(PurePosixPath(path).with_suffix(""))
    stem = stem.removesuffix(".d")
    head, _, tail = stem.rpartition("/")
    return head if head and tail == "index" else stem


@lru_cache(maxsize=4096)
def _marker_dir(root: str, directory: str, marker: str) -> str | None:
    """The repo-relative directory nearest above ``directory`` (itself included, up to the root)
    that holds the file ``marker``, or None. Cached per directory: one stat per folder and run."""
    if (Path(root, directory) / marker).is_file():
        return directory
    if not directory:
        return None
    return _marker_dir(root, posixpath.dirname(directory), marker)


@lru_cache(maxsize=256)
def _go_module_line(go_mod: str) -> str | None:
    """The module path a ``go.mod`` declares, or None (unreadable, or no ``module`` line)."""
    try:
        text = Path(go_mod).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _GO_MODULE.search(text)
    return found.group(1) if found else None


def _go_import_path(directory: str, root: Path | None) -> str:
    """The import path of the Go package in ``directory`` (repo-relative)."""
    module_dir = _marker_dir(str(root), directory, "go.mod") if root is not None else None
    module = _go_module_line(str(Path(root, module_dir, "go.mod"))) if module_dir is not None else None
    if module is None:
        return directory
    below = posixpath.relpath(directory or ".", module_dir or ".")
    return module if below == "." else f"{module}/{below}"


def _rust_module(path: str, root: Path | None) -> str:
    """``crate::a::b`` for ``src/a/b.rs`` of a crate; a path-based ``tests::it`` outside ``src/``."""
    crate = _marker_dir(str(root), posixpath.dirname(path), "Cargo.toml") if root is not None else None
    relative = posixpath.relpath(path, crate) if crate else path
    parts = list(PurePosixPath(relative).with_suffix("").parts)
    if crate is None and "src" in parts[:-1]:
        parts = parts[parts.index("src"):]
    in_source = len(parts) > 1 and parts[0] == "src"
    if in_source:
        parts[0] = "crate"
    if len(parts) > 1 and (parts[-1] == "mod" or (in_source and len(parts) == 2 and parts[-1] in ("lib", "main"))):
        parts.pop()
    return "::".join(parts)

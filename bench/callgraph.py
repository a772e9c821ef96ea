"""Call-graph recall and precision against Python's own ``ast`` (issue 19, item 2).

Usage: ``python -m bench.callgraph [--packages click structlog tenacity] [--json]``.

Corpora: installed pure-Python packages nobody here wrote and nothing here was tuned on (by
default click, structlog and tenacity, copied from this environment's site-packages, so the
versions are the ones ``pip`` installed; the report names them). Each is indexed by the plain
indexer (no dense vectors) in a temporary project; codemem's ``CALLS`` edges are read from the
manifest.

Ground truth, from ``ast``, for every call inside a function or method (module-level code has no
caller and is left out) whose target Python itself determines statically:

- **same module**: ``f()`` for a function or class ``f`` defined at the module's top level, a
  nested function of the caller, ``self.m()`` / ``cls.m()`` for a method ``m`` of the caller's own
  class, ``C.m()`` for a method of a class ``C`` of the module;
- **across modules**: ``f()`` after ``from pkg.mod import f`` (relative imports included, aliases
  followed), ``mod.f()`` after ``import pkg.mod as mod`` or ``from pkg import mod``;
- **inherited**: ``self.m()`` where ``m`` is not defined in the caller's class but in a base class
  of it (found through the same imports), in the same module or another.

Calls on objects whose type needs inference (``x.m()``), calls through variables and calls into
other packages are not judged. Recall: the share of ground-truth (caller, target) pairs that
codemem has as a ``CALLS`` edge, per kind. Precision: among codemem's edges whose call site (the
caller and the line) has a ground-truth target, the share pointing at one; edges from call sites
``ast`` cannot judge are counted apart. Targets (issue 19): recall ≥ 0.95 at precision ≥ 0.95
within a module, ≥ 0.9 across modules.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PACKAGES = ("click", "structlog", "tenacity")
TARGETS = {"same_module": (0.95, 0.95), "across_modules": (0.90, 0.95)}
"""kind → (recall, precision) targets; inherited calls are reported with the across-module ones."""

Symbol = tuple[str, str]
"""(repo-relative path, file-local qualified name such as ``Class.method``)."""


@dataclass
class ModuleFacts:
    """What one module defines and imports, as ``ast`` sees it."""

    path: str
    top: set[str] = field(default_factory=set)
    """Top-level functions and classes."""
    methods: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Class (file-local qualified name) → its method names."""
    bases: dict[str, list[ast.expr]] = field(default_factory=dict)
    imported: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Local name → (module dotted name, imported attribute or None for a module)."""


def _module_of(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str | None, level: int, importer: str) -> str:
    if not level:
        return module or ""
    package = _module_of(importer).split(".")
    if not importer.endswith("__init__.py"):
        package = package[:-1]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*base, module] if module else base)


def module_facts(root: Path, path: str, tree: ast.Module) -> ModuleFacts:
    """The module's top-level names, classes' methods and bases, and imports."""
    facts = ModuleFacts(path)
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            facts.top.add(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    facts.imported[alias.asname] = (alias.name, None)
                else:
                    facts.imported[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node.module, node.level, path)
            for alias in node.names:
                facts.imported[alias.asname or alias.name] = (source, alias.name)

    def classes(body: list[ast.stmt], prefix: str) -> None:
        for node in _top_level(body):
            if isinstance(node, ast.ClassDef):
                name = f"{prefix}{node.name}"
                facts.bases[name] = node.bases
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        facts.methods[name].add(item.name)
                classes(node.body, f"{name}.")

    classes(tree.body, "")
    return facts


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a body, those of its ``if``/``try``/``with`` blocks included (a
    definition made only on some platform or Python version is still a definition)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            out += _top_level([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                               *(s for h in getattr(node, "handlers", []) for s in h.body)])
    return out


class Truth:
    """The ground-truth call edges of a package, by kind, and the targets per call site."""

    def __init__(self, root: Path, paths: list[str]) -> None:
        self.root = root
        self.trees = {p: ast.parse((root / p).read_text(encoding="utf-8", errors="replace")) for p in paths}
        self.facts = {p: module_facts(root, p, t) for p, t in self.trees.items()}
        self.by_module = {_module_of(p): p for p in paths}
        self.edges: dict[str, set[tuple[Symbol, Symbol]]] = defaultdict(set)
        self.sites: dict[tuple[Symbol, int], set[Symbol]] = defaultdict(set)
        self.unjudged: dict[tuple[Symbol, int], set[str]] = defaultdict(set)
        """Names called at a call site whose target ``ast`` cannot tell (an edge to one of them is not judged)."""
        for path, tree in self.trees.items():
            self._walk(path, tree.body, "", None)

    # -- resolution of names to definitions -------------------------------------------------
    def _attribute_of_module(self, module: str, name: str) -> Symbol | None:
        """``name`` defined at the top of ``module`` (or re-exported there by an import)."""
        path = self.by_module.get(module)
        if path is None:
            return None
        facts = self.facts[path]
        if name in facts.top:
            return (path, name)
        if name in facts.imported:
            source, attribute = facts.imported[name]
            if attribute is not None and (source, attribute) != (module, name):
                return self._attribute_of_module(source, attribute)
        return None

    def _imported(self, path: str, name: str) -> Symbol | None:
        """What the local name ``name`` of module ``path`` refers to through its imports."""
        if name not in self.facts[path].imported:
            return None
        source, attribute = self.facts[path].imported[name]
        if attribute is None:
            return None
        found = self._attribute_of_module(source, attribute)
        if found is None and f"{source}.{attribute}" in self.by_module:
            return None  # a module, not a callable
        return found

    def _module_alias(self, path: str, name: str) -> str | None:
        if name not in self.facts[path].imported:
            return None
        source, attribute = self.facts[path].imported[name]
        dotted = source if attribute is None else f"{source}.{attribute}"
        return dotted if dotted in self.by_module else None

    def _class(self, path: str, expr: ast.expr) -> Symbol | None:
        """The class a base-class expression names."""
        if isinstance(expr, ast.Name):
            if expr.id in self.facts[path].methods:
                return (path, expr.id)
            return self._imported(path, expr.id)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            module = self._module_alias(path, expr.value.id)
            return self._attribute_of_module(module, expr.attr) if module else None
        return None

    def _inherited(self, owner: Symbol, name: str, seen: set[Symbol] | None = None) -> Symbol | None:
        """``name`` defined in a base class of ``owner`` (depth first, as the MRO mostly goes)."""
        seen = seen or set()
        path, cls = owner
        for base in self.facts[path].bases.get(cls, []):
            found = self._class(path, base)
            if found is None or found in seen or found[1] not in self.facts[found[0]].methods:
                continue
            seen.add(found)
            if name in self.facts[found[0]].methods[found[1]]:
                return (found[0], f"{found[1]}.{name}")
            deeper = self._inherited(found, name, seen)
            if deeper is not None:
                return deeper
        return None

    def _target(self, path: str, call: ast.Call, owner: str | None, nested: set[str], scope: str) -> tuple[str, Symbol, Symbol | None] | None:
        """(kind, the target, another target Python may run instead or None), or None when ``ast``
        cannot tell."""
        func = call.func
        facts = self.facts[path]
        if isinstance(func, ast.Name):
            if func.id in nested:
                return "same_module", (path, f"{scope}.{func.id}"), None
            found = self._imported(path, func.id)
            if func.id in facts.top:  # a conditional import of the same name is the other branch
                return "same_module", (path, func.id), found
            return ("across_modules", found, None) if found is not None else None
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return None
        head, name = func.value.id, func.attr
        if head in ("self", "cls") and owner is not None:
            if name in facts.methods.get(owner, set()):
                return "same_module", (path, f"{owner}.{name}"), None
            found = self._inherited((path, owner), name)
            return ("inherited", found, None) if found is not None else None
        if head in facts.methods and name in facts.methods[head]:
            return "same_module", (path, f"{head}.{name}"), None
        module = self._module_alias(path, head)
        if module is not None:
            found = self._attribute_of_module(module, name)
            return ("across_modules", found, None) if found is not None else None
        return None

    def _walk(self, path: str, body: list[ast.stmt], prefix: str, owner: str | None) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                self._walk(path, node.body, f"{prefix}{node.name}.", f"{prefix}{node.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scope = f"{prefix}{node.name}"
                nested = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
                for call in _calls_of(node):
                    found = self._target(path, call, owner, nested, scope)
                    site = ((path, scope), call.lineno)
                    if found is None:
                        func = call.func
                        self.unjudged[site].add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
                    elif found[1] != (path, scope):
                        kind, target, also = found
                        self.edges[kind].add(((path, scope), target))
                        self.sites[site].add(target)
                        if also is not None:
                            self.sites[site].add(also)
                self._walk(path, node.body, f"{scope}.", None)


def _calls_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Call]:
    """The calls the function's body makes (lambdas in it included; not its decorators, default
    values or annotations, which run where the function is defined, and not the functions or
    classes nested in it)."""
    found: list[ast.Call] = []
    stack: list[ast.AST] = [*function.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def codemem_edges(root: Path) -> tuple[set[tuple[Symbol, Symbol]], dict[tuple[Symbol, Symbol], int]]:
    """codemem's CALLS edges over ``root`` (indexed here) as symbol pairs, with their line."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    service = CodeMemService(Settings(project_root=root, dense_embeddings=False))
    try:
        service.index(IndexInput(embed=False))
        # a name defined several times in a file (overloads) is one symbol to ``ast``: ``f#2`` is ``f``
        symbols = {s.id: (s.path, s.local_name.split("#")[0]) for s in service.ctx.manifest.all_symbols()}
        rows = service.ctx.manifest.resolved_edges_of_type("CALLS")
    finally:
        service.close()
    edges: set[tuple[Symbol, Symbol]] = set()
    lines: dict[tuple[Symbol, Symbol], int] = {}
    for source, target, properties in rows:
        if source in symbols and target in symbols:
            pair = (symbols[source], symbols[target])
            edges.add(pair)
            lines[pair] = properties.get("line_number") or 0
    return edges, lines


def measure(package: str, work: Path) -> dict:
    """Recall per kind and precision for one installed package."""
    source = Path(__import__(package).__file__).parent
    root = work / package
    shutil.copytree(source, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    paths = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    truth = Truth(root, paths)
    edges, lines = codemem_edges(root)
    distributions = importlib.metadata.packages_distributions().get(package, [package])
    result: dict = {"package": package, "version": importlib.metadata.version(distributions[0]), "files": len(paths)}
    for kind in ("same_module", "across_modules", "inherited"):
        wanted = truth.edges[kind]
        found = wanted & edges
        result[kind] = {"truth": len(wanted), "found": len(found), "recall": round(len(found) / len(wanted), 3) if wanted else None,
                        "missed": sorted(f"{c[0]}:{c[1]} -> {t[0]}:{t[1]}" for c, t in wanted - edges)[:15]}
    judged = right = 0
    wrong: list[str] = []
    for pair in edges:
        site = (pair[0], lines[pair])
        targets = truth.sites.get(site)
        if not targets or pair[1][1].rsplit(".", 1)[-1] in truth.unjudged.get(site, set()):
            continue
        judged += 1
        if pair[1] in targets:
            right += 1
        else:
            wrong.append(f"{pair[0][0]}:{pair[0][1]} line {lines[pair]} -> {pair[1][0]}:{pair[1][1]} (ast: {min(targets)[1]})")
    same = {p for p in edges if p[0][0] == p[1][0]}
    result["precision"] = {"judged": judged, "right": right, "value": round(right / judged, 3) if judged else None,
                           "unjudged_edges": len(edges) - judged, "edges": len(edges), "same_file_edges": len(same),
                           "wrong": sorted(wrong)[:15]}
    return result


def _verdict(value: float | None, target: float) -> str:
    return "n/a" if value is None else ("PASS" if value >= target else "FAIL")


def main(argv: list[str] | None = None) -> int:
    """Measure every package and print recall and precision against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="+", default=list(DEFAULT_PACKAGES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="Print what was missed and what was wrong.")
    args = parser.parse_args(argv)
    os.environ.setdefault("CODEMEM_DENSE_EMBEDDINGS", "false")
    work = Path(tempfile.mkdtemp(prefix="codemem-callgraph-"))
    try:
        results = [measure(package, work) for package in args.packages]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        for kind in ("same_module", "across_modules", "inherited"):
            totals[kind][0] += r[kind]["found"]
            totals[kind][1] += r[kind]["truth"]
        totals["precision"][0] += r["precision"]["right"]
        totals["precision"][1] += r["precision"]["judged"]
    print("package               files  same-module recall   across-module recall   inherited recall   precision (judged)")
    for r in results:
        cells = [f"{r[k]['recall']} ({r[k]['found']}/{r[k]['truth']})" for k in ("same_module", "across_modules", "inherited")]
        p = r["precision"]
        print(f"{r['package'] + ' ' + r['version']:<21} {r['files']:>5}  {cells[0]:<19}  {cells[1]:<21}  {cells[2]:<17}  {p['value']} ({p['right']}/{p['judged']}; {p['unjudged_edges']} unjudged)")
        if args.verbose:
            for kind in ("same_module", "across_modules", "inherited"):
                for line in r[kind]["missed"]:
                    print(f"    missed {kind}: {line}")
            for line in p["wrong"]:
                print(f"    wrong: {line}")
    rate = {k: (v[0] / v[1] if v[1] else None) for k, v in totals.items()}
    print()
    for kind, (recall_target, precision_target) in TARGETS.items():
        print(f"{kind.replace('_', ' ')}: recall {rate[kind]:.3f} (target ≥ {recall_target}) {_verdict(rate[kind], recall_target)}")
    print(f"inherited: recall {rate['inherited']:.3f} (target ≥ {TARGETS['across_modules'][0]}) {_verdict(rate['inherited'], TARGETS['across_modules'][0])}")
    print(f"precision over judged edges: {rate['precision']:.3f} (target ≥ 0.95) {_verdict(rate['precision'], 0.95)}")
    if args.json:
        print(json.dumps(results, indent=2))
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "callgraph.json").write_text(json.dumps({"results": results, "totals": rate}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Imports run one way, with no circle: ``query_server/ → pipelines/ → resources/``.

Every module of the three floors is parsed with ``ast``; every import counts, those inside
functions included (an import hidden in a function is still a dependency), relative imports
resolved against the importing module. An import of a higher floor fails, and so does a cycle
between modules (a strongly connected component of more than one module). ``bench/`` and
``tests/`` may import anything; nothing in the floors may import them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FLOORS = {"resources": 0, "pipelines": 1, "query_server": 2}
"""Each top-level package's floor: a module may import its own floor and the ones below."""
OUTSIDE_THE_PRODUCT = ("bench", "tests")

KNOWN_CYCLES: dict[str, str] = {}
"""Cycles that exist and have an owner, by the module family they stay within (the module, its
``_*`` siblings and its submodules); each says why and when it goes."""


def known_cycle(cycle: set[str]) -> str | None:
    """The KNOWN_CYCLES family that holds every module of ``cycle``, if one does."""
    for family in KNOWN_CYCLES:
        if all(m == family or m.startswith((family + "_", family + ".")) for m in cycle):
            return family
    return None


def module_name(path: Path) -> str:
    """``pipelines/dagster/run.py`` → ``pipelines.dagster.run``; a package is its ``__init__``."""
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_modules() -> dict[str, Path]:
    """Every module of the three floors, by dotted name."""
    return {module_name(path): path for package in FLOORS for path in sorted((REPO_ROOT / package).rglob("*.py"))}


def imported_names(module: str, path: Path) -> Iterator[str]:
    """The dotted names ``module`` imports, anywhere in its file (relative ones made absolute).

    ``from a.b import c`` yields ``a.b.c`` as well as ``a.b``: ``c`` may be a module or a name
    in ``a.b``, and ``dependencies`` keeps whichever is a module.
    """
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield source
            yield from (f"{source}.{alias.name}" for alias in node.names if alias.name != "*")


def owning_module(name: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in (None: outside the floors)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def dependencies(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other modules of the floors."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {owning_module(name, modules) for name in imported_names(module, path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def strongly_connected_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on deep import chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_the_scan_sees_every_floor_and_function_level_imports() -> None:
    modules = floor_modules()
    assert {m.split(".")[0] for m in modules} == set(FLOORS)
    graph = dependencies(modules)
    # the service imports the in-process Dagster run inside a method: it must count
    assert "pipelines.dagster.run" in graph["query_server.service"]
    assert "resources.settings" in graph["pipelines.dagster.project"]


def test_no_module_imports_a_higher_floor() -> None:
    upward = [
        f"{module} (floor {FLOORS[module.split('.')[0]]}) imports {target} (floor {FLOORS[target.split('.')[0]]})"
        for module, targets in sorted(dependencies(floor_modules()).items())
        for target in sorted(targets)
        if FLOORS[target.split(".")[0]] > FLOORS[module.split(".")[0]]
    ]
    assert upward == [], "imports must run query_server → pipelines → resources:\n" + "\n".join(upward)


def test_no_floor_imports_bench_or_tests() -> None:
    offending = [
        f"{module} imports {name}"
        for module, path in sorted(floor_modules().items())
        for name in sorted(set(imported_names(module, path)))
        if name.split(".")[0] in OUTSIDE_THE_PRODUCT
    ]
    assert offending == []


def test_no_import_cycle_between_modules() -> None:
    cycles = [c for c in strongly_connected_components(dependencies(floor_modules())) if len(c) > 1]
    unknown = [sorted(c) for c in cycles if known_cycle(c) is None]
    assert unknown == [], f"import cycles (each module of a cycle imports another of it): {unknown}"


def test_the_known_cycles_still_exist() -> None:
    """An entry of KNOWN_CYCLES whose cycle is gone must go too (it would hide a new one)."""
    cycles = [c for c in strongly_connected_components(dependencies(floor_modules())) if len(c) > 1]
    gone = sorted(set(KNOWN_CYCLES) - {known_cycle(c) for c in cycles})
    assert gone == [], f"these cycles are fixed: remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(sorted(c) for c in strongly_connected_components(graph) if len(c) > 1) == [["a", "b", "c"]]


def test_a_first_memory_call_imports_no_code_tool_design_layer_or_parser() -> None:
    """What `codemem mcp` imports before it answers its first calls (issue 18: a first memory_search
    waits only for what it needs): the code tools, the design layer, the parsers, the indexer and
    the YAML and gitignore libraries load when a call needs them."""
    import subprocess
    import sys

    lazy = ("tree_sitter", "pipelines.parsing", "pipelines.indexer", "pipelines.dagster.project", "query_server.code.search",
            "query_server.design.service", "yaml", "pathspec", "query_server.cli.code", "rich.progress")
    script = ("import sys, query_server.cli.servers, query_server.ownership, query_server.early_calls, query_server.warm_start, "
              "query_server.hooks.relay_server, query_server.shutdown, query_server.telemetry, resources.embeddings.local, "
              "resources.vectors.factory, resources.graph.factory; "
              f"print([m for m in {lazy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

"""Cross-file resolution: CALLS, IMPORTS, EXTENDS and IMPLEMENTS edges between files.

Runs after the per-file work over everything the manifest holds. A name is linked only when it
resolves with some confidence: the same class (``self.x``/``this.x``), the same file, an
imported name or module, or a name that is unique in the repository. Ambiguous names stay
unlinked rather than linked wrongly.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from resources.manifest import SymbolRow
from pipelines.qualified_names import module_name
from pipelines.records import file_id, module_id
from resources.schemas.code import CLASS_KINDS

_GENERIC = re.compile(r"<.*>|\[.*\]|\(.*\)")
_SEPARATORS = re.compile(r"::|\.|/|\\")
_CONSTRUCTOR_CALLS = frozenset({"this", "super"})
"""Java's explicit constructor calls, as the parser writes their callee."""
_SELF_PREFIXES = ("self.", "this.", "cls.", "base.", "super.", "Self::", "self::")
_SOURCE_EXTENSIONS = (".py", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".go", ".rs", ".java", ".cs")

Edge = tuple[str, str, str]  # (source, type, target)


@dataclass(slots=True)
class Resolution:
    """The resolved edges (with properties) and the external modules they point to."""

    edges: dict[Edge, dict[str, Any]] = field(default_factory=dict)
    external_modules: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (name, language)


def _base_name(written: str) -> str:
    cleaned = _GENERIC.sub("", written).strip()
    parts = [p for p in _SEPARATORS.split(cleaned) if p]
    return parts[-1] if parts else cleaned


class _ModuleIndex:
    """Maps import strings to repository files."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = set(paths)
        self.by_dotted: dict[str, set[str]] = defaultdict(set)
        self.by_dir: dict[str, set[str]] = defaultdict(set)
        for path in paths:
            dotted = module_name(path).split(".")
            for i in range(len(dotted)):
                self.by_dotted[".".join(dotted[i:])].add(path)
            parent = PurePosixPath(path).parent.as_posix()
            parts = parent.split("/")
            for i in range(len(parts)):
                self.by_dir["/".join(parts[i:])].add(path)

    def resolve(self, importer: str, language: str, module: str, items: list[str]) -> set[str]:
        module = module.strip()
        if not module:
            return set()
        base = PurePosixPath(importer).parent
        if language in {"javascript", "typescript", "tsx"} and module.startswith("."):
            target = (base / module).as_posix()
            target = _normalize(target)
            found = {target} & self.paths
            for ext in _SOURCE_EXTENSIONS:
                found |= {target + ext, f"{target}/index{ext}"} & self.paths
            return found
        if language == "python" and module.startswith("."):
            level = len(module) - len(module.lstrip("."))
            anchor = base
            for _ in range(level - 1):
                anchor = anchor.parent
            rest = module.lstrip(".")
            candidates = []
            if rest:
                candidates.append(_normalize((anchor / rest.replace(".", "/")).as_posix()))
            else:
                candidates += [_normalize((anchor / item).as_posix()) for item in items]
            found: set[str] = set()
            for candidate in candidates:
                found |= {candidate + ".py", candidate + "/__init__.py"} & self.paths
            return found
        if language == "go":
            return set(self.by_dir.get(module.strip("/"), set())) or set(
                self.by_dir.get(module.rsplit("/", 1)[-1], set())
            )
        key = module.replace("::", ".").replace("/", ".")
        for prefix in ("crate.", "self.", "super."):
            if key.startswith(prefix):
                key = key[len(prefix):]
        found = set(self.by_dotted.get(key, set()))
        if not found and language in {"java", "rust", "python"}:
            for item in items:
                found |= self.by_dotted.get(f"{key}.{item}", set())
        return found


def _normalize(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _constructor_call(callee: str, own: SymbolRow | None, bases: dict[str, list[SymbolRow]]) -> SymbolRow | None:
    """The class a constructor's ``this(...)`` (its own) or ``super(...)`` (the class it extends) runs
    a constructor of; the class stands for its constructors, as for ``new T()``."""
    if own is None or callee == "this":
        return own
    return next((base for base in bases.get(own.id, []) if base.kind == "class"), None)


def _definition_order(symbol: SymbolRow) -> int:
    """1 for a name's first definition in a file, n for its ``#n``-th (overloads, redefinitions)."""
    _, _, count = symbol.local_name.rpartition("#")
    return int(count) if count.isdigit() else 1


def resolve(symbols: list[SymbolRow], refs: dict[str, tuple[str, dict[str, Any]]]) -> Resolution:
    """Compute every cross-file edge of the repository.

    Args:
        symbols: All symbols from the manifest.
        refs: Per file, its language and references (``imports``, ``calls``, ``types``).

    Returns:
        The edges keyed by (source, type, target), and the external modules referenced.
    """
    result = Resolution()
    by_id = {s.id: s for s in symbols}
    by_name: dict[str, list[SymbolRow]] = defaultdict(list)
    by_path_name: dict[tuple[str, str], list[SymbolRow]] = defaultdict(list)
    classes: dict[tuple[str, str], SymbolRow] = {}
    for s in symbols:
        by_name[s.name].append(s)
        by_path_name[(s.path, s.name)].append(s)
        if s.kind in CLASS_KINDS:
            classes[(s.path, s.local_name)] = s
    modules = _ModuleIndex(list(refs))
    bases: dict[str, list[SymbolRow]] = defaultdict(list)
    """Class id → the classes it extends or implements, as resolved."""

    def pick(candidates: list[SymbolRow], want_class: bool | None = None) -> SymbolRow | None:
        if want_class is not None:
            candidates = [c for c in candidates if (c.kind in CLASS_KINDS) == want_class]
        types = [c for c in candidates if c.kind in CLASS_KINDS]
        if len(types) == 1 and all(c is types[0] or (c.kind == "constructor" and c.path == types[0].path
                                   and c.container == types[0].local_name) for c in candidates):
            return types[0]  # `new T()`: the class and its constructors share the name; the class stands for them
        if len(candidates) == 1:
            return candidates[0]
        if candidates and len({(c.path, c.qualified_name) for c in candidates}) == 1:
            # one name defined several times in one place (typing overloads, one definition per
            # platform): the last definition is the one that runs
            return max(candidates, key=_definition_order)
        return None

    def member(path: str, owner: str, name: str) -> SymbolRow | None:
        """Method ``name`` of class ``owner`` (file-local name, in ``path``), or of the nearest
        class it inherits from (breadth first through the resolved EXTENDS/IMPLEMENTS)."""
        own = pick([s for s in by_path_name.get((path, name), []) if s.container == owner])
        start = classes.get((path, owner))
        if own is not None or start is None:
            return own
        seen = {start.id}
        queue = list(bases.get(start.id, []))
        while queue:
            base = queue.pop(0)
            if base.id in seen:
                continue
            seen.add(base.id)
            found = pick([s for s in by_path_name.get((base.path, name), []) if s.container == base.local_name])
            if found is not None:
                return found
            queue += bases.get(base.id, [])
        return None

    lookups = {}
    for path, (language, file_refs) in refs.items():
        imported_names: dict[str, set[str]] = defaultdict(set)  # local name -> files
        source_file = file_id(path)
        for imp in file_refs.get("imports", []):
            targets = modules.resolve(path, language, imp["module"], imp.get("items", []))
            props = {"items": list(imp.get("items", [])), "line_number": imp.get("line")}
            if targets:
                for target in targets:
                    if target != path:
                        result.edges.setdefault((source_file, "IMPORTS", file_id(target)), props)
            else:
                mid = module_id(imp["module"], language)
                result.external_modules[mid] = (imp["module"], language)
                result.edges.setdefault((source_file, "IMPORTS", mid), props)
            for item in imp.get("items", []):
                if item != "*":
                    imported_names[item].update(targets)
            head = imp.get("alias") or _base_name(imp["module"])
            imported_names[head].update(targets)

        def lookup(
            name: str, head: str | None, want_class: bool | None, path: str = path,
            imported_names: dict[str, set[str]] = imported_names, language: str = language,
        ) -> SymbolRow | None:
            def named(candidates: list[SymbolRow]) -> list[SymbolRow]:
                # a bare Python name never reaches a method: methods are not in a module's scope
                if head is None and language == "python":
                    return [c for c in candidates if c.kind not in ("method", "constructor")]
                return candidates

            local = pick(named(by_path_name.get((path, name), [])), want_class)
            if local is not None:
                return local
            for key in (name, head):
                if key and key in imported_names:
                    found = [s for p in imported_names[key] for s in by_path_name.get((p, name), [])]
                    chosen = pick(named(found), want_class)
                    if chosen is not None:
                        return chosen
            return pick(by_name.get(name, []), want_class)

        lookups[path] = lookup
        for type_ref in file_refs.get("types", []):
            for relation, key in (("EXTENDS", "extends"), ("IMPLEMENTS", "implements")):
                for written in type_ref.get(key, []):
                    parent = lookup(_base_name(written), None, True)
                    if parent is not None and parent.id != type_ref["id"]:
                        result.edges.setdefault((type_ref["id"], relation, parent.id), {})
                        bases[type_ref["id"]].append(parent)

    for path, (_, file_refs) in refs.items():
        lookup = lookups[path]
        for call in file_refs.get("calls", []):
            caller = by_id.get(call.get("caller_id") or "")
            if caller is None:
                continue
            callee: str = call["callee"]
            name = call["callee_name"]
            parts = [p for p in _SEPARATORS.split(callee) if p]
            target = None
            if callee in _CONSTRUCTOR_CALLS and caller.kind == "constructor" and caller.container:
                target = _constructor_call(callee, classes.get((path, caller.container)), bases)
            elif callee.startswith(_SELF_PREFIXES) and caller.container:
                target = member(path, caller.container, name)
            if target is None and len(parts) == 1:  # a bare name: a function nested in the caller first
                target = pick([s for s in by_path_name.get((path, name), []) if s.container == caller.local_name])
            if target is None:
                target = lookup(name, parts[0] if len(parts) > 1 else None, None)
            if target is not None and target.id != caller.id:
                result.edges.setdefault(
                    (caller.id, "CALLS", target.id), {"line_number": call.get("line")}
                )
    return result

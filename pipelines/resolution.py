"""Cross-file resolution: CALLS, IMPORTS, EXTENDS and IMPLEMENTS edges between files.

Runs after the per-file work over everything the manifest holds. A name is linked only when it
resolves with some confidence: the same class (``self.x``/``this.x``), the same file, an
imported name or module, or a name that is unique in the repository. Ambiguous names stay
unlinked rather than linked wrongly. Java calls go through the receiver's declared type where the
source states it (``pipelines.java_types``); a type outside the repository links nothing. C and C++
follow ``#include``s, and link a call to a function's definition rather than its declaration
(``pipelines.c_family``).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from pipelines.c_family import C_FAMILY, Definitions, IncludeIndex, class_of, constructs, qualified_callee
from pipelines.java_types import OUTSIDE, UNKNOWN, JavaTypeNames, TypeRef
from pipelines.parsing.declared import UNSTATED, Receiver
from pipelines.parsing.hooks.java import receiver_of
from pipelines.qualified_names import module_name
from pipelines.records import file_id, module_id
from resources.manifest import SymbolRow
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS

_GENERIC = re.compile(r"<.*>|\[.*\]|\(.*\)")
_SEPARATORS = re.compile(r"::|->|\.|/|\\")
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


def base_name(written: str) -> str:
    """The simple name a type or module is written with (``pkg.Base<T>`` → ``Base``)."""
    cleaned = _GENERIC.sub("", written).strip()
    parts = [p for p in _SEPARATORS.split(cleaned) if p]
    return parts[-1] if parts else cleaned


class ModuleIndex:
    """Maps import strings to repository files."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = set(paths)
        self.includes = IncludeIndex(paths)

    @functools.cached_property
    def by_dotted(self) -> dict[str, set[str]]:
        """Files by every dotted suffix of their module name (built at the first import that is
        not an include: a resolution of C and C++ files alone never needs it)."""
        found: dict[str, set[str]] = defaultdict(set)
        for path in self.paths:
            dotted = module_name(path).split(".")
            for i in range(len(dotted)):
                found[".".join(dotted[i:])].add(path)
        return found

    @functools.cached_property
    def by_dir(self) -> dict[str, set[str]]:
        """Files by every suffix of their directory (Go's imports name a package's directory)."""
        found: dict[str, set[str]] = defaultdict(set)
        for path in self.paths:
            parts = PurePosixPath(path).parent.as_posix().split("/")
            for i in range(len(parts)):
                found["/".join(parts[i:])].add(path)
        return found

    def resolve(self, importer: str, language: str, module: str, items: list[str]) -> Set[str]:
        module = module.strip()
        if not module:
            return set()
        if language in C_FAMILY:
            return self.includes.resolve(importer, module)
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
            key = key.removeprefix(prefix)
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


def _implicit_super_calls(symbols: list[SymbolRow], bases: dict[str, list[SymbolRow]]) -> list[tuple[SymbolRow, SymbolRow]]:
    """Java classes that declare no constructor, each with the class it extends: the default
    constructor's body is ``super()`` (JLS 8.8.9), a call javac compiles though no source writes it."""
    constructed = {(s.path, s.container) for s in symbols if s.kind == "constructor"}
    pairs = []
    for s in symbols:
        if s.language == "java" and s.kind == "class" and (s.path, s.local_name) not in constructed:
            base = _constructor_call("super", s, bases)
            if base is not None:
                pairs.append((s, base))
    return pairs


def _definition_order(symbol: SymbolRow) -> int:
    """1 for a name's first definition in a file, n for its ``#n``-th (overloads, redefinitions)."""
    _, _, count = symbol.local_name.rpartition("#")
    return int(count) if count.isdigit() else 1


CallSource = Callable[[set[str] | None], Iterable[tuple[str, list[dict[str, Any]]]]]
"""Given the files in scope (None: every file), their calls file by file (``Manifest.calls_by_file``)."""


def resolve(
    symbols: list[SymbolRow], refs: dict[str, tuple[str, dict[str, Any]]], only: set[str] | None = None,
    calls: CallSource | None = None,
) -> Resolution:
    """Compute the cross-file edges of the repository.

    Args:
        symbols: All symbols from the manifest (or those a scope can reach:
            ``pipelines.resolution_scope.reachable_symbols``), in any order.
        refs: Per file, its language and references (``imports``, ``types``, and ``calls`` unless
            ``calls`` gives them).
        only: Compute only the edges that start in these files (``pipelines.resolution_scope``);
            every file's imports and bases are still read, as lookups rest on them. None: all.
        calls: Where the calls come from, a file at a time, when not from ``refs``: the calls
            are ~90% of the references, and are needed only one file at a time.

    Returns:
        The edges keyed by (source, type, target), and the external modules the computed
        edges reference.
    """
    result = Resolution()
    symbols = sorted(symbols, key=lambda s: (s.path, s.id))  # where a name is defined twice, the one kept must not depend on the read
    by_id = {s.id: s for s in symbols}
    by_name: dict[str, list[SymbolRow]] = defaultdict(list)
    by_path_name: dict[tuple[str, str], list[SymbolRow]] = defaultdict(list)
    classes: dict[tuple[str, str], SymbolRow] = {}
    c_classes: dict[str, SymbolRow] = {}
    """C/C++ types by qualified name (a class's members may be defined in another file)."""
    c_by_name: dict[str, list[SymbolRow]] = defaultdict(list)
    """C/C++ symbols by name: a C/C++ name is looked up among them only, and only others' among the rest."""
    for s in symbols:
        by_name[s.name].append(s)
        by_path_name[(s.path, s.name)].append(s)
        if s.language in C_FAMILY:
            c_by_name[s.name].append(s)
        if s.kind in CLASS_KINDS:
            classes[(s.path, s.local_name)] = s
            if s.language in C_FAMILY:
                c_classes.setdefault(s.qualified_name, s)
    modules = ModuleIndex(list(refs))
    includes: dict[str, set[str]] = defaultdict(set)
    """C/C++ file → the repository files it includes."""
    definitions = Definitions(symbols, {i for _, r in refs.values() for i in r.get("declarations", [])}, includes)
    bases: dict[str, list[SymbolRow]] = defaultdict(list)
    """Class id → the classes it extends or implements, as resolved."""
    field_types: dict[str, dict[str, str]] = {}
    """Class id → its fields' declared types as written (Java)."""

    def pick(candidates: list[SymbolRow], want_class: bool | None = None) -> SymbolRow | None:
        if definitions.declared:  # C/C++: a definition rather than its declaration
            candidates = definitions.prefer_definitions(candidates)
        if want_class is not None:
            candidates = [c for c in candidates if (c.kind in CLASS_KINDS) == want_class]
        types = [c for c in candidates if c.kind in CLASS_KINDS]
        if len(types) == 1 and all(c is types[0] or (c.kind == "constructor" and c.path == types[0].path
                                   and c.container == types[0].local_name) or constructs(c, types[0]) for c in candidates):
            return types[0]  # `new T()`: the class and its constructors share the name; the class stands for them
        if len(candidates) == 1:
            return candidates[0]
        if candidates and len({(c.path, c.qualified_name) for c in candidates}) == 1:
            # one name defined several times in one place (typing overloads, one definition per
            # platform): the last definition is the one that runs
            return max(candidates, key=_definition_order)
        return None

    def named_anywhere(name: str, language: str) -> list[SymbolRow]:
        """Every symbol called ``name`` that a file of ``language`` can reach by name: C and C++
        link among themselves (libc's ``memmove()`` is not a Python ``FFI.memmove``)."""
        if not c_by_name:
            return by_name.get(name, [])
        if language in C_FAMILY:
            return c_by_name.get(name, [])
        return [s for s in by_name.get(name, []) if s.language not in C_FAMILY]

    def ancestry(start: SymbolRow) -> list[SymbolRow]:
        """A class, then the classes it inherits from, breadth first through the resolved
        EXTENDS/IMPLEMENTS."""
        order: list[SymbolRow] = []
        seen: set[str] = set()
        queue = [start]
        while queue:
            cls = queue.pop(0)
            if cls.id not in seen:
                seen.add(cls.id)
                order.append(cls)
                queue += bases.get(cls.id, [])
        return order

    def member(path: str, owner: str, name: str, inherited_only: bool = False) -> SymbolRow | None:
        """Method ``name`` of class ``owner`` (file-local name, in ``path``), or of the nearest
        class it inherits from; only the latter when ``inherited_only`` (``super.m()``)."""
        own = None if inherited_only else pick([s for s in by_path_name.get((path, name), []) if s.container == owner])
        start = classes.get((path, owner))
        if own is not None or start is None:
            return own
        for base in ancestry(start)[1:]:
            found = pick([s for s in by_path_name.get((base.path, name), []) if s.container == base.local_name])
            if found is not None:
                return found
        return None

    java_types = JavaTypeNames(symbols, refs, CLASS_KINDS)
    lookups = {}
    defining = {s.path for s in symbols if s.language in C_FAMILY and s.kind in CALLABLE_KINDS}
    """The files whose includes a definition's choice reads (``Definitions.definition_of``)."""
    for path, (language, file_refs) in refs.items():
        emit = only is None or path in only
        if not (emit or path in defining or any(
                "fields" in t or t.get("extends") or t.get("implements") for t in file_refs.get("types", []))):
            continue  # out of scope, and nothing read of it: no base or field type, no include a definition needs
        imported_names: dict[str, set[str]] = defaultdict(set)  # local name -> files
        source_file = file_id(path)
        for imp in file_refs.get("imports", []):
            targets = modules.resolve(path, language, imp["module"], imp.get("items", []))
            props = {"items": list(imp.get("items", [])), "line_number": imp.get("line")}
            if targets:
                for target in targets:
                    if target != path:
                        if emit:
                            result.edges.setdefault((source_file, "IMPORTS", file_id(target)), props)
                        if language in C_FAMILY:
                            includes[path].add(target)
            elif emit:
                mid = module_id(imp["module"], language)
                result.external_modules[mid] = (imp["module"], language)
                result.edges.setdefault((source_file, "IMPORTS", mid), props)
            for item in imp.get("items", []):
                if item != "*":
                    imported_names[item].update(targets)
            head = imp.get("alias") or base_name(imp["module"])
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
            if language in C_FAMILY:  # a name the included headers declare
                chosen = pick([s for p in includes.get(path, ()) for s in by_path_name.get((p, name), [])], want_class)
                if chosen is not None:
                    return chosen
            return pick(named_anywhere(name, language), want_class)

        lookups[path] = lookup
        for type_ref in file_refs.get("types", []):
            if "fields" in type_ref:
                field_types[type_ref["id"]] = type_ref["fields"]
            for relation, key in (("EXTENDS", "extends"), ("IMPLEMENTS", "implements")):
                for written in type_ref.get(key, []):
                    declared = java_types.resolve(path, written) if language == "java" else UNKNOWN
                    parent = declared.symbol if declared != UNKNOWN else lookup(base_name(written), None, True)
                    if parent is not None and parent.id != type_ref["id"]:
                        if emit:
                            result.edges.setdefault((type_ref["id"], relation, parent.id), {})
                        bases[type_ref["id"]].append(parent)

    for cls, base in _implicit_super_calls(symbols, bases):
        if only is None or cls.path in only:
            result.edges.setdefault((cls.id, "CALLS", base.id), {"line_number": None})

    def field_type(owner: TypeRef, name: str) -> TypeRef:
        """The declared type of field ``name`` of a type (or of the nearest one it inherits);
        a type outside the repository has its fields' types outside too."""
        if owner.symbol is None:
            return owner
        for cls in ancestry(owner.symbol):
            written = field_types.get(cls.id, {}).get(name)
            if written is not None:
                return UNKNOWN if written == UNSTATED else java_types.resolve(cls.path, written)
        return UNKNOWN

    def through_type(found: TypeRef, name: str) -> TypeRef:
        """Method ``name`` of a resolved type (or of the nearest one it inherits); ``OUTSIDE``
        when the type, or every declaration of ``name`` it can reach, is outside the repository."""
        if found.symbol is None:
            return found
        method = member(found.symbol.path, found.symbol.local_name, name)
        return OUTSIDE if method is None else TypeRef(method, False)

    def enclosing_classes(path: str, caller: SymbolRow) -> list[SymbolRow]:
        """The classes around a caller, innermost first."""
        around: list[SymbolRow] = []
        owner = caller.container or ""
        while owner:
            if (path, owner) in classes:
                around.append(classes[(path, owner)])
            owner = owner.rpartition(".")[0]
        return around

    def receiver_start(path: str, call: dict[str, Any], caller: SymbolRow, receiver: Receiver) -> tuple[TypeRef, tuple[str, ...]]:
        """The type a receiver chain starts from, and the fields it reads after that: the
        declared type the parser found, else an inherited field (``f``, ``this.f``), else a
        type name (``Type``, ``Outer.Inner``, ``Type.FIELD``)."""
        written = call.get("receiver_type")
        if written is not None:
            return (UNKNOWN if written == UNSTATED else java_types.resolve(path, written)), receiver.fields
        around = enclosing_classes(path, caller)
        if receiver.member:
            return (TypeRef(around[0], False) if around else UNKNOWN), (receiver.variable or "", *receiver.fields)
        for cls in around:
            inherited = field_type(TypeRef(cls, False), receiver.variable or "")
            if inherited != UNKNOWN:
                return inherited, receiver.fields
        names = [receiver.variable or "", *receiver.fields]
        found, used = java_types.resolve_prefix(path, names)
        return found, tuple(names[used:])

    def java_bare_call(path: str, caller: SymbolRow, name: str) -> TypeRef:
        """Java: ``T()`` of ``new T()`` is the type ``T`` names; ``m()`` is a method of the
        caller's class, of a class around it, or of one they inherit; else a static import's
        (``UNKNOWN``: the name lookup finds it), else declared outside the repository
        (``getClass()``). Inside an anonymous class, whose supertype is not recorded, an unfound
        name stays ``UNKNOWN``."""
        constructed = java_types.resolve(path, name, stated=False)
        if constructed != UNKNOWN:
            return constructed
        owner = caller.container or ""
        while owner:
            method = member(path, owner, name)
            if method is not None:
                return TypeRef(method, False)
            owner = owner.rpartition(".")[0]
        imports = refs[path][1].get("imports", [])
        if (path, caller.container) not in classes or any(name in imp.get("items", []) or "*" in imp.get("items", []) for imp in imports):
            return UNKNOWN
        return OUTSIDE

    def java_call(path: str, call: dict[str, Any], caller: SymbolRow, parts: list[str]) -> TypeRef:
        """Java: the method a call binds to through its receiver's declared type (``x.m()``,
        ``x.f.m()``, ``this.f.m()``, ``((T) e).m()``), a type name (``Type.m()``) or ``super``;
        ``UNKNOWN`` when the receiver's type is not stated."""
        name = call["callee_name"]
        if parts[:-1] == ["super"] and caller.container:
            method = member(path, caller.container, name, inherited_only=True)
            return TypeRef(method, method is None)
        receiver = receiver_of(call["callee"])
        if receiver is None:
            return UNKNOWN
        found, fields = receiver_start(path, call, caller, receiver)
        for field_name in fields:
            found = field_type(found, field_name)
        return through_type(found, name)

    def c_member(owner: str, name: str) -> SymbolRow | None:
        """C++: member ``name`` of the class named ``owner`` (wherever it is defined), or of the
        nearest class it inherits from."""
        cls = c_classes.get(owner)
        for scope in [owner] + [base.qualified_name for base in (ancestry(cls)[1:] if cls else [])]:
            found = pick([s for s in c_by_name.get(name, []) if s.qualified_name == f"{scope}::{name}"])
            if found is not None:
                return found
        return None

    def c_call(call: dict[str, Any], caller: SymbolRow, parts: list[str], lookup: Any) -> SymbolRow | None:
        """C/C++: ``A::f()`` by its scoped name only (``std::move()`` never reaches a repository
        ``move``); ``f()`` or ``this->f()`` in a member function: a member of its class first;
        then the name lookup (the included headers before the whole repository). A declaration
        found stands for its definition, a class for its constructors."""
        name = call["callee_name"]
        scoped = qualified_callee(call["callee"])
        if scoped is not None:
            target = pick([s for s in c_by_name.get(name, []) if s.qualified_name == scoped
                           or s.qualified_name.endswith("::" + scoped)])
        else:
            owner = class_of(caller) if caller.language == "cpp" else None
            target = c_member(owner, name) if owner and (len(parts) == 1 or parts[0] == "this") else None
            if target is None:
                target = lookup(name, parts[0] if len(parts) > 1 else None, None)
        if target is not None and target.kind == "constructor":  # as for `new T()`: the class stands for them
            target = c_classes.get(target.qualified_name.rpartition("::")[0], target)
        return None if target is None else definitions.definition_of(target)

    line_props: dict[Any, dict[str, Any]] = {}
    """One properties dict per line number, shared by the edges of calls on that line (never
    changed once made: 2.6 M dicts on the Linux kernel otherwise)."""
    if calls is None:
        by_file: Iterable[tuple[str, list[dict[str, Any]]]] = (
            (path, file_refs.get("calls", [])) for path, (_, file_refs) in refs.items() if only is None or path in only)
    else:
        by_file = calls(only)
    for path, file_calls in by_file:
        if path not in refs:
            continue
        language = refs[path][0]
        lookup = lookups[path]
        for call in file_calls:
            caller = by_id.get(call.get("caller_id") or "")
            if caller is None:
                continue
            callee: str = call["callee"]
            name = call["callee_name"]
            parts = [p for p in _SEPARATORS.split(callee) if p]
            if language in C_FAMILY:
                target = c_call(call, caller, parts, lookup)
                if target is not None and target.id != caller.id:
                    line = call.get("line")
                    result.edges.setdefault((caller.id, "CALLS", target.id), line_props.get(line) or line_props.setdefault(line, {"line_number": line}))
                continue
            target = None
            typed = UNKNOWN
            if language == "java" and callee not in _CONSTRUCTOR_CALLS:
                typed = java_call(path, call, caller, parts) if len(parts) > 1 else java_bare_call(path, caller, name)
            if typed != UNKNOWN:  # the declared type decides: no guess by name
                target = typed.symbol
            elif callee in _CONSTRUCTOR_CALLS and caller.kind == "constructor" and caller.container:
                target = _constructor_call(callee, classes.get((path, caller.container)), bases)
            elif callee.startswith(_SELF_PREFIXES) and caller.container:
                target = member(path, caller.container, name)
            if target is None and typed == UNKNOWN and len(parts) == 1:  # a bare name: a function nested in the caller first
                target = pick([s for s in by_path_name.get((path, name), []) if s.container == caller.local_name])
            if target is None and typed == UNKNOWN:
                target = lookup(name, parts[0] if len(parts) > 1 else None, None)
            if target is not None and target.id != caller.id:
                line = call.get("line")
                result.edges.setdefault((caller.id, "CALLS", target.id), line_props.get(line) or line_props.setdefault(line, {"line_number": line}))
    return result

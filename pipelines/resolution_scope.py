"""Which files a change can re-resolve: cross-file resolution at the cost of the change.

Resolution links a file's references by the names they mention (``pipelines.resolution``): a
call of ``f`` links to the one definition of ``f`` it can see, through the file's imports or
includes, or the only one in the repository. So a file's edges can change only when a name its
references mention is defined, removed or redefined somewhere, or when what every lookup rests on
changes. Each write records, with the files (``Manifest.set_ref_names``), the identifiers their
references mention, and the names whose definitions it changed (``Manifest.note_changed_names``);
the next resolution re-resolves the changed files and every file that mentions one of those names,
and keeps every other file's edges as they are — an edge into a rewritten file's symbol included
(``kept_edges``): its target is the same definition, and nothing its source looks up changed.

A file that comes or goes (``Manifest.note_changed_paths``) can change what imports and
includes resolve to: the files whose imports now name other files are resolved again too
(``moved_imports``), and, where a C or C++ one among them now includes another header, the files
that mention a name it defines and that header declares (a call prefers the definition whose file
includes the declaring header).

The whole repository is resolved again when a type's bases or fields change (inherited members
are found through the hierarchy, which a name of the hierarchy's file need not mention), when a
Java type or a C++ class with members is defined, removed or redefined (``types_moved``: a
field's type or a member's class is found by a name the reading file need not mention), when
many files came or went (``WHOLE_WHEN_PATHS_CHANGE``: a first index of more than 32 files among
them), after an interrupted resolution, and for a manifest written before the names were recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pipelines.c_family import C_FAMILY, class_of
from pipelines.qualified_names import module_name
from pipelines.records import file_id
from pipelines.resolution import ModuleIndex, base_name
from resources.manifest import Manifest, SymbolRow
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS

_IDENTIFIER = re.compile(r"[^\W\d][\w$]*|\$[\w$]*")
"""An identifier in any script (``计算``, ``größe``), as the parsers' names are."""
_NOT_NAMES = frozenset({"caller_id", "id", "line", "declarations"})
"""Reference keys whose values are ids or numbers, never names."""

Edge = tuple[str, str, str]
_RELATIVE_DIRECTORY_LANGUAGES = frozenset({"javascript", "typescript", "tsx"})
"""The languages whose relative imports ``pipelines.resolution.ModuleIndex`` resolves by path."""
_SCRIPT_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx")
WHOLE_WHEN_PATHS_CHANGE = (1 / 8, 32)
"""(share of the indexed files, and at least this many) that, once come or gone, have the next
resolution cover every file: past it, finding the files their names reach costs more than
resolving everything (a first index among them)."""


def referenced_names(refs: dict[str, Any]) -> set[str]:
    """Every identifier the references of a file mention (callees, receivers and their declared
    types, imported modules and items, bases, fields' types): a superset of the names its
    resolution looks up."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.update(_IDENTIFIER.findall(value))
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in _NOT_NAMES:
                    walk(item)

    walk(refs)
    return found


def name_tokens(names: Iterable[str]) -> set[str]:
    """The identifiers of symbol names, as ``referenced_names`` splits references (``A::f`` → A, f)."""
    return {token for name in names for token in _IDENTIFIER.findall(name)}


def hierarchy_changed(before: dict[str, Any] | None, after: dict[str, Any]) -> bool:
    """True when a file's types' bases or fields differ from those indexed (a new file's: when it
    has any)."""
    return (before or {}).get("types", []) != after.get("types", [])


def _stem(path: str) -> str:
    """A path's file name without its extension (``a/b.test.ts`` → ``b.test``)."""
    base = path.rsplit("/", 1)[-1]
    return base[:base.rfind(".")] if base.rfind(".") > 0 else base


def path_names(path: str, *, by_directory: bool = False) -> set[str] | None:
    """The identifiers an import or include that can name this file mentions, but for the
    relative JavaScript ones that climb to a directory (``"."``, ``".."``: ``moved_imports``):
    those of its name without the extension (``#include "x/foo.h"``, ``import a.foo``,
    ``./foo``), of the last part of its module name (a package's ``__init__.py``, ``index.ts``,
    ``mod.rs``) and, ``by_directory``, of its directory (a Go import names a package's directory,
    whatever the files in it). None when one of them has no identifier (``1.c``,
    ``2024/index.js``): then no name reaches its importers."""
    found = set(_IDENTIFIER.findall(_stem(path)))
    module = set(_IDENTIFIER.findall(module_name(path).rsplit(".", 1)[-1]))
    if not found or not module:
        return None
    found |= module
    if by_directory and "/" in path:
        directory = set(_IDENTIFIER.findall(path.rsplit("/", 2)[-2]))
        if not directory:
            return None
        found |= directory
    return found


def climbing_importers(paths: Iterable[str], languages: dict[str, str]) -> set[str]:
    """The JavaScript and TypeScript files whose relative imports can name one of these files
    without naming it: ``"."`` or ``".."`` resolve to a directory above the importer, and name the
    file that is that directory's ``index`` or bears its name beside it (``a/b/c.js`` importing
    ``".."`` names ``a.js`` or ``a/index.js``)."""
    directories: set[str] = set()
    for path in paths:
        if languages.get(path, "") in _RELATIVE_DIRECTORY_LANGUAGES or path.endswith(_SCRIPT_SUFFIXES):
            folder, _, base = path.rpartition("/")
            stem = _stem(path)
            directories.add(path[:len(path) - len(base) + len(stem)])
            if stem == "index":
                directories.add(folder)
    if not directories:
        return set()
    found: set[str] = set()
    for other, language in languages.items():
        if language in _RELATIVE_DIRECTORY_LANGUAGES:
            parts = other.split("/")[:-1]
            if "" in directories or any("/".join(parts[:n]) in directories for n in range(1, len(parts) + 1)):
                found.add(other)
    return found


def types_moved(conn: Any, symbols: Iterable[SymbolRow], names: set[str]) -> bool:
    """True when one of ``names`` is a Java type, or a C++ class with member functions, that these
    symbols define: a Java field's declared type and the class a C++ member function belongs to
    are found by the type's name, which the files that read through them need not mention (a new
    class can take the name over; C structs, without members, cannot)."""
    moved = [s for s in symbols if s.name in names and s.kind in CLASS_KINDS and s.language in ("java", "cpp")]
    if any(s.language == "java" for s in moved):
        return True
    return bool(moved) and not {s.qualified_name for s in moved}.isdisjoint(Manifest.member_owners(conn, "cpp", CALLABLE_KINDS))


def changed_definitions(before: list[SymbolRow], before_refs: dict[str, Any] | None,
                        after: list[SymbolRow], after_refs: dict[str, Any]) -> set[str]:
    """The names whose definitions in a file differ between two versions of it: a name defined
    the same way in both (same ids, kinds, containers and qualified names, declaration or not)
    cannot change another file's resolution (an edge into such a symbol from a file out of scope is
    kept: ``kept_edges``)."""
    def by_name(rows: list[SymbolRow], refs: dict[str, Any] | None) -> dict[str, set[tuple[Any, ...]]]:
        declared = set((refs or {}).get("declarations", []))
        found: dict[str, set[tuple[Any, ...]]] = {}
        for s in rows:
            found.setdefault(s.name, set()).add(
                (s.id, s.local_name, s.qualified_name, s.kind, s.container, s.language, s.id in declared))
        return found

    old, new = by_name(before, before_refs), by_name(after, after_refs)
    return {name for name in old.keys() | new.keys() if old.get(name) != new.get(name)}


def record_writes(manifest: Manifest, conn: Any, written: list[tuple[str, dict[str, Any], set[str], list[SymbolRow]]],
                  previous_refs: dict[str, dict[str, Any]], previous_symbols: dict[str, list[SymbolRow]],
                  languages: dict[str, str]) -> None:
    """Inside the transaction that commits written files: their referenced names, the files that
    are new to the index, and the names whose definitions changed (or that every file must be
    resolved again: a hierarchy or a type that moved, ``types_moved``).

    Args:
        written: Each written file's path, new references, ``referenced_names`` and symbols.
        previous_refs: The references indexed before for those files (a new file is absent).
        previous_symbols: The symbols indexed before for those files.
        languages: Each written file's language.
    """
    manifest.set_ref_names(conn, {path: names for path, _, names, _ in written})
    manifest.note_changed_paths(conn, {path: language for path, language in languages.items() if path not in previous_refs},
                                existed=False)
    everything = any(hierarchy_changed(previous_refs.get(path), refs) for path, refs, _, _ in written)
    changed: set[str] = set()
    for path, refs, _, symbols in written:
        before = previous_symbols.get(path, [])
        changed |= changed_definitions(before, previous_refs.get(path), symbols, refs)
        if (previous_refs.get(path) or {}).get("imports", []) != refs.get("imports", []):
            # a C/C++ definition is preferred by the files that include its declaration's header:
            # another file's call may now pick (or stop picking) one of this file's definitions
            changed |= {s.name for s in before} | {s.name for s in symbols}
    everything = everything or types_moved(
        conn, [s for path, _, _, symbols in written for s in (*previous_symbols.get(path, []), *symbols)], changed)
    manifest.note_changed_names(conn, name_tokens(changed), everything)


def rewritten_files(paths: Iterable[str], touched: set[str], rewritten: set[str]) -> set[str]:
    """Those of ``paths`` written since the last resolution: written over (``rewritten``), or
    replaced whole (their file node among the dirty ids ``touched``)."""
    return {path for path in paths if path in rewritten or file_id(path) in touched}


def affected_paths(manifest: Manifest, touched: set[str], rewritten: set[str] | None = None) -> set[str] | None:
    """The files whose cross-file edges may differ after the writes that left ``touched`` dirty
    and ``rewritten`` written over: the rewritten files, the files that mention a name whose
    definition changed, and the files whose imports name other files since files came or went
    (``moved_imports``); None when every file must be resolved again."""
    everything, names = manifest.resolution_scope()
    if everything:
        return None
    languages = manifest.languages()
    changed = rewritten_files(languages, touched, rewritten or set())
    came_or_went = manifest.changed_paths()
    if came_or_went:
        share, least = WHOLE_WHEN_PATHS_CHANGE
        if len(came_or_went) > max(share * len(languages), least):
            return None
        moved = moved_imports(manifest, languages, came_or_went)
        if moved is None:
            return None
        importers, reached = moved
        changed |= importers
        names |= reached
    return changed | manifest.paths_mentioning(names)


def moved_imports(
    manifest: Manifest, languages: dict[str, str], came_or_went: dict[str, tuple[str, bool]],
) -> tuple[set[str], set[str]] | None:
    """Once the files ``came_or_went`` came into the index or left it: the files
    whose imports or includes now name other files (each import resolved against the files before
    and after, of the files that mention one's ``path_names`` or climb to it:
    ``climbing_importers``), and the names a
    C or C++ one among them defines that a header it now includes or no longer includes declares
    (a call prefers the definition whose file includes the declaring header:
    ``Definitions.definition_of``). None when a file's name reaches no import (then every file
    must be resolved).

    Args:
        languages: Every indexed file's language, by path.
        came_or_went: The files that came or went since the last resolution
            (``Manifest.changed_paths``).
    """
    tokens: set[str] = set()
    by_directory = "go" in languages.values() or any(language == "go" for language, _ in came_or_went.values())
    everyone = {**languages, **{path: language for path, (language, _) in came_or_went.items()}}
    for path in came_or_went:
        reached = path_names(path, by_directory=by_directory)
        if reached is None:
            return None
        tokens |= reached
    now = set(languages)
    candidates = (manifest.paths_mentioning(tokens) | climbing_importers(came_or_went, everyone)) & now
    if not candidates:
        return set(), set()
    before = (now - came_or_went.keys()) | {path for path, (_, existed) in came_or_went.items() if existed}
    old, new = ModuleIndex(sorted(before)), ModuleIndex(sorted(now))
    importers: set[str] = set()
    headers: dict[str, set[str]] = {}
    for path, refs in manifest.refs_of(sorted(candidates), calls=False).items():
        language = languages[path]
        for imp in refs.get("imports", []):
            module, items = imp["module"], imp.get("items", [])
            differ = old.resolve(path, language, module, items) ^ new.resolve(path, language, module, items)
            if differ:
                importers.add(path)
                if language in C_FAMILY:
                    headers.setdefault(path, set()).update(differ & now)
    reached_names: set[str] = set()
    declared: dict[str, set[str]] = {}  # a header's names, read once however many files include it
    for path, included in headers.items():
        if included:
            for header in included - declared.keys():
                declared[header] = manifest.names_defined_in([header], C_FAMILY)
            reached_names |= manifest.names_defined_in([path], C_FAMILY) & set().union(*(declared[h] for h in included))
    return importers, name_tokens(reached_names)


def reachable_symbols(manifest: Manifest, only: set[str], refs: dict[str, tuple[str, dict[str, Any]]]) -> list[SymbolRow]:
    """The symbols a resolution of the files in ``only`` can reach, the same edges resolving from
    them as from every symbol: those of the files, every symbol whose name their references mention
    or their calls call (a lookup is by name: ``~A`` is called, though only ``A`` is mentioned), and
    the types a hierarchy walk can reach (bases are resolved for every file, and members found
    through them): every type, except C and C++ types, which are reached by name, as the class of
    a member function in the files, or as part of a hierarchy only (``refs``: every file's, as the
    resolution reads them).

    A C/C++ type that neither has a base nor is named as one is never walked through (its ancestry
    is itself; a class looked up by name is reached by the name): on the Linux kernel, whose
    125,000 types are C and C++ (headers parse as C++), a 1% scope reads 30,000 symbols, not 158,000."""
    callees = {call["callee_name"] for _, calls in manifest.calls_by_file(only) for call in calls}
    hierarchy_ids, base_names = hierarchies(refs)
    found = {s.id: s for s in manifest.resolution_symbols(
        only, callees | base_names, CLASS_KINDS, ids=hierarchy_ids, kinds_by_name_only_in=C_FAMILY)}
    # a C++ member function finds its class by its qualified name (``A::f`` defined in a.cpp is a
    # member of every type called ``A``), which its file need not mention
    owners = {owner.rpartition("::")[2] for s in found.values()
              if s.path in only and s.language in C_FAMILY and (owner := class_of(s)) is not None}
    found.update((s.id, s) for s in manifest.symbols_by(names=owners))
    return list(found.values())


def hierarchies(refs: dict[str, tuple[str, dict[str, Any]]]) -> tuple[set[str], set[str]]:
    """The ids of the types that extend or implement another, and the names their bases are written
    with, in every file of ``refs``."""
    ids: set[str] = set()
    names: set[str] = set()
    for _, file_refs in refs.values():
        for type_ref in file_refs.get("types", []):
            written = [*type_ref.get("extends", []), *type_ref.get("implements", [])]
            if written:
                ids.add(type_ref["id"])
                names.update(base_name(w) for w in written)
    return ids, names


def scope_ids(only: set[str], symbols: list[SymbolRow]) -> set[str]:
    """The node ids of the files in ``only`` and of their symbols (the sources of their edges)."""
    return {file_id(path) for path in only} | {s.id for s in symbols if s.path in only}


def hierarchy_moved(resolved: dict[Edge, Any], current: set[Edge], in_scope: set[str]) -> bool:
    """True when a resolution scoped to ``only`` resolved some class's bases (EXTENDS, IMPLEMENTS)
    otherwise than they are recorded: members are found through the hierarchy, by files that need
    not mention any name the edit changed, so everything must be resolved again."""
    hierarchy = ("EXTENDS", "IMPLEMENTS")
    before = {e for e in current if e[1] in hierarchy and e[0] in in_scope}
    return before != {e for e in resolved if e[1] in hierarchy}


def existing_nodes(manifest: Manifest, ids: Iterable[str]) -> set[str]:
    """Those of ``ids`` that are nodes of the index: its symbols and its files."""
    wanted = set(ids)
    if not wanted:
        return set()
    return manifest.present_symbol_ids(wanted) | (wanted & {file_id(path) for path in manifest.paths()})


def kept_edges(destroyed: set[Edge], in_scope: set[str], touched: set[str], existing: set[str]) -> set[Edge]:
    """Of the edges a rewrite took out of the graph (their source or target was rewritten), those to
    put back as they were: from a node out of ``in_scope`` and not rewritten (``touched``: a node of
    a rewritten file that is not in scope is one the rewrite removed) into a node that still exists
    (one of ``existing``). Their source mentions no name whose definition changed (or it would be in
    scope), so its lookups find what they found: the same node."""
    return {e for e in destroyed if e[0] not in in_scope and e[0] not in touched and e[2] in existing}

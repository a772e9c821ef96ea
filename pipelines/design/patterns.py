"""What the indexed code says about design: the symbols that cite requirements, and the pattern
families — a base class or interface with its implementations, the methods they are expected to
provide (the contract) and the naming they share."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.index_context import CODE_COLLECTION
from resources.schemas.code import CALLABLE_KINDS, CLASS_KINDS
from resources.vectors.store import PayloadFilter, VectorStore

if TYPE_CHECKING:
    from resources.manifest import Manifest

_ABSTRACT_MARKERS = ("abstractmethod", "NotImplementedError", "abstract ")


def requirement_citations(vectors: VectorStore, requirement_ids: Sequence[str]) -> list[Any]:
    """Indexed symbols (code collection) that cite any of the requirement ids."""
    if not requirement_ids:
        return []
    return vectors.scroll(CODE_COLLECTION, PayloadFilter({"requirement_ids": list(requirement_ids)}), limit=100_000)


def is_abstract(method_payload: dict[str, Any]) -> bool:
    """A method a subclass must provide: abstract, raising NotImplementedError, or a bare stub."""
    code = method_payload.get("code") or ""
    if any(marker in code for marker in _ABSTRACT_MARKERS):
        return True
    body = [line.strip() for line in code.splitlines()[1:] if line.strip() and not line.strip().startswith(("#", '"""', "'''"))]
    return body in ([], ["..."], ["pass"])


def class_members(vectors: VectorStore, classes: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(file_path, class local name) → the payloads of its methods."""
    names = sorted({c["local_name"] for c in classes})
    members: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for start in range(0, len(names), 500):
        for hit in vectors.scroll(CODE_COLLECTION, PayloadFilter({"container": names[start:start + 500], "kind": sorted(CALLABLE_KINDS)}), limit=1_000_000):
            members[(hit.payload.get("file_path", ""), hit.payload.get("container", ""))].append(hit.payload)
    return members


@dataclass
class PatternFamily:
    """A base class or interface and the classes that extend or implement it."""

    base: dict[str, Any]
    implementations: list[dict[str, Any]]


def pattern_families(vectors: VectorStore, min_implementations: int, manifest: Manifest | None = None) -> list[PatternFamily]:
    """Base types with at least ``min_implementations`` indexed subclasses or implementers.

    With the index's manifest, the types and their bases are read from it and only the families'
    payloads from the vector store: every type's payload holds its code (the Linux kernel's ~130k
    structs and enums took ~14 s to read back, to find no family)."""
    if manifest is None:
        classes = [h.payload for h in vectors.scroll(CODE_COLLECTION, PayloadFilter({"kind": sorted(CLASS_KINDS)}), limit=1_000_000)]
    else:
        classes = _types_of(manifest)
    by_name: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for payload in classes:
        by_name[(payload.get("language", ""), payload.get("name", ""))].append(payload)
    children: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for payload in classes:
        for base in {*(payload.get("extends") or []), *(payload.get("implements") or [])}:
            simple = _simple_name(base)
            if simple:
                children[(payload.get("language", ""), simple)].append(payload)
    families = []
    for key, impls in sorted(children.items()):
        bases = by_name.get(key)
        if not bases or len(impls) < min_implementations:
            continue
        families.append(PatternFamily(base=bases[0], implementations=impls))
    if manifest is not None:  # the families' whole payloads (a point missing from the store keeps what the manifest says)
        ids = [payload["id"] for f in families for payload in (f.base, *f.implementations)]
        whole = {hit.id: hit.payload for start in range(0, len(ids), 1_000) for hit in vectors.retrieve(CODE_COLLECTION, ids[start:start + 1_000])}
        families = [PatternFamily(base=whole.get(f.base["id"], f.base), implementations=[whole.get(i["id"], i) for i in f.implementations])
                    for f in families]
    return [PatternFamily(f.base, sorted(f.implementations, key=lambda p: (p["file_path"], p["name"]))) for f in families]


def _types_of(manifest: Manifest) -> list[dict[str, Any]]:
    """Of the indexed types, those ``pattern_families`` can group (every one that extends or
    implements something, and every one named like one of their bases) with the fields it groups
    them by, in id order as the vector store scrolls them: read by id and name, not every type."""
    bases = {ref["id"]: ref for _, (_, refs) in manifest.all_refs(calls_of=()).items() for ref in refs.get("types", [])
             if ref.get("extends") or ref.get("implements")}
    children = [s for s in manifest.symbols_by(ids=bases) if s.kind in CLASS_KINDS]
    named = {_simple_name(base) for s in children for base in (*(bases[s.id].get("extends") or []), *(bases[s.id].get("implements") or []))}
    types = {s.id: s for s in [*children, *manifest.symbols_by(names=named - {""})] if s.kind in CLASS_KINDS}
    return [
        {"id": s.id, "name": s.name, "language": s.language, "file_path": s.path, "local_name": s.local_name,
         "qualified_name": s.qualified_name, "kind": s.kind,
         "extends": bases.get(s.id, {}).get("extends") or [], "implements": bases.get(s.id, {}).get("implements") or []}
        for s in sorted(types.values(), key=lambda s: s.id)
    ]


def _simple_name(base: Any) -> str:
    """A base as written (``pkg.Base<T>``, ``ns::Base``) → its simple name (``Base``)."""
    return str(base).split("<")[0].split("[")[0].split(".")[-1].split("::")[-1].strip()


def naming_convention(names: Sequence[str]) -> dict[str, str]:
    """A suffix or prefix (CamelCase word) shared by at least 75% of the names, if any."""
    words = [re.findall(r"[A-Z][a-z0-9]*|[a-z0-9]+", n) for n in names]
    convention: dict[str, str] = {}
    for side, pick in (("suffix", -1), ("prefix", 0)):
        counts = Counter(w[pick] for w in words if w)
        if counts:
            word, count = counts.most_common(1)[0]
            if count >= max(2, 0.75 * len(names)) and count < len(names) + 1:
                convention[side] = word
    return convention


def pattern_contract(family: PatternFamily, members: dict[tuple[str, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The methods a subclass is expected to provide: the base's abstract methods, and those
    most implementations (≥ 60%) override."""
    base_methods = {m["name"]: m for m in members.get((family.base["file_path"], family.base["local_name"]), [])}
    counts: Counter[str] = Counter()
    for impl in family.implementations:
        counts.update({m["name"] for m in members.get((impl["file_path"], impl["local_name"]), [])})
    contract = []
    for name, method in sorted(base_methods.items()):
        if name.startswith("__") and name != "__init__":
            continue
        overridden = counts.get(name, 0) / max(1, len(family.implementations))
        if is_abstract(method) or overridden >= 0.6:
            contract.append({"name": name, "signature": method.get("signature", ""), "abstract": is_abstract(method), "overridden_by": round(overridden, 2)})
    return contract

"""Links derived from the indexed code: code and tests that cite requirements (IMPLEMENTS_REQ,
TESTS), code, tests and design documents that cite an ADR (FOLLOWS_DESIGN), code_pattern memories for base classes with several implementations (USES_PATTERN), and
component memories for directories (DEPENDS_ON from imports); each derivation's graph edges
replace the previous one's."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

from pipelines.design.citations import adr_index, citing_symbol, design_text
from pipelines.design.memories import (
    ORIGIN,
    DesignReport,
    DesignStores,
    _pipeline_rows,
    _soft_delete,
    _upsert,
)
from pipelines.design.patterns import (
    class_members,
    naming_convention,
    pattern_contract,
    pattern_families,
    requirement_citations,
)
from pipelines.discovery import resolve_project_root
from pipelines.index_context import CODE_COLLECTION
from pipelines.index_stores import ensure_code_collection
from pipelines.records import file_id
from resources.graph.store import GraphEdge
from resources.memory.ledger import MemoryRow
from resources.vectors.store import PayloadFilter

DERIVED_EDGES_KEY = "design_derived_edges"


def _edge_key(edge: GraphEdge) -> list[str]:
    return [edge.type, edge.source_id, edge.target_id]


def derived_edges(ledger: Any) -> list[GraphEdge]:
    """The edges the last derivation wrote, with their properties (``DERIVED_EDGES_KEY``: ``[type,
    source, target, properties]`` each; an earlier release kept no properties)."""
    return [GraphEdge(type=e[0], source_id=e[1], target_id=e[2], properties=e[3] if len(e) > 3 else {"origin": ORIGIN})
            for e in json.loads(ledger.meta(DERIVED_EDGES_KEY) or "[]")]


def restore_derived_edges(stores: DesignStores, touching: set[str] | None = None) -> int:
    """Write the last derivation's edges again (MERGE: idempotent): a re-indexed file's nodes were
    replaced with their edges, the derived ones too, while the derivation they come from still
    holds (its inputs unchanged: ``derive.derive_when_changed``). ``touching``: only the edges
    with an end among these node ids (the re-indexed files' nodes); None: all. An edge whose end
    is gone is not written. Returns how many edges were written."""
    edges = derived_edges(stores.ledger)
    if touching is not None:
        edges = [e for e in edges if e.source_id in touching or e.target_id in touching]
    if edges:
        stores.graph.add_edges(edges)
    return len(edges)


def _replace_derived_edges(stores: DesignStores, edges: list[GraphEdge], report: DesignReport) -> None:
    """Write the derived edges and remove the ones derived last time that no longer hold."""
    previous = {tuple(_edge_key(e)) for e in derived_edges(stores.ledger)}
    now = {tuple(_edge_key(e)) for e in edges}
    stale = [GraphEdge(type=t, source_id=s, target_id=d) for t, s, d in previous - now]
    if stale:
        report.edges_removed += stores.graph.remove_edges(stale)
    if edges:  # all of them (MERGE: idempotent), so a rebuilt graph gets them back; report the new ones
        stores.graph.add_edges(edges)
        report.edges_added += len(now - previous)
    unique = {tuple(_edge_key(e)): e.properties for e in edges}
    stores.ledger.set_meta(DERIVED_EDGES_KEY, json.dumps([[*key, properties] for key, properties in sorted(unique.items())], default=str))


def derive_links(stores: DesignStores) -> DesignReport:
    """Requirement links, code patterns and components, derived from the indexed code.

    Returns:
        Counts; the derived graph edges replace the previous derivation's.
    """
    report = DesignReport()
    settings = stores.settings
    ensure_code_collection(stores.vectors, stores.embedder.dimension)  # a docs-only or empty repo has none yet
    edges: list[GraphEdge] = []
    requirement_rows = {
        row.metadata.get("requirement_id"): row
        for row in stores.ledger.iter_memories(memory_types=["requirements"], include_deleted=False)
        if row.metadata.get("requirement_id")
    }
    for hit in requirement_citations(stores.vectors, sorted(requirement_rows)):
        for requirement_id in hit.payload.get("requirement_ids") or []:
            row = requirement_rows.get(requirement_id)
            if row is not None:
                edge_type = "TESTS" if hit.payload.get("is_test") else "IMPLEMENTS_REQ"
                edges.append(GraphEdge(type=edge_type, source_id=hit.id, target_id=row.id, properties={"origin": ORIGIN}))
                report.requirement_links += 1
    design_edges = _design_citations(stores)
    edges.extend(design_edges)
    report.design_links += len(design_edges)
    existing = _pipeline_rows(stores.ledger, ["code_pattern", "component"])
    written: list[str] = []
    kept: set[str] = set()
    families = pattern_families(stores.vectors, settings.pattern_min_implementations, stores.manifest)
    members = class_members(stores.vectors, [f.base for f in families] + [i for f in families for i in f.implementations])
    for family in families:
        base = family.base
        key = f"pattern:{base['file_path']}::{base['local_name']}"
        kept.add(key)
        contract = pattern_contract(family, members)
        naming = naming_convention([i["name"] for i in family.implementations])
        lines = [f"Template: {len(family.implementations)} {base['kind']}es extend or implement {base['name']} ({base['file_path']})."]
        if contract:
            lines.append("Contract: " + "; ".join(m["signature"] or m["name"] for m in contract))
        if naming:
            lines.append("Naming: " + ", ".join(f"class names {'end' if k == 'suffix' else 'start'} with {v!r}" for k, v in naming.items()))
        lines.append("Implementations: " + ", ".join(i["name"] for i in family.implementations[:30]))
        metadata = {
            "pattern_name": f"{base['name']} implementations", "pattern_type": "Template", "language": base.get("language") or "unknown",
            "code_template": (base.get("code") or base.get("signature") or base["name"])[:2_000],
            "usage_context": f"New {base['name']} subclasses implement: " + (", ".join(m["name"] for m in contract) or "(no abstract methods)"),
            "example_implementations": sorted({i["file_path"] for i in family.implementations})[:20],
            "base_class": base["qualified_name"], "base_symbol_id": base["id"], "base_file": base["file_path"],
            "contract": contract, "naming": naming or None,
            "implementations": [{"id": i["id"], "name": i["name"], "file_path": i["file_path"], "qualified_name": i["qualified_name"]} for i in family.implementations],
        }
        memory_id = _upsert(stores.ledger, existing, "code_pattern", key, "\n".join(lines), metadata, importance=0.6)
        if memory_id:
            written.append(memory_id)
        pattern_id = existing[key].id
        for impl in family.implementations:
            edges.append(GraphEdge(type="USES_PATTERN", source_id=impl["id"], target_id=pattern_id, properties={"origin": ORIGIN}))
        report.patterns += 1
    component_rows = _components(stores, existing, kept, written, edges)
    report.components = component_rows
    deleted = _soft_delete(stores.ledger, [row for key, row in existing.items() if key not in kept])
    report.memories_written += len(written)
    report.memories_deleted += len(deleted)
    if written or deleted:
        stores.projector.project(written + deleted)
    _replace_derived_edges(stores, edges, report)
    return report


def _design_citations(stores: DesignStores) -> list[GraphEdge]:
    """FOLLOWS_DESIGN edges to the ADR design memories that code, tests (from the symbol that cites,
    or the file at its top level) and other design memories cite."""
    designs = list(stores.ledger.iter_memories(memory_types=["design"], include_deleted=False))
    adrs = adr_index(designs)
    if not adrs.by_number and not adrs.by_path:
        return []
    edges: dict[tuple[str, str], GraphEdge] = {}

    def link(source_id: str, adr_id: str, **properties: object) -> None:
        if source_id != adr_id:
            edges.setdefault((source_id, adr_id), GraphEdge(
                type="FOLLOWS_DESIGN", source_id=source_id, target_id=adr_id, properties={"origin": ORIGIN, **properties},
            ))

    for row in designs:
        for _, adr_id in adrs.cited(design_text(row)):
            link(row.id, adr_id)
    root = resolve_project_root(stores.settings.resolved_root())
    cited: dict[str, tuple[list[str], list[tuple[int, str]]]] = {}
    for path in indexed_paths(stores):
        try:
            text = (root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # gone since it was indexed: the next index removes it
        found = adrs.cited(text)
        if found:
            cited[path] = (text.splitlines(), found)
    paths = sorted(cited)
    symbols: dict[str, list[dict]] = defaultdict(list)
    for start in range(0, len(paths), 500):
        for hit in stores.vectors.scroll(CODE_COLLECTION, PayloadFilter({"file_path": paths[start:start + 500]}), limit=1_000_000):
            if hit.payload.get("kind") != "doc_chunk":
                symbols[str(hit.payload.get("file_path"))].append({**hit.payload, "id": hit.id})
    for path in paths:
        lines, found = cited[path]
        for line, adr_id in found:
            symbol = citing_symbol(lines, line, symbols.get(path, []))
            link(symbol["id"] if symbol else file_id(path), adr_id, file_path=path, line=line)
    return list(edges.values())


def component_of(path: str, depth: int) -> str | None:
    """The component directory a repo-relative file belongs to (None at the root)."""
    parts = [part for part in path.split("/") if part not in ("", ".")][:-1]  # as PurePosixPath's parts, at a tenth of the cost
    if not parts:
        return None
    return "/".join(parts[:depth])


def _component_type(name: str) -> str:
    lower = name.lower()
    for words, kind in (
        (("agent", "bot", "worker"), "Agent"), (("web", "ui", "frontend", "client", "app"), "Frontend"),
        (("db", "database", "repository", "store", "storage", "models"), "Database"),
        (("service", "server", "api", "svc", "backend"), "Service"),
    ):
        if any(w in lower for w in words):
            return kind
    return "Library"


def indexed_paths(stores: DesignStores) -> list[str]:
    """The indexed files' paths: from the manifest where there is one (what the graph's File nodes
    hold, without a graph query), else from the graph."""
    if stores.manifest is not None:
        return stores.manifest.paths()
    _, file_rows, _ = stores.graph.read_query("MATCH (f:File) RETURN f.path AS path", limit=1_000_000)
    return [str(row.get("path") or "") for row in file_rows]


def file_imports(stores: DesignStores) -> tuple[list[str], list[tuple[str, str]]]:
    """The indexed files' paths (``indexed_paths``) and the (importing, imported) pairs of files:
    from the manifest where there is one (~700k imports on the Linux kernel took ~5 s to read back
    from the graph), else from the graph."""
    paths = indexed_paths(stores)
    if stores.manifest is not None:
        by_id = {file_id(path): path for path in paths}
        pairs = [(by_id[source], by_id[target]) for source, target in stores.manifest.resolved_pairs("IMPORTS")
                 if source in by_id and target in by_id]
        return paths, pairs
    _, import_rows, _ = stores.graph.read_query(
        "MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path AS source, b.path AS target", limit=1_000_000
    )
    return paths, [(str(row.get("source")), str(row.get("target"))) for row in import_rows]


def _components(stores: DesignStores, existing: dict[str, MemoryRow], kept: set[str], written: list[str], edges: list[GraphEdge]) -> int:
    depth = stores.settings.component_depth
    paths_indexed, imports = file_imports(stores)
    files: dict[str, list[str]] = defaultdict(list)
    for path in paths_indexed:
        component = component_of(path, depth)
        if component:
            files[component].append(path)
    depends: dict[str, set[str]] = defaultdict(set)
    for importing, imported in imports:
        source, target = component_of(importing, depth), component_of(imported, depth)
        if source and target and source != target:
            depends[source].add(target)
    dependents: dict[str, set[str]] = defaultdict(set)
    for source, targets in depends.items():
        for target in targets:
            dependents[target].add(source)
    for component, paths in sorted(files.items()):
        key = f"component:{component}"
        kept.add(key)
        interface = sorted({PurePosixPath(p).stem for p in paths})[:50]
        metadata = {
            "component_id": component, "component_type": _component_type(component), "name": PurePosixPath(component).name,
            "file_path": component, "public_interface": interface, "dependencies": sorted(depends.get(component, ())) or None,
            "dependents": sorted(dependents.get(component, ())) or None, "files": len(paths),
        }
        content = (
            f"Component {component} ({metadata['component_type']}, {len(paths)} files)."
            + (f" Depends on: {', '.join(metadata['dependencies'])}." if metadata["dependencies"] else "")
            + (f" Used by: {', '.join(metadata['dependents'])}." if metadata["dependents"] else "")
        )
        memory_id = _upsert(stores.ledger, existing, "component", key, content, metadata, importance=0.5)
        if memory_id:
            written.append(memory_id)
    for source, targets in depends.items():
        for target in targets:
            s, t = existing.get(f"component:{source}"), existing.get(f"component:{target}")
            if s is not None and t is not None:
                edges.append(GraphEdge(type="DEPENDS_ON", source_id=s.id, target_id=t.id, properties={"origin": ORIGIN}))
    return len(files)

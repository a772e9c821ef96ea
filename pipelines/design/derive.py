"""The design layer the pipeline derives from the repository and keeps current.

* ``ingest_documents``: the project's documents (``settings.doc_globs``) become requirements
  and design memories (ADRs, design sections) in the ledger, and searchable doc chunks in the
  ``docs`` collection; incremental by document hash; a removed document's memories are
  soft-deleted (never hard: the ledger keeps them 30 days).
* ``derive_links``: code and tests that cite requirements → IMPLEMENTS_REQ / TESTS edges; base
  classes with several implementations → code_pattern memories (Template: the contract of
  methods and signatures) with USES_PATTERN edges; directories → component memories with
  DEPENDS_ON from imports.
* ``refresh_anchors``: memories anchored to code (``metadata.anchors``) are checked against
  the indexed symbols' hashes; a changed or vanished symbol flags the memory stale.

Memories the pipeline writes carry ``metadata.origin = "pipeline"`` and a ``source_key``; the
pipeline never touches other memories. Every write goes through the ledger first.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pathspec
import structlog

from pipelines.discovery import _default_skip_reason, _git_candidates, _walk_candidates, resolve_project_root
from pipelines.design.documents import ParsedDocument, RequirementIds, parse_document
from pipelines.indexer import CODE_COLLECTION
from resources.manifest import Manifest
from pipelines.records import CLASS_KINDS, path_prefixes
from resources.vectors import sparse
from resources.graph.store import GraphEdge
from resources.memory.ledger import Ledger, MemoryRow, NewMemory, Relationship
from resources.memory.projection import MemoryProjector
from resources.schemas.memory import MemoryValidationError, validate_metadata
from resources.settings import Settings
from resources.vectors.store import PayloadFilter, VectorPoint, VectorStore

log = structlog.get_logger("codemem.design")

ORIGIN = "pipeline"
DOCS_COLLECTION = "docs"
DOC_EXTENSIONS = (".md", ".markdown", ".rst", ".txt", ".adoc")
MAX_DOC_BYTES = 2_000_000
DOC_STATE_KEY = "design_documents"
DERIVED_EDGES_KEY = "design_derived_edges"
DERIVED_INPUTS_KEY = "design_derived_inputs"
DERIVATION_VERSION = 1
"""Bumped when what ``derive_links`` or ``refresh_anchors`` produce changes (re-derives once)."""
_ID_NAMESPACE = uuid.UUID("0f4e5d8a-7c1b-4e22-9d3a-5c6b7a8e9f10")
_ABSTRACT_MARKERS = ("abstractmethod", "NotImplementedError", "abstract ")


@dataclass
class DesignStores:
    """What the design step reads and writes."""

    settings: Settings
    vectors: VectorStore
    graph: Any
    ledger: Ledger
    projector: MemoryProjector
    embedder: Any
    local_ledger: Ledger | None = None
    """The project's local memory scope, when it has one (its anchored memories are checked too)."""
    manifest: Manifest | None = None
    """The code index's manifest: with it, links and anchors are derived again only when their
    inputs changed (:func:`derive_when_changed`)."""


@dataclass
class DesignReport:
    """What one design step did."""

    documents_seen: int = 0
    documents_changed: int = 0
    documents_removed: int = 0
    requirements: int = 0
    designs: int = 0
    chunks_written: int = 0
    memories_written: int = 0
    memories_deleted: int = 0
    requirement_links: int = 0
    patterns: int = 0
    components: int = 0
    edges_added: int = 0
    edges_removed: int = 0
    anchors_checked: int = 0
    anchors_stale: int = 0
    derivation_skipped: bool = False
    """Links, patterns, components and anchors were current (their inputs had not changed)."""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return dict(self.__dict__)

    def merge(self, other: DesignReport) -> DesignReport:
        """Add another step's counts (and notes) to this one."""
        for key, value in other.__dict__.items():
            if isinstance(value, bool):
                setattr(self, key, getattr(self, key) or value)
            elif isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)
        self.notes.extend(other.notes)
        return self


# -- documents ---------------------------------------------------------------------------------
def discover_documents(settings: Settings) -> list[tuple[str, Path]]:
    """The project's documents: files matching ``doc_globs`` (gitignore-style), .gitignore and
    .codememignore respected, vendored directories skipped."""
    root = resolve_project_root(settings.resolved_root())
    spec = pathspec.GitIgnoreSpec.from_lines(settings.doc_globs)
    candidates = _git_candidates(root)
    listed = candidates if candidates is not None else list(_walk_candidates(root))
    ignore_file = root / ".codememignore"
    ignore = pathspec.GitIgnoreSpec.from_lines(ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()) if ignore_file.is_file() else None
    found = []
    for rel in listed:
        if not rel.lower().endswith(DOC_EXTENSIONS) or not spec.match_file(rel):
            continue
        if _default_skip_reason(rel) is not None or (ignore is not None and ignore.match_file(rel)):
            continue
        path = root / rel
        try:
            if not path.resolve(strict=True).is_relative_to(root) or not path.is_file() or path.stat().st_size > MAX_DOC_BYTES:
                continue
        except (OSError, RuntimeError):
            continue
        found.append((rel, path))
    return sorted(found)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _pipeline_rows(ledger: Ledger, memory_types: Sequence[str]) -> dict[str, MemoryRow]:
    """source_key → the pipeline's memory of these types (soft-deleted ones included)."""
    rows: dict[str, MemoryRow] = {}
    for row in ledger.iter_memories(memory_types=memory_types, include_deleted=True):
        if row.metadata.get("origin") == ORIGIN and row.metadata.get("source_key"):
            key = row.metadata["source_key"]
            if key not in rows or (rows[key].deleted and not row.deleted):
                rows[key] = row
    return rows


def _upsert(
    ledger: Ledger,
    existing: dict[str, MemoryRow],
    memory_type: str,
    key: str,
    content: str,
    metadata: dict[str, Any],
    *,
    importance: float = 0.6,
    relationships: Sequence[Relationship] = (),
) -> str | None:
    """Write one pipeline memory if it is new or changed; returns its id when written."""
    digest = _hash(json.dumps([content, metadata, sorted((r.rel_type, r.target_id) for r in relationships)], sort_keys=True, default=str))
    metadata = validate_metadata(memory_type, {**metadata, "origin": ORIGIN, "source_key": key, "source_hash": digest}, content=content)  # type: ignore[arg-type]
    row = existing.get(key)
    if row is not None and row.metadata.get("source_hash") == digest and not row.deleted:
        return None
    if row is not None:
        if row.deleted:
            ledger.restore(row.id, request_id=f"pipeline:restore:{key}:{digest[:16]}")
        for rel in relationships:
            rel.source_id = row.id
        updated, changed = ledger.update(
            row.id, content=content, metadata=metadata, relationships=list(relationships),
            request_id=f"pipeline:{key}:{digest[:16]}", operation="pipeline_update",
        )
        existing[key] = updated
        return row.id if changed or row.deleted else None
    new = NewMemory(memory_type=memory_type, content=content, metadata=metadata, importance_score=importance)
    for rel in relationships:
        rel.source_id = new.id
    new.relationships = list(relationships)
    rows = ledger.add([new], request_id=f"pipeline:{key}:{digest[:16]}")
    if rows:
        existing[key] = rows[0]
        return rows[0].id
    return None


def _soft_delete(ledger: Ledger, rows: Iterable[MemoryRow]) -> list[str]:
    deleted = []
    for row in rows:
        if not row.deleted:
            ledger.soft_delete(row.id, request_id=f"pipeline:delete:{row.id}:{row.version}")
            deleted.append(row.id)
    return deleted


def _chunk_points(stores: DesignStores, doc: ParsedDocument, doc_hash: str, indexed_at: str) -> list[VectorPoint]:
    if not doc.chunks:
        return []
    texts = [f"{c.title}\n{c.text}" for c in doc.chunks]
    dense = stores.embedder.embed_documents(texts) if stores.settings.dense_embeddings else None
    points = []
    for index, (chunk, text) in enumerate(zip(doc.chunks, texts, strict=True)):
        payload = {
            "id": str(uuid.uuid5(_ID_NAMESPACE, chunk.key)), "kind": "doc_chunk", "name": chunk.title,
            "qualified_name": f"{doc.path}#{chunk.title}", "local_name": chunk.title, "container": doc.title,
            "file_path": doc.path, "path_prefixes": path_prefixes(doc.path), "language": "markdown",
            "start_line": chunk.start_line, "end_line": chunk.end_line, "signature": chunk.title, "docstring": None,
            "code": chunk.text[:2_500], "code_truncated": len(chunk.text) > 2_500, "requirement_ids": chunk.requirement_ids,
            "content_hash": doc_hash, "indexed_at": indexed_at, "is_test": False,
        }
        points.append(
            VectorPoint(
                id=payload["id"], payload=payload,
                dense=list(map(float, dense[index])) if dense is not None else None,
                sparse=sparse.document_vector(text),
            )
        )
    return points


def _delete_chunks(stores: DesignStores, paths: Sequence[str]) -> None:
    if not paths:
        return
    hits = stores.vectors.scroll(DOCS_COLLECTION, PayloadFilter({"file_path": list(paths)}), limit=1_000_000)
    if hits:
        stores.vectors.delete(DOCS_COLLECTION, [h.id for h in hits])


def ingest_documents(stores: DesignStores, *, force: bool = False) -> DesignReport:
    """Bring requirements, designs and doc chunks in line with the documents on disk.

    Args:
        stores: The ledger, its projector and the vector store.
        force: Re-parse every document, changed or not.

    Returns:
        Counts of what changed; a duplicated requirement id is reported in ``notes``.
    """
    from resources.memory.ledger import now_iso

    report = DesignReport()
    settings = stores.settings
    ids = RequirementIds(settings.requirement_id_patterns)
    stores.vectors.ensure_collection(DOCS_COLLECTION, stores.embedder.dimension)
    state: dict[str, str] = json.loads(stores.ledger.meta(DOC_STATE_KEY) or "{}")
    documents = discover_documents(settings)
    report.documents_seen = len(documents)
    existing = _pipeline_rows(stores.ledger, ["requirements", "design"])
    current: dict[str, str] = {}
    parsed: list[ParsedDocument] = []
    for rel, path in documents:
        text = path.read_text(encoding="utf-8", errors="replace")
        digest = _hash(text)
        current[rel] = digest
        if not force and state.get(rel) == digest:
            continue
        parsed.append(parse_document(rel, text, ids))
    report.documents_changed = len(parsed)
    removed = [p for p in state if p not in current]
    report.documents_removed = len(removed)
    changed_paths = {d.path for d in parsed}
    written: list[str] = []
    kept_keys: set[str] = set()
    defined_elsewhere = {
        row.metadata.get("requirement_id"): row.metadata.get("source_document")
        for row in existing.values()
        if row.memory_type == "requirements" and not row.deleted and row.metadata.get("source_document") not in changed_paths
    }
    for doc in parsed:  # requirements first: designs link to them
        report.notes.extend(doc.notes)
        for req in doc.requirements:
            key = f"requirement:{req.requirement_id}"
            other = defined_elsewhere.get(req.requirement_id)
            if other is not None and other not in removed:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} is already defined in {other}; that definition is kept")
                continue
            if key in kept_keys:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} is defined twice; the first definition is kept")
                continue
            kept_keys.add(key)
            report.requirements += 1
            metadata = {
                "requirement_id": req.requirement_id, "title": req.title, "description": req.description,
                "priority": req.priority, "status": req.status, "source_document": req.source_document, "line": req.line,
            }
            try:
                memory_id = _upsert(stores.ledger, existing, "requirements", key, f"{req.requirement_id}: {req.title}\n\n{req.description}", metadata, importance=0.7)
            except MemoryValidationError as exc:
                report.notes.append(f"{doc.path}:{req.line}: {req.requirement_id} skipped: {exc}")
                continue
            if memory_id:
                written.append(memory_id)
    requirement_rows = {
        row.metadata.get("requirement_id"): row
        for row in stores.ledger.iter_memories(memory_types=["requirements"], include_deleted=False)
    }
    for doc in parsed:
        for design in doc.designs:
            key = f"design:{design.key}"
            kept_keys.add(key)
            report.designs += 1
            rels = [
                Relationship("", "ADDRESSES", requirement_rows[r].id, "memory:requirements", {"requirement_id": r, "origin": ORIGIN})
                for r in design.related_requirements if r in requirement_rows
            ]
            metadata = {
                "design_type": design.design_type, "title": design.title, "status": design.status,
                "decision": design.decision, "rationale": design.rationale, "consequences": design.consequences,
                "context": design.context, "related_requirements": design.related_requirements or None,
                "source_document": design.source_document, "line": design.line,
            }
            try:
                memory_id = _upsert(stores.ledger, existing, "design", key, design.content, metadata, importance=0.7, relationships=rels)
            except MemoryValidationError as exc:
                report.notes.append(f"{doc.path}:{design.line}: design skipped: {exc}")
                continue
            if memory_id:
                written.append(memory_id)
    gone = [
        row for key, row in existing.items()
        if row.metadata.get("source_document") in (changed_paths | set(removed)) and key not in kept_keys
        and (key.startswith("requirement:") or key.startswith("design:"))
    ]
    deleted = _soft_delete(stores.ledger, gone)
    report.memories_deleted = len(deleted)
    report.memories_written = len(written)
    if written or deleted:
        stores.projector.project(written + deleted)
    indexed_at = now_iso()
    _delete_chunks(stores, [d.path for d in parsed] + removed)
    points = [p for doc in parsed for p in _chunk_points(stores, doc, current[doc.path], indexed_at)]
    for start in range(0, len(points), 256):
        stores.vectors.upsert(DOCS_COLLECTION, points[start:start + 256])
    report.chunks_written = len(points)
    stores.ledger.set_meta(DOC_STATE_KEY, json.dumps(current, sort_keys=True))
    return report


# -- links, patterns, components ----------------------------------------------------------------
def _edge_key(edge: GraphEdge) -> list[str]:
    return [edge.type, edge.source_id, edge.target_id]


def _replace_derived_edges(stores: DesignStores, edges: list[GraphEdge], report: DesignReport) -> None:
    """Write the derived edges and remove the ones derived last time that no longer hold."""
    previous = {tuple(e) for e in json.loads(stores.ledger.meta(DERIVED_EDGES_KEY) or "[]")}
    now = {tuple(_edge_key(e)) for e in edges}
    stale = [GraphEdge(type=t, source_id=s, target_id=d) for t, s, d in previous - now]
    if stale:
        report.edges_removed += stores.graph.remove_edges(stale)
    if edges:  # all of them (MERGE: idempotent), so a rebuilt graph gets them back; report the new ones
        stores.graph.add_edges(edges)
        report.edges_added += len(now - previous)
    stores.ledger.set_meta(DERIVED_EDGES_KEY, json.dumps(sorted(now)))


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
        for hit in vectors.scroll(CODE_COLLECTION, PayloadFilter({"container": names[start:start + 500], "kind": ["method", "function"]}), limit=1_000_000):
            members[(hit.payload.get("file_path", ""), hit.payload.get("container", ""))].append(hit.payload)
    return members


@dataclass
class PatternFamily:
    """A base class or interface and the classes that extend or implement it."""

    base: dict[str, Any]
    implementations: list[dict[str, Any]]


def pattern_families(vectors: VectorStore, min_implementations: int) -> list[PatternFamily]:
    """Base types with at least ``min_implementations`` indexed subclasses or implementers."""
    classes = [h.payload for h in vectors.scroll(CODE_COLLECTION, PayloadFilter({"kind": sorted(CLASS_KINDS)}), limit=1_000_000)]
    by_name: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for payload in classes:
        by_name[(payload.get("language", ""), payload.get("name", ""))].append(payload)
    children: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for payload in classes:
        for base in {*(payload.get("extends") or []), *(payload.get("implements") or [])}:
            simple = str(base).split("<")[0].split("[")[0].split(".")[-1].split("::")[-1].strip()
            if simple:
                children[(payload.get("language", ""), simple)].append(payload)
    families = []
    for key, impls in sorted(children.items()):
        bases = by_name.get(key)
        if not bases or len(impls) < min_implementations:
            continue
        families.append(PatternFamily(base=bases[0], implementations=sorted(impls, key=lambda p: (p["file_path"], p["name"]))))
    return families


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


def derive_links(stores: DesignStores) -> DesignReport:
    """Requirement links, code patterns and components, derived from the indexed code.

    Returns:
        Counts; the derived graph edges replace the previous derivation's.
    """
    report = DesignReport()
    settings = stores.settings
    stores.vectors.ensure_collection(CODE_COLLECTION, stores.embedder.dimension)  # a docs-only or empty repo has none yet
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
    existing = _pipeline_rows(stores.ledger, ["code_pattern", "component"])
    written: list[str] = []
    kept: set[str] = set()
    families = pattern_families(stores.vectors, settings.pattern_min_implementations)
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


def component_of(path: str, depth: int) -> str | None:
    """The component directory a repo-relative file belongs to (None at the root)."""
    parts = PurePosixPath(path).parts[:-1]
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


def _components(stores: DesignStores, existing: dict[str, MemoryRow], kept: set[str], written: list[str], edges: list[GraphEdge]) -> int:
    depth = stores.settings.component_depth
    _, file_rows, _ = stores.graph.read_query("MATCH (f:File) RETURN f.path AS path", limit=1_000_000)
    files: dict[str, list[str]] = defaultdict(list)
    for row in file_rows:
        component = component_of(str(row.get("path") or ""), depth)
        if component:
            files[component].append(row["path"])
    _, import_rows, _ = stores.graph.read_query(
        "MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path AS source, b.path AS target", limit=1_000_000
    )
    depends: dict[str, set[str]] = defaultdict(set)
    for row in import_rows:
        source, target = component_of(str(row.get("source")), depth), component_of(str(row.get("target")), depth)
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


# -- anchors ------------------------------------------------------------------------------------
def symbols_by_qualified_name(vectors: VectorStore, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """qualified name (or file-local name) → the indexed symbol's payload."""
    found: dict[str, dict[str, Any]] = {}
    names = sorted(set(names))
    for start in range(0, len(names), 500):
        for field_name in ("qualified_name",):
            for hit in vectors.scroll(CODE_COLLECTION, PayloadFilter({field_name: names[start:start + 500]}), limit=100_000):
                found.setdefault(hit.payload.get(field_name, ""), hit.payload)
    return found


def refresh_anchors(stores: DesignStores) -> DesignReport:
    """Compare every anchored memory's anchors with the indexed code; flag the changed ones."""
    report = DesignReport()
    for ledger in (stores.ledger, stores.local_ledger):
        if ledger is None:
            continue
        rows = ledger.anchored_memories()
        anchors = [(row.id, a) for row in rows for a in (row.metadata.get("anchors") or []) if isinstance(a, dict) and a.get("qualified_name")]
        current = symbols_by_qualified_name(stores.vectors, [a["qualified_name"] for _, a in anchors])
        states = []
        for memory_id, anchor in anchors:
            symbol = current.get(anchor["qualified_name"])
            now = symbol.get("symbol_hash") if symbol else None
            states.append((memory_id, anchor["qualified_name"], str(anchor.get("content_hash") or ""), now))
        ledger.set_anchor_state(states)
        report.anchors_checked += len(states)
        report.anchors_stale += sum(1 for s in states if s[2] != s[3])
    return report


def _versions(rows: Iterable[MemoryRow]) -> list[tuple[str, int, bool]]:
    return sorted((row.id, row.version, row.deleted) for row in rows)


def derivation_inputs(stores: DesignStores) -> str | None:
    """A digest of everything ``derive_links`` and ``refresh_anchors`` read: the indexed code
    (the manifest's content signature), the requirement and anchored memories of every scope, the
    settings that shape the derivation. None without a manifest (no way to tell: always derive)."""
    if stores.manifest is None:
        return None
    settings = stores.settings
    parts: list[Any] = [
        DERIVATION_VERSION, stores.manifest.content_signature(), settings.component_depth,
        settings.pattern_min_implementations, list(settings.requirement_id_patterns),
        _versions(stores.ledger.iter_memories(memory_types=["requirements"], include_deleted=True)),
    ]
    for ledger in (stores.ledger, stores.local_ledger):
        parts.append(_versions(ledger.anchored_memories()) if ledger is not None else None)
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()


def derive_when_changed(stores: DesignStores, *, force: bool = False) -> DesignReport:
    """``derive_links`` and ``refresh_anchors``, skipped when their inputs are the ones of the
    last completed derivation (a no-change re-index of a large project would otherwise scan
    every symbol again). The inputs are read before deriving, so a change made meanwhile makes
    the next run derive again."""
    inputs = derivation_inputs(stores)
    if not force and inputs is not None and stores.ledger.meta(DERIVED_INPUTS_KEY) == inputs:
        return DesignReport(derivation_skipped=True)
    report = derive_links(stores).merge(refresh_anchors(stores))
    if inputs is not None:
        stores.ledger.set_meta(DERIVED_INPUTS_KEY, inputs)
    return report


def run_design_step(stores: DesignStores, *, force: bool = False) -> DesignReport:
    """Documents, then links, then anchors: the whole design layer brought up to date."""
    report = ingest_documents(stores, force=force)
    report.merge(derive_when_changed(stores, force=force))
    log.info("design layer refreshed", **{k: v for k, v in report.as_dict().items() if k != "notes"})
    return report

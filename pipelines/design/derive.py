"""The design layer the pipeline derives from the repository and keeps current.

* ``ingest_documents``: the project's documents (``settings.doc_globs``) become requirements
  and design memories (ADRs, design sections) in the ledger, and searchable doc chunks in the
  ``docs`` collection; incremental by document hash; a removed document's memories are
  soft-deleted (never hard: the ledger keeps them 30 days).
* ``derive_links``: code and tests that cite requirements → IMPLEMENTS_REQ / TESTS edges; code,
  tests and design documents that cite an ADR (ADR-0003, docs/adr/0003-x.md) → FOLLOWS_DESIGN; base
  classes with several implementations → code_pattern memories (Template: the contract of
  methods and signatures) with USES_PATTERN edges; directories → component memories with
  DEPENDS_ON from imports.
* ``refresh_anchors``: memories anchored to code (``metadata.anchors``) are checked against
  the indexed symbols' hashes; a changed or vanished symbol flags the memory stale.

Memories the pipeline writes carry ``metadata.origin = "pipeline"`` and a ``source_key``; the
pipeline never touches other memories. Every write goes through the ledger first.

The design step is written by job: its stores, report and own memories (``memories``), the
documents (``ingest``), what the code says about requirements and patterns (``patterns``), the
derived links, patterns and components (``links``) and the anchors (``anchors``). Here: the step
itself, and the derivation skipped while its inputs are unchanged. The public names of those
modules stay importable from here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

import structlog

from pipelines.design.anchors import refresh_anchors, symbols_by_qualified_name
from pipelines.design.citations import adr_index
from pipelines.design.digest import citing_lines, globs_tag
from pipelines.design.ingest import DOCS_COLLECTION, ingest_documents
from pipelines.design.links import component_of, derive_links, restore_derived_edges
from pipelines.design.memories import ORIGIN, DesignReport, DesignSources, DesignStores
from pipelines.design.patterns import (
    PatternFamily,
    class_members,
    naming_convention,
    pattern_contract,
    pattern_families,
    requirement_citations,
)
from pipelines.records import file_node_ids
from resources.manifest import FILES_WRITTEN
from resources.memory.ledger import MemoryRow

log = structlog.get_logger("codemem.design")

DERIVED_INPUTS_KEY = "design_derived_inputs"
EDGES_WRITTEN_KEY = "design_edges_written"
"""The manifest's ``FILES_WRITTEN`` when the derived edges were last written: a skipped
derivation writes them again only when files were re-indexed since (their nodes replaced)."""
DERIVATION_VERSION = 3
"""Bumped when what ``derive_links`` or ``refresh_anchors`` produce changes (re-derives once)."""


def _versions(rows: Iterable[MemoryRow]) -> list[tuple[str, int, bool]]:
    return sorted((row.id, row.version, row.deleted) for row in rows)


def derivation_inputs(stores: DesignSources) -> str | None:
    """A digest of everything ``derive_links`` and ``refresh_anchors`` read: of the indexed code,
    the file set and what the derivation reads of each file (the manifest's design signature,
    ``pipelines.design.digest``) and the files of the anchored symbols; the requirement, design
    (ADR citations) and anchored memories; the settings that shape the derivation; after a colon,
    the pattern memories and their bases' files (``_pattern_bases``). Read from the manifest and
    the ledger alone (no vector collection to open). None without a manifest (no way to tell:
    always derive)."""
    if stores.manifest is None:
        return None
    settings = stores.settings
    designs = list(stores.ledger.iter_memories(memory_types=["design"], include_deleted=True))
    citing = citing_lines(tuple(settings.doc_globs))
    if not all(citing.may_name(PurePosixPath(path).name) for path in adr_index(designs).by_path):
        return None  # an ADR whose name the digests' lines may miss (added by hand, say): always derive
    parts: list[Any] = [
        DERIVATION_VERSION, stores.manifest.design_signature(globs_tag(settings.doc_globs)), settings.component_depth,
        settings.pattern_min_implementations, list(settings.requirement_id_patterns),
        _versions(stores.ledger.iter_memories(memory_types=["requirements"], include_deleted=True)),
        _versions(designs),
    ]
    anchored: list[str] = []
    for ledger in (stores.ledger, stores.local_ledger):
        rows = list(ledger.anchored_memories()) if ledger is not None else None
        parts.append(_versions(rows) if rows is not None else None)
        anchored += [a["qualified_name"] for row in rows or () for a in (row.metadata.get("anchors") or [])
                     if isinstance(a, dict) and a.get("qualified_name")]
    parts.append(stores.manifest.defining_hashes(anchored))
    return f"{_digest(parts)}:{_pattern_bases(stores)}"


def _pattern_bases(stores: DesignSources) -> str:
    """A digest of the pattern memories the derivation wrote and of their base classes' files (a
    template is its base's code, the only class code the derivation keeps)."""
    assert stores.manifest is not None
    patterns = [row for row in stores.ledger.iter_memories(memory_types=["code_pattern"]) if row.metadata.get("origin") == ORIGIN]
    bases = [str(row.metadata["base_file"]) for row in patterns if row.metadata.get("base_file")]
    return _digest([_versions(patterns), stores.manifest.content_hashes(bases)])


def _digest(parts: Any) -> str:
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()


def derive_when_changed(stores: DesignStores, *, force: bool = False) -> DesignReport:
    """``derive_links`` and ``refresh_anchors``, skipped when their inputs are the ones of the
    last completed derivation (a no-change re-index of a large project would otherwise scan
    every symbol again). The inputs are read before deriving, so a change made meanwhile makes
    the next run derive again; the part the derivation writes itself (its pattern memories, after
    the colon) is read after, as the next run will find it (only an index run, never concurrent
    with this one, changes their bases' code)."""
    inputs = derivation_inputs(stores)
    written = stores.manifest.get_meta(FILES_WRITTEN) if stores.manifest is not None else None
    if not force and inputs is not None and stores.ledger.meta(DERIVED_INPUTS_KEY) == inputs:
        last = stores.ledger.meta(EDGES_WRITTEN_KEY)
        if written != last:  # files re-indexed since: their derived edges went with their nodes
            restore_derived_edges(stores, _rewritten_nodes(stores, last))
            stores.ledger.set_meta(EDGES_WRITTEN_KEY, written or "")
        return DesignReport(derivation_skipped=True)
    report = derive_links(stores).merge(refresh_anchors(stores))
    if inputs is not None:
        stores.ledger.set_meta(DERIVED_INPUTS_KEY, f"{inputs.partition(':')[0]}:{_pattern_bases(stores)}")
        stores.ledger.set_meta(EDGES_WRITTEN_KEY, written or "")
    return report


def _rewritten_nodes(stores: DesignStores, last: str | None) -> set[str] | None:
    """The ids of the nodes of the files written since the manifest's ``FILES_WRITTEN`` was
    ``last`` (their files and symbols: a derived edge's code end is one of them); None when
    ``last`` says nothing (no edges written since this was counted: restore them all)."""
    if stores.manifest is None or not (last or "").isdigit():
        return None
    return file_node_ids(stores.manifest.symbol_ids_of(stores.manifest.written_after(int(last or 0))))


def design_unchanged(stores: DesignSources) -> DesignReport | None:
    """The design step's report when it would do nothing (no document added, changed or removed,
    and the derivation's inputs are the ones of the last derivation), else None. Reads what
    ``ingest_documents`` and ``derive_when_changed`` compare, writes nothing."""
    from pipelines.design.ingest import DOC_STATE_KEY, discover_documents, pending_document_chunks
    from pipelines.design.memories import _hash

    inputs = derivation_inputs(stores)
    if inputs is None or stores.ledger.meta(DERIVED_INPUTS_KEY) != inputs:
        return None
    state: dict[str, str] = json.loads(stores.ledger.meta(DOC_STATE_KEY) or "{}")
    documents = discover_documents(stores.settings)
    if {rel for rel, _ in documents} != set(state):
        return None
    for rel, path in documents:
        if _hash(path.read_text(encoding="utf-8", errors="replace")) != state[rel]:
            return None
    return DesignReport(documents_seen=len(documents), derivation_skipped=True, chunks_dense_pending=pending_document_chunks(stores.ledger))


def run_design_step(stores: DesignStores, *, force: bool = False, embed: bool = True) -> DesignReport:
    """Documents, then links, then anchors: the whole design layer brought up to date (the doc
    chunks' dense vectors with ``embed``, else left pending: ``ingest.embed_pending_documents``)."""
    report = ingest_documents(stores, force=force, embed=embed)
    report.merge(derive_when_changed(stores, force=force))
    log.info("design layer refreshed", **{k: v for k, v in report.as_dict().items() if k != "notes"})
    return report


__all__ = [
    "DERIVATION_VERSION", "DERIVED_INPUTS_KEY", "DOCS_COLLECTION", "ORIGIN", "DesignReport", "DesignStores",
    "PatternFamily", "class_members", "component_of", "derivation_inputs", "derive_links", "derive_when_changed",
    "design_unchanged",
    "ingest_documents", "naming_convention", "pattern_contract", "pattern_families", "refresh_anchors",
    "requirement_citations", "run_design_step", "symbols_by_qualified_name",
]

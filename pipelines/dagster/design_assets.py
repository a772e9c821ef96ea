"""The design assets: the project's documents and what the pipeline derives from them and the
code. Thin wrappers over ``pipelines.design.derive``.

design_documents (requirements, ADRs, design sections, doc chunks) → design_links (requirement
links, code patterns, components, anchors), downstream of normalized_graph: links are derived
from the resolved code graph.
"""


import time
from typing import Any

from dagster import AssetExecutionContext, Output, ResourceParam, asset

from pipelines.bucket_records import summary_metadata
from pipelines.dagster.assets import normalized_graph
from pipelines.dagster.index_job import metadata_values
from pipelines.dagster.project import ProjectStores
from pipelines.design.derive import DesignReport, derive_when_changed, ingest_documents


def _metadata(report: DesignReport, started: float) -> dict[str, Any]:
    return metadata_values(summary_metadata(report.as_dict(), report.notes, time.perf_counter() - started))


@asset(group_name="design", description="Requirements, ADRs and design sections from the project's documents (doc_globs) as memories; other prose as searchable doc chunks. Incremental by document hash; a removed document's memories are soft-deleted.")
def design_documents(context: AssetExecutionContext, codemem: ResourceParam[ProjectStores]) -> Output[dict[str, Any]]:
    """Ingest the documents into the ledger (owner) or ask the owner to refresh the design layer."""
    started = time.perf_counter()
    stores = codemem.design_stores()
    if stores is None:  # another process owns the stores: it runs the whole design step
        report = DesignReport(**{k: v for k, v in codemem.refresh_design_on_owner().items() if k in DesignReport.__dataclass_fields__})
    else:
        report = ingest_documents(stores)
    return Output(report.as_dict(), metadata=_metadata(report, started))


@asset(deps=[design_documents, normalized_graph], group_name="design", description="IMPLEMENTS_REQ/TESTS links from requirement citations in code and tests, code_pattern memories (Template contracts) with USES_PATTERN, component memories with DEPENDS_ON, and anchored memories checked for staleness.")
def design_links(context: AssetExecutionContext, codemem: ResourceParam[ProjectStores]) -> Output[dict[str, Any]]:
    """Derive links, patterns and components; flag memories whose anchored code changed."""
    started = time.perf_counter()
    stores = codemem.design_stores()
    report = DesignReport()
    if stores is not None:
        report = derive_when_changed(stores)
    return Output(report.as_dict(), metadata=_metadata(report, started))


DESIGN_ASSETS = [design_documents, design_links]

"""health (each dependency's state, degraded ones named) and index_status (counts, dense coverage,
the search mode, the last run and a background job's state)."""

from __future__ import annotations

import json
from typing import Any

from pipelines.design.ingest import pending_document_chunks
from pipelines.index_context import LAST_INDEX_KEY
from pipelines.indexer import CODE_COLLECTION
from query_server.code.lookups import CodeLookups
from query_server.paging import cap_report
from resources.schemas.tools import HealthResult, IndexStatusResult, JobStatusInput
from resources.vectors.store import VectorStoreError


class StatusReports(CodeLookups):
    """What state the project's stores and index are in."""

    def health(self) -> HealthResult:
        """The state of each dependency, with degraded states named."""
        components: dict[str, dict[str, Any]] = {}
        try:
            points = self.vectors.count(CODE_COLLECTION)
            components["vector_store"] = {"status": "ok", "points": points}
        except VectorStoreError as exc:
            empty = not self.manifest.counts()["files"]
            components["vector_store"] = (
                {"status": "ok", "points": 0, "note": "nothing indexed yet — run `codemem index`"}
                if empty
                else {"status": "error", "error": str(exc)}
            )
        except Exception as exc:  # noqa: BLE001 - health reports, never raises
            components["vector_store"] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
        graph = self.graph.health()
        components["graph_store"] = {"status": "ok" if graph.get("ok") else "error", **graph}
        status = self.embedder_status
        embedder = {
            "status": "degraded" if status.degraded else "ok",
            "backend": status.backend,
            "model": status.model_id,
            "message": status.message,
        }
        cache = getattr(self.embedder, "cache", None)
        if cache is not None:
            embedder["cache_hit_rate"] = round(cache.hit_rate, 4)
        components["embedder"] = embedder
        done, total, coverage = self._dense_coverage()
        components["index"] = {
            "status": "ok" if done == total else "degraded",
            "symbols": total,
            "dense_coverage": round(coverage, 4),
            **({"note": "dense vectors pending: search uses words for the rest"} if done < total else {}),
        }
        states = {c["status"] for c in components.values()}
        overall = "error" if "error" in states else "degraded" if "degraded" in states else "ok"
        return HealthResult(status=overall, components=components)  # type: ignore[arg-type]

    def index_status(self, request: JobStatusInput | None = None) -> IndexStatusResult:
        """Counts, dense coverage and the last run's summary; with a ``job_id``, also that background
        job's state (``job_status``)."""
        counts = self.manifest.counts()
        done, total, coverage = self._dense_coverage()
        last = self.manifest.get_meta(LAST_INDEX_KEY)
        try:
            graph_counts = self.graph.counts()
        except Exception as exc:  # noqa: BLE001 - status must answer even when the graph is down
            graph_counts = {"error": str(exc)}  # type: ignore[dict-item]
        running = self.background_index_progress
        if running is not None:
            phase, done_files, all_files = running
            mode = f"indexing in progress ({phase} {done_files}/{all_files}); results may be incomplete"
        elif not total:
            mode = "empty index — run `codemem index`"
        elif done == total:
            mode = "hybrid"
        elif done:
            mode = f"hybrid with {coverage:.0%} dense vectors (the rest is searched by words until embedded)"
        else:
            mode = "sparse-only (dense vectors pending)"
        status = IndexStatusResult(
            project_root=str(self.settings.resolved_root()),
            files=counts["files"],
            symbols=counts["symbols"],
            resolved_edges=counts["resolved_edges"],
            dense_vectors=done,
            dense_coverage=round(coverage, 4),
            doc_chunks_dense_pending=pending_document_chunks(self.service.memory.ledger),
            search_mode=mode,
            embedder=self.embedder_status.message,
            vector_store="qdrant server" if self.settings.server_mode_vectors else "qdrant-edge (embedded)",
            graph_store="neo4j server" if self.settings.server_mode_graph else "falkordb (embedded)",
            last_index=cap_report(json.loads(last)) if last else None,
            graph_counts=graph_counts,
        )
        if request is not None and request.job_id is not None:
            status.job = self.service.job_status(request)
        return status

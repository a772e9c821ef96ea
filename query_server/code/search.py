"""code_search: hybrid dense + sparse candidates from the vector store, fused (``resources.ranking``),
a page of code hits within the response token cap."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from pipelines.indexer import CODE_COLLECTION
from query_server.code.lookups import CodeLookups, FileVersion
from query_server.paging import MAX_RESPONSE_TOKENS, ToolError, estimate_tokens
from query_server.paging import decode_cursor as _decode_cursor
from query_server.paging import encode_cursor as _encode_cursor
from resources.ranking import minmax_fuse
from resources.schemas.tools import CodeHit, CodeSearchInput, CodeSearchResult
from resources.vectors import sparse
from resources.vectors.store import PayloadFilter, VectorHit, VectorStoreError

FIRST_BUILD_WAIT_S = 5.0
"""How long a search waits for a first index build in progress to write its first symbols (a
small project is searchable by then; a large one answers "retry in a moment")."""


class CodeSearch(CodeLookups):
    """Hybrid search over the code index."""

    def _building(self) -> bool:
        """An index run is going (its progress may not be reported yet)."""
        return self.background_index_progress is not None or self.service.index_jobs.background_index_running

    def _first_symbols(self, timeout_s: float) -> tuple[int, int, float]:
        """Wait (at most ``timeout_s``) until the first build in progress wrote symbols, or ended;
        the dense coverage then."""
        deadline = time.monotonic() + timeout_s
        counts = self._dense_coverage()
        while not counts[1] and self._building() and time.monotonic() < deadline:
            if self._stop.wait(0.05):
                break
            counts = self._dense_coverage()
        return counts

    def code_search(self, request: CodeSearchInput) -> CodeSearchResult:
        """Hybrid code search: dense and sparse candidates from Qdrant, fused (see resources.ranking)."""
        key_source = json.dumps([request.query, request.language, request.path_prefix, request.kind])
        query_key = hashlib.sha1(key_source.encode()).hexdigest()[:12]
        offset = _decode_cursor(request.cursor, query_key)
        must: dict[str, list[Any]] = {}
        if request.language:
            must["language"] = [request.language.lower()]
        if request.kind:
            must["kind"] = [request.kind]
        if request.path_prefix:
            prefix = request.path_prefix.strip().strip("/")
            if prefix and prefix != ".":
                must["path_prefixes"] = [prefix + "/"]
        done, total, coverage = self._dense_coverage()
        if not total and self._building():
            done, total, coverage = self._first_symbols(FIRST_BUILD_WAIT_S)
        dense = None
        mode = "sparse-only"
        if not total:
            mode = "empty index — run `codemem index` on the project (nothing is indexed yet)"
        elif done > 0:
            dense = self.embedder.embed_query(request.query)
            mode = "hybrid" if done == total else f"hybrid (dense vectors {coverage:.0%} computed; rest by words)"
        elif total:
            mode = "sparse-only (dense vectors not computed yet; run `codemem index` or wait for the server)"
        wanted = offset + request.limit + 1
        candidates = max(self.settings.search_candidates, wanted)
        try:
            if self.settings.fusion == "rrf":
                hits = self.vectors.hybrid_query(
                    CODE_COLLECTION, dense=dense, sparse=sparse.query_vector(request.query), limit=wanted,
                    payload_filter=PayloadFilter(must), candidates=candidates,
                )
            else:
                # Ids and scores of every candidate, payloads of the page only: the store converts
                # payloads while holding the GIL, and 2 x 100 candidates' code was most of a
                # search's time in it (every other request of the server waited meanwhile).
                dense_hits, sparse_hits = self.vectors.ranked_lists(
                    CODE_COLLECTION, dense=dense, sparse=sparse.query_vector(request.query),
                    candidates=candidates, payload_filter=PayloadFilter(must), with_payload=False,
                )
                hits = minmax_fuse(dense_hits, sparse_hits, self.settings.dense_weight)[:wanted]
            page = hits[offset : offset + request.limit]
            if any(not hit.payload for hit in page):
                page = self._with_payloads(page)
        except VectorStoreError as exc:
            running = self.background_index_progress
            if running is not None:
                raise ToolError(
                    f"the index is being built ({running[0]} {running[1]}/{running[2]}) — retry in a moment"
                ) from exc
            raise ToolError(str(exc)) from exc
        if self.background_index_progress is not None:
            mode += " — indexing in progress, results may be incomplete"
        more = len(hits) > offset + request.limit
        results: list[CodeHit] = []
        budget = MAX_RESPONSE_TOKENS - 500
        truncated = False
        versions: dict[str, FileVersion] = {}
        for hit in page:
            code_hit = self._to_hit(hit.id, hit.score, hit.payload, versions, detail=request.detail)
            cost = estimate_tokens(code_hit.model_dump_json())
            if cost > budget:
                truncated = True
                more = True
                break
            budget -= cost
            results.append(code_hit)
        next_offset = offset + len(results)
        return CodeSearchResult(
            results=results,
            next_cursor=_encode_cursor(next_offset, query_key) if more else None,
            search_mode=mode,
            dense_coverage=round(coverage, 4),
            truncated=truncated,
        )

    def _with_payloads(self, page: list[VectorHit]) -> list[VectorHit]:
        """The hits of ``page`` with their payloads, in order; a hit whose point is gone meanwhile is
        left out."""
        found = self._payloads([hit.id for hit in page])
        return [VectorHit(id=hit.id, score=hit.score, payload=found[hit.id]) for hit in page if hit.id in found]

"""find_duplicates: existing functions like a given snippet — dense candidates re-scored by structure
(``resources.code_similarity``), with their location and a reuse advice."""

from __future__ import annotations

from typing import Any

import structlog

from pipelines.indexer import CODE_COLLECTION
from pipelines.parsing import parse_source
from pipelines.records import embedding_text
from query_server.code.lookups import SUPPORTED_LANGUAGES, CodeLookups, being_rebuilt
from query_server.paging import MAX_RESPONSE_TOKENS, ToolError, cut_text, estimate_tokens
from resources.code_similarity import STRUCTURE_COSINE_FLOOR, Candidate, score_candidates
from resources.schemas.code import CALLABLE_KINDS
from resources.schemas.tools import DuplicateHit, FindDuplicatesInput, FindDuplicatesResult
from resources.vectors.store import PayloadFilter, VectorHit

log = structlog.get_logger("codemem.service")


class DuplicateFinder(CodeLookups):
    """Functions in the index that a new one would duplicate."""

    def find_duplicates(self, request: FindDuplicatesInput) -> FindDuplicatesResult:
        """Existing functions similar to the given code, with the location and a reuse advice."""
        threshold = request.threshold if request.threshold is not None else self.settings.duplicate_threshold
        language = (request.language or "python").lower()
        if language not in SUPPORTED_LANGUAGES:
            raise ToolError(f"Unknown language {request.language!r} — use one of {', '.join(sorted(SUPPORTED_LANGUAGES))}")
        done, total, coverage = self._dense_coverage()
        running = self._running_job()
        if not done and running is not None:
            # an empty answer now would read as "no duplicates": say why there is none
            raise ToolError(being_rebuilt(running))
        if not total:
            raise ToolError("nothing is indexed yet — run `codemem index` on the project first")
        if done < total:
            log.info("find_duplicates with partial dense coverage", coverage=coverage)
        if not done:
            raise ToolError("dense vectors are still being computed — retry in a moment (`index_status` shows progress)")
        parsed = parse_source("snippet", request.code.encode("utf-8"), language)  # type: ignore[arg-type]
        functions = [s for s in parsed.symbols if s.kind in CALLABLE_KINDS]
        text = embedding_text(parsed, functions[0], functions[0].qualified_name) if functions else request.code
        vector = self.embedder.embed_documents([text])[0]
        must: dict[str, list[Any]] = {"kind": sorted(CALLABLE_KINDS)}
        if request.language:
            must["language"] = [language]
        # More candidates than wanted, re-scored by structure (resources.code_similarity): the
        # embedding alone rates renamed copies low and same-shape opposites (min/max) high.
        dense_hits, _ = self.vectors.ranked_lists(
            CODE_COLLECTION, dense=vector, sparse=None, candidates=max(request.limit * 5, 50),
            payload_filter=PayloadFilter(must), with_payload=False,
        )
        # Code only of the candidates that can be shown or compared by structure: one under both
        # floors keeps its cosine as its score, below the threshold (payloads cost GIL time).
        floor = min(STRUCTURE_COSINE_FLOOR, threshold)
        payloads = self._payloads([hit.id for hit in dense_hits if hit.score >= floor])
        dense_hits = [VectorHit(id=hit.id, score=hit.score, payload=payloads.get(hit.id, {})) for hit in dense_hits
                      if hit.score < floor or hit.id in payloads]
        snippet = functions[0] if functions else None
        scores = score_candidates(
            snippet.code if snippet else request.code, snippet.name if snippet else None, language,
            [
                Candidate(hit.payload.get("code") or "", hit.payload.get("name"), hit.payload.get("language"),
                          hit.score, bool(hit.payload.get("code_truncated")))
                for hit in dense_hits
            ],
            self.embedder.embed_documents,
        )
        ranked = sorted(zip(dense_hits, scores, strict=True), key=lambda pair: -pair[1][0])
        duplicates = []
        budget = MAX_RESPONSE_TOKENS - 500
        truncated = False
        for hit, (score, _comparison) in ranked[: request.limit]:
            if score < threshold:
                break
            payload = hit.payload
            advice = (
                "near-identical: reuse it instead of writing a new one"
                if score >= 0.95
                else "similar: reuse or extend it rather than duplicating it"
            )
            duplicates.append(
                DuplicateHit(
                    id=hit.id, name=payload.get("name", ""), qualified_name=payload.get("qualified_name", ""),
                    file_path=payload.get("file_path", ""), start_line=int(payload.get("start_line", 0)),
                    end_line=int(payload.get("end_line", 0)), signature=payload.get("signature", ""),
                    docstring=cut_text(payload["docstring"], 1_500, "get_symbol returns the whole")[0] if payload.get("docstring") else None,
                    similarity=round(score, 4),
                    recommendation=f"{advice} ({payload.get('file_path')}:{payload.get('start_line')})",
                )
            )
            budget -= estimate_tokens(duplicates[-1].model_dump_json())
            if budget < 0:
                duplicates.pop()
                truncated = True
                break
        return FindDuplicatesResult(
            threshold=threshold, duplicate_count=len(duplicates), duplicates=duplicates, truncated=truncated
        )

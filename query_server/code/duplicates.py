"""find_duplicates: existing functions like a given snippet — candidates by the code's vector and by
its words, compared in canonical form (``pipelines.parsing.canonical``) and re-scored by structure
(``resources.code_similarity``), with their location, what differs, and a reuse advice."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import structlog

from pipelines.discovery import DiscoveryError, confine_path
from pipelines.index_context import CALLABLE_LANGUAGE
from pipelines.indexer import CODE_COLLECTION
from pipelines.parsing import parse_source
from pipelines.parsing.canonical import CanonicalCode, canonical_code, wrap_member
from query_server.code.duplicate_differences import describe_differences
from query_server.code.lookups import SUPPORTED_LANGUAGES, CodeLookups, FileVersion, being_rebuilt
from query_server.paging import (
    MAX_RESPONSE_TOKENS,
    ToolError,
    cut_text,
    estimate_tokens,
)
from resources.code_similarity import (
    STRUCTURE_COSINE_FLOOR,
    Background,
    Candidate,
    code_tokens,
    reembed_text,
    score_candidates,
)
from resources.schemas.code import CALLABLE_KINDS
from resources.schemas.tools import (
    DuplicateHit,
    FindDuplicatesInput,
    FindDuplicatesResult,
)
from resources.vectors import sparse
from resources.vectors.store import PayloadFilter, VectorHit

if TYPE_CHECKING:
    import numpy as np

log = structlog.get_logger("codemem.service")

DENSE_CANDIDATES = 50
"""Candidates by the code's vector (or five per answer wanted, when more), re-scored by structure."""
SPARSE_CANDIDATES = 10
"""Candidates found by words (BM25 over the snippet as written: identifiers, strings, docstring)
that the code's vector missed, added to the dense ones. The model reads the code alone (the
vector is reused to re-score), and a copy that keeps a long docstring is near its original by
words, not by that vector: toolz's ``get`` renamed was found only this way (bench.duplicates --dev)."""
MAX_COMPARED_CODE = 40_000
"""Longest function read back from its file to be compared (longer ones keep their cosine)."""


@dataclass(frozen=True)
class _Snippet:
    """The code about to be written: its first function (or the whole), as written and canonical.

    ``embed_text`` is what the model reads of it (:func:`reembed_text`): the search and the
    re-scoring share that one vector. The canonical form is computed when first read
    (``find_duplicates`` reads it while the model encodes ``embed_text``)."""

    code: str
    name: str | None
    language: str
    embed_text: str

    @cached_property
    def canonical(self) -> CanonicalCode:
        return canonical_code(self.code, self.language)


def read_snippet(code: str, language: str) -> _Snippet:
    """The snippet's first function and what the dense model reads of it.

    A method on its own (TypeScript, JavaScript, Java, C#) is read inside a class.
    """
    wrapped = wrap_member(code, language)  # None unless it parses as a class member only
    parsed = parse_source("snippet", (wrapped or code).encode("utf-8"), language)  # type: ignore[arg-type]
    functions = [s if wrapped is None else s.model_copy(update={"container": None})  # not the wrapper's
                 for s in parsed.symbols if s.kind in CALLABLE_KINDS]
    first = functions[0] if functions else None
    written = first.code if first else code
    return _Snippet(written, first.name if first else None, language, reembed_text(written, language))


class DuplicateFinder(CodeLookups):
    """Functions in the index that a new one would duplicate."""

    def find_duplicates(self, request: FindDuplicatesInput) -> FindDuplicatesResult:
        """Existing functions similar to the given code, with the location, what differs, and a reuse advice."""
        threshold = request.threshold if request.threshold is not None else self.settings.duplicate_threshold
        language = (request.language or "python").lower()
        if language not in SUPPORTED_LANGUAGES:
            raise ToolError(f"Unknown language {request.language!r} — use one of {', '.join(sorted(SUPPORTED_LANGUAGES))}")
        self._check_dense_ready()
        snippet = read_snippet(request.code, language)
        # The model encodes the snippet on a thread (it holds no GIL while it computes); its
        # canonical form and the search by words need no vector and are done meanwhile.
        encoding = Background(self.embedder.embed_documents, [snippet.embed_text])
        searched = language if request.language else None
        snippet.canonical  # noqa: B018 - computed now, read below
        by_words = self._word_hits(snippet, searched, request.limit)
        vector = encoding.result()[0]
        candidates = self._candidates(vector, by_words, searched, request.limit, threshold)
        # Both sides in canonical form (pipelines.parsing.canonical): names, annotations, comments
        # and statements written another way no longer read as a behaviour change. A candidate's
        # form is computed when it is compared (not for one of another language, say), once.
        def canonical(hit: VectorHit) -> CanonicalCode:
            return canonical_code(hit.payload["code"], hit.payload.get("language") or language)

        scores = score_candidates(
            snippet.canonical.text, snippet.name, language,
            [
                Candidate(hit.payload.get("code") or "", hit.payload.get("name"), hit.payload.get("language"),
                          hit.score, bool(hit.payload.get("code_truncated")), hit.payload.get("code"))
                for hit in candidates
            ],
            self.embedder.embed_documents, new_original=snippet.code,
            new_vector=vector, compared_code=lambda candidate: canonical_code(candidate.code, candidate.language or language).text,
            threshold=threshold,
        )
        ranked = sorted(zip(candidates, scores, strict=True), key=lambda pair: -pair[1][0])
        duplicates: list[DuplicateHit] = []
        budget = MAX_RESPONSE_TOKENS - 500
        truncated = False
        snippet_tokens = code_tokens(snippet.canonical.text, language, snippet.name)
        for hit, (score, comparison) in ranked[: request.limit]:
            if score < threshold:
                break
            comparable = hit.payload.get("code") and not hit.payload.get("code_truncated")
            existing = canonical(hit) if comparable else None
            differences = describe_differences(
                existing, snippet.canonical, code_tokens(existing.text, language, hit.payload.get("name")),
                snippet_tokens, comparison, hit.payload.get("name"), snippet.name, hit.payload.get("code"), snippet.code,
            ) if existing is not None else []
            duplicates.append(_duplicate_hit(hit, score, differences))
            budget -= estimate_tokens(duplicates[-1].model_dump_json())
            if budget < 0:
                duplicates.pop()
                truncated = True
                break
        return FindDuplicatesResult(
            threshold=threshold, duplicate_count=len(duplicates), duplicates=duplicates, truncated=truncated
        )

    def _check_dense_ready(self) -> None:
        """Refuse, saying why, while no dense vector can be searched (an empty answer would read as "none")."""
        done, total, coverage = self._dense_coverage()
        running = self._running_job()
        if not done and running is not None:
            raise ToolError(being_rebuilt(running))
        if not total:
            raise ToolError("nothing is indexed yet — run `codemem index` on the project first")
        if done < total:
            log.info("find_duplicates with partial dense coverage", coverage=coverage)
        if not done:
            raise ToolError("dense vectors are still being computed — retry in a moment (`index_status` shows progress)")

    def _word_hits(self, snippet: _Snippet, language: str | None, limit: int) -> list[VectorHit]:
        """Functions near the snippet by its words (BM25 over the code as written), best first."""
        _, by_words = self.vectors.ranked_lists(
            CODE_COLLECTION, dense=None, sparse=sparse.query_vector(snippet.code),
            candidates=max(limit * 5, DENSE_CANDIDATES),
            payload_filter=self._callables_filter(language), with_payload=False,
        )
        return by_words

    def _candidates(self, vector: np.ndarray, by_words: list[VectorHit], language: str | None, limit: int,
                    threshold: float) -> list[VectorHit]:
        """Functions near the snippet — by its code's vector, and by its words (``by_words``,
        from ``_word_hits``) — more than wanted, to be re-scored by structure (the embedding alone
        rates renamed copies low and same-shape opposites high), with the payloads of those that
        can be shown or compared, a long one's whole code read from its file. A candidate's score
        is its cosine with the snippet."""
        hits, _ = self.vectors.ranked_lists(
            CODE_COLLECTION, dense=vector, sparse=None, candidates=max(limit * 5, DENSE_CANDIDATES),
            payload_filter=self._callables_filter(language), with_payload=False,
        )
        known = {hit.id for hit in hits}
        extra = [hit.id for hit in by_words if hit.id not in known][:SPARSE_CANDIDATES]
        stored = self.vectors.dense_vectors(CODE_COLLECTION, extra) if extra else {}
        if stored:
            import numpy as np  # here: the service's other tools (an index run) never load numpy

            hits += [VectorHit(id=id_, score=float(np.dot(stored[id_], vector)), payload={}) for id_ in extra if id_ in stored]
        # one under both floors keeps its cosine as its score, below the threshold (payloads cost GIL time)
        floor = min(STRUCTURE_COSINE_FLOOR, threshold)
        payloads = self._payloads([hit.id for hit in hits if hit.score >= floor])
        versions: dict[str, FileVersion] = {}
        for payload in payloads.values():
            if payload.get("code_truncated"):  # the payload holds the start: the file has the rest
                self._whole_code(payload, versions)
        return [VectorHit(id=hit.id, score=hit.score, payload=payloads.get(hit.id, {})) for hit in hits
                if hit.score < floor or hit.id in payloads]

    def _callables_filter(self, language: str | None) -> PayloadFilter:
        """Functions, methods and constructors (of ``language`` when given). One condition on
        ``callable_language`` where the collection indexes it (every point then has it), two
        (``kind``, 3 values, and ``language``) in a collection written before it, until the next
        ``codemem index`` fills it in: at 100,000 symbols the two conditions cost more than the
        search itself (docs/benchmarks.md, find_duplicates)."""
        if language and CALLABLE_LANGUAGE in self.vectors.payload_indexes(CODE_COLLECTION):
            return PayloadFilter({CALLABLE_LANGUAGE: [language]})
        must: dict[str, list[Any]] = {"kind": sorted(CALLABLE_KINDS)}
        if language:
            must["language"] = [language]
        return PayloadFilter(must)

    def _whole_code(self, payload: dict[str, Any], versions: dict[str, FileVersion]) -> None:
        """Put a long function's whole code in its payload, read from its file while the file is
        as indexed (else the payload stays cut and the candidate keeps its cosine)."""
        path = payload.get("file_path")
        if not path or self._version(path, payload, versions).stale:
            return
        try:
            lines = confine_path(self.settings.resolved_root(), path).read_text("utf-8", errors="replace").splitlines()
        except (OSError, DiscoveryError):
            return
        code = "\n".join(lines[int(payload.get("start_line", 1)) - 1 : int(payload.get("end_line", 0))])
        if code and len(code) <= MAX_COMPARED_CODE:
            payload["code"], payload["code_truncated"] = code, False


def _duplicate_hit(hit: VectorHit, score: float, differences: list[str]) -> DuplicateHit:
    """One reported duplicate, with its reuse advice."""
    payload = hit.payload
    advice = (
        "near-identical: reuse it instead of writing a new one" if score >= 0.95
        else "similar: reuse or extend it rather than duplicating it"
    )
    return DuplicateHit(
        id=hit.id, name=payload.get("name", ""), qualified_name=payload.get("qualified_name", ""),
        file_path=payload.get("file_path", ""), start_line=int(payload.get("start_line", 0)),
        end_line=int(payload.get("end_line", 0)), signature=payload.get("signature", ""),
        docstring=cut_text(payload["docstring"], 1_500, "get_symbol returns the whole")[0] if payload.get("docstring") else None,
        similarity=round(score, 4), differences=differences,
        recommendation=f"{advice} ({payload.get('file_path')}:{payload.get('start_line')})",
    )

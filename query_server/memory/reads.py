"""The memory reads: one memory in full, a browsable list, search by meaning, and a topic's
context within a token budget — across the scopes this project sees (project, local, global, enterprise).

Search ranks by similarity × importance × recency × use (``MemoryReads.ranked``): importance is
the memory's explicit ``importance_score``, recency decays with the time since it was updated,
and use (REQ-MEM-FN-024) is its access frequency — a log-scaled ``access_count`` decaying with the
time since its last access — raising the score by at most ``memory_access_weight`` (3%). The
reads that deliver a memory count an access (memory_get, a search page's first hit, the
memory_context entries); the ledger commits the counts in batches off the read path
(``resources.memory.ledger_access``). Hits
are summaries unless ``detail="full"``, and every page stays within the response token cap.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from query_server.memory.commit_files import files_at_commit
from query_server.memory.stores import MemoryStores
from query_server.paging import MAX_RESPONSE_TOKENS, cut_text, decode_cursor, encode_cursor, estimate_tokens
from resources.memory.ledger import MemoryRow
from resources.memory.projection import epoch, memory_title, prepared_text
from resources.ranking import minmax_fuse
from resources.schemas.memory import (
    MEMORY_SCOPES,
    MEMORY_TYPES,
    SHARED_SCOPES,
    SUMMARY_CHARS,
    MemoryContextEntry,
    MemoryContextGroup,
    MemoryContextInput,
    MemoryContextResult,
    MemoryGetInput,
    MemoryHit,
    MemoryListInput,
    MemoryListResult,
    MemoryProvenance,
    MemoryRecord,
    MemoryRelationship,
    MemorySearchInput,
    MemorySearchResult,
)
from resources.vectors import sparse
from resources.vectors.store import PayloadFilter, VectorHit

log = structlog.get_logger("codemem.memory")

HIT_CONTENT_CHARS = 4_000
"""Content characters per search hit with ``detail="full"``; memory_get returns the whole memory."""
CONTEXT_CONTENT_CHARS = 1_500
"""Content characters of one memory in memory_context (when the budget allows; else a summary)."""
FALLBACK_SCAN_LIMIT = 50_000
MAX_RANK_WEIGHT = 1.0
"""The largest factor importance and recency apply to a memory's similarity (see ``_rank_weight``);
access frequency multiplies it by at most ``1 + settings.memory_access_weight``."""
ACCESS_SATURATION = 50
"""Accesses at which access frequency stops growing (log-scaled: 1 access is 18% of it, 10 are 61%)."""
ACCESS_HALF_LIFE_DAYS = 30.0
"""Days since the last access at which access frequency counts half."""
SEARCH_HITS_COUNTED = 1
"""Hits of a memory_search page counted as an access: the first, the answer an agent acts on. The
others were only shown; counting them made access frequency a measure of how often a memory turns
up near any query, and cost held-out queries R@1 (``bench.memory --ranking``)."""


def summarize(text: str, max_chars: int, hint: str) -> tuple[str, bool]:
    """The start of ``text`` (at most ``max_chars``, cut at a word boundary when one is near) with a
    marker naming the call that returns the whole; whether it was cut."""
    if len(text) <= max_chars:
        return text, False
    head = text[:max_chars]
    space = max(head.rfind(" "), head.rfind("\n"))
    if space > max_chars * 2 // 3:
        head = head[:space]
    head = head.rstrip()
    return f"{head} … [summary: {len(text) - len(head)} more characters — {hint}]", True


SUMMARY_METADATA_CHARS = 240
"""JSON characters of a summary hit's metadata: with its ~300-character content, a hit stays ~600."""
SUMMARY_VALUE_CHARS = 80
"""A metadata value longer than this (as JSON) is cut (text) or elided (lists, objects) in a summary."""


def compact_metadata(metadata: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A summary hit's metadata: short values whole, long text cut, long lists and objects left out,
    in the memory's field order until ~``SUMMARY_METADATA_CHARS`` of JSON; and the fields left out
    or cut (memory_get returns them whole)."""
    kept: dict[str, Any] = {}
    elided: list[str] = []
    used = 2
    for key, value in metadata.items():
        size = len(json.dumps(value, ensure_ascii=False, default=str))
        if size > SUMMARY_VALUE_CHARS:
            if not isinstance(value, str):
                elided.append(key)
                continue
            value = value[: SUMMARY_VALUE_CHARS - 4].rstrip() + " …"
            size = SUMMARY_VALUE_CHARS
            elided.append(key)
        cost = size + len(key) + 6
        if used + cost > SUMMARY_METADATA_CHARS:
            if key not in elided:
                elided.append(key)
            continue
        kept[key] = value
        used += cost
    return kept, elided


class MemoryReads:
    """Get, list, search and gather memories; memory_get, memory_context and a search page's first hit count an access."""

    def __init__(self, stores: MemoryStores) -> None:
        """Read through ``stores``."""
        self.stores = stores

    def memory_get(self, request: MemoryGetInput) -> MemoryRecord:
        """One memory in full, from whichever scope holds it (soft-deleted ones too, flagged), with
        its relationships on request, and with the files it concerns at its commit (level 3)."""
        row = self.stores.row_of(request.memory_id, request.memory_type)
        self._record_access([row])
        record = self._record(self._with_pending([self.stores.current(row)])[0], request.include_relationships)
        text, cut = cut_text(record.content, (MAX_RESPONSE_TOKENS - 5_000) * 3, "the memory is larger than one response")
        record.content = text
        if request.include_files:
            budget = MAX_RESPONSE_TOKENS - 1_000 - estimate_tokens(record.model_dump_json())
            record.files = files_at_commit(self.stores, row.metadata, row.id, budget)
        return record

    def memory_list(self, request: MemoryListInput) -> MemoryListResult:
        """Memories of every scope, most recently updated first (for browsing; search ranks by meaning)."""
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor", "detail"}), sort_keys=True)
        offset = decode_cursor(request.cursor, key)
        types = [str(t) for t in request.memory_types] if request.memory_types else None
        stores = self.stores.scopes.opened(request.scopes)
        if len(stores) == 1:
            rows = stores[0].ledger.recent(memory_types=types, include_deleted=request.include_deleted, offset=offset, limit=request.limit + 1)
        else:  # merge the scopes' newest pages (each ledger answers in updated_at order)
            merged = [
                row for store in stores
                for row in store.ledger.recent(memory_types=types, include_deleted=request.include_deleted, offset=0, limit=offset + request.limit + 1)
            ]
            merged.sort(key=lambda row: row.id)
            merged.sort(key=lambda row: row.updated_at, reverse=True)
            rows = merged[offset : offset + request.limit + 1]
        rows = self._with_pending([self.stores.current(row) if row.scope in SHARED_SCOPES else row for row in rows])
        page = [self._hit(row, 1.0, detail=request.detail) for row in rows[: request.limit]]
        more = len(rows) > request.limit
        return MemoryListResult(results=page, next_cursor=encode_cursor(offset + len(page), key) if more else None)

    def memory_search(self, request: MemorySearchInput) -> MemorySearchResult:
        """Memories by meaning (dense + keyword) across the scopes this project sees (project, local,
        global, enterprise), ranked by similarity × importance × recency; summaries unless ``detail="full"``."""
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor", "detail"}), sort_keys=True)
        offset = decode_cursor(request.cursor, key)
        ranked, mode = self.ranked(request, offset + request.limit + 1)
        page = ranked[offset : offset + request.limit]
        more = len(ranked) > offset + request.limit
        hits: list[MemoryHit] = []
        budget = MAX_RESPONSE_TOKENS - 1_000
        truncated = False
        stale = self._stale([row for _, row in page])
        for score, row in page:
            hit = self._hit(row, score, stale, detail=request.detail)
            if len(hits) < SEARCH_HITS_COUNTED:
                hit.access_count += 1  # this retrieval
            cost = estimate_tokens(hit.model_dump_json())
            if cost > budget:
                truncated, more = True, True
                break
            budget -= cost
            hits.append(hit)
        self._record_access([row for _, row in page[: min(len(hits), SEARCH_HITS_COUNTED)]])
        next_offset = offset + len(hits)
        return MemorySearchResult(
            query=request.query, result_count=len(hits), results=hits,
            next_cursor=encode_cursor(next_offset, key) if more and hits else None,
            truncated=truncated, search_mode=mode,
        )

    def memory_context(self, request: MemoryContextInput) -> MemoryContextResult:
        """A topic's memories for a conversation (``/codemem:context``): the most relevant first,
        grouped by type, each group and the whole with a token estimate, within ``max_tokens``.

        Breadth first: every memory, best first, goes in as a ~300-character summary (or ~120
        when that no longer fits; left out, and counted in ``omitted``, when neither does); the
        budget left then widens the most relevant summaries to up to 1,500 characters. The
        estimate of the whole answer (entries, group headers and envelope) stays within
        ``max_tokens``."""
        search = MemorySearchInput(
            query=request.topic, memory_types=request.memory_types, scopes=request.scopes, limit=request.limit,
        )
        ranked, mode = self.ranked(search, request.limit)
        ranked = [(score, row) for score, row in ranked if request.min_score is None or score >= request.min_score][: request.limit]
        stale = self._stale([row for _, row in ranked])
        envelope = MemoryContextResult(
            topic=request.topic, groups=[], total_tokens=99_999, max_tokens=request.max_tokens, memory_count=999,
            omitted=999, summarized=999, search_mode=mode, next="x" * 200,
        )
        group_cost = estimate_tokens(MemoryContextGroup(memory_type="user_preference", count=999, tokens=99_999, memories=[]).model_dump_json())
        budget = request.max_tokens - estimate_tokens(envelope.model_dump_json())

        def entry(score: float, row: MemoryRow, chars: int) -> MemoryContextEntry:
            content, cut = summarize(row.content, chars, "memory_get returns the whole memory")
            made = MemoryContextEntry(
                id=row.id, memory_type=row.memory_type, scope=row.scope,  # type: ignore[arg-type]
                title=memory_title(row.metadata), content=content, content_truncated=cut, score=round(score, 4),
                importance_score=row.importance_score, updated_at=row.updated_at, stale=row.id in stale, tokens=99_999,
            )
            made.tokens = estimate_tokens(made.model_dump_json())  # an upper bound: the real count is shorter
            return made

        chosen: list[tuple[float, MemoryRow, MemoryContextEntry]] = []
        opened: set[str] = set()
        omitted = 0
        for score, row in ranked:
            header = 0 if row.memory_type in opened else group_cost
            fitting = (e for e in (entry(score, row, chars) for chars in (SUMMARY_CHARS, SUMMARY_CHARS * 2 // 5)) if e.tokens + header <= budget)
            found = next(fitting, None)
            if found is None:
                omitted += 1
                continue
            budget -= found.tokens + header
            opened.add(row.memory_type)
            chosen.append((score, row, found))
        for index, (score, row, small) in enumerate(chosen):  # widen the best summaries with what is left
            if small.content_truncated and budget > 0:
                wide = entry(score, row, CONTEXT_CONTENT_CHARS)
                if wide.tokens - small.tokens <= budget:
                    budget -= wide.tokens - small.tokens
                    chosen[index] = (score, row, wide)
        entries = [e for _, _, e in chosen]
        summarized = sum(1 for e in entries if e.content_truncated)
        kept = {entry.id for entry in entries}
        self._record_access([row for _, row in ranked if row.id in kept])
        groups: dict[str, MemoryContextGroup] = {}
        for entry in entries:  # best first, so groups come in the order of their best memory
            group = groups.setdefault(entry.memory_type, MemoryContextGroup(memory_type=entry.memory_type, count=0, tokens=0, memories=[]))
            group.memories.append(entry)
            group.count += 1
            group.tokens += entry.tokens
        total = sum(g.tokens for g in groups.values())
        hints = []
        if summarized:
            hints.append("memory_get(memory_id, memory_type) returns a summarized memory in full")
        if omitted:
            hints.append(f"{omitted} more relevant {'memory' if omitted == 1 else 'memories'} did not fit: raise max_tokens or narrow memory_types")
        return MemoryContextResult(
            topic=request.topic, groups=list(groups.values()), total_tokens=total, max_tokens=request.max_tokens,
            memory_count=len(entries), omitted=omitted, summarized=summarized, search_mode=mode,
            next="; ".join(hints) or None,
        )

    def _record(self, row: MemoryRow, with_relationships: bool = False) -> MemoryRecord:
        return MemoryRecord(
            id=row.id, memory_type=row.memory_type, content=row.content, metadata=row.metadata,
            created_at=row.created_at, updated_at=row.updated_at, version=row.version,
            access_count=row.access_count, importance_score=row.importance_score,
            sync_status=row.sync_status, deleted=row.deleted, deleted_at=row.deleted_at,  # type: ignore[arg-type]
            relationships=self._relationships(row) if with_relationships else None,
            stale_anchors=self.stores.store(row.scope).ledger.stale_anchors([row.id]).get(row.id),
            scope=row.scope,  # type: ignore[arg-type]
        )

    def _relationships(self, row: MemoryRow) -> list[MemoryRelationship]:
        out, _ = self.stores.store(row.scope).ledger.relationships_of(row.id)
        incoming = []  # memories of any scope this project sees may point at it
        for store in self.stores.scopes.opened():
            incoming.extend(store.ledger.relationships_of(row.id)[1])
        others = self.stores.scopes.get_many([r.target_id for r in out] + [r.source_id for r in incoming])
        result: list[MemoryRelationship] = []
        for rel, direction in [(r, "outgoing") for r in out] + [(r, "incoming") for r in incoming]:
            other_id = rel.target_id if direction == "outgoing" else rel.source_id
            other = others.get(other_id)
            if other is not None:
                label, name = other.memory_type, memory_title(other.metadata) or other.content[:80]
            elif rel.target_kind.startswith("code:") and direction == "outgoing":
                label, name = rel.target_kind.split(":", 1)[1], rel.properties.get("name")
                if self.stores.resolve_code is not None:
                    found = self.stores.resolve_code(other_id)
                    name = found[2] if found else f"{name or other_id} (no longer in the code index)"
            else:
                label, name = rel.target_kind, None
            result.append(
                MemoryRelationship(
                    type=rel.rel_type, direction=direction, target_id=other_id, target_label=label,
                    target_name=name, properties=rel.properties,
                )
            )
        return result

    def _hit(
        self, row: MemoryRow, score: float, stale: dict[str, list[dict[str, Any]]] | None = None, *, detail: str = "full"
    ) -> MemoryHit:
        whole = f"memory_get(memory_id={row.id!r}, memory_type={row.memory_type!r}) returns the whole memory"
        metadata, elided = row.metadata, []
        if detail == "summary":
            content, cut = summarize(row.content, SUMMARY_CHARS, "memory_get returns the whole memory (see next)")
            metadata, elided = compact_metadata(row.metadata)
        else:
            content, cut = cut_text(row.content, HIT_CONTENT_CHARS, "memory_get returns the whole memory")
        changed = (stale or {}).get(row.id)
        return MemoryHit(
            id=row.id, memory_type=row.memory_type, content=content, score=round(score, 4), metadata=metadata,
            created_at=row.created_at, updated_at=row.updated_at, importance_score=row.importance_score,
            access_count=row.access_count,
            provenance=MemoryProvenance(
                version=row.version, updated_at=row.updated_at, sync_status=row.sync_status, stale=bool(changed),
                stale_reason=(
                    "anchored code changed since: " + ", ".join(a["qualified_name"] + (" (gone)" if a["current_hash"] is None else "") for a in changed)
                    + " — re-check it, then memory_update with confirm_anchors=true (or update it)"
                ) if changed else None,
            ),
            content_truncated=cut,
            metadata_elided=elided,
            scope=row.scope,  # type: ignore[arg-type]
            next=whole if cut or elided else None,
        )

    def ranked(self, request: MemorySearchInput, want: int) -> tuple[list[tuple[float, MemoryRow]], str]:
        """Memories of the requested scopes and types by meaning, best first, and the search mode."""
        self.stores.catch_up_shared()
        types = [str(t) for t in (request.memory_types or MEMORY_TYPES)]
        scopes = [str(s) for s in (request.scopes or MEMORY_SCOPES)]
        candidates = max(self.stores.settings.search_candidates, want * 2)
        mode = "hybrid"
        try:
            pooled = self._vector_candidates(request, types, candidates)
        except Exception as exc:  # noqa: BLE001 - degrade to the ledger, and say so
            log.warning("memory vector search failed; ledger keyword fallback", error=str(exc))
            mode = f"ledger-keyword (vector store unavailable: {type(exc).__name__}: {str(exc)[:200]})"
            pooled = self._ledger_candidates(request, types)
        # Rows are read best candidate first, a chunk at a time, until no candidate left can enter
        # the top ``want`` (a rank weight is at most 1): the same ranking, without reading and
        # decoding every candidate's row (most of a search's time with a few hundred memories).
        pooled = sorted(pooled, key=lambda hit: -hit.score)
        now = datetime.now(UTC).timestamp()
        bound = MAX_RANK_WEIGHT * (1.0 + self.stores.settings.memory_access_weight)
        ranked: list[tuple[float, MemoryRow]] = []
        top: list[float] = []  # the best ``want`` weighted scores so far (a min-heap)
        chunk = max(want, 16)
        for start in range(0, len(pooled), chunk):
            if len(top) >= want and pooled[start].score * bound < top[0]:
                break
            part = pooled[start : start + chunk]
            rows = self.stores.scopes.get_many([hit.id for hit in part], scopes)
            self._with_pending(list(rows.values()))
            for hit in part:
                row = rows.get(hit.id)
                if row is None or (row.deleted and not request.include_deleted) or row.memory_type not in types:
                    continue
                if request.min_importance is not None and row.importance_score < request.min_importance:
                    continue
                score = hit.score * self._rank_weight(row, now)
                ranked.append((score, row))
                if len(top) < want:
                    heapq.heappush(top, score)
                elif score > top[0]:
                    heapq.heapreplace(top, score)
        ranked.sort(key=lambda pair: (-pair[0], pair[1].id))
        return ranked, mode

    def _filter(self, request: MemorySearchInput) -> PayloadFilter:
        must: dict[str, list[Any]] = {}
        if not request.include_deleted:
            must["status"] = ["active"]
        for key, value in (request.metadata_filters or {}).items():
            must[f"metadata.{key}"] = list(value) if isinstance(value, list) else [value]
        ranges: dict[str, tuple[float | None, float | None]] = {}
        if request.time_range is not None and (request.time_range.start or request.time_range.end):
            ranges["created_ts"] = (epoch(request.time_range.start), epoch(request.time_range.end))
        if request.min_importance is not None:
            ranges["importance_score"] = (request.min_importance, None)
        return PayloadFilter(must_match=must, ranges=ranges)

    def _rank_weight(self, row: MemoryRow, now: float) -> float:
        """Importance × recency × use, in (0, MAX_RANK_WEIGHT × (1 + memory_access_weight)].

        Importance (the explicit ``importance_score``) and recency (half-life
        ``memory_recency_half_life_days`` since the last update) lower a memory's similarity by at
        most 25% and 15%. Use (REQ-MEM-FN-024) raises it by at most ``memory_access_weight``: a
        multiplier, so it orders near-equal matches and cannot lift a clearly weaker match."""
        settings = self.stores.settings
        age_days = max(0.0, (now - (epoch(row.updated_at) or now)) / 86_400)
        recency = 0.5 ** (age_days / settings.memory_recency_half_life_days)
        importance = min(1.0, max(0.0, row.importance_score))
        weight = (0.75 + 0.25 * importance) * (0.85 + 0.15 * recency)
        if settings.memory_access_weight > 0:
            weight *= 1.0 + settings.memory_access_weight * access_frequency(row.access_count, row.last_accessed_at, now)
        return weight

    def _vector_candidates(self, request: MemorySearchInput, types: list[str], candidates: int) -> list[VectorHit]:
        dense_query = self.stores.embedder.embed_query(request.query).tolist() if self.stores.settings.dense_embeddings else None
        sparse_query = sparse.query_vector(request.query)
        flt = self._filter(request)
        dense_all: list[VectorHit] = []
        sparse_all: list[VectorHit] = []
        for store in self.stores.scopes.opened(request.scopes):
            held = store.projected.memory_types(types, include_deleted=request.include_deleted)
            for memory_type in types:
                if memory_type not in held:
                    continue  # no memory of the type: its collection has nothing to find (and stays closed)
                dense, words = self.stores.vectors.ranked_lists(
                    store.projector.collection(memory_type), dense=dense_query, sparse=sparse_query,
                    candidates=candidates, payload_filter=flt, with_payload=False,
                )
                dense_all.extend(dense)
                sparse_all.extend(words)
        dense_all.sort(key=lambda h: -h.score)
        sparse_all.sort(key=lambda h: -h.score)
        if not dense_all and not sparse_all:
            return []
        # Similarity stays on an absolute scale (cosine) so a page of weak matches scores low;
        # the keyword list lifts exact-term matches within it.
        fused = minmax_fuse(dense_all[:candidates], sparse_all[:candidates], self.stores.settings.dense_weight)
        cosine = {h.id: max(0.0, h.score) for h in dense_all}
        return [
            VectorHit(id=h.id, score=0.5 * cosine.get(h.id, 0.0) + 0.5 * h.score if cosine else h.score, payload=h.payload)
            for h in fused
        ]

    def _ledger_candidates(self, request: MemorySearchInput, types: list[str]) -> list[VectorHit]:
        words = set(sparse.tokenize(request.query))
        start = epoch(request.time_range.start) if request.time_range else None
        end = epoch(request.time_range.end) if request.time_range else None
        hits: list[VectorHit] = []
        rows = (
            row for store in self.stores.scopes.opened(request.scopes)
            for row in store.ledger.iter_memories(memory_types=types, include_deleted=request.include_deleted)
        )
        for n, row in enumerate(rows):
            if n >= FALLBACK_SCAN_LIMIT:
                break
            created = epoch(row.created_at) or 0.0
            if (start is not None and created < start) or (end is not None and created > end):
                continue
            if any(
                (row.metadata.get(k) not in v) if isinstance(v, list) else row.metadata.get(k) != v
                for k, v in (request.metadata_filters or {}).items()
            ):
                continue
            tokens = set(sparse.tokenize(prepared_text(row.memory_type, row.content, row.metadata)))
            overlap = len(words & tokens)
            if overlap:
                hits.append(VectorHit(id=row.id, score=overlap / max(1, len(words)), payload={}))
        hits.sort(key=lambda h: -h.score)
        return hits

    def _by_scope(self, rows: Sequence[MemoryRow]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for row in rows:
            grouped.setdefault(row.scope, []).append(row.id)
        return grouped

    def _stale(self, rows: Sequence[MemoryRow]) -> dict[str, list[dict[str, Any]]]:
        """Memory id → its stale anchors, from each scope's ledger."""
        found: dict[str, list[dict[str, Any]]] = {}
        for scope, ids in self._by_scope(rows).items():
            found.update(self.stores.store(scope).ledger.stale_anchors(ids))
        return found

    def _record_access(self, rows: Sequence[MemoryRow]) -> None:
        """Count an access of each row (tallied; the ledger commits the counts off the read path).
        A usage statistic: a failure to count is logged and never fails the read."""
        for scope, ids in self._by_scope(rows).items():
            try:
                self.stores.store(scope).ledger.record_access(ids)
            except Exception as exc:  # noqa: BLE001 - the read has its answer; the counts are a statistic
                log.warning("memory access not counted", scope=scope, memories=len(ids), error=str(exc)[:200])

    def _with_pending(self, rows: list[MemoryRow]) -> list[MemoryRow]:
        """``rows`` with the accesses their ledgers have counted but not committed yet added (in place)."""
        for scope, ids in self._by_scope(rows).items():
            try:
                pending = self.stores.store(scope).ledger.pending_access(ids)
            except Exception as exc:  # noqa: BLE001 - no tally to add: the committed counts stand
                log.debug("uncommitted access counts not read", scope=scope, error=str(exc)[:200])
                continue
            if not pending:
                continue
            for row in rows:
                if row.scope == scope and row.id in pending:
                    count, at = pending[row.id]
                    row.access_count += count
                    row.last_accessed_at = max(row.last_accessed_at or "", at)
        return rows


def access_frequency(access_count: int, last_accessed_at: str | None, now: float) -> float:
    """A memory's use in [0, 1] (REQ-MEM-FN-024): ``log(1 + count) / log(1 + ACCESS_SATURATION)``,
    capped at 1, halved every ``ACCESS_HALF_LIFE_DAYS`` since the last access; 0 when never accessed."""
    if access_count <= 0:
        return 0.0
    frequency = min(1.0, math.log1p(access_count) / math.log1p(ACCESS_SATURATION))
    last = epoch(last_accessed_at) if last_accessed_at else None
    idle_days = max(0.0, (now - last) / 86_400) if last is not None else 0.0
    return frequency * 0.5 ** (idle_days / ACCESS_HALF_LIFE_DAYS)

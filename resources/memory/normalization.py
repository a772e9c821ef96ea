"""Memory normalization: snapshot → deduplication → orphan detection → embedding refresh →
cleanup → validation → swap.

Orphaned links (a relationship whose source memory, target memory or target code entity no
longer exists) are reported, and removed by the swap's transaction: each removal is audited
(``unlink``, the relationship as its previous value) under the run's request id, which
``Ledger.restore_links`` takes to put them back.

Nothing changes until the swap. The phases before it only read and plan; the next generation of
memory collections is built beside the live one from the ledger (stored vectors copied, stale
ones re-embedded), validated, and then one ledger transaction applies the merges and the
cleanup and makes the new generation live. A crash before that transaction leaves the ledger
and the live collections untouched (the half-built generation is dropped on the next run); a
crash after it is finished by the outbox, which the transaction filled. Memories written while
normalization runs are re-projected into the new generation from the audit trail.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from resources.faults import fault_point
from resources.memory.ledger import Ledger, MemoryRow, Merge, Relationship, now_iso
from resources.memory.projection import COLLECTIONS, GENERATION_KEY, MemoryProjector, collection_name, epoch

if TYPE_CHECKING:
    import numpy as np

log = structlog.get_logger("codemem.normalization")

PHASES = ("snapshot", "deduplication", "orphan_detection", "embedding_refresh", "cleanup", "validation", "swap")
BUILDING_KEY = "memory_generation_building"
BLOCK = 512
"""Rows per block of the all-pairs similarity scan (memory ~ BLOCK x n x 4 bytes)."""

Progress = Callable[[str, float], None]
"""``progress(phase, percent)``."""


class NormalizationError(RuntimeError):
    """Normalization stopped; nothing was applied (the message says why)."""


@dataclass
class NormalizationReport:
    """What a normalization found and did."""

    dry_run: bool
    phases: list[str]
    snapshot_path: str | None = None
    duplicate_groups: int = 0
    duplicates: int = 0
    merges: list[dict[str, Any]] = field(default_factory=list)
    orphan_links: list[dict[str, Any]] = field(default_factory=list)
    orphan_links_removed: int = 0
    restore_links: str | None = None
    """How to put the removed orphaned links back (the run's request id for ``restore_links``)."""
    similar_not_merged: list[dict[str, Any]] = field(default_factory=list)
    embeddings_refreshed: int = 0
    vectors_copied: int = 0
    cleanup: int = 0
    validation: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    generation: int | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (merge and orphan lists capped at 100 entries each)."""
        data = dict(self.__dict__)
        data["merges"] = self.merges[:100]
        data["orphan_links"] = self.orphan_links[:100]
        data["orphan_link_count"] = len(self.orphan_links)
        return data


def _completeness(row: MemoryRow) -> tuple[int, int, float, str]:
    """Most metadata filled, then longest content, then oldest: the duplicate to keep."""
    filled = sum(1 for v in row.metadata.values() if v not in (None, "", [], {}))
    return filled, len(row.content), -(epoch(row.created_at) or 0.0), row.id


FILLER_WORDS = frozenset(
    "a an the and or of to in on at for with by from as is are was were be been it its this that these those "
    "note nb fyi please also".split()
)
"""Words whose presence alone does not make two memories say different things."""


def content_words(text: str) -> frozenset[str]:
    """The words that carry a memory's meaning (lower-cased, punctuation and filler words dropped)."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    return frozenset(w for w in words if w not in FILLER_WORDS)


def same_statement(a: str, b: str) -> bool:
    """Two texts that embed alike are merged only if they use the same content words: cosine
    ≥ 0.95 also joins "Lock file f" and "Unlock file f" or "the x coordinate" and "the y
    coordinate" (measured on real docstrings, docs/memory.md), and those must both stay."""
    return content_words(a) == content_words(b)


def _plain(text: str) -> str:
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


def merged_metadata(keeper: MemoryRow, others: Sequence[MemoryRow]) -> dict[str, Any]:
    """The keeper's metadata, completed by the others': missing keys filled, lists united. A
    merged memory whose text differs from the keeper's beyond case, spacing and punctuation keeps
    its text in ``merged_contents`` (similar is not always the same: "the x coordinate" and "the y
    coordinate" embed above 0.95), so nothing it said leaves the live record."""
    merged = dict(keeper.metadata)
    variants = list(merged.get("merged_contents") or [])
    for other in others:
        if _plain(other.content) != _plain(keeper.content) and other.content not in variants:
            variants.append(other.content)
    if variants:
        merged["merged_contents"] = variants
    for other in others:
        for key, value in other.metadata.items():
            have = merged.get(key)
            if have in (None, "", [], {}):
                merged[key] = value
            elif isinstance(have, list) and isinstance(value, list):
                merged[key] = have + [v for v in value if v not in have]
    return merged


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


class Normalizer:
    """One normalization run over a project's ledger and memory collections."""

    def __init__(
        self,
        ledger: Ledger,
        projector: MemoryProjector,
        *,
        state_dir: Path,
        threshold: float = 0.95,
        code_exists: Callable[[str], bool] | None = None,
        memory_exists: Callable[[str], bool] | None = None,
        progress: Progress | None = None,
    ) -> None:
        """Prepare a run.

        Args:
            ledger: The system of record.
            projector: Writes projections (and knows the live generation).
            state_dir: Where snapshots go (``state_dir/snapshots``).
            threshold: Cosine similarity at which two memories of a type are duplicates.
            code_exists: Whether a code entity id is still in the code index (orphan detection;
                links to code are not checked without it).
            memory_exists: Whether a memory id exists in any scope, deleted or not (orphan
                detection; default: in this ledger).
            progress: Receives (phase, percent) updates.
        """
        self.ledger = ledger
        self.projector = projector
        self.state_dir = state_dir
        self.threshold = threshold
        self.code_exists = code_exists
        self.memory_exists = memory_exists or (lambda memory_id: self.ledger.get(memory_id) is not None)
        self.orphans: list[Relationship] = []
        self.progress = progress or (lambda phase, percent: None)
        self.near_misses: list[tuple[str, str, float]] = []

    # -- phases --------------------------------------------------------------------------------
    def _snapshot(self) -> str:
        target = self.state_dir / "snapshots" / f"memory-{now_iso().replace(':', '').replace('+', 'Z')}.db"
        self.ledger.backup_to(target)
        return str(target)

    def _vectors(self, rows: Sequence[MemoryRow]) -> tuple[dict[str, np.ndarray], set[str]]:
        """Stored dense vectors of rows whose projection is current; ids that need re-embedding."""
        import numpy as np  # numpy only where vectors are compared

        vectors: dict[str, np.ndarray] = {}
        stale: set[str] = set()
        by_type: dict[str, list[MemoryRow]] = defaultdict(list)
        for row in rows:
            by_type[row.memory_type].append(row)
        for memory_type, typed in by_type.items():
            collection = self.projector.collection(memory_type)
            for start in range(0, len(typed), 1000):
                chunk = typed[start : start + 1000]
                ids = [r.id for r in chunk]
                stored = self.projector.vectors.dense_vectors(collection, ids)
                payloads = {h.id: h.payload for h in self.projector.vectors.retrieve(collection, ids)}
                for row in chunk:
                    vector = stored.get(row.id)
                    payload = payloads.get(row.id) or {}
                    if vector is None or payload.get("content_hash") != row.content_hash or (
                        len(vector) != self.projector.embedder.dimension
                    ):
                        stale.add(row.id)
                    else:
                        vectors[row.id] = np.asarray(vector, dtype=np.float32)
        return vectors, stale

    def _embed_stale(self, rows: Sequence[MemoryRow], stale: set[str], vectors: dict[str, np.ndarray]) -> None:
        import numpy as np  # numpy only where vectors are compared

        todo = [r for r in rows if r.id in stale]
        for start in range(0, len(todo), 64):
            chunk = todo[start : start + 64]
            for row, vector in zip(chunk, self.projector.embed(chunk), strict=True):
                vectors[row.id] = np.asarray(vector, dtype=np.float32)
            self.progress("embedding_refresh", 100.0 * min(len(todo), start + 64) / max(1, len(todo)))

    def _duplicates(self, rows: Sequence[MemoryRow], vectors: dict[str, np.ndarray]) -> list[Merge]:
        """Groups of live memories of one type that are the same (content hash) or nearly so."""
        import numpy as np  # numpy only where vectors are compared

        uf = _UnionFind()
        best: dict[tuple[str, str], float] = {}
        by_type: dict[str, list[MemoryRow]] = defaultdict(list)
        for row in rows:
            if not row.deleted:
                by_type[row.memory_type].append(row)
        done = 0
        for typed in by_type.values():
            by_hash: dict[str, str] = {}
            for row in typed:
                first = by_hash.setdefault(row.content_hash, row.id)
                if first != row.id:
                    uf.union(first, row.id)
            with_vec = [r for r in typed if r.id in vectors]
            if len(with_vec) > 1:
                matrix = np.stack([vectors[r.id] for r in with_vec])
                norms = np.linalg.norm(matrix, axis=1, keepdims=True)
                matrix = matrix / np.maximum(norms, 1e-12)
                for start in range(0, len(with_vec), BLOCK):
                    block = matrix[start : start + BLOCK] @ matrix.T
                    rows_i, cols_j = np.nonzero(block >= self.threshold)
                    for i, j in zip(rows_i.tolist(), cols_j.tolist(), strict=True):
                        gi = start + i
                        if j <= gi:
                            continue
                        a, b = with_vec[gi].id, with_vec[j].id
                        if not same_statement(with_vec[gi].content, with_vec[j].content):
                            self.near_misses.append((a, b, round(float(block[i, j]), 4)))
                            continue
                        uf.union(a, b)
                        best[(a, b)] = float(block[i, j])
                    done += min(BLOCK, len(with_vec) - start)
                    self.progress("deduplication", 100.0 * done / max(1, len(rows)))
        groups: dict[str, list[MemoryRow]] = defaultdict(list)
        lookup = {r.id: r for r in rows}
        for memory_id in list(uf.parent):
            groups[uf.find(memory_id)].append(lookup[memory_id])
        merges: list[Merge] = []
        for members in groups.values():
            if len(members) < 2:
                continue
            keeper = max(members, key=_completeness)
            others = [m for m in members if m.id != keeper.id]
            sims = [v for (a, b), v in best.items() if a in {m.id for m in members}]
            merges.append(
                Merge(
                    keeper_id=keeper.id,
                    dropped_ids=[m.id for m in others],
                    metadata=merged_metadata(keeper, others),
                    similarity=round(min(sims), 4) if sims else 1.0,
                )
            )
        return merges

    def _orphans(self, rows: Sequence[MemoryRow]) -> list[dict[str, Any]]:
        """Relationships whose source memory, target memory or target code entity no longer
        exists (soft-deleted memories still exist: they can be restored)."""
        present = {row.id for row in rows}
        found: list[dict[str, Any]] = []
        self.orphans = []
        for rel in self.ledger.all_relationships():
            if rel.source_id not in present and self.ledger.get(rel.source_id) is None:
                reason = "source memory gone"
            elif rel.target_kind.startswith("code:"):
                if self.code_exists is None or self.code_exists(rel.target_id):
                    continue
                reason = "code no longer indexed"
            elif rel.target_kind.startswith("memory"):
                if rel.target_id in present or self.memory_exists(rel.target_id):
                    continue
                reason = "target memory gone"
            else:
                continue
            self.orphans.append(rel)
            found.append({"memory_id": rel.source_id, "type": rel.rel_type, "target_id": rel.target_id, "reason": reason})
        return found

    def _build(self, generation: int, rows: Sequence[MemoryRow], vectors: dict[str, np.ndarray], merges: Sequence[Merge], cleanup: set[str]) -> int:
        """Write the next generation's collections from the ledger rows (merged-away rows as deleted)."""
        dropped = {d for m in merges for d in m.dropped_ids}
        by_type: dict[str, list[Any]] = defaultdict(list)
        written = 0
        for row in rows:
            if row.id in cleanup:
                continue
            if row.id in dropped:
                row = MemoryRow(**{**row.__dict__, "deleted": True})
            by_type[row.memory_type].append(self.projector.point(row, vectors[row.id]))
        total = max(1, sum(len(v) for v in by_type.values()))
        for memory_type, points in by_type.items():
            collection = self.projector.collection(memory_type, generation)
            for start in range(0, len(points), 1000):
                self.projector.vectors.upsert(collection, points[start : start + 1000])
                written += len(points[start : start + 1000])
                self.progress("validation", 50.0 * written / total)
        for memory_type in COLLECTIONS:  # empty types get their (empty) collection too
            self.projector.collection(memory_type, generation)
        return written

    def _validate(self, generation: int, expected: dict[str, int]) -> dict[str, Any]:
        counts = {t: self.projector.vectors.count(collection_name(t, generation)) for t in COLLECTIONS}
        problems = {t: {"expected": expected.get(t, 0), "found": n} for t, n in counts.items() if n != expected.get(t, 0)}
        if problems:
            raise NormalizationError(f"the rebuilt collections do not match the ledger: {problems} — nothing was applied")
        return {"points_per_type": counts, "ok": True}

    # -- the run -----------------------------------------------------------------------------
    def run(self, *, phases: Sequence[str] | None = None, dry_run: bool = False) -> NormalizationReport:
        """Run the phases (all by default); ``dry_run`` reports what would change and changes nothing."""
        wanted = [p for p in PHASES if phases is None or p in phases]
        report = NormalizationReport(dry_run=dry_run, phases=wanted)
        apply = "swap" in wanted and not dry_run
        self._drop_abandoned_build()
        clock = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            report.seconds[phase] = round(now - clock, 3)
            clock = now

        if "snapshot" in wanted and not dry_run:
            fault_point("normalize:snapshot")
            self.progress("snapshot", 0.0)
            report.snapshot_path = self._snapshot()
            lap("snapshot")
        started_at = now_iso()
        rows = list(self.ledger.iter_memories())
        vectors, stale = self._vectors(rows)
        merges: list[Merge] = []
        if "deduplication" in wanted:
            fault_point("normalize:deduplication")
            self._embed_stale([r for r in rows if not r.deleted], stale, vectors)
            merges = self._duplicates(rows, vectors)
            report.duplicate_groups = len(merges)
            report.similar_not_merged = [
                {"a": a, "b": b, "similarity": sim} for a, b, sim in self.near_misses[:100]
            ]
            report.duplicates = sum(len(m.dropped_ids) for m in merges)
            report.merges = [
                {"keeper": m.keeper_id, "merged": m.dropped_ids, "similarity": m.similarity} for m in merges
            ]
            lap("deduplication")
        if "orphan_detection" in wanted:
            fault_point("normalize:orphan_detection")
            self.progress("orphan_detection", 0.0)
            report.orphan_links = self._orphans(rows)
            lap("orphan_detection")
        if "embedding_refresh" in wanted:
            fault_point("normalize:embedding_refresh")
            report.embeddings_refreshed = len(stale)
            if apply:
                self._embed_stale(rows, stale - vectors.keys(), vectors)
            lap("embedding_refresh")
        cleanup: set[str] = set()
        if "cleanup" in wanted:
            fault_point("normalize:cleanup")
            cleanup = set(self.ledger.expired_deletions())
            report.cleanup = len(cleanup)
            lap("cleanup")
        if not apply:
            return report
        self._embed_stale(rows, {r.id for r in rows} - vectors.keys(), vectors)
        report.vectors_copied = len(rows) - len(stale)
        generation = self.projector.generation + 1
        self.ledger.set_meta(BUILDING_KEY, str(generation))
        try:
            if "validation" in wanted:
                fault_point("normalize:validation")
            self._build(generation, rows, vectors, merges, cleanup)
            expected: dict[str, int] = defaultdict(int)
            for row in rows:
                if row.id not in cleanup:
                    expected[row.memory_type] += 1
            report.validation = self._validate(generation, expected)
            lap("validation")
            fault_point("normalize:swap")
            self.progress("swap", 90.0)
            old = self.projector.generation
            with self.projector.write_lock:
                changed = self.ledger.changed_since(started_at)
                request_id = f"normalize-{started_at}"
                report.applied = self.ledger.apply_normalization(
                    merges, sorted(cleanup), meta={GENERATION_KEY: str(generation), BUILDING_KEY: ""}, requeue=changed,
                    request_id=request_id, orphan_links=self.orphans,
                )
                report.orphan_links_removed = report.applied.get("unlinked", 0)
                if report.orphan_links_removed:
                    report.restore_links = request_id
                self.projector.refresh_generation()
        except BaseException:
            self.projector.drop_collections(generation)
            self.ledger.set_meta(BUILDING_KEY, "")
            raise
        report.generation = generation
        fault_point("normalize:after_swap")
        self.projector.drop_collections(old)
        lap("swap")
        self.progress("swap", 100.0)
        return report

    def _drop_abandoned_build(self) -> None:
        """A run that died before its swap left a half-built generation, one that died right after
        it left the previous generation: drop both."""
        building = self.ledger.meta(BUILDING_KEY)
        live = self.projector.generation
        if building and int(building) != live:
            log.info("dropping the collections of an abandoned normalization", generation=building)
            self.projector.drop_collections(int(building))
        if building:
            self.ledger.set_meta(BUILDING_KEY, "")
        for old in range(max(0, live - 3), live):
            self.projector.drop_collections(old)

"""Memory search quality with and without access frequency in the ranking (REQ-MEM-FN-024, issue 20
item 2): ``python -m bench.memory --ranking`` (~2 min on 2 cores).

A fresh ``CodeMemService`` (temporary project, embedded stores) holds ``RANKING_MEMORIES`` memories
from ``bench.memory``'s generator, 75 of each of the 8 types, importance 0.1–1.0 and created over
the past year (as the latency fill), embedded by the **real local model** (quality needs real
vectors; the latency fill's are random). Each memory is about a subject the generator draws
first — a component, an action and an object ("the search indexer … paginate … invoice rows").

**Labelled queries.** One query per sampled memory whose embedded text names its subject, from
templates that name it in other words ("how do we paginate invoice rows in the search indexer",
"search indexer fails to paginate invoice rows", …). Relevant: every memory whose embedded text
names the same component, action and object (usually just that one). Metrics over the queries:
R@1 (a relevant memory first) and MRR@10. Rankings are read with ``MemoryReads.ranked`` (what
memory_search pages), which counts no access, so measuring leaves the counts alone.

Each scenario compares ``memory_access_weight`` 0 (the ranking before access frequency: the factor
is left out) with the shipped default (0.03), on the same access counts (reset between scenarios):

* ``no_use``: nothing accessed yet — the rankings must be identical;
* ``realistic_use``: half of the queries are asked 3 times as an agent would (memory_search, then
  memory_get of the first relevant hit), counting what those reads count; measured on those
  queries (``repeated``) and on the other half (``held_out``, not asked during the use);
* ``hot_random``: 20% of the memories, drawn at random, accessed 150 times each (saturated);
* ``hot_rivals`` (worst case): for every query, its best-scoring non-relevant memory at weight 0
  accessed 150 times — the only way access frequency can cost quality is such a rival within
  ~3% (1 - 1/1.03) of the relevant memory's score (reported, not a pass/fail figure);
* ``near_ties``: ``RANKING_PAIRS`` memories get a twin (the same text plus one sentence naming a
  ticket); one of each pair, drawn at random, is opened 20 times with memory_get; the share of
  pairs where the used one ranks above its twin (about half at weight 0, by chance).

Pass: R@1 no lower and MRR@10 no more than ``MRR_TOLERANCE`` lower with access on, in ``no_use``,
both halves of ``realistic_use`` and ``hot_random``; the used twin first in ≥ ``NEAR_TIE_TARGET``
of the near ties. The tolerance is one query of 100 moving one place below the first rank
(1/3 - 1/4 = 0.083 of MRR, over 100 queries); access frequency is a prior on what is used,
uninformative for the held-out half by construction, so it can only tie or cost a near-tie there.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.memory import (
    PROJECT_BATCH,
    SPAN_DAYS,
    MemoryGenerator,
    _kill_leftover_redis,
    _pause_sync,
    _redis_pid,
)

RANKING_MEMORIES = 600
RANKING_QUERIES = 200
RANKING_PAIRS = 40
HOT_SHARE = 0.2
HOT_ACCESSES = 150
"""Accesses of a hot memory: 3× ``ACCESS_SATURATION``, as much as the ranking can express."""
PAIR_USES = 20
MRR_TOLERANCE = 0.001
NEAR_TIE_TARGET = 0.8
TEMPLATES = (
    "how do we {action} {object} in the {component}",
    "{component} fails to {action} {object}",
    "function that can {action} {object} for the {component}",
    "decision about how the {component} should {action} {object}",
)


class LabelledGenerator(MemoryGenerator):
    """``MemoryGenerator``, noting each memory's subject: the component, action and object ``item``
    draws first."""

    def __init__(self, rng: random.Random) -> None:
        """Draw everything from ``rng``."""
        super().__init__(rng)
        self.picks: list[str] = []

    def _pick(self, pool: tuple[str, ...]) -> str:
        value = super()._pick(pool)
        self.picks.append(value)
        return value

    def labelled(self, memory_type: str) -> tuple[str, dict[str, Any], tuple[str, str, str]]:
        """One memory: (content, metadata, (component, action, object))."""
        self.picks = []
        content, meta = self.item(memory_type)
        component, action, obj = self.picks[:3]
        return content, meta, (component, action, obj)


def _reset_access(memory: Any) -> None:
    memory.ledger.flush_access()
    with memory.ledger._transaction() as conn:
        conn.execute("UPDATE memories SET access_count=0, last_accessed_at=NULL")


def _ranking(memory: Any, query: str, limit: int = 10) -> list[tuple[str, float]]:
    from resources.schemas.memory import MemorySearchInput

    ranked, _ = memory.reads.ranked(MemorySearchInput(query=query, limit=limit), limit)
    return [(row.id, score) for score, row in ranked[:limit]]


def _quality(memory: Any, queries: list[tuple[str, set[str]]], weight: float) -> dict[str, float]:
    """R@1 and MRR@10 of ``queries`` at access weight ``weight``."""
    memory.stores.settings.memory_access_weight = weight
    firsts, reciprocal = [], []
    for text, gold in queries:
        ids = [i for i, _ in _ranking(memory, text)]
        rank = next((n for n, i in enumerate(ids, 1) if i in gold), None)
        firsts.append(1.0 if rank == 1 else 0.0)
        reciprocal.append(1.0 / rank if rank else 0.0)
    return {"r_at_1": round(statistics.fmean(firsts), 4), "mrr_at_10": round(statistics.fmean(reciprocal), 4)}


def shipped_weight() -> float:
    """The default ``memory_access_weight`` (what a user gets)."""
    from resources.settings import Settings

    return float(Settings.model_fields["memory_access_weight"].default)


def _compare(memory: Any, queries: list[tuple[str, set[str]]]) -> dict[str, Any]:
    before, after = _quality(memory, queries, 0.0), _quality(memory, queries, shipped_weight())
    return {"queries": len(queries), "off": before, "on": after,
            "delta_mrr": round(after["mrr_at_10"] - before["mrr_at_10"], 4),
            "delta_r_at_1": round(after["r_at_1"] - before["r_at_1"], 4)}


def measure_ranking(work: Path, seed: int = 24) -> dict[str, Any]:
    """Fill a fresh service with real embeddings and measure every scenario (see the module doc)."""
    from query_server.service import CodeMemService
    from resources.memory.ledger import NewMemory
    from resources.memory.projection import prepared_text
    from resources.schemas.memory import (
        MemoryGetInput,
        MemorySearchInput,
        validate_metadata,
    )
    from resources.settings import Settings

    rng = random.Random(seed)
    gen = LabelledGenerator(rng)
    root = work / "project_ranking"
    root.mkdir(parents=True, exist_ok=True)
    service = CodeMemService(Settings(project_root=root, state_dir=work / "state_ranking"))
    redis_pid = _redis_pid(service)
    memory = service.memory
    out: dict[str, Any] = {"memories": RANKING_MEMORIES, "seed": seed, "access_weight": shipped_weight()}
    started = time.perf_counter()
    try:
        _pause_sync(memory)
        service.graph.ensure_schema()
        now = datetime.now(UTC)

        def new(memory_type: str, content: str, meta: dict[str, Any]) -> NewMemory:
            created = (now - timedelta(seconds=rng.uniform(0, SPAN_DAYS * 86_400))).isoformat(timespec="microseconds")
            return NewMemory(memory_type=memory_type, content=content,
                             metadata=validate_metadata(memory_type, meta, content=content),
                             importance_score=round(rng.uniform(0.1, 1.0), 2), created_at=created, updated_at=created)

        def project(ids: list[str]) -> None:
            for start in range(0, len(ids), PROJECT_BATCH):
                report = memory.projector.project(ids[start : start + PROJECT_BATCH])
                if report.failed:
                    raise RuntimeError(f"projection failed: {report.last_error}")

        drafts, subjects = [], []
        for n in range(RANKING_MEMORIES):
            memory_type = gen.TYPES[n % len(gen.TYPES)]
            content, meta, subject = gen.labelled(memory_type)
            drafts.append((memory_type, content, meta))
            subjects.append(subject)
        rows = memory.ledger.add([new(*draft) for draft in drafts])
        project([row.id for row in rows])
        out["fill_s"] = round(time.perf_counter() - started, 1)
        texts = {row.id: prepared_text(row.memory_type, row.content, row.metadata).lower() for row in rows}

        def relevant(subject: tuple[str, str, str]) -> set[str]:
            return {i for i, text in texts.items() if all(word in text for word in subject)}

        named = [(row, subject) for row, subject in zip(rows, subjects, strict=True) if row.id in relevant(subject)]
        rng.shuffle(named)
        labelled = []
        for row, (component, action, obj) in named[:RANKING_QUERIES]:
            text = rng.choice(TEMPLATES).format(component=component, action=action, object=obj)
            labelled.append((text, relevant((component, action, obj)), row))
        queries = [(text, gold) for text, gold, _ in labelled]
        out["queries"] = len(queries)
        out["mean_relevant_per_query"] = round(statistics.fmean(len(g) for _, g in queries), 2)

        # no use yet: the access factor is 0 for every memory
        out["no_use"] = _compare(memory, queries)
        out["no_use"]["identical_rankings"] = all(
            _rankings_equal(memory, text) for text, _ in queries[:50]
        )

        # realistic use: half the queries asked 3 times, the first relevant hit opened
        memory.stores.settings.memory_access_weight = shipped_weight()
        repeated, held_out = queries[1::2], queries[0::2]
        for _ in range(3):
            for text, gold in repeated:
                found = memory.memory_search(MemorySearchInput(query=text, limit=10))
                hit = next((h for h in found.results if h.id in gold), None)
                if hit is not None:
                    memory.memory_get(MemoryGetInput(memory_id=hit.id, memory_type=hit.memory_type))
        memory.ledger.flush_access()
        counts = [row.access_count for row in memory.ledger.get_many([row.id for row in rows]).values()]
        out["realistic_use"] = {
            "accessed_memories": sum(1 for c in counts if c), "max_access_count": max(counts),
            "repeated": _compare(memory, repeated), "held_out": _compare(memory, held_out),
        }

        # 20% of the memories, at random, used as much as counting can express
        _reset_access(memory)
        hot = rng.sample([row.id for row in rows], int(HOT_SHARE * len(rows)))
        for _ in range(HOT_ACCESSES):
            memory.ledger.record_access(hot)
        memory.ledger.flush_access()
        out["hot_random"] = {"hot_memories": len(hot), **_compare(memory, queries)}

        # worst case: each query's best non-relevant memory (at weight 0) used as much as that
        _reset_access(memory)
        memory.stores.settings.memory_access_weight = 0.0
        rivals = []
        for text, gold in queries:
            rival = next((i for i, _ in _ranking(memory, text) if i not in gold), None)
            if rival is not None:
                rivals.append(rival)
        for _ in range(HOT_ACCESSES):
            memory.ledger.record_access(sorted(set(rivals)))
        memory.ledger.flush_access()
        out["hot_rivals"] = {"rivals": len(set(rivals)), **_compare(memory, queries)}

        # near ties: twins of RANKING_PAIRS memories, one of each pair used
        _reset_access(memory)
        pairs = labelled[:RANKING_PAIRS]
        twins = memory.ledger.add([  # same type, metadata, importance and age: only the text differs
            NewMemory(memory_type=row.memory_type, content=row.content + f" Noted again in ticket #{rng.randrange(20_000, 30_000)}.",
                      metadata=dict(row.metadata), importance_score=row.importance_score, created_at=row.created_at,
                      updated_at=row.updated_at)
            for _, _, row in pairs
        ])
        project([t.id for t in twins])
        used = []
        for (_, _, row), twin in zip(pairs, twins, strict=True):
            chosen = rng.choice((row, twin))
            used.append(chosen.id)
            for _ in range(PAIR_USES):
                memory.memory_get(MemoryGetInput(memory_id=chosen.id, memory_type=chosen.memory_type))
        memory.ledger.flush_access()
        out["near_ties"] = {"pairs": len(pairs), "uses_of_the_used_twin": PAIR_USES}
        for label, weight in (("off", 0.0), ("on", shipped_weight())):
            memory.stores.settings.memory_access_weight = weight
            wins, gaps, both = 0, [], 0
            for (text, _, row), twin, favourite in zip(pairs, twins, used, strict=True):
                scores = dict(_ranking(memory, text, 50))
                if row.id not in scores or twin.id not in scores:
                    continue
                both += 1
                other = twin.id if favourite == row.id else row.id
                wins += scores[favourite] > scores[other]
                gaps.append(abs(scores[row.id] - scores[twin.id]) / max(scores[row.id], scores[twin.id]))
            out["near_ties"][label] = {
                "pairs_ranked": both, "used_twin_ranks_higher": round(wins / max(1, both), 4),
                "median_relative_gap": round(statistics.median(gaps), 4) if gaps else None,
            }
        memory.stores.settings.memory_access_weight = shipped_weight()
    finally:
        service.close()
        killed = _kill_leftover_redis(redis_pid, work)
        if killed:
            print(f"   ended leftover redis-server {killed}", file=sys.stderr)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _rankings_equal(memory: Any, text: str) -> bool:
    memory.stores.settings.memory_access_weight = 0.0
    plain = _ranking(memory, text)
    memory.stores.settings.memory_access_weight = shipped_weight()
    weighted = _ranking(memory, text)
    return [i for i, _ in plain] == [i for i, _ in weighted]


def print_ranking(result: dict[str, Any]) -> bool:
    """Print the ranking scenarios; True when quality regressed where it must not (no_use,
    realistic_use, hot_random) or the used twin does not win the near ties."""
    print(f"== ranking quality: {result['memories']} memories, {result['queries']} labelled queries "
          f"({result['mean_relevant_per_query']} relevant each), access weight 0 vs {result['access_weight']}")
    failed = False

    def line(name: str, entry: dict[str, Any], guarded: bool) -> None:
        nonlocal failed
        a, b = entry["off"], entry["on"]
        verdict = ""
        if guarded:
            ok = entry["delta_mrr"] >= -MRR_TOLERANCE and entry["delta_r_at_1"] >= 0
            verdict = "(no regression) " + ("PASS" if ok else "FAIL")
            failed |= not ok
        print(f"   {name:26s} R@1 {a['r_at_1']:.3f} -> {b['r_at_1']:.3f}  MRR@10 {a['mrr_at_10']:.3f} -> "
              f"{b['mrr_at_10']:.3f}  {verdict}")

    line("no_use", result["no_use"], True)
    line("realistic_use (repeated)", result["realistic_use"]["repeated"], True)
    line("realistic_use (held out)", result["realistic_use"]["held_out"], True)
    line("hot_random", result["hot_random"], True)
    line("hot_rivals (worst case)", result["hot_rivals"], False)
    ties = result["near_ties"]
    a, b = ties["off"], ties["on"]
    ok = b["used_twin_ranks_higher"] >= NEAR_TIE_TARGET
    failed |= not ok
    print(f"   near_ties ({ties['pairs']} pairs)      used twin first {a['used_twin_ranks_higher']:.2f} -> "
          f"{b['used_twin_ranks_higher']:.2f} (median gap {a['median_relative_gap']})  (>= {NEAR_TIE_TARGET}) "
          f"{'PASS' if ok else 'FAIL'}")
    return failed

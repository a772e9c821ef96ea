"""memory_statistics: counts per type, sync states, store and cache health and the projection
queue, over every scope in use and for each scope on its own."""

from __future__ import annotations

from typing import Any

from query_server.memory.stores import MemoryStores
from resources.memory.projection import COLLECTIONS
from resources.schemas.memory import MEMORY_TYPES, MemoryStatisticsResult


def memory_statistics(stores: MemoryStores) -> MemoryStatisticsResult:
    """Counts per type, sync states, store and cache health, the projection queue: totals over
    every scope in use, and each scope on its own."""
    storage: dict[str, dict[str, Any]] = {}
    opened = stores.scopes.opened()
    per_scope: dict[str, dict[str, Any]] = {}
    try:
        sizes = dict.fromkeys(COLLECTIONS, 0)
        for store in opened:
            points = {t: stores.vectors.count(store.projector.collection(t)) for t in COLLECTIONS}
            per_scope[store.name] = {"points_per_type": points}
            for t, n in points.items():
                sizes[t] += n
        storage["vector_store"] = {"connected": True, "points_per_type": sizes}
    except Exception as exc:  # noqa: BLE001 - statistics report the outage
        storage["vector_store"] = {"connected": False, "error": str(exc)}
    graph = stores.projector.graph
    if graph is not None:
        try:
            storage["graph"] = {"connected": True, **graph.health()}
        except Exception as exc:  # noqa: BLE001
            storage["graph"] = {"connected": False, "error": str(exc)}
    storage["ledger"] = {"path": stores.ledger.location, "bytes": stores.ledger.size_bytes()}
    cache_stats: dict[str, Any] = {}
    cache = getattr(stores.embedder, "cache", None)
    if cache is not None:
        cache_stats = {"entries": len(cache), "hit_rate": round(cache.hit_rate, 4)}
    counts: dict[str, dict[str, int]] = {str(t): {"total": 0, "active": 0, "deleted": 0} for t in MEMORY_TYPES}
    sync: dict[str, int] = {"synced": 0, "pending": 0, "failed": 0}
    outbox: dict[str, Any] = {"pending": 0, "max_attempts": 0, "last_error": None}
    for store in opened:
        scope_counts = store.ledger.counts()
        scope_sync = store.projected.sync_counts()  # global: this project's replica says what is projected
        scope_outbox = store.projected.outbox_stats()
        for memory_type, numbers in scope_counts.items():
            total = counts.setdefault(memory_type, {"total": 0, "active": 0, "deleted": 0})
            for k, n in numbers.items():
                total[k] += n
        for status, n in scope_sync.items():
            sync[status] = sync.get(status, 0) + n
        outbox["pending"] += scope_outbox["pending"]
        outbox["max_attempts"] = max(outbox["max_attempts"], scope_outbox["max_attempts"])
        outbox["last_error"] = outbox["last_error"] or scope_outbox["last_error"]
        per_scope.setdefault(store.name, {}).update({
            "ledger": store.ledger.location,
            "memory_counts": {t: n for t, n in scope_counts.items() if n["total"]},
            "sync_status": scope_sync, "outbox": scope_outbox,
        })
    for scope, reason in dict(stores.scopes.warnings).items():  # on, but unreachable: skipped by reads
        per_scope.setdefault(scope, {})["skipped"] = reason
    return MemoryStatisticsResult(
        memory_counts=counts, sync_status=sync, storage=storage, cache=cache_stats, outbox=outbox, scopes=per_scope,
    )

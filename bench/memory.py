"""Memory tool latency: memory_add and memory_search at 10k and 100k memories (issue "project memory").

Usage: ``python -m bench.memory [--sizes 10000,100000] [--quick] [--queries 200] [--adds 200] [--what-if]``.

Targets: ``memory_add`` p95 ≤ 20 ms with the embedding served from the embedding cache (seed:
100 ms), ``memory_search`` p95 ≤ 50 ms at 100k memories, query embedding included (seed: 500 ms).

Each size gets a fresh ``CodeMemService`` (temporary project and state dir, embedded qdrant-edge
and FalkorDB, the real local model behind the embedding cache). The store is filled the way
``bench.latency`` fills the code collection: memories with realistic varied content and valid
typed metadata (requirements, designs, patterns, components, functions, test runs, sessions,
preferences: a small generator, spread over the 8 types, created over the past year) are written
to the ledger in big ``Ledger.add`` batches and projected with ``MemoryProjector.project`` in
batches of 1,000 with **random unit dense vectors** (``vectors_of``: the embedder is skipped —
100k real embeddings take ~40 min on 2 cores; exact search time does not depend on the values).
Sparse vectors, payloads and graph nodes are the real ones. The background sync thread is
paused during the fill (it would embed the queued memories with the real model) and resumed for
the measurements. The graph schema (``ensure_schema``: an ``id`` index per memory label) is created
first, as the server's start-up index run does; without it every projection's ``MERGE`` scans
the label (the memory tools never create the schema themselves).

Measured, one call at a time:

* ``memory_add`` with the embedding **cached** (the prepared texts were embedded once through
  ``service.embedder.embed_documents`` beforehand, so the cache answers) and **cold** (new texts:
  the local model runs inside the call), with a per-call breakdown: cache lookup, conflict check
  (hash, identity key, dense near-duplicate search), ledger commit, projection (vector upsert,
  graph merge, outbox mark) and the rest (validation, re-read, result);
* ``memory_search`` (limit 10) over all 8 types, over 2 types (``memory_types``), and with a
  metadata filter + ``time_range`` (last 90 days) over all types — each with its own distinct
  queries, so the query embedding is computed by the model inside the call — plus the first
  set repeated (the query embedding now comes from the cache: the store-side cost alone).
  Variants are interleaved query by query so machine noise hits them alike.

``--what-if`` then re-times ``memory_add`` (cached) and the searches with the source change these
numbers call for, applied from outside: payload indexes on ``status``, ``created_ts`` and
``metadata.status`` and candidate lists fetched without payloads (not the shipped configuration).

Prints p50/p95 against the targets; writes ``bench/results/memory.json``. ``main`` runs one
``run_size`` per size; further measurements on the filled service go in ``run_size``.

``--ranking`` measures search *quality* instead (``bench.memory_ranking``, ~2 min): R@1 and MRR@10
of labelled queries over memories embedded by the real model, with access frequency in the
ranking (REQ-MEM-FN-024) off and on, and whether a frequently used memory wins a near tie; it
writes ``bench/results/memory_ranking.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.latency import _percentiles, rng_vectors

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "memory.json"
RANKING_RESULTS = REPO_ROOT / "bench" / "results" / "memory_ranking.json"
LEDGER_BATCH = 5_000
PROJECT_BATCH = 1_000
SPAN_DAYS = 365
RECENT_DAYS = 90
TARGETS = {"add_cached": 20.0, "search_all": 50.0}
"""p95 targets in ms: memory_add without embedding, memory_search at 100k (query embedded)."""

# -- content generator ----------------------------------------------------------------------------

COMPONENTS = (
    "auth service", "billing worker", "search indexer", "payment gateway", "notification queue", "user profile store",
    "report exporter", "session cache", "rate limiter", "audit log", "feature flag client", "webhook dispatcher",
    "image resizer", "graph loader", "schema migrator", "api gateway", "job scheduler", "metrics collector",
    "config loader", "email renderer", "invoice generator", "document parser", "websocket hub", "backup agent",
    "permission checker", "tenant router", "upload handler", "cli frontend", "admin dashboard", "sync daemon",
)
ACTIONS = (
    "retry", "validate", "cache", "paginate", "stream", "batch", "encrypt", "deduplicate", "throttle", "log",
    "serialize", "index", "compress", "authorize", "expire", "reconcile", "migrate", "shard", "normalize", "audit",
    "debounce", "prefetch", "sign", "redact", "checkpoint",
)
OBJECTS = (
    "failed requests", "user tokens", "invoice rows", "search results", "webhook payloads", "uploaded files",
    "session cookies", "audit events", "feature flags", "email templates", "database migrations", "api keys",
    "tenant settings", "background jobs", "metrics samples", "graph edges", "price quotes", "refund requests",
    "password resets", "notification digests", "report snapshots", "config overrides", "cursor tokens",
    "thumbnail images", "permission grants",
)
CONSTRAINTS = (
    "within 200 ms at p95", "without blocking the event loop", "for at most five attempts with exponential backoff",
    "before the response is sent", "in a single database transaction", "without holding a global lock",
    "for every tenant separately", "even when the upstream provider is down", "with an idempotency key",
    "in under 50 MB of memory", "at least once per hour", "behind the feature flag", "on the read replica",
    "with structured JSON logs", "without leaking personal data", "in constant memory per request",
)
TECH = (
    "PostgreSQL", "Redis", "SQLite", "Kafka", "gRPC", "FastAPI", "React", "pydantic", "asyncio", "S3", "Celery",
    "OpenTelemetry", "Terraform", "Docker", "nginx", "GraphQL", "protobuf", "Elasticsearch", "RabbitMQ", "JWT",
)
REASONS = (
    "the previous approach lost writes on crash", "latency doubled under load", "the team already operates it",
    "it keeps the public API stable", "tests became flaky with shared state", "the vendor SDK is unmaintained",
    "we need an audit trail for compliance", "memory grew without bound on large tenants",
    "retries caused duplicate charges", "the schema changed twice this quarter", "cold starts were too slow",
)
LANGUAGES = ("python", "typescript", "go", "rust", "java")
VERBS = ("get", "load", "save", "parse", "build", "check", "send", "fetch", "render", "apply", "merge", "resolve")
NOUNS = ("user", "invoice", "token", "session", "config", "report", "event", "payload", "quote", "tenant", "job", "grant")
AREAS = ("AUTH", "BILL", "SRCH", "PAY", "NOTIF", "USER", "RPT", "API", "SEC", "OPS", "DATA", "UI")
PREF_KEYS = ("quotes", "line_length", "test_framework", "docstring_style", "import_order", "naming", "logging",
             "error_handling", "async_style", "formatter", "type_checker", "commit_style")
QUESTIONS = (
    "how do we {action} {object} in the {component}",
    "why did we choose {tech} for the {component}",
    "{component} fails to {action} {object}",
    "decision about how to {action} {object}",
    "requirement for the {component} to {action} {object} {constraint}",
    "pattern to {action} {object} with {tech}",
    "test failures in the {component} after the {action} change",
    "what did we decide last session about {object}",
    "preferred way to {action} {object} in {language}",
    "which component owns {object} and talks to {tech}",
    "function that can {action} {object} for the {component}",
    "known problems when we {action} {object} {constraint}",
)


class MemoryGenerator:
    """Realistic varied memories (content + valid typed metadata) and search queries."""

    TYPES = ("requirements", "design", "code_pattern", "component", "function", "test_history", "session",
             "user_preference")

    def __init__(self, rng: random.Random) -> None:
        """Draw everything from ``rng`` (a fixed seed gives the same corpus)."""
        self.rng = rng
        self.serial = 0

    def _pick(self, pool: tuple[str, ...]) -> str:
        return self.rng.choice(pool)

    def _sentence(self) -> str:
        r = self.rng
        options = (
            f"The {self._pick(COMPONENTS)} must {self._pick(ACTIONS)} {self._pick(OBJECTS)} {self._pick(CONSTRAINTS)}.",
            f"We use {self._pick(TECH)} to {self._pick(ACTIONS)} {self._pick(OBJECTS)} because {self._pick(REASONS)}.",
            f"When the {self._pick(COMPONENTS)} cannot {self._pick(ACTIONS)} {self._pick(OBJECTS)}, it falls back "
            f"to the {self._pick(COMPONENTS)} and records an audit event.",
            f"See ticket #{r.randrange(1, 20_000)}: {self._pick(OBJECTS)} were not {self._pick(ACTIONS)}d "
            f"{self._pick(CONSTRAINTS)}.",
            f"`{self._func()}` in `{self._path()}` is the entry point; it calls `{self._func()}` and "
            f"`{self._func()}`.",
            f"Measured {r.randrange(2, 900)} ms at p95 with {r.randrange(1, 64)} workers on {self._pick(TECH)}.",
        )
        return r.choice(options)

    def _text(self, low: int, high: int) -> str:
        return " ".join(self._sentence() for _ in range(self.rng.randint(low, high)))

    def _func(self) -> str:
        return f"{self._pick(VERBS)}_{self._pick(NOUNS)}{self.rng.choice(('', 's', '_by_id', '_batch', '_async'))}"

    def _path(self) -> str:
        package = self._pick(COMPONENTS).replace(" ", "_")
        return f"src/{package}/{self._pick(NOUNS)}_{self._pick(('api', 'store', 'models', 'tasks', 'utils'))}.py"

    def item(self, memory_type: str) -> tuple[str, dict[str, Any]]:
        """One memory of ``memory_type``: (content, metadata as a client would send it)."""
        r = self.rng
        self.serial += 1
        component, action, obj = self._pick(COMPONENTS), self._pick(ACTIONS), self._pick(OBJECTS)
        title = f"{action.capitalize()} {obj} in the {component}"
        if memory_type == "requirements":
            meta = {"requirement_id": f"REQ-{self._pick(AREAS)}-{self.serial:05d}", "title": title,
                    "priority": self._pick(("Critical", "High", "Medium", "Low")),
                    "status": self._pick(("Draft", "Approved", "Implemented", "Verified"))}
            return f"The {component} must {action} {obj} {self._pick(CONSTRAINTS)}. " + self._text(1, 3), meta
        if memory_type == "design":
            meta = {"design_type": self._pick(("ADR", "Specification", "Architecture", "Interface")), "title": title,
                    "decision": f"Use {self._pick(TECH)} to {action} {obj}", "rationale": self._pick(REASONS),
                    "status": self._pick(("Proposed", "Accepted", "Deprecated", "Superseded"))}
            return self._text(2, 5), meta
        if memory_type == "code_pattern":
            func = self._func()
            meta = {"pattern_name": f"{action} {obj} with {self._pick(TECH)}",
                    "pattern_type": self._pick(("Template", "Convention", "Idiom", "Architecture")),
                    "language": self._pick(LANGUAGES), "code_template": f"def {func}(request):\n    return {action}(request)\n",
                    "usage_context": f"whenever the {component} has to {action} {obj}"}
            return self._text(1, 3), meta
        if memory_type == "component":
            meta = {"component_id": f"{component.replace(' ', '-')}-{self.serial}", "name": component.title(),
                    "component_type": self._pick(("Frontend", "Backend", "Agent", "Library", "Service", "Database")),
                    "file_path": self._path()}
            return f"The {component} owns {obj}. " + self._text(1, 4), meta
        if memory_type == "function":
            func, start = self._func(), r.randrange(1, 2_000)
            meta = {"name": func, "signature": f"def {func}({self._pick(NOUNS)}_id: str, *, limit: int = 100) -> list[dict]",
                    "file_path": self._path(), "start_line": start, "end_line": start + r.randrange(3, 80),
                    "language": self._pick(LANGUAGES), "docstring": f"{action.capitalize()} {obj} for the {component}."}
            return self._text(1, 2), meta
        if memory_type == "test_history":
            status = self._pick(("Passed", "Failed", "Failed", "Skipped", "Error"))
            meta = {"test_name": f"test_{self._func()}", "test_file": f"tests/test_{self._pick(NOUNS)}.py", "status": status}
            if status == "Failed":
                meta["failure_message"] = f"AssertionError: expected {obj} to be {action}d {self._pick(CONSTRAINTS)}"
                meta["fix_applied"] = f"{action} {obj} before the commit in `{self._func()}`"
            return self._text(1, 3), meta
        if memory_type == "session":
            meta = {"key_decisions": [self._sentence() for _ in range(r.randint(1, 3))],
                    "outcome": self._pick(("done", "partially done", "blocked on review", "reverted"))}
            return f"Worked on the {component}: " + self._text(2, 6), meta
        key = f"{self._pick(LANGUAGES)}.{self._pick(PREF_KEYS)}.{self.serial}"
        meta = {"category": self._pick(("CodingStyle", "Naming", "Framework", "Tool", "Convention")), "key": key,
                "value": self._pick(("double", "single", "pytest", "google", "numpy", "snake_case", "strict", "ruff")),
                "scope": self._pick(("Global", "Language", "Project", "Component"))}
        return f"Prefer to {action} {obj} {self._pick(CONSTRAINTS)}. " + self._text(0, 2), meta

    def items(self, count: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """``count`` memories of random types: (memory_type, content, metadata)."""
        for _ in range(count):
            memory_type = self.rng.choice(self.TYPES)
            content, meta = self.item(memory_type)
            yield memory_type, content, meta

    def queries(self, count: int, seen: set[str]) -> list[str]:
        """``count`` distinct queries, none of them in ``seen`` (which is updated)."""
        out: list[str] = []
        while len(out) < count:
            text = self._pick(QUESTIONS).format(
                action=self._pick(ACTIONS), object=self._pick(OBJECTS), component=self._pick(COMPONENTS),
                tech=self._pick(TECH), constraint=self._pick(CONSTRAINTS), language=self._pick(LANGUAGES),
            )
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out


# -- helpers --------------------------------------------------------------------------------------


def _stats(samples: list[float]) -> dict[str, float]:
    p50, p95 = _percentiles(samples)
    return {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "mean_ms": round(statistics.fmean(samples) * 1000, 2),
            "max_ms": round(max(samples) * 1000, 2), "n": len(samples)}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _pause_sync(memory: Any) -> None:
    """Stop the memory service's background outbox drain (it would embed the fill with the model)."""
    memory._stop.set()
    memory.stores.wake.set()
    if memory._sync_thread is not None:
        memory._sync_thread.join(timeout=60)
    memory._sync_thread = None


def _resume_sync(memory: Any) -> None:
    """Restart the background drain, as a serving process runs it."""
    memory._stop.clear()
    memory.stores.wake.clear()
    memory.start_sync()


@contextmanager
def _timed_calls(targets: list[tuple[Any, str, str]]) -> Iterator[dict[str, list[float]]]:
    """Time every call of ``obj.name`` made by this thread (instance attribute wrappers, removed on
    exit) under ``label``; calls from other threads (the background outbox drain) are counted
    under ``background:<label>``."""
    parts: dict[str, list[float]] = {label: [] for _, _, label in targets}
    caller = threading.get_ident()

    def wrap(original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                key = label if threading.get_ident() == caller else f"background:{label}"
                parts.setdefault(key, []).append(time.perf_counter() - t0)

        return timed

    for obj, name, label in targets:
        setattr(obj, name, wrap(getattr(obj, name), label))
    try:
        yield parts
    finally:
        for obj, name, _ in targets:
            delattr(obj, name)


def _redis_pid(service: Any) -> int | None:
    try:
        return int(service.graph._db.client.pid)
    except (AttributeError, TypeError, ValueError):
        return None


def _kill_leftover_redis(pid: int | None, work: Path) -> list[int]:
    """After close: end the FalkorDB child if it survived, and any redis-server whose command line
    or working directory (the graph directory: its socket lives elsewhere) lies in ``work``."""
    import signal

    killed: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd") if "redis-server" in cmdline else ""
        except OSError:
            continue
        if "redis-server" in cmdline and (int(entry.name) == pid or str(work) in cmdline or cwd.startswith(str(work))):
            try:
                os.kill(int(entry.name), signal.SIGTERM)
                killed.append(int(entry.name))
            except OSError:
                pass
    return killed


# -- measurements -----------------------------------------------------------------------------------


def fill(service: Any, size: int, gen: MemoryGenerator, rng: random.Random) -> dict[str, Any]:
    """Write ``size`` memories to the ledger and project them with random dense vectors."""
    import numpy as np

    from resources.memory.ledger import NewMemory
    from resources.schemas.memory import validate_metadata

    memory = service.memory
    dim = service.embedder.dimension
    now = datetime.now(UTC)
    timings = {"generate_s": 0.0, "ledger_s": 0.0, "project_s": 0.0}
    written = 0
    while written < size:
        t0 = time.perf_counter()
        batch: list[NewMemory] = []
        for memory_type, content, meta in gen.items(min(LEDGER_BATCH, size - written)):
            created = (now - timedelta(seconds=rng.uniform(0, SPAN_DAYS * 86_400))).isoformat(timespec="microseconds")
            batch.append(NewMemory(
                memory_type=memory_type, content=content, metadata=validate_metadata(memory_type, meta, content=content),
                importance_score=round(rng.uniform(0.1, 1.0), 2), created_at=created, updated_at=created,
            ))
        t1 = time.perf_counter()
        rows = memory.ledger.add(batch)
        t2 = time.perf_counter()
        ids = [row.id for row in rows]
        for start in range(0, len(ids), PROJECT_BATCH):
            chunk = ids[start : start + PROJECT_BATCH]
            vectors = rng_vectors(np, len(chunk), dim, rng)
            report = memory.projector.project(chunk, vectors_of=dict(zip(chunk, vectors, strict=True)))
            if report.failed:
                raise RuntimeError(f"projection failed during the fill: {report.last_error}")
        t3 = time.perf_counter()
        timings["generate_s"] += t1 - t0
        timings["ledger_s"] += t2 - t1
        timings["project_s"] += t3 - t2
        written += len(rows)
        print(f"   filled {written:,}/{size:,} (ledger {timings['ledger_s']:.0f} s, projection "
              f"{timings['project_s']:.0f} s)", file=sys.stderr, flush=True)
    counts = memory.ledger.counts()
    return {
        "memories": written,
        "per_type": {t: c["total"] for t, c in sorted(counts.items())},
        "sync": memory.ledger.sync_counts(),
        **{k: round(v, 1) for k, v in timings.items()},
        "fill_s": round(sum(timings.values()), 1),
        "ledger_bytes": memory.ledger.path.stat().st_size,
    }


def measure_add(service: Any, gen: MemoryGenerator, count: int, *, cached: bool) -> dict[str, Any]:
    """Time ``count`` memory_add calls; ``cached``: their embeddings are in the cache beforehand."""
    from resources.memory.projection import EMBED_CHARS, prepared_text
    from resources.schemas.memory import MemoryAddInput, validate_metadata

    memory = service.memory
    requests = [MemoryAddInput(memory_type=t, content=c, metadata=m, importance_score=0.6) for t, c, m in gen.items(count)]
    if cached:
        texts = [prepared_text(str(r.memory_type), r.content, validate_metadata(r.memory_type, r.metadata, content=r.content))
                 [:EMBED_CHARS] for r in requests]
        service.embedder.embed_documents(texts)
    cache = getattr(service.embedder, "cache", None)
    misses_before = cache.misses if cache is not None else 0
    targets = [
        (memory.writes, "embed_one", "embed"), (memory.writes, "conflicts", "conflicts"), (memory.ledger, "add", "ledger_commit"),
        (memory.stores, "project", "projection"), (memory.stores.vectors, "upsert", "projection.vector_upsert"),
        (memory.projector.graph, "merge_nodes", "projection.graph_merge"),
        (memory.ledger, "mark_projected", "projection.outbox_mark"),
    ]
    totals: list[float] = []
    conflicts = 0
    load = _load()
    with _timed_calls(targets) as parts:
        for request in requests:
            t0 = time.perf_counter()
            result = service.memory.memory_add(request)
            totals.append(time.perf_counter() - t0)
            conflicts += len(result.conflicts)
    misses = (cache.misses - misses_before) if cache is not None else None
    breakdown = {label: _stats(samples) for label, samples in parts.items() if len(samples) == len(totals)}
    background = {label: len(samples) for label, samples in parts.items() if label.startswith("background:")}
    timed = [k for k in ("embed", "conflicts", "ledger_commit", "projection") if len(parts.get(k, ())) == len(totals)]
    others = [t - sum(parts[k][i] for k in timed) for i, t in enumerate(totals)]  # a step not run in every call: in "other"
    breakdown["other"] = _stats(others)
    return {**_stats(totals), "cache_misses": misses, "conflicts_reported": conflicts, "breakdown": breakdown,
            "background_calls": background, "load_before": load, "load_after": _load()}


def _search_variants(now: datetime) -> dict[str, dict[str, Any]]:
    """memory_search arguments (besides query) of each timed variant."""
    return {
        "search_all": {},
        "search_types": {"memory_types": ["design", "code_pattern"]},
        "search_filtered": {"metadata_filters": {"status": ["Approved", "Accepted", "Failed"]},
                            "time_range": {"start": (now - timedelta(days=RECENT_DAYS)).isoformat()}},
    }


def measure_search(service: Any, gen: MemoryGenerator, count: int, seen: set[str]) -> dict[str, Any]:
    """Time memory_search variants, ``count`` distinct new queries each, interleaved; plus the
    first variant repeated with cached query embeddings."""
    from resources.schemas.memory import MemorySearchInput

    variants = _search_variants(datetime.now(UTC))
    queries = {name: gen.queries(count, seen) for name in variants}
    samples: dict[str, list[float]] = {name: [] for name in (*variants, "search_all_cached_query")}
    results: dict[str, list[int]] = {name: [] for name in samples}
    cache = getattr(service.embedder, "cache", None)
    misses_before = cache.misses if cache is not None else 0
    load = _load()
    for i in range(count):
        for name, extra in variants.items():
            request = MemorySearchInput(query=queries[name][i], limit=10, **extra)
            t0 = time.perf_counter()
            found = service.memory.memory_search(request)
            samples[name].append(time.perf_counter() - t0)
            results[name].append(found.result_count)
    fresh_misses = (cache.misses - misses_before) if cache is not None else None
    for query in queries["search_all"]:
        t0 = time.perf_counter()
        found = service.memory.memory_search(MemorySearchInput(query=query, limit=10))
        samples["search_all_cached_query"].append(time.perf_counter() - t0)
        results["search_all_cached_query"].append(found.result_count)
    out: dict[str, Any] = {}
    for name, values in samples.items():
        out[name] = {**_stats(values), "mean_results": round(statistics.fmean(results[name]), 2)}
    out["query_embedding_misses"] = fresh_misses
    out["load_before"], out["load_after"] = load, _load()
    return out


WHAT_IF_INDEXES = (("status", "Keyword"), ("created_ts", "Float"), ("metadata.status", "Keyword"))


@contextmanager
def what_if_indexed(service: Any) -> Iterator[None]:
    """NOT the shipped configuration: payload indexes on the memory collections' filter fields
    and dense/sparse candidate lists fetched without payloads (memory_search and the conflict
    check read the memories from the ledger, never the payload). Measures the source change
    this benchmark motivates; the indexes stay, the patch is undone on exit."""
    import qdrant_edge as qe

    from resources.memory.projection import COLLECTIONS
    from resources.vectors.edge import EdgeVectorStore
    from resources.vectors.points import scored_hits
    from resources.vectors.store import DENSE, SPARSE

    for memory_type in COLLECTIONS:
        shard = service.vectors._shard(service.memory.projector.collection(memory_type))
        for key, schema in WHAT_IF_INDEXES:
            shard.update(qe.UpdateOperation.create_field_index(key, getattr(qe.PayloadSchemaType, schema)))
    shipped = EdgeVectorStore.ranked_lists

    def ranked_lists(self: Any, collection: str, *, dense: Any, sparse: Any, candidates: int,
                     payload_filter: Any = None) -> tuple[list[Any], list[Any]]:
        shard, flt, queries = self._shard(collection), self._filter(payload_filter), self._nearest(dense, sparse)
        if not queries:
            return [], []
        requests = [qe.QueryRequest(limit=candidates, query=q, filter=flt, with_payload=False) for _, q in queries]
        with self._lock:
            results = shard.query_batch(qe.QueryBatchRequest(requests))
        found = {name: scored_hits(r) for (name, _), r in zip(queries, results, strict=True)}
        return found.get(DENSE, []), found.get(SPARSE, [])

    EdgeVectorStore.ranked_lists = ranked_lists  # type: ignore[method-assign]
    try:
        yield
    finally:
        EdgeVectorStore.ranked_lists = shipped  # type: ignore[method-assign]


def run_size(size: int, work: Path, args: argparse.Namespace, seen: set[str]) -> dict[str, Any]:
    """Fill a fresh service with ``size`` memories and time memory_add and memory_search on it."""
    from query_server.service import CodeMemService
    from resources.settings import Settings

    rng = random.Random(size)
    gen = MemoryGenerator(rng)
    root = work / f"project_{size}"
    root.mkdir(parents=True, exist_ok=True)
    service = CodeMemService(Settings(project_root=root, state_dir=work / f"state_{size}"))
    redis_pid = _redis_pid(service)
    result: dict[str, Any] = {"size": size}
    try:
        _pause_sync(service.memory)
        service.graph.ensure_schema()  # as the server's start-up index run does (memory labels' id indexes)
        started = time.perf_counter()
        result["fill"] = fill(service, size, gen, rng)
        print(f"   fill done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        _resume_sync(service.memory)
        service.embedder.embed_query("warm up the model")
        service.embedder.embed_documents(["warm up the model for documents"])
        result["add_cached"] = measure_add(service, gen, args.adds, cached=True)
        result["add_cold"] = measure_add(service, gen, args.adds, cached=False)
        result.update(measure_search(service, gen, args.queries, seen))
        # (further measurements on the filled service go here, before the what-if below)
        if args.what_if:
            with what_if_indexed(service):
                result["what_if"] = {"add_cached": measure_add(service, gen, args.adds, cached=True),
                                     **measure_search(service, gen, args.queries, seen)}
        result["outbox"] = service.memory.ledger.outbox_stats()
    finally:
        service.close()
        killed = _kill_leftover_redis(redis_pid, work)
        if killed:
            print(f"   ended leftover redis-server {killed}", file=sys.stderr)
    return result


def _print(result: dict[str, Any]) -> bool:
    """Print one size's numbers against the targets; True when a target applying to it failed."""
    fill_info = result["fill"]
    print(f"== {fill_info['memories']:,} memories (fill {fill_info['fill_s']} s: ledger {fill_info['ledger_s']} s, "
          f"projection {fill_info['project_s']} s)")
    failed = False
    for key in ("add_cached", "add_cold", "search_all", "search_types", "search_filtered", "search_all_cached_query"):
        entry = result[key]
        target = TARGETS.get(key)
        applies = target is not None and (key != "search_all" or result["size"] >= 100_000)
        verdict = ""
        if target is not None and applies:
            passed = entry["p95_ms"] <= target
            verdict = f"(target p95 <= {target:g} ms) {'PASS' if passed else 'FAIL'}"
            failed |= not passed
        elif target is not None:
            verdict = f"(target p95 <= {target:g} ms applies at 100k)"
        extra = f"  {entry['mean_results']:.1f} results" if "mean_results" in entry else ""
        print(f"   {key:24s} p50 {entry['p50_ms']:7.2f} ms  p95 {entry['p95_ms']:7.2f} ms{extra}  {verdict}")
    parts = result["add_cached"]["breakdown"]
    print("   add_cached breakdown p50/p95 ms: " + ", ".join(
        f"{k} {v['p50_ms']:.2f}/{v['p95_ms']:.2f}" for k, v in parts.items()))
    what_if = result.get("what_if")
    if what_if:
        print("   what-if (payload indexes + payload-free candidate lists; not shipped):")
        for key in ("add_cached", "search_all", "search_types", "search_filtered", "search_all_cached_query"):
            entry = what_if[key]
            print(f"     {key:22s} p50 {entry['p50_ms']:7.2f} ms  p95 {entry['p95_ms']:7.2f} ms")
    return failed


def main(argv: list[str] | None = None) -> int:
    """Run the memory benchmark at each size, print against the targets, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="memories per run, comma-separated (default 10000,100000)")
    parser.add_argument("--quick", action="store_true", help="sizes 2000,10000")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per variant (default 200)")
    parser.add_argument("--adds", type=int, default=200, help="timed memory_add calls, cached and cold each (default 200)")
    parser.add_argument("--what-if", action="store_true",
                        help="then re-time with payload indexes and payload-free candidate lists (not shipped)")
    parser.add_argument("--ranking", action="store_true",
                        help="measure search quality with access frequency off and on instead (bench.memory_ranking)")
    parser.add_argument("--out", type=Path, default=None, help="JSON written (default bench/results/memory.json, "
                        "or memory_ranking.json with --ranking)")
    args = parser.parse_args(argv)
    if args.ranking:
        return _main_ranking(args.out or RANKING_RESULTS)
    args.out = args.out or RESULTS
    sizes = [2_000, 10_000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from query_server.cli.common import configure_logging

    configure_logging()  # as a served process logs: WARNING unless CODEMEM_LOG_LEVEL says otherwise
    started = time.perf_counter()
    output: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "targets_p95_ms": {"memory_add_cached": TARGETS["add_cached"], "memory_search_100k": TARGETS["search_all"]},
        "queries": args.queries, "adds": args.adds, "sizes": {},
    }
    failed = False
    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="codemem-memory-bench-") as tmp:
        for size in sizes:
            print(f"filling {size:,} memories", file=sys.stderr, flush=True)
            result = run_size(size, Path(tmp), args, seen)
            output["sizes"][str(size)] = result
            failed |= _print(result)
    output["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(output, indent=2) + "\n")
    print(f"wrote {args.out} ({output['seconds']} s)")
    return 1 if failed else 0


def _main_ranking(out: Path) -> int:
    """Run ``bench.memory_ranking`` in a temporary directory, print it, write the JSON."""
    from bench.memory_ranking import measure_ranking, print_ranking

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from query_server.cli.common import configure_logging

    configure_logging()
    output: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
    }
    with tempfile.TemporaryDirectory(prefix="codemem-memory-ranking-") as tmp:
        output["ranking"] = measure_ranking(Path(tmp))
    failed = print_ranking(output["ranking"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(output, indent=2) + "\n")
    print(f"wrote {out} ({output['ranking']['seconds']} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

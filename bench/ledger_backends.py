"""The memory ledger on SQLite (embedded mode) and on PostgreSQL (server mode), measured in one run.

    python -m bench.ledger_backends [--n 300]

Each backend gets the same single-memory operations one after the other (add, update, get,
metadata lookup, recent), then writers in parallel: 4 threads on one ledger object, and, for
PostgreSQL, 2 processes' worth of stores (two pools: two replicas) with 2 threads each. PostgreSQL
is ``CODEMEM_DATABASE_URL`` when set, else a throwaway local cluster (``tests/postgres_cluster.py``,
the server binaries of the machine). Latencies are per call in ms; the ratio column is
PostgreSQL ÷ SQLite of the same run. What it shows: what a network database adds to each write (a
round trip per statement and the advisory lock), not a target.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from resources.memory.ledger import Ledger, NewMemory


def _new(i: int) -> NewMemory:
    return NewMemory(memory_type="requirements", content=f"Requirement {i}: search answers in {i % 500} ms",
                     metadata={"title": f"R{i}", "requirement_id": f"REQ-BENCH-{i:05d}"})


def _timed(calls: list[Callable[[], object]]) -> list[float]:
    out = []
    for call in calls:
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def _single(ledger: Ledger, n: int) -> dict[str, list[float]]:
    rows: list[str] = []
    results: dict[str, list[float]] = {}
    results["add"] = _timed([lambda i=i: rows.append(ledger.add([_new(i)])[0].id) for i in range(n)])
    results["update"] = _timed([lambda m=m: ledger.update(m, content=f"{m} changed") for m in rows])
    results["get"] = _timed([lambda m=m: ledger.get(m) for m in rows])
    results["find_by_metadata"] = _timed(
        [lambda i=i: ledger.find_by_metadata("requirements", "requirement_id", f"REQ-BENCH-{i:05d}") for i in range(n)]
    )
    results["recent(20)"] = _timed([lambda: ledger.recent(limit=20) for _ in range(n)])
    return results


def _parallel(ledgers: list[Ledger], threads_each: int, per_thread: int) -> float:
    """Adds per second of ``threads_each`` threads on each ledger object."""
    def work(ledger: Ledger, base: int) -> None:
        for i in range(per_thread):
            ledger.add([_new(base + i)])

    threads = [threading.Thread(target=work, args=(led, 100_000 * (k + 1) + 1000 * t))
               for k, led in enumerate(ledgers) for t in range(threads_each)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(threads) * per_thread / (time.perf_counter() - started)


@contextlib.contextmanager
def _postgres() -> Iterator[str]:
    url = os.environ.get("CODEMEM_DATABASE_URL", "").strip()
    if url:
        yield url
        return
    from tests.postgres_cluster import missing_reason, postgres_cluster

    reason = missing_reason()
    if reason is not None:
        raise SystemExit(f"no PostgreSQL: {reason} — set CODEMEM_DATABASE_URL to measure against a server")
    with postgres_cluster() as started:
        yield started


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="memories per single-call series (default 300)")
    n = parser.parse_args().n
    from resources.memory.ledger_postgres import PostgresLedgerStore

    with tempfile.TemporaryDirectory() as tmp, _postgres() as url:
        namespace = f"bench_{os.getpid()}"
        sqlite = Ledger(Path(tmp) / "memory.db")
        postgres = Ledger(store=PostgresLedgerStore(url, namespace=namespace))
        try:
            single = {"SQLite": _single(sqlite, n), "PostgreSQL": _single(postgres, n)}
            rates = {
                "SQLite": _parallel([sqlite], 4, n // 4),
                "PostgreSQL": _parallel([postgres], 4, n // 4),
            }
            second = Ledger(store=PostgresLedgerStore(url, namespace=namespace))
            try:
                replicas = _parallel([postgres, second], 2, n // 4)
            finally:
                second.close()
        finally:
            sqlite.close()
            with postgres._transaction() as conn:  # noqa: SLF001 - the bench's own schema goes
                conn.execute(f"DROP SCHEMA {namespace} CASCADE")
            postgres.close()
    print(f"ledger operations, {n} calls each (ms per call; PostgreSQL {'CODEMEM_DATABASE_URL' if os.environ.get('CODEMEM_DATABASE_URL') else 'local throwaway cluster'})")
    print(f"{'operation':<18} {'SQLite p50':>10} {'p95':>7} {'PG p50':>8} {'p95':>7} {'ratio p50':>10}")
    for op in single["SQLite"]:
        s, p = single["SQLite"][op], single["PostgreSQL"][op]
        print(f"{op:<18} {_p(s, 50):>10.2f} {_p(s, 95):>7.2f} {_p(p, 50):>8.2f} {_p(p, 95):>7.2f} {_p(p, 50) / _p(s, 50):>9.1f}x")
    print(f"parallel adds, 4 threads, one process: SQLite {rates['SQLite']:.0f}/s, PostgreSQL {rates['PostgreSQL']:.0f}/s")
    print(f"parallel adds, 2 replicas x 2 threads on one PostgreSQL ledger: {replicas:.0f}/s")


if __name__ == "__main__":
    main()

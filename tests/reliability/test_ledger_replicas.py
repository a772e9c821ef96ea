"""Two processes writing one PostgreSQL memory ledger (two server replicas), one SIGKILLed in the
middle of its writes and its clients' calls retried on the other, as a load balancer would: every
acknowledged memory is there, no retried call stored a second memory, and audit, rows and outbox
agree (issue 23, the ledger's part of the replica fault test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from resources.memory.ledger import Ledger
from resources.memory.ledger_postgres import PostgresLedgerStore

ROOT = Path(__file__).resolve().parents[2]

_REPLICA = textwrap.dedent(
    """
    import sys, threading
    from resources.memory.ledger import Ledger, NewMemory
    from resources.memory.ledger_postgres import PostgresLedgerStore

    url, name, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ledger = Ledger(store=PostgresLedgerStore(url, namespace="memory"))
    out = threading.Lock()
    print("ready", flush=True)

    def client(k: int) -> None:  # each client sends its own calls, in order
        for i in range(first + k, last, 4):
            request = f"call-{i}"
            [row] = ledger.add([NewMemory(memory_type="session", content=f"call {i} via {name}", metadata={})],
                               request_id=request)
            if i % 3 == 0:
                ledger.update(row.id, content=f"call {i} via {name} (edited)", request_id=f"edit-{i}")
            with out:
                print(request, row.id, flush=True)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done", flush=True)
    """
)


def _start(url: str, name: str, first: int, last: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _REPLICA, url, name, str(first), str(last)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _acknowledged(lines: str) -> dict[str, str]:
    return dict(line.split() for line in lines.splitlines() if line.startswith("call-"))


def test_a_replica_killed_mid_write_loses_nothing_and_retries_store_once(postgres_url: str) -> None:
    Ledger(store=PostgresLedgerStore(postgres_url, namespace="memory")).close()  # the schema, made once
    survivor = _start(postgres_url, "a", 0, 400)
    victim = _start(postgres_url, "b", 400, 100_000)
    time.sleep(1.0)  # both write, in four client threads each
    os.kill(victim.pid, signal.SIGKILL)
    victim_out, _ = victim.communicate()
    acked = _acknowledged(victim_out)
    assert len(acked) > 8, "the victim acknowledged too little to be killed in the middle of its writes"
    # its clients retry their calls on the surviving side: every call of the victim's range up to
    # a little past the last acknowledged one, acknowledged or not
    highest = max(int(request.split("-")[1]) for request in acked)
    retry = _start(postgres_url, "a-retry", 400, highest + 40)
    retry_out, _ = retry.communicate(timeout=120)
    survivor_out, _ = survivor.communicate(timeout=120)
    assert retry.returncode == 0 and survivor.returncode == 0
    retried = _acknowledged(retry_out)
    ledger = Ledger(store=PostgresLedgerStore(postgres_url, namespace="memory"))
    try:
        for request, memory_id in acked.items():
            assert retried[request] == memory_id  # a retried call returns the memory it stored first
        everything = {**_acknowledged(survivor_out), **retried}
        rows = ledger.get_many(list(everything.values()))
        assert set(rows) == set(everything.values())  # every acknowledged memory is there
        total = ledger.counts()["session"]["total"]
        assert total == len(everything) == 400 + (highest + 40 - 400)  # and no call stored two
        for row in ledger.iter_memories():
            trail = ledger.audit_of(row.id)
            assert trail[0]["operation"] == "create" and trail[-1]["current"]["content"] == row.content
            assert ledger.outbox_entry(row.id) is not None  # every change is queued for projection
    finally:
        ledger.close()

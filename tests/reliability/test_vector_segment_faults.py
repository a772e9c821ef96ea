"""A collection's appendable segment is closed (``optimize``) every ``SEGMENT_POINTS`` points
(issue 21): a SIGKILL while it is being closed loses no point written before the close (the code
collection keeps no write-ahead log: the close flushes first), and the collection opens, answers
and takes writes afterwards.

Real qdrant-edge in a child process, killed at random moments inside ``optimize``.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from resources.vectors.edge import EdgeVectorStore
from resources.vectors.store import PayloadFilter, SparseVec, VectorPoint
from tests.reliability.children import REPO_ROOT, child_env

WRITER = textwrap.dedent("""
    import sys, uuid
    from pathlib import Path
    from resources.vectors import edge
    from resources.vectors.store import SparseVec, VectorPoint

    edge.SEGMENT_POINTS = 600
    edge.INDEXED_FROM_POINTS = 5
    root = Path(sys.argv[1])
    store = edge.EdgeVectorStore(root)
    store.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False)  # as the code collection: no WAL
    shard = store._shard("code")

    class Announced:  # says when a close of the appendable segment starts
        def __getattr__(self, name):
            return getattr(shard, name)

        def optimize(self):
            print("optimizing", flush=True)
            return shard.optimize()

    store._shards["code"] = Announced()
    for batch in range(40):
        points = [VectorPoint(str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")),
                              {"file_path": f"src/f{i % 11}.c", "kind": "function"},
                              sparse=SparseVec([i % 17, 30 + i % 3], [1.0, 0.5]))
                  for i in range(batch * 200, batch * 200 + 200)]
        print("writing", batch * 200 + 200, flush=True)  # no flush of its own: the close's flush is what is tested
        store.upsert("code", points)
    store.close()
    print("done", flush=True)
""")


def _point_id(i: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}"))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_sigkill_while_the_appendable_segment_closes_loses_no_flushed_point(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "qdrant"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True,
                             env=child_env(), cwd=str(REPO_ROOT))
    assert child.stdout is not None
    flushed, written, closes, target = 0, 0, 0, rng.randint(2, 4)
    for line in child.stdout:
        if line.startswith("writing"):
            written = int(line.split()[1])
        elif line.startswith("optimizing"):
            closes += 1
            flushed = written  # the close flushes every point written so far, its own batch included
            if closes == target:
                time.sleep(rng.uniform(0.0, 0.15))  # somewhere inside the close (~0.2-0.5 s here)
                child.send_signal(signal.SIGKILL)
                break
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, "the writer finished before it was killed: the test proves nothing"
    assert flushed >= 400

    store = EdgeVectorStore(root)
    try:
        store.ensure_collection("code", 4, ("file_path", "kind"), write_ahead_log=False)
        present = {hit.id for hit in store.scroll("code", limit=100_000)}
        assert {_point_id(i) for i in range(flushed)} <= present  # every flushed point is there
        assert len(present) <= written  # and nothing but what was written
        hits = store.hybrid_query("code", dense=None, sparse=SparseVec([5], [1.0]), limit=5,
                                  payload_filter=PayloadFilter({"file_path": ["src/f5.c"]}))
        assert hits and all(hit.payload["file_path"] == "src/f5.c" for hit in hits)
        store.upsert("code", [VectorPoint(_point_id(10**6), {"file_path": "src/new.c", "kind": "function"},
                                          sparse=SparseVec([1], [1.0]))])
        store.optimize("code")
        assert store.count("code", PayloadFilter({"file_path": ["src/new.c"]})) == 1
    finally:
        store.close()

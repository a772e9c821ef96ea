"""HNSW recall against exact search on the real dense vectors of an indexed project.

Usage: ``python -m bench.hnsw_recall PROJECT_STATE_DIR [--queries 200]`` where the state dir
belongs to a project indexed with dense vectors (``codemem index PATH`` → ``PATH/.codemem``).
Copies the vectors into a scratch qdrant-edge shard whose HNSW index is forced on (tiny full-scan
and indexing thresholds, m=16, ef_construct=200), then compares top-10 results with exact search
for held-out queries (the stored vectors of a random sample of symbols, themselves excluded).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _load_vectors(state_dir: Path) -> list[tuple[str, list[float]]]:
    import qdrant_edge as qe

    from resources.vectors.edge import DENSE_APART

    apart = state_dir / "qdrant" / ("code" + DENSE_APART)  # a code collection made since its dense vectors are kept apart
    shard = qe.EdgeShard.load(str(apart if apart.is_dir() else state_dir / "qdrant" / "code"))
    out: list[tuple[str, list[float]]] = []
    offset = None
    while True:
        records, offset = shard.scroll(qe.ScrollRequest(offset=offset, limit=2048, with_payload=False, with_vector=["dense"]))
        for record in records:
            vector = (record.vector or {}).get("dense") if isinstance(record.vector, dict) else None
            if vector:
                out.append((str(record.id), list(vector)))
        if offset is None:
            break
    shard.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Print recall@10 and latency of HNSW against exact search."""
    import qdrant_edge as qe

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("state_dir", type=Path)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    vectors = _load_vectors(args.state_dir)
    if len(vectors) < 100:
        print(f"only {len(vectors)} dense vectors in {args.state_dir}: index a bigger project first", file=sys.stderr)
        return 1
    dim = len(vectors[0][1])
    with tempfile.TemporaryDirectory() as tmp:
        config = qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
            hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=200, full_scan_threshold=1, max_indexing_threads=1),
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1),
        )
        shard = qe.EdgeShard.create(tmp, config)
        for start in range(0, len(vectors), 1000):
            chunk = vectors[start : start + 1000]
            shard.update(qe.UpdateOperation.upsert_points([qe.Point(pid, {"dense": vec}) for pid, vec in chunk]))
        started = time.perf_counter()
        shard.optimize()
        build_s = time.perf_counter() - started
        info = shard.info()
        rng = random.Random(7)
        sample = rng.sample(vectors, min(args.queries, len(vectors)))
        print(f"{len(vectors)} real {dim}-dim vectors; HNSW built in {build_s:.2f} s; "
              f"indexed vectors {info.indexed_vectors_count}; segments {info.segments_count}")
        for ef in (None, 64, 128, 256):
            recalls, t_exact, t_hnsw = [], [], []
            for pid, vec in sample:
                exact_request = qe.QueryRequest(limit=11, query=qe.Query.Nearest(vec, using="dense"), params=qe.SearchParams(exact=True))
                hnsw_request = qe.QueryRequest(limit=11, query=qe.Query.Nearest(vec, using="dense"), params=qe.SearchParams(hnsw_ef=ef))
                t0 = time.perf_counter()
                exact = [str(p.id) for p in shard.query(exact_request) if str(p.id) != pid][:10]
                t1 = time.perf_counter()
                approx = [str(p.id) for p in shard.query(hnsw_request) if str(p.id) != pid][:10]
                t2 = time.perf_counter()
                recalls.append(len(set(exact) & set(approx)) / max(len(exact), 1))
                t_exact.append(t1 - t0)
                t_hnsw.append(t2 - t1)
            print(
                f"hnsw_ef={ef or 'default'}: recall@10 {statistics.mean(recalls):.4f}; "
                f"median latency exact {statistics.median(t_exact) * 1000:.2f} ms, hnsw {statistics.median(t_hnsw) * 1000:.2f} ms"
            )
        shard.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

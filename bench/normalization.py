"""Memory normalization at scale and its duplicate-detection quality (issue "project memory", item 7).

Usage: ``python -m bench.normalization [--size 100000] [--dup-rate 0.05] [--real 1500]``.

Two measurements, one run:

1. **Scale** — ``--size`` memories spread over the 8 types, with ``--dup-rate`` of them planted as
   near-duplicates of another memory of the same type (their vector is the original's plus noise
   giving cosine ≈ 0.96–0.995, their text differs, so content hashes differ). Vectors are random
   unit vectors (computing 100k real embeddings takes about an hour on 2 cores); the ledger,
   qdrant-edge, FalkorDB and the normalization code are the real ones. Reports the time of a full
   normalization (snapshot → swap) and recall/precision of the merged pairs against the planted
   ones. Targets: recall ≥ 0.95, precision ≥ 0.99.
2. **Real text** — ``--real`` docstrings of the Python standard library embedded by the real
   local model, plus planted variants of some of them that a person would call the same memory
   (case changed, whitespace re-flowed, a trailing period dropped, a "Note:" prefix). Reports, per
   kind of variant, how many the 0.95 threshold merges, and every merge that was not planted.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TYPES = ("requirements", "design", "code_pattern", "component", "function", "test_history", "session", "user_preference")
VARIANTS = {
    "uncased": lambda t: t.upper() if t == t.lower() else t.lower(),
    "reflowed": lambda t: "  ".join(t.split()),
    "trailing period": lambda t: t.rstrip(".") if t.endswith(".") else t + ".",
    "note prefix": lambda t: "Note: " + t,
}


def _metadata(memory_type: str, i: int) -> dict:
    from resources.schemas.memory import validate_metadata

    raw = {
        "requirements": {"requirement_id": f"REQ-BEN-{i:06d}", "title": f"R{i}", "priority": "Medium", "status": "Draft"},
        "design": {"design_type": "Specification", "title": f"D{i}", "status": "Accepted"},
        "code_pattern": {"pattern_name": f"P{i}", "pattern_type": "Idiom", "language": "python", "code_template": "x", "usage_context": "y"},
        "component": {"component_id": f"c{i}", "component_type": "Library", "name": f"C{i}", "file_path": f"c{i}.py"},
        "function": {"name": f"f{i}", "signature": f"f{i}()", "file_path": "f.py", "start_line": 1, "end_line": 2, "language": "python"},
        "test_history": {"test_name": f"test_{i}", "test_file": "t.py", "status": "Passed"},
        "session": {},
        "user_preference": {"category": "Naming", "key": f"k{i}", "value": i, "scope": "Project"},
    }[memory_type]
    return validate_metadata(memory_type, raw, content=f"memory {i}")


def scale(size: int, dup_rate: float, work: Path, rng: random.Random) -> dict:
    """Fill ``size`` memories with planted near-duplicates and normalize them."""
    import numpy as np

    from query_server.service import CodeMemService
    from resources.memory.ledger import NewMemory
    from resources.memory.normalization import Normalizer
    from resources.settings import Settings

    project = work / "scale"
    project.mkdir()
    svc = CodeMemService(Settings(project_root=project))
    svc.memory.stop_sync()  # the bench projects its own (random) vectors; the sync thread would embed the texts
    try:
        dim = svc.embedder.dimension
        gen = np.random.default_rng(rng.randrange(1 << 30))
        planted_count = int(size * dup_rate)
        originals = size - planted_count
        started = time.perf_counter()
        vectors: dict[str, np.ndarray] = {}
        rows: list[NewMemory] = []
        type_of: list[str] = []
        for i in range(originals):
            memory_type = TYPES[i % len(TYPES)]
            memory = NewMemory(memory_type=memory_type, content=f"{memory_type} memory number {i}: {uuid.uuid4().hex}",
                               metadata=_metadata(memory_type, i))
            v = gen.standard_normal(dim).astype(np.float32)
            vectors[memory.id] = v / np.linalg.norm(v)
            rows.append(memory)
            type_of.append(memory_type)
        planted: set[frozenset[str]] = set()
        for j in range(planted_count):
            k = gen.integers(0, originals)
            source = rows[k]
            noise = gen.standard_normal(dim).astype(np.float32)
            noise /= np.linalg.norm(noise)
            eps = gen.uniform(0.1, 0.28)  # cosine ≈ 1/sqrt(1+eps²): 0.96–0.995
            v = vectors[source.id] + eps * noise
            restated = list(VARIANTS.values())[j % len(VARIANTS)](source.content)
            copy = NewMemory(memory_type=source.memory_type, content=restated, metadata=dict(source.metadata))
            vectors[copy.id] = v / np.linalg.norm(v)
            rows.append(copy)
            planted.add(frozenset((source.id, copy.id)))
        for start in range(0, len(rows), 5000):
            svc.memory.ledger.add(rows[start : start + 5000])
        ids = [r.id for r in rows]
        for start in range(0, len(ids), 2000):
            chunk = ids[start : start + 2000]
            svc.memory.projector.project(chunk, vectors_of={i: vectors[i] for i in chunk})
        fill_s = time.perf_counter() - started

        normalizer = Normalizer(svc.memory.ledger, svc.memory.projector, state_dir=svc.settings.resolved_state_dir(),
                                threshold=svc.settings.memory_dedup_threshold)
        started = time.perf_counter()
        report = normalizer.run()
        normalize_s = time.perf_counter() - started
        found: set[frozenset[str]] = set()
        # the report keeps 100 merges; read them all back from the audit
        for row in svc.memory.ledger.iter_memories():
            if row.deleted:
                trail = svc.memory.ledger.audit_of(row.id)
                into = (trail[-1].get("current") or {}).get("merged_into")
                if into:
                    found.add(frozenset((row.id, into)))
        # planted clusters: an original with every copy planted from it (a copy merged into another
        # copy of the same original is a correct merge too)
        parent: dict[str, str] = {}

        def find(x: str) -> str:
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        for pair in planted:
            a, b = tuple(pair)
            parent[find(a)] = find(b)
        correct = sum(1 for pair in found if len({find(x) for x in pair}) == 1)
        wrong = [pair for pair in found if len({find(x) for x in pair}) != 1]
        if wrong and __import__("os").environ.get("BENCH_DEBUG"):
            for pair in wrong[:5]:
                a, b = tuple(pair)
                ra, rb = svc.memory.ledger.get(a), svc.memory.ledger.get(b)
                print("WRONG", float(vectors[a] @ vectors[b]), ra.content[:60], "|", rb.content[:60])
        recall = min(1.0, correct / max(1, planted_count))
        precision = correct / max(1, len(found))
        return {
            "memories": size, "planted_duplicates": planted_count, "fill_s": round(fill_s, 1),
            "normalize_s": round(normalize_s, 1), "phase_s": report.seconds, "merged": len(found),
            "recall": round(recall, 4), "precision": round(precision, 4),
        }
    finally:
        svc.close()


def real_text(count: int, work: Path, rng: random.Random) -> dict:
    """Real docstrings, real embeddings, planted human-style variants."""
    from bench.latency import _queries, _stdlib_files
    from query_server.service import CodeMemService
    from resources.memory.normalization import Normalizer
    from resources.schemas.memory import MemoryBulkAddInput
    from resources.settings import Settings

    texts = list(dict.fromkeys(t for t in _queries(_stdlib_files(), count * 2, rng) if len(t) > 30))[:count]
    project = work / "real"
    project.mkdir()
    svc = CodeMemService(Settings(project_root=project))
    try:
        items = [{"memory_type": "session", "content": t} for t in texts]
        planted: dict[str, list[tuple[int, int]]] = {name: [] for name in VARIANTS}
        for name, change in VARIANTS.items():
            for k in rng.sample(range(len(texts)), max(1, count // 20)):
                variant = change(texts[k])
                if variant != texts[k]:
                    planted[name].append((k, len(items)))
                    items.append({"memory_type": "session", "content": variant})
        ids: list[str] = []
        for start in range(0, len(items), 500):
            ids += svc.memory.memory_bulk_add(MemoryBulkAddInput(memories=items[start : start + 500])).added_ids
        normalizer = Normalizer(svc.memory.ledger, svc.memory.projector, state_dir=svc.settings.resolved_state_dir(),
                                threshold=svc.settings.memory_dedup_threshold)
        report = normalizer.run(dry_run=True)
        merged_pairs = set()
        for merge in report.merges:
            group = [merge["keeper"], *merge["merged"]]
            for a in group:
                for b in group:
                    if a < b:
                        merged_pairs.add((a, b))
        per_variant = {}
        planted_pairs = set()
        for name, pairs in planted.items():
            hits = sum(1 for i, j in pairs if tuple(sorted((ids[i], ids[j]))) in merged_pairs)
            planted_pairs |= {tuple(sorted((ids[i], ids[j]))) for i, j in pairs}
            per_variant[name] = {"planted": len(pairs), "merged": hits, "recall": round(hits / max(1, len(pairs)), 3)}
        from resources.memory.normalization import _plain

        unplanted = [(svc.memory.ledger.get(a).content, svc.memory.ledger.get(b).content) for a, b in merged_pairs - planted_pairs]
        different = [(a, b) for a, b in unplanted if _plain(a) != _plain(b) and _plain(a).removeprefix("note ") != _plain(b).removeprefix("note ")]
        return {"memories": len(items), "per_variant": per_variant, "unplanted_merges": len(unplanted),
                "unplanted_different_text": len(different), "different_text_examples": different[:8]}
    finally:
        svc.close()


def main(argv: list[str] | None = None) -> int:
    """Run both measurements and print them against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dup-rate", type=float, default=0.05)
    parser.add_argument("--real", type=int, default=1500, help="real docstrings for the quality check (0 skips)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="codemem-normbench-"))
    try:
        result = {"scale": scale(args.size, args.dup_rate, work, rng)}
        s = result["scale"]
        print(f"scale: {s['memories']} memories, {s['planted_duplicates']} planted duplicates; fill {s['fill_s']} s; "
              f"normalization {s['normalize_s']} s {s['phase_s']}")
        print(f"  recall {s['recall']:.3f} (target ≥ 0.95) {'PASS' if s['recall'] >= 0.95 else 'FAIL'}; "
              f"precision {s['precision']:.3f} (target ≥ 0.99) {'PASS' if s['precision'] >= 0.99 else 'FAIL'}")
        if args.real:
            result["real_text"] = r = real_text(args.real, work, rng)
            print(f"real text: {r['memories']} memories embedded by the local model; merges at 0.95 per planted variant:")
            for name, v in r["per_variant"].items():
                print(f"  {name:>20}: {v['merged']}/{v['planted']} ({v['recall']:.0%})")
            print(f"  merges that were not planted: {r['unplanted_merges']} "
                  f"({r['unplanted_different_text']} between texts that differ beyond case, spacing, punctuation and the prefix)")
            for a, b in r["different_text_examples"]:
                print(f"    {a!r} ~ {b!r}")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "normalization.json").write_text(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

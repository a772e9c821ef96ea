"""The Dagster pipeline at scale: a first index of N files as one single-run backfill, against the
plain indexer and against one run per bucket, measured in the same process (issue "Dagster
pipeline", item 8, second half; the save→searchable latency is ``bench.freshness``).

Usage: ``python -m bench.pipeline [--files 5000]``.

Corpus: N ``.py`` files of the Python standard library (copied again under ``copyN/`` when N
exceeds the ~1,700 modules), in a fresh project: real code, many sizes. Dense vectors are off in all three modes (``embed=False``: they are the
same model work in every mode and would take ~30 minutes here), so the numbers compare the
pipeline itself: discovery, hashing, parsing, sparse vectors, qdrant-edge, FalkorDB, resolution.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.latency import STDLIB, _stdlib_files

RESULTS = Path(__file__).parent / "results"


def _corpus(count: int, work: Path, name: str) -> Path:
    """``count`` real files: the standard library's modules, copied again under copyN/ until enough."""
    root = work / name
    files = _stdlib_files()
    for n in range(count):
        path = files[n % len(files)]
        target = root / f"copy{n // len(files)}" / path.relative_to(STDLIB)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    return root


def _plain(root: Path) -> dict:
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=root, dense_embeddings=False))
    svc.memory.stop_sync()
    try:
        started = time.perf_counter()
        report = svc.index(IndexInput(embed=False))
        return {"seconds": round(time.perf_counter() - started, 1), "files": report["files_indexed"], "runs": 0}
    finally:
        svc.close()


def _dagster(root: Path, per_bucket: bool) -> dict:
    from dagster import DagsterInstance

    from pipelines.buckets import ALL_BUCKETS
    from pipelines.dagster.definitions import build_definitions
    from pipelines.dagster.run import materialize_index
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    settings = Settings(project_root=root, dense_embeddings=False)
    handle = ProjectHandle(settings)
    handle.backend.memory.stop_sync()
    try:
        with DagsterInstance.ephemeral() as instance:
            started = time.perf_counter()
            if not per_bucket:
                report = materialize_index(handle.backend.owned_stores(), embed=False, instance=instance)
                files = report.files_indexed
            else:
                # the code location's job, each run over the stores this process owns
                io_dir = str(settings.resolved_state_dir() / "dagster" / "io")
                job = build_definitions(handle.backend.owned_stores(), io_dir).resolve_job_def("index_buckets")
                config = {"ops": {n: {"config": {"embed": False, "force": False}} for n in ("source_files", "embedded_symbols")}}
                for bucket in ALL_BUCKETS:
                    job.execute_in_process(partition_key=bucket, instance=instance, run_config=config)
                files = len(handle.backend.manifest.files())
            seconds = time.perf_counter() - started
            return {"seconds": round(seconds, 1), "files": files, "runs": len(instance.get_runs())}
    finally:
        handle.close()


def main(argv: list[str] | None = None) -> int:
    """Index the same corpus three ways and print wall time and runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--skip-per-bucket", action="store_true", help="skip the 256-run mode (the slowest)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="codemem-pipebench-"))
    try:
        result = {
            "plain": _plain(_corpus(args.files, work, "plain")),
            "dagster_single_run": _dagster(_corpus(args.files, work, "single"), per_bucket=False),
        }
        if not args.skip_per_bucket:
            result["dagster_per_bucket"] = _dagster(_corpus(args.files, work, "buckets"), per_bucket=True)
        base = result["plain"]["seconds"]
        print(f"first index of {args.files} files (no dense vectors):")
        for mode, r in result.items():
            print(f"  {mode:>20}: {r['seconds']:7.1f} s, {r['runs']:3d} run(s), {r['files']} files  ({r['seconds'] / base:.2f}x plain)")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "pipeline.json").write_text(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What server mode's PostgreSQL manifest and ledger cost ``codemem index``, measured in one run
against embedded mode (SQLite) on the same files.

    python -m bench.index_backends [--corpus DIR] [--changed 5]

The corpus (default: SQLAlchemy's sources from this environment, a real project nobody here
wrote) is copied into a temporary project, then indexed from a fresh state in each mode the way a
user runs it (`codemem index --plain --no-embed`, a process each): the first index, an index
with nothing changed, and one after ``--changed`` files were edited. Both modes use the embedded
vector and graph stores; server mode adds ``CODEMEM_DATABASE_URL`` (when set, else a throwaway
local cluster: ``tests/postgres_cluster.py``). Wall seconds per step and the PostgreSQL ÷ SQLite
ratio of the same run; not a target (issue 23 sets none), what a database adds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.ledger_backends import _postgres

ROOT = Path(__file__).resolve().parents[1]


def _default_corpus() -> Path:
    import sqlalchemy

    return Path(sqlalchemy.__file__).parent


def _index(project: Path, state: Path, url: str | None) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CODEMEM_STATE_DIR": str(state), "CODEMEM_DENSE_EMBEDDINGS": "false"}
    env.pop("CODEMEM_DATABASE_URL", None)
    if url:
        env["CODEMEM_DATABASE_URL"] = url
        env["CODEMEM_PROJECT_ID"] = f"bench-{state.name}"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "query_server.cli", "index", str(project), "--plain", "--no-embed", "--json"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"codemem index failed ({'server' if url else 'embedded'} mode):\n{done.stderr[-3000:]}")
    return elapsed


def _edit(project: Path, count: int, round_: int) -> None:
    for path in sorted(project.rglob("*.py"))[:count]:
        path.write_text(path.read_text() + f"\n\ndef _bench_edit_{round_}():\n    return {round_}\n")


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=None, help="a source tree to index (default: SQLAlchemy's)")
    parser.add_argument("--changed", type=int, default=5, help="files edited before the third index (default 5)")
    args = parser.parse_args()
    corpus = args.corpus or _default_corpus()
    with tempfile.TemporaryDirectory() as tmp, _postgres() as url:
        project = Path(tmp) / "project"
        shutil.copytree(corpus, project, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
        files = sum(1 for p in project.rglob("*") if p.is_file())
        steps: dict[str, dict[str, float]] = {}
        for mode, database in (("SQLite", None), ("PostgreSQL", url)):
            state = Path(tmp) / f"state-{mode.lower()}"
            first = _index(project, state, database)
            unchanged = _index(project, state, database)
            _edit(project, args.changed, 1 if mode == "SQLite" else 2)
            changed = _index(project, state, database)
            steps[mode] = {"first index": first, "nothing changed": unchanged, f"{args.changed} files changed": changed}
    print(f"codemem index --plain --no-embed of {corpus.name} ({files} files), wall s (a process each; "
          f"PostgreSQL {'CODEMEM_DATABASE_URL' if os.environ.get('CODEMEM_DATABASE_URL') else 'local throwaway cluster'})")
    print(f"{'step':<20} {'SQLite':>8} {'PostgreSQL':>11} {'ratio':>7}")
    for step in steps["SQLite"]:
        s, p = steps["SQLite"][step], steps["PostgreSQL"][step]
        print(f"{step:<20} {s:>8.2f} {p:>11.2f} {p / s:>6.2f}x")


if __name__ == "__main__":
    main()

"""SIGKILL at a random time (not only at named fault points) of the three long-running commands —
``codemem index``, ``codemem mcp`` and ``codemem normalize`` — then a restart and a consistency
check after every trial (issue 9, item 4).

Each soak runs ``CODEMEM_SOAK_TRIALS`` trials (default 50) under the ``soak`` marker
(``scripts/test.sh -m soak tests/reliability/test_random_kill_soak.py``); each has a short
version (3 trials) in the default run. The kill time is drawn uniformly over the command's whole
life (start-up, work, shutdown), so some trials kill before anything happened and some after the
work finished; the checks hold either way.

Checks after each trial:
- index: a completed ``codemem index`` then changes nothing (a second run indexes 0 files), the
  three stores agree (``store_consistency``), no edge dangles, nothing is left dirty, and the
  manifest holds every file on disk with its disk hash; every ``codemem_index`` run in the
  project's Dagster instance has ended (a killed run's recorder child fails its run), and no
  recorder of a killed run is left running.
- mcp: every memory the client saw acknowledged is in the ledger at its acknowledged version, and
  after a sync the projections match the ledger.
- normalize: no memory that is not a duplicate is lost or deleted, at most one of each duplicate
  pair is, and a completed normalization then converges (a dry run finds nothing to do).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.children import McpStdioClient, child_env, session_members

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "bench" / ".cache" / "corpora" / "requests-2.34.2"
SOAK_TRIALS = int(os.environ.get("CODEMEM_SOAK_TRIALS", "50"))
SHORT_TRIALS = 3
SIGKILLED = -signal.SIGKILL
CODEMEM = [sys.executable, "-m", "query_server.cli"]


def _cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CODEMEM, *args], capture_output=True, text=True, env=child_env(), cwd=str(cwd), timeout=timeout)


def _kill_at(proc: subprocess.Popen[Any], delay_s: float) -> bool:
    """SIGKILL ``proc`` ``delay_s`` after now unless it ended first; True when it was killed."""
    deadline = time.monotonic() + delay_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    if proc.poll() is not None:
        return False
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == SIGKILLED
    return True


def _check(script: str, *args: str) -> dict[str, Any]:
    """Run a check script in a fresh interpreter; its last stdout line is a JSON object."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=child_env(),
                          cwd=str(REPO_ROOT), timeout=600)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# 1. codemem index on a copy of a real corpus, files edited between trials
# --------------------------------------------------------------------------------------------

_INDEX_CHECK = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    from pipelines.indexer import CODE_COLLECTION
    from pipelines.dagster.run import materialize_index, project_instance
    from pipelines.stages import dangling_edges, store_consistency
    from query_server.ownership import ProjectHandle
    from resources.settings import Settings

    root = Path(sys.argv[1])
    handle = ProjectHandle(Settings(project_root=root))
    try:
        with project_instance(handle.state_dir) as instance:
            # before this run (which would mark a dead process's run failed): what the recorders left
            runs = [(r.job_name, r.status.value) for r in instance.get_runs()]
            again = materialize_index(handle.backend.owned_stores(), embed=True, instance=instance)
        ctx = handle.backend.ctx
        diff = store_consistency(ctx)
        indexed = {p: s.content_hash for p, s in ctx.manifest.files().items()}
        symbols = ctx.manifest.counts()["symbols"]
        print(json.dumps({
            "owner": handle.is_owner,
            "runs": runs,
            "second_run_indexed": again.files_indexed, "second_run_deleted": again.files_deleted,
            "second_run_failed": again.failed,
            "diff": {k: v for k, v in diff.items() if v},
            "dangling": dangling_edges(ctx),
            "dirty": sorted(ctx.manifest.dirty())[:20],
            "rewritten": sorted(ctx.manifest.rewritten())[:20],
            "indexed": indexed,
            "symbols": symbols,
            "symbol_sum": sum(s.symbol_count for s in ctx.manifest.files().values()),
            "points": ctx.vectors.count(CODE_COLLECTION),
        }))
    finally:
        handle.close()
    """
)


def _disk_hashes(root: Path, indexed: set[str]) -> dict[str, str]:
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in indexed if (root / p).is_file()}


def _edit_tree(root: Path, trial: int, rng: random.Random) -> str:
    """Change the tree a little: append a function to a module, add a new module or delete one added before."""
    sources = sorted(p for p in (root / "src" / "requests").glob("*.py") if not p.name.startswith("__"))
    added = sorted((root / "src" / "requests").glob("soak_*.py"))
    choice = rng.random()
    if added and choice < 0.2:
        victim = rng.choice(added)
        victim.unlink()
        return f"deleted {victim.name}"
    if choice < 0.45:
        new = root / "src" / "requests" / f"soak_{trial}.py"
        new.write_text(f"from .api import get\n\n\ndef soak_fetch_{trial}(url):\n    return get(url)\n")
        return f"added {new.name}"
    target = rng.choice(sources)
    with target.open("a") as fh:
        fh.write(f"\n\ndef soak_helper_{trial}(value):\n    return value * {trial}\n")
    return f"edited {target.name}"


def _index_tree(tmp_path: Path, full: bool) -> Path:
    root = tmp_path / "requests"
    if full:
        shutil.copytree(CORPUS, root)
    else:  # the short run: a few modules of the same corpus
        (root / "src" / "requests").mkdir(parents=True)
        for name in ("__init__.py", "api.py", "sessions.py", "hooks.py", "structures.py", "exceptions.py"):
            shutil.copy2(CORPUS / "src" / "requests" / name, root / "src" / "requests" / name)
    return root


def _ensure_corpus() -> None:
    """The requests 2.34.2 sources, downloaded from PyPI into bench/.cache on first use (skip when offline)."""
    if CORPUS.is_dir():
        return
    from bench.corpora import load_corpus

    try:
        load_corpus("requests", "2.34.2")
    except Exception as exc:  # noqa: BLE001 - no network: say how to get it
        pytest.skip(f"no corpus at {CORPUS} and it could not be downloaded ({exc}); run "
                    "`python -c \"from bench.corpora import load_corpus; load_corpus('requests', '2.34.2')\"` online")
    assert CORPUS.is_dir(), f"bench.corpora.load_corpus did not write {CORPUS}"


def _index_soak(tmp_path: Path, trials: int, *, full: bool, max_delay_s: float) -> dict[str, Any]:
    _ensure_corpus()
    root = _index_tree(tmp_path, full)
    rng = random.Random(9_4_1 + trials)
    first = _cli("index", ".", "--json", cwd=root)
    assert first.returncode == 0, first.stderr[-4000:]
    killed = finished = 0
    timings: list[float] = []
    for trial in range(trials):
        started = time.monotonic()
        change = _edit_tree(root, trial, rng)
        delay = rng.uniform(0.0, max_delay_s)
        proc = subprocess.Popen([*CODEMEM, "index", ".", "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=child_env(), cwd=str(root), start_new_session=True)
        if _kill_at(proc, delay):
            killed += 1
            deadline = time.monotonic() + 30  # its recorder sees its stdin close: fails the run, exits
            while session_members(proc.pid, b"pipelines.dagster.recorder") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert session_members(proc.pid, b"pipelines.dagster.recorder") == [], (trial, change, "a recorder outlived its killed parent by 30 s")
        else:
            finished += 1
            assert proc.returncode == 0, (trial, change, proc.stderr.read()[-4000:] if proc.stderr else "")
        if proc.stderr:
            proc.stderr.close()
        restart = _cli("index", ".", "--json", cwd=root)  # the restart completes the work
        assert restart.returncode == 0, (trial, change, delay, restart.stderr[-4000:])
        report = json.loads(restart.stdout)
        assert report["failed"] == [], (trial, report["failed"])
        state = _check(_INDEX_CHECK, str(root))
        assert state["owner"], "another process owned the stores"
        context = (trial, change, f"killed at {delay:.2f}s")
        assert state["second_run_indexed"] == 0 and state["second_run_deleted"] == 0, (context, state)
        assert state["diff"] == {} and state["dangling"] == [] and state["dirty"] == [] and state["rewritten"] == [], (context, state)
        assert state["indexed"] == _disk_hashes(root, set(state["indexed"])), context
        on_disk = {str(p.relative_to(root)) for p in root.rglob("*.py")}
        assert on_disk <= set(state["indexed"]), (context, sorted(on_disk - set(state["indexed"]))[:5])
        assert state["symbols"] == state["symbol_sum"] == state["points"], (context, state)
        assert {job for job, _ in state["runs"]} <= {"codemem_index"}, (context, state["runs"])
        assert all(status in ("SUCCESS", "FAILURE") for _, status in state["runs"]), (context, state["runs"])
        timings.append(time.monotonic() - started)
        print(f"index trial {trial}: {change}, kill at {delay:.2f}s, ok ({timings[-1]:.1f}s)", flush=True)
    return {"trials": trials, "killed": killed, "finished_first": finished, "mean_trial_s": sum(timings) / len(timings)}


@pytest.mark.soak  # 3 trials; the 50-trial soaks below cover it (default run kept under 15 min)
def test_random_sigkill_of_codemem_index_short(tmp_path: Path, graph_servers: Path) -> None:
    result = _index_soak(tmp_path, SHORT_TRIALS, full=False, max_delay_s=4.0)
    print(f"\nindex kill (short): {result}")


@pytest.mark.soak
def test_random_sigkill_of_codemem_index_soak(tmp_path: Path, graph_servers: Path) -> None:
    result = _index_soak(tmp_path, SOAK_TRIALS, full=True, max_delay_s=8.0)
    print(f"\nindex kill soak: {result}")
    assert result["killed"] >= SOAK_TRIALS // 2, result


# --------------------------------------------------------------------------------------------
# 2. codemem mcp (stdio) with a client writing and searching memories
# --------------------------------------------------------------------------------------------


def _client_session(project: Path, trial: int, rng: random.Random, kill_after_s: float,
                    acked: dict[str, tuple[str, int]]) -> dict[str, int]:
    """Start ``codemem mcp``, write and search until the server is SIGKILLed ``kill_after_s`` after
    it answered ``initialize`` (its start-up alone takes seconds: loading the model and the stores)."""
    client = McpStdioClient(project)
    killer = threading.Timer(kill_after_s, lambda: client.proc.poll() is None and os.kill(client.proc.pid, signal.SIGKILL))
    counts = {"adds": 0, "updates": 0, "searches": 0}
    try:
        assert client.initialize(), f"trial {trial}: codemem mcp did not answer initialize"
        # warm up (the first add loads the model, the first search its index): acknowledged like the rest
        content = f"Soak trial {trial} warm-up: the scheduler keeps {trial} entries"
        added = client.tool("memory_add", {"memory_type": "session", "content": content, "request_id": f"soak-{trial}-0"})
        assert added is not None, f"trial {trial}: the server died in the warm-up"
        acked[added["memory_id"]] = (content, 1)
        counts["adds"] += 1
        assert client.tool("memory_search", {"query": "which component keeps entries", "limit": 5}) is not None
        killer.start()
        n = 0
        while client.proc.poll() is None:
            n += 1
            op = rng.random()
            if op < 0.55 or not acked:
                content = f"Soak trial {trial} note {n}: the {rng.choice(['cache', 'queue', 'parser', 'router'])} " \
                          f"keeps {rng.randint(1, 10_000)} entries"
                added = client.tool("memory_add", {"memory_type": "session", "content": content,
                                                   "request_id": f"soak-{trial}-{n}"})
                if added is None:
                    break
                acked[added["memory_id"]] = (content, 1)
                counts["adds"] += 1
            elif op < 0.75:
                mid = rng.choice(sorted(acked))
                content, version = acked[mid]
                new = f"{content} (revised {n})"
                updated = client.tool("memory_update", {"memory_id": mid, "memory_type": "session", "content": new,
                                                        "expected_version": version})
                if updated is None:
                    break
                acked[mid] = (new, updated["version"])
                counts["updates"] += 1
            else:
                found = client.tool("memory_search", {"query": "which component keeps entries", "limit": 5})
                if found is None:
                    break
                counts["searches"] += 1
    finally:
        killer.cancel()
        if client.proc.poll() is None:
            os.kill(client.proc.pid, signal.SIGKILL)
        client.close()
    return counts


_MCP_CHECK = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.memory.projection import COLLECTIONS
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    try:
        rows = {r.id: {"content": r.content, "version": r.version, "deleted": r.deleted} for r in svc.memory.ledger.iter_memories()}
        sync = svc.memory.sync()
        stats = svc.memory.memory_statistics()
        ids = svc.vectors.ids(COLLECTIONS["session"])
        print(json.dumps({"rows": rows, "sync_failed": sync["failed"], "outbox": stats.outbox,
                          "sync_status": stats.sync_status, "points": sorted(ids)}))
    finally:
        svc.close()
    """
)


def _mcp_soak(project: Path, trials: int, max_delay_s: float) -> dict[str, Any]:
    rng = random.Random(9_4_2 + trials)
    acked: dict[str, tuple[str, int]] = {}
    totals = {"adds": 0, "updates": 0, "searches": 0}
    for trial in range(trials):
        delay = rng.uniform(0.0, max_delay_s)
        for key, value in _client_session(project, trial, rng, delay, acked).items():
            totals[key] += value
        state = _check(_MCP_CHECK, str(project))
        rows = state["rows"]
        for mid, (content, version) in acked.items():
            assert mid in rows, f"trial {trial}: acknowledged memory {mid} is gone"
            assert rows[mid]["version"] >= version and not rows[mid]["deleted"], (trial, mid, rows[mid], version)
            if rows[mid]["version"] == version:
                assert rows[mid]["content"] == content, (trial, mid)
        assert len(set(rows) - set(acked)) <= trial + 1, "more unacknowledged memories than kills"
        assert state["sync_failed"] == 0 and state["outbox"]["pending"] == 0, (trial, state["outbox"])
        assert state["sync_status"]["pending"] == 0 and state["sync_status"]["failed"] == 0, (trial, state["sync_status"])
        assert sorted(rows) == state["points"], f"trial {trial}: the vector projection differs from the ledger"
        print(f"mcp trial {trial}: kill {delay:.2f}s after warm-up, {len(acked)} acknowledged memories ok", flush=True)
        # the revised memories must be corrected if a kill left a stale acknowledgement (never older than acked)
        for mid, row in rows.items():
            if mid in acked and row["version"] > acked[mid][1]:
                acked[mid] = (row["content"], row["version"])
    return {"trials": trials, **totals, "memories": len(acked)}


@pytest.mark.soak  # 3 trials; the 50-trial soaks below cover it (default run kept under 15 min)
def test_random_sigkill_of_codemem_mcp_short(project: Path, graph_servers: Path) -> None:
    result = _mcp_soak(project, SHORT_TRIALS, max_delay_s=4.0)
    print(f"\nmcp kill (short): {result}")
    assert result["adds"] > 0


@pytest.mark.soak
def test_random_sigkill_of_codemem_mcp_soak(project: Path, graph_servers: Path) -> None:
    result = _mcp_soak(project, SOAK_TRIALS, max_delay_s=6.0)
    print(f"\nmcp kill soak: {result}")
    assert result["adds"] > SOAK_TRIALS


# --------------------------------------------------------------------------------------------
# 3. codemem normalize
# --------------------------------------------------------------------------------------------

_NORMALIZE_SEED = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput
    from resources.settings import Settings

    trial = int(sys.argv[2])
    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    try:
        add = lambda c: svc.memory.memory_add(MemoryAddInput(memory_type="session", content=c)).memory_id
        keep = [add(f"Trial {trial}: moved job number {trial} of the {w} service to the night shift") for w in ("billing", "mail")]
        a = add(f"Trial {trial}: the importer retries {trial} times before giving up.")
        b = add(f"trial {trial}: the importer retries {trial} times before giving up.")
        print(json.dumps({"keep": keep, "pair": [a, b]}))
    finally:
        svc.close()
    """
)

_NORMALIZE_CHECK = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from query_server.service import CodeMemService
    from resources.memory.projection import COLLECTIONS, collection_name
    from resources.schemas.memory import NormalizeMemoryInput, NormalizeStatusInput
    from resources.settings import Settings

    def finish(svc, dry_run):
        job = svc.memory.normalize_memory(NormalizeMemoryInput(dry_run=dry_run))
        while (job := svc.memory.normalize_status(NormalizeStatusInput(job_id=job.job_id))).status == "running":
            time.sleep(0.05)
        return job

    svc = CodeMemService(Settings(project_root=Path(sys.argv[1])))
    try:
        ledger = svc.memory.ledger
        after_kill = {r.id: r.deleted for r in ledger.iter_memories()}
        done = finish(svc, False)
        svc.memory.sync()
        live = svc.memory.projector.generation
        counts = {t: [svc.vectors.count(collection_name(t, live)), ledger.counts().get(t, {}).get("total", 0)] for t in COLLECTIONS}
        again = finish(svc, True)
        final = {r.id: r.deleted for r in ledger.iter_memories()}
        print(json.dumps({"after_kill": after_kill, "final": final, "status": done.status, "errors": done.errors,
                          "counts": counts, "again": {k: again.report.get(k) for k in ("duplicates", "cleanup")}}))
    finally:
        svc.close()
    """
)


def _normalize_soak(project: Path, trials: int, max_delay_s: float) -> dict[str, Any]:
    rng = random.Random(9_4_3 + trials)
    keep: list[str] = []
    pairs: list[list[str]] = []
    killed = 0
    for trial in range(trials):
        seeded = _check(_NORMALIZE_SEED, str(project), str(trial))
        keep += seeded["keep"]
        pairs.append(seeded["pair"])
        delay = rng.uniform(0.0, max_delay_s)
        errors = project.parent / f"normalize-{trial}.err"
        with errors.open("w") as err:
            proc = subprocess.Popen([*CODEMEM, "normalize", "--project", str(project), "--json"], stdout=subprocess.DEVNULL,
                                    stderr=err, env=child_env(), cwd=str(REPO_ROOT), start_new_session=True)
        killed += _kill_at(proc, delay)
        if proc.returncode != SIGKILLED:
            assert proc.returncode == 0, (trial, proc.returncode, errors.read_text()[-3000:])
        state = _check(_NORMALIZE_CHECK, str(project))
        for rows in (state["after_kill"], state["final"]):
            for mid in keep:
                assert mid in rows and not rows[mid], f"trial {trial} (kill at {delay:.2f}s): memory {mid} lost or deleted"
            for a, b in pairs:
                present = [mid for mid in (a, b) if mid in rows and not rows[mid]]
                assert len(present) >= 1, f"trial {trial}: both of the duplicate pair {a}, {b} are gone"
        assert state["status"] == "done", (trial, state["errors"])
        for a, b in pairs:  # the completed run merged each pair
            assert [state["final"].get(m) is False for m in (a, b)].count(True) == 1, (trial, a, b)
        assert all(v == e for v, e in state["counts"].values()), (trial, state["counts"])
        assert state["again"] == {"duplicates": 0, "cleanup": 0}, (trial, state["again"])
        print(f"normalize trial {trial}: kill at {delay:.2f}s ({'killed' if proc.returncode == SIGKILLED else 'finished first'}), ok",
              flush=True)
    return {"trials": trials, "killed": killed, "memories": len(keep) + 2 * len(pairs)}


@pytest.mark.soak  # 3 trials; the 50-trial soaks below cover it (default run kept under 15 min)
def test_random_sigkill_of_codemem_normalize_short(project: Path, graph_servers: Path) -> None:
    result = _normalize_soak(project, SHORT_TRIALS, max_delay_s=10.0)
    print(f"\nnormalize kill (short): {result}")


@pytest.mark.soak
def test_random_sigkill_of_codemem_normalize_soak(project: Path, graph_servers: Path) -> None:
    result = _normalize_soak(project, SOAK_TRIALS, max_delay_s=12.0)
    print(f"\nnormalize kill soak: {result}")
    assert result["killed"] >= SOAK_TRIALS // 3, result


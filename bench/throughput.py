"""Indexing throughput and memory: codemem against the raw work it wraps, in the same run.

Corpus: ``N`` real ``.py`` files of the Python standard library (default 1,000; the files under
``lib/python3.12`` outside ``site-packages``, ordered by a hash of their path so the sample
spreads over the whole library), copied into a temporary directory outside the repository.

Every timed phase runs in its own fresh subprocess (``python -m bench.throughput --phase ...``)
so imports, caches and peak-memory figures of one phase never leak into another:

* ``raw_parse``   — read + ``tree_sitter.Parser.parse`` of exactly the files codemem's discovery
                    selects (median of 3 passes);
* ``index``       — ``CodeMemService.index(embed=False)`` with ``dense_embeddings=False`` into a
                    fresh state dir (parse, records, sparse vectors, qdrant-edge, graph, manifest,
                    resolution);
* ``reindex``     — a new process opening the same state and re-indexing with nothing changed
                    (the ≤ 2 s target; the time to open the stores is reported separately);
* ``raw_embed``   — the raw local embedder (``LocalMiniLMEmbedder`` configured as codemem
                    configures it: same threads and batch size, no cache) over exactly the texts
                    codemem embeds for the embed subset (model load excluded);
* ``index_embed`` — ``CodeMemService.index(embed=True)`` of the embed subset into a fresh state
                    dir, so the embedding cache starts empty.

Embedding is ~10-20 texts/s on this machine, so the embedding comparison uses the first files of
the same sample up to a symbol budget rather than all 1,000 files; the ratio is what counts.

Peak memory: each phase reports its own peak RSS (VmHWM) and the peak RSS of its whole process tree
(itself plus children such as the embedded FalkorDB server) sampled every 20 ms with psutil.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any

STDLIB = Path(f"/root/.pyenv/versions/3.12.1/lib/python{sys.version_info.major}.{sys.version_info.minor}")
TARGET_INDEX_VS_PARSE = 0.5
TARGET_EMBED_VS_RAW = 0.67
TARGET_REINDEX_SECONDS = 2.0


# -- corpus ----------------------------------------------------------------------------------

def stdlib_root() -> Path:
    """The standard library directory of this interpreter (the pyenv one when present)."""
    if STDLIB.is_dir():
        return STDLIB
    import sysconfig

    return Path(sysconfig.get_paths()["stdlib"])


def make_corpus(dest: Path, n_files: int) -> list[str]:
    """Copy ``n_files`` stdlib .py files (hash-ordered sample, ≤ 1 MB) to ``dest``; returns their paths."""
    src = stdlib_root()
    candidates = []
    for path in src.rglob("*.py"):
        rel = path.relative_to(src).as_posix()
        if "site-packages" in rel or "__pycache__" in rel or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_size > 1_000_000:
            continue
        candidates.append(rel)
    candidates.sort(key=lambda r: hashlib.sha1(r.encode()).hexdigest())
    chosen = sorted(candidates[:n_files])
    for rel in chosen:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)
    return chosen


# -- memory sampling -------------------------------------------------------------------------

class PeakRSS:
    """Samples the RSS of this process (or of process ``pid``) and its children every ``interval``
    seconds, with the processes ``extra_pids()`` names (a daemonized server the run started, which
    is no longer its child). ``peak``: resident bytes; ``peak_anon``: of them, anonymous memory
    (``RssAnon``, Linux; 0 elsewhere) — what cannot be dropped and read back from a file, as the
    pages of qdrant's memory-mapped files can."""

    def __init__(
        self, interval: float = 0.02, pid: int | None = None, extra_pids: Callable[[], Iterable[int]] | None = None,
    ) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.interval = interval
        self.extra_pids = extra_pids
        self.peak = 0
        self.peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> list[Any]:
        import psutil

        found = {self.proc.pid: self.proc}
        for child in self.proc.children(recursive=True):
            found[child.pid] = child
        for pid in self.extra_pids() if self.extra_pids is not None else ():
            try:
                found.setdefault(pid, psutil.Process(pid))
            except psutil.Error:
                pass
        return list(found.values())

    def _sample(self) -> None:
        import psutil

        total = anon = 0
        try:
            processes = self._processes()
        except psutil.Error:
            return
        for proc in processes:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
            anon += _rss_anon(proc.pid)
        self.peak = max(self.peak, total)
        self.peak_anon = max(self.peak_anon, anon)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()


def _rss_anon(pid: int) -> int:
    """Anonymous resident bytes of a process (``RssAnon`` of ``/proc/PID/status``; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _self_maxrss_mb() -> float:
    """Peak RSS of this process since its exec (VmHWM).

    ``ru_maxrss`` is not used: on Linux a child keeps its parent's high-water mark across
    fork + exec, so it would report the (larger) benchmark driver's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# -- phases (each in its own process) --------------------------------------------------------

def _settings(project: Path, state: Path, dense: bool) -> Any:
    from resources.settings import Settings

    return Settings(project_root=project, state_dir=state, dense_embeddings=dense)


def phase_raw_parse(project: Path, state: Path, repeats: int = 3) -> dict[str, Any]:
    import tree_sitter as ts
    import tree_sitter_python as tsp

    from pipelines.discovery import discover, resolve_project_root

    settings = _settings(project, state, dense=False)
    found = discover(resolve_project_root(project), extensions=settings.extensions, max_file_bytes=settings.max_file_bytes)
    paths = [f.absolute_path for f in found.files if f.language == "python"]
    parser = ts.Parser(ts.Language(tsp.language()))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        for path in paths:
            parser.parse(path.read_bytes())
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    # For diagnosis only: codemem's own parse + symbol/import/call extraction, one process.
    from pipelines.parsing import parse_source

    started = time.perf_counter()
    for f in found.files:
        if f.language == "python":
            parse_source(f.path, f.absolute_path.read_bytes(), "python")
    extract_seconds = time.perf_counter() - started
    return {
        "files": len(paths), "non_python_skipped": len(found.files) - len(paths), "seconds": round(seconds, 3),
        "all_seconds": [round(t, 3) for t in times], "files_per_min": round(60 * len(paths) / seconds, 1),
        "parse_extract_seconds": round(extract_seconds, 3),
        "parse_extract_files_per_min": round(60 * len(paths) / extract_seconds, 1),
    }


def phase_index(project: Path, state: Path, dense: bool) -> dict[str, Any]:
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput

    started = time.perf_counter()
    svc = CodeMemService(_settings(project, state, dense=dense))
    open_seconds = time.perf_counter() - started
    try:
        started = time.perf_counter()
        report = svc.index(IndexInput(embed=dense))
        seconds = time.perf_counter() - started
    finally:
        started = time.perf_counter()
        svc.close()
        close_seconds = time.perf_counter() - started
    indexed = report["files_indexed"]
    return {
        "files_seen": report["files_seen"], "files_indexed": indexed, "files_unchanged": report["files_unchanged"],
        "failed": len(report["failed"]), "skipped": len(report["skipped"]),
        "symbols": report["symbols_total"], "edges": report["edges_total"],
        "dense": f"{report['dense_done']}/{report['dense_total']}",
        "open_seconds": round(open_seconds, 3), "seconds": round(seconds, 3), "close_seconds": round(close_seconds, 3),
        "files_per_min": round(60 * max(indexed, report["files_unchanged"]) / seconds, 1) if seconds else None,
        "failed_examples": report["failed"][:5],
    }


def _embed_texts(state: Path) -> list[str]:
    """The texts codemem still has to embed in this state (a symbol's text goes once its vector is stored)."""
    import sqlite3

    from resources.manifest_store import unpack

    db = sqlite3.connect(state / "index.db")
    try:  # (stored packed: ``resources.manifest``)
        return [unpack(row[0]) for row in db.execute("SELECT embed_text FROM symbols WHERE embed_text != '' ORDER BY path, id")]
    finally:
        db.close()


def phase_raw_embed(project: Path, state: Path) -> dict[str, Any]:
    """Raw embedder over the texts codemem stored in ``state`` (from a no-embed index)."""
    from resources.embeddings.local import LocalMiniLMEmbedder

    settings = _settings(project, state, dense=True)
    texts = _embed_texts(state)
    runtime = os.environ.get("CODEMEM_EMBED_RUNTIME", "auto")
    embedder = LocalMiniLMEmbedder(threads=settings.embed_threads, batch_size=settings.embed_batch_size, runtime=runtime)  # type: ignore[arg-type]
    started = time.perf_counter()
    embedder.load()
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    embedder.embed_documents(texts)
    seconds = time.perf_counter() - started
    return {
        "texts": len(texts), "threads": settings.embed_threads, "runtime": embedder.runtime,
        "load_seconds": round(load_seconds, 3), "seconds": round(seconds, 3),
        "texts_per_s": round(len(texts) / seconds, 2),
    }


PHASES = {"raw_parse", "index", "reindex", "raw_embed", "index_embed"}


def run_phase(phase: str, project: Path, state: Path) -> dict[str, Any]:
    """Run one phase in this process, with memory sampling."""
    with PeakRSS() as peak:
        if phase == "raw_parse":
            out = phase_raw_parse(project, state)
        elif phase in ("index", "reindex"):
            out = phase_index(project, state, dense=False)
        elif phase == "index_embed":
            out = phase_index(project, state, dense=True)
        elif phase == "raw_embed":
            out = phase_raw_embed(project, state)
        else:
            raise ValueError(phase)
    out["peak_rss_mb_self"] = round(_self_maxrss_mb(), 1)
    # The sampled tree peak can miss a short spike of this process that VmHWM records exactly.
    out["peak_rss_mb_tree"] = round(max(peak.peak / 2**20, out["peak_rss_mb_self"]), 1)
    return out


def spawn(phase: str, project: Path, state: Path, timeout: float = 3600) -> dict[str, Any]:
    """Run a phase in a fresh interpreter and return its JSON result (or the error)."""
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
           "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "bench.throughput", "--phase", phase, "--project", str(project), "--state", str(state)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=repo, env=env, timeout=timeout)
    wall = time.perf_counter() - started
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}", "stderr": proc.stderr[-3000:], "process_seconds": round(wall, 2)}
    result = json.loads(lines[-1])
    result["process_seconds"] = round(wall, 2)
    return result


# -- orchestration ---------------------------------------------------------------------------

def _embed_subset(chosen: list[str], src: Path, dest: Path, symbol_budget: int) -> list[str]:
    """The first files of ``chosen`` (hash order) whose def/class count reaches ``symbol_budget``."""
    import re

    pattern = re.compile(rb"^\s*(?:async\s+def|def|class)\s", re.M)
    order = sorted(chosen, key=lambda r: hashlib.sha1(r.encode()).hexdigest())
    picked, count = [], 0
    for rel in order:
        if count >= symbol_budget:
            break
        data = (src / rel).read_bytes()
        n = len(pattern.findall(data))
        if n == 0:
            continue
        picked.append(rel)
        count += n
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)
    return picked


def run_throughput(n_files: int = 1000, embed_symbols: int = 1500, log: Any = print) -> dict[str, Any]:
    """All phases; returns the JSON-able results and prints the table via ``log``."""
    work = Path(tempfile.mkdtemp(prefix="codemem-bench-tp-"))
    try:
        project = work / "stdlib"
        chosen = make_corpus(project, n_files)
        size_mb = sum((project / r).stat().st_size for r in chosen) / 1e6
        log(f"\n== throughput: {len(chosen)} stdlib files ({size_mb:.1f} MB) in {project}")
        res: dict[str, Any] = {"files": len(chosen), "megabytes": round(size_mb, 2)}
        state = work / "state-noembed"
        res["raw_parse"] = spawn("raw_parse", project, state)
        log(f"raw_parse: {res['raw_parse']}")
        res["index"] = spawn("index", project, state)
        log(f"index: {res['index']}")
        res["reindex"] = spawn("reindex", project, state)
        log(f"reindex: {res['reindex']}")

        embed_project = work / "embed"
        picked = _embed_subset(chosen, project, embed_project, embed_symbols)
        log(f"embed subset: {len(picked)} files (~{embed_symbols} symbols)")
        prep_state = work / "state-embed-texts"
        res["embed_prep_index"] = spawn("index", embed_project, prep_state)
        res["raw_embed"] = spawn("raw_embed", embed_project, prep_state)
        log(f"raw_embed: {res['raw_embed']}")
        res["index_embed"] = spawn("index_embed", embed_project, work / "state-embed")
        log(f"index_embed: {res['index_embed']}")
        res["embed_files"] = len(picked)
        res["summary"] = summarize(res)
        log(format_summary(res["summary"]))
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    """Ratios and verdicts from the phase results."""
    out: dict[str, Any] = {}
    raw, idx, re_, remb, iemb = (res.get(k, {}) for k in ("raw_parse", "index", "reindex", "raw_embed", "index_embed"))
    if "files_per_min" in raw and idx.get("files_per_min"):
        ratio = idx["files_per_min"] / raw["files_per_min"]
        out["index_vs_raw_parse"] = {
            "codemem_files_per_min": idx["files_per_min"], "raw_files_per_min": raw["files_per_min"],
            "ratio": round(ratio, 3), "target": TARGET_INDEX_VS_PARSE, "pass": ratio >= TARGET_INDEX_VS_PARSE,
            "parse_extract_files_per_min": raw.get("parse_extract_files_per_min"),
            "parse_extract_vs_raw_parse": round(raw["parse_extract_files_per_min"] / raw["files_per_min"], 3)
            if raw.get("parse_extract_files_per_min") else None,
        }
    if "seconds" in remb and "seconds" in iemb:
        files = res.get("embed_files") or 1
        raw_rate = 60 * files / remb["seconds"]
        cm_rate = 60 * files / iemb["seconds"]
        ratio = cm_rate / raw_rate
        out["index_embed_vs_raw_embed"] = {
            "codemem_files_per_min": round(cm_rate, 1), "raw_embed_files_per_min": round(raw_rate, 1),
            "texts": remb.get("texts"), "raw_texts_per_s": remb.get("texts_per_s"),
            "ratio": round(ratio, 3), "target": TARGET_EMBED_VS_RAW, "pass": ratio >= TARGET_EMBED_VS_RAW,
        }
    if "seconds" in re_:
        out["noop_reindex"] = {
            "files": re_.get("files_unchanged"), "seconds": re_["seconds"], "open_seconds": re_.get("open_seconds"),
            "target_seconds": TARGET_REINDEX_SECONDS, "pass": re_["seconds"] <= TARGET_REINDEX_SECONDS,
        }
    out["peak_rss_mb"] = {
        k: {"tree": res[k].get("peak_rss_mb_tree"), "self": res[k].get("peak_rss_mb_self")}
        for k in ("raw_parse", "index", "reindex", "raw_embed", "index_embed") if k in res and "error" not in res[k]
    }
    errors = {k: v for k, v in res.items() if isinstance(v, dict) and "error" in v}
    if errors:
        out["errors"] = {k: v["stderr"][-1500:] for k, v in errors.items()}
    return out


def format_summary(summary: dict[str, Any]) -> str:
    lines = ["-- throughput summary"]
    item = summary.get("index_vs_raw_parse")
    if item:
        lines.append(
            f"index (no embeddings) {item['codemem_files_per_min']:.0f} files/min vs raw tree-sitter "
            f"{item['raw_files_per_min']:.0f} files/min: ratio {item['ratio']:.3f} (target >= {item['target']}) "
            f"{'PASS' if item['pass'] else 'FAIL'}"
        )
        if item.get("parse_extract_files_per_min"):
            lines.append(
                f"  (for diagnosis: codemem's parse_source alone, one process: {item['parse_extract_files_per_min']:.0f} "
                f"files/min = {item['parse_extract_vs_raw_parse']:.3f} of raw parsing)"
            )
    item = summary.get("index_embed_vs_raw_embed")
    if item:
        lines.append(
            f"index (local model) {item['codemem_files_per_min']:.1f} files/min vs raw embedding "
            f"{item['raw_embed_files_per_min']:.1f} files/min ({item['texts']} texts, {item['raw_texts_per_s']}/s): "
            f"ratio {item['ratio']:.3f} (target >= {item['target']}) {'PASS' if item['pass'] else 'FAIL'}"
        )
    item = summary.get("noop_reindex")
    if item:
        lines.append(
            f"no-change re-index of {item['files']} files: {item['seconds']:.2f} s (+{item['open_seconds']} s opening "
            f"the stores; target <= {item['target_seconds']} s) {'PASS' if item['pass'] else 'FAIL'}"
        )
    for phase, mem in summary.get("peak_rss_mb", {}).items():
        lines.append(f"peak RSS {phase:<12} process tree {mem['tree']} MB, python process {mem['self']} MB")
    for phase, err in summary.get("errors", {}).items():
        lines.append(f"ERROR in {phase}: {err.strip().splitlines()[-1] if err.strip() else '?'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=sorted(PHASES), required=True)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args()
    result = run_phase(args.phase, args.project, args.state)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""A large C tree, the way a user indexes it (issue 21): Debian's ``linux-source`` package,
downloaded at run time (nothing committed), one of its trees indexed by the default command.

    python -m bench.scale                 # Linux 6.1 fs/ (1,940 files, ~47 MB), ~5 minutes
    python -m bench.scale --tree .        # the whole kernel (long)
    python -m bench.scale --cache DIR     # where the package and its extracted trees are kept

Every figure is measured in the same run as its baseline, on the same files:

* **raw parse** — read + ``tree_sitter.Parser.parse`` of exactly the files codemem's discovery
  selects, one process, best of 3 (``--passes``; the parser's pace: what the index is held against);
* **first index** — ``codemem index PATH --no-embed`` (the default, Dagster-recorded path) in a
  fresh copy of the tree: wall time, process start included; the peak RSS of its whole process
  tree (the CLI, its parse workers, the run recorder) and of the embedded graph server it starts
  (daemonized: no longer its child) sampled every 50 ms, and how much of it is anonymous memory
  (the rest is pages of memory-mapped files, which the kernel can drop); the state it leaves (``.codemem``, allocated blocks) against the source's size (the
  tree, as ``du`` counts it; the files the index reads are printed beside it);
* **queries** — on the first index, ``bench.scale_queries``: code_search and get_related (3 hops)
  p95, held to ≤ 50 ms where the index holds ≥ 500k symbols (the whole kernel);
* **a ``git pull``-sized change** — 1% of the C files and headers edited (a function appended), then
  ``codemem index PATH --no-embed`` again: wall time; then **a pull that adds and deletes files**
  — another 1% edited, 0.1% added (new ``.c`` files of new functions) and as many ``.c`` files
  deleted — indexed again (files that come or go change what includes resolve to).

Targets (issue 21, item 2 and 3): index ≥ 0.5× the raw parse rate; peak RSS ≤ 4 GB (the kernel;
2 GB is the 15k-file target); state ≤ 3× the source; the 1% change ≤ 30 s; the whole kernel's
sparse index ≤ 10 minutes (checked only with ``--tree .``). Needs ``apt-get download`` (Debian or
Ubuntu with the package in its sources), ``dpkg-deb`` and ``tar``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import scale_queries
from bench.throughput import PeakRSS

PACKAGE = "linux-source-6.1"
TARGET_VS_RAW_PARSE = 0.5
TARGET_STATE_X = 3.0
TARGET_PEAK_RSS_GB = 4.0
TARGET_CHANGE_S = 30.0
TARGET_KERNEL_S = 600.0
CHANGED_SHARE = 0.01
CAME_AND_WENT_SHARE = 0.001
REPO = Path(__file__).resolve().parent.parent


# -- the source ------------------------------------------------------------------------------

def kernel_tree(cache: Path, tree: str) -> Path:
    """``tree`` of the kernel source, downloaded and extracted into ``cache`` once (reused after)."""
    root = cache / PACKAGE
    target = (root / tree).resolve()
    marker = root / (".extracted-all" if tree == "." else f".extracted-{tree.strip('/').replace('/', '_')}")
    if target.is_dir() and (marker.exists() or (root / ".extracted-all").exists()):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
    if not debs:
        print(f"downloading {PACKAGE} (apt-get download, ~140 MB) into {cache}", flush=True)
        done = subprocess.run(["apt-get", "download", PACKAGE], cwd=cache, capture_output=True, text=True)
        debs = sorted(cache.glob(f"{PACKAGE}_*.deb"))
        if not debs:
            sys.exit(f"cannot download {PACKAGE}: `apt-get download {PACKAGE}` said:\n{done.stderr.strip()}\n"
                     f"— on a Debian or Ubuntu machine, `apt-get update` first; or put the .deb in {cache}")
    unpacked = cache / "deb"
    tarball = next(unpacked.glob("usr/src/linux-source-*.tar.xz"), None) if unpacked.exists() else None
    if tarball is None:
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(unpacked)], check=True)
        tarball = next(unpacked.glob("usr/src/linux-source-*.tar.xz"))
    member = PACKAGE if tree == "." else f"{PACKAGE}/{tree.strip('/')}"
    print(f"extracting {member} from {tarball.name}", flush=True)
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(cache), member], check=True)
    marker.touch()
    return target


DEBIAN_IGNORE_ALL = "/*\n!/debian/\n"
"""The lines Debian's packaging appends to the kernel's top-level ``.gitignore`` (ignore everything
at the top but ``debian/``): with them the tree indexes as nothing, as git would list nothing."""


def upstream_gitignore(project: Path) -> bool:
    """Take Debian's packaging lines out of the copied tree's top-level ``.gitignore`` (the kernel's
    own, as a kernel checkout has it); True when they were there."""
    gitignore = project / ".gitignore"
    if not gitignore.is_file():
        return False
    text = gitignore.read_text()
    if DEBIAN_IGNORE_ALL not in text:
        return False
    gitignore.write_text(text.replace(DEBIAN_IGNORE_ALL, ""))
    return True


def allocated_bytes(path: Path, skip: str | None = None) -> int:
    """Bytes on disk under ``path`` (allocated blocks, as ``du`` counts: sparse files by what they use)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        if skip in dirnames:
            dirnames.remove(skip)
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


# -- measurements ----------------------------------------------------------------------------

def raw_parse(project: Path, passes: int = 3) -> dict[str, Any]:
    """Read + parse of the files codemem's discovery selects, one process, the best of ``passes``."""
    from pipelines.discovery import discover, resolve_project_root
    from pipelines.parsing.languages import get_parser
    from resources.settings import Settings

    settings = Settings(project_root=project, state_dir=project / ".codemem-raw", dense_embeddings=False)
    found = discover(resolve_project_root(project), extensions=settings.extensions, max_file_bytes=settings.max_file_bytes)
    files = [(f.absolute_path, get_parser(f.language)) for f in found.files]  # type: ignore[arg-type]
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        for path, parser in files:
            parser.parse(path.read_bytes())
        times.append(time.perf_counter() - started)
    source = sum(os.lstat(path).st_blocks * 512 for path, _ in files)
    return {"files": len(files), "seconds": round(min(times), 2), "passes": [round(t, 2) for t in times],
            "source_bytes": source}


def graph_server_pid(state: Path) -> list[int]:
    """The embedded graph server of a state dir (daemonized: not a child of the run that started it)."""
    try:
        settings = json.loads((state / "graph" / "graph.rdb.settings").read_text())
        return [int(Path(settings["pidfile"]).read_text().strip())]
    except (OSError, ValueError, KeyError):
        return []


def timed_index(project: Path) -> dict[str, Any]:
    """``codemem index PROJECT --no-embed --json``: wall time, the peak RSS of its process tree
    and of the graph server it uses, the report."""
    command = [sys.executable, "-m", "query_server.cli", "index", str(project), "--no-embed", "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakRSS(interval=0.05, pid=proc.pid, extra_pids=lambda: graph_server_pid(project / ".codemem")) as rss:
        out, err = proc.communicate()
        wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"`codemem index` failed ({proc.returncode}):\n{err[-3000:]}")
    report = json.loads(out[out.index("{"):])
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(rss.peak / 2**20), "peak_anon_mb": round(rss.peak_anon / 2**20),
            "files_indexed": report.get("files_indexed"),
            "symbols": report.get("symbols_total"), "edges": report.get("edges_total"), "run_s": report.get("seconds")}


def c_sources(project: Path) -> list[Path]:
    """The tree's ``.c`` and ``.h`` files, in path order (the state dir left out)."""
    return sorted(p for p in project.rglob("*.[ch]") if ".codemem" not in p.parts)


def append_functions(paths: list[Path], label: str) -> None:
    """Append a small static function named after ``label`` to each file."""
    for n, path in enumerate(paths):
        with path.open("a") as handle:
            handle.write(f"\nstatic int codemem_bench_{label}_{n}(int value)\n{{\n\treturn value + {n};\n}}\n")


def change_files(project: Path, share: float) -> int:
    """Append a small function to ``share`` of the tree's ``.c`` and ``.h`` files (spread over the tree)."""
    chosen = c_sources(project)[::max(1, round(1 / share))]
    append_functions(chosen, "change")
    return len(chosen)


def pull_files(project: Path, share: float, came_and_went: float) -> dict[str, int]:
    """A pull that brings new files and takes some away, beside edits: ``share`` of the ``.c`` and
    ``.h`` files edited (another function appended, half a step past ``change_files``' files),
    ``came_and_went`` of them added (a new ``.c`` file beside each chosen one: two functions of new
    names calling the allocator) and as many ``.c`` files deleted."""
    sources = c_sources(project)
    step = max(1, round(1 / share))
    edited = sources[step // 2::step]
    append_functions(edited, "pull")
    every = max(1, round(1 / came_and_went))
    added = 0
    for n, path in enumerate(sources[every // 3::every]):
        (path.parent / f"codemem_bench_new_{n}.c").write_text(
            "#include <linux/kernel.h>\n#include <linux/slab.h>\n\n"
            f"static int codemem_bench_new_{n}_probe(void)\n{{\n\tvoid *p = kmalloc(16, GFP_KERNEL);\n\n\tkfree(p);\n\treturn 0;\n}}\n\n"
            f"int codemem_bench_new_{n}_init(void)\n{{\n\treturn codemem_bench_new_{n}_probe();\n}}\n")
        added += 1
    kept = set(edited)
    c_files = [p for p in sources if p.suffix == ".c" and p not in kept]
    spacing = max(1, len(c_files) // max(added, 1))
    deleted = c_files[spacing // 2::spacing][:added]
    for path in deleted:
        path.unlink()
    return {"edited": len(edited), "added": added, "deleted": len(deleted)}


def state_breakdown(state: Path) -> dict[str, int]:
    """MB on disk per part of the state dir."""
    parts = {"qdrant": state / "qdrant", "manifest": state / "index.db", "graph": state / "graph"}
    out = {name: round(allocated_bytes(path) / 1e6, 1) if path.is_dir() else round(os.lstat(path).st_blocks * 512 / 1e6, 1)
           for name, path in parts.items() if path.exists()}
    out["total"] = round(allocated_bytes(state) / 1e6, 1)
    return out


def stop_servers(state: Path) -> None:
    """End the embedded graph server a run left daemonized (it outlives the CLI by design)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(state) in part for part in proc.info["cmdline"] or ()):
                proc.terminate()
        except psutil.Error:
            pass


# -- the run ---------------------------------------------------------------------------------

def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def run(tree: str, cache: Path, keep: bool, passes: int = 3) -> dict[str, Any]:
    source = kernel_tree(cache, tree)
    work = Path(tempfile.mkdtemp(prefix="codemem-bench-scale-"))
    project = work / ("linux" if tree == "." else Path(tree).name)
    try:
        print(f"copying {source} to {project}", flush=True)
        shutil.copytree(source, project, symlinks=True)
        if upstream_gitignore(project):
            print("took Debian's '/*' and '!/debian/' out of the top-level .gitignore (the kernel's own, as a checkout has it)")
        raw = raw_parse(project, passes)
        if not raw["files"]:
            sys.exit(f"no file of {project} is indexable: check its .gitignore files")
        shutil.rmtree(project / ".codemem-raw", ignore_errors=True)
        print(f"raw parse: {raw['files']} files in {raw['seconds']} s (best of {raw['passes']})", flush=True)
        first = timed_index(project)
        print(f"first index: {first}", flush=True)
        state = state_breakdown(project / ".codemem")
        queries = scale_queries.measure(project)  # on the first index, before the change
        print(f"queries: {queries}", flush=True)
        changed = change_files(project, CHANGED_SHARE)
        again = timed_index(project)
        print(f"{changed} files changed, index again: {again}", flush=True)
        pulled = pull_files(project, CHANGED_SHARE, CAME_AND_WENT_SHARE)
        after_pull = timed_index(project)
        print(f"a pull ({pulled}), index again: {after_pull}", flush=True)
        ratio = raw["seconds"] / first["wall_s"]
        source_mb = allocated_bytes(project, skip=".codemem") / 1e6  # the tree as a user sees it (du)
        rows = [
            ("first index ÷ raw parse rate", f"{ratio:.2f}× ({first['wall_s']} s against {raw['seconds']} s)",
             f"≥ {TARGET_VS_RAW_PARSE}×", ratio >= TARGET_VS_RAW_PARSE),
            ("peak RSS, whole process tree and graph server",
             f"{first['peak_rss_mb']} MB ({first['peak_anon_mb']} MB of it anonymous, not file pages)", f"≤ {TARGET_PEAK_RSS_GB:g} GB",
             first["peak_rss_mb"] <= TARGET_PEAK_RSS_GB * 1024),
            ("state on disk ÷ source", f"{state['total'] / source_mb:.2f}× ({state['total']} MB for {source_mb:.1f} MB, "
             f"{raw['source_bytes'] / 1e6:.1f} MB of it indexed; {state})",
             f"≤ {TARGET_STATE_X:g}×", state["total"] <= TARGET_STATE_X * source_mb),
            (f"{changed} files changed ({CHANGED_SHARE:.0%}), index again", f"{again['wall_s']} s", f"≤ {TARGET_CHANGE_S:g} s",
             again["wall_s"] <= TARGET_CHANGE_S),
            (f"{pulled['edited']} files changed, {pulled['added']} added and {pulled['deleted']} deleted, index again",
             f"{after_pull['wall_s']} s (peak RSS {after_pull['peak_rss_mb']} MB)", f"≤ {TARGET_CHANGE_S:g} s",
             after_pull["wall_s"] <= TARGET_CHANGE_S),
        ]
        rows += [(row["row"], row["measured"], row["target"], row["pass"]) for row in scale_queries.rows(queries)]
        if tree == ".":
            rows.append(("whole kernel, searchable by words", f"{first['wall_s']} s", f"≤ {TARGET_KERNEL_S:g} s",
                         first["wall_s"] <= TARGET_KERNEL_S))
        print(f"\nLinux ({PACKAGE}) {tree}: {raw['files']} files, {first['symbols']} symbols, {first['edges']} edges; "
              f"{os.cpu_count()} cores")
        for name, measured, target, ok in rows:
            print(f"  {'—' if ok is None else verdict(ok)}  {name}: {measured} (target {target})")
        return {"tree": tree, "raw_parse": raw, "first_index": first, "state_mb": state, "queries": queries, "changed_files": changed,
                "index_after_change": again, "pull": pulled, "index_after_pull": after_pull, "rows": [dict(zip(("row", "measured", "target", "pass"), r, strict=True)) for r in rows]}
    finally:
        stop_servers(project)
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="fs", help="the kernel tree to index ('.' for the whole kernel; default fs)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "codemem-bench-linux",
                        help="where the package and its extracted trees are kept between runs")
    parser.add_argument("--keep", action="store_true", help="keep the indexed copy (its path is printed)")
    parser.add_argument("--passes", type=int, default=3, help="raw parse passes, the best taken (1 for the whole kernel)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = run(args.tree, args.cache, args.keep, args.passes)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if all(row["pass"] is not False for row in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Duplicates that survive edits: ``find_duplicates`` on mechanically built clones (issue 19, item 1).

``python -m bench.duplicates`` (held-out corpora, ~10 min on 2 cores) · ``--dev`` (the corpora
used while building the canonical form) · ``--per-kind N`` (originals per edit kind and language,
default 40) · ``--pad 100000`` (symbols for the latency row; 0 skips it).

Corpora (downloaded into the ignored ``bench/.cache/``; nothing of them is committed):

* held-out, never looked at while building: Python ``funcy`` and ``sortedcontainers`` (PyPI
  sdists), TypeScript ``mobx`` (``src/`` of the npm package); the other-package negatives come from
  ``toolz`` (Python) and ``rxjs`` (TypeScript), which are not indexed;
* ``--inspected``: the held-out set until stop 31 (``more-itertools``, ``boltons``, ``zod``),
  retired because its misses were read; kept to compare with the figures reported then;
* ``--dev``: Python ``toolz`` and TypeScript ``rxjs``; other-package negatives from a few Python
  standard-library modules.

Method: the corpora are copied into a fresh project and indexed by the real service (parser,
local embedding model, qdrant-edge). ``bench.clones`` picks functions (seeded) and writes, for each
edit kind alone and for all applicable kinds combined, a clone with the same behaviour (names,
annotations, docstring, comments, formatting, defaults' spelling, ``x += 1`` ↔ ``x = x + 1``,
swapped comparison operands, a return through a temporary, if/else ↔ conditional expression,
loop ↔ comprehension). ``CodeMemService.find_duplicates`` runs once per clone with the default
threshold (0.85) and limit; a clone is found when its original (file, name, line) is returned.
Hard negatives, each counted as a false flag when reported at the default threshold:

* **same signature**: two functions of the same corpus with the same parameters and different
  behaviour (``bench.clones.hard_negatives``); the query is one, a flag is the other returned;
* **other package**: a function of a package that is not indexed; a flag is any hit.

The baseline, in the same run on the same candidates: the structural re-scoring on the raw code
(the scoring before the canonical form). ``find_duplicates`` p95 is measured on the corpus index,
during the accuracy pass (caches kept from query to query), and again after padding the code
collection to ``--pad`` symbols (standard-library code with random
unit vectors, as ``bench.latency`` does: exact and HNSW search time do not depend on the values;
recall at that size is not claimed), on 200 of the cases, the embedding cache off and every
per-function cache emptied before each (the cases share originals, so a cache kept across them
would flatter the figure); the heap is
settled after indexing and after padding (``query_server.import_phase.settle_heap``), as the
servers settle it once their stores are open and warm. Targets: recall ≥ 0.90 for every edit kind alone, ≥ 0.85
combined, false flags ≤ 0.05 on each hard-negative set, p95 ≤ 100 ms at 100k symbols. Results go to
``bench/results/duplicates.json``; the exit status is 1 when a target fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
RESULT_PATH = BENCH_DIR / "results" / "duplicates.json"
STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"

RECALL_ALONE = 0.90
RECALL_COMBINED = 0.85
FALSE_FLAGS = 0.05
P95_MS = 100.0
PAD_SYMBOLS = 100_000

PYPI = {"funcy": "2.1", "sortedcontainers": "2.4.0", "more-itertools": "11.2.1", "boltons": "26.2.0", "toolz": "1.2.0"}
NPM = {"mobx": "7.1.3", "zod": "4.6.7", "rxjs": "7.8.2"}
HELD_OUT = {"index": [("python", "funcy"), ("python", "sortedcontainers"), ("typescript", "mobx")],
            "other": [("python", "toolz"), ("typescript", "rxjs")]}
INSPECTED = {"index": [("python", "more-itertools"), ("python", "boltons"), ("typescript", "zod")],
            "other": [("python", "toolz"), ("typescript", "rxjs")]}
DEV = {"index": [("python", "toolz"), ("typescript", "rxjs")],
       "other": [("python", "stdlib")]}
STDLIB_MODULES = ("textwrap.py", "shlex.py", "fractions.py", "statistics.py", "difflib.py", "colorsys.py")


# -- corpora ---------------------------------------------------------------------------------------

def _pypi_corpus(package: str, into: Path) -> Path:
    """The .py files of a pinned sdist, extracted under ``into/package``."""
    from bench.corpora import download_sdist

    tarball = download_sdist(package, PYPI[package])
    target = into / package
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts[1:]
            if member.isfile() and member.name.endswith(".py") and parts:
                data = archive.extractfile(member)
                if data is not None:
                    path = target.joinpath(*parts)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data.read())
    return target


def _npm_corpus(package: str, into: Path) -> Path:
    """The ``src/`` TypeScript files of a pinned npm package (``npm pack``), under ``into/package``."""
    cache = CACHE_DIR / "npm"
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"{package}-{NPM[package]}.tgz"
    if not tarball.exists():
        subprocess.run(["npm", "pack", f"{package}@{NPM[package]}", "--pack-destination", str(cache)],
                       check=True, capture_output=True, text=True, timeout=300)
    target = into / package
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) > 2 and parts[1] == "src" and member.name.endswith(".ts") \
                    and not member.name.endswith(".d.ts"):
                data = archive.extractfile(member)
                if data is not None:
                    path = target.joinpath(*parts[2:])
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data.read())
    return target


def _stdlib_corpus(into: Path) -> Path:
    target = into / "stdlib"
    target.mkdir(parents=True, exist_ok=True)
    for name in STDLIB_MODULES:
        shutil.copy(STDLIB / name, target / name)
    return target


def corpus(language: str, package: str, into: Path) -> Path:
    """A corpus folder on disk (downloaded on first use)."""
    if package == "stdlib":
        return _stdlib_corpus(into)
    return _pypi_corpus(package, into) if language == "python" else _npm_corpus(package, into)


# -- cases -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One query: code to check and what a right answer is."""

    group: str  # an edit kind, "combined", "same_signature" or "other_package"
    language: str
    code: str
    expect: tuple[str, str, int] | None  # (file, name, line) of the original for a clone
    avoid: tuple[str, str, int] | None = None  # the function a same-signature negative must not flag


def _where(fn: Any, prefix: str) -> tuple[str, str, int]:
    return f"{prefix}/{fn.path}", fn.name, fn.start_line


def build_cases(indexed: dict[tuple[str, str], Path], others: dict[tuple[str, str], Path], per_kind: int,
                seed: int = 19) -> list[Case]:
    """Clones of indexed functions per edit kind, and the two kinds of hard negative."""
    from bench import clones

    rng = random.Random(seed)
    cases: list[Case] = []
    by_language: dict[str, list[tuple[Any, str]]] = defaultdict(list)
    for (language, package), root in indexed.items():
        functions = clones.functions_of(root, language)
        by_language[language] += [(fn, package) for fn in functions]
        negatives = clones.hard_negatives(functions, rng, per_kind)
        for shown, other in negatives:
            cases.append(Case("same_signature", language, shown.code, None, _where(other, package)))
    for language, functions in by_language.items():
        for kind in (*clones.EDIT_KINDS, clones.COMBINED):
            order = functions[:]
            rng.shuffle(order)
            taken = 0
            for fn, package in order:
                code = clones.make_clone(fn, kind, rng)
                if code is None:
                    continue
                cases.append(Case(kind, language, code, _where(fn, package)))
                taken += 1
                if taken >= per_kind:
                    break
    for (language, _package), root in others.items():
        functions = clones.functions_of(root, language)
        rng.shuffle(functions)
        cases += [Case("other_package", language, fn.code, None) for fn in functions[:per_kind]]
    return cases


def _matches(hit: Any, where: tuple[str, str, int]) -> bool:
    path, name, line = where
    return hit.file_path == path and hit.name == name and hit.start_line <= line <= max(hit.end_line, hit.start_line)


def _indexed_only(service: Any, cases: list[Case]) -> tuple[list[Case], int]:
    """The cases whose original (or flagged function) is a symbol of the index."""
    from pipelines.indexer import CODE_COLLECTION

    spans: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for point in service.vectors.scroll(CODE_COLLECTION, limit=1_000_000):
        payload = point.payload
        spans[(payload.get("file_path", ""), payload.get("name", ""))].append(
            (int(payload.get("start_line", 0)), int(payload.get("end_line", 0))))

    def known(where: tuple[str, str, int] | None) -> bool:
        return where is None or any(start <= where[2] <= end for start, end in spans.get(where[:2], []))

    kept = [case for case in cases if known(case.expect) and known(case.avoid)]
    return kept, len(cases) - len(kept)


# -- the baseline: structural scoring on the raw code -----------------------------------------------

def raw_scoring(service: Any, code: str, language: str, threshold: float, limit: int) -> list[dict[str, Any]]:
    """``find_duplicates`` as it scored before the canonical form: dense candidates for the snippet's
    embedding text (as the index embeds a function), the raw code compared."""
    from pipelines.indexer import CODE_COLLECTION
    from pipelines.parsing import parse_source
    from pipelines.records import embedding_text
    from resources.code_similarity import Candidate, score_candidates
    from resources.schemas.code import CALLABLE_KINDS
    from resources.vectors.store import PayloadFilter

    parsed = parse_source("snippet", code.encode("utf-8"), language)  # type: ignore[arg-type]
    functions = [s for s in parsed.symbols if s.kind in CALLABLE_KINDS]
    text = embedding_text(parsed, functions[0], functions[0].qualified_name) if functions else code
    vector = service.embedder.embed_documents([text])[0]
    hits, _ = service.vectors.ranked_lists(
        CODE_COLLECTION, dense=vector, sparse=None, candidates=max(limit * 5, 50),
        payload_filter=PayloadFilter({"kind": sorted(CALLABLE_KINDS), "language": [language]}),
    )
    snippet = functions[0] if functions else None
    scores = score_candidates(
        snippet.code if snippet else code, snippet.name if snippet else None, language,
        [Candidate(h.payload.get("code") or "", h.payload.get("name"), h.payload.get("language"), h.score,
                   bool(h.payload.get("code_truncated"))) for h in hits],
        service.embedder.embed_documents,
    )
    ranked = sorted(zip(hits, scores, strict=True), key=lambda pair: -pair[1][0])[:limit]
    return [dict(h.payload, similarity=score) for h, (score, _) in ranked if score >= threshold]


@dataclass
class _Hit:
    file_path: str
    name: str
    start_line: int
    end_line: int


def _as_hits(rows: list[dict[str, Any]]) -> list[_Hit]:
    return [_Hit(r.get("file_path", ""), r.get("name", ""), int(r.get("start_line", 0)), int(r.get("end_line", 0)))
            for r in rows]


# -- scoring ---------------------------------------------------------------------------------------

def score(cases: list[Case], answers: list[list[Any]]) -> dict[str, dict[str, Any]]:
    """Recall per edit kind (clones) and false-flag rate per hard-negative set, per language and overall."""
    table: dict[str, dict[str, Any]] = {}
    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for case, hits in zip(cases, answers, strict=True):
        if case.expect is not None:
            outcome = any(_matches(h, case.expect) for h in hits)
        elif case.avoid is not None:
            outcome = any(_matches(h, case.avoid) for h in hits)
        else:
            outcome = bool(hits)
        groups[(case.group, case.language)].append(outcome)
        groups[(case.group, "all")].append(outcome)
    for (group, language), outcomes in sorted(groups.items()):
        metric = "false_flags" if group in ("same_signature", "other_package") else "recall"
        table.setdefault(group, {})[language] = {metric: round(sum(outcomes) / len(outcomes), 3), "n": len(outcomes)}
    return table


def _errors(cases: list[Case], answers: list[list[Any]]) -> list[dict[str, Any]]:
    """Each missed clone and each false flag: the case and what was returned (for diagnostics)."""
    out = []
    for case, hits in zip(cases, answers, strict=True):
        if case.expect is not None:
            wrong = not any(_matches(h, case.expect) for h in hits)
        elif case.avoid is not None:
            wrong = any(_matches(h, case.avoid) for h in hits)
        else:
            wrong = bool(hits)
        if wrong:
            out.append({
                "group": case.group, "language": case.language, "expect": case.expect, "avoid": case.avoid,
                "returned": [{"file": h.file_path, "name": h.name, "line": h.start_line, "similarity": h.similarity,
                              "differences": h.differences} for h in hits[:3]],
                "code": case.code[:800],
            })
    return out


def verdicts(table: dict[str, dict[str, Any]]) -> list[tuple[str, str, float, bool]]:
    """``(row, target text, figure, passed)`` for every target."""
    rows = []
    for group, by_language in table.items():
        overall = by_language["all"]
        if "recall" in overall:
            target = RECALL_COMBINED if group == "combined" else RECALL_ALONE
            rows.append((f"recall, {group}", f"≥ {target}", overall["recall"], overall["recall"] >= target))
        else:
            rows.append((f"false flags, {group}", f"≤ {FALSE_FLAGS}", overall["false_flags"],
                         overall["false_flags"] <= FALSE_FLAGS))
    return rows


# -- padding for the latency row -------------------------------------------------------------------

def pad_code_collection(service: Any, total: int, rng: np.random.Generator, log: Callable[[str], None]) -> int:
    """Add standard-library functions (real code, random unit vectors) until the collection holds
    ``total``, then build its search index as ``codemem index`` does after writing that many
    (``pipelines.indexer._maybe_optimize``): a search then runs on HNSW, not on unindexed segments."""
    from pipelines.indexer import CODE_COLLECTION
    from pipelines.parsing import parse_source
    from pipelines.records import callable_language
    from resources.vectors.store import VectorPoint

    have = service.vectors.count(CODE_COLLECTION)
    files = sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts and p.stat().st_size < 300_000)
    dim = len(service.embedder.embed_documents(["x"])[0])
    batch: list[VectorPoint] = []
    round_ = 0
    while have < total:
        for path in files:
            try:
                parsed = parse_source(str(path), path.read_bytes(), "python")
            except Exception:  # noqa: BLE001, S112 - a file the parser refuses is simply not padding
                continue
            for symbol in parsed.symbols:
                vector = rng.standard_normal(dim).astype(np.float32)
                vector /= np.linalg.norm(vector)
                batch.append(VectorPoint(id=str(uuid.uuid4()), dense=vector.tolist(), payload={
                    "kind": symbol.kind, "name": symbol.name, "qualified_name": symbol.qualified_name,
                    "language": "python", **callable_language(symbol.kind, "python"),
                    "file_path": f"pad/{round_}/{path.relative_to(STDLIB)}",
                    "start_line": symbol.start_line, "end_line": symbol.end_line, "code": symbol.code,
                    "signature": symbol.signature or "",
                }))
                have += 1
                if len(batch) >= 2_000 or have >= total:
                    service.vectors.upsert(CODE_COLLECTION, batch)
                    batch = []
                    log(f"  padded to {have:,} symbols")
                if have >= total:
                    break
            if have >= total:
                break
        round_ += 1
    service.vectors.optimize(CODE_COLLECTION)  # as `codemem index` leaves a collection this size
    log(f"  optimized ({have:,} symbols)")
    return have


# -- the run ---------------------------------------------------------------------------------------

def _clear_caches() -> None:
    """Forget the canonical forms and tokens computed so far (they are cached per process)."""
    from pipelines.parsing.canonical import canonical_code
    from resources.code_similarity import _code_tokens, code_side

    canonical_code.cache_clear()
    _code_tokens.cache_clear()
    code_side.cache_clear()


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return round(1000 * ordered[max(0, int(0.95 * len(ordered)) - 1)], 1) if ordered else 0.0


def run(dev: bool, per_kind: int, pad: int, log: Callable[[str], None] = print, inspected: bool = False) -> dict[str, Any]:
    """Index the corpora, query every case, and return the figures."""
    from query_server.import_phase import settle_heap
    from query_server.service import CodeMemService
    from resources.schemas.tools import FindDuplicatesInput, IndexInput
    from resources.settings import Settings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    plan = DEV if dev else INSPECTED if inspected else HELD_OUT
    tmp = Path(tempfile.mkdtemp(prefix="codemem-bench-dups-"))
    try:
        project, outside = tmp / "project", tmp / "outside"
        indexed = {(lang, pkg): corpus(lang, pkg, project) for lang, pkg in plan["index"]}
        others = {(lang, pkg): corpus(lang, pkg, outside) for lang, pkg in plan["other"]}
        cases = build_cases(indexed, others, per_kind)
        log(f"{len(cases)} cases from {', '.join(p for _, p in plan['index'])} "
            f"(other-package negatives: {', '.join(p for _, p in plan['other'])})")
        settings = Settings(project_root=project, state_dir=tmp / "state", dense_embeddings=True)
        service = CodeMemService(settings)
        try:
            _, seconds = _timed(lambda: service.index(IndexInput(embed=True)))
            settle_heap()  # as `codemem mcp` and `codemem serve` do once the stores are open and warm
            from pipelines.indexer import CODE_COLLECTION

            symbols = service.vectors.count(CODE_COLLECTION)
            log(f"indexed {symbols:,} symbols in {seconds:.0f} s")
            cases, dropped = _indexed_only(service, cases)
            log(f"{len(cases)} cases on indexed functions ({dropped} dropped: functions the indexer does not "
                "extract, such as object-literal methods)")
            threshold = settings.duplicate_threshold
            limit = FindDuplicatesInput(code="x").limit
            answers, baseline, latencies, examples = [], [], [], {}
            for number, case in enumerate(cases, 1):
                result, took = _timed(lambda case=case: service.find_duplicates(
                    FindDuplicatesInput(code=case.code, language=case.language)))
                latencies.append(took)
                answers.append(result.duplicates)
                baseline.append(_as_hits(raw_scoring(service, case.code, case.language, threshold, limit)))
                if case.expect is not None and case.group not in examples:
                    found = [d for d in result.duplicates if _matches(d, case.expect)]
                    if found:
                        examples[case.group] = {"similarity": found[0].similarity, "differences": found[0].differences}
                if number % 100 == 0:
                    log(f"  {number}/{len(cases)} queries")
            table, before = score(cases, answers), score(cases, baseline)
            errors = _errors(cases, answers)
            out: dict[str, Any] = {
                "corpora": {"indexed": [p for _, p in plan["index"]], "other_package": [p for _, p in plan["other"]],
                            "held_out": plan is HELD_OUT,
                            "set": "held out" if plan is HELD_OUT else "DEVELOPMENT set" if dev else "inspected (retired held-out set)"},
                "symbols": symbols, "threshold": threshold, "cases": len(cases),
                "codemem": table, "baseline_raw_code": before, "examples": examples, "errors": errors,
                "p95_ms": {f"{symbols}": _p95(latencies)},
            }
            if pad:
                log(f"accuracy done ({len(cases)} cases); padding for the latency row")
                padded = pad_code_collection(service, pad, np.random.default_rng(7), log)
                settle_heap()
                sample = random.Random(3).sample(cases, min(200, len(cases)))
                # cold: no embedding cache, and each query's candidates put in canonical form anew
                # (the cases share originals: a cache kept across them would flatter the figure)
                service.embedder = getattr(service.embedder, "inner", service.embedder)
                timed = []
                for case in sample:
                    _clear_caches()
                    timed.append(_timed(lambda case=case: service.find_duplicates(
                        FindDuplicatesInput(code=case.code, language=case.language)))[1])
                out["p95_ms"][f"{padded}"] = _p95(timed)
                out["padded_symbols"] = padded
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def report(out: dict[str, Any], log: Callable[[str], None] = print) -> bool:
    """Print the table and the targets; True when every target passes."""
    log(f"\ncorpora: {', '.join(out['corpora']['indexed'])} indexed ({out['symbols']:,} symbols); "
        f"other-package negatives: {', '.join(out['corpora']['other_package'])}; "
        f"{out['corpora'].get('set') or ('held out' if out['corpora']['held_out'] else 'DEVELOPMENT set')}")
    log(f"{'group':<16}{'language':<12}{'codemem':>9}{'raw-code baseline':>19}{'n':>6}")
    for group, by_language in out["codemem"].items():
        for language, row in by_language.items():
            metric = "recall" if "recall" in row else "false_flags"
            base = out["baseline_raw_code"].get(group, {}).get(language, {}).get(metric)
            log(f"{group:<16}{language:<12}{row[metric]:>9.3f}{base if base is not None else '-':>19}{row['n']:>6}")
    rows = verdicts(out["codemem"])
    for size, p95 in out["p95_ms"].items():
        rows.append((f"find_duplicates p95 ms at {int(size):,} symbols", f"≤ {P95_MS:.0f}", p95, p95 <= P95_MS))
    log("")
    for row, target, figure, passed in rows:
        log(f"{row:<44}{target:<16}{figure:>8}  {'PASS' if passed else 'FAIL'}")
    return all(passed for *_, passed in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", action="store_true", help="the development corpora (toolz, rxjs)")
    parser.add_argument("--inspected", action="store_true",
                        help="the former held-out corpora (more-itertools, boltons, zod), whose misses were read")
    parser.add_argument("--per-kind", type=int, default=40, help="originals per edit kind and language")
    parser.add_argument("--pad", type=int, default=PAD_SYMBOLS, help="symbols for the latency row (0: skip)")
    parser.add_argument("--output", type=Path, help="where the figures go (default bench/results/duplicates[_dev].json)")
    args = parser.parse_args(argv)
    out = run(args.dev, args.per_kind, args.pad, inspected=args.inspected)
    passed = report(out)
    name = "duplicates_dev.json" if args.dev else "duplicates_inspected.json" if args.inspected else RESULT_PATH.name
    target = args.output or RESULT_PATH.with_name(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Duplicate-detection accuracy of ``find_duplicates`` (REQ-MEM-VER-003).

``python -m bench.duplicate_accuracy`` (~1–2 min on 2 cores, warm model).

The labelled pairs live in ``bench/data/duplicate_pairs/<language>.yaml``: ``code_a`` is a
function already in the repository, ``code_b`` the snippet a user is about to write, ``label``
says whether ``code_b`` duplicates ``code_a``. Categories: ``renamed``, ``reordered``,
``restyled`` (duplicates) and ``hard_negative`` (same names or shape, different behaviour).

Method: every ``code_a`` goes into its own file of a fresh temporary project (Go files get a
``package`` clause, Java methods a class), next to the fixture repositories of the tests as
distractors (``--distractors DIR`` adds more). The real indexer indexes it with a fresh state
dir, then the real ``CodeMemService.find_duplicates`` runs once per pair with ``code_b``, its
language and the default threshold and limit. A pair is predicted duplicate when ``code_a``'s
function (its file) is among the returned duplicates.

Compared in the same run, at the same threshold:

* **raw cosine** — the brief's baseline: cosine of the raw ``code_a`` and ``code_b`` texts
  with the same local model (``bench.baselines.RawMiniLM``, no cache);
* **embedding only** — ``find_duplicates`` as it was before structural re-scoring: the dense
  hits for the snippet's embedding text (``limit`` candidates), ``code_a`` predicted when its
  cosine reaches the threshold;
* **no names** — the current scoring without the opposite-names rule (an ablation).

Scores are reported on all pairs, on the even ids (used to design the scoring) and on the odd
ids (held out). Results go to ``bench/results/duplicate_accuracy.json``; the exit status is 1
when precision < 0.95 or recall < 0.90 on all pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data" / "duplicate_pairs"
FIXTURE_REPOS = BENCH_DIR.parent / "tests" / "fixtures" / "repos"
RESULT_PATH = BENCH_DIR / "results" / "duplicate_accuracy.json"
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.90
EXTENSIONS = {"python": "py", "typescript": "ts", "javascript": "js", "go": "go", "java": "java", "rust": "rs"}
POSITIVE = "duplicate"


@dataclass(frozen=True)
class Pair:
    """One labelled pair."""

    id: str
    language: str
    category: str
    label: str
    code_a: str
    code_b: str
    note: str = ""

    @property
    def duplicate(self) -> bool:
        return self.label == POSITIVE

    @property
    def number(self) -> int:
        return int(self.id.rsplit("-", 1)[1])

    @property
    def held_out(self) -> bool:
        """Odd ids were not looked at while the scoring was designed."""
        return self.number % 2 == 1

    @property
    def path(self) -> str:
        """Where ``code_a`` lives in the benchmark project."""
        return f"pairs/{self.language}/{self.id.replace('-', '_')}.{EXTENSIONS[self.language]}"

    def source_a(self) -> str:
        """The file holding ``code_a`` (Go gets a package clause, Java a class around the method)."""
        if self.language == "go":
            return "package pairs\n\n" + self.code_a
        if self.language == "java":
            body = "".join(f"    {line}" if line.strip() else line for line in self.code_a.splitlines(keepends=True))
            return f"public class Util {{\n{body}}}\n"
        return self.code_a


def load_pairs(data_dir: Path = DATA_DIR) -> list[Pair]:
    """Every pair of every ``*.yaml`` file under ``data_dir``, validated."""
    pairs: list[Pair] = []
    for path in sorted(data_dir.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text(encoding="utf-8"))["pairs"]:
            pair = Pair(**{k: raw[k] for k in Pair.__dataclass_fields__ if k in raw})
            if pair.label not in (POSITIVE, "not_duplicate"):
                raise ValueError(f"{path.name}: {pair.id} has label {pair.label!r}")
            if pair.language not in EXTENSIONS:
                raise ValueError(f"{path.name}: {pair.id} has language {pair.language!r}")
            pairs.append(pair)
    ids = [p.id for p in pairs]
    if len(ids) != len(set(ids)):
        raise ValueError("duplicate pair ids")
    return pairs


# -- metrics -------------------------------------------------------------------------------------

def metrics(pairs: Sequence[Pair], predicted: dict[str, bool]) -> dict[str, Any]:
    """Precision, recall, F1, accuracy and the confusion counts of predictions on pairs."""
    tp = sum(1 for p in pairs if p.duplicate and predicted[p.id])
    fp = sum(1 for p in pairs if not p.duplicate and predicted[p.id])
    fn = sum(1 for p in pairs if p.duplicate and not predicted[p.id])
    tn = len(pairs) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp and tp + fn else None  # undefined on negatives only
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    return {
        "pairs": len(pairs), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": _round(precision), "recall": _round(recall), "f1": _round(f1),
        "accuracy": _round((tp + tn) / len(pairs)) if pairs else None,
        "false_positive_rate": _round(fp / (fp + tn)) if fp + tn else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def breakdown(pairs: Sequence[Pair], predicted: dict[str, bool]) -> dict[str, Any]:
    """Metrics on all pairs, the design half (even ids), the held-out half, per category and language."""
    groups: dict[str, Any] = {
        "all": metrics(pairs, predicted),
        "design_even_ids": metrics([p for p in pairs if not p.held_out], predicted),
        "held_out_odd_ids": metrics([p for p in pairs if p.held_out], predicted),
        "by_category": {},
        "by_language": {},
    }
    for category in sorted({p.category for p in pairs}):
        groups["by_category"][category] = metrics([p for p in pairs if p.category == category], predicted)
    for language in sorted({p.language for p in pairs}):
        groups["by_language"][language] = metrics([p for p in pairs if p.language == language], predicted)
    return groups


# -- the run -------------------------------------------------------------------------------------

def build_project(root: Path, pairs: Sequence[Pair], distractors: Iterable[Path]) -> None:
    """Write every ``code_a`` into its own file, plus the fixture repos and extra distractors."""
    for pair in pairs:
        target = root / pair.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(pair.source_a(), encoding="utf-8")
    shutil.copytree(FIXTURE_REPOS, root / "fixtures")
    for index, directory in enumerate(distractors):
        shutil.copytree(directory, root / "distractors" / f"{index}_{directory.name}")


def raw_cosine_baseline(pairs: Sequence[Pair]) -> dict[str, float]:
    """Cosine of the raw ``code_a`` and ``code_b`` texts with the same local model, no cache."""
    from bench.baselines import RawMiniLM

    model = RawMiniLM()
    vectors_a = model.embed([p.code_a for p in pairs])
    vectors_b = model.embed([p.code_b for p in pairs])
    return {p.id: float(vectors_a[i] @ vectors_b[i]) for i, p in enumerate(pairs)}


def _snippet_query(service: Any, pair: Pair) -> tuple[Any, Any]:
    """The snippet's first function and its query vector, as ``find_duplicates`` computes them."""
    from pipelines.parsing import parse_source
    from pipelines.records import embedding_text

    parsed = parse_source("snippet", pair.code_b.encode("utf-8"), pair.language)  # type: ignore[arg-type]
    functions = [s for s in parsed.symbols if s.kind in ("function", "method")]
    text = embedding_text(parsed, functions[0], functions[0].qualified_name) if functions else pair.code_b
    return (functions[0] if functions else None), service.embedder.embed_documents([text])[0]


def _first_function(path: str, source: str, language: str) -> Any:
    from pipelines.parsing import parse_source

    parsed = parse_source(path, source.encode("utf-8"), language)  # type: ignore[arg-type]
    return next((s for s in parsed.symbols if s.kind in ("function", "method")), None)


def _candidates(service: Any, pair: Pair, vector: Any, count: int) -> list[Any]:
    from pipelines.indexer import CODE_COLLECTION
    from resources.vectors.store import PayloadFilter

    hits, _ = service.vectors.ranked_lists(
        CODE_COLLECTION, dense=vector, sparse=None, candidates=count,
        payload_filter=PayloadFilter({"kind": ["function", "method"], "language": [pair.language]}),
    )
    return hits


def embedding_only(service: Any, pair: Pair, threshold: float, limit: int) -> bool:
    """``find_duplicates`` before structural re-scoring: dense hits over the threshold."""
    _, vector = _snippet_query(service, pair)
    hits = _candidates(service, pair, vector, limit)
    return any(h.score >= threshold and h.payload.get("file_path") == pair.path for h in hits)


def without_names(service: Any, pair: Pair, threshold: float, limit: int) -> bool:
    """The current scoring with the opposite-names rule off (mirrors ``find_duplicates``)."""
    from pipelines.parsing.canonical import canonical_code
    from resources.code_similarity import Candidate, score_candidates

    snippet, vector = _snippet_query(service, pair)
    hits = _candidates(service, pair, vector, max(limit * 5, 50))
    new_code = snippet.code if snippet else pair.code_b
    scores = score_candidates(
        canonical_code(new_code, pair.language).text, snippet.name if snippet else None, pair.language,
        [Candidate(canonical_code(h.payload.get("code") or "", pair.language).text, h.payload.get("name"),
                   h.payload.get("language"), h.score, bool(h.payload.get("code_truncated")), h.payload.get("code"))
         for h in hits],
        service.embedder.embed_documents, use_names=False, new_original=new_code,
    )
    ranked = sorted(zip(hits, scores, strict=True), key=lambda pair_: -pair_[1][0])[:limit]
    return any(score >= threshold and h.payload.get("file_path") == pair.path for h, (score, _) in ranked)


def run(
    pairs: Sequence[Pair], distractors: Sequence[Path] = (), work_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Index a project of every ``code_a`` and score ``find_duplicates`` on every ``code_b``."""
    from query_server.service import CodeMemService
    from resources.code_similarity import compare_code
    from resources.schemas.tools import FindDuplicatesInput, IndexInput
    from resources.settings import Settings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="codemem-dups-", dir=work_dir))
    try:
        build_project(tmp / "project", pairs, distractors)
        settings = Settings(project_root=tmp / "project", state_dir=tmp / "state", dense_embeddings=True)
        threshold = settings.duplicate_threshold
        limit = FindDuplicatesInput(code="x").limit
        service = CodeMemService(settings)
        try:
            started = time.perf_counter()
            service.index(IndexInput(embed=True))
            index_seconds = time.perf_counter() - started
            log(f"indexed the project in {index_seconds:.1f} s")
            predicted: dict[str, bool] = {}
            details: dict[str, dict[str, Any]] = {}
            latencies: list[float] = []
            for pair in pairs:
                started = time.perf_counter()
                result = service.find_duplicates(FindDuplicatesInput(code=pair.code_b, language=pair.language))
                latencies.append(time.perf_counter() - started)
                found = [d for d in result.duplicates if d.file_path == pair.path]
                predicted[pair.id] = bool(found)
                # the pair's score below the default threshold too, for the misses' diagnostics
                low = service.find_duplicates(
                    FindDuplicatesInput(code=pair.code_b, language=pair.language, threshold=0.70, limit=100)
                )
                mine = [d for d in low.duplicates if d.file_path == pair.path]
                snippet, _ = _snippet_query(service, pair)
                existing = _first_function(pair.path, pair.source_a(), pair.language)
                comparison = None
                if snippet is not None and existing is not None:
                    comparison = compare_code(existing.code, snippet.code, pair.language, existing.name, snippet.name)
                details[pair.id] = {
                    "category": pair.category, "label": pair.label, "predicted": predicted[pair.id],
                    "score": mine[0].similarity if mine else None,
                    "verdict": comparison.verdict if comparison else None,
                    "difference": comparison.describe() if comparison else None,
                    "rank": next((i for i, d in enumerate(result.duplicates, 1) if d.file_path == pair.path), None),
                }
            baselines = {
                "embedding_only": {p.id: embedding_only(service, p, threshold, limit) for p in pairs},
                "no_names": {p.id: without_names(service, p, threshold, limit) for p in pairs},
            }
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    raw = raw_cosine_baseline(pairs)
    baselines["raw_cosine"] = {pid: cosine >= threshold for pid, cosine in raw.items()}
    for pid, cosine in raw.items():
        details[pid]["raw_cosine"] = round(cosine, 4)
    out: dict[str, Any] = {
        "threshold": threshold, "limit": limit, "pairs": len(pairs), "index_seconds": round(index_seconds, 2),
        "find_duplicates_ms": {
            "mean": round(1000 * statistics.fmean(latencies), 1),
            "p95": round(1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))], 1),
        },
        "codemem": breakdown(pairs, predicted),
        "baselines": {name: breakdown(pairs, preds) for name, preds in baselines.items()},
        "pairs_detail": details,
    }
    base_f1 = out["baselines"]["raw_cosine"]["all"]["f1"]
    out["f1_ratio_vs_raw_cosine"] = round(out["codemem"]["all"]["f1"] / base_f1, 3) if base_f1 else None
    out["targets"] = {
        "precision>=0.95": (out["codemem"]["all"]["precision"] or 0) >= TARGET_PRECISION,
        "recall>=0.90": (out["codemem"]["all"]["recall"] or 0) >= TARGET_RECALL,
    }
    return out


# -- report --------------------------------------------------------------------------------------

def _fmt(value: float | None) -> str:
    return "  –  " if value is None else f"{value:.3f}"


def format_report(result: dict[str, Any]) -> str:
    """The tables printed after a run."""
    lines = [f"find_duplicates at the default threshold {result['threshold']} (limit {result['limit']}), "
             f"{result['pairs']} pairs; latency mean {result['find_duplicates_ms']['mean']} ms, "
             f"p95 {result['find_duplicates_ms']['p95']} ms", ""]
    methods = {"codemem": result["codemem"], **{f"baseline: {k}": v for k, v in result["baselines"].items()}}
    lines.append(f"{'method':26} {'split':18} {'P':>6} {'R':>6} {'F1':>6}   tp fp fn tn")
    for name, groups in methods.items():
        for split in ("all", "design_even_ids", "held_out_odd_ids"):
            m = groups[split]
            lines.append(f"{name:26} {split:18} {_fmt(m['precision'])} {_fmt(m['recall'])} {_fmt(m['f1'])}  "
                         f"{m['tp']:3d}{m['fp']:3d}{m['fn']:3d}{m['tn']:3d}")
    lines.append(f"F1 ratio codemem / raw cosine: {result['f1_ratio_vs_raw_cosine']}")
    for key, title in (("by_category", "category"), ("by_language", "language")):
        lines += ["", f"{title:14} {'pairs':>5} {'acc':>6} {'P':>6} {'R':>6} {'F1':>6} {'FPR':>6}  | raw cosine acc"]
        for name, m in result["codemem"][key].items():
            base = result["baselines"]["raw_cosine"][key][name]
            lines.append(f"{name:14} {m['pairs']:5d} {_fmt(m['accuracy'])} {_fmt(m['precision'])} "
                         f"{_fmt(m['recall'])} {_fmt(m['f1'])} {_fmt(m['false_positive_rate'])}  | {_fmt(base['accuracy'])}")
    misses = [(pid, d) for pid, d in result["pairs_detail"].items() if d["predicted"] != (d["label"] == POSITIVE)]
    lines += ["", f"errors ({len(misses)}):"]
    for pid, d in misses:
        kind = "FP" if d["predicted"] else "FN"
        score = "<0.70" if d["score"] is None else d["score"]
        lines.append(f"  {kind} {pid:15} {d['category']:13} score={score} verdict={d['verdict']} {d['difference'] or ''}")
    lines.append("")
    lines.append("targets: " + ", ".join(f"{k} {'PASS' if ok else 'FAIL'}" for k, ok in result["targets"].items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the JSON result."""
    parser = argparse.ArgumentParser(prog="python -m bench.duplicate_accuracy", description=__doc__.split("\n")[0])
    parser.add_argument("--distractors", nargs="*", type=Path, default=[], help="extra directories to index")
    parser.add_argument("--output", type=Path, default=RESULT_PATH)
    args = parser.parse_args(argv)
    pairs = load_pairs()
    result = run(pairs, args.distractors)
    result["distractors"] = [str(d) for d in args.distractors]
    print(format_report(result))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0 if all(result["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

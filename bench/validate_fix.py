"""Does ``validate_fix`` catch a fix that contradicts an accepted ADR? (issue 20, item 1).

``python -m bench.validate_fix`` (every project, ~1 min on 2 cores) · ``--split dev`` (the projects
the detector may be tuned on) · ``--split heldout`` · ``--json`` (the figures and every scenario's
outcome as JSON on stdout) · ``--verbose`` (the misses, one line each, with the scores, the verdict
and what was cited; the misses of held-out projects are only counted unless
``--show-heldout-misses`` is given, so that nobody tunes on them by accident).

Corpora: ``bench/validate_fix/<project>/``, written for this benchmark (none of the fix scenario
sets of ``tests/fixtures/design_project`` is reused). Each project is a small, realistic
repository in ``project/`` (``docs/adr/NNNN-*.md`` in Nygard or MADR form with concrete,
checkable decisions, a README, a few source files, sometimes ``docs/requirements.md``) and a
``scenarios.yaml``:

* ``relctl`` (split ``dev``): a release CLI (click, httpx): exit codes, timeouts and retries,
  configuration and credentials, output streams, confirmation and audit of destructive commands,
  artifact checksums and signing;
* ``hearthsync`` (split ``dev``): an offline-first mobile sync backend (TypeScript, Fastify):
  per-field last-writer-wins on hybrid logical clocks and tombstones, batch size limits,
  validation and idempotency, JWT and refresh-token lifetimes (jose), Redis rate limits, date-fns
  instead of moment, node-pg-migrate migrations, no personal data in logs, retry backoff (with a
  requirements document);
* ``quarrystore`` (split ``dev``): an S3-compatible object storage gateway (Go): SHA-256 checksums
  and scrubbing, multipart part sizes, TLS versions and certificate verification, server and
  backend timeouts, S3 error codes, an audit log before deletions, soft delete and Object Lock,
  banned packages (unsafe, math/rand, crypto/md5);
* ``paybridge`` (split ``heldout``): a payments service: integer minor units, idempotency keys,
  no cardholder data, webhook signatures, an append-only audit log, migrations, refund limits, PSP
  timeouts and circuit breaker (with a requirements document);
* ``tidewater`` (split ``heldout``): a data pipeline: Parquet raw zone, Airflow scheduling and
  SLA, batch validation and quarantine, UTC timestamps, idempotent MERGE loads, Polars,
  pseudonymised personal data and retention.

A scenario is ``{id, kind, label, pair, fix_description, diff?, expected_citation}``: ``kind`` is
``changed_value`` (a number, unit, limit, timeout, exit code, retention… other than the decided
one), ``negated_modality`` (must → skip it, never → do it), ``forbidden_name`` (a banned library,
function or pattern brought back), ``removed_step`` (a required validation, audit entry,
migration, signature, review… removed or bypassed) or ``unrelated`` (a fix no decision governs);
``label`` is ``violation`` or ``conforming``; a violation and its conforming twin share ``pair``
(same topic, same component, often the same opening sentence); a violation names the ADR file it
must cite in ``expected_citation``. The fix descriptions are worded as an agent would describe
its change, not echoing the ADR; about half carry a unified diff.

Method: each project is copied into a temporary directory and indexed the way ``codemem index``
does it (``CodeMemService.index``: parser, then the design step that turns ``docs/`` into ADR and
requirement memories), without dense code vectors (``validate_fix`` never reads them; it embeds the
fix and the rule sentences with the real local model, no mock). Then
``CodeMemService.design.validate_fix`` (the plain function behind the MCP tool) is called once per
scenario, with the description and the diff only (no ``affected_component``).

Figures, per split and per kind:

* **pairwise order**: the share of pairs where the conforming fix's ``overall_alignment_score``
  is strictly higher than the violation's. The score is the tool's own "how well the fix fits the
  design" (1 = fully aligned; a ``conflicts`` verdict caps it below 0.5), so a violation should
  rank as less aligned; a tie counts as a miss (the tool did not tell the two apart);
* **violations cited**: the share of violations whose ``conflicts`` list holds a statement whose
  ``source_document`` is the expected ADR (a mention among ``related_designs`` with another verdict
  does not count: the tool must say the fix conflicts with that ADR);
* **false conflicts**: the share of conforming fixes (pairs' twins and unrelated fixes) whose
  verdict is not ``aligned``.

Also reported without a target: violations flagged (verdict ``conflicts``, any citation) and the
mean score of each label. Targets (issue 20): pairwise order ≥ 0.9, violations cited = 1.0, false
conflicts ≤ 0.1. The exit status is 1 when a target of a split total fails. Results go to
``bench/results/validate_fix.json`` (``validate_fix-dev.json``/``-heldout.json`` for one split).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from bench.split_runs import finish, fmt, report_log, share, split_parser

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "validate_fix"

PAIR_ORDER = 0.9
CITED = 1.0
FALSE_CONFLICTS = 0.1

SPLITS = ("dev", "heldout")
PAIRED_KINDS = ("changed_value", "negated_modality", "forbidden_name", "removed_step")
KINDS = (*PAIRED_KINDS, "unrelated")
LABELS = ("violation", "conforming")
_ADR_PATH = re.compile(r"^docs/adr/\d{4}-[a-z0-9-]+\.md$")


# -- the scenario sets -----------------------------------------------------------------------------

def project_dirs() -> list[Path]:
    """Every benchmark project (a folder of ``bench/validate_fix`` with a ``scenarios.yaml``)."""
    return sorted(p for p in DATA_DIR.iterdir() if (p / "scenarios.yaml").is_file())


def load_project(folder: Path) -> dict[str, Any]:
    """A project's scenario file, with ``root`` (its repository folder) added."""
    data = yaml.safe_load((folder / "scenarios.yaml").read_text())
    data["root"] = folder / "project"
    data.setdefault("project", folder.name)
    return data


def load_projects(split: str = "all") -> list[dict[str, Any]]:
    """The projects of one split (``dev``, ``heldout``) or of both (``all``)."""
    projects = [load_project(folder) for folder in project_dirs()]
    return [p for p in projects if split == "all" or p.get("split") == split]


def adr_files(root: Path) -> list[Path]:
    return sorted((root / "docs" / "adr").glob("[0-9][0-9][0-9][0-9]-*.md"))


def check_project(project: dict[str, Any]) -> list[str]:
    """What is wrong with a project's scenario set (empty when it is well formed): known kinds and
    labels, unique ids, a violation and a conforming fix of the same kind in every pair, no pair on
    unrelated fixes, and an expected citation that is an accepted ADR file of the project."""
    name, root = project["project"], project["root"]
    problems: list[str] = []
    if project.get("split") not in SPLITS:
        problems.append(f"{name}: split {project.get('split')!r} is not one of {SPLITS}")
    adrs = adr_files(root)
    if not 4 <= len(adrs) <= 8:
        problems.append(f"{name}: {len(adrs)} ADRs (4 to 8 expected)")
    for adr in adrs:
        if not re.search(r"^(?:status:\s*accepted|\*\s*status:\s*accepted|accepted)\s*$", adr.read_text(), re.IGNORECASE | re.MULTILINE):
            problems.append(f"{name}: {adr.name} is not marked Accepted")
    seen: set[str] = set()
    pairs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for scenario in project.get("scenarios") or []:
        sid = scenario.get("id")
        where = f"{name}/{sid}"
        if not sid or sid in seen:
            problems.append(f"{where}: missing or repeated id")
        seen.add(str(sid))
        kind, label = scenario.get("kind"), scenario.get("label")
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r} is not one of {KINDS}")
        if label not in LABELS:
            problems.append(f"{where}: label {label!r} is not one of {LABELS}")
        if not str(scenario.get("fix_description") or "").strip():
            problems.append(f"{where}: empty fix_description")
        diff = scenario.get("diff")
        if diff is not None and not (str(diff).startswith("--- ") and "\n+++ " in str(diff) and "\n@@ " in str(diff)):
            problems.append(f"{where}: diff is not a unified diff (---, +++, @@)")
        if kind == "unrelated":
            if label != "conforming" or scenario.get("pair"):
                problems.append(f"{where}: an unrelated fix is conforming and has no pair")
            continue
        if not scenario.get("pair"):
            problems.append(f"{where}: a {kind} scenario needs a pair id")
            continue
        pairs[scenario["pair"]].append(scenario)
        if label == "violation":
            cited = scenario.get("expected_citation")
            if not cited or not _ADR_PATH.match(str(cited)):
                problems.append(f"{where}: expected_citation {cited!r} is not a docs/adr/NNNN-*.md path")
            elif not (root / cited).is_file():
                problems.append(f"{where}: expected_citation {cited} is not a file of the project")
        governed = scenario.get("governed_by")
        if governed and not (root / governed).is_file():
            problems.append(f"{where}: governed_by {governed} is not a file of the project")
    for pair, members in pairs.items():
        labels = sorted(m.get("label") for m in members)
        if labels != ["conforming", "violation"]:
            problems.append(f"{name}/{pair}: a pair is one violation and one conforming fix, got {labels}")
        if len({m.get("kind") for m in members}) != 1:
            problems.append(f"{name}/{pair}: the two fixes of a pair have different kinds")
    return problems


# -- the run ---------------------------------------------------------------------------------------

def _outcome(scenario: dict[str, Any], result: Any, seconds: float) -> dict[str, Any]:
    cited = [c.source_document or c.source for c in result.conflicts]
    return {
        "id": scenario["id"], "kind": scenario["kind"], "label": scenario["label"], "pair": scenario.get("pair"),
        "expected_citation": scenario.get("expected_citation"), "has_diff": bool(scenario.get("diff")),
        "verdict": result.verdict, "score": result.overall_alignment_score,
        "design_score": result.design_alignment_score, "requirements_score": result.requirements_alignment_score,
        "conflicts": [{"source": c.source_document or c.source, "statement": c.statement, "reason": c.reason,
                       "relevance": c.relevance} for c in result.conflicts],
        "related": [{"source": s.source_document or s.source, "verdict": s.verdict, "relevance": s.relevance,
                     "statement": s.statement} for s in [*result.related_designs, *result.related_requirements]],
        "cited": bool(scenario.get("expected_citation")) and scenario.get("expected_citation") in cited,
        "ms": round(1000 * seconds, 1),
    }


def run_project(project: dict[str, Any], log: Callable[[str], None] = print) -> dict[str, Any]:
    """Index a copy of the project and call validate_fix on every scenario."""
    from query_server.service import CodeMemService
    from resources.schemas.design import ValidateFixInput
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    problems = check_project(project)
    if problems:
        raise ValueError(f"{project['project']}: malformed scenario set: {problems}")
    tmp = Path(tempfile.mkdtemp(prefix=f"codemem-bench-validate-fix-{project['project']}-"))
    try:
        root = tmp / "project"
        shutil.copytree(project["root"], root, ignore=shutil.ignore_patterns("__pycache__", ".codemem"))
        service = CodeMemService(Settings(project_root=root, state_dir=tmp / "state", dense_embeddings=False))
        try:
            started = time.perf_counter()
            report = service.index(IndexInput(embed=False))
            design = report.get("design") or {}
            adrs = len(adr_files(root))
            if report.get("failed") or design.get("designs", 0) < adrs:
                raise RuntimeError(f"{project['project']}: index failed ({report.get('failed')}) or not every ADR became a "
                                   f"design memory ({design.get('designs')} of {adrs}): {report.get('notes')}")
            log(f"{project['project']} ({project['split']}): indexed in {time.perf_counter() - started:.1f} s — "
                f"{design.get('designs')} designs, {design.get('requirements', 0)} requirements")
            outcomes = []
            for scenario in project["scenarios"]:
                request = ValidateFixInput(fix_description=scenario["fix_description"], diff=scenario.get("diff"))
                started = time.perf_counter()
                result = service.design.validate_fix(request)
                outcomes.append(_outcome(scenario, result, time.perf_counter() - started))
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"project": project["project"], "split": project["split"], "domain": project.get("domain"),
            "designs": design.get("designs"), "requirements": design.get("requirements", 0), "outcomes": outcomes}



def figures(outcomes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Pairwise order, violations cited and flagged, false conflicts and mean scores of a set of outcomes."""
    outcomes = list(outcomes)
    violations = [o for o in outcomes if o["label"] == "violation"]
    conforming = [o for o in outcomes if o["label"] == "conforming"]
    by_pair: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for o in outcomes:
        if o["pair"]:
            by_pair[o["pair"]][o["label"]] = o
    pairs = [p for p in by_pair.values() if len(p) == 2]
    ordered = sum(p["conforming"]["score"] > p["violation"]["score"] for p in pairs)
    ties = sum(p["conforming"]["score"] == p["violation"]["score"] for p in pairs)
    false = sum(o["verdict"] != "aligned" for o in conforming)

    def mean(items: list[dict[str, Any]]) -> float | None:
        return round(sum(o["score"] for o in items) / len(items), 3) if items else None

    return {
        "pairs": len(pairs), "pair_order": share(ordered, len(pairs)), "pairs_ordered": ordered, "pair_ties": ties,
        "violations": len(violations), "cited": share(sum(o["cited"] for o in violations), len(violations)),
        "violations_cited": sum(o["cited"] for o in violations),
        "flagged": share(sum(o["verdict"] == "conflicts" for o in violations), len(violations)),
        "conforming": len(conforming), "false_conflicts": share(false, len(conforming)), "conforming_flagged": false,
        "mean_score_violation": mean(violations), "mean_score_conforming": mean(conforming),
    }


def summarize(projects: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures per split (and ``all``), each with its per-kind breakdown."""
    groups: dict[str, list[dict[str, Any]]] = {"all": [o for p in projects for o in p["outcomes"]]}
    for split in SPLITS:
        chosen = [o for p in projects if p["split"] == split for o in p["outcomes"]]
        if chosen:
            groups[split] = chosen
    if len(groups) == 2:  # one split only: "all" is the same set
        groups.pop("all")
    return {name: {"total": figures(items), "kinds": {kind: figures(o for o in items if o["kind"] == kind)
                                                      for kind in KINDS if any(o["kind"] == kind for o in items)}}
            for name, items in groups.items()}


def verdicts(summary: dict[str, Any]) -> list[tuple[str, str, float | None, bool]]:
    """(row, target, figure, passed) for each split total."""
    rows = []
    for split, entry in summary.items():
        t = entry["total"]
        rows.append((f"{split}: pairwise order ({t['pairs']} pairs)", f">= {PAIR_ORDER}", t["pair_order"],
                     t["pair_order"] is not None and t["pair_order"] >= PAIR_ORDER))
        rows.append((f"{split}: violations cited ({t['violations']})", f"= {CITED}", t["cited"],
                     t["cited"] is not None and t["cited"] >= CITED))
        rows.append((f"{split}: false conflicts on conforming ({t['conforming']})", f"<= {FALSE_CONFLICTS}",
                     t["false_conflicts"], t["false_conflicts"] is not None and t["false_conflicts"] <= FALSE_CONFLICTS))
    return rows


def run_validate_fix(split: str = "all", log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every project of ``split``; the per-project outcomes and the summary."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    projects = [run_project(p, log) for p in load_projects(split)]
    if not projects:
        raise ValueError(f"no project in split {split!r}")
    return {"split": split, "seconds": round(time.perf_counter() - started, 1), "projects": projects,
            "summary": summarize(projects)}


# -- the report ------------------------------------------------------------------------------------


def _mark(value: float | None, passed: Callable[[float], bool]) -> str:
    return "" if value is None else ("PASS" if passed(value) else "FAIL")


def report(out: dict[str, Any], log: Callable[[str], None] = print) -> bool:
    """Print the tables and the targets; True when every split total passes."""
    for split, entry in out["summary"].items():
        log(f"\n{split}: {', '.join(p['project'] for p in out['projects'] if split in ('all', p['split']))}")
        log(f"{'kind':<18}{'pairs':>6}{'order':>8}{'':>6}{'cited':>8}{'':>6}{'flagged':>9}{'false conf.':>13}{'':>6}"
            f"{'mean v':>8}{'mean c':>8}")
        for kind, f in [*entry["kinds"].items(), ("TOTAL", entry["total"])]:
            log(f"{kind:<18}{f['pairs']:>6}{fmt(f['pair_order']):>8}{_mark(f['pair_order'], lambda v: v >= PAIR_ORDER):>6}"
                f"{fmt(f['cited']):>8}{_mark(f['cited'], lambda v: v >= CITED):>6}{fmt(f['flagged']):>9}"
                f"{fmt(f['false_conflicts']):>13}{_mark(f['false_conflicts'], lambda v: v <= FALSE_CONFLICTS):>6}"
                f"{fmt(f['mean_score_violation']):>8}{fmt(f['mean_score_conforming']):>8}")
    rows = verdicts(out["summary"])
    log("")
    for row, target, figure, passed in rows:
        log(f"{row:<52}{target:<10}{fmt(figure):>8}  {'PASS' if passed else 'FAIL'}")
    return all(passed for *_, passed in rows)


def misses(project: dict[str, Any]) -> list[str]:
    """One line per miss: a misordered pair, an uncited violation, a conforming fix not judged aligned."""
    lines = []
    by_pair: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for o in project["outcomes"]:
        if o["pair"]:
            by_pair[o["pair"]][o["label"]] = o

    def said(o: dict[str, Any]) -> str:
        if o["conflicts"]:
            c = o["conflicts"][0]
            return f"conflicts with {c['source']}: \"{c['statement'][:90]}\" ({c['reason']})"
        top = max(o["related"], key=lambda s: s["relevance"], default=None)
        return f"top related: {top['source']} {top['verdict']} {top['relevance']:.2f} \"{top['statement'][:70]}\"" if top else "nothing related"

    for pair, members in by_pair.items():
        v, c = members.get("violation"), members.get("conforming")
        if v and c and not c["score"] > v["score"]:
            lines.append(f"ORDER  {pair} [{v['kind']}]: violation {v['score']:.3f} >= conforming {c['score']:.3f}")
        if v and not v["cited"]:
            lines.append(f"UNCITED {v['id']} [{v['kind']}] {v['verdict']} {v['score']:.3f}, expected {v['expected_citation']}; {said(v)}")
    for o in project["outcomes"]:
        if o["label"] == "conforming" and o["verdict"] != "aligned":
            lines.append(f"FALSE  {o['id']} [{o['kind']}] {o['verdict']} {o['score']:.3f}; {said(o)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = split_parser("validate_fix", __doc__.split("\n\n")[0], "projects")
    args = parser.parse_args(argv)
    log = report_log(args.json)
    out = run_validate_fix(args.split, log)
    return finish(args, "validate_fix", out, report(out, log), out["projects"], lambda item: item["project"], misses, log)


if __name__ == "__main__":
    sys.exit(main())

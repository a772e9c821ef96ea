"""Does ``memory_extract`` propose the memories a careful reader would keep? (issue 20, item 3).

``python -m bench.memory_extract`` (every document, dev and held-out) · ``--split dev`` (the
documents whose misses the extractor may be tuned on) · ``--split heldout`` · ``--json`` (the
figures and every document's candidates and matches as JSON on stdout) · ``--verbose`` (the
misses, one line each: a gold memory no candidate matched, a candidate that matched nothing, a
candidate on a hard negative; the misses of held-out documents are only counted unless
``--show-heldout-misses`` is given, so that nobody tunes on them by accident) · ``--given-source``
(pass each document's labelled kind as ``source`` instead of ``auto``).

Corpus: ``bench/memory_extract/*.yaml``, one file per document, written for this benchmark (40
documents, 222 gold memories; 21 documents ``dev``, 19 ``heldout``). Twelve realistic projects
(a Django invoicing service, a Rust log shipper, a React booking front end, a Go inventory service,
a Kotlin offline-first Android app, a Terraform/Kubernetes platform team, a Python feature store,
a Fastify/Prisma content API; and, dev only, written later by another hand, a Phoenix chat
service, a Unity game's build tooling, a Spring billing service and STM32 firmware), four source
kinds, ten documents each:

* ``transcript``: Claude Code sessions (User/Assistant turns, tool calls and their output,
  chit-chat, questions, false leads, options weighed and rejected, a closing summary);
* ``commit``: commit messages (subject, body, trailers; a revert; a dependabot bump with nothing
  to keep);
* ``diff``: unified diffs whose code comments and docs state decisions, conventions, gotchas,
  function contracts and past test failures (one edits a CLAUDE.md);
* ``text``: meeting notes, a design review, a postmortem, PR descriptions, a handoff note, notes of
  a customer call.

A document is ``{id, split, kind, project, text, gold, negatives}``. Each gold memory is
``{memory_type, evidence, also?, note}``: ``evidence`` is an exact substring of ``text`` (the span
a good extractor should point at; unique in the text), ``also`` optional other exact substrings
that state the same memory (e.g. a failing test's output line and the sentence that explains the
failure), ``note`` why it is a memory of that type. ``negatives`` are hard negatives ``{evidence,
why}``: text that looks like a memory and is not one — a question ("do we even have redis in
prod?"), an option considered and rejected, a superseded value, an open "not decided" item, test
output quoted as an example, a preference restated by the assistant rather than stated by the
user, upstream release notes. The types follow the tool: ``design`` (decisions), ``requirements``
(must/shall, limits, compliance), ``user_preference`` (how the user wants the agent or the work
done), ``test_history`` (test, benchmark and load-test results, failures and their causes),
``code_pattern`` (conventions and gotchas), and where natural ``component``, ``function``,
``session``. ``tests/query_server/memory/test_memory_extract_data.py`` checks the files.

Method: one ``CodeMemService`` per run (temporary project, state and global-scope directories,
``dense_embeddings=False``; the memory tools use the real local model), and for each document
``service.memory.memory_extract(MemoryExtractInput(text, source="auto", commit=False))`` with the
default ``min_confidence`` and ``max_candidates``. The store is checked to be empty before each
document (a dry run stores nothing; anything found — the tool storing in a dry run — is
hard-deleted and reported as ``stored_in_dry_run``), so deduplication against stored memories
cannot leak from one document to the next.

Matching: a candidate matches a gold memory when the types are equal and the candidate's span
``[source_start, source_end)`` overlaps one of the gold's spans (``evidence`` and ``also``,
located with ``text.find``); a span that is missing, out of the text or longer than
``MAX_SPAN`` characters (a span covering the whole document would overlap everything) does not
count, and the candidate's ``quote`` is used instead: located in the text when it is a substring,
otherwise it matches when its longest common run with the evidence (whitespace collapsed) is at
least half the shorter of the two. Each gold memory is matched at most once and each candidate
at most once (a maximum bipartite matching, so the order of the candidates does not matter; a
second candidate for the same memory counts against precision).

Figures, per split, per type and overall: **precision** (matched candidates / candidates of that
type), **recall** (matched gold / gold of that type), a **type confusion** table (an unmatched
candidate whose span overlaps a gold memory of another type: gold type → candidate type), the
candidates on **hard negatives** (an unmatched candidate overlapping a negative's span), the
candidates that overlap nothing labelled, and the share of documents whose detected ``source``
equals the labelled kind (reported). Targets (issue 20): precision ≥ 0.8 and recall ≥ 0.6 for
each of design, requirements, user_preference, test_history and code_pattern, on each split
(the other types are reported). The exit status is 1 when a target fails. Results go to
``bench/results/memory_extract.json`` (``memory_extract-dev.json``/``-heldout.json`` for one split).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import yaml

from bench.split_runs import finish, fmt, report_log, share, split_parser

BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "memory_extract"

PRECISION = 0.8
RECALL = 0.6
MAX_SPAN = 1200
"""A candidate span longer than this (characters) is not used for matching (its quote is)."""
QUOTE_OVERLAP = 0.5

SPLITS = ("dev", "heldout")
KINDS = ("transcript", "commit", "diff", "text")
MEMORY_TYPES = ("requirements", "design", "code_pattern", "component", "function", "test_history", "session",
                "user_preference")
TARGET_TYPES = ("design", "requirements", "user_preference", "test_history", "code_pattern")
MIN_GOLD = {"design": 12, "requirements": 12, "user_preference": 12, "test_history": 12, "code_pattern": 12}


# -- the corpus ------------------------------------------------------------------------------------

def document_files() -> list[Path]:
    return sorted(DATA_DIR.glob("*.yaml"))


def load_documents(split: str = "all") -> list[dict[str, Any]]:
    """The documents of one split (``dev``, ``heldout``) or of both (``all``)."""
    docs = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in document_files()]
    for doc in docs:
        doc.setdefault("gold", [])
        doc["gold"] = doc["gold"] or []
        doc["negatives"] = doc.get("negatives") or []
    return [d for d in docs if split == "all" or d.get("split") == split]


def spans(text: str, item: dict[str, Any]) -> list[tuple[int, int]]:
    """Where a gold memory's (or a negative's) evidence and ``also`` strings are in the text."""
    found = []
    for piece in [item["evidence"], *(item.get("also") or [])]:
        start = text.find(piece)
        if start >= 0:
            found.append((start, start + len(piece)))
    return found


def check_document(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a document (empty when it is well formed): known split, kind and types,
    every evidence an exact and unique substring, a note on every gold memory."""
    name = doc.get("id") or "?"
    problems: list[str] = []
    text = doc.get("text")
    if not isinstance(text, str) or not text.strip():
        return [f"{name}: empty text"]
    if doc.get("split") not in SPLITS:
        problems.append(f"{name}: split {doc.get('split')!r} is not one of {SPLITS}")
    if doc.get("kind") not in KINDS:
        problems.append(f"{name}: kind {doc.get('kind')!r} is not one of {KINDS}")
    if not doc.get("project"):
        problems.append(f"{name}: no project")
    for i, gold in enumerate(doc["gold"]):
        if gold.get("memory_type") not in MEMORY_TYPES:
            problems.append(f"{name}: gold {i}: memory_type {gold.get('memory_type')!r} is not one of {MEMORY_TYPES}")
        if not gold.get("note"):
            problems.append(f"{name}: gold {i}: no note")
    for what, items in (("gold", doc["gold"]), ("negative", doc["negatives"])):
        for i, item in enumerate(items):
            for piece in [item.get("evidence"), *(item.get("also") or [])]:
                if not isinstance(piece, str) or not piece.strip():
                    problems.append(f"{name}: {what} {i}: empty evidence")
                elif text.count(piece) != 1:
                    problems.append(f"{name}: {what} {i}: evidence found {text.count(piece)} times (exactly once expected): "
                                    f"{piece[:60]!r}")
    gold_spans = [s for g in doc["gold"] for s in spans(text, g)]
    for i, neg in enumerate(doc["negatives"]):
        if any(_overlap(s, g) for s in spans(text, neg) for g in gold_spans):
            problems.append(f"{name}: negative {i} overlaps a gold span")
    return problems


# -- matching --------------------------------------------------------------------------------------

def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _squash(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip().lower()


def candidate_span(text: str, cand: dict[str, Any]) -> tuple[tuple[int, int] | None, str]:
    """The span used for a candidate and how it was found: ``span`` (its own offsets), ``quote``
    (its quote found in the text) or ``none``."""
    start, end = cand.get("source_start"), cand.get("source_end")
    if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text) and end - start <= MAX_SPAN:
        return (start, end), "span"
    quote = cand.get("quote") or ""
    if quote.strip():
        at = text.find(quote)
        if at >= 0 and len(quote) <= MAX_SPAN:
            return (at, at + len(quote)), "quote"
    return None, "none"


def _quote_matches(quote: str, evidence: str) -> bool:
    a, b = _squash(quote), _squash(evidence)
    if not a or not b:
        return False
    run = SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size
    return run >= QUOTE_OVERLAP * min(len(a), len(b))


def _touches(text: str, cand: dict[str, Any], span: tuple[int, int] | None, item: dict[str, Any]) -> bool:
    """Does the candidate point at this gold memory or negative (by span, else by quote)?"""
    item_spans = spans(text, item)
    if span is not None:
        return any(_overlap(span, s) for s in item_spans)
    quote = cand.get("quote") or ""
    return any(_quote_matches(quote, text[s:e]) for s, e in item_spans)


def _max_matching(edges: dict[int, list[int]]) -> dict[int, int]:
    """A maximum bipartite matching, candidate index → gold index (Kuhn's augmenting paths)."""
    gold_of: dict[int, int] = {}

    def augment(c: int, seen: set[int]) -> bool:
        for g in edges.get(c, []):
            if g in seen:
                continue
            seen.add(g)
            if g not in gold_of or augment(gold_of[g], seen):
                gold_of[g] = c
                return True
        return False

    for c in sorted(edges):
        augment(c, set())
    return {c: g for g, c in gold_of.items()}


def match_document(doc: dict[str, Any], candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Match the candidates of one document to its gold memories; every candidate and gold outcome."""
    text, gold, negatives = doc["text"], doc["gold"], doc["negatives"]
    located = [candidate_span(text, c) for c in candidates]
    edges = {ci: [gi for gi, g in enumerate(gold) if g["memory_type"] == c.get("memory_type")
                  and _touches(text, c, located[ci][0], g)]
             for ci, c in enumerate(candidates)}
    matched = _max_matching(edges)
    outcomes = []
    for ci, cand in enumerate(candidates):
        span, how = located[ci]
        row = {"memory_type": cand.get("memory_type"), "title": cand.get("title"), "confidence": cand.get("confidence"),
               "span": list(span) if span else None, "located_by": how, "quote": (cand.get("quote") or "")[:200],
               "gold": matched.get(ci), "confused_with": None, "on_negative": None, "unlabelled": False}
        if ci not in matched:
            other = [g for g in gold if _touches(text, cand, span, g)]
            if any(g["memory_type"] == cand.get("memory_type") for g in other):
                row["duplicate"] = True  # its gold memory was matched by another candidate
            elif other:
                row["confused_with"] = other[0]["memory_type"]
            neg = next((i for i, n in enumerate(negatives) if _touches(text, cand, span, n)), None)
            if neg is not None and not other:
                row["on_negative"] = neg
            if not other and neg is None:
                row["unlabelled"] = True
        outcomes.append(row)
    found = set(matched.values())
    return {"candidates": outcomes, "negatives": len(negatives),
            "gold": [{"memory_type": g["memory_type"], "evidence": g["evidence"][:200], "found": i in found}
                     for i, g in enumerate(gold)]}


# -- the run ---------------------------------------------------------------------------------------

def _plain(candidate: Any) -> dict[str, Any]:
    data = candidate.model_dump(mode="json") if hasattr(candidate, "model_dump") else dict(candidate)
    data["memory_type"] = str(data.get("memory_type") or "")
    return data


def _empty_store(service: Any) -> int:
    """Hard-delete every memory of the service's store; how many there were."""
    from resources.schemas.memory.reads import MemoryListInput
    from resources.schemas.memory.writes import MemoryDeleteInput

    removed = 0
    while True:
        page = service.memory.memory_list(MemoryListInput(limit=100, include_deleted=True,
                                                          scopes=["project", "local", "global"]))
        if not page.results:
            return removed
        for hit in page.results:
            service.memory.memory_delete(MemoryDeleteInput(memory_id=hit.id, memory_type=hit.memory_type,
                                                           hard_delete=True))
            removed += 1
        if removed > 10_000:
            raise RuntimeError("the memory store does not empty")


def run_documents(docs: list[dict[str, Any]], *, given_source: bool = False,
                  log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Call memory_extract on every document with a fresh, empty store; each document's outcome."""
    from query_server.service import CodeMemService
    from resources.schemas.memory.extract import MemoryExtractInput
    from resources.settings import Settings

    for doc in docs:
        problems = check_document(doc)
        if problems:
            raise ValueError(f"malformed document: {problems}")
    tmp = Path(tempfile.mkdtemp(prefix="codemem-bench-memory-extract-"))
    results = []
    try:
        root = tmp / "project"
        root.mkdir()
        (root / "README.md").write_text("# scratch project of bench.memory_extract\n")
        service = CodeMemService(Settings(project_root=root, state_dir=tmp / "state", global_dir=tmp / "global",
                                          dense_embeddings=False))
        try:
            for doc in docs:
                leaked = _empty_store(service)
                request = MemoryExtractInput(text=doc["text"], source=doc["kind"] if given_source else "auto", commit=False)
                started = time.perf_counter()
                result = service.memory.memory_extract(request)
                seconds = time.perf_counter() - started
                candidates = [_plain(c) for c in result.candidates]
                outcome = match_document(doc, candidates)
                outcome.update({"id": doc["id"], "split": doc["split"], "kind": doc["kind"], "project": doc["project"],
                                "detected_source": str(result.source), "dry_run": result.dry_run,
                                "stored_in_dry_run": leaked, "ms": round(1000 * seconds, 1)})
                results.append(outcome)
                hits = sum(g["found"] for g in outcome["gold"])
                log(f"  {doc['id']:<44} {len(candidates):>3} candidates, {hits}/{len(outcome['gold'])} gold found "
                    f"({seconds:.1f} s)")
            if docs:
                results[-1]["stored_in_dry_run"] += _empty_store(service)
        finally:
            service.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results



def figures(outcomes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per type and overall precision and recall, type confusion, hard negatives of a set of documents."""
    outcomes = list(outcomes)
    cands = [c for o in outcomes for c in o["candidates"]]
    gold = [g for o in outcomes for g in o["gold"]]
    types: dict[str, Any] = {}
    for t in MEMORY_TYPES:
        tc = [c for c in cands if c["memory_type"] == t]
        tg = [g for g in gold if g["memory_type"] == t]
        if not tc and not tg:
            continue
        hit_c, hit_g = sum(c["gold"] is not None for c in tc), sum(g["found"] for g in tg)
        types[t] = {"candidates": len(tc), "matched": hit_c, "gold": len(tg), "found": hit_g,
                    "precision": share(hit_c, len(tc)), "recall": share(hit_g, len(tg))}
    other = sorted({c["memory_type"] for c in cands} - set(MEMORY_TYPES))
    for t in other:  # a type the tool should not produce
        types[t] = {"candidates": sum(c["memory_type"] == t for c in cands), "matched": 0, "gold": 0, "found": 0,
                    "precision": 0.0, "recall": None}
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    for c in cands:
        if c["confused_with"]:
            confusion[c["confused_with"]][c["memory_type"]] += 1
    matched = sum(c["gold"] is not None for c in cands)
    found = sum(g["found"] for g in gold)
    negatives = sum(o.get("negatives", 0) for o in outcomes)
    return {
        "documents": len(outcomes), "types": types,
        "total": {"candidates": len(cands), "matched": matched, "gold": len(gold), "found": found,
                  "precision": share(matched, len(cands)), "recall": share(found, len(gold))},
        "confusion": {g: dict(c) for g, c in confusion.items()},
        "on_negatives": sum(c["on_negative"] is not None for c in cands),
        "duplicates": sum(bool(c.get("duplicate")) for c in cands),
        "unlabelled": sum(c["unlabelled"] for c in cands),
        "negatives": negatives,
        "source_detected": share(sum(o["detected_source"] == o["kind"] for o in outcomes), len(outcomes)),
        "stored_in_dry_run": sum(o["stored_in_dry_run"] for o in outcomes),
        "ms_mean": round(sum(o["ms"] for o in outcomes) / len(outcomes), 1) if outcomes else None,
    }


def summarize(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """Figures per split (and ``all`` when both ran), each with a per-kind breakdown of the totals."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for split in SPLITS:
        chosen = [o for o in outcomes if o["split"] == split]
        if chosen:
            groups[split] = chosen
    if len(groups) > 1:
        groups["all"] = outcomes
    summary = {}
    for name, items in groups.items():
        entry = figures(items)
        entry["kinds"] = {k: figures(o for o in items if o["kind"] == k)["total"] for k in KINDS
                          if any(o["kind"] == k for o in items)}
        summary[name] = entry
    return summary


def verdicts(summary: dict[str, Any]) -> list[tuple[str, str, float | None, bool]]:
    """(row, target, figure, passed): precision and recall of each target type, on each split."""
    rows = []
    for split, entry in summary.items():
        if split == "all" and len(summary) > 1:
            continue  # the targets hold per split; "all" is reported
        for t in TARGET_TYPES:
            f = entry["types"].get(t) or {"candidates": 0, "gold": 0, "precision": None, "recall": None}
            p, r = f["precision"], f["recall"]
            rows.append((f"{split}: {t} precision ({f['candidates']} candidates)", f">= {PRECISION}", p,
                         p is not None and p >= PRECISION))
            rows.append((f"{split}: {t} recall ({f['gold']} gold)", f">= {RECALL}", r, r is not None and r >= RECALL))
    return rows


def run_memory_extract(split: str = "all", *, given_source: bool = False,
                       log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every document of ``split``; the per-document outcomes and the summary."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    docs = load_documents(split)
    if not docs:
        raise ValueError(f"no document in split {split!r}")
    started = time.perf_counter()
    outcomes = run_documents(docs, given_source=given_source, log=log)
    return {"split": split, "given_source": given_source, "seconds": round(time.perf_counter() - started, 1),
            "documents": outcomes, "summary": summarize(outcomes)}


# -- the report ------------------------------------------------------------------------------------


def report(out: dict[str, Any], log: Callable[[str], None] = print) -> bool:
    """Print the tables and the targets; True when every target passes."""
    for split, entry in out["summary"].items():
        log(f"\n{split}: {entry['documents']} documents")
        log(f"{'type':<17}{'cand.':>6}{'gold':>6}{'precision':>11}{'':>6}{'recall':>8}{'':>6}")
        for t, f in [*entry["types"].items(), ("TOTAL", entry["total"])]:
            target = t in TARGET_TYPES
            pm = "" if not target or f["precision"] is None else ("PASS" if f["precision"] >= PRECISION else "FAIL")
            rm = "" if not target or f["recall"] is None else ("PASS" if f["recall"] >= RECALL else "FAIL")
            log(f"{t:<17}{f['candidates']:>6}{f['gold']:>6}{fmt(f['precision']):>11}{pm:>6}{fmt(f['recall']):>8}{rm:>6}")
        log(f"{'by kind':<17}" + "".join(f"{k + ' P/R':>20}" for k in entry["kinds"]))
        log(f"{'':<17}" + "".join(f"{fmt(f['precision']) + ' / ' + fmt(f['recall']):>20}" for f in entry["kinds"].values()))
        if entry["confusion"]:
            log("type confusion (gold → candidate type): " + "; ".join(
                f"{g} → {c} ×{n}" for g, row in sorted(entry["confusion"].items()) for c, n in sorted(row.items())))
        log(f"candidates on hard negatives: {entry['on_negatives']} ({entry['negatives']} negatives); duplicates of a matched memory: {entry['duplicates']}; "
            f"on unlabelled text: {entry['unlabelled']}; source detected right: {fmt(entry['source_detected'])}; "
            f"stored in a dry run: {entry['stored_in_dry_run']}; mean {entry['ms_mean']} ms a document")
    rows = verdicts(out["summary"])
    log("")
    for row, target, figure, passed in rows:
        log(f"{row:<52}{target:<8}{fmt(figure):>8}  {'PASS' if passed else 'FAIL'}")
    return all(passed for *_, passed in rows)


def misses(doc: dict[str, Any]) -> list[str]:
    """One line per miss of a document: gold not found, candidates wrong or on a negative."""
    lines = [f"MISSED {g['memory_type']}: \"{g['evidence'][:110]}\"" for g in doc["gold"] if not g["found"]]
    for c in doc["candidates"]:
        if c["gold"] is not None:
            continue
        what = ("DUPLICATE" if c.get("duplicate") else f"TYPE (gold {c['confused_with']})" if c["confused_with"]
                else f"NEGATIVE #{c['on_negative']}" if c["on_negative"] is not None else "UNLABELLED")
        lines.append(f"{what} {c['memory_type']} {c['confidence']}: \"{(c['quote'] or c['title'] or '')[:100]}\"")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = split_parser("memory_extract", __doc__.split("\n\n")[0], "documents")
    parser.add_argument("--given-source", action="store_true", help="pass each document's kind as source (default auto)")
    args = parser.parse_args(argv)
    log = report_log(args.json)
    out = run_memory_extract(args.split, given_source=args.given_source, log=log)
    return finish(args, "memory_extract", out, report(out, log), out["documents"], lambda item: item["id"], misses, log)


if __name__ == "__main__":
    sys.exit(main())

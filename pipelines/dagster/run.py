"""``codemem index`` as a Dagster run recorded in the project's instance, per touched bucket.

The index itself is the plain functions (``pipelines.indexer.index_project``): a small change
costs what the change costs. The run the Dagster UI shows is the ``codemem_index`` job
(``pipelines.dagster.index_job``): one run per ``codemem index``, materializing the code-index
assets for exactly the buckets the change touched (each with its own files), normalized_graph,
the design assets and the index checks. By default the run is recorded by a child process that
imports Dagster while this one indexes (``pipelines.dagster.recorder``); given an ``instance``,
the job runs in this process and indexes inside its op.

Nothing changed and the design inputs unchanged means no run at all and no Dagster: the answer
comes from the manifest.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.bucket_records import summary_metadata
from pipelines.dagster.project import ProjectStores
from pipelines.dagster.recorder import earlier_background_note
from pipelines.dagster.tags import RUN_PID_TAG, TRIGGER_TAG
from pipelines.design.derive import DesignReport, derive_when_changed, design_unchanged, ingest_documents
from pipelines.design.ingest import DOC_MODEL_KEY, doc_vectors_key, pending_document_chunks
from pipelines.design.memories import DesignSources, DesignStores
from pipelines.index_checks import WHOLE_INDEX_CHECKS, files_match_disk, no_dangling_edges, touched_stores_agree
from pipelines.index_context import RUN_FAILED, IndexReport, Progress, _no_progress, remember_report, total_report
from pipelines.index_stores import EMBEDDING_MODEL_KEY, extraction_outdated, index_model_key
from pipelines.indexer import finish_report, index_project
from pipelines.stages import plan_buckets, stats_match
from resources.embeddings.factory import configured_model_id
from resources.manifest import MANIFEST_FILE, Manifest, open_manifest
from resources.memory.ledger import Ledger
from resources.memory.scopes import LEDGER_NAME, local_ledger_path, open_project_ledger
from resources.private_files import make_private_dir
from resources.settings import Settings
from resources.sqlite import integrity_problem


def dagster_home(state_dir: Path) -> Path:
    """The project's Dagster instance directory (run and event storage in SQLite)."""
    home = make_private_dir(state_dir / "dagster")
    config = home / "dagster.yaml"
    wanted = dagster_yaml(home)
    if not config.exists() or config.read_text() != wanted:
        config.write_text(wanted)
    return home


def dagster_yaml(home: Path) -> str:
    """The instance config codemem writes into ``home``: Dagster's SQLite storage under ``home``,
    with the event log's databases kept open (``pipelines.dagster.event_storage``)."""
    return (
        "# Written by codemem (rewritten on start): run, event and schedule storage in SQLite under\n"
        "# this directory; one run at a time, since every run needs the project's stores.\n"
        "storage:\n  custom:\n    module: pipelines.dagster.event_storage\n    class: CodememSqliteStorage\n"
        f"    config:\n      base_dir: {json.dumps(str(home))}\n"
        "telemetry:\n  enabled: false\n"
        "nux:\n  enabled: false\n"  # no newsletter prompt on the UI's first visit
        "concurrency:\n  runs:\n    max_concurrent_runs: 1\n"
    )


def project_instance(state_dir: Path) -> Any:
    """The project's persistent Dagster instance."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    return DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home(state_dir))))


def _run_tags() -> dict[str, str]:
    """Tags of a ``codemem index`` run: its trigger, and this process's pid (so that
    ``fail_orphaned_runs`` can tell a run whose process was killed from one still going)."""
    return {TRIGGER_TAG: "codemem index", RUN_PID_TAG: str(os.getpid())}


NOTHING_CHANGED = "nothing changed: answered from the manifest (nothing to run)"

Send = Callable[[dict[str, Any]], None]


def index_messages(project: ProjectStores, send: Send, *, embed: bool, force: bool, progress: Progress) -> IndexReport:
    """Index what changed over the stores ``project`` owns, sending the run's messages
    (``pipelines.dagster.index_job.IndexSource``, all but ``end``) as the work goes: each touched
    bucket as soon as it is written, then the checks, normalized_graph and the design assets."""
    ctx = project.index_context()
    if ctx is None:
        raise ValueError("a codemem index run needs the stores: another process owns them")
    written: list[tuple[str, str, int]] = []
    buckets = 0

    def on_bucket(record: Any) -> None:
        nonlocal buckets
        buckets += 1
        written.extend((row[0], row[1], row[3]) for row in record.written)
        send({"kind": "bucket", "bucket": record.bucket, "assets": record.asset_metadata()})

    report = index_project(ctx, progress=progress, embed=embed, force=force, on_bucket=on_bucket)
    started = time.perf_counter()
    passed, metadata = files_match_disk(ctx, written)
    send({"kind": "check", "asset": "graph_loaded", "check": "bucket_matches_disk", "passed": passed, "metadata": metadata})
    checks = {**WHOLE_INDEX_CHECKS, "stores_agree": lambda c: touched_stores_agree(c, [w[0] for w in written]),
              "no_dangling_edges": lambda c: no_dangling_edges(c, report.resolved_scope)}
    for name, check in checks.items():
        passed, metadata = check(ctx)
        send({"kind": "check", "asset": "normalized_graph", "check": name, "passed": passed, "metadata": metadata})
    numbers = {
        "buckets_touched": buckets, "edges_added": report.edges_added, "edges_removed": report.edges_removed,
        "files": report.files_seen, "symbols": report.symbols_total, "resolved_edges": report.edges_total,
        "dense_vectors": report.dense_done, "dense_total": report.dense_total,
    }
    send({"kind": "asset", "asset": "normalized_graph",
          "metadata": summary_metadata(numbers, report.notes, report.seconds + time.perf_counter() - started)})
    _design(project, report, send, embed=embed)
    return report


def _design(project: ProjectStores, report: IndexReport, send: Send, *, embed: bool) -> None:
    """The design assets: documents (their chunks' dense vectors with ``embed``), then links,
    patterns, components and anchors."""
    stores = project.design_stores()
    if stores is None:
        return
    design = DesignReport()
    try:
        steps: tuple[tuple[str, Callable[[DesignStores], DesignReport]], ...] = (
            ("design_documents", functools.partial(ingest_documents, embed=embed)), ("design_links", derive_when_changed))
        for asset, step in steps:
            started = time.perf_counter()
            done = step(stores)
            send({"kind": "asset", "asset": asset, "metadata": summary_metadata(done.as_dict(), done.notes, time.perf_counter() - started)})
            design.merge(done)
    except Exception as exc:  # noqa: BLE001 - the code index stands; the report says what failed
        report.notes.append(f"design layer not refreshed: {type(exc).__name__}: {exc} (the code index is up to date)")
        return
    report.design = design.as_dict()
    report.notes.extend(design.notes[:20])


class LocalIndexSource:
    """The op's messages from an index run inside the op itself (a run in this process)."""

    def __init__(self, project: ProjectStores, progress: Progress) -> None:
        self._project = project
        self._progress = progress
        self.report: IndexReport | None = None

    def messages(self, embed: bool, force: bool) -> Iterator[dict[str, Any]]:
        """Index, then hand over what the run sent and its end."""
        sent: list[dict[str, Any]] = []
        try:
            self.report = index_messages(self._project, sent.append, embed=embed, force=force, progress=self._progress)
        except Exception as exc:  # noqa: BLE001 - recorded as the run's failure
            yield from sent
            yield {"kind": "end", "error": f"{type(exc).__name__}: {exc}"}
            return
        yield from sent
        yield {"kind": "end", "error": None}


def _nothing_to_do(project: ProjectStores, force: bool, embed: bool) -> IndexReport | None:
    """The report of a run with nothing to index and the design inputs unchanged (None when
    there is work): answered from the manifest, without Dagster."""
    ctx = project.index_context()
    assert ctx is not None
    model_id = getattr(ctx.embedder, "model_id", None)
    return unchanged_report(ctx.settings, ctx.manifest, project.design_stores(), force=force, embed=embed, model_id=model_id)


def unchanged_report(
    settings: Settings, manifest: Manifest, design: DesignSources, *, force: bool, embed: bool, model_id: str | None = None,
) -> IndexReport | None:
    """The report of an index with nothing to do (None when there is work): the index and the doc
    chunks made by the active embedding model (``model_id``; None: the one the settings configure)
    and dense setting, no file to parse again or delete, no edge left to resolve, extraction rules
    unchanged, the design step's inputs and documents unchanged, no doc chunk's dense vector left
    to compute (with ``embed``). Reads the manifest, the ledgers and the files (each file's stats;
    then, in a tree whose stats all match, the files whose stats do not vouch for their content:
    ``stats_vouch``)."""
    model_id = model_id or configured_model_id(settings)
    if model_id is None or manifest.get_meta(EMBEDDING_MODEL_KEY) != index_model_key(model_id):
        return None
    if design.ledger.meta(DOC_MODEL_KEY) != doc_vectors_key(model_id, settings.dense_embeddings):
        return None
    if embed and settings.dense_embeddings and pending_document_chunks(design.ledger):
        return None
    if force or not stats_match(settings, manifest):
        return None
    plans = plan_buckets(settings, manifest)
    if not plans or manifest.resolution_pending() or any(plan.pending for plan in plans.values()) or extraction_outdated(manifest):
        return None
    idle = design_unchanged(design)
    if idle is None:
        return None
    report = IndexReport(root=str(settings.resolved_root()))
    report.design = idle.as_dict()
    report.notes.append(NOTHING_CHANGED)
    report.files_seen = sum(p.seen for p in plans.values())
    report.files_unchanged = sum(p.unchanged for p in plans.values())
    for plan in plans.values():
        report.skipped += plan.skipped
        report.failed += plan.failed
        report.vanished += plan.vanished
    return report


@dataclass
class _LedgersAndManifest:
    """The design step's sources with no store open (``DesignSources``)."""

    settings: Settings
    ledger: Ledger
    local_ledger: Ledger | None
    manifest: Manifest | None


def answer_from_manifest(settings: Settings, *, embed: bool) -> IndexReport | None:
    """``codemem index`` when nothing changed, answered before any store opens (no vector
    collection, graph, model or Dagster): the manifest, the ledgers and the files' stats say so.
    None when there may be work, or work this answer does not cover: no index yet, dense vectors
    to compute (with ``embed``), a memory projection pending. The caller holds the project's owner
    lock (and leaves live git notes, synced by every run, to the full run)."""
    started = time.perf_counter()
    state = settings.resolved_state_dir()
    index_db, ledger_db = state / MANIFEST_FILE, state / LEDGER_NAME
    shared = bool(settings.shared_database_url())  # (server mode: the manifest and the ledger in PostgreSQL)
    if not (index_db.exists() or shared) or not (ledger_db.exists() or shared):
        return None
    with contextlib.ExitStack() as opened:
        manifest = open_manifest(settings)
        opened.callback(manifest.close)
        if embed and settings.dense_embeddings:
            done, total = manifest.dense_counts()
            if done < total:
                return None
        ledger = open_project_ledger(settings)  # (server mode: in PostgreSQL)
        opened.callback(ledger.close)
        local_path = local_ledger_path(settings)
        local = Ledger(local_path, scope="local") if local_path.exists() else None
        if local is not None:
            opened.callback(local.close)
        if any(store.outbox_stats()["pending"] for store in (ledger, local) if store is not None):
            return None
        report = unchanged_report(settings, manifest, _LedgersAndManifest(settings, ledger, local, manifest), force=False, embed=embed)
        if report is None:
            return None
        report.notes += _earlier_notes(dagster_home(state))
        total_report(settings, manifest, report, started)
        remember_report(manifest, report)
        return report


def _run_note(outcome: dict[str, Any], home: Path | None) -> str:
    if outcome.get("background"):
        return (f"Dagster run {outcome['run_id']} (codemem_index) records the touched buckets: it finishes in the "
                "background and shows in the Dagster UI then")
    if outcome.get("success"):
        return f"Dagster run {outcome['run_id']} (codemem_index) recorded the touched buckets"
    where = f"Dagster run {outcome['run_id']}" if outcome.get("run_id") else "the Dagster run"
    damaged = damaged_storage(home) if home is not None else ""
    return f"{where} failed to record this index: {outcome.get('error')} (the index itself is up to date){damaged}"


def _earlier_notes(home: Path) -> list[str]:
    """What to say of the run an earlier index left to finish in the background, when it went wrong."""
    note = earlier_background_note(home)
    return [note + damaged_storage(home)] if note else []


def damaged_storage(home: Path) -> str:
    """What to add to a failed recording's note when the Dagster storage under ``home`` is
    damaged: the files and what to do (empty when every one is sound)."""
    damaged = [f"{path} ({problem})" for path in sorted(home.rglob("*.db")) if (problem := integrity_problem(path))]
    if not damaged:
        return ""
    return f" — the Dagster storage is damaged: {'; '.join(damaged)}; `codemem repair` moves it aside"


def materialize_index(
    project: ProjectStores, *, embed: bool = True, force: bool = False, progress: Progress | None = None,
    instance: Any = None,
) -> IndexReport:
    """Index the project and record the run in the Dagster instance the UI reads.

    Args:
        project: The stores this process owns (``index_context()`` is not None), e.g. the
            service's ``OwnedStores``.
        embed: Compute dense vectors (for the changed symbols in the run, then any left pending).
        force: Re-process every file.
        progress: Receives (phase, done, total), if given.
        instance: A Dagster instance to run the job in, in this process (the index runs inside
            the op); by default a recorder process records the run in the project's instance
            while this process indexes.

    Returns:
        The same report ``index_project`` gives, with a note naming the Dagster run.

    Raises:
        ValueError: ``project`` does not own the stores.
    """
    ctx = project.index_context()
    if ctx is None:
        raise ValueError("materialize_index runs over stores this process owns; another process owns them")
    started = time.perf_counter()
    progress = progress or _no_progress
    recorder = None
    home = dagster_home(ctx.settings.resolved_state_dir())
    earlier: list[str] = []
    if instance is None:  # Dagster imports in the recorder while this process plans and indexes
        from pipelines.dagster.recorder import Recorder, take_prestarted

        recorder = take_prestarted() or Recorder.start()
        earlier = _earlier_notes(home)
    progress("discover", 0, 1)
    idle = _nothing_to_do(project, force, embed)
    if idle is not None:
        if recorder is not None:
            recorder.discard()
        idle.notes += earlier
        return finish_report(ctx, idle, started, embed=embed, progress=progress)
    start_graph = getattr(ctx.graph, "start_in_background", None)  # a lazily started graph: while the files hash
    if start_graph is not None:
        start_graph()
    tags = _run_tags()
    if recorder is None:
        return _run_in_process(project, instance, tags, embed=embed, force=force, progress=progress)
    recorder.begin(str(home), tags, embed=embed, force=force)
    try:
        report = index_messages(project, recorder.send, embed=embed, force=force, progress=progress)
    except BaseException as exc:
        recorder.send({"kind": "end", "error": f"{type(exc).__name__}: {exc}"})
        _finish_recording(recorder, home, ctx.settings.dagster_record_wait_s)
        raise
    recorder.send({"kind": "end", "error": None})
    report.notes += [*earlier, _run_note(_finish_recording(recorder, home, ctx.settings.dagster_record_wait_s), home)]
    return report


def _finish_recording(recorder: Any, home: Path, wait_s: float) -> dict[str, Any]:
    """The recorder's outcome, or the run left to it to finish in the background (then recorded
    as pending, for the next index to say if it failed: ``recorder.earlier_background_note``)."""
    from pipelines.dagster.recorder import leave_pending

    outcome: dict[str, Any] = recorder.finish(wait_s=wait_s)
    if outcome.get("background"):
        leave_pending(home, outcome, recorder)
    return outcome


def _run_in_process(
    project: ProjectStores, instance: Any, tags: dict[str, str], *, embed: bool, force: bool, progress: Progress,
) -> IndexReport:
    """The ``codemem_index`` job in this process, the index inside its op."""
    from pipelines.dagster.index_job import run_index_job

    source = LocalIndexSource(project, progress)
    outcome = run_index_job(instance, source, embed=embed, force=force, tags=tags)
    report = source.report
    if report is None:
        ctx = project.index_context()
        report = IndexReport(root=str(ctx.root) if ctx is not None else "")
        report.failed.append((RUN_FAILED, f"Dagster run {outcome['run_id']} failed: {outcome['error']}"))
        return report
    report.notes.append(_run_note(outcome, None))  # an instance given by the caller: its storage is its own
    return report

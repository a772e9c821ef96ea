"""The code index's stores as a whole: get them ready for a run (rebuilt when the embedding model or
text recipe changed), forget the whole index, and fill the dense vectors still missing."""

from __future__ import annotations

import threading
import time
import typing

from pipelines.index_context import (
    CALLABLE_LANGUAGE,
    CODE_COLLECTION,
    CODE_DENSE_FILTERS,
    CODE_INDEXES,
    CODE_WRITE_AHEAD_LOG,
    IndexContext,
    IndexReport,
    Progress,
    _no_progress,
)
from pipelines.records import EMBEDDING_TEXT_VERSION
from resources.faults import fault_point
from resources.manifest import Manifest
from resources.schemas.code import CALLABLE_KINDS, Language
from resources.vectors.store import PayloadFilter, VectorStore

DENSE_BATCH = 64


def embed_pending(
    ctx: IndexContext,
    progress: Progress = _no_progress,
    stop: threading.Event | None = None,
    batch_size: int = DENSE_BATCH,
) -> tuple[int, int]:
    """Fill dense vectors for every symbol that lacks one; resumable and interruptible.

    Returns:
        (symbols with a dense vector, all symbols) when it stops.
    """
    done, total = ctx.manifest.dense_counts()
    progress("embed", done, total)
    while stop is None or not stop.is_set():
        pending = ctx.manifest.pending_dense(batch_size)
        if not pending:
            break
        ids = [row[0] for row in pending]
        vectors = ctx.embedder.embed_documents([row[1] for row in pending])
        with ctx.write_lock:
            # A concurrent re-index may have replaced these symbols: write only those still there.
            current = ctx.manifest.still_pending(pending)
            live = {i: v for i, v in zip(ids, vectors, strict=True) if i in current}
            ctx.vectors.set_dense(CODE_COLLECTION, live)
            ctx.vectors.flush(CODE_COLLECTION)  # durable before the manifest says so (CODE_WRITE_AHEAD_LOG)
            ctx.manifest.mark_dense(list(live))
            fault_point("embed:after_mark")
        done += len(live)
        progress("embed", done, total)
    return ctx.manifest.dense_counts()


def ensure_code_collection(vectors: VectorStore, dimension: int) -> bool:
    """The code collection, with its payload indexes (``CODE_INDEXES``).

    One written before ``callable_language`` existed gets the field on every function, method and
    constructor first, then the field's index, then a compaction (the writes moved its points to
    new segments). find_duplicates filters on the field only once the collection lists its index,
    so it never misses a point that lacks it; a run stopped before the index is written fills the
    field again next time (setting it twice does no harm). True when it migrated the collection
    (once per index: ~3 ms a symbol on 2 cores, most of it the compaction).
    """
    indexes = vectors.payload_indexes(CODE_COLLECTION)
    migrate = bool(indexes) and CALLABLE_LANGUAGE not in indexes
    if migrate:
        for language in typing.get_args(Language):
            vectors.set_payload(
                CODE_COLLECTION, {CALLABLE_LANGUAGE: language},
                PayloadFilter({"kind": sorted(CALLABLE_KINDS), "language": [language]}),
            )
    vectors.ensure_collection(
        CODE_COLLECTION, dimension, CODE_INDEXES, write_ahead_log=CODE_WRITE_AHEAD_LOG, dense_apart=CODE_DENSE_FILTERS,
    )
    if migrate:
        vectors.optimize(CODE_COLLECTION)
    return migrate


def reset_index(ctx: IndexContext) -> None:
    """Forget the whole code index (vectors, graph subgraphs, manifest) so the next run rebuilds it.

    Used by ``codemem index --reembed`` and automatically when the embedding model changed:
    vectors of two models are never mixed in one collection.
    """
    known = sorted(set(ctx.manifest.paths()) | ctx.manifest.in_flight())
    ctx.vectors.clear_collection(  # never missing for a concurrent search
        CODE_COLLECTION, ctx.embedder.dimension, CODE_INDEXES, write_ahead_log=CODE_WRITE_AHEAD_LOG,
        dense_apart=CODE_DENSE_FILTERS,
    )
    if known:
        ctx.graph.delete_files(known)
    with ctx.manifest.transaction() as conn:
        ctx.manifest.remove_files(conn, known)
        ctx.manifest.forget_skipped(conn)
        ctx.manifest.forget_resolved_edges(conn)
        ctx.manifest.write_meta(conn, EMBEDDING_MODEL_KEY, None)


def _check_embedding_model(ctx: IndexContext, report: IndexReport) -> None:
    """Rebuild the index when the active embedding model is not the one that made its vectors
    (an index with no dense vector yet, of the same dimension and text recipe, only records the
    new model: its symbols still hold the texts to embed, as the new model wants them)."""
    model = index_model_key(str(getattr(ctx.embedder, "model_id", "unknown")))
    previous = ctx.manifest.get_meta(EMBEDDING_MODEL_KEY)
    if previous is not None and previous != model:
        same_texts = previous.partition(" ")[2] == model.partition(" ")[2]
        if same_texts and _dimension_of(previous) == _dimension_of(model) and ctx.manifest.dense_counts()[0] == 0:
            report.notes.append(f"embedding model or text recipe changed from {previous} to {model}: no dense vector was computed yet, nothing to rebuild")
        else:
            reset_index(ctx)
            report.notes.append(f"embedding model or text recipe changed from {previous} to {model}: the index was rebuilt")
    ctx.manifest.set_meta(EMBEDDING_MODEL_KEY, model)


EMBEDDING_MODEL_KEY = "embedding_model"
"""Manifest meta: the model and text recipe of the code index's vectors (``index_model_key``)."""


def index_model_key(model_id: str) -> str:
    """What the manifest records of an index made by ``model_id`` with today's text recipe."""
    return f"{model_id} text-v{EMBEDDING_TEXT_VERSION}"


def _dimension_of(model: str) -> str:
    """The vector length in a recorded model (``local/all-MiniLM-L6-v2@384 text-v3`` → ``384``)."""
    return model.split(" ", 1)[0].rpartition("@")[2]


EXTRACTION_VERSION = "4"
"""What the parsers extract: bumped when an older index lacks what they find now (2: named types
of every underlying type, records, annotations and constructors with their own kinds; 3:
qualified names as each language writes them, the path-based ones kept as ``path_qualified_name``,
and Java's ``this(...)``/``super(...)`` as calls; 4: Java receivers' declared types and classes'
field types, which Java calls resolve through)."""
EXTRACTION_KEY = "extraction_version"


def extraction_outdated(manifest: Manifest) -> bool:
    """True when the index holds files parsed by older extraction rules (an index from before the
    version was recorded counts as older; an empty one does not)."""
    previous = manifest.get_meta(EXTRACTION_KEY)
    if previous is None:
        return bool(manifest.counts().get("files"))
    return previous != EXTRACTION_VERSION


def _check_extraction(ctx: IndexContext, report: IndexReport) -> None:
    """Parse every file again when the extraction rules changed (nothing is dropped: each file's
    symbols, points and subgraph are written over its old ones, as for an edit)."""
    if extraction_outdated(ctx.manifest):
        count = ctx.manifest.forget_content_hashes()
        report.notes.append(f"the parsers extract more than when this index was made: its {count} files are parsed again")
    ctx.manifest.set_meta(EXTRACTION_KEY, EXTRACTION_VERSION)


def prepare_stores(ctx: IndexContext, report: IndexReport, *, reembed: bool = False) -> None:
    """Before writing: rebuild on a model or text-recipe change (or ``reembed``), parse again
    what older extraction rules indexed, make sure the code collection and the graph schema exist."""
    if reembed:
        reset_index(ctx)
        report.notes.append("--reembed: the index was rebuilt from scratch")
    _check_embedding_model(ctx, report)
    _check_extraction(ctx, report)
    started = time.monotonic()
    if ensure_code_collection(ctx.vectors, ctx.embedder.dimension):
        report.notes.append(f"the code collection was upgraded for find_duplicates' one-field filter (once): "
                            f"{time.monotonic() - started:.1f} s")
    ctx.graph.ensure_schema()


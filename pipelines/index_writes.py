"""Writing prepared files to the stores — points first, then the manifest rows (the files still in
flight), then subgraphs, then the files settled — deleting files from them, and re-resolving the
cross-file edges that changed (computed from the manifest, then applied to the graph), each step
recorded as in flight in the manifest first so that an interrupted write is finished or redone by
the next run."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.index_context import CODE_COLLECTION, EdgeScope, IndexContext
from pipelines.index_prepare import _now, _Prepared
from pipelines.records import file_id, file_node_ids, graph_label
from pipelines.resolution import Edge, resolve
from pipelines.resolution_scope import (
    affected_paths,
    existing_nodes,
    hierarchy_changed,
    hierarchy_moved,
    kept_edges,
    name_tokens,
    reachable_symbols,
    record_writes,
    referenced_names,
    rewritten_files,
    scope_ids,
    types_moved,
)
from resources.faults import fault_point
from resources.graph.base import chunked
from resources.graph.store import GraphEdge, GraphNode
from resources.manifest import REF_NAMES_COMPLETE, FileState, SymbolRow
from resources.vectors.store import VectorPoint

EDGE_WRITE_CHUNK = 50_000
"""Resolved edges sent to the graph at a time: each chunk's edge objects and query rows exist only
while it is written (all of a kernel's 2.5 million at once took GBs of memory)."""


def _attach_cached_dense(ctx: IndexContext, prepared: list[_Prepared]) -> None:
    """Give points their dense vector now when the embedding cache already has it."""
    cache_lookup = getattr(ctx.embedder, "cached_documents", None)
    if cache_lookup is None:
        return
    texts = [s.embed_text for p in prepared for s in p.symbols]
    if not texts:
        return
    found = cache_lookup(texts)
    index = 0
    for p in prepared:
        for symbol, point in zip(p.symbols, p.points, strict=True):
            vector = found[index]
            index += 1
            if vector is not None:
                point.dense = vector
                symbol.has_dense = True


def _held_points(ctx: IndexContext, prepared: list[_Prepared], points: Iterable[VectorPoint], paths: list[str]) -> set[str]:
    """The ids of ``points`` (of files written again, one point per id) of the files at ``paths``
    that the store holds as they would be written (``VectorStore.held_as_is``): a file with one
    function added or changed rewrites that function's point, not the file's every point. A point
    given a dense vector (from the cache) is held only where its symbol has one already; a held
    point keeps the dense vector it has, and its manifest row (in ``prepared``) says whether it has
    one."""
    had_dense = ctx.manifest.dense_flags(paths)
    candidates = [pt for pt in points if pt.id in had_dense and (pt.dense is None or had_dense[pt.id])]
    held = ctx.vectors.held_as_is(CODE_COLLECTION, candidates)
    for p in prepared:
        for symbol in p.symbols:
            if symbol.id in held:
                symbol.has_dense = had_dense[symbol.id]
    return held


@dataclass(frozen=True, slots=True)
class WrittenPoints:
    """What ``write_vectors`` did: the files' points (held ones included: the symbols indexed),
    and the stored points it replaced or deleted (tombstones in the embedded collection)."""

    points: int
    replaced: int


def write_vectors(
    ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]], *, rewrite_all: bool = False,
) -> WrittenPoints:
    """Stage 1 of a write: the files' points (sparse, plus dense from the cache) into the vector
    store, and the points of symbols that no longer exist out of it.

    The files and their point ids are recorded as in flight first (``Manifest.begin_writes``), so
    an interruption before their writes are settled (``Manifest.settle_in_flight``) is undone by
    the next run whatever the files become meanwhile. A point the store holds as it is (its
    symbol and lines unchanged: ``_held_points``) is not written again, unless ``rewrite_all``
    (a repair: the store may hold it otherwise than the manifest says). The same holds for the
    graph: a file's subgraph is written over the one its rows describe, and replaced whole where
    an interrupted run left the file in flight, or with ``rewrite_all`` (``_Prepared.replace_whole``)."""
    redone = ctx.manifest.in_flight()  # (an interrupted run's files: their points may be newer than their rows)
    for p in prepared:
        p.replace_whole = rewrite_all or p.state.path in redone or not previous_ids.get(p.state.path)
    ctx.manifest.begin_writes({p.state.path: [s.id for s in p.symbols] for p in prepared})
    _attach_cached_dense(ctx, prepared)
    points = {pt.id: pt for p in prepared for pt in p.points}  # (an id given twice: its last point is the one written)
    comparable = [] if rewrite_all else [
        p.state.path for p in prepared if p.state.path not in redone and previous_ids.get(p.state.path)
    ]
    held = _held_points(ctx, prepared, points.values(), comparable)
    written = [pt for pt in points.values() if pt.id not in held]
    ctx.vectors.upsert(CODE_COLLECTION, written)
    stale: list[str] = []
    for p in prepared:
        new_ids = {s.id for s in p.symbols}
        stale += [i for i in previous_ids.get(p.state.path, []) if i not in new_ids]
    ctx.vectors.delete(CODE_COLLECTION, stale)
    before = {i for ids in previous_ids.values() for i in ids}
    return WrittenPoints(sum(len(p.points) for p in prepared), sum(1 for pt in written if pt.id in before) + len(stale))


def commit_manifest(ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]]) -> None:
    """Stage 2 of a write: the files' manifest rows committed once their points are durable, with
    the node ids whose graph edges their subgraphs' write destroys marked dirty for cross-file
    resolution in the same transaction (``_destroyed_nodes``), and what that resolution must cover
    (``pipelines.resolution_scope``). The files stay in flight until their subgraphs are written
    (``write_subgraphs``, ``Manifest.settle_in_flight``): a run interrupted in between leaves them
    for the next run to redo, their subgraphs then replaced whole."""
    paths = [p.state.path for p in prepared]
    previous_refs = ctx.manifest.refs_of(paths)
    previous_symbols = {path: ctx.manifest.find_symbols_in(path) for path in paths}
    ctx.vectors.flush(CODE_COLLECTION)  # the points durable before the manifest records them (CODE_WRITE_AHEAD_LOG)
    fault_point("index:before_manifest")
    # replaced whole: a file whose rows already hold this write (a Dagster step run again after its
    # commit: the graph may hold either write), or this content (a forced run), or whose hash was
    # forgotten for a new extraction (a new release may label its nodes otherwise)
    written = {p.state.path: p.state.content_hash for p in prepared}
    whole = {path for path, digest in written.items()
             if (state := ctx.manifest.file(path)) is not None and state.content_hash in (digest, "")}
    destroyed, written_over = _destroyed_nodes(prepared, previous_ids, previous_symbols, whole)
    with ctx.manifest.transaction() as conn:
        ctx.manifest.replace_files(conn, [(p.state, p.refs, p.symbols) for p in prepared])
        ctx.manifest.hold_in_flight(conn, paths)
        ctx.manifest.mark_dirty(conn, destroyed)
        ctx.manifest.mark_rewritten(conn, written_over)
        record_writes(ctx.manifest, conn, [(p.state.path, p.refs, p.ref_names, p.symbols) for p in prepared],
                      previous_refs, previous_symbols, {p.state.path: p.state.language for p in prepared})


def _destroyed_nodes(
    prepared: list[_Prepared], previous_ids: dict[str, list[str]], previous_symbols: dict[str, list[SymbolRow]],
    whole: set[str],
) -> tuple[set[str], set[str]]:
    """The node ids whose graph edges the files' subgraph writes destroy, and the files written
    over. A file replaced whole destroys its node and every node of its last write; a file written
    over destroys the nodes it no longer has (or has under another label), which its write deletes
    (``_Prepared.gone_nodes``). A node it keeps (its file's node too) keeps its edges: those of a
    file that mentions no name whose definition changed stay as they are, the others are resolved
    again, the file in the resolution's scope (``Manifest.mark_rewritten``).
    ``whole``: files to replace whole, whatever ``_Prepared.replace_whole`` says."""
    destroyed: set[str] = set()
    written_over: set[str] = set()
    for p in prepared:
        # (a bucket pickled by an earlier release has no such field)
        if getattr(p, "replace_whole", True) or p.state.path in whole:
            p.gone_nodes = None
            destroyed.add(file_id(p.state.path))
            destroyed.update(previous_ids.get(p.state.path, []))
            continue
        written_over.add(p.state.path)
        labels = {s.id: graph_label(s.kind) for s in p.symbols}  # (an id given twice: its last node is written)
        p.gone_nodes = sorted({(s.id, old) for s in previous_symbols.get(p.state.path, [])
                               if labels.get(s.id) != (old := graph_label(s.kind))})
        destroyed.update(i for i, _ in p.gone_nodes)
    return destroyed, written_over


@dataclass(slots=True)
class FileSubgraph:
    """What a file's graph write and its record need once its points and rows are written (a
    queued file holds no more: ``pipelines.index_graph_writer``)."""

    state: FileState
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    point_count: int
    gone_nodes: list[tuple[str, str]] | None = None
    """See ``_Prepared.gone_nodes``: None to replace the file's subgraph whole."""

    @classmethod
    def of(cls, prepared: _Prepared) -> FileSubgraph:
        """The subgraph of a prepared file."""
        return cls(prepared.state, prepared.nodes, prepared.edges, len(prepared.points), prepared.gone_nodes)


def write_subgraphs(ctx: IndexContext, prepared: Sequence[_Prepared | FileSubgraph]) -> None:
    """Stage 3 of a write: the files' subgraphs written to the graph (their manifest rows are
    committed and in flight: ``commit_manifest``), over what the graph holds of them or replacing
    it whole (``_Prepared.replace_whole``). Touches no other store, so that it can run in a thread
    (``pipelines.index_graph_writer``); the caller settles the files afterwards."""
    fault_point("index:before_graph")
    whole = [p for p in prepared if getattr(p, "gone_nodes", None) is None]
    over = [p for p in prepared if getattr(p, "gone_nodes", None) is not None]
    for files, gone in ((whole, None), (over, [node for p in over for node in p.gone_nodes])):  # type: ignore[union-attr]
        if files:
            ctx.graph.replace_files(
                [p.state.path for p in files], [n for p in files for n in p.nodes], [e for p in files for e in p.edges],
                gone=gone,  # type: ignore[arg-type]
            )


def write_graph_and_manifest(ctx: IndexContext, prepared: list[_Prepared], previous_ids: dict[str, list[str]]) -> None:
    """Stages 2 and 3 of a write, one after the other: the manifest rows, the subgraphs, then the
    files settled."""
    commit_manifest(ctx, prepared, previous_ids)
    write_subgraphs(ctx, prepared)
    ctx.manifest.settle_in_flight(p.state.path for p in prepared)


def delete_files(ctx: IndexContext, paths: Sequence[str]) -> None:
    """Remove files from every store (vectors, manifest, graph): the files are in flight until
    their subgraphs are gone, so an interrupted deletion is finished, or the file redone, next run."""
    if not paths:
        return
    commit_deletion(ctx, paths)
    delete_subgraphs(ctx, paths)
    ctx.manifest.settle_in_flight(paths)


def delete_subgraphs(ctx: IndexContext, paths: Sequence[str]) -> None:
    """The graph half of a deletion (``commit_deletion``): the files' subgraphs removed. Touches
    no other store, so that it can run in the run's graph writer (``pipelines.index_graph_writer``),
    after the subgraphs queued before it; the caller settles the files afterwards."""
    ctx.graph.delete_files(list(paths))


def commit_deletion(ctx: IndexContext, paths: Sequence[str]) -> dict[str, list[str]]:
    """Remove files from the vectors and the manifest, their node ids marked dirty and what the
    next resolution must cover recorded; the files stay in flight until their subgraphs are
    removed (``delete_subgraphs``, ``Manifest.settle_in_flight``), so that the resolution can be
    planned from the manifest while the graph still writes. Returns the symbol ids removed, per
    path (``Manifest.symbol_ids_of``)."""
    if not paths:
        return {}
    ids = ctx.manifest.symbol_ids_of(paths)
    gone = {path: state.language for path in paths if (state := ctx.manifest.file(path)) is not None}
    previous_refs = ctx.manifest.refs_of(gone, calls=False)
    symbols = [s for path in gone for s in ctx.manifest.find_symbols_in(path)]
    names = {s.name for s in symbols}
    ctx.manifest.begin_writes({path: [] for path in paths})
    ctx.vectors.delete(CODE_COLLECTION, [i for group in ids.values() for i in group])
    fault_point("index:deleting")
    ctx.vectors.flush(CODE_COLLECTION)  # no point of a file the manifest forgets outlives a crash
    with ctx.manifest.transaction() as conn:
        ctx.manifest.remove_files(conn, paths)
        ctx.manifest.hold_in_flight(conn, paths)
        ctx.manifest.mark_dirty(conn, file_node_ids(ids))
        # its names' callers and its importers are resolved again (pipelines.resolution_scope)
        ctx.manifest.note_changed_paths(conn, gone, existed=True)
        ctx.manifest.note_changed_names(conn, name_tokens(names), everything=types_moved(conn, symbols, names) or any(
            hierarchy_changed(refs, {}) for refs in previous_refs.values()))
    return ids


@dataclass(frozen=True)
class EdgeChanges:
    """What a cross-file resolution changed in the graph."""

    added: int = 0
    removed: int = 0
    scope: EdgeScope | None = EdgeScope()
    """The edges it can have changed; None when it resolved the whole repository."""


@dataclass
class EdgePlan:
    """A cross-file resolution computed from the manifest alone, to apply to the graph
    (``apply_edge_plan``): the edges to add (sorted, with their properties in ``wanted``) and to
    remove, and what the graph's Module nodes need."""

    touched_ids: set[str]
    wanted: dict[Edge, dict[str, Any]]
    to_add: list[Edge]
    to_remove: list[Edge]
    destroyed: set[Edge]
    still_in_graph: set[Edge]
    external_modules: dict[str, tuple[str, str]]
    whole: bool
    """True when it resolved the whole repository."""
    in_scope: set[str]
    rewritten: set[str]
    """The files written over that it resolved (``Manifest.mark_rewritten``)."""


def resolve_edges(ctx: IndexContext, touched_ids: set[str], rewritten: set[str] | None = None) -> EdgeChanges:
    """Re-resolve cross-file edges and apply the difference to the graph (``plan_edges``, then
    ``apply_edge_plan``).

    Args:
        touched_ids: Ids of nodes whose subgraph was replaced or deleted in this run: their
            edges were removed from the graph with them, so they are re-added when still valid.
        rewritten: Files whose subgraph was written over (their kept nodes kept their edges).
    """
    return apply_edge_plan(ctx, plan_edges(ctx, touched_ids, rewritten))


def plan_edges(ctx: IndexContext, touched_ids: set[str], rewritten: set[str] | None = None) -> EdgePlan:
    """The cross-file edges to add to and remove from the graph, read and computed from the
    manifest only (no graph call: a run computes it while the graph still loads or writes).

    Only the files a change can affect are resolved again (``pipelines.resolution_scope``), from
    the symbols their lookups can reach and the recorded edges of their nodes; the whole
    repository, from every symbol and edge, when the change can affect any file.
    """
    rewritten = rewritten or set()
    unsettled = ctx.manifest.unsettled_edges()  # an interrupted resolution's: in the graph or not
    only = None if unsettled else affected_paths(ctx.manifest, touched_ids, rewritten)
    refs = ctx.manifest.all_refs(calls_of=())  # every file's imports and bases; the calls a file at a time
    if only is None and ctx.manifest.get_meta(REF_NAMES_COMPLETE) != "1":
        ctx.manifest.fill_ref_names(
            {path: referenced_names({**refs[path][1], "calls": calls}) for path, calls in ctx.manifest.calls_by_file()})
    in_scope: set[str] = set()
    if only is not None:
        symbols = reachable_symbols(ctx.manifest, only, refs)
        resolution = resolve(symbols, refs, only, calls=ctx.manifest.calls_by_file)
        in_scope = scope_ids(only, symbols)
        current = ctx.manifest.edges_touching(in_scope | touched_ids, touched_ids)
        if hierarchy_moved(resolution.edges, current, in_scope):
            # a class's resolved base changed (a base name became ambiguous, or found another class):
            # members are looked up through the hierarchy, by files that need not mention the name
            only = None
    if only is None:
        symbols = ctx.manifest.all_symbols()
        current = ctx.manifest.resolved_edges()
        resolution = resolve(symbols, refs, None, calls=ctx.manifest.calls_by_file)
    restating = _rewritten_nodes(ctx, touched_ids, rewritten, only, symbols)
    del refs, symbols
    wanted = resolution.edges
    destroyed = {e for e in current if e[0] in touched_ids or e[2] in touched_ids}
    if only is not None:  # the edges into rewritten files from files out of scope: back as they were
        kept = kept_edges(destroyed, in_scope, touched_ids, existing_nodes(ctx.manifest, {e[2] for e in destroyed if e[0] not in in_scope}))
        wanted.update(ctx.manifest.resolved_edge_properties(kept))
    still_in_graph = current  # (the set itself, less what is gone: a copy is ~0.2 GB on the Linux kernel)
    still_in_graph -= destroyed
    still_in_graph -= unsettled
    # an edge a rewritten file's kept node still has: written again where its properties changed
    # (a call's line moved), in the graph and in the record
    restated = ctx.manifest.resolved_edge_properties(e for e in wanted if e[0] in restating and e in still_in_graph)
    to_add = sorted(e for e in wanted if e not in still_in_graph or (e in restated and restated[e] != wanted[e]))
    if only is None:
        to_remove = sorted(e for e in itertools.chain(still_in_graph, unsettled) if e not in wanted)
    else:  # the edges of files out of scope stay as they are (or are put back: kept_edges)
        to_remove = sorted(e for e in still_in_graph if e[0] in in_scope and e not in wanted)
    return EdgePlan(touched_ids, wanted, to_add, to_remove, destroyed, still_in_graph, resolution.external_modules,
                    only is None, in_scope, rewritten)


def _rewritten_nodes(
    ctx: IndexContext, touched_ids: set[str], rewritten: set[str], only: set[str] | None, symbols: list[SymbolRow],
) -> set[str]:
    """The nodes of the files rewritten since the last resolution (written over, or replaced
    whole: their file node is among ``touched_ids``): the sources of the edges whose properties
    the rewrite can have changed."""
    files = rewritten_files(only if only is not None else ctx.manifest.paths(), touched_ids, rewritten)
    return {file_id(path) for path in files} | {s.id for s in symbols if s.path in files}


def apply_edge_plan(ctx: IndexContext, plan: EdgePlan) -> EdgeChanges:
    """Apply a resolution (``plan_edges``) to the graph, then record it in the manifest: the edges
    about to change are recorded as unsettled first, so an interruption leaves them known."""
    touched_ids, wanted, to_add, to_remove = plan.touched_ids, plan.wanted, plan.to_add, plan.to_remove
    destroyed, still_in_graph, external_modules = plan.destroyed, plan.still_in_graph, plan.external_modules
    ctx.manifest.begin_edge_changes(itertools.chain(to_add, to_remove))
    if external_modules:
        ctx.graph.merge_nodes(
            [
                GraphNode(id=mid, label="Module", properties={"name": name, "language": lang, "file_path": ""})
                for mid, (name, lang) in external_modules.items()
            ]
        )
    created_at = _now()
    for chunk in chunked(to_remove, EDGE_WRITE_CHUNK):
        ctx.graph.remove_edges(
            [GraphEdge(source_id=s, target_id=d, type=t, properties={}) for s, t, d in chunk]  # type: ignore[arg-type]
        )
    for chunk in chunked(to_add, EDGE_WRITE_CHUNK):
        ctx.graph.add_edges(
            [
                GraphEdge(source_id=s, target_id=d, type=t, properties={**wanted[(s, t, d)], "created_at": created_at})  # type: ignore[arg-type]
                for s, t, d in chunk
            ]
        )
    # Module nodes stand for external imports, shared by every file that makes them: the graph
    # holds exactly those some file still imports (a deleted file, or one that stopped importing a
    # module, leaves no orphan, as a clean index of the same tree would have none).
    removed = set(to_remove)
    gone = removed | destroyed
    imported = {d for _, t, d in to_add if t == "IMPORTS"}
    if plan.whole:
        imported |= {d for s, t, d in still_in_graph if t == "IMPORTS" and (s, t, d) not in removed}
        candidates = ctx.graph.node_ids("Module")
    else:  # only a module this run took an import of can have lost its last importer
        candidates = {d for _, t, d in gone if t == "IMPORTS"} & ctx.graph.node_ids("Module")
        imported |= {e[2] for e in ctx.manifest.import_targets(candidates - imported) if e not in gone}
    unreferenced = candidates - imported - external_modules.keys()
    ctx.graph.delete_nodes("Module", sorted(unreferenced))
    fault_point("index:resolving")
    ctx.manifest.replace_resolved_edges(
        ((s, t, d, wanted[(s, t, d)]) for s, t, d in to_add), [*destroyed, *to_remove], touched_ids, plan.rewritten
    )
    scope = None if plan.whole else EdgeScope(frozenset(plan.in_scope | touched_ids), frozenset(touched_ids))
    return EdgeChanges(len(to_add), len(to_remove), scope)


def plan_pending(ctx: IndexContext) -> EdgePlan | None:
    """The resolution of every dirty node id and file written over (this run's, or an interrupted
    run's): None when there is none."""
    touched, rewritten = ctx.manifest.dirty(), ctx.manifest.rewritten()
    if not touched and not rewritten:
        return None
    fault_point("index:before_resolve")
    return plan_edges(ctx, touched, rewritten)


def resolve_pending(ctx: IndexContext) -> EdgeChanges:
    """Resolve cross-file edges for every dirty node id and file written over (this run's, or an
    interrupted run's)."""
    plan = plan_pending(ctx)
    return EdgeChanges() if plan is None else apply_edge_plan(ctx, plan)

"""Preparing changed files for the stores: read, hash and parse each one and build its points,
nodes, edges and manifest rows (no store is touched), in worker processes when there are many."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from pipelines.design.digest import design_digest
from pipelines.discovery import SourceFile
from pipelines.parsing import ParseTimeout, parse_source
from pipelines.qualified_names import clear_module_cache
from pipelines.records import build_symbol_records, file_id, graph_label
from pipelines.resolution_scope import referenced_names
from resources.graph.store import GraphEdge, GraphNode
from resources.manifest import FileState, Manifest, SkippedState, SymbolRow
from resources.manifest_store import pack
from resources.schemas.code import CallSite, ParsedSymbol
from resources.vectors import sparse
from resources.settings import Settings
from resources.vectors.points import stored_payload
from resources.vectors.store import VectorPoint

BATCH_FILES = 64
PARALLEL_THRESHOLD = 200  # below this many changed files, worker start-up costs more than it saves
MAX_WORKERS = 4
MAX_IN_FLIGHT = 4 * BATCH_FILES
FILES_PER_POOL = 2_000
"""Files one pool of parse workers prepares before fresh workers take over. py-tree-sitter (0.26)
never frees the bytes a read callback returns, which the parse budget needs (a progress callback
is ignored when parsing a bytestring): each worker kept the source of every file it parsed, ~0.6 GB
apiece by the end of the Linux kernel. A fresh pool costs ~0.4 s of imports a worker.
(``max_tasks_per_child`` would do it, but deadlocks on the Pythons supported here: CPython gh-115634.)"""


MIN_WORKER_MEMORY_MB = 128
"""The least a parse worker is held to, whatever the budget (a worker with its parsers loaded uses
~45 MB; a 1 MB source, ``max_file_bytes``' default, takes ~100 MB to parse)."""
PARSE_BYTES_PER_SOURCE_BYTE = 200
"""Memory a parse may take per byte of source, at the worst measured (a 3 MB one-line list: 600 MB
inside tree-sitter): a file that may need half its worker's limit is parsed in a worker even by a
run that parses in-process, so that a file over the budget cannot take the indexing process down."""


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What parsing one file may take: ``timeout_s`` seconds, and ``memory_mb`` of its parse
    worker's memory (None: no limit, as where no budget applies)."""

    timeout_s: float
    memory_mb: int | None = None
    budget_set: bool = False
    """Whether ``memory_mb`` comes from a budget the user set (``CODEMEM_INDEX_MEMORY_MB``) rather
    than from this machine's memory."""

    @classmethod
    def of(cls, settings: Settings) -> ParseLimits:
        """The limits ``settings`` set (``parse_timeout_s``; ``index_memory_mb``'s share per worker)."""
        return cls(settings.parse_timeout_s, worker_memory_mb(settings.index_memory_mb), settings.index_memory_mb > 0)

    @property
    def tag(self) -> str:
        """What skip records are made under: a file skipped under other limits is read again (a
        budget the user set is one of them; the default, which follows the machine, is not: one
        manifest shared by machines of other sizes keeps its records)."""
        return f"{self.timeout_s:g} {self.memory_mb}MB" if self.budget_set else f"{self.timeout_s:g}"

    def isolate(self, size: int) -> bool:
        """Whether a file of ``size`` bytes is parsed in a worker held to the limit, when the run
        parses in-process."""
        return self.memory_mb is not None and size * PARSE_BYTES_PER_SOURCE_BYTE >= (self.memory_mb << 20) // 2


def parse_workers() -> int:
    """How many processes parse a large change."""
    return min(os.cpu_count() or 1, MAX_WORKERS)


def machine_memory_mb() -> int:
    """The memory this process may use, in MB: the machine's, or its container's (cgroup v2
    ``memory.max``, v1 ``memory.limit_in_bytes``) when lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf here (Windows): a laptop's memory
        total = 8 << 30
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            total = min(total, int(limit.read_text().strip()))
        except (OSError, ValueError):  # absent, or "max"
            continue
    return total >> 20


def worker_memory_mb(budget_mb: int) -> int:
    """A parse worker's share of an index run's memory budget (0: half of ``machine_memory_mb``):
    the budget over the workers plus two shares (the indexing process, the graph server), at least
    ``MIN_WORKER_MEMORY_MB``."""
    budget = budget_mb if budget_mb > 0 else machine_memory_mb() // 2
    return max(MIN_WORKER_MEMORY_MB, budget // (parse_workers() + 2))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class _Prepared:
    state: FileState
    refs: dict[str, Any]
    symbols: list[SymbolRow]
    points: list[VectorPoint]
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    ref_names: set[str] = field(default_factory=set)
    """The identifiers its references mention (``pipelines.resolution_scope``)."""
    replace_whole: bool = True
    """Whether its subgraph must replace the graph's whole (the graph may hold it otherwise than
    its manifest rows say) rather than be written over it (``pipelines.index_writes.write_vectors``)."""
    gone_nodes: list[tuple[str, str]] | None = None
    """Written over: the nodes of its last write that it lacks, (id, label) (``commit_manifest``)."""


def prepare_file(source: SourceFile, data: bytes, content_hash: str, timeout_s: float, doc_globs: tuple[str, ...] = ()) -> _Prepared:
    """Parse one file and build everything the stores need for it (no store is touched), with the
    digest of what the design derivation reads of it (ADR citations by the names ``doc_globs``
    can match: ``pipelines.design.digest``).

    Raises:
        ParseTimeout: when the parser exceeds the per-file time limit.
    """
    indexed_at = _now()
    parsed = parse_source(source.path, data, source.language, timeout_s=timeout_s)  # type: ignore[arg-type]
    records = build_symbol_records(parsed, source.project_root)
    fid = file_id(source.path)
    local_to_id = {}
    # a name's first definition; a C/C++ declaration only where the file has no definition of it
    # (calls in a function's body belong to the definition, not to a prototype above it)
    for record in sorted(records, key=lambda r: r.symbol.is_declaration):
        local_to_id.setdefault(record.symbol.qualified_name, record.id)

    points = []
    nodes = [
        GraphNode(
            id=fid,
            label="File",
            properties={
                "path": source.path, "language": source.language, "content_hash": content_hash,
                "indexed_at": indexed_at, "file_path": source.path,
            },
        )
    ]
    edges = []
    symbols = []
    types = []
    for record in records:
        symbol = record.symbol
        points.append(VectorPoint(  # its payload packed here, in the parse worker, not by the writer's thread
            id=record.id, payload=stored_payload(record.payload), sparse=sparse.document_vector(record.sparse_text),
        ))
        label = graph_label(symbol.kind)
        props = {
            "memory_id": record.id, "name": symbol.name, "qualified_name": record.qualified_name,
            "path_qualified_name": record.path_qualified_name, "file_path": source.path, "language": source.language, "kind": symbol.kind,
            "start_line": symbol.start_line, "end_line": symbol.end_line, "signature": symbol.signature,
        }
        nodes.append(GraphNode(id=record.id, label=label, properties=props))  # type: ignore[arg-type]
        container_id = local_to_id.get(symbol.container or "") if symbol.container else None
        edges.append(GraphEdge(source_id=container_id or fid, target_id=record.id, type="CONTAINS", properties={}))
        symbols.append(
            SymbolRow(
                id=record.id, path=source.path, name=symbol.name, local_name=record.local_name,
                qualified_name=record.qualified_name, kind=symbol.kind, container=symbol.container,
                language=source.language, embed_text=record.embed_text, has_dense=False,
                path_qualified_name=record.path_qualified_name, embed_packed=pack(record.embed_text),
            )
        )
        if symbol.extends or symbol.implements or symbol.fields:
            types.append(_type_ref(record.id, symbol))
    refs: dict[str, Any] = {
        "imports": [imp.model_dump() for imp in parsed.imports],
        "calls": [_call_ref(call, local_to_id) for call in parsed.calls],
        "types": types,
    }
    declarations = [record.id for record in records if record.symbol.is_declaration]
    if declarations:  # C/C++ prototypes and in-class declarations (pipelines.c_family)
        refs["declarations"] = declarations
    text = data.decode("utf-8", errors="replace")
    state = FileState(
        path=source.path, language=source.language, content_hash=content_hash, size=source.size,
        mtime_ns=source.mtime_ns, indexed_at=indexed_at, symbol_count=len(records),
        error_count=parsed.error_count,
        design_digest=design_digest([r.payload for r in records], refs["imports"], text, doc_globs),
    )
    return _Prepared(state, refs, symbols, points, nodes, edges, referenced_names(refs))


def _type_ref(symbol_id: str, symbol: ParsedSymbol) -> dict[str, Any]:
    """A type's bases (and, where the parser states them, its fields) as resolution reads them."""
    ref: dict[str, Any] = {"id": symbol_id, "extends": symbol.extends, "implements": symbol.implements}
    if symbol.fields:
        ref["fields"] = symbol.fields
    return ref


def _call_ref(call: CallSite, local_to_id: dict[str, str]) -> dict[str, Any]:
    """A call as resolution reads it (``receiver_type`` only where the parser set one)."""
    ref: dict[str, Any] = {
        "caller_id": local_to_id.get(call.caller) if call.caller else None,
        "callee": call.callee,
        "callee_name": call.callee_name,
        "line": call.line,
    }
    if call.receiver_type is not None:
        ref["receiver_type"] = call.receiver_type
    return ref


RACY_WINDOW_NS = 2_000_000_000
"""How much older than its manifest row a file's mtime must be for its stats to vouch for its
content (``stats_vouch``): more than a clock tick, the filesystem's mtime granularity, and the
whole seconds ``indexed_at`` is truncated to."""


def stats_vouch(state: FileState | None, source: SourceFile) -> bool:
    """Whether a file's stats vouch for the content its manifest row recorded, so it need not be
    read and hashed again: the same size and mtime as then, and that mtime older than the row by
    ``RACY_WINDOW_NS``. (A write in the same clock tick as the read that hashed the file would leave
    its size and mtime as they were: git's "racy" case, read and hashed again here.) A tool that
    writes a file and puts its old mtime back is not seen, as git does not see it: ``codemem index
    --repair`` reads every file."""
    if state is None or not state.content_hash or state.size != source.size or state.mtime_ns != source.mtime_ns:
        return False  # (no hash: forgotten, for the files to be parsed again under new extraction rules)
    try:
        checked = datetime.fromisoformat(state.indexed_at)
    except (TypeError, ValueError):  # an older row's form, or none: read the file
        return False
    if checked.tzinfo is None:
        checked = checked.replace(tzinfo=UTC)
    return source.mtime_ns + RACY_WINDOW_NS < int(checked.timestamp()) * 1_000_000_000


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


SKIP_TIMEOUT_KEY = "skipped_under_parse_timeout_s"
"""Manifest meta key: the parse limits the skip records were made under (``ParseLimits.tag``:
other limits may parse what timed out or ran out of memory, so records made under one are not
trusted under another)."""


def skip_records(manifest: Manifest, limits: ParseLimits) -> dict[str, SkippedState]:
    """The files earlier runs could not index, by path: none when they ran under other parse limits."""
    if manifest.get_meta(SKIP_TIMEOUT_KEY) != limits.tag:
        return {}
    return manifest.skipped_files()


def record_skipped(manifest: Manifest, states: Sequence[SkippedState], limits: ParseLimits, gone: Iterable[str] = ()) -> None:
    """Record files this run could not index (``limits``: the run's parse limits), and drop the
    records of files ``gone`` from the tree, in one transaction."""
    gone = list(gone)
    if not states and not gone:
        return
    with manifest.transaction() as conn:
        manifest.forget_skipped(conn, gone)
        if states and manifest.read_meta(conn, SKIP_TIMEOUT_KEY) != limits.tag:
            manifest.forget_skipped(conn)
            manifest.write_meta(conn, SKIP_TIMEOUT_KEY, limits.tag)
        manifest.remember_skipped(conn, states)


def still_skipped(
    records: dict[str, SkippedState], source: SourceFile, indexed: FileState | None, content_hash: str | None, redo: bool,
) -> str | None:
    """Why ``source`` is not indexed, when earlier runs skipped it at the content it has now
    (``content_hash``, or its size and mtime when None) for good: binary, or over the time limit in
    two runs in a row; None when it must be read (again). A file the manifest holds (``indexed``)
    is never taken for skipped: a run stopped after skipping it left it to be deleted."""
    record = records.get(source.path)
    if redo or indexed is not None or record is None or not record.settled:
        return None
    return record.reason if record.matches(source.size, source.mtime_ns, content_hash) else None


Outcome = tuple[str, Any]  # ("ok", _Prepared) | ("skip", Skip) | ("fail", message) | ("vanished", None)


class Skip(NamedTuple):
    """Why a file read for indexing was not indexed, with the content that was examined: its hash,
    and the size and mtime the file had just before it was read (a later change shows as other stats)."""

    reason: str
    content_hash: str
    size: int
    mtime_ns: int
    lasting: bool
    """True when the content alone decides (binary); False when another run may succeed (a parse
    over the time limit on a busy machine)."""

    def state(self, path: str) -> SkippedState:
        """The manifest's record of it."""
        return SkippedState(path, self.content_hash, self.size, self.mtime_ns, self.reason, lasting=self.lasting)


class _Read(NamedTuple):
    stat: os.stat_result
    data: bytes


def _read(source: SourceFile) -> _Read | Outcome:
    """A file's stats (taken before the read: a change meanwhile shows as other stats next time)
    and bytes, or the outcome of a file that cannot be read."""
    try:
        stat = source.absolute_path.stat()
        return _Read(stat, source.absolute_path.read_bytes())
    except FileNotFoundError:
        return ("vanished", None)
    except OSError as exc:
        return ("fail", f"cannot read: {exc.strerror or exc}")
    except MemoryError:
        return ("fail", f"cannot read it within {_held(_held_to)}{_RAISE_BUDGET}")


def _prepare_safely(source: SourceFile, timeout_s: float, doc_globs: tuple[str, ...] = ()) -> Outcome:
    """Read, re-hash and prepare one file; never raises (runs in worker processes too)."""
    read = _read(source)
    if not isinstance(read, _Read):
        return read
    stat, data = read
    if b"\0" in data[:8192]:
        return ("skip", Skip("binary file", _sha256(data), stat.st_size, stat.st_mtime_ns, lasting=True))
    try:
        # hash what is parsed: the file may have changed since the first pass
        return ("ok", prepare_file(source, data, _sha256(data), timeout_s, doc_globs))
    except ParseTimeout:
        reason = f"parser exceeded the {timeout_s:g}s time limit"
        return ("skip", Skip(reason, _sha256(data), stat.st_size, stat.st_mtime_ns, lasting=False))
    except MemoryError:  # a parse worker at its limit (another process's memory error: the same words)
        reason = f"parsing it needs more than {_held(_held_to)}{_RAISE_BUDGET}"
        return ("skip", Skip(reason, _sha256(data), stat.st_size, stat.st_mtime_ns, lasting=False))
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the run
        return ("fail", f"{type(exc).__name__}: {exc}")


_RAISE_BUDGET = " (CODEMEM_INDEX_MEMORY_MB sets the run's budget)"


def _held(memory_mb: int | None) -> str:
    return f"the {memory_mb} MB a parse worker may use" if memory_mb is not None else "the memory available"


_held_to: int | None = None
"""In a parse worker: the MB its data segment is held to (``_start_worker``)."""


def _start_worker(parent_pid: int, memory_mb: int | None) -> None:
    """Parse worker initializer: leave with the indexing process; hold the worker's memory (its
    data segment: heap and private mappings, ``RLIMIT_DATA``) to ``memory_mb``, so that a file
    that needs more fails alone (a ``MemoryError``, or the worker ends: ``_Isolated``) instead of
    taking the machine's memory."""
    global _held_to
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the run in the indexing process, not a parse
    _exit_with_parent(parent_pid)
    if memory_mb is None:
        return
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a parser's abort() at the limit leaves no core file
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        _held_to = memory_mb
    except (ImportError, ValueError, OSError):  # no such limit here, or a lower hard limit already
        return


def _died(source: SourceFile, limits: ParseLimits) -> Outcome:
    """The outcome of a file whose parse worker ended while parsing it alone: skipped, with the
    content it was given (read again here)."""
    read = _read(source)
    if not isinstance(read, _Read):
        return read
    stat, data = read
    held = f"its {limits.memory_mb} MB limit{_RAISE_BUDGET}" if limits.memory_mb is not None else "memory"
    reason = f"the parse worker died parsing it: out of {held}, or a crash in the parser"
    return ("skip", Skip(reason, _sha256(data), stat.st_size, stat.st_mtime_ns, lasting=False))


class _Isolated:
    """Files parsed one at a time in a worker of their own, held to the memory limit: a file that
    ends its worker is skipped (a fresh worker takes the next)."""

    def __init__(self, limits: ParseLimits, doc_globs: tuple[str, ...]) -> None:
        self._limits, self._doc_globs = limits, doc_globs
        self._pool: ProcessPoolExecutor | None = None
        self._given = 0  # bytes of source the worker was given (it keeps them: ``FILES_PER_POOL``)

    def prepare(self, source: SourceFile) -> Outcome:
        for _ in range(2):  # a worker found dead when the file is handed over is not the file's doing
            if self._pool is None or self._given >= _recycle_bytes(self._limits):
                self.close()
                self._pool = _pool(1, self._limits)
            try:
                future = self._pool.submit(_prepare_safely, source, self._limits.timeout_s, self._doc_globs)
            except BrokenProcessPool:
                self.close()
                continue
            self._given += source.size
            try:
                return future.result()
            except (BrokenProcessPool, MemoryError):  # it ended the worker, or its outcome was too large to send back
                self.close()
                return _died(source, self._limits)
            except Exception as exc:  # noqa: BLE001 - one file's failure, whatever the worker raised
                return ("fail", f"{type(exc).__name__}: {exc}")
        return _died(source, self._limits)

    def close(self, *, wait: bool = False) -> None:
        if self._pool is not None:
            _shut(self._pool, wait=wait)
            self._pool = None
        self._given = 0


def _shut(pool: ProcessPoolExecutor, *, wait: bool) -> None:
    """Shut a pool down, its queued work cancelled. A broken pool's workers are killed first: what
    they had is lost with the pool, and the pool's own clean-up waits on each of them while it
    holds the lock ``shutdown`` takes, so one that outlived the break would hold the run forever."""
    if getattr(pool, "_broken", False):  # CPython's mark of a pool a worker ended abruptly
        for process in (getattr(pool, "_processes", None) or {}).copy().values():  # copied whole, under the GIL
            try:
                process.kill()
            except (OSError, ValueError):  # already reaped, or closed
                continue
    pool.shutdown(wait=wait, cancel_futures=True)


def _recycle_bytes(limits: ParseLimits) -> float:
    """Bytes of source after which a worker is replaced: py-tree-sitter keeps what it parsed, so
    a worker nears its limit after half its share of sources."""
    return (limits.memory_mb << 19) if limits.memory_mb is not None else float("inf")


def _pool(workers: int, limits: ParseLimits) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("forkserver"),
        initializer=_start_worker, initargs=(os.getpid(), limits.memory_mb),
    )


def _exit_with_parent(parent_pid: int) -> None:
    """Worker initializer: leave when the indexing process is gone (a SIGKILLed parent cannot shut
    the pool down, and its workers would otherwise wait on their queue forever)."""

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                continue

    threading.Thread(target=watch, name="codemem-parent-watch", daemon=True).start()


def _prepare_all(
    changed: Sequence[tuple[SourceFile, str]], limits: ParseLimits, doc_globs: tuple[str, ...] = (),
) -> Iterator[tuple[SourceFile, Outcome]]:
    """Prepare changed files, in worker processes when there are many (results in order);
    ``doc_globs``: the project's, for the files' design digests.

    Parsing, extraction and sparse vectors are CPU-bound Python; the store writes stay in this
    process, so the workers prepare the next files while the current batch is written. Workers are
    held to ``limits.memory_mb``: when one ends (a file over it, a crash in a parser), the files
    it had not finished are prepared again one at a time, and the one that ends a worker alone is
    skipped with the reason; the run goes on.
    """
    clear_module_cache()  # go.mod / Cargo.toml may have changed since the last run (workers start empty)
    workers = parse_workers()
    isolated = _Isolated(limits, doc_globs)
    try:
        if len(changed) < PARALLEL_THRESHOLD or workers < 2:
            for source, _ in changed:
                if limits.isolate(source.size):
                    yield source, isolated.prepare(source)
                else:
                    yield source, _prepare_safely(source, limits.timeout_s, doc_globs)
            return
        yield from _prepare_in_pools(changed, limits, doc_globs, workers, isolated)
    finally:
        isolated.close(wait=True)


def _prepare_in_pools(
    changed: Sequence[tuple[SourceFile, str]], limits: ParseLimits, doc_globs: tuple[str, ...], workers: int,
    isolated: _Isolated,
) -> Iterator[tuple[SourceFile, Outcome]]:
    pool, submitted = _pool(workers, limits), 0
    in_flight: deque[tuple[SourceFile, Future[Outcome]]] = deque()

    def after_a_break() -> Iterator[tuple[SourceFile, Outcome]]:
        """A worker ended: what is finished stands, the rest is prepared alone; then a fresh pool."""
        nonlocal pool, submitted, given
        _shut(pool, wait=False)
        while in_flight:
            source, future = in_flight.popleft()
            finished = future.done() and not future.cancelled() and future.exception() is None
            yield source, future.result() if finished else isolated.prepare(source)
        pool, submitted, given = _pool(workers, limits), 0, 0

    def oldest() -> Iterator[tuple[SourceFile, Outcome]]:
        source, future = in_flight[0]
        try:
            outcome = future.result()
        except BrokenProcessPool:
            yield from after_a_break()
            return
        except Exception:  # noqa: BLE001 - its outcome could not come back (a MemoryError sending it): alone
            outcome = isolated.prepare(source)
        in_flight.popleft()
        yield source, outcome

    given = 0  # bytes of source the current pool's workers were given
    try:
        for source, _ in changed:
            if submitted == FILES_PER_POOL or given >= _recycle_bytes(limits) * workers:
                pool.shutdown(wait=False)  # its workers prepare what they were given, then exit
                pool, submitted, given = _pool(workers, limits), 0, 0
            try:
                future = pool.submit(_prepare_safely, source, limits.timeout_s, doc_globs)
            except BrokenProcessPool:
                yield from after_a_break()
                future = pool.submit(_prepare_safely, source, limits.timeout_s, doc_globs)
            in_flight.append((source, future))
            submitted += 1
            given += source.size
            if len(in_flight) >= MAX_IN_FLIGHT:
                yield from oldest()
        while in_flight:
            yield from oldest()
    finally:
        for _, future in in_flight:  # stopped early: what an earlier pool was given is not prepared either
            future.cancel()
        _shut(pool, wait=True)

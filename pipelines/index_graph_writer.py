"""The graph half of an index run's writes, applied in order by a thread while the run goes on.

A run over a large index starts the embedded graph in the background, and loading it takes long
(the Linux kernel's graph of 1.1M nodes and 3.7M edges: ~12 s). Writing each batch's subgraph at
once made the run wait for that load at its first batch, with the rest of its work (the other
batches' points and manifest rows, the cross-file resolution, which reads the manifest alone)
queued behind it. ``GraphWriter`` takes the subgraphs instead and writes them in a thread, in the
order given, as soon as the graph is there; the run goes on meanwhile and waits for them
(``drain``) before anything else of its own touches the graph.

Crash safety is the manifest's: a file's rows are committed with the file kept in flight
(``pipelines.index_writes.commit_manifest``), and it leaves flight only once its subgraph is
written (``settle``), so a run interrupted with subgraphs still queued has the next run redo
those files. A graph that is already started (or is not started lazily) is written in the
caller's thread, one batch after another, as before.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from pipelines.index_context import IndexContext
from pipelines.index_prepare import _Prepared
from pipelines.index_writes import FileSubgraph, delete_subgraphs, write_subgraphs

MAX_QUEUED_ITEMS = 100_000
"""Nodes and edges waiting for the graph at most (~1 KB each, their files' other data released:
``FileSubgraph``); a batch beyond it waits, so memory stays bounded when the graph writes more
slowly than the files are parsed. A 1% change of the Linux kernel (552 files) queues ~23,000."""


@dataclass
class WrittenBatch:
    """A batch whose subgraphs the writer handled (written, or for ``deleted`` files removed):
    ``error`` says why it failed, if it did."""

    files: list[FileSubgraph] | list[_Prepared]
    points: int
    error: str | None = None
    deleted: list[str] = field(default_factory=list)


class GraphWriter:
    """Writes batches' subgraphs to ``ctx.graph`` in the order submitted.

    Args:
        ctx: The run's stores.
        background: Write in a thread (for a graph still starting); else in ``submit`` itself.
        max_queued_items: Nodes and edges queued at most before ``submit`` waits (default
            ``MAX_QUEUED_ITEMS``).
    """

    def __init__(self, ctx: IndexContext, *, background: bool, max_queued_items: int | None = None) -> None:
        self._ctx = ctx
        self._background = background
        self._max_items = MAX_QUEUED_ITEMS if max_queued_items is None else max_queued_items
        self._queue: deque[WrittenBatch] = deque()
        self._queued_items = 0
        self._busy = False
        self._done: list[WrittenBatch] = []
        self._failed = False
        self._fault: BaseException | None = None
        self._closed = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, files: list[FileSubgraph], points: int) -> None:
        """Queue a batch whose manifest rows are committed (its files in flight)."""
        self._submit(WrittenBatch(files, points))

    def submit_deletion(self, paths: list[str]) -> None:
        """Queue the removal of deleted files' subgraphs, after the batches queued before it (the
        files are gone from the manifest and in flight: ``index_writes.commit_deletion``)."""
        self._submit(WrittenBatch([], 0, deleted=list(paths)))

    def _submit(self, batch: WrittenBatch) -> None:
        if not self._background:
            self._write(batch)
            self._failed |= batch.error is not None
            self._done.append(batch)
            return
        items = _items(batch)
        with self._changed:
            self._raise_fault()
            while (self._queue or self._busy) and self._queued_items + items > self._max_items and self._fault is None:
                self._changed.wait()
            self._raise_fault()
            self._queue.append(batch)
            self._queued_items += items
            self._changed.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="codemem-graph-writer", daemon=True)
            self._thread.start()

    @property
    def failed(self) -> bool:
        """True once a batch's graph write failed: the graph lacks some files the manifest holds
        (in flight), so the run must not apply a resolution that rests on them."""
        with self._changed:
            return self._failed

    def done(self) -> list[WrittenBatch]:
        """The batches handled since the last call, in order (never waits)."""
        with self._changed:
            self._raise_fault()
            done, self._done = self._done, []
        return done

    def drain(self) -> list[WrittenBatch]:
        """Wait until every queued batch is handled; the batches handled since the last call."""
        with self._changed:
            while (self._queue or self._busy) and self._fault is None:
                self._changed.wait()
        return self.done()

    def close(self) -> None:
        """Stop after the batch being written, if any; a queued batch is left unwritten (its
        files stay in flight for the next run)."""
        with self._changed:
            self._closed = True
            self._queued_items -= sum(_items(batch) for batch in self._queue)
            self._queue.clear()
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._changed.wait()
                if self._closed:
                    return
                batch = self._queue.popleft()
                self._busy = True
            fault: BaseException | None = None
            try:
                self._write(batch)
            except BaseException as exc:  # noqa: BLE001 - an injected fault: the run stops where it is
                fault = exc
            with self._changed:
                self._queued_items -= _items(batch)
                self._busy = False
                if fault is not None:
                    self._fault = fault
                    self._queued_items -= sum(_items(queued) for queued in self._queue)
                    self._queue.clear()
                else:
                    self._failed |= batch.error is not None
                    self._done.append(batch)
                self._changed.notify_all()
                if fault is not None:
                    return

    def _write(self, batch: WrittenBatch) -> None:
        """Write the subgraphs; a store failure fails the batch (reported by the run), anything
        else (an injected fault) ends the writer."""
        try:
            if batch.deleted:
                delete_subgraphs(self._ctx, batch.deleted)
            else:
                write_subgraphs(self._ctx, batch.files)
        except Exception as exc:  # noqa: BLE001 - reported per file; the run goes on
            batch.error = f"store write failed: {type(exc).__name__}: {exc}"

    def _raise_fault(self) -> None:
        if self._fault is not None:
            raise self._fault


def _items(batch: WrittenBatch) -> int:
    return sum(len(f.nodes) + len(f.edges) for f in batch.files)

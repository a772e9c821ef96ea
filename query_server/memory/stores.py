"""What every memory tool shares: the project's ledger and its scopes, the projector, the vector
store and embedder, the lookups into the code index — and the steps every tool takes with them
(find a memory in its scope, recognise a retried write, project what was written, drain the
outbox, check a path a tool reads or writes).

Every write commits to a ledger first, then projects; a projection that fails stays in the
outbox and is retried by the background sync (``MemoryService.start_sync``), so a write never
fails because Qdrant or the graph is down.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from pipelines.discovery import DiscoveryError, confine_path
from query_server.memory.live_notes import LiveNotes
from query_server.output_paths import OutputPathRefused, checked_output_path
from query_server.paging import ToolError
from resources.memory.enterprise import ScopeUnavailableError
from resources.memory.ledger import MemoryRow
from resources.memory.projection import MemoryProjector, ProjectionReport
from resources.memory.ledger_copy import LedgerCopy
from resources.memory.ledger_reader import SERVER_COPY_FILE
from resources.memory.scopes import MemoryScopes, ScopeStore, open_project_ledger
from resources.schemas.memory import SHARED_SCOPES, MemoryType
from resources.settings import Settings
from resources.vectors.store import VectorStore

log = structlog.get_logger("codemem.memory")

CodeResolver = Callable[[str], tuple[str, str, str | None] | None]
"""Finds a code entity by id, qualified name or path: (node id, graph label, display name)."""
CodeLinkChecker = Callable[[], Callable[[str], bool]]
"""Makes, for one normalization run, the test of whether a code node id (symbol or file) is still indexed."""
SymbolLookup = Callable[[list[str]], dict[str, dict[str, Any]]]
"""Indexed symbols by qualified name: {name: {symbol_hash, file_path, …}} for the names found."""
REPLAYED = "replayed a committed write"
"""Logged when a call's idempotency key finds its change already in the ledger (a retry after its
owner died between the commit and the answer): the first outcome is returned."""


def not_found(memory_id: str) -> ToolError:
    """The error for a memory id that no scope holds."""
    return ToolError(
        f"Memory not found: {memory_id} — pass an id returned by memory_add or memory_search "
        "(memory_search finds memories by meaning)"
    )


def _report(reports: Sequence[ProjectionReport]) -> dict[str, Any]:
    return {
        "projected": sum(r.projected for r in reports), "deleted": sum(r.deleted for r in reports),
        "failed": sum(r.failed for r in reports), "deferred": sum(r.deferred for r in reports),
        "requeued": sum(r.requeued for r in reports),
        "last_error": next((r.last_error for r in reports if r.last_error), None),
    }


class MemoryStores:
    """The memory stores of one project (project, local, global and enterprise scopes) and their projections."""

    def __init__(
        self,
        settings: Settings,
        *,
        vectors: VectorStore,
        graph: Any,
        embedder: Any,
        resolve_code: CodeResolver | None = None,
        lookup_symbols: SymbolLookup | None = None,
        code_links: CodeLinkChecker | None = None,
    ) -> None:
        """Open the project's memory ledger and project it into ``vectors`` and ``graph``."""
        self.settings = settings
        self.ledger = open_project_ledger(settings)
        self.hook_copy: LedgerCopy | None = None
        """Server mode: the SQLite copy of the project ledger the hooks read (None in embedded mode)."""
        try:
            self._open(settings, vectors, graph, embedder)
        except BaseException:
            self.close()  # (in server mode with embedded stores, lets another process serve the project)
            raise
        self.resolve_code = resolve_code
        self.lookup_symbols = lookup_symbols
        self.code_links = code_links

    def _open(self, settings: Settings, vectors: VectorStore, graph: Any, embedder: Any) -> None:
        """Everything after the project ledger opened."""
        self.scopes: MemoryScopes | None = None
        if self.ledger.path is None:
            self.hook_copy = LedgerCopy(self.ledger, settings.resolved_state_dir() / SERVER_COPY_FILE)
            self.hook_copy.refresh()
        self.embedder = embedder
        self.vectors = vectors
        self.projector = MemoryProjector(self.ledger, vectors, graph, embedder)
        self.wake = threading.Event()
        """Set to make the background sync drain the outbox now (a projection failed, a job finished)."""
        model = self.ledger.meta("embedding_model")
        if model is not None and model != embedder.model_id:
            log.info("embedding model changed; rebuilding memory projections", old=model, new=embedder.model_id)
            self.projector.drop_collections()
            self.ledger.enqueue_all()
        self.ledger.set_meta("embedding_model", embedder.model_id)
        self.scopes = MemoryScopes(settings, self.ledger, self.projector, vectors=vectors, graph=graph, embedder=embedder)
        self.notes = LiveNotes(settings.resolved_root(), lambda: self.ledger)
        """The project's git notes, a live store of project memories when the clone turned them on."""
        if graph is not None:
            try:  # memory node lookups by id need the label indexes (else every write scans the label)
                graph.ensure_schema()
            except Exception as exc:  # noqa: BLE001 - the graph may be down; projections retry later
                log.warning("graph schema not ensured", error=str(exc))

    def close(self) -> None:
        """Close the ledgers of every scope."""
        try:
            if getattr(self, "scopes", None) is not None:
                self.scopes.close()
        finally:
            try:
                self.ledger.close()
            finally:
                if self.hook_copy is not None:
                    self.hook_copy.close()

    def refresh_hook_copy(self) -> None:
        """Server mode: bring the hooks' copy of the project ledger up to it (what any replica
        wrote); a failure is logged, and the next write or sync tries again."""
        if self.hook_copy is not None:
            self.hook_copy.refresh()

    # -- projections ---------------------------------------------------------------------------
    def drain(self, *, retry_now: bool = False) -> dict[str, Any]:
        """Bring the shared scopes' replicas up to date, then project what every scope's outbox holds
        (one scope's failure does not hold up the others)."""
        reports: list[ProjectionReport] = []
        try:
            self.scopes.sync_shared()
        except Exception as exc:  # noqa: BLE001 - a shared ledger may be unreachable (logged); the rest goes on
            reports.append(ProjectionReport(last_error=f"shared scope: {type(exc).__name__}: {exc}"))
        if self.ledger.path is None:  # server mode: other processes write the same ledger
            try:
                self.ledger.keep_alone()
            except Exception as exc:  # noqa: BLE001 - said loudly; the writes go on (the ledger stays whole)
                log.error("this process no longer serves the project alone", error=str(exc))
            for store in self.scopes.opened():
                store.projector.refresh_generation()  # another replica may have swapped it (a normalization)
            self.refresh_hook_copy()
        for store in self.scopes.opened():
            try:
                if retry_now:
                    store.projected.retry_now()
                reports.append(store.projector.drain())
            except Exception as exc:  # noqa: BLE001 - the loop must survive a store outage
                log.exception("memory sync failed", operation="sync", scope=store.name)
                reports.append(ProjectionReport(last_error=f"{store.name} scope: {type(exc).__name__}: {exc}"))
        return _report(reports)

    def rebuild_projections(self) -> dict[str, Any]:
        """Recreate the memory collections and graph nodes from the ledgers alone (the project
        scope first: it clears every memory node; then the other scopes add theirs back)."""
        with contextlib.suppress(Exception):  # logged; a replica is rebuilt as it is, the next sync catches up
            self.scopes.sync_shared()
        return _report([store.projector.rebuild() for store in self.scopes.opened()])

    def project(self, memory_ids: Sequence[str], vectors_of: dict[str, Any] | None = None, scope: str = "project") -> None:
        """Project memories of a scope just written (the ledger committed them; a failure stays
        queued). A write to a shared scope is first copied into this project's replica of its ledger;
        a project write also goes to the git notes when they are a live store here."""
        store = self.store(scope)
        if store.replica is not None:
            self.scopes.sync(store.name, memory_ids)
        report = store.projector.project(memory_ids, vectors_of=vectors_of)
        if report.failed or report.requeued:
            self.wake.set()
        if scope == "project":
            self.refresh_hook_copy()
            self.notes.after_write()

    def catch_up_shared(self) -> None:
        """Replicate what other projects wrote to the shared scopes (global, enterprise) since the
        last sync and project it, and one batch of what the background sync replicated but has not
        projected yet, so a search sees it at once; a few indexed reads when nothing changed."""
        for scope in SHARED_SCOPES:
            try:
                queued = self.scopes.sync(scope)
                store = self.scopes.store(scope)
                if store is not None:
                    for start in range(0, len(queued), 128):
                        store.projector.project(queued[start : start + 128])
                    store.projector.drain(max_batches=1)
            except Exception as exc:  # noqa: BLE001 - search goes on with what is projected; the sync retries
                log.warning("shared memories not caught up", scope=scope, error=str(exc))

    # -- memories and their scopes -------------------------------------------------------------
    def row_of(self, memory_id: str, memory_type: MemoryType | str) -> MemoryRow:
        """The memory ``memory_id`` from whichever scope holds it; refused when it is another type."""
        row = self.scopes.locate(memory_id)
        if row is None:
            raise not_found(memory_id)
        if row.memory_type != str(memory_type):
            raise ToolError(
                f"Memory not found: {memory_id} is a {row.memory_type} memory, not {memory_type} — "
                f"call again with memory_type='{row.memory_type}'"
            )
        return row

    def replayed(
        self, request_id: str | None, memory_id: str, operations: tuple[str, ...]
    ) -> tuple[str, dict[str, Any] | None] | None:
        """(scope, memory as it was left) when the call with idempotency key ``request_id``
        already did one of ``operations`` to ``memory_id`` (its owner died before answering; see
        ``query_server.methods``); None when it did not."""
        if request_id is None:
            return None
        for store in self.scopes.opened():
            found = store.ledger.replayed(request_id, memory_id)
            if found is not None and found[0] in operations:
                log.info(REPLAYED, memory_id=memory_id, operation=found[0], request_id=request_id)
                return store.name, found[1]
        return None

    def store(self, scope: str, *, create: bool = False) -> ScopeStore:
        """The store of a scope (a row's scope always has one)."""
        try:
            store = self.scopes.store(scope, create=create)  # type: ignore[arg-type]
        except ScopeUnavailableError as exc:
            raise ToolError(str(exc)) from exc
        if store is None:
            raise ToolError(f"no {scope} memories are stored yet — store one with memory_add(scope={scope!r})")
        return store

    def current(self, row: MemoryRow) -> MemoryRow:
        """The row as its ledger holds it now (for global rows: with this project's sync state)."""
        return self.scopes.get_many([row.id], [row.scope]).get(row.id) or row

    # -- paths the tools read and write --------------------------------------------------------
    def confined(self, raw: str) -> Path:
        """``raw`` resolved inside the project directory; refused when it leaves it."""
        try:
            return confine_path(self.settings.resolved_root(), raw)
        except DiscoveryError as exc:
            raise ToolError(f"Path must be within project directory: {raw!r} — {exc}") from exc

    def output_path(self, raw: str, *, overwrite: bool = False, directory: bool = False) -> Path:
        """Where an export or backup may write (see ``query_server.output_paths``)."""
        try:
            return checked_output_path(
                self.settings.resolved_root(), raw, overwrite=overwrite, directory=directory,
                protected=(self.settings.resolved_state_dir(), self.settings.resolved_global_dir()),
            )
        except OutputPathRefused as exc:
            raise ToolError(str(exc)) from exc

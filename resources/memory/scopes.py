"""Memory scopes: where a memory is kept and who sees it.

* ``project`` (the default): the project's ledger, ``<state>/memory.db`` — what every tool used
  before scopes existed; shared with the team through exports (Markdown, git notes, JSONL).
* ``local``: personal notes about this project, never shared: a second ledger under
  ``<state>/local/`` (the state directory is gitignored by ``codemem init``, and the directory
  carries its own ``.gitignore`` of ``*`` so it stays out of git wherever the state lives).
* ``global``: the user's memories across projects: a ledger under ``~/.codemem/global/``
  (``CODEMEM_GLOBAL_DIR``), written by whichever project stores a global memory.
* ``enterprise``: the organisation's memories, off unless turned on
  (``resources.memory.enterprise``): a ledger in the organisation's shared directory. Disabled,
  it refuses writes with how to turn it on; unreachable, reads skip it with a warning.

Each scope is a complete ``Ledger`` — the same crash-safe write path (one transaction for row,
audit and outbox; projections after the commit). Reads merge the scopes and mark each memory
with its ``scope``. Every scope is projected into *this* project's vector store (collections
``<name>``, ``<name>_local``, ``<name>_global``, ``<name>_enterprise``) and graph. The global and
enterprise ledgers are shared (``SHARED_SCOPES``), so their outbox cannot say what one project has
projected: each project keeps a replica of each (``<state>/global_replica.db``,
``<state>/enterprise_replica.db``) brought up to date from the shared ledger's audit sequence — at
start-up, every background sync, before a search, and at once after this process's own writes —
and projects the replica with the ordinary outbox. A project only ever reads a shared ledger and
writes its own files; it never writes another project's data. Memory ids are unique across
scopes, so no memory shadows another and seed 002's resolution order (enterprise → local →
project → global) decides nothing a lookup returns: lookups read the project's own ledgers first,
the shared ones (maybe on a network share) last. A shared
ledger that fails to open or to read (an unmounted share) is skipped by reads with a warning
(``warnings``), never failing the other scopes.

Ledgers other than the project's are opened when first needed and only if their file exists
(or on the first write to that scope), so a project that never uses scopes creates nothing.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from resources.memory.enterprise import ScopeUnavailableError, enterprise_location
from resources.memory.ledger import Ledger, MemoryRow, Relationship
from resources.memory.ledger_reader import LEDGER_FILE, SERVER_COPY_FILE
from resources.memory.projection import MemoryProjector
from resources.private_files import make_private_dir
from resources.postgres import project_namespace
from resources.sqlite import remove_sidecars
from resources.schemas.memory import MEMORY_SCOPES as SCOPES
from resources.schemas.memory import SHARED_SCOPES
from resources.schemas.memory import MemoryScope as Scope
from resources.settings import Settings

log = structlog.get_logger("codemem.memory_scopes")

REPLICA_SEQ_KEY = "global_audit_seq"
"""Replica meta: the shared ledger's audit sequence the replica was last brought up to (the key
kept its first name: replicas of the global scope were written with it)."""
LEDGER_NAME = LEDGER_FILE
REPLICA_NAME = "global_replica.db"
"""The global scope's replica; a shared scope's is ``<scope>_replica.db``."""


@dataclass
class ScopeStore:
    """One scope of this project: its system of record and the projector that feeds search.

    Attributes:
        name: The scope.
        ledger: Where its memories are written and read (the system of record).
        projector: Projects the scope into this project's stores (from ``replica`` for a shared scope).
        replica: A shared scope's per-project replica (None for the others).
    """

    name: Scope
    ledger: Ledger
    projector: MemoryProjector
    replica: Ledger | None = None

    @property
    def projected(self) -> Ledger:
        """The ledger the projector reads (the replica for a shared scope, else the ledger itself)."""
        return self.replica if self.replica is not None else self.ledger


def _version(row: MemoryRow) -> tuple[Any, ...]:
    return (row.version, row.updated_at, row.content_hash, row.deleted, row.memory_type, row.importance_score)


def project_ledger_namespace(settings: Settings) -> str:
    """The PostgreSQL schema of the project's ledger in server mode (``resources.postgres.project_namespace``)."""
    return project_namespace(settings)


def open_project_ledger(settings: Settings) -> Ledger:
    """The project scope's ledger: in PostgreSQL when ``CODEMEM_DATABASE_URL`` is set (shared by
    every replica and worker of the project), else ``<state>/memory.db``.

    With embedded vector and graph stores (no Qdrant server and Neo4j), the memories are projected
    into this state dir, so one process serves the project: a second one is refused with what to do.
    A project moving to server mode takes its memories along: when ``<state>/memory.db`` holds
    memories, they are loaded into the PostgreSQL ledger (one transaction; merged by version when
    it holds memories already) and the file is renamed ``memory.db.moved-to-postgres-<time>`` (so
    that going back to embedded mode cannot silently read an old copy). Back in embedded mode, the server mode's hook copy is removed.

    Raises:
        LedgerError: the database cannot be used (the message says what to do).
    """
    state = settings.resolved_state_dir()
    url = settings.shared_database_url()
    if not url:
        (state / SERVER_COPY_FILE).unlink(missing_ok=True)
        remove_sidecars(state / SERVER_COPY_FILE)
        return Ledger(state / LEDGER_NAME)
    from resources.memory.ledger_postgres import PostgresLedgerStore

    store = PostgresLedgerStore(url, namespace=project_ledger_namespace(settings))
    embedded = state / LEDGER_NAME
    try:
        if not (settings.server_mode_vectors and settings.server_mode_graph):
            # projections in this state dir: a second process's would miss what this one projects
            store.hold_alone("serves this project with embedded vector and graph stores")
        ledger = Ledger(store=store)
        if embedded.is_file() and embedded.stat().st_size > 0:
            _move_into(ledger, embedded)
    except BaseException:
        store.close()
        raise
    return ledger


def _move_into(ledger: Ledger, embedded: Path) -> None:
    """Take the memories of the embedded ledger file ``embedded`` into the PostgreSQL ``ledger``,
    then rename the file: loaded whole into an empty ledger (audit included), else merged version by
    version (``Ledger.adopt``: a file left by a crash between a load and its rename adds nothing;
    one written in embedded mode meanwhile adds what is newer)."""
    Ledger(embedded).close()  # (opening and closing folds its WAL in: the load reads the file alone)
    if not ledger.load_from(embedded, only_if_empty=True):
        source = Ledger(embedded)
        try:
            rows = list(source.iter_memories())
            links = {row.id: source.relationships_of(row.id)[0] for row in rows}
        finally:
            source.close()
        adopted = ledger.adopt(rows, links, operation="embedded_import")
        log.warning("memories of the embedded ledger merged into PostgreSQL", file=str(embedded), newer=len(adopted))
    moved = embedded.with_name(f"{LEDGER_NAME}.moved-to-postgres-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(embedded, moved)
    remove_sidecars(embedded)
    log.warning("the project's memories moved into PostgreSQL", ledger=ledger.location, kept=str(moved))


def local_ledger_path(settings: Settings) -> Path:
    """The ledger of the project's local scope (personal memories of this clone)."""
    return settings.resolved_state_dir() / "local" / LEDGER_NAME


class MemoryScopes:
    """The project, local, global and enterprise ledgers of one project, and their projectors."""

    def __init__(
        self, settings: Settings, project: Ledger, projector: MemoryProjector, *, vectors: Any, graph: Any, embedder: Any
    ) -> None:
        """Scopes around the project's ``project`` ledger and ``projector`` (opened by the caller)."""
        self.settings = settings
        self.vectors = vectors
        self.graph = graph
        self.embedder = embedder
        self._stores: dict[str, ScopeStore] = {"project": ScopeStore("project", project, projector)}
        self._open_lock = threading.Lock()
        self._replicate_lock = threading.Lock()
        self.warnings: dict[str, str] = {}
        """Scopes skipped by reads, and why (an unreachable enterprise directory)."""

    # -- paths ---------------------------------------------------------------------------------
    def local_path(self) -> Path:
        """The local scope's ledger."""
        return local_ledger_path(self.settings)

    def global_path(self) -> Path:
        """The global scope's ledger (shared by every project of this user)."""
        return self.settings.resolved_global_dir() / LEDGER_NAME

    def replica_path(self, scope: Scope = "global") -> Path:
        """This project's replica of a shared ledger (what that scope's projections are built from)."""
        return self.settings.resolved_state_dir() / (REPLICA_NAME if scope == "global" else f"{scope}_replica.db")

    def _enterprise_path(self, create: bool) -> Path | None:
        """The enterprise ledger; None when the scope cannot be read here (a warning, once, when it is
        on but unreachable). ``create``: refused, saying why and what to do, instead of None."""
        location = enterprise_location(self.settings)
        reason = location.unavailable()
        if reason is None:
            self.warnings.pop("enterprise", None)
            assert location.directory is not None
            return location.directory / LEDGER_NAME
        if create:
            raise ScopeUnavailableError(reason)
        if location.enabled:
            self._skip("enterprise", reason)
        else:
            self.warnings.pop("enterprise", None)  # turned off: nothing is skipped
        return None

    # -- opening -------------------------------------------------------------------------------
    @property
    def project(self) -> ScopeStore:
        """The project scope."""
        return self._stores["project"]

    def set_project(self, ledger: Ledger) -> None:
        """The project ledger was replaced (a restore)."""
        self.project.ledger = ledger

    def _projector(self, ledger: Ledger, scope: Scope) -> MemoryProjector:
        projector = MemoryProjector(ledger, self.vectors, self.graph, self.embedder, scope=scope)
        model = ledger.meta("embedding_model")
        if model is not None and model != self.embedder.model_id:
            log.info("embedding model changed; rebuilding memory projections", scope=scope, old=model, new=self.embedder.model_id)
            projector.drop_collections()
            ledger.enqueue_all()
        ledger.set_meta("embedding_model", self.embedder.model_id)
        return projector

    def store(self, scope: Scope, *, create: bool = False) -> ScopeStore | None:
        """A scope's store; None when its ledger does not exist yet (unless ``create``)."""
        found = self._stores.get(scope)
        if found is not None or scope == "project":
            return found
        with self._open_lock:
            found = self._stores.get(scope)
            if found is not None:
                return found
            found = self._open_enterprise(create) if scope == "enterprise" else self._open_personal(scope, create)
            if found is not None:
                self._stores[scope] = found
        return found

    def _open_personal(self, scope: Scope, create: bool) -> ScopeStore | None:
        """The local or global store (caller holds ``_open_lock``); None when its ledger does not
        exist yet (unless ``create``)."""
        path = self.local_path() if scope == "local" else self.global_path()
        if not path.exists() and not create:
            return None
        make_private_dir(path.parent)  # personal memories: .codemem/local/ or the global dir
        if scope == "local":
            ignore = path.parent / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# codemem: personal memories of this project, never shared\n*\n", encoding="utf-8")
            ledger = Ledger(path, scope="local")
            found = ScopeStore("local", ledger, self._projector(ledger, "local"))
        else:
            ledger = Ledger(path, scope=scope)
            replica = Ledger(self.replica_path(scope), scope=scope)
            found = ScopeStore(scope, ledger, self._projector(replica, scope), replica)
        log.info("memory scope opened", scope=scope, path=str(path))
        return found

    def _open_enterprise(self, create: bool) -> ScopeStore | None:
        """The enterprise store (caller holds ``_open_lock``): its ledger in the organisation's
        directory, opened as a shared database (rights left to the directory, a rollback journal);
        None when it does not exist yet (unless ``create``); the scope off or unreachable, or a
        failure to open its ledger, is a warning and None for reads, a refusal for writes."""
        path = self._enterprise_path(create)
        if path is None or (not path.exists() and not create):
            return None
        try:
            ledger = Ledger(path, scope="enterprise", shared=True)
        except (OSError, sqlite3.Error) as exc:
            reason = f"the enterprise memory ledger {path} cannot be opened: {exc} — check its rights and {path.parent}'s"
            if create:
                raise ScopeUnavailableError(reason) from exc
            self._skip("enterprise", reason)
            return None
        replica = Ledger(self.replica_path("enterprise"), scope="enterprise")
        log.info("memory scope opened", scope="enterprise", path=str(path))
        return ScopeStore("enterprise", ledger, self._projector(replica, "enterprise"), replica)

    def _skip(self, scope: str, reason: str) -> None:
        """Record (and log, once per reason) that reads skip ``scope``."""
        if self.warnings.get(scope) != reason:
            self.warnings[scope] = reason
            log.warning("memory scope skipped", scope=scope, reason=reason)

    def opened(self, scopes: Sequence[str] | None = None) -> list[ScopeStore]:
        """The stores of ``scopes`` (all when None) whose ledgers exist, in ``SCOPES`` order (the
        project first, as a rebuild needs; the shared scopes last)."""
        wanted = SCOPES if scopes is None else [s for s in SCOPES if s in scopes]
        return [s for s in (self.store(name) for name in wanted) if s is not None]

    def _read(self, store: ScopeStore, read: Callable[[Ledger], Any], empty: Any) -> Any:
        """``read(store.ledger)``; for a shared scope whose ledger fails (an unmounted share), a
        warning and ``empty`` instead (the project's own ledgers raise as always)."""
        if store.replica is None:
            return read(store.ledger)
        try:
            return read(store.ledger)
        except (OSError, sqlite3.Error) as exc:
            self._skip(store.name, f"the {store.name} memory ledger could not be read: {exc} — skipped until it can")
            return empty

    # -- reads across scopes ---------------------------------------------------------------------
    def _with_sync_status(self, store: ScopeStore, rows: dict[str, MemoryRow]) -> dict[str, MemoryRow]:
        """Rows of a shared scope report this project's projection state (the replica's), not the
        shared ledger's (whose outbox no one drains)."""
        if store.replica is None or not rows:
            return rows
        states = store.replica.get_many(list(rows))
        for memory_id, row in rows.items():
            replica = states.get(memory_id)
            row.sync_status = replica.sync_status if replica is not None and replica.version == row.version else "pending"
        return rows

    def locate(self, memory_id: str) -> MemoryRow | None:
        """A memory by id in whichever scope holds it (deleted ones included), or None."""
        for store in self.opened():  # ids are unique across scopes: the project's own ledgers first
            row = self._read(store, lambda ledger: ledger.get(memory_id), None)
            if row is not None:
                return self._with_sync_status(store, {row.id: row})[row.id]
        return None

    def get_many(self, memory_ids: Sequence[str], scopes: Sequence[str] | None = None) -> dict[str, MemoryRow]:
        """Memories by id across ``scopes`` (all when None); missing ids are absent."""
        found: dict[str, MemoryRow] = {}
        left = list(dict.fromkeys(memory_ids))
        for store in self.opened(scopes):  # ids are unique across scopes: the project's own ledgers first
            if not left:
                break
            rows = self._with_sync_status(store, self._read(store, lambda ledger, ids=left: ledger.get_many(ids), {}))
            found.update(rows)
            left = [memory_id for memory_id in left if memory_id not in rows]
        return found

    # -- the replicas of the shared scopes ---------------------------------------------------------
    def sync_shared(self) -> dict[str, list[str]]:
        """``sync`` every shared scope this project sees; a scope that fails is logged and skipped.

        Returns:
            The ids queued per scope. Raises the first failure once every scope was tried.
        """
        queued: dict[str, list[str]] = {}
        failure: Exception | None = None
        for scope in SHARED_SCOPES:
            try:
                queued[scope] = self.sync(scope)
            except Exception as exc:  # noqa: BLE001 - one unreachable share does not hold up the other
                log.warning("shared memories not replicated", scope=scope, error=str(exc))
                failure = failure or exc
        if failure is not None:
            raise failure
        return queued

    def sync(self, scope: Scope, memory_ids: Sequence[str] | None = None) -> list[str]:
        """Bring this project's replica of a shared ledger (``scope``) up to date and queue what
        changed for projection (the caller projects, or the background sync drains the replica's outbox).

        Args:
            scope: A shared scope (global, enterprise).
            memory_ids: Only these memories (this process just wrote them); None: whatever the
                shared ledger's audit says changed since the last sync (everything the first time,
                or when the shared ledger was replaced).

        Returns:
            The ids queued in the replica.
        """
        store = self.store(scope)
        if store is None:
            return []
        source, replica = store.ledger, store.replica
        assert replica is not None
        with self._replicate_lock:
            seq = source.last_audit_seq()  # read first: a change after this is seen next time
            seen_text = replica.meta(REPLICA_SEQ_KEY)
            seen = int(seen_text) if seen_text is not None else -1
            if memory_ids is not None:
                changed = set(memory_ids)
            elif seq == seen:
                return []
            elif seen < 0 or seq < seen:  # first sync, or the global ledger was replaced
                changed = {row.id for row in source.iter_memories()} | {row.id for row in replica.iter_memories()}
            else:
                changed = source.audited_since(seen)
            ids = sorted(changed)
            fresh = source.get_many(ids)
            held = replica.get_many(ids)
            rows = [row for memory_id, row in fresh.items() if memory_id not in held or _version(held[memory_id]) != _version(row)]
            gone = [memory_id for memory_id in ids if memory_id not in fresh and memory_id in held]
            relationships: dict[str, Sequence[Relationship]] = {row.id: source.relationships_of(row.id)[0] for row in rows}
            if rows or gone:
                replica.replicate(rows, relationships, gone)
            if memory_ids is None:
                replica.set_meta(REPLICA_SEQ_KEY, str(seq))
            queued = [row.id for row in rows] + gone
            if queued:
                log.info("shared memories replicated", scope=scope, memories=len(queued))
            return queued

    def close(self) -> None:
        """Close the ledgers of the other scopes (the project's belongs to its opener)."""
        for name, store in list(self._stores.items()):
            if name == "project":
                continue
            store.ledger.close()
            if store.replica is not None:
                store.replica.close()
            del self._stores[name]

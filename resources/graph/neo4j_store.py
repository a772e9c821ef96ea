"""Code graph on a Neo4j 5 server through the official driver (Bolt).

Writes run in write transactions (``session.execute_write``), one transaction per statement
(``replace_file`` is one statement, so one transaction); client Cypher runs in read
transactions (``session.execute_read`` on a ``READ_ACCESS`` session), so the server refuses any
write even if the client-side check missed it. Transient failures (deadlocks, leader switches,
connection loss) are retried with exponential backoff (tenacity) on top of the driver's own
transaction retries. Constraints and indexes use ``IF NOT EXISTS``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from resources.graph import cypher as cy
from resources.graph.base import BaseGraphStore
from resources.graph.model import QUERY_HINT, GraphQueryError, GraphUnavailable, ReadOnlyViolation, to_jsonable
from resources.graph.read_only import assert_read_only

try:
    import neo4j
    from neo4j import exceptions as neo4j_errors
except ImportError as exc:  # pragma: no cover - dependency missing
    raise ImportError("the neo4j driver is required for NEO4J_URI: `pip install neo4j`") from exc

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT = (
    neo4j_errors.TransientError,
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
)
_ACCESS_MODE_CODES = ("Neo.ClientError.Statement.AccessMode", "Neo.ClientError.Security.Forbidden")


def _retrying[T](func: Callable[..., T]) -> Callable[..., T]:
    """Retry ``func`` on transient Neo4j errors: 5 attempts, 0.2 s to 5 s backoff."""
    return retry(
        retry=retry_if_exception_type(_TRANSIENT),
        stop=stop_after_attempt(5),
        wait=wait_exponential(multiplier=0.2, max=5),
        reraise=True,
    )(func)


def _convert(value: Any) -> Any:
    from neo4j.graph import Node, Path, Relationship

    if isinstance(value, Node):
        return {"labels": sorted(value.labels), **to_jsonable(dict(value.items()))}
    if isinstance(value, Relationship):
        return {"type": value.type, "properties": to_jsonable(dict(value.items()))}
    if isinstance(value, Path):
        out: list[Any] = []
        relationships = list(value.relationships)
        for i, node in enumerate(value.nodes):
            out.append(_convert(node))
            if i < len(relationships):
                out.append(_convert(relationships[i]))
        return out
    if isinstance(value, list):
        return [_convert(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _convert(v) for k, v in value.items()}
    return to_jsonable(value)


class Neo4jGraphStore(BaseGraphStore):
    """A :class:`~resources.graph.store.GraphStore` on a Neo4j 5 server.

    The driver connects lazily; an unreachable server surfaces as :class:`GraphUnavailable` on
    the first operation and in :meth:`health`.

    Args:
        uri: Bolt/neo4j URI (``neo4j://localhost:7687``).
        user: User name.
        password: Password (``None`` for a server without authentication).
        database: Database name (``None``: the server's default).
        connection_timeout_s: Socket connect timeout.
    """

    backend = "neo4j"

    def __init__(
        self,
        uri: str,
        user: str,
        password: str | None,
        database: str | None = None,
        *,
        connection_timeout_s: float = 10.0,
    ) -> None:
        self.uri = uri
        self.database = database
        auth = (user, password) if password is not None else None
        try:
            self._driver = neo4j.GraphDatabase.driver(
                uri,
                auth=auth,
                connection_timeout=connection_timeout_s,
                max_transaction_retry_time=15.0,
            )
        except (neo4j_errors.ConfigurationError, ValueError) as exc:
            raise GraphUnavailable(f"invalid Neo4j URI {uri!r}: {exc}") from exc
        self._closed = False

    # -- execution -------------------------------------------------------------------------

    def _session(self, access_mode: str) -> neo4j.Session:
        if self._closed:
            raise GraphUnavailable("the graph store is closed")
        return self._driver.session(database=self.database, default_access_mode=access_mode)

    def _run(self, access_mode: str, query: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        def work(tx: neo4j.ManagedTransaction) -> list[dict[str, Any]]:
            return [record.data() for record in tx.run(query, params or {})]

        @_retrying
        def attempt() -> list[dict[str, Any]]:
            with self._session(access_mode) as session:
                if access_mode == neo4j.WRITE_ACCESS:
                    return session.execute_write(work)
                return session.execute_read(work)

        try:
            return attempt()
        except _TRANSIENT as exc:
            raise GraphUnavailable(f"Neo4j at {self.uri} unavailable: {exc}") from exc
        except neo4j_errors.AuthError as exc:
            raise GraphUnavailable(f"Neo4j at {self.uri} refused the credentials: {exc}") from exc
        except neo4j_errors.Neo4jError as exc:
            raise GraphQueryError(f"Neo4j rejected a statement: {exc.message or exc}") from exc
        except neo4j_errors.DriverError as exc:
            raise GraphUnavailable(f"Neo4j driver error: {exc}") from exc

    def _write(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._run(neo4j.WRITE_ACCESS, query, params)

    def _read(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._run(neo4j.READ_ACCESS, query, params)

    # -- GraphStore ------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create uniqueness constraints and lookup indexes (``IF NOT EXISTS``), then wait for
        the indexes to come online.

        Raises:
            GraphQueryError: If a statement is refused (e.g. existing duplicates).
            GraphUnavailable: If the server cannot be reached.
        """

        @_retrying
        def run(statement: str) -> None:
            with self._session(neo4j.WRITE_ACCESS) as session:
                session.run(statement).consume()

        try:
            for statement in cy.neo4j_schema_statements():
                run(statement)
            run(cy.NEO4J_AWAIT_INDEXES)
        except _TRANSIENT as exc:
            raise GraphUnavailable(f"Neo4j at {self.uri} unavailable: {exc}") from exc
        except neo4j_errors.Neo4jError as exc:
            raise GraphQueryError(f"cannot create the graph schema: {exc.message or exc}") from exc
        except neo4j_errors.DriverError as exc:
            raise GraphUnavailable(f"Neo4j driver error: {exc}") from exc

    def read_query(
        self,
        cypher: str,
        parameters: Mapping[str, Any] | None = None,
        limit: int = 1000,
        *,
        timeout_s: float = 30.0,
    ) -> tuple[list[str], list[dict[str, Any]], bool]:
        """See :meth:`resources.graph.store.GraphStore.read_query` (a read transaction on a
        ``READ_ACCESS`` session; records are streamed and reading stops after ``limit + 1``)."""
        if limit < 0:
            raise ValueError("limit must be >= 0")
        assert_read_only(cypher)
        params = dict(parameters or {})

        @neo4j.unit_of_work(timeout=timeout_s)  # a managed transaction takes its timeout here, not from a Query
        def work(tx: neo4j.ManagedTransaction) -> tuple[list[str], list[dict[str, Any]], bool]:
            result = tx.run(cypher, params)
            keys = list(result.keys())
            rows: list[dict[str, Any]] = []
            for record in result:
                if len(rows) >= limit:
                    return keys, rows, True
                rows.append({key: _convert(record[key]) for key in keys})
            return keys, rows, False

        try:
            with self._session(neo4j.READ_ACCESS) as session:
                return session.execute_read(work)
        except neo4j_errors.AuthError as exc:
            raise GraphUnavailable(f"Neo4j at {self.uri} refused the credentials: {exc}") from exc
        except neo4j_errors.ClientError as exc:
            if exc.code in _ACCESS_MODE_CODES:
                raise ReadOnlyViolation("a write operation") from exc
            if "TimedOut" in (exc.code or ""):
                raise GraphQueryError(
                    f"query timed out after {timeout_s:g} s: narrow the MATCH, bound variable-length "
                    "paths (e.g. *1..3) or add LIMIT"
                ) from exc
            raise GraphQueryError(f"{exc.message or exc}\n{QUERY_HINT}") from exc
        except _TRANSIENT as exc:
            raise GraphUnavailable(f"Neo4j at {self.uri} unavailable: {exc}") from exc
        except neo4j_errors.Neo4jError as exc:
            raise GraphQueryError(f"{exc.message or exc}\n{QUERY_HINT}") from exc
        except neo4j_errors.DriverError as exc:
            raise GraphUnavailable(f"Neo4j driver error: {exc}") from exc

    def health(self) -> dict[str, Any]:
        """Check connectivity and run a trivial read."""
        info: dict[str, Any] = {"backend": self.backend, "location": self.uri}
        if self._closed:
            return {**info, "ok": False, "error": "closed"}
        try:
            started = time.perf_counter()
            self._driver.verify_connectivity()
            self._read(cy.PING)
            info["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
            server = self._driver.get_server_info()
            info["server"] = server.agent
            return {**info, "ok": True}
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError, GraphUnavailable, GraphQueryError) as exc:
            return {**info, "ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def close(self) -> None:
        """Close the driver. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._driver.close()

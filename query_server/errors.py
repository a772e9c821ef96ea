"""One error mapper for every face: what a failed tool call becomes on MCP, HTTP, the CLI and the
owner's loopback RPC.

Four kinds of failure, whatever face the call came through (HTTP status / MCP / CLI exit status):

- ``refused``: ``ToolError``, the input cannot be served (a path outside the project, an unknown
  symbol): 400 / ``isError`` / 2.
- ``invalid``: a pydantic ``ValidationError``: 422 / ``isError`` / 2.
- ``unavailable``: ``GraphUnavailable``, a store is down: 503 with ``Retry-After`` / ``isError`` / 1.
- ``internal``: anything else, a bug: 500 / ``isError`` / 1.

An internal failure is logged with its traceback where it happened and its message says where to
look. A failure on the project's owner crosses the loopback RPC with its kind
(:func:`rpc_error` on the owner, :func:`raise_rpc_error` on the caller), so a store that is down
on the owner is still a 503 on another process's HTTP face.
"""

from __future__ import annotations

import traceback
from typing import Any, Literal, NoReturn

import structlog
from pydantic import ValidationError

from resources.graph.store import GraphUnavailable
from resources.schemas.tools import describe_validation_error

from query_server.paging import ToolError

FailureKind = Literal["refused", "invalid", "unavailable", "internal"]
RETRY_AFTER_S = 5
"""Seconds a client should wait before retrying a call that found a store unavailable."""

_mcp_log = structlog.get_logger("codemem.mcp")
_http_log = structlog.get_logger("codemem.http")
_owner_log = structlog.get_logger("codemem.ownership")
_cli_log = structlog.get_logger("codemem.cli")


class InvalidInput(ToolError):
    """Input the owner process refused as invalid (its validation message, one line)."""


class OwnerFailure(Exception):
    """An unexpected failure on the project's owner process: logged there; the message says so."""


def failure_kind(exc: BaseException) -> FailureKind:
    """Which kind of failure ``exc`` is (see the module's table)."""
    if isinstance(exc, ValidationError | InvalidInput):
        return "invalid"
    if isinstance(exc, ToolError):
        return "refused"
    if isinstance(exc, GraphUnavailable):
        return "unavailable"
    return "internal"


def _invalid_message(exc: BaseException) -> str:
    return describe_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)


def mcp_message(tool: str, exc: Exception) -> str:
    """The text of the MCP tool error (``isError``) for ``tool`` failing with ``exc``; an
    unavailable store or a bug is logged with its traceback."""
    kind = failure_kind(exc)
    if kind == "invalid":
        return _invalid_message(exc)
    if kind == "refused" or isinstance(exc, OwnerFailure):
        return str(exc)
    _mcp_log.exception("tool failed", tool=tool)
    return f"{tool} failed: {type(exc).__name__}: {exc} — see the server log; `codemem health` shows each store"


def http_error(tool: str, exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, JSON body, headers) of the HTTP answer for ``tool`` failing with ``exc``."""
    kind = failure_kind(exc)
    if kind == "invalid":
        return 422, {"error": _invalid_message(exc)}, {}
    if kind == "refused":
        return 400, {"error": str(exc)}, {}
    if kind == "unavailable":  # the store is down, not the request wrong: retry later
        return 503, {"error": f"the code graph is unavailable: {exc} — retry shortly; GET /health shows each store"}, {
            "Retry-After": str(RETRY_AFTER_S)
        }
    if isinstance(exc, OwnerFailure):
        return 500, {"error": str(exc)}, {}
    _http_log.exception("tool failed", tool=tool)
    return 500, {"error": f"{type(exc).__name__}: {exc} — see the server log; GET /health shows each store"}, {}


def cli_error(what: str, exc: Exception) -> tuple[int, str]:
    """(exit status, one-line message) of a CLI command whose ``what`` failed with ``exc``; the
    traceback of an unexpected failure goes to the log at debug level."""
    kind = failure_kind(exc)
    if kind == "invalid":
        return 2, _invalid_message(exc)
    if kind == "refused":
        return 2, str(exc)
    if isinstance(exc, OwnerFailure):
        return 1, f"{what} failed: {exc}"
    _cli_log.debug("command failed", operation=what, traceback=traceback.format_exc())
    return 1, f"{what} failed: {type(exc).__name__}: {exc} (CODEMEM_LOG_LEVEL=DEBUG logs the traceback)"


def rpc_error(tool: str, exc: Exception) -> dict[str, str]:
    """The owner's answer to a loopback call of ``tool`` that failed with ``exc``: the message and
    its kind, which the caller raises again (:func:`raise_rpc_error`)."""
    kind = failure_kind(exc)
    if kind == "invalid":
        return {"error": _invalid_message(exc), "kind": kind}
    if kind == "unavailable":
        _owner_log.warning("store unavailable", operation=tool, error=str(exc))
    if kind in ("refused", "unavailable"):
        return {"error": str(exc), "kind": kind}
    _owner_log.exception("owner call failed", operation=tool)
    return {"error": f"{type(exc).__name__}: {exc} — see the owner's log; `codemem status` shows the stores", "kind": kind}


def raise_rpc_error(payload: dict[str, Any]) -> NoReturn:
    """Raise the failure an owner reported (``{"error", "kind"}``) as the exception of its kind."""
    message = str(payload["error"])
    kind = payload.get("kind", "refused")
    if kind == "invalid":
        raise InvalidInput(message)
    if kind == "unavailable":
        raise GraphUnavailable(message)
    if kind == "internal":
        raise OwnerFailure(message)
    raise ToolError(message)

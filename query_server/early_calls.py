"""Answer the first tool calls of a ``codemem mcp`` session before the MCP SDK has loaded.

Importing the MCP SDK takes ~0.5 s on a 2-core machine, as long as codemem's own modules and the
opening of the stores together; a client that calls a tool right after ``tools/list`` used to wait
for all of it. The front (``query_server.mcp_front``) keeps the ``tools/call`` requests that arrive
meanwhile; ``serve_early_calls`` answers them in the command's thread, once codemem's modules are
in and before it imports the SDK, with the answer the SDK's server gives for the same call (a test
compares the two, call by call):

* a result: its JSON as the text content, its model dumped by alias as the structured content;
* a failure of the tool: ``isError``, the text the server's error mapping gives.

A call is passed on to the server, which answers it once it is up, when it is anything else: an
unknown or non-MCP tool, arguments the input model rejects (the SDK words those), a progress
token, or a tool that may run long or write more than a keyed record (index runs, exports,
restores: ``READ`` and ``KEYED`` tools only are answered here).

The SDK loads once no call has come for ``QUIET_S``: a client calling tools one after the other
gets each answer here instead of waiting for the SDK's import (~1 s) between two of them. It loads
at once when a request only the server answers arrives (``prompts/list``, a call passed on), and
after ``SERVING_MAX_S`` whatever comes.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pydantic_core
import structlog
from pydantic import BaseModel, ValidationError

from query_server.errors import mcp_message
from query_server.mcp_front import Front, KeptCall
from query_server.telemetry import ToolTelemetry
from query_server.tools import KEYED, READ, TOOLS, Tool

log = structlog.get_logger("codemem.early_calls")

ANSWERED_HERE = (READ, KEYED)
"""The retry policies of the tools answered before the server is up (quick, and safe to run here)."""
OPEN_WAIT_S = 3.0
"""How long the kept calls wait for the stores to open here; past it (another owner is handing
over, say) they go to the server, which loads meanwhile and answers everything else."""
QUIET_S = 0.25
"""How long the command waits for the next call before it loads the SDK: a client calling tools one
after another is answered here instead of waiting ~1 s for the SDK's import between two calls."""
SERVING_MAX_S = 5.0
"""At most this long answering calls here: warming the stores, the background index and the graph
start wait for the SDK's import (``query_server.import_phase``), so a steady stream of calls must
not put them off for good."""
STOP_POLL_S = 0.05
"""How often a wait for the next call looks at ``stop`` (a signal's shutdown)."""


def serve_early_calls(front: Front, handle: Any, telemetry: ToolTelemetry, stop: threading.Event | None = None) -> int:
    """Answer (or pass on) every call the front kept, oldest first, and those that follow within
    ``QUIET_S`` of each other, until none comes, a request only the server answers arrives (one
    passed on included), the client leaves, ``SERVING_MAX_S`` have passed or ``stop`` is set;
    returns how many were answered here. ``handle`` is the project's ``OpeningHandle``: the calls
    wait ``OPEN_WAIT_S`` at most for it to open, else they are all passed on (so are they on a
    project whose first build has not run yet)."""
    answered = passed_on = 0
    opened = None
    until = time.monotonic() + SERVING_MAX_S
    while not (stop is not None and stop.is_set()) and (call := _next_call(front, until, stop)) is not None:
        if opened is None:
            opened = handle.wait_opened(OPEN_WAIT_S) and not _first_build_pending(handle)
        result = early_answer(call.message, handle, telemetry) if opened else None
        if result is None:
            front.pass_on(call)
            passed_on += 1
            continue
        front.answer(call, result)
        answered += 1
    if answered or passed_on:
        log.info("tool calls sent before the MCP server was up", answered_here=answered, passed_on=passed_on)
    return answered


def _next_call(front: Front, until: float, stop: threading.Event | None) -> KeptCall | None:
    """The next kept call: one waiting now, else one that comes within ``QUIET_S`` (none past
    ``until``; none waited for once the server is needed or ``stop`` is set)."""
    if time.monotonic() > until:
        return None  # the rest go to the server
    call = front.take_early_call()
    quiet_until = min(until, time.monotonic() + QUIET_S)
    while call is None and not front.server_needed() and not (stop is not None and stop.is_set()):
        left = quiet_until - time.monotonic()
        if left <= 0:
            return None
        front.wait_for_early_call(min(left, STOP_POLL_S))
        call = front.take_early_call()
    return call


def _first_build_pending(handle: Any) -> bool:
    """True when this process owns a project never indexed: its first build waits for the SDK's
    import (``query_server.import_phase``), and a code call would wait for that build."""
    manifest = getattr(handle.backend, "manifest", None) if handle.is_owner else None
    return manifest is not None and not manifest.has_files()


def early_answer(message: dict[str, Any], handle: Any, telemetry: ToolTelemetry) -> dict[str, Any] | None:
    """The ``tools/call`` result the MCP server would send for ``message``, or None when the
    server must answer it (see the module)."""
    params = message.get("params")
    if not isinstance(params, dict) or (params.get("_meta") or {}).get("progressToken") is not None:
        return None
    tool = TOOLS.get(params.get("name")) if isinstance(params.get("name"), str) else None
    arguments = params.get("arguments") or {}
    if tool is None or not tool.is_mcp or tool.retry not in ANSWERED_HERE or tool.result is None or not isinstance(arguments, dict):
        return None
    if tool.input is None and arguments:
        return None
    try:
        request = tool.request(**arguments)
    except (ValidationError, TypeError):
        return None
    return _run(tool, request, arguments, handle, telemetry)


def _run(tool: Tool, request: BaseModel | None, arguments: dict[str, Any], handle: Any, telemetry: ToolTelemetry) -> dict[str, Any]:
    """Run the call as the server does (recorded as an MCP call) and shape its result the same way."""
    try:
        with telemetry.call(tool.name, arguments or None, face="mcp"):
            result = handle.call(tool, *((request,) if request is not None else ()))
    except Exception as exc:  # noqa: BLE001 - every failure becomes the tool's error answer, as on the server
        return {"content": [{"type": "text", "text": f"Error executing tool {tool.name}: {mcp_message(tool.name, exc)}"}],
                "isError": True}
    assert tool.result is not None  # (early_answer answers only tools with a result model)
    try:
        validated = result if isinstance(result, tool.result) else tool.result.model_validate(result, by_alias=True, by_name=True)
    except ValidationError as exc:  # a service bug; the server would fail the call the same way
        log.exception("a tool's result does not match its result model", tool=tool.name)
        return {"content": [{"type": "text", "text": f"Error executing tool {tool.name}: {exc}"}], "isError": True}
    text = pydantic_core.to_json(result, fallback=str, indent=2).decode()
    return {"content": [{"type": "text", "text": text}], "structuredContent": validated.model_dump(mode="json", by_alias=True),
            "isError": False}

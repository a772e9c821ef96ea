"""MCP face of the service: every MCP tool of the registry (``query_server.tools``) for Claude Code,
over stdio (``codemem mcp``) and streamable HTTP (mounted by ``query_server.http_api``).

Each tool is generated from its registry entry: its parameters are the fields of its input model
(names, types, defaults, descriptions and constraints come from ``resources/schemas/``), its
structured output is its result model, its description the entry's. Errors come back as MCP tool
errors (``isError``) with an actionable message (``query_server.errors``).
"""

from __future__ import annotations

import inspect
import threading
import types
from collections.abc import Callable, Coroutine
from copy import copy
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union, get_args, get_origin

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
from mcp.server.mcpserver.exceptions import UnexpectedToolError
from pydantic import BaseModel, ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic.fields import FieldInfo

from resources.schemas.tools import describe_validation_error

from query_server.errors import mcp_message
from query_server.mcp_front import INSTRUCTIONS, SERVER_NAME
from query_server.telemetry import ToolTelemetry
from query_server.tools import Tool, mcp_tools

if TYPE_CHECKING:  # the stores' modules load when they are opened (query_server.warm_start)
    from query_server.ownership import ProjectHandle



class CodememMCPServer(MCPServer):
    """The MCP server with codemem's calls recorded and argument errors worded like the service's.

    The SDK validates a call's arguments against the tool's parameters before the tool runs; its
    error is a multi-line pydantic dump. Here it reads as every other validation error does
    (``invalid input — field: problem``), and every call of a codemem tool is recorded.
    """

    def __init__(self, telemetry: ToolTelemetry, **settings: Any) -> None:
        """An empty server that records the calls of its codemem tools in ``telemetry``."""
        super().__init__(**settings)
        self.telemetry = telemetry
        self.recorded: set[str] = set()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        """Call tool ``name``; see ``MCPServer.call_tool``."""
        if name not in self.recorded:
            return await super().call_tool(name, arguments, context)
        with self.telemetry.call(name, arguments or None, face="mcp"):
            try:
                return await super().call_tool(name, arguments, context)
            except MCPToolError as exc:
                if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                    raise MCPToolError(f"Error executing tool {name}: {describe_validation_error(exc.__cause__)}") from exc.__cause__
                raise


def _none_passes(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    return None if value is None else handler(value)


def _optional_text(annotation: Any) -> Any:
    """``T`` when ``annotation`` is ``T | None`` for a text type ``T`` (``str``, maybe annotated), else None."""
    if get_origin(annotation) not in (Union, types.UnionType):
        return None
    members = get_args(annotation)
    texts = [member for member in members if member is not type(None)]
    if len(members) != 2 or len(texts) != 1:
        return None
    text = texts[0]
    return text if (get_args(text)[0] if get_origin(text) is Annotated else text) is str else None


def parameter(name: str, field: FieldInfo) -> inspect.Parameter:
    """The MCP tool parameter of an input model's field: its type, with the field's description,
    default and constraints (``FieldInfo``) as metadata, so the tool's input schema is the model's.

    Optional text stays typed ``str`` (None let through): the SDK parses a JSON-looking string into
    an object for any other type, and a one-line JSONL import or a memory's content would arrive
    as one.
    """
    text = _optional_text(field.annotation)
    if text is None:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[field.annotation, field])
    constrained = Annotated[text, *field.metadata] if field.metadata else text
    described = copy(field)
    described.metadata = []
    nullable = WrapValidator(_none_passes, json_schema_input_type=Optional[constrained])  # noqa: UP045 - a runtime type
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[constrained, nullable, described])


Invoke = Callable[[Tool, BaseModel | None], Coroutine[Any, Any, Any]]
"""``await invoke(tool, request)``: run a tool on the project (a worker thread), errors mapped."""


def tool_function(tool: Tool, invoke: Invoke) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The function the MCP SDK registers for ``tool``: keyword parameters from its input model,
    its result model as the return annotation (structured output)."""

    async def run(**arguments: Any) -> Any:
        try:
            request = tool.request(**arguments)
        except ValidationError as exc:
            raise MCPToolError(mcp_message(tool.name, exc)) from exc
        return await invoke(tool, request)

    fields = tool.input.model_fields if tool.input is not None else {}
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [parameter(name, field) for name, field in fields.items()], return_annotation=tool.result
    )
    run.__name__ = run.__qualname__ = tool.name
    run.__doc__ = tool.description
    return run


def build_mcp_server(handle: ProjectHandle, telemetry: ToolTelemetry | None = None) -> MCPServer:
    """An MCP server exposing every MCP tool of the registry on the project behind ``handle``."""
    server = CodememMCPServer(telemetry or ToolTelemetry(), name=SERVER_NAME, instructions=INSTRUCTIONS)

    async def invoke(tool: Tool, request: BaseModel | None) -> Any:
        args = (request,) if request is not None else ()
        try:
            return await anyio.to_thread.run_sync(lambda: handle.call(tool, *args))
        except Exception as exc:
            raise MCPToolError(mcp_message(tool.name, exc)) from exc

    for tool in mcp_tools():
        server.add_tool(tool_function(tool, invoke), name=tool.name, description=tool.description)
        server.recorded.add(tool.name)
    return server


def run_stdio(
    handle: ProjectHandle, stop: threading.Event | None = None, serving: Callable[[], None] | None = None,
    telemetry: ToolTelemetry | None = None,
) -> None:
    """Serve MCP over stdio until the client closes the stream or ``stop`` is set; ``serving()``
    is called once the server is built and starts reading (``codemem mcp`` hands it the calls its
    front kept then, ``query_server.early_calls``); the calls are recorded in ``telemetry``.

    The server runs in a daemon thread: its stdin reader blocks in a read that no cancellation
    interrupts, so on ``stop`` this returns at once and leaves that thread to the process's exit
    (``query_server.shutdown``) instead of waiting for the client to write or close the stream.
    """
    server = build_mcp_server(handle, telemetry)
    ended = stop or threading.Event()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            anyio.run(server.run_stdio_async)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
            failure.append(exc)
        finally:
            ended.set()

    threading.Thread(target=serve, name="codemem-mcp-stdio", daemon=True).start()
    if serving is not None:
        serving()
    while not ended.wait(0.05):  # a short wait: signal handlers run between waits
        pass
    if failure:
        raise failure[0]

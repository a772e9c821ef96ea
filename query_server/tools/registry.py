"""What a tool is: its name, input and result models, its LLM-facing description, its HTTP route,
its retry policy and the service callable that runs it — declared once (``query_server.tools``),
read by every face: the MCP tools (``query_server.mcp_server``), the HTTP routes
(``query_server.http_api``), the owner's loopback RPC (``query_server.ownership``) and the CLI.

Each tool says what a caller may do when the owner process dies while running it (``Tool.retry``),
so a call in flight during an owner hand-over gives one result and changes the stores once:

- ``read``: changes nothing the caller sees (reads; access counts are statistics) — retried.
- ``natural``: running it again leaves the same state — retried. The index methods re-index from
  disk and converge (a dead owner's background job died with it, so the retry starts it on the
  new owner); projections (``sync_memory``, ``rebuild_projections``, ``refresh_design``) are
  rebuilt from the ledger; ``normalize_memory`` converges (a second run merges nothing new);
  ``notes_sync`` and ``notes_capture`` find their work done (ledger and git notes in step, the
  decisions tied).
- ``key``: applied once per idempotency key — retried with the same key, and the ledger returns
  the first outcome. The key is the input's ``request_id`` field where it has one
  (``memory_add``, ``memory_bulk_add``, ``record_review``; a key the caller gives wins), else the method's
  ``request_id`` keyword (``memory_update``, ``memory_delete``, ``import_memory``,
  ``record_test_run``). ``ProjectHandle`` makes one per call when the caller gives none.
- ``once``: a repeat would not give the first result (``export_memory`` and ``backup`` refuse the
  target the first attempt wrote; a second ``restore`` could put the restored ledger where the
  first kept the replaced one) — retried only when the request never reached the owner; otherwise
  the caller is told it may have completed.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from inspect import cleandoc
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from query_server.service import CodeMemService

RetryPolicy = Literal["read", "natural", "key", "once"]
READ: RetryPolicy = "read"
NATURAL: RetryPolicy = "natural"
KEYED: RetryPolicy = "key"
ONCE: RetryPolicy = "once"

ServiceCall = Callable[..., Any]
"""``call(service, [request], *extra, **options)``: the operation on a ``CodeMemService``."""


@dataclass(frozen=True)
class Tool:
    """One service operation and how every face offers it.

    Attributes:
        name: The tool's name on every face (MCP tool, ``POST /tools/<name>``, owner RPC).
        call: The service callable, e.g. ``CodeMemService.code_search`` or ``on_memory(MemoryService.memory_add)``.
        input: The input model (None: the tool takes no input); its fields, with their
            descriptions and constraints, are the MCP tool's parameters and the route's body.
        result: The result model (None: a plain dict, internal tools only).
        retry: What a caller may do when the owner dies while running it (see the module).
        description: What an LLM reads to pick the tool; None: not an MCP tool.
        route: The summary of its ``POST /tools/<name>`` route; None: no plain route.
        optional_input: The input may be left out entirely (``index_status``: overall statistics).
        foreground: Counted as a call in flight, which background index steps wait for; False
            for tools that run index work themselves (their own steps would wait on them).
        progress: Takes a progress callback (``index``); the owner RPC streams it back.
    """

    name: str
    call: ServiceCall
    input: type[BaseModel] | None
    result: type[BaseModel] | None
    retry: RetryPolicy
    description: str | None = None
    route: str | None = None
    optional_input: bool = False
    foreground: bool = True
    progress: bool = False

    @property
    def is_mcp(self) -> bool:
        """True when the tool is offered to MCP clients."""
        return self.description is not None

    def request(self, **fields: Any) -> BaseModel | None:
        """The tool's input built from ``fields`` (raises pydantic's ``ValidationError``)."""
        return self.input(**fields) if self.input is not None else None

    def run(self, service: CodeMemService, *args: Any, request_id: str | None = None, **options: Any) -> Any:
        """Run the tool on ``service`` (stores this process owns), counted in flight when it is a
        foreground call, with the call's idempotency key ``request_id`` (used only under the ``key``
        policy): into the input's ``request_id`` field when it has one and the caller left it empty,
        else as the ``request_id`` keyword."""
        if request_id is not None and self.retry == KEYED:
            request = args[0] if args else None
            if request is not None and "request_id" in type(request).model_fields:
                if getattr(request, "request_id", None) is None:
                    args = (request.model_copy(update={"request_id": request_id}), *args[1:])
            else:
                options["request_id"] = request_id
        with service.foreground.serving() if self.foreground else nullcontext():
            return self.call(service, *args, **options)


def on_memory(method: Callable[..., Any]) -> ServiceCall:
    """A ``MemoryService`` method as a service callable: run on the service's ``memory`` part."""

    def call(service: CodeMemService, *args: Any, **options: Any) -> Any:
        return method(service.memory, *args, **options)

    call.__qualname__ = call.__name__ = method.__qualname__
    call.__doc__ = method.__doc__
    return call


def on_design(name: str) -> ServiceCall:
    """The ``DesignService`` method called ``name`` as a service callable: run on the service's
    ``design`` part. By name: the design layer's modules load when a design tool first runs, not
    with the registry (a session's first memory call does not wait for them)."""

    def call(service: CodeMemService, *args: Any, **options: Any) -> Any:
        return getattr(service.design, name)(*args, **options)

    call.__name__ = name
    call.__qualname__ = f"DesignService.{name}"
    return call


def describe(text: str) -> str:
    """A tool description written as an indented triple-quoted string, without its indentation."""
    return cleandoc(text)

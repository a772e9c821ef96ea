"""Start fast, warm in the background: the project handle of ``codemem mcp``.

Claude Code waits a few seconds for ``initialize``; opening the stores, starting the background
index (which refreshes the design layer) and loading the embedding model take longer than that
on a cold machine. ``OpeningHandle`` lets the MCP server answer ``initialize`` and ``tools/list``
(they need only the tool registry) before any of it: ``start`` opens the project's handle
(``query_server.ownership.ProjectHandle``, through the CLI's ``open_handle``) in a thread, then
warms it (``warm``: the model, the collections, the background index, the graph). A tool call that
arrives meanwhile waits for the handle only — not for the warming: a search waits for the model
on the embedder's own lock, the index runs beside it as it always did. A failure to open the
stores is raised, with the message the CLI gives it, by every call (``health`` included).

Only the light modules are imported here: the stores, the service and their dependencies are
imported by the opening thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import structlog

from query_server.import_phase import settle_heap, wait_for_end
from query_server.paging import ToolError

log = structlog.get_logger("codemem.warm_start")

OPEN_WAIT_S = 3600.0
"""How long a call waits for the stores to open (opening waits up to a minute for another owner)."""
CLOSE_WAIT_S = 120.0
"""How long ``close`` waits for an opening in progress, to close what it opened."""


class OpeningHandle:
    """A project handle opened in a background thread; calls wait until it is open.

    Offers what ``codemem mcp`` uses of ``ProjectHandle``: ``call``, ``is_owner``, ``backend``,
    ``close``.
    """

    def __init__(self, open_handle: Callable[[], Any], warm: Callable[[Any], None] | None = None) -> None:
        """Nothing is opened until ``start``: ``open_handle()`` returns the handle (a
        ``ClickException`` or any other failure is what calls raise), ``warm(handle)`` runs after it."""
        self._open_handle = open_handle
        self._warm = warm
        self._opened = threading.Event()
        self._handle: Any = None
        self._error: Exception | None = None
        self._closing = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Open (then warm) in a daemon thread; a second call does nothing."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="codemem-open", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            handle = self._open_handle()
        except BaseException as exc:  # noqa: BLE001 - reported by every call
            message = getattr(exc, "format_message", lambda: str(exc))()
            self._error = ToolError(message)
            self._error.__cause__ = exc
            log.error("opening the project's stores failed", operation="open", error=message)
            self._opened.set()
            return
        self._handle = handle
        self._opened.set()
        if self._warm is not None and not self._closing:
            try:
                self._warm(handle)
            except Exception:  # noqa: BLE001 - warming is an optimisation; the calls report real failures
                log.exception("warming up failed", operation="warm")

    @property
    def opened(self) -> bool:
        """True once opening ended (the handle is open, or it failed)."""
        return self._opened.is_set()

    def wait_opened(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for opening to end; True when it did."""
        return self._opened.wait(timeout)

    def wait(self, timeout: float = OPEN_WAIT_S) -> Any:
        """The open handle, once it is; the opening's failure raised."""
        self.start()
        if not self._opened.wait(timeout):
            raise ToolError(f"the project's stores did not open within {timeout:g} s — `codemem status` shows what holds them")
        if self._error is not None:
            raise self._error
        return self._handle

    def call(self, tool: Any, *args: Any, **kwargs: Any) -> Any:
        """``ProjectHandle.call`` once the handle is open."""
        return self.wait().call(tool, *args, **kwargs)

    @property
    def is_owner(self) -> bool:
        """True when the handle is open and this process holds the stores."""
        return self._handle is not None and self._handle.is_owner

    @property
    def backend(self) -> Any:
        """The open handle's backend (None while opening)."""
        return self._handle.backend if self._handle is not None else None

    def close(self) -> None:
        """Close the handle: an opening in progress is waited for, then closed."""
        self._closing = True
        if self._thread is not None:
            self._opened.wait(CLOSE_WAIT_S)
        if self._handle is not None:
            self._handle.close()


def _indexed(service: Any) -> bool:
    """True when the project's code collection holds symbols."""
    from pipelines.indexer import CODE_COLLECTION

    try:
        return service.vectors.count(CODE_COLLECTION) > 0
    except Exception:  # noqa: BLE001 - none yet (a Qdrant server answers 404): the first build creates it
        return False


def start_first_build(handle: Any) -> Any:
    """On a project never indexed (its manifest holds no file: a cheap check, the code collection
    stays unloaded for a first call that does not need it), start its first build now, before the
    first call is served (a code_search waits for its first symbols); returns ``handle``.
    ``warm_up`` starts it too when the code collection turns out empty."""
    if handle.is_owner and not handle.backend.manifest.has_files():
        handle.backend.start_background_index()
    return handle


def warm_up(handle: Any) -> None:
    """What ``codemem mcp`` does once its handle is open, in the order a first call needs it: load
    the code collection, the local embedding model (one uncached query embedding) and the memory
    collections a first search reads, then start bringing the index up to date in the background
    (that run refreshes the design layer; on a project never indexed it starts first, as
    code_search waits for it), then start the embedded graph (memory writes and graph walks use
    it). All of it once the command's own imports are done (``query_server.import_phase``: two
    threads importing at once can see a module half-initialized, or none). A process that forwards to an owner has nothing to warm; a closing one stops between steps."""
    if not handle.is_owner:
        from resources.embeddings.local import LocalMiniLMEmbedder

        LocalMiniLMEmbedder.discard_preloaded()  # the owner embeds; this process forwards
        return
    wait_for_end()  # warming imports (stores, the graph client): after `codemem mcp`'s own imports
    service = handle.backend
    indexed = _indexed(service)  # also loads the code collection
    if not indexed:
        service.start_background_index()  # (start_first_build started it already, when used)
    embedder = getattr(service.embedder, "inner", service.embedder)
    if callable(getattr(embedder, "load", None)) and not service.closing:  # the local model; a remote API needs no loading
        embedder.embed_query("warm up")
    service.memory.open_collections(stop=lambda: service.closing)  # else ~0.1 s of the first memory_search
    if service.closing:
        return
    if indexed:
        service.start_background_index()
    graph = service.graph
    if hasattr(graph, "started") and not service.closing:
        graph.store  # noqa: B018 - starts the lazily started embedded graph now (the warm thread waits, no call does)
    settle_heap()  # what opening and warming built stays: out of the collector's walks

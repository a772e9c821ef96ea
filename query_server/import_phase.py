"""No garbage collection while a server process imports its modules.

Importing the MCP SDK, pydantic and the tool registry allocates a few hundred thousand objects and
frees almost none: the collector runs full collections over them for nothing (~0.1 s of a
``codemem mcp`` start on a 2-core machine, before its first tool call can be served). ``begin``
turns collection off; ``end`` moves everything imported so far out of the collector's way for
good (``gc.freeze``: later collections no longer walk the modules' objects) and turns it back on;
``settle_heap`` does the same for what a server opened and warmed after its imports.
Background work that would import beside the phase (two threads importing at once can see a module
half-initialized) waits for its end: ``wait_for_end``. Standard library only.
"""

from __future__ import annotations

import gc
import threading

_ended = threading.Event()
_ended.set()  # no phase yet: nothing to wait for

END_WAIT_S = 60.0
"""How long ``wait_for_end`` waits at most (a phase that never ends must not stall the server)."""


def begin_import_phase() -> None:
    """Stop automatic garbage collection until ``end_import_phase``."""
    _ended.clear()
    gc.disable()


def end_import_phase() -> None:
    """Freeze what was imported and turn automatic garbage collection back on."""
    gc.freeze()
    gc.enable()
    _ended.set()


def settle_heap() -> None:
    """Collect once, then freeze what a server built to serve (stores, model, caches' owners):
    its long-lived objects leave the collector's walks for good. A full collection walks every
    tracked object (~0.5 µs each here): with a service's modules and stores unfrozen it took
    40–100 ms, paid by whichever call triggered it (bench.duplicates at 100,000 symbols: five a
    pass, the slowest calls). Objects frozen here are still freed by reference counting."""
    gc.collect()
    gc.freeze()


def wait_for_end(timeout_s: float = END_WAIT_S) -> None:
    """Return once no import phase is running (at once when none began)."""
    _ended.wait(timeout_s)

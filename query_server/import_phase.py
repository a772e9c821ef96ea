"""No garbage collection while a server process imports its modules.

Importing the MCP SDK, pydantic and the tool registry allocates a few hundred thousand objects and
frees almost none: the collector runs full collections over them for nothing (~0.1 s of a
``codemem mcp`` start on a 2-core machine, before its first tool call can be served). ``begin``
turns collection off; ``end`` moves everything imported so far out of the collector's way for
good (``gc.freeze``: later collections no longer walk the modules' objects) and turns it back on.
Standard library only.
"""

from __future__ import annotations

import gc


def begin_import_phase() -> None:
    """Stop automatic garbage collection until ``end_import_phase``."""
    gc.disable()


def end_import_phase() -> None:
    """Freeze what was imported and turn automatic garbage collection back on."""
    gc.freeze()
    gc.enable()

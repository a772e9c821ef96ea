"""Import structlog without the parts of rich it loads for its console renderer.

When rich is installed (codemem's CLI uses it), ``import structlog`` also imports rich's traceback
and pretty-printer modules, and through them pygments and attrs: ~50 ms of every process start on
a 2-core machine, before a no-change ``codemem index`` can answer or ``codemem mcp`` its first
call. structlog uses them only in ``structlog.dev.ConsoleRenderer`` and its rich tracebacks;
codemem renders JSON lines (``query_server.cli.common.structure_log_lines``) and uses neither.
``import_structlog`` imports structlog first, with the rich modules not loaded yet kept from this
one import (structlog then takes rich for absent, as it is written to); rich stays whole for
everything else. Standard library only.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec


class _RichHidden:
    """A meta path finder (``importlib.abc.MetaPathFinder``, whose import costs more than this
    saves) that refuses the rich modules not loaded yet, to the thread importing structlog only."""

    def __init__(self) -> None:
        self._thread = threading.get_ident()

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if threading.get_ident() == self._thread and (fullname == "rich" or fullname.startswith("rich.")):
            raise ImportError(f"{fullname} is not loaded for structlog", name=fullname)
        return None


def import_structlog() -> None:
    """Import structlog (once; nothing when it is imported already) without rich's traceback and
    pretty-printer modules; call it before anything imports structlog."""
    if "structlog" in sys.modules:
        return
    hidden = _RichHidden()
    sys.meta_path.insert(0, hidden)
    try:
        import structlog  # noqa: F401 - the import is the point
    finally:
        sys.meta_path.remove(hidden)

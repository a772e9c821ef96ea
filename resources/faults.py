"""Named crash points for the fault tests: a process started with ``CODEMEM_FAULT_POINT=<name>``
kills itself with SIGKILL when it reaches that point (no cleanup, like a power cut or OOM kill).

Tests that cannot afford a process per crash arm a point in their own process with
:func:`raising_at` instead: reaching it raises :class:`FaultInjected` (a ``BaseException``, so no
``except Exception`` on the way swallows it, as nothing can catch a SIGKILL), which abandons the
work at exactly that point.

Unset in normal runs; the check is one environment lookup and one set lookup.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "CODEMEM_FAULT_POINT"
_armed: set[str] = set()


class FaultInjected(BaseException):  # noqa: N818 - named for what it stands for, not an error
    """Raised at a fault point armed in this process by :func:`raising_at`."""


def fault_point(name: str) -> None:
    """Die here, at once, if the fault tests asked for ``name`` (or raise, when armed in-process)."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if name in _armed:
        _armed.discard(name)  # once, as a kill happens once
        raise FaultInjected(name)


@contextmanager
def raising_at(name: str) -> Iterator[None]:
    """Within the block, the first time this process reaches fault point ``name`` it raises
    :class:`FaultInjected` (disarmed on exit if it was never reached)."""
    _armed.add(name)
    try:
        yield
    finally:
        _armed.discard(name)

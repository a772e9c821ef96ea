"""Named crash points for the fault tests: a process started with ``CODEMEM_FAULT_POINT=<name>``
kills itself with SIGKILL when it reaches that point (no cleanup, like a power cut or OOM kill).

Unset in normal runs; the check is one environment lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "CODEMEM_FAULT_POINT"


def fault_point(name: str) -> None:
    """Die here, at once, if the fault tests asked for ``name``."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)

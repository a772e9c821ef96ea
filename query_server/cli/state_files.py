"""Checking a project's state files: each SQLite file (the memory ledger, the index manifest, the
embedding cache, Dagster's storage) with ``PRAGMA integrity_check``, each embedded vector
collection by opening it, the embedded graph by starting its server and pinging it.

``codemem repair`` fixes what ``scan`` finds; every command names a corrupted file
(``describe_broken_state``) when the stores do not open.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resources.sqlite import integrity_problem

LEDGER, MANIFEST, CACHE = "memory.db", "index.db", "embedding_cache.sqlite3"


@dataclass
class Finding:
    """One state file and what is wrong with it (``problem`` None: fine)."""

    store: str
    path: str
    problem: str | None = None
    action: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def sqlite_problem(path: Path) -> str | None:
    """What ``PRAGMA integrity_check`` (or opening) says is wrong with ``path``; None when sound or
    absent (an empty ledger or manifest was truncated: codemem writes its schema on first open)."""
    return integrity_problem(path, empty_is_truncated=path.name in (LEDGER, MANIFEST))


def _sqlite_files(state_dir: Path) -> list[tuple[str, Path]]:
    found = [("ledger", state_dir / LEDGER), ("manifest", state_dir / MANIFEST), ("embedding cache", state_dir / CACHE)]
    dagster = state_dir / "dagster"
    if dagster.is_dir():
        found += [("dagster storage", p) for p in sorted(dagster.rglob("*.db"))]
    return found


def _vector_problems(state_dir: Path) -> list[Finding]:
    from resources.vectors.edge import EdgeVectorStore
    from resources.vectors.store import VectorStoreError

    root = state_dir / "qdrant"
    if not root.is_dir():
        return []
    findings = []
    for collection in sorted(p for p in root.iterdir() if p.is_dir() and ".corrupt-" not in p.name):
        store = EdgeVectorStore(root)
        finding = Finding("vector collection", str(collection))
        try:
            store.count(collection.name)
        except VectorStoreError as exc:
            finding.problem = str(exc).split(" — ")[0]
        except Exception as exc:  # noqa: BLE001 - the engine's own errors
            finding.problem = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                store.close()
            except Exception:  # noqa: BLE001, S110 - a shard that never opened
                pass
        findings.append(finding)
    return findings


def _graph_problem(state_dir: Path) -> Finding:
    from resources.graph.falkor import FalkorGraphStore

    path = state_dir / "graph"
    finding = Finding("graph", str(path))
    if not path.exists():
        return finding
    try:
        store = FalkorGraphStore(path)
    except Exception as exc:  # noqa: BLE001 - GraphUnavailable or the server's own error
        finding.problem = f"{type(exc).__name__}: {exc}"
        return finding
    try:
        health = store.health()
        if not health.get("ok"):
            finding.problem = str(health.get("error"))
    finally:
        store.close()
    return finding


def scan(state_dir: Path, *, stores: bool = True) -> list[Finding]:
    """Every state file with its problem (``stores``: also open the vector collections and the graph)."""
    findings = [Finding(name, str(path), sqlite_problem(path)) for name, path in _sqlite_files(state_dir) if path.exists()]
    if stores:
        findings += _vector_problems(state_dir)
        findings.append(_graph_problem(state_dir))
    return findings


MIN_FREE_BYTES = 1 << 20


def disk_full(state_dir: Path) -> str | None:
    """A message when the filesystem of ``state_dir`` is (nearly) full, else None."""
    try:
        free = shutil.disk_usage(state_dir if state_dir.exists() else state_dir.parent).free
    except OSError:
        return None
    if free >= MIN_FREE_BYTES:
        return None
    return (f"the disk holding {state_dir} is full ({free} bytes free) — free some space, then run the command "
            "again (writes are transactional: nothing was left half-written)")


def describe_broken_state(state_dir: Path) -> str | None:
    """One line naming the corrupted SQLite state files and what to do (None when none is): for
    the CLI's error when the stores do not open."""
    full = disk_full(state_dir)
    if full:
        return full
    broken = [f for f in scan(state_dir, stores=False) if f.problem]
    if not broken:
        return None
    names = "; ".join(f"{f.path} ({f.store}) is corrupted: {f.problem}" for f in broken)
    return f"{names} — run `codemem repair` (it restores or rebuilds it and keeps the damaged file aside)"

"""What an index run works with and reports: the project's stores (``IndexContext``), the run's
report (``IndexReport``), the code collection's name and the progress callback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resources.graph.store import GraphStore
from resources.manifest import Manifest
from resources.settings import Settings
from resources.vectors.store import VectorStore

CODE_COLLECTION = "code"
CALLABLE_LANGUAGE = "callable_language"
"""Payload field of a function, method or constructor: its language (absent on other symbols).
find_duplicates filters on it, one condition where ``kind`` (3 values) and ``language`` were two:
at 100,000 symbols the filter cost more than the search (docs/benchmarks.md, find_duplicates).
A collection written before it is filled in by ``pipelines.index_stores.ensure_code_collection``."""
CODE_INDEXES = (
    "file_path", "language", "kind", "name", "path_prefixes", "qualified_name", "path_qualified_name", "container",
    "requirement_ids", CALLABLE_LANGUAGE,
)
"""The code collection's payload indexes: the fields code_search, find_duplicates, the design
layer and the derivations filter on."""
CODE_DENSE_FILTERS = ("language", "kind", "path_prefixes", CALLABLE_LANGUAGE)
"""The fields a dense search of the code collection filters on (code_search's language, kind and
directory, find_duplicates' callables): what the embedded store keeps with the dense vectors it
holds apart from the points (``resources.vectors.edge.DENSE_APART``)."""
CODE_WRITE_AHEAD_LOG = False
"""The code collection keeps no write-ahead log (qdrant-edge's: two 32 MB segments, 37 MB of the
80 MB of a 2,000-file C tree's points, and every point written twice). Its points are derived from
the files and the manifest records which are written: every writer flushes the collection
(``VectorStore.flush``) before the manifest commit that records its points (a file's, a
deletion's, a batch of dense vectors), and an interrupted write is redone from the manifest's
in-flight rows, so a crash loses no point the manifest claims."""

RUN_FAILED = "(index run)"
"""The path of a ``failed`` entry about the run as a whole rather than one file."""
STOPPED_BEFORE = "the run was stopped before this file: the next run indexes it"
"""The skip reason of the changed files a stopped run did not reach."""

Progress = Callable[[str, int, int], None]
"""progress(phase, done, total): phases are discover, parse, resolve, embed."""


def _no_progress(phase: str, done: int, total: int) -> None:
    return None



def failure_line(failed: list[dict[str, str]], shown: int = 10) -> str:
    """``N file(s) failed: path (error); ...`` for a report's ``failed`` entries (JSON form)."""
    listed = "; ".join(f"{item['path']} ({item['error']})" for item in failed[:shown])
    more = f"; and {len(failed) - shown} more" if len(failed) > shown else ""
    return f"{len(failed)} file(s) failed: {listed}{more}"


@dataclass(frozen=True)
class EdgeScope:
    """The recorded edges a run's resolution can have changed: those that start in ``sources`` (the
    nodes it resolved again, and those it rewrote) or end in ``targets`` (the nodes it rewrote:
    an edge into one from a file out of scope was removed and put back)."""

    sources: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()


@dataclass(slots=True)
class IndexReport:
    """What an index run did; printed as the summary and returned by the index tools."""

    root: str = ""
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """Paths not indexed, with the reason (an unreadable folder is one entry, its path ending in /)."""
    failed: list[tuple[str, str]] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    """Files listed at the start of the run and gone when it came to read them."""
    files_with_syntax_errors: list[str] = field(default_factory=list)
    symbols_written: int = 0
    symbols_total: int = 0
    edges_added: int = 0
    edges_removed: int = 0
    edges_total: int = 0
    dense_done: int = 0
    dense_total: int = 0
    seconds: float = 0.0
    git_aware: bool = False
    notes: list[str] = field(default_factory=list)
    design: dict[str, Any] | None = None
    """What the design step (documents, links, patterns, anchors) did after the run."""
    resolved_scope: EdgeScope | None = field(default=None, repr=False)
    """The edges the run's resolution can have changed (``EdgeChanges.scope``): what a check of the
    run's edges reads; None when it resolved the whole repository (or the run did not say)."""

    @property
    def ok(self) -> bool:
        """True when nothing failed (skips with a reason are fine)."""
        return not self.failed

    def failure_summary(self, shown: int = 10) -> str:
        """One line naming the failed files with their errors (the first ``shown``)."""
        return failure_line([{"path": p, "error": e} for p, e in self.failed], shown)

    @property
    def unaccounted(self) -> int:
        """Files seen minus those the report accounts for; 0 in every run, for the invariant
        seen = indexed + unchanged + skipped + failed + vanished."""
        failed = sum(1 for path, _ in self.failed if path != RUN_FAILED)
        return self.files_seen - (
            self.files_indexed + self.files_unchanged + len(self.skipped) + failed + len(self.vanished)
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "root": self.root,
            "files_seen": self.files_seen,
            "files_indexed": self.files_indexed,
            "files_unchanged": self.files_unchanged,
            "files_deleted": self.files_deleted,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "failed": [{"path": p, "error": e} for p, e in self.failed],
            "vanished": self.vanished,
            "files_with_syntax_errors": self.files_with_syntax_errors,
            "symbols_written": self.symbols_written,
            "symbols_total": self.symbols_total,
            "edges_added": self.edges_added,
            "edges_removed": self.edges_removed,
            "edges_total": self.edges_total,
            "dense_done": self.dense_done,
            "dense_total": self.dense_total,
            "seconds": round(self.seconds, 3),
            "git_aware": self.git_aware,
            "notes": self.notes,
            "design": self.design,
        }


@dataclass
class IndexContext:
    """The stores one project is indexed into."""

    settings: Settings
    vectors: VectorStore
    graph: GraphStore
    manifest: Manifest
    embedder: Any  # resources.embeddings.Embedder, created lazily by the caller
    write_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def root(self) -> Path:
        """The resolved project root."""
        return self.settings.resolved_root()


def total_report(settings: Settings, manifest: Manifest, report: IndexReport, started: float) -> IndexReport:
    """The totals of a run's report (symbols, edges, dense vectors, seconds) from the manifest, and
    what its counts say is wrong (no source file found, files unaccounted for)."""
    if report.files_seen == 0:
        from pipelines.discovery import ignored_source_file

        extensions = ", ".join(settings.extensions)
        ignored = ignored_source_file(settings.resolved_root(), settings.extensions)
        report.notes.append(
            f"no source file to index under {report.root}: every one is excluded by a .gitignore or the "
            f".codememignore (e.g. {ignored}) — codemem indexes what git would list: take "
            f"the pattern out (in a git repository `git check-ignore -v {ignored}` names it; Debian's kernel source "
            "ignores `/*` at its top)"
            if ignored else
            f"no source files found under {report.root} (indexed extensions: {extensions}) — check the path, "
            "or set CODEMEM_EXTENSIONS"
        )
    report.dense_done, report.dense_total = manifest.dense_counts()
    counts = manifest.counts()
    report.symbols_total = counts["symbols"]
    report.edges_total = counts["resolved_edges"]
    report.seconds = time.perf_counter() - started
    if report.unaccounted:
        report.notes.append(f"the counts miss {report.unaccounted} file(s): seen != indexed + unchanged + skipped + "
                            "failed + vanished (a codemem bug; please report it)")
    return report


LAST_INDEX_KEY = "last_index"
"""The manifest's meta key of the last index run's report (``index_status`` shows it)."""


def remember_report(manifest: Manifest, report: IndexReport) -> None:
    """Keep ``report`` in the manifest as the last index run's."""
    manifest.set_meta(LAST_INDEX_KEY, json.dumps(report.as_dict()))

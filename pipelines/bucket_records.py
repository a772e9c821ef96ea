"""Per-bucket records of an index run: what the Dagster UI shows for each partition a run touched.

An index run works file by file (``pipelines.indexer.index_project``); the Dagster assets are
partitioned by path-hash bucket (``pipelines.buckets``). ``BucketTracker`` follows the run's
files into their buckets and hands each touched bucket's record to a callback as soon as that
bucket is complete (all its changed files written or failed, no deletion left to do), so a
recorder can write the bucket's materializations while the run goes on. A bucket with nothing
changed, deleted or failed is not recorded: its partitions keep their last real record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pipelines.buckets import bucket_of

PREVIEW_ROWS = 20
"""Rows a metadata table shows; the rest are counted in a last row."""


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table of the first ``PREVIEW_ROWS`` rows (cells escaped), the rest counted."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows[:PREVIEW_ROWS]]
    if len(rows) > PREVIEW_ROWS:
        lines.append(f"| … {len(rows) - PREVIEW_ROWS} more |" + " |" * (len(headers) - 1))
    return "\n".join(lines)


@dataclass(slots=True)
class BucketRecord:
    """What one run did to one bucket's files."""

    bucket: str
    listed: int = 0
    """Files of the bucket on disk that the run looked at."""
    unchanged: int = 0
    changed: list[tuple[str, str, str]] = field(default_factory=list)
    """(path, language, sha256) of each file whose content differed from the index."""
    written: list[tuple[str, str, str, int, int, int, int]] = field(default_factory=list)
    """(path, sha256, indexed_at, symbols, syntax errors, nodes, edges) of each file written."""
    points_written: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    @property
    def touched(self) -> bool:
        """True when the run changed, deleted or failed something in the bucket."""
        return bool(self.changed or self.deleted or self.failed)

    def asset_metadata(self) -> dict[str, dict[str, Any]]:
        """The metadata of each per-bucket asset's materialization (JSON values; ``{"md": text}``
        is a Markdown table)."""
        written_rows = [[path, sha[:12], at, symbols] for path, sha, at, symbols, *_ in self.written]
        parsed_rows = [[path, symbols, errors] for path, _, _, symbols, errors, *_ in self.written]
        return {
            "source_files": {
                "files": self.listed,
                "changed": len(self.changed),
                "unchanged": self.unchanged,
                "deleted": len(self.deleted),
                "skipped": len(self.skipped),
                "changed_files": {"md": markdown_table(["path", "language", "sha256"], [[p, lang, sha[:12]] for p, lang, sha in self.changed])},
                "skipped_files": {"md": markdown_table(["path", "reason"], [list(s) for s in self.skipped])},
            },
            "parsed_files": {
                "files_parsed": len(self.written),
                "symbols": sum(row[3] for row in self.written),
                "files_with_syntax_errors": sum(1 for row in self.written if row[4]),
                "failed": len(self.failed),
                "parsed": {"md": markdown_table(["path", "symbols", "syntax errors"], parsed_rows)},
                "failures": {"md": markdown_table(["path", "error"], [list(f) for f in self.failed])},
            },
            "embedded_symbols": {
                "points_written": self.points_written,
            },
            "graph_loaded": {
                "files_written": len(self.written),
                "files_deleted": len(self.deleted),
                "nodes": sum(row[5] for row in self.written),
                "edges": sum(row[6] for row in self.written),
                "indexed_versions": {"md": markdown_table(["path", "sha256", "indexed_at", "symbols"], written_rows)},
                "deleted_files": {"md": markdown_table(["path"], [[p] for p in self.deleted])},
            },
        }


class BucketTracker:
    """Follows an index run's files into their buckets and emits each touched bucket once, when
    it is complete.

    Args:
        emit: Receives each touched bucket's record (from the thread running the index).
        known: Paths indexed before the run (a listed file of these that is skipped or vanishes
            is deleted at the end of the run, so its bucket waits for that).
    """

    def __init__(self, emit: Callable[[BucketRecord], None], known: Iterable[str]) -> None:
        self._emit = emit
        self._known = set(known)
        self._records: dict[str, BucketRecord] = {}
        self._waiting: Counter[str] = Counter()
        self._held: set[str] = set()
        self._emitted: set[str] = set()

    def _record(self, path: str) -> BucketRecord:
        bucket = bucket_of(path)
        record = self._records.get(bucket)
        if record is None:
            record = self._records[bucket] = BucketRecord(bucket=bucket)
        return record

    def listed(self, path: str) -> None:
        """A file of the run's listing."""
        self._record(path).listed += 1

    def unchanged(self, path: str) -> None:
        """A listed file whose content is indexed already."""
        self._record(path).unchanged += 1

    def changed(self, path: str, language: str, content_hash: str) -> None:
        """A listed file to (re)index."""
        record = self._record(path)
        record.changed.append((path, language, content_hash))
        self._waiting[record.bucket] += 1

    def skipped(self, path: str, reason: str, *, changed: bool) -> None:
        """A file not indexable now (``changed``: it was one of the files to index; it is counted
        as skipped, no longer as changed)."""
        record = self._record(path)
        record.skipped.append((path, reason))
        self._drop_changed(record, path, changed)
        self._settle(record, path, changed, leaves_index=True)

    def failed(self, path: str, error: str, *, changed: bool) -> None:
        """A file that failed (what was indexed of it stays)."""
        record = self._record(path)
        record.failed.append((path, error))
        self._settle(record, path, changed, leaves_index=False)

    def vanished(self, path: str, *, changed: bool) -> None:
        """A listed file gone before it could be read (counted as vanished, no longer as changed)."""
        record = self._record(path)
        record.vanished.append(path)
        self._drop_changed(record, path, changed)
        self._settle(record, path, changed, leaves_index=True)

    @staticmethod
    def _drop_changed(record: BucketRecord, path: str, changed: bool) -> None:
        if changed:
            record.changed[:] = [entry for entry in record.changed if entry[0] != path]

    def written(self, files: Iterable[Any]) -> None:
        """A batch of files (``pipelines.index_writes.FileSubgraph``) now in every store."""
        for f in files:
            state = f.state
            record = self._record(state.path)
            record.written.append((state.path, state.content_hash, state.indexed_at, state.symbol_count,
                                   state.error_count, len(f.nodes), len(f.edges)))
            record.points_written += f.point_count
            self._settle(record, state.path, True, leaves_index=False)

    def write_failed(self, files: Iterable[Any], error: str) -> None:
        """A batch whose store write failed (prepared files or ``FileSubgraph``s: their files are
        redone by the next run)."""
        for f in files:
            self.failed(f.state.path, error, changed=True)

    def deleted(self, paths: Iterable[str]) -> None:
        """Files removed from the index at the end of the run."""
        for path in paths:
            self._record(path).deleted.append(path)

    def finish(self) -> None:
        """Emit every touched bucket not emitted yet (those with deletions, those a stopped run
        left incomplete)."""
        for bucket in sorted(self._records):
            record = self._records[bucket]
            if bucket not in self._emitted and (record.touched or record.written):
                self._emitted.add(bucket)
                self._emit(record)

    def _settle(self, record: BucketRecord, path: str, changed: bool, *, leaves_index: bool) -> None:
        """One of the bucket's files has its outcome; emit the bucket when it was the last."""
        if leaves_index and path in self._known:
            self._held.add(record.bucket)  # removed from the index at the end of the run
        if not changed:
            return
        self._waiting[record.bucket] -= 1
        if self._waiting[record.bucket] == 0 and record.bucket not in self._held and record.bucket not in self._emitted:
            self._emitted.add(record.bucket)
            self._emit(record)

    def hold(self, paths: Iterable[str]) -> None:
        """Buckets of these paths wait for the end of the run (files indexed before and not on
        disk now: deleted at the end)."""
        for path in paths:
            self._held.add(bucket_of(path))


def summary_metadata(numbers: dict[str, Any], notes: list[str], seconds: float) -> dict[str, Any]:
    """An unpartitioned asset's JSON metadata: its integer numbers, its notes as a Markdown list,
    and the seconds it took."""
    metadata: dict[str, Any] = {k: v for k, v in numbers.items() if isinstance(v, int) and not isinstance(v, bool)}
    metadata["notes"] = {"md": "\n".join(f"- {n}" for n in notes[:50]) or "none"}
    metadata["seconds"] = round(seconds, 3)
    return metadata

"""Hash buckets of repo-relative paths: the partitions of the per-file Dagster assets.

Dagster advises against one partition per file (≤100,000 partitions per asset, and a UI that
slows long before that), so files are grouped into ``BUCKET_COUNT`` stable buckets by a CRC-32
of their repo-relative path. A file never changes bucket unless it is renamed; a bucket of a
repository with n files holds about n / 256 of them (20 for a 5,000-file repository).
``codemem which-partition FILE`` names a file's bucket.
"""

from __future__ import annotations

import zlib

BUCKET_COUNT = 256
ALL_BUCKETS: tuple[str, ...] = tuple(f"b{i:02x}" for i in range(BUCKET_COUNT))
"""Partition keys ``b00`` … ``bff``, in order (a contiguous key range covers them all)."""


def bucket_of(path: str) -> str:
    """The partition key of a repo-relative POSIX path (stable across runs and machines)."""
    return ALL_BUCKETS[zlib.crc32(path.encode("utf-8")) % BUCKET_COUNT]

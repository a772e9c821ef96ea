"""Exceptions raised by the parsing package."""

from __future__ import annotations


class ParseTimeout(Exception):
    """Parsing one file took longer than its time limit; the caller should skip the file.

    Attributes:
        path: The file that timed out.
        timeout_s: The limit that was exceeded, in seconds.
    """

    def __init__(self, path: str, timeout_s: float) -> None:
        super().__init__(f"parsing {path} exceeded {timeout_s:g}s")
        self.path = path
        self.timeout_s = timeout_s

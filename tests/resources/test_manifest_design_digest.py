"""The manifest keeps each file's design digest (``pipelines.design.digest``) and signs the file
set with it; a manifest of an earlier release, without the column, opens, gains it, and counts its
files by content hash and index time until they are indexed again (issue 18: the design
derivation skipped while what it reads is unchanged)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from resources.manifest import FileState, Manifest

OLD_FILES_TABLE = """CREATE TABLE files (path TEXT PRIMARY KEY, language TEXT NOT NULL, content_hash TEXT NOT NULL,
size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, indexed_at TEXT NOT NULL, symbol_count INTEGER NOT NULL,
error_count INTEGER NOT NULL, refs TEXT NOT NULL)"""


def _file(path: str, content_hash: str, indexed_at: str, design: str | None) -> FileState:
    return FileState(path, "python", content_hash, 10, 1, indexed_at, 1, 0, design)


def _write(manifest: Manifest, *states: FileState) -> None:
    with manifest.transaction() as conn:
        manifest.replace_files(conn, [(state, {"imports": [], "calls": [], "types": []}, []) for state in states])


def test_the_signature_follows_design_digests_not_bytes(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "index.db")
    try:
        _write(manifest, _file("a.py", "h1", "t1", "tag:d1"), _file("b.py", "h2", "t1", "tag:d2"))
        signed = manifest.design_signature("tag")
        _write(manifest, _file("a.py", "h1-edited", "t2", "tag:d1"))  # new bytes, same design digest
        assert manifest.design_signature("tag") == signed
        _write(manifest, _file("a.py", "h1-edited", "t3", "tag:d1-other"))
        assert manifest.design_signature("tag") != signed
        signed = manifest.design_signature("tag")
        _write(manifest, _file("c.py", "h3", "t3", "tag:d1"))  # a file added
        assert manifest.design_signature("tag") != signed
        # a digest of other doc globs does not count: the file counts by its bytes and index time
        other = manifest.design_signature("other-globs")
        _write(manifest, _file("a.py", "h1-edited", "t4", "tag:d1-other"))
        assert manifest.design_signature("other-globs") != other
    finally:
        manifest.close()


def test_a_manifest_without_the_column_opens_and_counts_its_files_by_bytes(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "index.db")
    raw.execute(OLD_FILES_TABLE)
    raw.execute("INSERT INTO files VALUES ('a.py', 'python', 'h1', 10, 1, 't1', 1, 0, '{}')")
    raw.commit()
    raw.close()
    manifest = Manifest(tmp_path / "index.db")
    try:
        before = manifest.design_signature("tag")
        assert manifest.files()["a.py"].content_hash == "h1"
        _write(manifest, _file("a.py", "h1", "t2", None))  # indexed again by a writer without digests
        assert manifest.design_signature("tag") != before
        _write(manifest, _file("a.py", "h1", "t3", "tag:d1"))
        signed = manifest.design_signature("tag")
        _write(manifest, _file("a.py", "h1-edited", "t4", "tag:d1"))
        assert manifest.design_signature("tag") == signed
    finally:
        manifest.close()


def test_each_file_remembers_the_write_that_replaced_it(tmp_path: Path) -> None:
    """``written_after(seq)``: the files written since ``FILES_WRITTEN`` was ``seq`` (the nodes a
    derived layer's edges were lost with); a manifest of an earlier release counts its files as
    written when it gains the column, so nothing is missed."""
    from resources.manifest import FILES_WRITTEN

    manifest = Manifest(tmp_path / "index.db")
    try:
        _write(manifest, _file("a.py", "h1", "t1", None), _file("b.py", "h2", "t1", None))
        first = int(manifest.get_meta(FILES_WRITTEN) or 0)
        _write(manifest, _file("b.py", "h2-edited", "t2", None))
        assert manifest.written_after(first) == ["b.py"]
        assert manifest.written_after(first - 1) == ["a.py", "b.py"]
        assert manifest.written_after(first + 1) == []
    finally:
        manifest.close()
    raw = sqlite3.connect(tmp_path / "old.db")
    raw.execute(OLD_FILES_TABLE)
    raw.execute("INSERT INTO files VALUES ('a.py', 'python', 'h1', 10, 1, 't1', 1, 0, '{}')")
    raw.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    raw.execute("INSERT INTO meta VALUES (?, '7')", (FILES_WRITTEN,))
    raw.commit()
    raw.close()
    old = Manifest(tmp_path / "old.db")
    try:
        assert old.written_after(6) == ["a.py"]  # written at or before the 7th write, as far as anyone can tell
        assert old.written_after(7) == []
    finally:
        old.close()

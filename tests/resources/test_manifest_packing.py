"""The manifest's largest column (a file's references) is stored zlib-compressed and read back
unchanged, and a manifest written before (plain text rows) still reads (issue 21, item 2: state
on disk)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from resources.manifest import FileState, Manifest, SymbolRow

REFS = {"imports": [{"module": "os.path", "names": ["join"]}] * 40, "calls": [["read_config", 12]] * 60, "declarations": ["s1"]}
TEXT = "def read_config(path):\n    '''Read the configuration file at path.'''\n" + "    x = 1\n" * 80


def _file(path: str) -> FileState:
    return FileState(path, "python", "hash-" + path, 10, 1, "2026-11-27T00:00:00", 1, 0)


def _symbol(sid: str, path: str) -> SymbolRow:
    return SymbolRow(sid, path, "read_config", "read_config", f"{path}.read_config", "function", None, "python", TEXT, False)


def test_refs_are_stored_compressed_and_read_back_unchanged(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "index.db")
    with manifest.transaction() as conn:
        manifest.replace_files(conn, [(_file("pkg/a.py"), REFS, [_symbol("s1", "pkg/a.py")])])
    assert manifest.refs_of(["pkg/a.py"]) == {"pkg/a.py": REFS}
    assert manifest.all_refs() == {"pkg/a.py": ("python", REFS)}
    assert manifest.declarations(["pkg/a.py"]) == {"s1"}
    assert manifest.pending_dense(10) == [("s1", TEXT)]
    assert manifest.still_pending([("s1", TEXT)]) == {"s1"} and manifest.still_pending([("s1", "other text")]) == set()
    manifest.close()

    raw = sqlite3.connect(tmp_path / "index.db")
    refs_type, refs_bytes = raw.execute("SELECT typeof(refs), length(refs) FROM files").fetchone()
    text_type, text_bytes = raw.execute("SELECT typeof(embed_text), length(embed_text) FROM symbols").fetchone()
    raw.close()
    assert refs_type == "blob" and refs_bytes * 4 < len(json.dumps(REFS))
    assert text_type == "blob" and text_bytes * 2 < len(TEXT)  # embedding texts packed too


def test_a_text_packed_by_a_parse_worker_is_stored_as_packed(tmp_path: Path) -> None:
    from resources.manifest_store import pack

    manifest = Manifest(tmp_path / "index.db")
    symbol = _symbol("s1", "pkg/a.py")
    symbol.embed_packed = pack(TEXT)
    with manifest.transaction() as conn:
        manifest.replace_files(conn, [(_file("pkg/a.py"), REFS, [symbol])])
    assert manifest.pending_dense(10) == [("s1", TEXT)] and manifest.still_pending([("s1", TEXT)]) == {"s1"}
    with manifest.store.reading() as conn:
        assert conn.execute("SELECT embed_text FROM symbols").fetchone()[0] == symbol.embed_packed
    manifest.close()


def test_a_manifest_a_run_rewrote_is_compacted_and_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written in random key order leave pages part empty: a manifest a run rewrote most of is
    compacted (``VACUUM``) once it is large enough; one another connection is writing to is left
    as it is, readable."""
    from resources import manifest as manifest_module

    manifest = Manifest(tmp_path / "index.db")
    paths = [f"pkg/m{i:04d}.py" for i in range(1500)]
    for round_ in range(2):  # a rewrite of every file, in shuffled order: pages split, then half emptied
        order = sorted(paths, key=lambda p: hash((p, round_)))
        for start in range(0, len(order), 100):
            with manifest.transaction() as conn:
                manifest.replace_files(conn, [(_file(p), REFS, [_symbol(f"{p}-{round_}-{j}", p) for j in range(4)])
                                              for p in order[start:start + 100]])
    before = (tmp_path / "index.db").stat().st_size
    expected = (manifest.symbol_ids(), manifest.pending_dense(10))
    assert not manifest.compact_after_rewrite(6000)  # under COMPACT_FROM_BYTES: not worth it
    monkeypatch.setattr(manifest_module, "COMPACT_FROM_BYTES", 0)
    assert not manifest.compact_after_rewrite(10)  # a run that wrote a small part: not either
    other = sqlite3.connect(tmp_path / "index.db", timeout=0.1)
    other.execute("BEGIN IMMEDIATE")  # another connection writing
    try:
        assert not manifest.compact_after_rewrite(6000)
    finally:
        other.rollback()
        other.close()
    assert (manifest.symbol_ids(), manifest.pending_dense(10)) == expected
    wal = tmp_path / "index.db-wal"
    reader = sqlite3.connect(tmp_path / "index.db")
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM symbols").fetchone()  # a reader holds the log: not truncated, not "compacted"
    try:
        assert not manifest.compact_after_rewrite(6000)
    finally:
        reader.rollback()
        reader.close()
    assert manifest.compact_after_rewrite(6000)
    assert (tmp_path / "index.db").stat().st_size < before and wal.stat().st_size == 0
    assert (manifest.symbol_ids(), manifest.pending_dense(10)) == expected
    manifest.close()


def test_a_manifest_written_before_packing_still_reads(tmp_path: Path) -> None:
    Manifest(tmp_path / "index.db").close()
    raw = sqlite3.connect(tmp_path / "index.db")  # rows as an earlier release wrote them: plain text
    raw.execute("INSERT INTO files (path, language, content_hash, size, mtime_ns, indexed_at, symbol_count, error_count, refs) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ("old.py", "python", "h", 1, 1, "2026-11-01T00:00:00", 1, 0, json.dumps(REFS)))
    raw.execute("INSERT INTO symbols (id, path, name, local_name, qualified_name, kind, container, language, embed_text, has_dense) "
                "VALUES ('s0', 'old.py', 'f', 'f', 'old.f', 'function', NULL, 'python', ?, 0)", (TEXT,))
    raw.commit()
    raw.close()
    manifest = Manifest(tmp_path / "index.db")
    assert manifest.refs_of(["old.py"]) == {"old.py": REFS}
    assert manifest.pending_dense(10) == [("s0", TEXT)] and manifest.still_pending([("s0", TEXT)]) == {"s0"}
    with manifest.transaction() as conn:  # rewritten by a new release: packed from then on
        manifest.replace_files(conn, [(_file("old.py"), REFS, [_symbol("s0", "old.py")])])
    assert manifest.all_refs()["old.py"] == ("python", REFS)
    manifest.close()


def test_calls_are_read_only_for_the_files_a_resolution_asks_for(tmp_path: Path) -> None:
    """A file's calls are a column of their own: ``all_refs(calls_of=...)`` reads every file's
    imports and bases and the calls of the files asked for (a scoped resolution reads no other),
    ``refs_of`` and ``all_refs()`` the whole references; a row that keeps its calls in ``refs`` (an
    earlier release's) reads the same."""
    manifest = Manifest(tmp_path / "index.db")
    with manifest.transaction() as conn:
        manifest.replace_files(conn, [(_file("pkg/a.py"), REFS, [_symbol("s1", "pkg/a.py")]),
                                      (_file("pkg/b.py"), REFS, [_symbol("s2", "pkg/b.py")])])
    scoped = manifest.all_refs(calls_of=["pkg/a.py"])
    assert scoped["pkg/a.py"] == ("python", REFS)
    assert scoped["pkg/b.py"] == ("python", {k: v for k, v in REFS.items() if k != "calls"})
    assert manifest.all_refs() == {"pkg/a.py": ("python", REFS), "pkg/b.py": ("python", REFS)}
    assert manifest.refs_of(["pkg/b.py"]) == {"pkg/b.py": REFS}
    manifest.close()

    raw = sqlite3.connect(tmp_path / "index.db")  # b.py as an earlier release wrote it: calls in refs
    raw.execute("UPDATE files SET refs = ?, calls = NULL WHERE path = 'pkg/b.py'", (json.dumps(REFS),))
    raw.commit()
    raw.close()
    manifest = Manifest(tmp_path / "index.db")
    assert manifest.all_refs(calls_of=["pkg/b.py"])["pkg/b.py"] == ("python", REFS)
    assert manifest.refs_of(["pkg/b.py"]) == {"pkg/b.py": REFS}
    manifest.close()


def test_edge_tables_of_an_earlier_release_are_rebuilt_without_rowid(tmp_path: Path) -> None:
    """The edge tables are ``WITHOUT ROWID`` (a rowid table keeps its whole-row key twice); a
    manifest whose tables an earlier release made with a rowid gets them rebuilt on open, every
    row kept, and reads and writes them as before."""
    Manifest(tmp_path / "index.db").close()
    raw = sqlite3.connect(tmp_path / "index.db")  # the tables as an earlier release made them
    for table, columns in (("resolved_edges", "properties TEXT NOT NULL,"), ("unsettled_edges", "")):
        raw.execute(f"DROP TABLE {table}")
        raw.execute(f"CREATE TABLE {table} (source TEXT NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL, "
                    f"{columns} PRIMARY KEY (source, type, target))")
    raw.executemany("INSERT INTO resolved_edges VALUES (?, 'CALLS', ?, ?)",
                    [(f"s{i}", f"t{i}", json.dumps({"line_number": i})) for i in range(50)])
    raw.execute("INSERT INTO unsettled_edges VALUES ('s1', 'CALLS', 't1')")
    raw.commit()
    raw.close()

    manifest = Manifest(tmp_path / "index.db")
    assert manifest.resolved_edges() == {(f"s{i}", "CALLS", f"t{i}") for i in range(50)}
    assert ("s3", "t3", {"line_number": 3}) in manifest.resolved_edges_of_type("CALLS")
    assert manifest.unsettled_edges() == {("s1", "CALLS", "t1")}
    manifest.replace_resolved_edges([("s50", "CALLS", "t50", {"line_number": 50})], [("s0", "CALLS", "t0")])
    assert ("s50", "CALLS", "t50") in manifest.resolved_edges() and ("s0", "CALLS", "t0") not in manifest.resolved_edges()
    manifest.close()
    raw = sqlite3.connect(tmp_path / "index.db")
    declared = dict(raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
    raw.close()
    assert "WITHOUT ROWID" in declared["resolved_edges"] and "WITHOUT ROWID" in declared["unsettled_edges"]
    assert not any(name.endswith("_with_rowid") for name in declared)

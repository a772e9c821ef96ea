"""Incremental indexing end to end on the real embedded stores and the real local model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.indexer import CODE_COLLECTION
from resources.schemas.tools import CodeSearchInput, GetSymbolInput, GraphQueryInput, IndexInput
from tests.conftest import git_init, write_files

PY_FILES = {
    "pkg/__init__.py": "",
    "pkg/net.py": textwrap.dedent(
        '''
        """Networking helpers."""


        def fetch_url(url, timeout=10):
            """Download the body of a web page."""
            return _open(url).read()


        def _open(url):
            return open(url)
        '''
    ),
    "pkg/app.py": textwrap.dedent(
        '''
        from pkg.net import fetch_url


        class Base:
            def run(self):
                return None


        class Crawler(Base):
            """Walks a site."""

            def crawl(self, start):
                page = fetch_url(start)
                return self.parse(page)

            def parse(self, page):
                return page.split()
        '''
    ),
}


def consistency(svc) -> dict[str, set[str]]:
    """Symbol ids per store: they must agree."""
    manifest_ids = {s.id for s in svc.manifest.all_symbols()}
    vector_ids = svc.vectors.ids(CODE_COLLECTION)
    graph_ids = svc.graph.node_ids("Function") | svc.graph.node_ids("Class")
    return {"manifest": manifest_ids, "vectors": vector_ids, "graph": graph_ids}


def assert_consistent(svc) -> set[str]:
    ids = consistency(svc)
    assert ids["manifest"] == ids["vectors"] == ids["graph"]
    return ids["manifest"]


def test_full_incremental_cycle(project: Path, service_factory) -> None:
    write_files(project, PY_FILES)
    git_init(project)
    svc = service_factory(project)
    report = svc.index(IndexInput())
    assert report["failed"] == []
    assert report["files_indexed"] == 3
    assert report["dense_done"] == report["dense_total"] == report["symbols_total"] == 7
    first_ids = assert_consistent(svc)

    # cross-file resolution: crawl -> fetch_url (imported), crawl -> self.parse, Crawler EXTENDS Base
    rows = svc.graph_query(GraphQueryInput(
        cypher="MATCH (a:Function)-[:CALLS]->(b:Function) RETURN a.name AS caller, b.name AS callee ORDER BY caller, callee"
    )).results
    assert {(r["caller"], r["callee"]) for r in rows} >= {("crawl", "fetch_url"), ("crawl", "parse"), ("fetch_url", "_open")}
    ext = svc.graph_query(GraphQueryInput(cypher="MATCH (a:Class)-[:EXTENDS]->(b:Class) RETURN a.name AS a, b.name AS b")).results
    assert ext == [{"a": "Crawler", "b": "Base"}]
    imports = svc.graph_query(GraphQueryInput(cypher="MATCH (a:File)-[:IMPORTS]->(b:File) RETURN a.path AS a, b.path AS b")).results
    assert imports == [{"a": "pkg/app.py", "b": "pkg/net.py"}]

    # no-op: nothing re-parsed, same ids
    again = svc.index(IndexInput())
    assert (again["files_indexed"], again["files_unchanged"], again["edges_added"], again["edges_removed"]) == (0, 3, 0, 0)
    assert assert_consistent(svc) == first_ids

    # change: rename a function; the old one vanishes everywhere, callers re-resolve
    (project / "pkg/net.py").write_text(PY_FILES["pkg/net.py"].replace("def _open(url)", "def _open_file(url)").replace("_open(url).read()", "_open_file(url).read()"))
    changed = svc.index(IndexInput())
    assert changed["files_indexed"] == 1 and changed["files_unchanged"] == 2
    names = {s.name for s in svc.manifest.all_symbols()}
    assert "_open_file" in names and "_open" not in names
    assert_consistent(svc)
    rows = svc.graph_query(GraphQueryInput(cypher="MATCH (a:Function {name: 'crawl'})-[:CALLS]->(b) RETURN b.name AS b ORDER BY b")).results
    assert [r["b"] for r in rows] == ["fetch_url", "parse"], "the edge into the re-indexed file must survive"

    # rename a file, add one, delete one
    os.rename(project / "pkg/app.py", project / "pkg/crawler.py")
    write_files(project, {"pkg/extra.py": "def helper():\n    return fetch_url('x')\n"})
    (project / "pkg/__init__.py").unlink()
    moved = svc.index(IndexInput())
    assert moved["files_deleted"] == 2 and moved["files_indexed"] == 2
    paths = {s.path for s in svc.manifest.all_symbols()}
    assert paths == {"pkg/net.py", "pkg/crawler.py", "pkg/extra.py"}
    assert_consistent(svc)
    files = svc.graph_query(GraphQueryInput(cypher="MATCH (f:File) RETURN f.path AS p ORDER BY p")).results
    assert [f["p"] for f in files] == ["pkg/crawler.py", "pkg/extra.py", "pkg/net.py"]

    # search finds the function by meaning, with provenance
    hits = svc.code_search(CodeSearchInput(query="download a web page", limit=3)).results
    assert hits[0].name == "fetch_url" and hits[0].provenance.stale is False
    (project / "pkg/net.py").write_text("# edited\n" + (project / "pkg/net.py").read_text())
    hits = svc.code_search(CodeSearchInput(query="download a web page", limit=3)).results
    assert hits[0].provenance.stale is True


def test_polyglot_fixtures_index_every_language(polyglot: Path, service_factory) -> None:
    svc = service_factory(polyglot, dense_embeddings=False)
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] == []
    languages = {s.language for s in svc.manifest.all_symbols()}
    assert languages >= {"python", "javascript", "typescript", "tsx", "java", "go", "rust", "csharp", "c", "cpp"}
    assert_consistent(svc)
    result = svc.code_search(CodeSearchInput(query="a", limit=5))
    assert result.search_mode.startswith("sparse-only")
    go_only = svc.code_search(CodeSearchInput(query="server start handler", language="go", limit=20)).results
    assert go_only and {h.language for h in go_only} == {"go"}


def test_bad_inputs_never_crash_the_run(project: Path, service_factory) -> None:
    write_files(project, {
        "good.py": "def ok():\n    return 1\n",
        "binary.py": b"\x00\x01\x02\x03ELF" * 100,
        "latin1.py": "# caf\xe9 cr\xe8me\ndef cafe():\n    return '\xe9'\n".encode("latin-1"),
        "broken.py": "def fine():\n    return 2\n\ndef broken(:\n    pass\n",
        "huge.py": "x = 1\n" * 300_000,
        "empty.ts": "",
    })
    svc = service_factory(project, dense_embeddings=False)
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] == []
    skipped = {item["path"]: item["reason"] for item in report["skipped"]}
    assert skipped["binary.py"] == "binary file"
    assert "limit" in skipped["huge.py"]
    assert report["files_with_syntax_errors"] == ["broken.py"]
    names = {s.name for s in svc.manifest.all_symbols()}
    assert {"ok", "fine"} <= names
    assert "cafe" in names
    assert_consistent(svc)


def test_empty_repository(project: Path, service_factory) -> None:
    svc = service_factory(project)
    report = svc.index(IndexInput())
    assert report["files_seen"] == 0 and report["failed"] == []
    assert svc.index_status().search_mode.startswith("empty index")
    assert svc.code_search(CodeSearchInput(query="anything")).results == []


def test_store_failure_mid_run_is_reported_and_next_run_converges(project: Path, service_factory) -> None:
    write_files(project, PY_FILES)
    svc = service_factory(project, dense_embeddings=False)
    original = svc.graph.replace_files

    def failing(paths, nodes, edges, gone=None):
        raise ConnectionError("graph went away")

    svc.graph.replace_files = failing  # the graph fails after the vectors of the batch were written
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] and "graph went away" in report["failed"][0]["error"]
    # their manifest rows are committed before the graph write, with the files kept in flight
    assert svc.manifest.in_flight() == set(PY_FILES), "the next run must redo every file the graph lacks"
    assert report["files_indexed"] == 0
    svc.graph.replace_files = original
    healed = svc.index(IndexInput(embed=False))
    assert healed["failed"] == [] and healed["files_indexed"] == 3
    assert_consistent(svc)


KILL_SCRIPT = """
import sys
from query_server.service import CodeMemService
from resources.schemas.tools import IndexInput
from resources.settings import Settings
svc = CodeMemService(Settings(project_root=sys.argv[1], dense_embeddings=False))
print("ready", flush=True)
svc.index(IndexInput(embed=False))
svc.close()
print("done", flush=True)
"""


@pytest.mark.slow
def test_sigkill_during_index_then_rerun_converges(project: Path, service_factory) -> None:
    files = {f"mod{i}/file{j}.py": "".join(f"def f{i}_{j}_{k}(x):\n    return g{k}(x)\n\n" for k in range(20)) for i in range(10) for j in range(15)}
    write_files(project, files)
    for delay in (0.3, 0.9, 1.6):
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(project)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    svc = service_factory(project, dense_embeddings=False)
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] == []
    ids = assert_consistent(svc)
    assert len(ids) == 150 * 20
    again = svc.index(IndexInput(embed=False))
    assert again["files_indexed"] == 0


def test_model_change_rebuilds_instead_of_mixing_vector_spaces(project: Path, service_factory) -> None:
    write_files(project, PY_FILES)
    svc = service_factory(project)
    svc.index(IndexInput())
    # the index on disk was made by another model (e.g. voyage-code-3 before the key was removed)
    svc.manifest.set_meta("embedding_model", "voyage-code-3/1024")
    report = svc.index(IndexInput())
    assert any("embedding model or text recipe changed" in note for note in report["notes"])
    assert report["files_indexed"] == 3 and report["dense_done"] == report["dense_total"] == 7
    assert_consistent(svc)
    assert svc.manifest.get_meta("embedding_model").startswith(svc.embedder.model_id)
    rebuilt = svc.index(IndexInput(reembed=True))
    assert rebuilt["files_indexed"] == 3 and rebuilt["edges_total"] > 0
    assert_consistent(svc)


def test_a_model_change_before_any_dense_vector_keeps_the_index(project: Path, service_factory) -> None:
    """An index made with `--no-embed` (the Linux kernel: 28 minutes) holds no vector of the old
    model: a new model of the same dimension and text recipe only records itself, and embeds the
    texts the symbols hold; a recipe or dimension change still rebuilds."""
    from pipelines.index_stores import EMBEDDING_TEXT_VERSION

    write_files(project, PY_FILES)
    first = service_factory(project, dense_embeddings=False)  # no background embedding meanwhile
    first.index(IndexInput(embed=False))
    first.manifest.set_meta("embedding_model", f"local/another-model@384 text-v{EMBEDDING_TEXT_VERSION}")
    first.close()
    svc = service_factory(project)
    report = svc.index(IndexInput())
    assert any("no dense vector was computed yet" in note for note in report["notes"])
    assert report["files_indexed"] == 0 and report["dense_done"] == report["dense_total"] == 7
    assert svc.manifest.get_meta("embedding_model").startswith(svc.embedder.model_id)
    assert_consistent(svc)

    with svc.manifest.transaction() as conn:  # back to no vector, made under an older text recipe
        conn.execute("UPDATE symbols SET has_dense = 0, embed_text = 'old recipe'")
    svc.manifest.set_meta("embedding_model", f"{svc.embedder.model_id} text-v0")
    report = svc.index(IndexInput())
    assert any("the index was rebuilt" in note for note in report["notes"]) and report["files_indexed"] == 3
    assert_consistent(svc)


def test_unchanged_symbols_of_an_edited_file_keep_dense_vectors_from_the_cache(project: Path, service_factory) -> None:
    write_files(project, PY_FILES)
    svc = service_factory(project)
    svc.index(IndexInput())
    source = (project / "pkg/app.py").read_text()
    (project / "pkg/app.py").write_text(source + "\n\ndef added():\n    return 42\n")
    report = svc.index(IndexInput(embed=False))
    assert report["files_indexed"] == 1
    # only the new function lacks a dense vector: the others came back from the cache
    assert (report["dense_done"], report["dense_total"]) == (7, 8)
    # (the service fills the last one in the background after an embed=False run)
    with_dense = svc.vectors.hybrid_query(CODE_COLLECTION, dense=svc.embedder.embed_query("crawl a site"), sparse=None, limit=10)
    assert len(with_dense) >= 7


def test_a_rewritten_file_writes_only_the_points_that_changed(project: Path, service_factory, monkeypatch) -> None:
    """A function appended to a file writes that function's point; the file's other points are
    held as they are, dense vectors included (none comes from the cache here), and their hits
    report the file's new version. A function added at the top moves every symbol below it: their
    points are written again, with their new lines."""
    write_files(project, PY_FILES)
    svc = service_factory(project)
    svc.index(IndexInput())
    written: list[str] = []
    upsert = svc.vectors.upsert

    def recording(collection, points):  # noqa: ANN001, ANN202 - the real store's upsert, with the names it writes noted
        if collection == CODE_COLLECTION:
            written.extend(point.payload["name"] for point in points)
        upsert(collection, points)

    monkeypatch.setattr(svc.vectors, "upsert", recording)
    monkeypatch.setattr(svc.embedder, "cached_documents", lambda texts: [None] * len(texts))
    app = project / "pkg/app.py"
    source = app.read_text()
    app.write_text(source + "\n\ndef added():\n    return 42\n")
    report = svc.index(IndexInput(embed=False))
    assert report["files_indexed"] == 1 and written == ["added"]
    assert (report["dense_done"], report["dense_total"]) == (7, 8)
    state = svc.manifest.file("pkg/app.py")
    crawl = next(h for h in svc.code_search(CodeSearchInput(query="crawl walks a site", limit=10)).results if h.name == "crawl")
    assert (crawl.provenance.content_hash, crawl.provenance.stale) == (state.content_hash, False)
    assert crawl.provenance.indexed_at == state.indexed_at

    written.clear()
    app.write_text("def first():\n    return 1\n\n\n" + app.read_text())
    svc.index(IndexInput(embed=False))
    assert sorted(written) == sorted(["first", "Base", "run", "Crawler", "crawl", "parse", "added"])
    crawl = next(h for h in svc.code_search(CodeSearchInput(query="crawl walks a site", limit=10)).results if h.name == "crawl")
    assert crawl.start_line == next(n for n, line in enumerate(app.read_text().splitlines(), 1) if "def crawl" in line)
    assert_consistent(svc)
    written.clear()  # a repair writes every point again: the store may hold one otherwise than the manifest says
    svc.index(IndexInput(embed=False), repair=True)
    assert sorted(written) == sorted(["first", "Base", "run", "Crawler", "crawl", "parse", "added", "fetch_url", "_open"])


def _rewrite_keeping_stats(path: Path, old: str, new: str) -> None:
    """Another content of the same size, with the file's mtime put back (what an editor that
    keeps timestamps, or a write in the same clock tick as a read, leaves)."""
    stat = path.stat()
    text = path.read_text()
    assert len(old) == len(new) and old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_files_whose_stats_vouch_for_their_content_are_not_read_again(project: Path, service_factory) -> None:
    """An index reads only the files whose size or mtime changed, or whose mtime is too close to
    when they were indexed to tell a later write from it (git's racy case): a file untouched for
    an hour is not read, one written just before the index is read again."""
    write_files(project, PY_FILES)
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(project / "pkg/net.py", ns=(hour_ago, hour_ago))
    svc = service_factory(project)
    svc.index(IndexInput(embed=False))
    _rewrite_keeping_stats(project / "pkg/net.py", "timeout=10", "timeout=20")  # the stats vouch: not read
    _rewrite_keeping_stats(project / "pkg/app.py", "Walks a site", "Walks a page")  # written just now: read
    report = svc.index(IndexInput(embed=False))
    assert (report["files_indexed"], report["files_unchanged"]) == (1, 2)
    fetch = svc.get_symbol(GetSymbolInput(symbol="pkg.net.fetch_url")).symbol
    assert "timeout=10" in svc.vectors.retrieve(CODE_COLLECTION, [fetch.id])[0].payload["code"]
    # a file whose mtime moved but not its content is checked, and vouched for from then on
    os.utime(project / "pkg/app.py", ns=(hour_ago, hour_ago))
    assert svc.index(IndexInput(embed=False))["files_indexed"] == 0
    assert svc.manifest.file("pkg/app.py").mtime_ns == hour_ago
    _rewrite_keeping_stats(project / "pkg/app.py", "Walks a page", "Walks a road")
    assert svc.index(IndexInput(embed=False))["files_indexed"] == 0
    # --repair reads every file
    assert svc.index(IndexInput(embed=False), repair=True)["files_indexed"] == 3


def test_many_changed_files_are_prepared_in_worker_processes(project: Path, service_factory, monkeypatch) -> None:
    """... by pools of workers that hand over every FILES_PER_POOL files (py-tree-sitter keeps what
    a worker parsed), the results still complete and in order."""
    from pipelines import index_prepare, indexer

    monkeypatch.setattr(indexer, "OPTIMIZE_MIN_REWRITES", 100)
    monkeypatch.setattr(index_prepare, "FILES_PER_POOL", 60)
    pools: list[object] = []

    class CountedPool(index_prepare.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(index_prepare, "ProcessPoolExecutor", CountedPool)
    count = index_prepare.PARALLEL_THRESHOLD + 20
    files = {f"pkg{i % 7}/m{i}.py": f"def work_{i}(x):\n    return helper_{(i + 1) % count}(x)\n\n\ndef helper_{i}(x):\n    return x\n" for i in range(count)}
    files["pkg0/binary.py"] = b"\x00\x01" * 50
    write_files(project, files)
    svc = service_factory(project, dense_embeddings=False)
    report = svc.index(IndexInput(embed=False))
    assert report["failed"] == [] and report["files_indexed"] == count
    assert [s["path"] for s in report["skipped"]] == ["pkg0/binary.py"]
    assert len(pools) == -(-(count + 1) // 60)  # 221 files: 4 pools
    assert len(assert_consistent(svc)) == 2 * count
    calls = svc.graph_query(GraphQueryInput(cypher="MATCH (:Function)-[r:CALLS]->(:Function) RETURN count(r) AS n")).results
    assert calls == [{"n": count}]
    # a first index writes no tombstones; rewriting every file does, and compacts the collection
    assert svc.manifest.get_meta("rewrites_since_optimize") == "0"
    for i in range(count):
        (project / f"pkg{i % 7}/m{i}.py").write_text(files[f"pkg{i % 7}/m{i}.py"] + "# edited\n")
    again = svc.index(IndexInput(embed=False))
    assert again["files_indexed"] == count
    assert svc.manifest.get_meta("rewrites_since_optimize") == "0"
    assert len(assert_consistent(svc)) == 2 * count
    assert svc.code_search(CodeSearchInput(query="work 7", limit=1)).results[0].name == "work_7"


def test_index_restricted_to_paths_leaves_the_rest_alone(project: Path, service_factory) -> None:
    write_files(project, PY_FILES)
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    (project / "pkg/app.py").unlink()
    (project / "pkg/net.py").write_text(PY_FILES["pkg/net.py"] + "\n\ndef more():\n    return 1\n")
    report = svc.index(IndexInput(embed=False, paths=["pkg/net.py"]))
    assert (report["files_indexed"], report["files_deleted"]) == (1, 0), "app.py is outside the scope"
    assert "pkg/app.py" in {s.path for s in svc.manifest.all_symbols()}
    report = svc.index(IndexInput(embed=False, paths=["pkg"]))
    assert report["files_deleted"] == 1
    assert_consistent(svc)


def test_an_empty_project_says_what_to_check(project, service_factory) -> None:  # noqa: ANN001
    from resources.schemas.tools import IndexInput

    report = service_factory(project).index(IndexInput())
    assert report["files_seen"] == 0
    assert any(note.startswith("no source files found under") and "CODEMEM_EXTENSIONS" in note for note in report["notes"])


def test_a_project_its_ignore_files_exclude_whole_says_so(project, service_factory) -> None:  # noqa: ANN001
    """Debian's kernel source ignores ``/*`` at its top: nothing to index, and the note names a
    source file excluded and says how to find the pattern, not "check the path"."""
    from resources.schemas.tools import IndexInput

    write_files(project, {".gitignore": "/*\n!/debian/\n", "src/app.py": "def main():\n    return 1\n"})
    report = service_factory(project).index(IndexInput(embed=False))
    assert report["files_seen"] == 0
    (note,) = [n for n in report["notes"] if n.startswith("no source file")]
    assert "excluded by a .gitignore" in note and "src/app.py" in note and "git check-ignore -v src/app.py" in note, note


def test_skip_records_hold_what_was_read_and_leave_nothing_stale(project: Path, service_factory, monkeypatch) -> None:
    """A file the parsers skip is recorded at the content that was read (issue 18's skip records):
    a run stopped after skipping an indexed file turned binary does not keep its old symbols; a file
    that changed between the hash and the read is read again; a parse over the time limit is tried
    again once before it counts as settled."""
    import threading

    from pipelines import index_prepare, indexer
    from pipelines.parsing import ParseTimeout

    write_files(project, {"a.py": "def alpha():\n    return 1\n", "b.py": "def beta():\n    return 2\n"})
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    # a stopped run: a.py turned binary is skipped (and recorded), the run stops before deleting it
    (project / "a.py").write_bytes(b"\x00\x01" * 50)
    (project / "b.py").write_text("def beta():\n    return 3\n")
    stop = threading.Event()
    prepare_all = indexer._prepare_all

    def stop_after_the_first(*args, **kwargs):
        for item in prepare_all(*args, **kwargs):
            yield item
            stop.set()

    monkeypatch.setattr(indexer, "_prepare_all", stop_after_the_first)
    svc.index(IndexInput(embed=False), stop=stop)
    monkeypatch.setattr(indexer, "_prepare_all", prepare_all)
    again = svc.index(IndexInput(embed=False))
    assert again["files_deleted"] == 1 and "a.py" not in svc.manifest.files()
    assert not svc.manifest.find_symbols(qualified_name="a.alpha")
    # the record holds the content read, not the one hashed before: text hashed, binary read, text again
    (project / "c.py").write_text("def gamma():\n    return 1\n")
    prepare_safely = index_prepare._prepare_safely

    def binary_while_read(source, *args, **kwargs):
        if source.path != "c.py":
            return prepare_safely(source, *args, **kwargs)
        text = source.absolute_path.read_bytes()
        source.absolute_path.write_bytes(b"\x00" * 8)
        try:
            return prepare_safely(source, *args, **kwargs)
        finally:
            source.absolute_path.write_bytes(text)

    monkeypatch.setattr(index_prepare, "_prepare_safely", binary_while_read)
    assert {s["path"] for s in svc.index(IndexInput(embed=False))["skipped"]} >= {"c.py"}
    monkeypatch.setattr(index_prepare, "_prepare_safely", prepare_safely)
    assert svc.index(IndexInput(embed=False))["files_indexed"] == 1  # c.py as it is: read again, indexed
    assert svc.manifest.find_symbols(qualified_name="c.gamma")
    # over the time limit: read again at the next run; twice in a row at the same content, settled
    (project / "d.py").write_text("def delta():\n    return 4\n")
    prepare_file = index_prepare.prepare_file

    def slow(source, *args, **kwargs):
        if source.path == "d.py":
            raise ParseTimeout("d.py", 10.0)
        return prepare_file(source, *args, **kwargs)

    monkeypatch.setattr(index_prepare, "prepare_file", slow)
    timeouts = []
    for _ in range(3):
        report = svc.index(IndexInput(embed=False))
        timeouts.append(next((s["reason"] for s in report["skipped"] if s["path"] == "d.py"), str(report)))
    assert all("time limit" in reason for reason in timeouts), timeouts
    record = svc.manifest.skipped_files()["d.py"]
    assert (record.lasting, record.seen) == (False, 2)  # the third run trusted the record: not read again


def _many_functions(count: int, body: str) -> dict[str, str]:
    """Five modules holding ``count`` functions between them."""
    per = count // 5
    return {f"pkg/many{m}.py": "\n\n".join(f"def f{m}_{n}():\n    return {body}\n" for n in range(per)) for m in range(5)}


@pytest.mark.parametrize("fails", [False, True], ids=["read-ahead", "read-ahead-fails"])
def test_a_large_change_reads_its_stored_points_ahead_and_a_failure_costs_only_time(
    project: Path, service_factory, fails: bool,  # noqa: ANN001
) -> None:
    """A change of 1,000 stored points or more reads them ahead in a thread (the held points'
    comparison then finds them in memory); a read ahead that fails leaves the run as it was."""
    write_files(project, _many_functions(1_200, "1"))
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    read: list[int] = []
    real = svc.ctx.vectors.prefetch

    def recording(collection: str, ids: list[str]) -> None:
        read.append(len(ids))
        if fails:
            raise OSError("disk went away")
        real(collection, ids)

    svc.ctx.vectors.prefetch = recording
    write_files(project, {path: text + "\n\ndef extra():\n    return 0\n" for path, text in _many_functions(1_200, "1").items()})
    report = svc.index(IndexInput(embed=False))
    assert read == ([1_000] if fails else [1_000, 200])  # (read a thousand at a time: the run's stop is checked between)
    assert report["failed"] == [] and report["files_indexed"] == 5
    assert svc.ctx.vectors.count(CODE_COLLECTION) == 1_205

"""The recorded run's checks at the cost of the change, on real stores: ``stores_agree``
(``touched_stores_agree``) finds a symbol of a written file missing from a store whether it looks
the written ids up one by one (a small change) or reads every id of each store (a run that wrote
most of the index); ``no_dangling_edges`` over the edges of the nodes a run resolved finds an edge
of theirs into a symbol that is gone, and leaves the rest of the graph unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import index_checks
from pipelines.index_checks import no_dangling_edges, touched_stores_agree
from pipelines.index_context import CODE_COLLECTION, EdgeScope
from pipelines.indexer import index_project
from pipelines.records import file_id
from resources.schemas.tools import IndexInput
from tests.conftest import write_files

FILES = {f"pkg/mod{i}.py": f"def f{i}(x):\n    return x + {i}\n\n\nclass C{i}:\n    def m(self):\n        return f{i}(1)\n"
         for i in range(8)}


@pytest.mark.parametrize("whole_set_share", [1_000_000, 1], ids=["every id read", "ids looked up"])
def test_a_written_symbol_missing_from_a_store_fails_the_check(
    tmp_path: Path, service_factory, monkeypatch: pytest.MonkeyPatch, whole_set_share: int
) -> None:
    write_files(tmp_path, FILES)
    svc = service_factory(tmp_path, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    monkeypatch.setattr(index_checks, "WHOLE_SET_SHARE", whole_set_share)
    ctx = svc.ctx
    written = ["pkg/mod1.py", "pkg/mod2.py"]
    passed, metadata = touched_stores_agree(ctx, written)
    assert passed, metadata
    assert metadata["symbols_checked"] == 6 and metadata["manifest_symbols"] == metadata["graph_symbols"] == 24

    gone = sorted(ctx.manifest.symbol_ids_of(["pkg/mod2.py"])["pkg/mod2.py"])[0]
    ctx.vectors.delete(CODE_COLLECTION, [gone])
    passed, metadata = touched_stores_agree(ctx, written)
    assert not passed
    assert metadata["missing_in_vectors"] == {"json": [gone]} and "missing_in_graph" not in metadata
    assert metadata["vector_points"] == 23

    ctx.graph.delete_nodes("Function", [gone])
    ctx.graph.delete_nodes("Class", [gone])
    passed, metadata = touched_stores_agree(ctx, written)
    assert metadata["missing_in_graph"] == {"json": [gone]}
    passed, metadata = touched_stores_agree(ctx, ["pkg/mod5.py"])  # another file: its own ids are all there
    assert not passed and "missing_in_vectors" not in metadata  # but the counts differ


def test_the_edges_a_run_resolved_are_checked_for_dangling_ends(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    write_files(tmp_path, {**FILES, "app.py": "from pkg.mod3 import f3\n\n\ndef main():\n    return f3(2)\n"})
    svc = service_factory(tmp_path, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    ctx = svc.ctx
    write_files(tmp_path, {"app.py": "from pkg.mod3 import f3\n\n\ndef main():\n    return f3(3)\n"})
    report = index_project(ctx, embed=False)
    scope = report.resolved_scope
    assert scope is not None and file_id("app.py") in scope.sources and len(scope.sources) < len(ctx.manifest.symbol_ids())
    assert scope.targets == frozenset()  # app.py written over: no node went, none was looked up by target
    passed, metadata = no_dangling_edges(ctx, scope)
    assert passed and "nodes the run resolved" in metadata["checked"], metadata

    main = next(s.id for s in ctx.manifest.find_symbols_in("app.py") if s.name == "main")
    f3 = next(s.id for s in ctx.manifest.find_symbols_in("pkg/mod3.py") if s.name == "f3")
    assert (main, "CALLS", f3) in ctx.manifest.resolved_edges()
    with ctx.manifest.transaction() as conn:  # f3 gone from the index, its incoming edge left behind
        conn.execute("DELETE FROM symbols WHERE id = ?", (f3,))
    passed, metadata = no_dangling_edges(ctx, scope)
    assert not passed and metadata["dangling"] == {"json": [[main, "CALLS", f3]]}
    passed, _ = no_dangling_edges(ctx, EdgeScope(frozenset({file_id("pkg/mod5.py")})))  # edges of other nodes only: not read
    assert passed
    f5 = next(s.id for s in ctx.manifest.find_symbols_in("pkg/mod5.py") if s.name == "f5")
    with ctx.manifest.transaction() as conn:  # a rewritten node gone, an edge into it from out of scope left behind
        conn.execute("INSERT INTO resolved_edges VALUES (?, 'CALLS', ?, '{}')", (f5, main))
        conn.execute("DELETE FROM symbols WHERE id = ?", (main,))
    passed, metadata = no_dangling_edges(ctx, EdgeScope(frozenset({file_id("app.py"), main}), frozenset({main})))
    assert not passed and [f5, "CALLS", main] in metadata["dangling"]["json"], metadata
    passed, metadata = no_dangling_edges(ctx)  # every edge
    assert not passed and metadata["checked"] == "every edge"

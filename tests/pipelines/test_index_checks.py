"""The recorded run's ``stores_agree`` check (``touched_stores_agree``) on real stores: it finds a
symbol of a written file missing from a store whether it looks the written ids up one by one (a
small change) or reads every id of each store (a run that wrote most of the index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import index_checks
from pipelines.index_checks import touched_stores_agree
from pipelines.index_context import CODE_COLLECTION
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

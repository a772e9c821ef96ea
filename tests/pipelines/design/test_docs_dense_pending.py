"""Doc chunks without dense vectors (``codemem index --no-embed``, the server's own runs): written
searchable by words, recorded as pending, their dense vectors computed later exactly as an
embedding run computes them, nothing left behind by a run killed in the middle (real stores, the
real local model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipelines.design.ingest import (
    DOCS_COLLECTION,
    embed_pending_documents,
    ingest_documents,
    pending_document_chunks,
)
from resources.faults import FaultInjected, raising_at
from resources.settings import Settings

pytestmark = pytest.mark.slow

GUIDE = "# Guide\n\nInstall the broker before the workers.\n\n## Retries\n\nA failed delivery is retried three times.\n"
OPERATIONS = "# Operations\n\nRotate the signing keys every ninety days.\n\n## Backups\n\nSnapshots are taken nightly.\n"


def _project(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text(GUIDE)
    (root / "docs" / "operations.md").write_text(OPERATIONS)
    (root / "app.py").write_text("def main():\n    return 1\n")
    return root


def _dense(stores: object) -> dict[str, list[float]]:
    vectors = stores.vectors  # type: ignore[attr-defined]
    return vectors.dense_vectors(DOCS_COLLECTION, sorted(vectors.ids(DOCS_COLLECTION)))


def test_chunks_written_without_dense_vectors_get_those_an_embedding_run_computes(tmp_path: Path) -> None:
    from query_server.service import CodeMemService

    deferred = CodeMemService(Settings(project_root=_project(tmp_path / "deferred")))
    eager = CodeMemService(Settings(project_root=_project(tmp_path / "eager")))
    try:
        stores = deferred.design.stores()
        report = ingest_documents(stores, embed=False)
        chunks = report.chunks_written
        assert chunks >= 4 and report.chunks_dense_pending == chunks == pending_document_chunks(stores.ledger)
        assert _dense(stores) == {} and len(stores.vectors.ids(DOCS_COLLECTION)) == chunks
        status = deferred.index_status()
        assert status.doc_chunks_dense_pending == chunks
        found = deferred.design.get_design_context(
            __import__("resources.schemas.design", fromlist=["x"]).DesignContextInput(query="signing keys rotation"))
        assert any("operations.md" in d.title for d in found.documents)  # searchable by words meanwhile

        # a document edited while pending is left to the next ingest; the other gets its vectors
        (tmp_path / "deferred" / "docs" / "guide.md").write_text(GUIDE + "\n## Limits\n\nTen deliveries a second.\n")
        left = embed_pending_documents(stores)
        assert 0 < left < chunks
        again = ingest_documents(stores, embed=False)  # the edited one, again without vectors
        assert again.documents_changed == 1 and again.chunks_dense_pending == pending_document_chunks(stores.ledger) > 0
        assert embed_pending_documents(stores) == 0 and pending_document_chunks(stores.ledger) == 0

        (tmp_path / "eager" / "docs" / "guide.md").write_text(GUIDE + "\n## Limits\n\nTen deliveries a second.\n")
        eager_stores = eager.design.stores()
        assert ingest_documents(eager_stores).chunks_dense_pending == 0
        got, want = _dense(stores), _dense(eager_stores)
        assert got.keys() == want.keys() == stores.vectors.ids(DOCS_COLLECTION)
        for key in want:
            assert np.allclose(got[key], want[key], atol=1e-5)
        assert deferred.index_status().doc_chunks_dense_pending == 0
    finally:
        deferred.close()
        eager.close()


def test_an_embedding_pass_killed_after_a_write_loses_nothing(tmp_path: Path) -> None:
    from query_server.service import CodeMemService

    service = CodeMemService(Settings(project_root=_project(tmp_path / "p")))
    try:
        stores = service.design.stores()
        chunks = ingest_documents(stores, embed=False).chunks_written
        with pytest.raises(FaultInjected), raising_at("design:docs_dense_written"):
            embed_pending_documents(stores)  # the first document's vectors are stored, not yet marked
        assert pending_document_chunks(stores.ledger) == chunks
        assert embed_pending_documents(stores) == 0
        assert _dense(stores).keys() == stores.vectors.ids(DOCS_COLLECTION)
        # an embedding run finds nothing left; one without vectors after an edit leaves only that document
        assert ingest_documents(stores).chunks_dense_pending == 0
        (tmp_path / "p" / "docs" / "operations.md").write_text(OPERATIONS + "\nOn call rotates weekly.\n")
        report = ingest_documents(stores, embed=False)
        assert report.documents_changed == 1 and 0 < report.chunks_dense_pending < chunks
        assert ingest_documents(stores).chunks_dense_pending == 0  # the next run that embeds fills it
        assert _dense(stores).keys() == stores.vectors.ids(DOCS_COLLECTION)
    finally:
        service.close()


def test_codemem_index_no_embed_leaves_doc_chunks_to_the_next_run_that_embeds(tmp_path: Path) -> None:
    """``codemem index --no-embed`` writes the chunks without vectors; the next ``codemem index``
    is not "nothing changed": it computes them (the default Dagster path, the real CLI)."""
    from tests.pipelines.test_incremental_equivalence import run_codemem

    root = _project(tmp_path / "p")
    first = json.loads(run_codemem(["index", str(root), "--no-embed", "--json"]).stdout)
    assert first["design"]["chunks_written"] >= 4
    assert first["design"]["chunks_dense_pending"] == first["design"]["chunks_written"]
    second = json.loads(run_codemem(["index", str(root), "--json"]).stdout)
    assert second["design"]["chunks_dense_pending"] == 0 and second["dense_done"] == second["dense_total"] > 0
    third = json.loads(run_codemem(["index", str(root), "--json"]).stdout)
    assert third["files_indexed"] == 0 and third["design"]["chunks_dense_pending"] == 0


def test_a_pending_record_of_other_content_is_read_again_and_no_vectors_means_nothing_pending(tmp_path: Path) -> None:
    """A run killed between the pending record and the document state, the file reverted since:
    the record names content the file no longer has, and the document is read again (not left
    pending for good). Without dense vectors at all, nothing waits for one."""
    import json as _json

    from pipelines.design.ingest import DOC_DENSE_PENDING_KEY
    from query_server.service import CodeMemService

    service = CodeMemService(Settings(project_root=_project(tmp_path / "p")))
    try:
        stores = service.design.stores()
        ingest_documents(stores, embed=False)
        pending = _json.loads(stores.ledger.meta(DOC_DENSE_PENDING_KEY))
        pending["docs/guide.md"][0] = "0" * 64  # as the killed run left it
        stores.ledger.set_meta(DOC_DENSE_PENDING_KEY, _json.dumps(pending))
        again = ingest_documents(stores, embed=False)
        assert again.documents_changed == 1
        assert _json.loads(stores.ledger.meta(DOC_DENSE_PENDING_KEY))["docs/guide.md"][0] != "0" * 64
    finally:
        service.close()
    plain = CodeMemService(Settings(project_root=_project(tmp_path / "q"), dense_embeddings=False))
    try:
        report = ingest_documents(plain.design.stores(), embed=False)
        assert report.chunks_written >= 4 and report.chunks_dense_pending == 0
    finally:
        plain.close()


def test_doc_chunks_of_another_model_are_embedded_again(tmp_path: Path) -> None:
    """A model change (fp32 ↔ int8, Voyage → local) re-reads every document: its chunks'
    vectors come from the active model, never a mix of two in one collection."""
    from pipelines.design.ingest import DOC_MODEL_KEY
    from query_server.service import CodeMemService

    service = CodeMemService(Settings(project_root=_project(tmp_path / "p")))
    try:
        stores = service.design.stores()
        ingest_documents(stores)
        model = stores.ledger.meta(DOC_MODEL_KEY)
        assert model == stores.embedder.model_id
        assert ingest_documents(stores).documents_changed == 0  # same model: nothing read again
        vectors = stores.vectors
        ids = sorted(vectors.ids(DOCS_COLLECTION))
        vectors.set_dense(DOCS_COLLECTION, {i: [1.0] + [0.0] * (stores.embedder.dimension - 1) for i in ids})
        stores.ledger.set_meta(DOC_MODEL_KEY, "local/another-model@384")  # what the old model left
        report = ingest_documents(stores, embed=False)
        assert any("every document read again" in note for note in report.notes)
        assert report.chunks_dense_pending == len(ids) and stores.ledger.meta(DOC_MODEL_KEY) == model
        assert embed_pending_documents(stores) == 0
        fresh = _dense(stores)
        assert fresh.keys() == set(ids) and all(abs(v[0] - 1.0) > 1e-3 for v in fresh.values())
    finally:
        service.close()


def test_doc_chunks_of_a_model_of_another_dimension_are_made_again(tmp_path: Path) -> None:
    """Voyage (1024 dims) → the local model (384): the docs collection is made again at the new
    dimension (it would refuse the new vectors), every chunk embedded by the active model."""
    from pipelines.design.ingest import DOC_MODEL_KEY, DOCS_INDEXES
    from resources.vectors import sparse
    from resources.vectors.store import VectorPoint

    from query_server.service import CodeMemService

    service = CodeMemService(Settings(project_root=_project(tmp_path / "p")))
    try:
        stores = service.design.stores()
        ingest_documents(stores)
        ids = sorted(stores.vectors.ids(DOCS_COLLECTION))
        stores.vectors.clear_collection(DOCS_COLLECTION, 1024, DOCS_INDEXES)  # what Voyage left
        stale = VectorPoint(id=ids[0], payload={"file_path": "docs/guide.md"}, dense=[1.0] + [0.0] * 1023,
                            sparse=sparse.document_vector("stale"))
        stores.vectors.upsert(DOCS_COLLECTION, [stale])
        stores.ledger.set_meta(DOC_MODEL_KEY, "voyage/voyage-code-3@1024")
        report = ingest_documents(stores)
        assert report.documents_changed == 2 and report.chunks_dense_pending == 0
        assert stores.ledger.meta(DOC_MODEL_KEY) == stores.embedder.model_id
        fresh = _dense(stores)
        assert fresh.keys() == set(ids)
        assert all(len(v) == stores.embedder.dimension and abs(np.linalg.norm(v) - 1.0) < 1e-3 for v in fresh.values())
        assert ingest_documents(stores).documents_changed == 0  # recorded: nothing read again
    finally:
        service.close()


def test_doc_chunks_written_without_dense_vectors_are_embedded_once_dense_vectors_are_on(tmp_path: Path) -> None:
    """Chunks written with dense vectors off carry none; turning them on reads every document
    again and embeds it (nothing is left searchable by words only)."""
    from pipelines.design.ingest import DOC_MODEL_KEY

    from query_server.service import CodeMemService

    root = _project(tmp_path / "p")
    words = CodeMemService(Settings(project_root=root, dense_embeddings=False))
    try:
        ingest_documents(words.design.stores())
        assert words.design.stores().ledger.meta(DOC_MODEL_KEY).endswith(" words-only")
    finally:
        words.close()
    dense = CodeMemService(Settings(project_root=root))
    try:
        stores = dense.design.stores()
        report = ingest_documents(stores)
        assert report.documents_changed == 2 and report.chunks_dense_pending == 0
        fresh = _dense(stores)
        assert fresh and all(abs(np.linalg.norm(v) - 1.0) < 1e-3 for v in fresh.values())
        assert stores.ledger.meta(DOC_MODEL_KEY) == stores.embedder.model_id
    finally:
        dense.close()

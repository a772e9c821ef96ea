"""Shared fixtures: real stores under tmp_path, the real local model, real files."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
FIXTURE_REPOS = Path(__file__).parent / "fixtures" / "repos"
# Before any fixture runs (module- and session-scoped ones too, which _global_memory_dir below
# does not reach): the run never reads or writes the user's own ~/.codemem/global.
_SESSION_GLOBAL_DIR = tempfile.mkdtemp(prefix="codemem-tests-global-")
os.environ["CODEMEM_GLOBAL_DIR"] = _SESSION_GLOBAL_DIR
atexit.register(shutil.rmtree, _SESSION_GLOBAL_DIR, True)


SOAK_TIMEOUT_S = 3600
"""A soak's own limit (the default run's is ``timeout`` in pyproject.toml): its trials take minutes."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Soaks get a longer limit than the default run's tests (an explicit ``timeout`` mark stands)."""
    for item in items:
        if item.get_closest_marker("soak") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SOAK_TIMEOUT_S))


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Create files (str as UTF-8, bytes verbatim) under root."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def indexed_calls(root: Path) -> set[tuple[str, str]]:
    """Index ``root`` (plain indexer, no dense vectors) and return its CALLS edges as
    (caller, callee) file-local names."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput
    from resources.settings import Settings

    service = CodeMemService(Settings(project_root=root, dense_embeddings=False))
    try:
        service.index(IndexInput(embed=False))
        names = {s.id: s.local_name for s in service.ctx.manifest.all_symbols()}
        return {(names[s], names[d]) for s, kind, d in service.ctx.manifest.resolved_edges() if kind == "CALLS"}
    finally:
        service.close()


def git_init(root: Path) -> None:
    """Make root a git repository with everything committed."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "init", "--allow-empty"], check=True, env=env)


@pytest.fixture(autouse=True)
def _global_memory_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The global memory scope of every test (and of the processes it starts) lives in a tmp dir,
    never in the real ``~/.codemem/global``; the enterprise scope is off unless a test turns it on."""
    monkeypatch.setenv("CODEMEM_GLOBAL_DIR", str(tmp_path_factory.mktemp("global-memory")))
    # nor do an organisation's managed settings of the machine turn the enterprise scope on
    monkeypatch.setenv("CODEMEM_MANAGED_SETTINGS", str(tmp_path_factory.mktemp("managed") / "managed-settings.json"))
    for name in ("CODEMEM_ENTERPRISE_SCOPE", "CODEMEM_ENTERPRISE_DIR", "CLAUDE_MEMORY_ENTERPRISE_PATH"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True, scope="session")
def _dagster_runs_recorded_before_index_returns() -> Iterator[None]:
    """``codemem index`` waits for its Dagster run's recording in every test, module fixtures
    included (and every process they start): a test reads the run as soon as the index returns,
    and leaves no recorder behind (a project copied while its recorder still wrote had no run
    storage). The background finish is tested where a test sets this lower."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CODEMEM_DAGSTER_RECORD_WAIT_S", "600")
        yield


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty project directory (state goes to its .codemem/)."""
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def polyglot(tmp_path: Path) -> Path:
    """A copy of every language's fixture repository in one project."""
    root = tmp_path / "polyglot"
    shutil.copytree(FIXTURE_REPOS, root)
    return root


@pytest.fixture
def service_factory() -> Iterator:
    """Open CodeMemService instances and close them at the end of the test."""
    from query_server.service import CodeMemService
    from resources.settings import Settings

    opened: list = []

    def make(root: Path, **overrides) -> CodeMemService:
        svc = CodeMemService(Settings(project_root=root, **overrides))
        opened.append(svc)
        return svc

    yield make
    for svc in opened:
        svc.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster for this test process (``tests/postgres_cluster.py``); the
    URL of its ``postgres`` database. Skipped with the reason where the server binaries are
    missing, a failure then under ``CODEMEM_REQUIRE_POSTGRES=1`` (CI)."""
    from tests.postgres_cluster import missing_reason, postgres_cluster

    reason = missing_reason()
    if reason is not None:
        if os.environ.get("CODEMEM_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason + "; CODEMEM_REQUIRE_POSTGRES=1 (CI) makes this a failure")
        pytest.skip(reason)
    with postgres_cluster() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a new, empty database on the test cluster, dropped after the test."""
    import re

    from tests.postgres_cluster import drop_database, with_database

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    yield with_database(postgres_server, name)
    drop_database(postgres_server, name)

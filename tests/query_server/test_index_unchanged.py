"""``codemem index`` with nothing to do is answered from the manifest and the ledgers before any
store opens (issue 18: a no-change index under a second), and only then: anything the full run
would do (a changed file, dense vectors to compute, a memory projection pending, live git notes,
older extraction rules, another owner) goes to the full run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipelines.dagster.run import NOTHING_CHANGED
from pipelines.index_stores import EXTRACTION_KEY
from query_server import cli
from query_server.code.unchanged import answer_unchanged
from query_server.owner_lock import OwnerLock
from resources.manifest import MANIFEST_FILE, Manifest
from resources.memory.ledger import Ledger
from resources.settings import Settings
from tests.conftest import write_files

FILES = {
    "shop/cart.py": "from shop.money import cents\n\n\ndef total(items):\n    return cents(sum(i.price for i in items))\n",
    "shop/money.py": "def cents(value):\n    return round(value * 100)\n",
    "docs/adr/0001-money-in-cents.md": "# ADR 0001: Money in cents\n\nStatus: Accepted\n\nAmounts must be integers of cents.\n",
}


def _index(root: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli.main, ["index", str(root), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEMEM_DENSE_EMBEDDINGS", "false")  # the model's work is the same on both paths
    root = tmp_path / "project"
    write_files(root, FILES)
    first = _index(root)
    assert first["files_indexed"] == 2
    return root


def _settings(root: Path, **overrides: Any) -> Settings:
    return Settings(project_root=root, **{"dense_embeddings": False, **overrides})


def test_nothing_changed_is_answered_without_opening_the_stores(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = _index(project, "--plain")  # the full run's no-change answer, to compare with
    from query_server import ownership

    def no_store(*_: Any, **__: Any) -> None:
        raise AssertionError("the stores were opened for an index with nothing to do")

    monkeypatch.setattr(ownership.ProjectHandle, "__init__", no_store)
    fast = _index(project)
    assert NOTHING_CHANGED in fast["notes"]
    for key in ("files_seen", "files_unchanged", "files_indexed", "symbols_total", "edges_total", "dense_done", "dense_total",
                "skipped", "failed"):
        assert fast[key] == full[key], key
    assert fast["design"]["derivation_skipped"]
    manifest = Manifest(project / ".codemem" / MANIFEST_FILE)
    try:
        assert json.loads(manifest.get_meta("last_index") or "{}")["notes"] == fast["notes"]  # index_status shows it
    finally:
        manifest.close()


def test_a_changed_file_goes_to_the_full_run(project: Path) -> None:
    (project / "shop" / "money.py").write_text("def cents(value):\n    return int(round(value * 100))\n")
    assert answer_unchanged(_settings(project), embed=False) is None
    again = _index(project)
    assert again["files_indexed"] == 1 and NOTHING_CHANGED not in again["notes"]
    assert answer_unchanged(_settings(project), embed=False) is not None  # then nothing is left to do


def test_a_file_touched_but_unchanged_is_still_nothing_to_do(project: Path) -> None:
    """A file whose mtime moved (a checkout, ``touch``) is read and compared with its indexed
    hash: the same content answers "nothing changed" without a run."""
    money = project / "shop" / "money.py"
    stat = money.stat()
    os.utime(money, ns=(stat.st_atime_ns, stat.st_mtime_ns - 3600 * 10**9))
    assert answer_unchanged(_settings(project), embed=False) is not None


def test_work_the_answer_does_not_cover_goes_to_the_full_run(project: Path) -> None:
    settings = _settings(project)
    assert answer_unchanged(settings, embed=False) is not None
    # dense vectors turned on, or another model: the full run records it (and embeds, with embed)
    assert answer_unchanged(_settings(project, dense_embeddings=True), embed=True) is None
    assert answer_unchanged(_settings(project, dense_embeddings=True), embed=False) is None
    assert answer_unchanged(_settings(project, embed_precision="int8"), embed=False) is None
    assert answer_unchanged(settings, embed=False) is not None
    # another process owns the stores: that server indexes
    owner = OwnerLock(project / ".codemem")
    assert owner.try_acquire()
    try:
        assert answer_unchanged(settings, embed=False) is None
    finally:
        owner.release()
    # older extraction rules: every file is parsed again
    manifest = Manifest(project / ".codemem" / MANIFEST_FILE)
    try:
        current = manifest.get_meta(EXTRACTION_KEY)
        manifest.set_meta(EXTRACTION_KEY, "1")
        assert answer_unchanged(settings, embed=False) is None
        manifest.set_meta(EXTRACTION_KEY, current)
    finally:
        manifest.close()
    assert answer_unchanged(settings, embed=False) is not None
    # a memory projection pending: the owner that opens the stores projects it
    ledger = Ledger(project / ".codemem" / "memory.db")
    try:
        assert ledger.enqueue_all() > 0  # the ADR's memories
    finally:
        ledger.close()
    assert answer_unchanged(settings, embed=False) is None
    assert _index(project)["files_indexed"] == 0  # the full run: it drains the outbox
    assert answer_unchanged(settings, embed=False) is not None


def test_live_git_notes_go_to_the_full_run(project: Path) -> None:
    """Every index run syncs live notes: a clone that turned them on gets the full run."""
    settings = _settings(project)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert answer_unchanged(settings, embed=False) is not None
    subprocess.run(["git", "-C", str(project), "config", "codemem.notes", "true"], check=True)
    assert answer_unchanged(settings, embed=False) is None


def test_an_edit_that_keeps_the_files_stats_is_still_found(project: Path) -> None:
    """Stats tell most edits at once; a tree whose stats all match is hashed before "nothing changed"."""
    import os

    money = project / "shop" / "money.py"
    before = money.stat()
    text = money.read_text()
    money.write_text(text.replace("100", "999"))  # the same size
    os.utime(money, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert money.stat().st_size == before.st_size and money.stat().st_mtime_ns == before.st_mtime_ns
    assert answer_unchanged(_settings(project), embed=False) is None
    assert _index(project)["files_indexed"] == 1


def test_a_damaged_manifest_is_named_not_a_traceback(project: Path) -> None:
    """The check reads the manifest first: a damaged one goes to the full run, which names it."""
    manifest = project / ".codemem" / MANIFEST_FILE
    data = bytearray(manifest.read_bytes())
    data[100:4100] = b"\xa5" * 4000
    manifest.write_bytes(bytes(data))
    for wal in (manifest.with_name(MANIFEST_FILE + "-wal"), manifest.with_name(MANIFEST_FILE + "-shm")):
        wal.unlink(missing_ok=True)
    result = CliRunner().invoke(cli.main, ["index", str(project)])
    assert result.exit_code == 1, result.output
    assert MANIFEST_FILE in result.output and "codemem repair" in result.output, result.output
    assert isinstance(result.exception, SystemExit)  # a ClickException's exit, no error escaping the command


def test_a_file_the_parsers_skip_is_not_read_again_until_it_changes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A binary ``.py`` (or one past the parser's time limit) used to be planned as changed by every
    index: each one did a full run. It is recorded at the content it was skipped with."""
    blob = project / "shop" / "blob.py"
    blob.write_bytes(b"\x00\x01ELF" * 64)
    first = _index(project)  # the default path, as a user runs it
    assert {item["path"]: item["reason"] for item in first["skipped"]} == {"shop/blob.py": "binary file"}
    fast = answer_unchanged(_settings(project), embed=False)
    assert fast is not None and fast["skipped"] == first["skipped"]
    plain = _index(project, "--plain")
    assert plain["files_indexed"] == 0 and plain["skipped"] == first["skipped"]
    blob.write_text("def unpacked():\n    return 1\n")  # it changes: read again, and now indexed
    assert answer_unchanged(_settings(project), embed=False) is None
    assert _index(project)["files_indexed"] == 1
    blob.write_bytes(b"\x00" * 10)  # binary again: out of the index, recorded again
    assert _index(project)["files_deleted"] == 1
    assert answer_unchanged(_settings(project), embed=False) is not None
    # another parser time limit may parse what timed out: the records made under this one are not trusted
    assert answer_unchanged(_settings(project, parse_timeout_s=30.0), embed=False) is None
    monkeypatch.setenv("CODEMEM_PARSE_TIMEOUT_S", "30")
    assert _index(project, "--plain")["skipped"] == [{"path": "shop/blob.py", "reason": "binary file"}]
    assert answer_unchanged(_settings(project, parse_timeout_s=30.0), embed=False) is not None
    blob.unlink()
    assert _index(project, "--plain")["skipped"] == []
    manifest = Manifest(project / ".codemem" / MANIFEST_FILE)
    try:
        assert manifest.skipped_files() == {}  # a file gone from the tree leaves no record
    finally:
        manifest.close()


def test_in_server_mode_nothing_changed_is_answered_from_the_postgres_ledger_and_manifest(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMEM_DENSE_EMBEDDINGS", "false")
    monkeypatch.setenv("CODEMEM_DATABASE_URL", postgres_url)
    root = tmp_path / "project"
    write_files(root, FILES)
    assert _index(root)["files_indexed"] == 2
    assert not (root / ".codemem" / "memory.db").exists()  # the ledger is in PostgreSQL
    assert not (root / ".codemem" / "index.db").exists()  # and so is the manifest
    from query_server import ownership

    def no_store(*_: Any, **__: Any) -> None:
        raise AssertionError("the stores were opened for an index with nothing to do")

    with monkeypatch.context() as patched:
        patched.setattr(ownership.ProjectHandle, "__init__", no_store)
        assert NOTHING_CHANGED in _index(root)["notes"]
    changed = "shop/money.py"
    (root / changed).write_text((root / changed).read_text() + "\n\ndef added_later():\n    return 2\n")
    assert _index(root)["files_indexed"] == 1  # what the shared manifest says is indexed is not parsed again

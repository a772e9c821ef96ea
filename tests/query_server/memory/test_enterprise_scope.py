"""The enterprise memory scope (seed 002, US-6 scenarios 4, 5 and 7, FR-006, FR-008..FR-010, and the
edge case "enterprise path configured but inaccessible"), on real stores: two projects of one
organisation sharing its directory, the setting read from the environment or from Claude Code's
managed settings file, and the CLI's refusal when the scope is off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from query_server.service import ToolError
from resources.memory.enterprise import enterprise_location
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryGetInput,
    MemoryListInput,
    MemorySearchInput,
    RelationshipSpec,
)
from resources.settings import Settings

ORG_RULE = "Every service logs in JSON with a request id so the platform team can trace a call across services"
PROJECT_NOTE = "The billing service retries a failed card charge three times"
LOCAL_NOTE = "Personal: ask Dana about the logging library upgrade"


def _add(svc, content: str, scope: str, memory_type: str = "session", **fields):  # noqa: ANN001, ANN202
    return svc.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content, scope=scope, **fields))


@pytest.fixture
def org_dir(tmp_path: Path) -> Path:
    shared = tmp_path / "org-share" / "claude-memory"
    shared.mkdir(parents=True)
    return shared


@pytest.fixture
def project_root(tmp_path: Path) -> Path:
    root = tmp_path / "a"
    root.mkdir()
    return root


def test_us6_4_enterprise_enabled_stores_at_its_path_and_other_projects_read_it(
    tmp_path: Path, org_dir: Path, project_root: Path, service_factory,  # noqa: ANN001
) -> None:
    a = service_factory(project_root, enterprise_scope=True, enterprise_dir=org_dir)
    stored = _add(a, ORG_RULE, "enterprise")
    assert stored.scope == "enterprise" and stored.sync_status == "synced"
    assert (org_dir / "memory.db").is_file()  # the organisation's directory, not the project's state
    assert not (project_root / ".codemem" / "enterprise").exists()

    other_root = tmp_path / "b"
    other_root.mkdir()
    b = service_factory(other_root, enterprise_scope=True, enterprise_dir=org_dir)
    hits = b.memory.memory_search(MemorySearchInput(query="structured JSON logging with request ids"))
    assert [(h.id, h.scope) for h in hits.results][:1] == [(stored.memory_id, "enterprise")]
    assert b.memory.memory_get(MemoryGetInput(memory_id=stored.memory_id, memory_type="session")).scope == "enterprise"
    # a project that has not turned the scope on sees none of it
    c_root = tmp_path / "c"
    c_root.mkdir()
    c = service_factory(c_root)
    assert c.memory.memory_search(MemorySearchInput(query="structured JSON logging with request ids")).results == []


def test_us6_5_enterprise_disabled_by_default_refuses_with_how_to_enable(project_root: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project_root)
    with pytest.raises(ToolError) as refused:
        _add(svc, ORG_RULE, "enterprise")
    message = str(refused.value)
    assert "disabled" in message and "CODEMEM_ENTERPRISE_SCOPE=1" in message and "CLAUDE_MEMORY_ENTERPRISE_PATH" in message
    # enabled without a directory: says which variable is missing
    other_root = project_root.parent / "x"
    other_root.mkdir()
    svc2 = service_factory(other_root, enterprise_scope=True)
    with pytest.raises(ToolError, match="no directory is set — set CLAUDE_MEMORY_ENTERPRISE_PATH"):
        _add(svc2, ORG_RULE, "enterprise")


def test_us6_7_list_merges_every_scope_with_its_indicator(
    org_dir: Path, project_root: Path, service_factory,  # noqa: ANN001
) -> None:
    svc = service_factory(project_root, enterprise_scope=True, enterprise_dir=org_dir)
    ids = {
        "enterprise": _add(svc, ORG_RULE, "enterprise").memory_id,
        "project": _add(svc, PROJECT_NOTE, "project").memory_id,
        "local": _add(svc, LOCAL_NOTE, "local").memory_id,
        "global": _add(svc, "Prefer small pull requests", "global").memory_id,
    }
    listed = {hit.id: hit.scope for hit in svc.memory.memory_list(MemoryListInput(limit=50)).results}
    assert listed == {memory_id: scope for scope, memory_id in ids.items()}
    only = svc.memory.memory_list(MemoryListInput(limit=50, scopes=["enterprise"])).results
    assert [hit.id for hit in only] == [ids["enterprise"]]


def test_enterprise_memories_follow_the_shared_scope_rules(org_dir: Path, project_root: Path, service_factory) -> None:  # noqa: ANN001
    """Like global ones: every project of the organisation reads them, so no anchor to one project's
    code and links only to memories of the same scope."""
    svc = service_factory(project_root, enterprise_scope=True, enterprise_dir=org_dir)
    project_note = _add(svc, PROJECT_NOTE, "project")
    with pytest.raises(ToolError, match="enterprise memories cannot be anchored to code"):
        _add(svc, ORG_RULE, "enterprise", metadata={"anchors": [{"symbol": "billing.charge"}]})
    with pytest.raises(ToolError, match="an enterprise memory can link only to enterprise memories"):
        _add(svc, ORG_RULE, "enterprise", relationships=[RelationshipSpec(type="RELATES_TO", target_id=project_note.memory_id)])
    first = _add(svc, ORG_RULE, "enterprise")
    second = _add(svc, "Every service exposes /healthz for the platform's probes", "enterprise",
                  relationships=[RelationshipSpec(type="RELATES_TO", target_id=first.memory_id)])
    assert second.scope == "enterprise"


def test_edge_case_unreachable_enterprise_path_is_skipped_with_a_warning(
    tmp_path: Path, org_dir: Path, project_root: Path, service_factory,  # noqa: ANN001
) -> None:
    """"Enterprise path configured but inaccessible → skip enterprise scope with warning, continue with other scopes"."""
    writer_root = tmp_path / "w"
    writer_root.mkdir()
    writer = service_factory(writer_root, enterprise_scope=True, enterprise_dir=org_dir)
    _add(writer, ORG_RULE, "enterprise")
    writer.close()
    unmounted = tmp_path / "not-mounted" / "claude-memory"
    svc = service_factory(project_root, enterprise_scope=True, enterprise_dir=unmounted)
    note = _add(svc, PROJECT_NOTE, "project")
    hits = svc.memory.memory_search(MemorySearchInput(query="card charge retries"))
    assert [h.id for h in hits.results] == [note.memory_id]  # the other scopes answer as usual
    skipped = svc.memory.memory_statistics().scopes["enterprise"]["skipped"]
    assert "unreachable" in skipped and str(unmounted) in skipped
    with pytest.raises(ToolError, match="unreachable"):
        _add(svc, ORG_RULE, "enterprise")


def _managed(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "managed-settings.json"
    path.write_text(json.dumps({"env": env, "permissions": {"deny": []}}), encoding="utf-8")
    return path


def test_fr010_path_and_switch_read_from_claude_codes_managed_settings(
    tmp_path: Path, org_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``codemem`` run from a terminal is not started by Claude Code: it reads the managed settings'
    env block itself; what the environment says wins."""
    managed = _managed(tmp_path, {"CODEMEM_ENTERPRISE_SCOPE": "1", "CLAUDE_MEMORY_ENTERPRISE_PATH": str(org_dir)})
    monkeypatch.setenv("CODEMEM_MANAGED_SETTINGS", str(managed))
    found = enterprise_location(Settings(project_root=tmp_path))
    assert (found.enabled, found.directory, found.unavailable()) == (True, org_dir.resolve(), None)
    assert found.source == str(managed)

    monkeypatch.setenv("CODEMEM_ENTERPRISE_SCOPE", "0")  # the environment turns it off again
    assert not enterprise_location(Settings(project_root=tmp_path)).enabled
    monkeypatch.delenv("CODEMEM_ENTERPRISE_SCOPE")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("CLAUDE_MEMORY_ENTERPRISE_PATH", str(elsewhere))
    assert enterprise_location(Settings(project_root=tmp_path)).directory == elsewhere.resolve()

    managed.write_text("{not json", encoding="utf-8")  # a broken file is ignored (and logged): scope off
    monkeypatch.delenv("CLAUDE_MEMORY_ENTERPRISE_PATH")
    assert not enterprise_location(Settings(project_root=tmp_path)).enabled


def test_fr008_cli_refuses_an_enterprise_write_when_the_scope_is_off(project_root: Path) -> None:
    env = {**os.environ, "CODEMEM_LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        [sys.executable, "-m", "query_server.cli", "memory", "add", "session", ORG_RULE, "--scope", "enterprise",
         "--project", str(project_root)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert done.returncode != 0
    assert "enterprise memory scope is disabled" in done.stderr + done.stdout
    assert "CODEMEM_ENTERPRISE_SCOPE=1" in done.stderr + done.stdout


def test_the_shared_ledger_keeps_the_directorys_rights_and_a_rollback_journal(
    org_dir: Path, project_root: Path, service_factory,  # noqa: ANN001
) -> None:
    """Other users of the organisation open the same file: no 0600, no chmod of it; and no WAL,
    which needs every writer on one host (a shared directory may be a network mount)."""
    import sqlite3
    import stat

    org_dir.chmod(0o2775)
    svc = service_factory(project_root, enterprise_scope=True, enterprise_dir=org_dir)
    _add(svc, ORG_RULE, "enterprise")
    ledger = org_dir / "memory.db"
    assert stat.S_IMODE(ledger.stat().st_mode) & 0o044  # group and others may read it (umask permitting)
    raw = sqlite3.connect(ledger)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    raw.close()
    assert not (org_dir / "memory.db-wal").exists()


def test_a_broken_shared_ledger_is_skipped_by_reads_and_refused_for_writes(
    tmp_path: Path, org_dir: Path, project_root: Path, service_factory,  # noqa: ANN001
) -> None:
    (org_dir / "memory.db").write_bytes(b"this is not a sqlite database, only its name is" * 100)
    svc = service_factory(project_root, enterprise_scope=True, enterprise_dir=org_dir)
    note = _add(svc, PROJECT_NOTE, "project")
    assert [h.id for h in svc.memory.memory_search(MemorySearchInput(query="card charge retries")).results] == [note.memory_id]
    assert "cannot be opened" in svc.memory.memory_statistics().scopes["enterprise"]["skipped"]
    with pytest.raises(ToolError, match="cannot be opened"):
        _add(svc, ORG_RULE, "enterprise")


def test_an_import_naming_a_scope_that_cannot_be_written_writes_nothing(project_root: Path, service_factory) -> None:  # noqa: ANN001
    from resources.schemas.memory import ImportMemoryInput, MemoryListInput

    svc = service_factory(project_root)  # enterprise off
    lines = "\n".join(json.dumps(item) for item in (
        {"memory_type": "session", "content": PROJECT_NOTE, "scope": "project"},
        {"memory_type": "session", "content": ORG_RULE, "scope": "enterprise"},
    ))
    with pytest.raises(ToolError, match="enterprise memory scope is disabled"):
        svc.memory.import_memory(ImportMemoryInput(format="jsonl", data=lines))
    assert svc.memory.memory_list(MemoryListInput(limit=10)).results == []

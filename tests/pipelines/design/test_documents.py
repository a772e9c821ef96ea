"""Documents as requirements, ADRs, design sections and chunks (pipelines.design.documents), and the
design step's incremental ingest into the ledger (pipelines.design.derive) with real stores."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipelines.design.documents import RequirementIds, parse_document, sections
from resources.settings import Settings

IDS = RequirementIds(Settings().requirement_id_patterns)

REQUIREMENTS = """# Requirements

The service routes tasks (see REQ-OPS-009 for operations).

### REQ-AUTH-001: Tokens expire
A token MUST expire after one hour.
Priority: Critical
Status: Implemented

```
### REQ-FAKE-001: inside a code fence, not a requirement
```

| ID | Title | Priority | Status | Description |
|----|-------|----------|--------|-------------|
| REQ-AUTH-002 | Lockout | Low | Draft | Five failures lock the account. |

- **REQ-AUTH-003**: Passwords SHOULD be hashed with argon2.
"""

NYGARD = """# 7. Use argon2 for password hashing

## Status

Superseded by ADR 9

## Context

bcrypt is slow to tune. Addresses REQ-AUTH-003.

## Decision

We will hash passwords with argon2id. Never store plain passwords.

## Consequences

Migration needed.
"""

MADR = """---
status: proposed
---
# Retries with tenacity

## Context and Problem Statement

Calls fail.

## Decision Outcome

Chosen option: "tenacity", because it is tested.

### Consequences

* Good, because consistent
"""


def test_requirements_in_headings_tables_and_lines() -> None:
    doc = parse_document("docs/requirements.md", REQUIREMENTS, IDS)
    found = {r.requirement_id: r for r in doc.requirements}
    assert sorted(found) == ["REQ-AUTH-001", "REQ-AUTH-002", "REQ-AUTH-003"]
    first = found["REQ-AUTH-001"]
    assert (first.title, first.priority, first.status, first.line) == ("Tokens expire", "Critical", "Implemented", 5)
    assert first.description == "A token MUST expire after one hour."
    assert (found["REQ-AUTH-002"].title, found["REQ-AUTH-002"].priority, found["REQ-AUTH-002"].status) == ("Lockout", "Low", "Draft")
    assert found["REQ-AUTH-003"].priority == "Medium"  # SHOULD, no explicit priority
    assert doc.citations[0] == "REQ-OPS-009"  # mentioned in prose (or a code fence): a citation, not a definition


def test_nygard_and_madr_adrs() -> None:
    nygard = parse_document("docs/adr/0007-argon2.md", NYGARD, IDS).designs
    assert len(nygard) == 1
    adr = nygard[0]
    assert (adr.design_type, adr.title, adr.status) == ("ADR", "Use argon2 for password hashing", "Superseded")
    assert adr.decision.startswith("We will hash passwords with argon2id") and adr.related_requirements == ["REQ-AUTH-003"]
    assert adr.context.startswith("bcrypt") and adr.consequences == "Migration needed."
    madr = parse_document("docs/decisions/0002-retries.md", MADR, IDS).designs[0]
    assert (madr.title, madr.status) == ("Retries with tenacity", "Proposed")
    assert madr.decision.startswith('Chosen option: "tenacity"') and "Good, because" in madr.consequences


def test_design_documents_and_prose_chunks() -> None:
    design = parse_document("docs/architecture.md", "# Architecture\n\n## Components\n\nThe router calls agents (REQ-AUTH-001).\n\n## Data\n\nSQLite.\n", IDS)
    assert [d.title for d in design.designs] == ["Architecture — Components", "Architecture — Data"]
    assert design.designs[0].related_requirements == ["REQ-AUTH-001"] and not design.chunks
    prose = parse_document("README.md", "Intro line.\n\n# Guide\n\n" + "word " * 900 + "\n\nInstall it.\n", IDS)
    assert not prose.designs and len(prose.chunks) >= 2 and all(len(c.text) <= 2_000 for c in prose.chunks)
    rst = sections("Title\n=====\n\nBody.\n\nSub\n---\n\nMore.\n")
    assert [(s.level, s.title) for s in rst] == [(1, "Title"), (2, "Sub")]


@pytest.mark.slow
def test_ingest_is_incremental_and_soft_deletes_removed_documents(tmp_path: Path) -> None:
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput

    root = tmp_path / "project"
    (root / "docs" / "adr").mkdir(parents=True)
    (root / "docs" / "requirements.md").write_text(REQUIREMENTS)
    (root / "docs" / "adr" / "0007-argon2.md").write_text(NYGARD)
    (root / "app.py").write_text("def check_token(token):\n    # REQ-AUTH-001\n    return token\n")
    service = CodeMemService(Settings(project_root=root))
    try:
        first = service.index(IndexInput())["design"]
        assert (first["requirements"], first["designs"], first["memories_written"]) == (3, 1, 4)
        again = service.refresh_design()
        assert (again["documents_changed"], again["memories_written"]) == (0, 0)
        ledger = service.memory.ledger
        row = ledger.find_by_metadata("requirements", "requirement_id", "REQ-AUTH-001")[0]
        (root / "docs" / "requirements.md").write_text(REQUIREMENTS.replace("one hour", "thirty minutes"))
        changed = service.refresh_design()
        assert (changed["documents_changed"], changed["memories_written"]) == (1, 1)
        updated = ledger.get(row.id)
        assert updated.version == row.version + 1 and "thirty minutes" in updated.content
        (root / "docs" / "adr" / "0007-argon2.md").unlink()
        removed = service.refresh_design()
        assert removed["documents_removed"] == 1 and removed["memories_deleted"] == 1
        adr = [r for r in ledger.iter_memories(memory_types=["design"]) if r.metadata.get("source_document") == "docs/adr/0007-argon2.md"]
        assert len(adr) == 1 and adr[0].deleted  # soft-deleted, kept 30 days
        trace = service.design.trace_requirements(__import__("resources.schemas.design", fromlist=["x"]).TraceRequirementsInput(requirement_id="REQ-AUTH-001"))
        assert [s.name for s in trace.implementing_components] == ["check_token"]
    finally:
        service.close()


def test_design_assets_are_in_the_dagster_lineage() -> None:
    from query_server.dagster_location import defs

    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {"design_documents", "design_links"} <= keys
    parents = {key.to_user_string() for key in graph.get(__import__("dagster").AssetKey("design_links")).parent_keys}
    assert parents == {"design_documents", "normalized_graph"}


def test_design_step_on_a_repository_with_only_documents(tmp_path: Path) -> None:
    """No source file means no code collection yet: the design step creates it instead of failing."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput

    root = tmp_path / "docs-only"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "requirements.md").write_text(REQUIREMENTS)
    service = CodeMemService(Settings(project_root=root))
    try:
        report = service.index(IndexInput())
        assert not any("design layer not refreshed" in n for n in report["notes"]), report["notes"]
        assert report["design"]["requirements"] == 3
    finally:
        service.close()


BASE = "class Handler:\n    def handle(self, event):\n        raise NotImplementedError\n"


def _handler(name: str) -> str:
    return f"from base import Handler\n\n\nclass {name}(Handler):\n    def handle(self, event):\n        return event\n"


def _pattern_project(root: Path, app: str) -> Path:
    """A project with the requirements document, ``app.py`` as given, and a base class with three
    implementations (a pattern)."""
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "requirements.md").write_text(REQUIREMENTS)
    (root / "app.py").write_text(app)
    (root / "base.py").write_text(BASE)
    for name in ("EmailHandler", "SmsHandler", "PushHandler"):
        (root / f"{name.lower()}.py").write_text(_handler(name))
    return root


@pytest.mark.slow
def test_links_are_derived_again_only_when_their_inputs_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A no-change re-index skips the derivation (it scans every symbol); new code, a changed
    requirement, a new anchored memory, or a derivation that failed half-way make the next run
    derive again."""
    import pipelines.design.derive as design
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput
    from resources.schemas.tools import IndexInput

    root = _pattern_project(tmp_path / "project", "def check_token(token):\n    # REQ-AUTH-001\n    return token\n")
    service = CodeMemService(Settings(project_root=root))

    def design_of_index() -> dict:
        report = service.index(IndexInput())
        assert not any("design layer not refreshed" in n for n in report["notes"]), report["notes"]
        return report["design"]

    try:
        first = design_of_index()
        assert not first["derivation_skipped"] and first["requirement_links"] == 1 and first["patterns"] == 1
        again = design_of_index()
        assert again["derivation_skipped"] and again["memories_written"] == 0
        pattern = next(service.memory.ledger.iter_memories(memory_types=["code_pattern"]))
        assert len(pattern.metadata["implementations"]) == 3  # what the skipped run left stands

        (root / "webhookhandler.py").write_text(_handler("WebhookHandler"))
        code_changed = design_of_index()
        assert not code_changed["derivation_skipped"] and code_changed["memories_written"] == 1
        assert len(service.memory.ledger.get(pattern.id).metadata["implementations"]) == 4
        assert design_of_index()["derivation_skipped"]

        (root / "docs" / "requirements.md").write_text(REQUIREMENTS.replace("one hour", "thirty minutes"))
        assert not design_of_index()["derivation_skipped"]

        service.memory.memory_add(MemoryAddInput(memory_type="session", content="check_token is the only token check.",
                                          metadata={"anchors": [{"qualified_name": "app.check_token"}]}))
        anchored = design_of_index()
        assert not anchored["derivation_skipped"] and anchored["anchors_checked"] == 1

        calls = {"n": 0}
        real = design.refresh_anchors

        def fails_once(stores: design.DesignStores) -> design.DesignReport:
            calls["n"] += 1
            if calls["n"] == 1:
                raise OSError("disk went away during the anchor check")
            return real(stores)

        monkeypatch.setattr(design, "refresh_anchors", fails_once)
        (root / "app.py").write_text("def check_token(token):\n    # REQ-AUTH-001\n    return token or None\n")
        failed = service.index(IndexInput())
        assert any("design layer not refreshed" in n for n in failed["notes"]), failed["notes"]
        recovered = design_of_index()  # nothing changed since, but the failed derivation is not taken as done
        assert not recovered["derivation_skipped"] and recovered["anchors_stale"] == 1
        assert design_of_index()["derivation_skipped"]
    finally:
        service.close()


ADR_0002 = """# 2. Tokens are opaque

## Status

Accepted

## Decision

Tokens are opaque random strings; never JWTs.
"""


@pytest.mark.slow
def test_an_edit_the_derivation_does_not_read_skips_it_and_one_it_reads_derives(tmp_path: Path) -> None:
    """The derivation's inputs are what it reads of each file (``pipelines.design.digest``), not
    the file's bytes: a new top-level function or an edited function or method body skips it; a
    requirement cited, an ADR cited by number or by its document's name, a pattern base's code, a
    method signature, a class's bases or a new import makes the next run derive, with what it
    changes."""
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput

    root = _pattern_project(tmp_path / "project", "def check_token(token):\n    return token\n")
    (root / "docs" / "adr").mkdir()
    (root / "docs" / "adr" / "0002-opaque-tokens.md").write_text(ADR_0002)
    service = CodeMemService(Settings(project_root=root))

    def design_of_index() -> dict:
        report = service.index(IndexInput())
        assert report["files_indexed"] == 1 and not any("design layer not refreshed" in n for n in report["notes"]), report
        return report["design"]

    def edit(path: str, text: str) -> dict:
        (root / path).write_text(text)
        return design_of_index()

    def edges(edge_type: str) -> int:
        return len(service.graph.read_query(f"MATCH ()-[r:{edge_type}]->() RETURN r", limit=100)[1])

    def follows_design() -> int:
        return edges("FOLLOWS_DESIGN")

    try:
        first = service.index(IndexInput())["design"]
        assert not first["derivation_skipped"] and first["patterns"] == 1 and follows_design() == 0
        app = "def check_token(token):\n    return token\n\n\ndef refresh(token):\n    return token + '!'\n"
        assert edit("app.py", app)["derivation_skipped"]  # a new function
        assert edit("app.py", app.replace("+ '!'", "+ '?'"))["derivation_skipped"]  # a body
        assert edges("USES_PATTERN") == 3
        assert edit("emailhandler.py", _handler("EmailHandler").replace("return event", "return [event]"))["derivation_skipped"]
        assert edges("USES_PATTERN") == 3  # the re-indexed class's derived edge is back

        app = app.replace("def refresh(token):\n", 'def refresh(token):\n    """Keeps REQ-AUTH-001."""\n')
        cited = edit("app.py", app)
        assert not cited["derivation_skipped"] and cited["requirement_links"] == 1
        by_number = edit("app.py", "# ADR-0002: opaque tokens\n" + app)
        assert not by_number["derivation_skipped"] and follows_design() == 1
        by_name = edit("smshandler.py", "# follows 0002-opaque-tokens.md\n" + _handler("SmsHandler"))
        assert not by_name["derivation_skipped"] and follows_design() == 2
        body = (root / "app.py").read_text().replace("+ '!'", "+ '!!'")  # the citing function's body
        assert edit("app.py", body)["derivation_skipped"]
        assert follows_design() == 2 and edges("IMPLEMENTS_REQ") == 1  # its edges went with its nodes, and are back
        edge = service.graph.read_query("MATCH (s)-[r:FOLLOWS_DESIGN]->() WHERE s.file_path = 'app.py' RETURN r", limit=5)[1]
        assert edge and edge[0]["r"]["properties"]["line"] == 1, edge  # with the properties the derivation gave it
        appended = (root / "app.py").read_text() + "\n\ndef later(token):\n    return token\n"
        assert edit("app.py", appended)["derivation_skipped"]  # a function added away from the file's citation
        assert follows_design() == 2
        assert not edit("app.py", "# tokens\n" + appended)["derivation_skipped"]  # the citation's line moved
        edge = service.graph.read_query("MATCH (s)-[r:FOLLOWS_DESIGN]->() WHERE s.file_path = 'app.py' RETURN r", limit=5)[1]
        assert edge and edge[0]["r"]["properties"]["line"] == 2, edge

        template = edit("base.py", BASE.replace("    def handle", "    # subclasses answer events\n    def handle"))
        assert not template["derivation_skipped"]  # the base's code is the pattern's template
        pattern = next(service.memory.ledger.iter_memories(memory_types=["code_pattern"]))
        assert "subclasses answer events" in pattern.metadata["code_template"]
        signature = edit("base.py", BASE.replace("def handle(self, event)", "def handle(self, event, retries=1)"))
        assert not signature["derivation_skipped"]
        pattern = next(service.memory.ledger.iter_memories(memory_types=["code_pattern"]))
        assert "retries=1" in pattern.metadata["code_template"]
        rebased = edit("pushhandler.py", _handler("PushHandler").replace("class PushHandler(Handler)", "class PushHandler"))
        assert not rebased["derivation_skipped"]
        assert rebased["patterns"] == 0  # two implementations left, under pattern_min_implementations
        assert not edit("app.py", "import base\n" + (root / "app.py").read_text())["derivation_skipped"]
        assert service.index(IndexInput())["design"]["derivation_skipped"]
    finally:
        service.close()
    # nothing re-indexed: the skipped derivation has no edge to restore, and starts no graph server
    service = CodeMemService(Settings(project_root=root))
    try:
        assert service.index(IndexInput())["design"]["derivation_skipped"]
        assert not service.graph.started
    finally:
        service.close()


def test_a_skipped_derivation_writes_again_only_the_edges_of_the_files_re_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The derived edges a re-index lost are those of its files' nodes: a skipped derivation
    writes those again, not every derived edge of the project (each write grows the graph's AOF)."""
    import pipelines.design.derive as design
    from query_server.service import CodeMemService
    from resources.schemas.tools import IndexInput

    root = _pattern_project(tmp_path / "project", "def check_token(token):\n    # REQ-AUTH-001\n    return token\n")
    restored: list[int] = []
    restore = design.restore_derived_edges

    def counted(stores: object, touching: set[str] | None = None) -> int:
        restored.append(restore(stores, touching))  # type: ignore[arg-type]
        return restored[-1]

    monkeypatch.setattr(design, "restore_derived_edges", counted)
    service = CodeMemService(Settings(project_root=root))

    def uses_pattern() -> int:
        return len(service.graph.read_query("MATCH ()-[r:USES_PATTERN]->() RETURN r", limit=100)[1])

    try:
        assert not service.index(IndexInput())["design"]["derivation_skipped"]
        assert uses_pattern() == 3 and restored == []
        (root / "emailhandler.py").write_text(_handler("EmailHandler").replace("return event", "return [event]"))
        assert service.index(IndexInput())["design"]["derivation_skipped"]
        assert restored == [1] and uses_pattern() == 3  # EmailHandler's edge only, and it is back
        assert service.index(IndexInput())["design"]["derivation_skipped"] and restored == [1]  # nothing re-indexed
    finally:
        service.close()


@pytest.mark.slow
def test_an_adr_whose_name_no_doc_glob_holds_keeps_the_derivation_running(tmp_path: Path) -> None:
    """An ADR memory added by hand (or from git notes) whose document name holds no fragment of
    the doc globs could be cited on a line no digest keeps: the derivation then runs at every
    index, and a citation of it by name becomes a link."""
    from query_server.service import CodeMemService
    from resources.schemas.memory import MemoryAddInput
    from resources.schemas.tools import IndexInput

    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def check_token(token):\n    return token\n")
    service = CodeMemService(Settings(project_root=root))
    try:
        service.index(IndexInput())
        service.memory.memory_add(MemoryAddInput(memory_type="design", content="Tokens are opaque.", metadata={
            "design_type": "ADR", "title": "ADR-5: Opaque tokens", "source_document": "wiki/opaque-tokens.adoc",
            "decision": "Tokens are opaque.", "status": "Accepted"}))
        assert not service.index(IndexInput())["design"]["derivation_skipped"]
        (root / "app.py").write_text("# as wiki/opaque-tokens.adoc says\ndef check_token(token):\n    return token\n")
        report = service.index(IndexInput())["design"]
        assert not report["derivation_skipped"] and report["design_links"] == 1, report
    finally:
        service.close()


def test_citing_lines_find_every_document_name_the_default_globs_match() -> None:
    """A line that names a document the project's doc globs match (by path or by name) is a line
    the design digest keeps, whatever the glob; code lines that name no document are not."""
    import pathspec

    from pipelines.design.digest import citing_lines

    globs = tuple(Settings().doc_globs)
    citing = citing_lines(globs)
    spec = pathspec.GitIgnoreSpec.from_lines(globs)
    documents = ["docs/adr/0002-opaque-tokens.md", "doc/design notes.rst", "adr/7-x.md", "REQUIREMENTS",
                 "REQUIREMENTS.txt", "service/decisions/use-kafka.md", "requirements-v2.md", "README.md"]
    for path in documents:
        assert spec.match_file(path), path  # each is a document here
        name = path.rsplit("/", 1)[-1]
        for line in (f"# see {path} for why", f"// follows {name}", f"x = '{name}'"):
            assert citing.match(line), (path, line)
    for line in ("return self.cache.get(key)", "import os.path", "def handle(self, event):"):
        assert not citing.match(line), line
    started = time.perf_counter()  # linear in a line's length: an adversarial file's 500k-character line
    assert not citing.match("C" * 500_000) and not citing.match("{" * 100_000 + "}" * 100_000)
    assert time.perf_counter() - started < 1.0

"""The walkable memory graph on a real index: get_related from a memory id through memory links and
code edges (each edge type, direction, paging), FOLLOWS_DESIGN derived from code, tests and documents
that cite an ADR, and normalization removing orphaned links (audited, restorable, all or nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from query_server.paging import ToolError
from query_server.service import CodeMemService
from resources.faults import FaultInjected, raising_at
from resources.memory.ledger import MemoryRow, Relationship, now_iso
from resources.memory.normalization import Normalizer
from resources.schemas.memory import MemoryAddInput
from resources.schemas.tools import GetRelatedInput, IndexInput
from resources.settings import Settings
from tests.conftest import write_files

ADR = """# 3. Use argon2 for passwords

## Status

Accepted

## Context

Passwords need a hash. Addresses REQ-AUTH-001.

## Decision

We hash passwords with argon2id.

## Consequences

Slower logins.
"""
HANDLER = "from lib.base import Handler\n\n\nclass {0}(Handler):\n    def handle(self, event):\n        return event\n"
FILES = {
    "docs/requirements.md": "# Requirements\n\n### REQ-AUTH-001: Passwords are hashed\nPasswords MUST be hashed with argon2.\n",
    "docs/adr/0003-use-argon2.md": ADR,
    "docs/design/architecture.md": "# Architecture\n\n## Login flow\n\nThe login flow hashes the password as decided in ADR-0003 before comparing.\n",
    "app/auth.py": (
        "from lib.crypto import argon2_hash\n\n\n# Follows ADR 3.\ndef hash_password(password):\n"
        '    """Hash a password (REQ-AUTH-001)."""\n    return argon2_hash(password)\n\n\n'
        "def login(user, password):\n    return hash_password(password) == user.hash\n"
    ),
    "lib/crypto.py": "def argon2_hash(text):\n    return text[::-1]\n",
    "lib/base.py": "class Handler:\n    def handle(self, event):\n        raise NotImplementedError\n",
    **{f"lib/{name.lower()}.py": HANDLER.format(name) for name in ("EmailHandler", "SmsHandler", "PushHandler")},
    "tests/test_auth.py": (
        "from app.auth import hash_password\n\n\ndef test_hash_password():\n"
        "    # REQ-AUTH-001, see docs/adr/0003-use-argon2.md\n    assert hash_password('a') == 'a'\n"
    ),
}


class Walk:
    """The indexed project, its memories by role and the index report."""

    def __init__(self, service: CodeMemService, report: dict) -> None:
        self.service = service
        self.report = report
        rows = list(service.memory.ledger.iter_memories())
        self.adr = _one(rows, lambda r: r.metadata.get("design_type") == "ADR")
        self.flow = _one(rows, lambda r: r.memory_type == "design" and r.id != self.adr.id)
        self.requirement = _one(rows, lambda r: r.memory_type == "requirements")
        self.pattern = _one(rows, lambda r: r.memory_type == "code_pattern")
        self.app = _one(rows, lambda r: r.metadata.get("component_id") == "app")
        self.note = service.memory.memory_add(MemoryAddInput(
            memory_type="session", content="Login hashing discussed with the team.",
            relationships=[{"type": "RELATES_TO", "target_id": self.adr.id},
                           {"type": "RELATES_TO", "target_id": "app.auth.hash_password"}],
        )).memory_id

    def related(self, entity_id: str, **options) -> list:
        return self.service.get_related(GetRelatedInput(entity_id=entity_id, **options)).results


def _one(rows: list[MemoryRow], test) -> MemoryRow:
    found = [r for r in rows if test(r)]
    assert len(found) == 1, [(r.memory_type, r.content[:40]) for r in found]
    return found[0]


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    root = tmp_path_factory.mktemp("walk") / "project"
    write_files(root, FILES)
    service = CodeMemService(Settings(project_root=root))
    try:
        report = service.index(IndexInput())
        assert not any("design layer not refreshed" in n for n in report["notes"]), report["notes"]
        yield Walk(service, report["design"])
    finally:
        service.close()


def _seen(results: list) -> set[tuple]:
    return {(r.edge, r.edge_direction, r.node_kind, r.memory_type, r.title) for r in results}


@pytest.mark.parametrize(
    ("start", "edge", "direction", "expected"),
    [
        ("adr", "ADDRESSES", "outgoing", {("memory", "requirements", "Passwords are hashed")}),
        ("requirement", "IMPLEMENTS_REQ", "incoming", {("symbol", None, "app.auth.hash_password")}),
        ("requirement", "TESTS", "incoming", {("symbol", None, "tests.test_auth.test_hash_password")}),
        ("adr", "FOLLOWS_DESIGN", "incoming", {
            ("symbol", None, "app.auth.hash_password"), ("symbol", None, "tests.test_auth.test_hash_password"),
            ("memory", "design", "Architecture — Login flow"),
        }),
        ("pattern", "USES_PATTERN", "incoming", {
            ("symbol", None, f"lib.{n.lower()}.{n}") for n in ("EmailHandler", "SmsHandler", "PushHandler")
        }),
        ("app", "DEPENDS_ON", "outgoing", {("memory", "component", "lib")}),
        ("note", "RELATES_TO", "outgoing", {("symbol", None, "app.auth.hash_password"), ("memory", "design", "Use argon2 for passwords")}),
        ("app.auth.hash_password", "CALLS", "outgoing", {("symbol", None, "lib.crypto.argon2_hash")}),
    ],
)
def test_each_edge_type_of_the_walk(walk: Walk, start: str, edge: str, direction: str, expected: set) -> None:
    entity = {"adr": walk.adr.id, "requirement": walk.requirement.id, "pattern": walk.pattern.id, "app": walk.app.id,
              "note": walk.note}.get(start, start)
    results = walk.related(entity, relationship_types=[edge], direction=direction)
    assert {(kind, memory_type, title) for _, _, kind, memory_type, title in _seen(results)} == expected
    start_id = walk.service.get_related(GetRelatedInput(entity_id=entity, depth=1, limit=1)).entity["id"]
    assert {(r.edge, r.edge_direction, r.distance, r.reached_from) for r in results} == {(edge, direction, 1, start_id)}


def test_a_memory_id_leads_into_the_code_and_back(walk: Walk) -> None:
    out = walk.related(walk.note, depth=2)
    start = walk.service.get_related(GetRelatedInput(entity_id=walk.note)).entity
    assert start["kind"] == "memory" and start["memory_type"] == "session"
    symbol = next(r for r in out if r.title == "app.auth.hash_password")
    assert (symbol.distance, symbol.node_kind, symbol.via) == (1, "symbol", ["RELATES_TO"])
    caller = next(r for r in out if r.title == "app.auth.login")  # the code graph, continued from the memory
    assert (caller.distance, caller.via, caller.reached_from) == (2, ["RELATES_TO", "CALLS"], symbol.id)
    requirement = next(r for r in out if r.memory_type == "requirements")
    assert requirement.via == ["RELATES_TO", "ADDRESSES"]

    back = walk.related("app.auth.hash_password", direction="incoming")
    memories = {r.id: r for r in back if r.node_kind == "memory"}
    assert walk.note in memories and memories[walk.note].edge == "RELATES_TO"
    assert walk.adr.id not in memories  # FOLLOWS_DESIGN points from the code to the ADR: outgoing only
    assert walk.adr.id in {r.id for r in walk.related("app.auth.hash_password", direction="outgoing")}


def test_direction_filter(walk: Walk) -> None:
    outgoing = walk.related(walk.adr.id, direction="outgoing")
    incoming = walk.related(walk.adr.id, direction="incoming")
    assert {r.edge_direction for r in outgoing} == {"outgoing"} and {r.edge for r in outgoing} == {"ADDRESSES"}
    assert {r.edge_direction for r in incoming} == {"incoming"}
    assert {r.edge for r in incoming} == {"FOLLOWS_DESIGN", "RELATES_TO"}
    both = walk.related(walk.adr.id)
    assert {r.id for r in both} == {r.id for r in outgoing} | {r.id for r in incoming}


def test_paging_walks_every_entity_once(walk: Walk) -> None:
    whole = walk.related(walk.note, depth=3, limit=500)
    assert len(whole) > 6
    seen: list[str] = []
    cursor = None
    while True:
        page = walk.service.get_related(GetRelatedInput(entity_id=walk.note, depth=3, limit=4, cursor=cursor))
        seen.extend(r.id for r in page.results)
        cursor = page.next_cursor
        if cursor is None:
            break
        assert len(page.results) == 4 and page.truncated
    assert seen == [r.id for r in whole]
    assert [r.distance for r in whole] == sorted(r.distance for r in whole)


def test_unknown_and_deleted_entities_are_refused(walk: Walk) -> None:
    with pytest.raises(ToolError, match="Entity not found"):
        walk.related("00000000-0000-4000-8000-000000000000")
    gone = walk.service.memory.memory_add(MemoryAddInput(memory_type="session", content="To be deleted.")).memory_id
    walk.service.memory.ledger.soft_delete(gone)
    with pytest.raises(ToolError, match="deleted"):
        walk.related(gone)


def test_follows_design_from_code_tests_and_documents(walk: Walk) -> None:
    assert walk.report["design_links"] == 3
    _, rows, _ = walk.service.graph.read_query(
        "MATCH (a)-[r:FOLLOWS_DESIGN]->(b {id: $adr}) RETURN a.id AS id, r.line AS line, r.file_path AS path",
        {"adr": walk.adr.id}, 10,
    )
    sources = {row["id"]: (row["path"], row["line"]) for row in rows}
    code = walk.service.manifest.find_symbols(qualified_name="app.auth.hash_password")[0].id
    test = walk.service.manifest.find_symbols(qualified_name="tests.test_auth.test_hash_password")[0].id
    assert sources == {code: ("app/auth.py", 4), test: ("tests/test_auth.py", 5), walk.flow.id: (None, None)}


def test_adr_citation_forms() -> None:
    from pipelines.design.citations import adr_index

    row = MemoryRow(
        id="m3", memory_type="design", content="Use argon2", metadata={"design_type": "ADR", "source_document": "docs/adr/0003-use-argon2.md", "title": "Use argon2"},
        content_hash="", importance_score=0.5, access_count=0, last_accessed_at=None, version=1, created_at="",
        updated_at="", deleted=False, deleted_at=None, sync_status="synced",
    )
    index = adr_index([row])
    for text in ("ADR-0003", "per ADR 3,", "adr_003", "see decision 0003", "docs/adr/0003-use-argon2.md", "0003-use-argon2.md"):
        assert index.cited(text) == [(1, "m3")], text
    for text in ("ADR-0030", "ADR 4", "decision: 3 options", "RADR 3"):
        assert index.cited(text) == [], text


# -- orphaned links ----------------------------------------------------------------------------


def _seed_orphans(service: CodeMemService) -> tuple[str, str, list[tuple[str, str, str]]]:
    add = lambda content, **kw: service.memory.memory_add(MemoryAddInput(memory_type="session", content=content, **kw)).memory_id
    kept = add("The billing export writes CSV.")
    source = add("Paired on the export format.", relationships=[{"type": "RELATES_TO", "target_id": kept}])
    ledger = service.memory.ledger
    with ledger._transaction() as conn:  # links whose other end is gone (a hard delete elsewhere, an import, a re-index)
        for rel in (
            Relationship(source, "RELATES_TO", "5b1c0c4e-0000-4000-8000-00000000dead", "memory:design"),
            Relationship(source, "RELATES_TO", "code-symbol-that-is-gone", "code:Function"),
            Relationship("a-memory-that-is-gone", "DEPENDS_ON", kept, "memory:session"),
        ):
            ledger._put_relationship(conn, rel.source_id, rel, now_iso())
    orphans = [(source, "RELATES_TO", "5b1c0c4e-0000-4000-8000-00000000dead"), (source, "RELATES_TO", "code-symbol-that-is-gone"),
               ("a-memory-that-is-gone", "DEPENDS_ON", kept)]
    return kept, source, orphans


def _links(service: CodeMemService) -> set[tuple[str, str, str]]:
    return {(r.source_id, r.rel_type, r.target_id) for r in service.memory.ledger.all_relationships()}


def _normalizer(service: CodeMemService) -> Normalizer:
    stores = service.memory.stores
    return Normalizer(
        stores.ledger, stores.projector, state_dir=stores.settings.resolved_state_dir(),
        code_exists=lambda target: stores.resolve_code(target) is not None,
        memory_exists=lambda memory_id: stores.scopes.locate(memory_id) is not None,
    )


def test_normalization_removes_orphaned_links_audited_and_restorable(project: Path, service_factory) -> None:
    service = service_factory(project)
    kept, source, orphans = _seed_orphans(service)
    before = _links(service)
    dry = _normalizer(service).run(dry_run=True)
    assert {(o["memory_id"], o["type"], o["target_id"]) for o in dry.orphan_links} == set(orphans)
    assert _links(service) == before  # a dry run removes nothing

    report = _normalizer(service).run()
    assert report.orphan_links_removed == 3 and report.as_dict()["orphan_link_count"] == 3
    assert _links(service) == {(source, "RELATES_TO", kept)}
    unlinked = [a for a in service.memory.ledger.audit_of(source) if a["operation"] == "unlink"]
    assert {a["previous"]["relationship"]["target_id"] for a in unlinked} == {o[2] for o in orphans[:2]}
    assert all(a["request_id"] == report.restore_links for a in unlinked)

    assert service.memory.ledger.restore_links(report.restore_links) == 3
    assert _links(service) == before
    assert service.memory.ledger.restore_links(report.restore_links) == 0  # once


def test_an_interrupted_orphan_removal_removes_nothing(project: Path, service_factory) -> None:
    service = service_factory(project)
    kept, source, _ = _seed_orphans(service)
    ledger = service.memory.ledger
    before, memories, generation = _links(service), {r.id: r.version for r in ledger.iter_memories()}, service.memory.projector.generation
    with raising_at("normalize:orphan_removal"), pytest.raises(FaultInjected):
        _normalizer(service).run()  # fails after the first removal, inside the swap's transaction
    assert _links(service) == before  # nothing half-removed
    assert {r.id: r.version for r in ledger.iter_memories()} == memories  # nothing else lost or changed
    assert not [a for a in ledger.audit_of(source) if a["operation"] == "unlink"]
    assert service.memory.projector.generation == generation

    again = _normalizer(service).run()
    assert again.orphan_links_removed == 3 and _links(service) == {(source, "RELATES_TO", kept)}


def test_normalize_memory_puts_removed_links_back_by_the_reports_id(project: Path, service_factory) -> None:
    from query_server.paging import ToolError
    from resources.schemas.memory import NormalizeMemoryInput

    service = service_factory(project)
    _, source, _ = _seed_orphans(service)
    before = _links(service)
    report = _normalizer(service).run()
    assert _links(service) != before and report.restore_links
    job = service.memory.normalize_memory(NormalizeMemoryInput(restore_links=report.restore_links))
    assert job.status == "done" and job.report == {"links_restored": 3, "restored_from": report.restore_links}
    assert _links(service) == before
    assert [a["operation"] for a in service.memory.ledger.audit_of(source)].count("relink") == 2
    again = service.memory.normalize_memory(NormalizeMemoryInput(restore_links=report.restore_links))
    assert again.report["links_restored"] == 0  # restored once
    with pytest.raises(ToolError, match="restore_links id of its report"):
        service.memory.normalize_memory(NormalizeMemoryInput(restore_links="no-such-run"))


def test_normalization_keeps_links_to_indexed_files_and_symbols_and_any_code_link_before_an_index(
    tmp_path: Path, service_factory
) -> None:
    import time

    from resources.schemas.memory import NormalizeMemoryInput, NormalizeStatusInput

    root = tmp_path / "project"
    write_files(root, FILES)
    service = service_factory(root)

    def normalize() -> dict:
        job = service.memory.normalize_memory(NormalizeMemoryInput())
        while job.status == "running":
            time.sleep(0.05)
            job = service.memory.normalize_status(NormalizeStatusInput(job_id=job.job_id))
        assert job.status == "done", job.errors
        return job.report

    # before any index, a link to code cannot be judged (an import, a restore): it stays
    note = service.memory.memory_add(MemoryAddInput(memory_type="session", content="Will touch app/auth.py")).memory_id
    with service.memory.ledger._transaction() as conn:
        service.memory.ledger._put_relationship(conn, note, Relationship(note, "RELATES_TO", "some-symbol-id", "code:Function"), now_iso())
    assert normalize().get("orphan_links_removed", 0) == 0 and (note, "RELATES_TO", "some-symbol-id") in _links(service)

    service.index(IndexInput())
    memory_id = service.memory.memory_add(MemoryAddInput(
        memory_type="session", content="Reviewed the auth module and its hashing.",
        relationships=[{"type": "RELATES_TO", "target_id": "app/auth.py"},
                       {"type": "RELATES_TO", "target_id": "app.auth.hash_password"}],
    )).memory_id
    kept = {(s, t, d) for s, t, d in _links(service) if s == memory_id}
    assert len(kept) == 2
    report = normalize()
    assert kept <= _links(service)  # the file link and the symbol link survive
    assert (note, "RELATES_TO", "some-symbol-id") not in _links(service)  # now judged: that one is gone
    assert report["orphan_links_removed"] == 1

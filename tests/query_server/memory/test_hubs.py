"""Hubs and orphans (seed 002 FR-002 as roles, US3-3, US5-2, FR-037): a hub is a memory with
``metadata.role: hub``; memory_health names the memories no hub reaches and the hub each should
join, nearest by meaning; ``memory graph`` draws a hub with the memories linked to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from query_server.memory.graph_view import memory_graph
from query_server.paging import ToolError
from resources.schemas.memory import MemoryAddInput, MemoryUpdateInput
from resources.schemas.tools import GetRelatedInput

ADR = {"design_type": "ADR", "status": "Accepted"}
PATTERN = {"pattern_type": "Convention", "language": "python", "code_template": "x()", "usage_context": "anywhere"}


def _add(svc, memory_type: str, content: str, links: tuple[str, ...] = (), **metadata) -> str:  # noqa: ANN001
    return svc.memory.memory_add(MemoryAddInput(
        memory_type=memory_type, content=content, metadata=metadata,
        relationships=[{"type": "RELATES_TO", "target_id": target} for target in links],
    )).memory_id


def test_fr002_seed_taxonomy_maps_onto_types_as_roles(project: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project)
    gotcha = _add(svc, "code_pattern", "Pandas merge silently duplicates rows on non-unique keys", role="Gotcha",
                  pattern_name="merge keys", **PATTERN)
    assert svc.memory.ledger.get(gotcha).metadata["role"] == "gotcha"  # written in its canonical spelling
    _add(svc, "session", "Stopped halfway through the token refresh rewrite", role="breadcrumb")
    _add(svc, "session", "Everything about authentication", role="hub")  # a hub may be any type
    with pytest.raises(ToolError, match="a gotcha is a code_pattern memory, not session"):
        _add(svc, "session", "Beware of the merge", role="gotcha")
    with pytest.raises(ToolError, match="unknown role 'pillar' — use one of decision"):
        _add(svc, "design", "Use OAuth2", role="pillar", title="ADR-1", **ADR)


def test_us5_2_fr037_orphans_are_the_memories_no_hub_reaches_with_the_hub_to_join(project: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project)
    # before any hub: an orphan is a memory linked to nothing
    lonely = _add(svc, "design", "Session cookies are signed with a key rotated every 30 days", title="ADR-4 cookie signing", **ADR)
    health = svc.design.memory_health()
    assert health.hubs == 0 and lonely in {o["memory_id"] for o in health.orphan_memories}
    assert [o["reason"] for o in health.orphan_memories if o["memory_id"] == lonely] == ["linked to nothing"]
    assert "suggest-links" in next(o["suggestion"] for o in health.orphan_memories if o["memory_id"] == lonely)

    auth_hub = _add(svc, "design", "Authentication: OAuth2 login, access tokens, token refresh, sessions and cookies",
                    title="Auth hub", role="hub", **ADR)
    billing_hub = _add(svc, "design", "Billing: invoices, card charges, refunds and payment retries",
                       title="Billing hub", role="hub", **ADR)
    oauth = _add(svc, "design", "The API authenticates users with OAuth2 authorization code flow", links=(auth_hub,),
                 title="ADR-1 OAuth2", **ADR)
    refresh = _add(svc, "code_pattern", "Refresh the access token 60 seconds before it expires", links=(oauth,),
                   pattern_name="token refresh", **PATTERN)  # under the hub through ADR-1
    invoice = _add(svc, "design", "Invoices are numbered per year without gaps", title="ADR-3 invoice numbers", **ADR)
    note = _add(svc, "session", "Worked on the invoice numbering today")  # summaries stand alone

    health = svc.design.memory_health()
    orphans = {o["memory_id"]: o for o in health.orphan_memories}
    assert health.hubs == 2 and health.orphan_memory_count == 2 == len(orphans)
    assert set(orphans) == {lonely, invoice}
    assert {oauth, refresh, auth_hub, billing_hub, note}.isdisjoint(orphans)
    assert orphans[lonely]["reason"] == "no hub reaches it through links"
    # the nearest hub by meaning first, with the command that links it
    assert orphans[lonely]["suggested_hubs"][0]["hub_id"] == auth_hub
    assert orphans[invoice]["suggested_hubs"][0]["hub_id"] == billing_hub
    assert orphans[invoice]["suggested_hubs"][0]["command"] == f"codemem memory link {invoice} {billing_hub} --type RELATES_TO"
    assert any("2 memorie(s) are orphans (no hub reaches them)" in line for line in health.recommendations)

    svc.memory.memory_update(MemoryUpdateInput(memory_id=invoice, memory_type="design",
                                               relationships=[{"type": "RELATES_TO", "target_id": billing_hub}]))
    assert {o["memory_id"] for o in svc.design.memory_health().orphan_memories} == {lonely}


def test_us3_3_the_graph_of_a_hub_shows_every_memory_linked_to_it(project: Path, service_factory) -> None:  # noqa: ANN001
    svc = service_factory(project)
    hub = _add(svc, "design", "Authentication topics", title="auth-hub", role="hub", **ADR)
    members = [_add(svc, "design", f"Auth decision {n}: {text}", links=(hub,), title=f"ADR-{n}", **ADR)
               for n, text in enumerate(("OAuth2 login", "token refresh", "session cookies"), 1)]
    related = svc.get_related(GetRelatedInput(entity_id=hub, depth=2, limit=200))
    start = {"id": hub, "kind": "memory", "memory_type": "design", "title": "auth-hub"}
    text = memory_graph(start, related.results)
    assert text.startswith("flowchart")
    assert "auth-hub" in text and all(f"ADR-{n}" in text for n in (1, 2, 3))
    assert len(related.results) == len(members)


def test_a_role_key_written_before_roles_existed_is_kept(project: Path, service_factory) -> None:  # noqa: ANN001
    """An update that leaves ``role`` alone, or an import, keeps a value that is not a role of
    seed 002's taxonomy (the key may have meant something else); setting it is checked."""
    from resources.memory.ledger import NewMemory
    from resources.schemas.memory import ImportMemoryInput

    svc = service_factory(project)
    [old] = svc.memory.ledger.add([NewMemory(memory_type="session", content="Retro notes", metadata={"role": "facilitator"})])
    svc.memory.memory_update(MemoryUpdateInput(memory_id=old.id, memory_type="session", content="Retro notes, revised"))
    assert svc.memory.ledger.get(old.id).metadata["role"] == "facilitator"
    with pytest.raises(ToolError, match="unknown role 'moderator'"):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=old.id, memory_type="session", metadata={"role": "moderator"}))
    line = '{"memory_type": "session", "content": "Imported retro", "metadata": {"role": "scribe"}}'
    assert svc.memory.import_memory(ImportMemoryInput(format="jsonl", data=line)).imported == 1


def test_links_the_design_layer_derives_count_and_its_own_memories_are_never_orphans(tmp_path: Path, service_factory) -> None:  # noqa: ANN001
    """A requirement cited by code is linked (by a derived edge, not a relationship), and the
    memories the pipeline derives from documents follow their sources: neither is an orphan."""
    from resources.schemas.tools import IndexInput

    root = tmp_path / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "requirements.md").write_text(
        "# Requirements\n\n- REQ-AUTH-001: The API must reject expired tokens.\n", encoding="utf-8")
    (root / "auth.py").write_text('def check(token):\n    """REQ-AUTH-001: refuse expired tokens."""\n    return not token.expired\n',
                                  encoding="utf-8")
    svc = service_factory(root)
    svc.index(IndexInput(embed=False))
    mine = _add(svc, "design", "Tokens are checked at the gateway", title="ADR-9 gateway checks", **ADR)
    assert {o["memory_id"] for o in svc.design.memory_health().orphan_memories} == {mine}

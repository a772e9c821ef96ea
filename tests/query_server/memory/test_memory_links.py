"""Linking memories and drawing their graph (seed 002 US3: FR-017..FR-020): memory_update adds
links, ``codemem memory link`` / ``edges`` / ``graph`` as a person runs them, the graph as a
Mermaid flowchart that Mermaid's own parser accepts, and the bad inputs (a deleted memory, the
memory itself, an unknown target)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from query_server.memory.curation import link_type, optional_fields, quality
from query_server.memory.graph_view import memory_graph, mermaid_label
from query_server.paging import ToolError
from resources.schemas.memory import MemoryAddInput, MemoryDeleteInput, MemoryUpdateInput
from resources.schemas.tools import GetRelatedInput, RelatedEntity

REPO = Path(__file__).resolve().parents[3]
MERMAID_CACHE = REPO / "bench" / ".cache" / "mermaid"
CODEMEM = Path(sys.executable).with_name("codemem")


def _add(svc, memory_type: str, content: str, **metadata) -> str:
    return svc.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content, metadata=metadata)).memory_id


def test_us3_1_2_a_link_is_added_and_seen_from_both_ends(project: Path, service_factory) -> None:
    svc = service_factory(project)
    decision = _add(svc, "design", "We use OAuth2 for the API.", design_type="ADR", title="ADR-1 OAuth2", status="Accepted")
    learning = _add(svc, "code_pattern", "Refresh the token 60 s before it expires.", pattern_name="Token refresh",
                    pattern_type="Convention", language="python", code_template="refresh()", usage_context="auth")
    result = svc.memory.memory_update(MemoryUpdateInput(memory_id=learning, memory_type="code_pattern",
                                                        relationships=[{"type": "follows design", "target_id": decision}]))
    assert result.status == "updated" and result.version == 2
    (out,) = svc.get_related(GetRelatedInput(entity_id=learning)).results
    assert (out.id, out.edge, out.edge_direction) == (decision, "FOLLOWS_DESIGN", "outgoing")
    (back,) = svc.get_related(GetRelatedInput(entity_id=decision)).results
    assert (back.id, back.edge, back.edge_direction) == (learning, "FOLLOWS_DESIGN", "incoming")


def test_bad_links_are_refused_with_what_to_do(project: Path, service_factory) -> None:
    svc = service_factory(project)
    one = _add(svc, "user_preference", "Tabs, not spaces.", category="Convention", key="indent", value="tabs", scope="Project")
    gone = _add(svc, "user_preference", "Spaces.", category="Convention", key="indent2", value="spaces", scope="Project")
    svc.memory.memory_delete(MemoryDeleteInput(memory_id=gone, memory_type="user_preference"))
    cases = {gone: "is deleted", one: "cannot link to itself", "no-such-thing": "not found"}
    for target, message in cases.items():
        with pytest.raises(ToolError, match=message):
            svc.memory.memory_update(MemoryUpdateInput(memory_id=one, memory_type="user_preference",
                                                       relationships=[{"type": "RELATES_TO", "target_id": target}]))
    with pytest.raises(ToolError, match="is deleted"):  # a new memory cannot link to a deleted one either
        svc.memory.memory_add(MemoryAddInput(memory_type="session", content="x", relationships=[{"type": "RELATES_TO", "target_id": gone}]))
    assert svc.get_related(GetRelatedInput(entity_id=one)).results == []


def _entity(id_: str, reached_from: str, edge: str, direction: str, title: str, kind: str = "memory") -> RelatedEntity:
    return RelatedEntity(id=id_, label="X", distance=1, via=[edge], node_kind=kind, memory_type="design" if kind == "memory" else None,
                         title=title, edge=edge, edge_direction=direction, reached_from=reached_from)


def test_mermaid_labels_are_escaped_and_edges_keep_their_direction() -> None:
    assert mermaid_label('ADR "7": use #tags\nnow') == "ADR #quot;7#quot;: use #35;tags now"
    assert len(mermaid_label("x" * 500)) == 60
    text = memory_graph({"id": "a", "kind": "memory", "memory_type": "design", "title": "Hub"}, [
        _entity("b", "a", "RELATES_TO", "outgoing", 'says "hi"'), _entity("c", "a", "TESTS", "incoming", "pkg.test_x", "symbol"),
        _entity("b", "c", "DEPENDS_ON", "outgoing", 'says "hi"'),
    ])
    assert text.splitlines()[:4] == ['flowchart LR', '  n0("design: Hub")', '  n1("design: says #quot;hi#quot;")',
                                     '  n2["pkg.test_x"]']
    assert "  n0 -->|RELATES_TO| n1" in text and "  n2 -->|TESTS| n0" in text and "  n2 -->|DEPENDS_ON| n1" in text
    assert "class n0,n1 memory" in text


def test_us5_4_quality_scores_completeness_links_and_freshness() -> None:
    """Seed 002 US5-4 / FR-040: a 0-100 score with what would raise it."""
    full = {"design_type": "ADR", "title": "t", "status": "Accepted", **{name: "x" for name in optional_fields("design")}}
    assert quality("design", "We chose argon2id for password hashing because it resists GPU attacks well.", full, 2, False) == (100, [])
    score, advice = quality("design", "Use argon2.", {"design_type": "ADR", "title": "t", "status": "Accepted"}, 0, True)
    assert score < 40 and len(advice) == 4
    assert advice[0].startswith("say more (2 words)") and "rationale" in advice[1] and "suggest-links" in advice[2]
    assert "confirm_anchors" in advice[3]
    score, advice = quality("session", "A session that went well and touched a dozen files in the auth module.", {}, 0, False)
    assert score >= 60 and not any("link" in line for line in advice)  # a session summary is not expected to link
    assert link_type("code_pattern", "design") == "FOLLOWS_DESIGN" and link_type("session", "design") == "RELATES_TO"


def _mermaid_parser() -> Path:
    """A node script that parses Mermaid with Mermaid's own parser (npm: mermaid, jsdom), installed
    into bench/.cache/mermaid on first use; the test is skipped with the reason without npm."""
    script = MERMAID_CACHE / "parse.mjs"
    if not (MERMAID_CACHE / "node_modules" / "mermaid").is_dir():
        if not shutil.which("npm") or not shutil.which("node"):
            pytest.skip("node and npm are needed to parse Mermaid with Mermaid's own parser")
        MERMAID_CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(MERMAID_CACHE), "mermaid@11", "jsdom@25"],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            pytest.skip(f"npm could not install mermaid: {done.stderr[-300:]}")
    script.write_text(
        'import { JSDOM } from "jsdom";\nimport { readFileSync } from "node:fs";\n'
        'const dom = new JSDOM("<!doctype html><html><body></body></html>");\n'
        "globalThis.window = dom.window; globalThis.document = dom.window.document;\n"
        'const { default: mermaid } = await import("mermaid");\n'
        'try { const r = await mermaid.parse(readFileSync(0, "utf8")); console.log(JSON.stringify({ok: true, type: r.diagramType})); }\n'
        "catch (e) { console.log(JSON.stringify({ok: false, error: String(e.message || e)})); }\n"
    )
    return script


def _codemem(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMEM_")} | {"CODEMEM_DENSE_EMBEDDINGS": "false"}
    return subprocess.run([str(CODEMEM), *args, "--project", str(project)], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def test_us3_the_commands_link_list_and_draw(project: Path) -> None:
    """US3 scenarios 1-3 and 5, US5-4, as a person runs them: memory link, memory edges, memory graph
    (Mermaid, parsed by Mermaid's own parser), memory quality, memory suggest-links."""
    from query_server.service import CodeMemService
    from resources.settings import Settings

    svc = CodeMemService(Settings(project_root=project))  # closed before the commands run: they own the stores
    hub = _add(svc, "component", 'The auth hub: "everything" about #login.', component_id="auth", component_type="Service",
               name="Auth", file_path="auth")
    adr = _add(svc, "design", "OAuth2 for the API.", design_type="ADR", title='ADR-1 "OAuth2" for #api', status="Accepted")
    gotcha = _add(svc, "code_pattern", "Never log tokens.", pattern_name="No token logs", pattern_type="Convention",
                  language="python", code_template="log(redacted)", usage_context="auth")
    orphan = _add(svc, "session", "A lone note.")
    twin = _add(svc, "user_preference", "Never log tokens, not even at debug level.", category="Convention", key="logs.tokens",
                value="never", scope="Project")  # an orphan near the gotcha: suggest-links proposes it
    svc.close()

    linked = _codemem(project, "memory", "link", adr, hub, "--type", "DEPENDS_ON")
    assert linked.returncode == 0 and f"linked {adr} -[DEPENDS_ON]-> {hub}" in linked.stdout, linked.stderr
    assert _codemem(project, "memory", "link", gotcha, adr, "--type", "follows-design").returncode == 0
    edges = _codemem(project, "memory", "edges", hub, "--json")
    assert edges.returncode == 0, edges.stderr
    assert {(r["id"], r["edge"], r["edge_direction"]) for r in json.loads(edges.stdout)["results"]} == {(adr, "DEPENDS_ON", "incoming")}
    assert "an orphan" in _codemem(project, "memory", "edges", orphan).stdout

    graph = _codemem(project, "memory", "graph", hub, "--depth", "2")
    assert graph.returncode == 0, graph.stderr
    lines = graph.stdout.splitlines()
    assert lines[0] == "flowchart LR" and len([line for line in lines if "-->|" in line]) == 2
    assert "ADR-1 #quot;OAuth2#quot; for #35;api" in graph.stdout and "FOLLOWS_DESIGN" in graph.stdout
    bad = _codemem(project, "memory", "graph", "src/missing.py")
    assert bad.returncode != 0 and ("not found" in bad.stderr or "not a memory id" in bad.stderr), bad.stderr

    quality_of = json.loads(_codemem(project, "memory", "quality", twin, "--json").stdout)
    assert quality_of["score"] < 70 and any("suggest-links" in line for line in quality_of["advice"])
    suggested = _codemem(project, "memory", "suggest-links", "--json")  # the orphans among the recent memories
    assert suggested.returncode == 0, suggested.stderr
    assert {(item["source_id"], item["target_id"], item["type"]) for item in json.loads(suggested.stdout)} == {(twin, gotcha, "RELATES_TO")}
    shown = _codemem(project, "memory", "suggest-links", twin)
    assert f"codemem memory link {twin} {gotcha} --type RELATES_TO" in shown.stdout

    parsed = subprocess.run(["node", str(_mermaid_parser())], input=graph.stdout, capture_output=True, text=True, timeout=120,
                            check=False)
    assert json.loads(parsed.stdout.strip().splitlines()[-1]) == {"ok": True, "type": "flowchart-v2"}, parsed.stdout + parsed.stderr


def test_a_link_survives_a_failure_right_after_the_ledger_commit(project: Path, service_factory) -> None:
    """The link is written in the update's ledger transaction: a failure before the projection
    loses nothing, and the next sync puts the edge in the graph."""
    from resources.faults import FaultInjected, raising_at
    from resources.schemas.memory import MemoryGetInput

    svc = service_factory(project)
    a = _add(svc, "user_preference", "Tabs.", category="Convention", key="a", value=1, scope="Project")
    b = _add(svc, "user_preference", "Spaces.", category="Convention", key="b", value=2, scope="Project")
    with raising_at("memory_update:after_ledger"), pytest.raises(FaultInjected):
        svc.memory.memory_update(MemoryUpdateInput(memory_id=a, memory_type="user_preference",
                                                   relationships=[{"type": "RELATES_TO", "target_id": b}]))
    stored = svc.memory.memory_get(MemoryGetInput(memory_id=a, memory_type="user_preference", include_relationships=True))
    assert [r.target_id for r in stored.relationships] == [b] and stored.version == 2
    svc.memory.sync()
    (found,) = svc.get_related(GetRelatedInput(entity_id=b)).results
    assert (found.id, found.edge, found.edge_direction) == (a, "RELATES_TO", "incoming")


def test_us3_4_deleting_a_memory_removes_the_edges_that_reference_it(project: Path, service_factory) -> None:
    """Seed 002 US3-4. A soft delete hides the edges (the walk and the graph no longer show them; the
    ledger keeps them for a restore, and memory_health names them with what to do: US5-3); a hard
    delete removes them from the ledger."""
    svc = service_factory(project)
    target = _add(svc, "session", "Token refresh spike: 60 s early works")
    source = _add(svc, "session", "Auth work log")
    svc.memory.memory_update(MemoryUpdateInput(memory_id=source, memory_type="session",
                                               relationships=[{"type": "RELATES_TO", "target_id": target}]))
    assert [r.id for r in svc.get_related(GetRelatedInput(entity_id=source)).results] == [target]

    svc.memory.memory_delete(MemoryDeleteInput(memory_id=target, memory_type="session"))
    assert svc.get_related(GetRelatedInput(entity_id=source)).results == []
    [broken] = svc.design.memory_health().broken_links  # US5-3: identified, with the fix options
    assert (broken["memory_id"], broken["target"], broken["target_state"]) == (source, target, "deleted")
    assert "codemem memory link" in broken["fix"] and "hard_delete" in broken["fix"]

    svc.memory.memory_delete(MemoryDeleteInput(memory_id=target, memory_type="session", hard_delete=True))
    assert svc.memory.ledger.relationships_of(source) == ([], [])
    assert svc.get_related(GetRelatedInput(entity_id=source)).results == []
    assert svc.design.memory_health().broken_links == []

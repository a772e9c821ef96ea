"""Progressive hydration (seed 003, US-007/US-008): search hits are summaries unless asked for in full,
and memory_context loads a topic's memories grouped by type within a token budget."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from query_server.cli import main
from query_server.paging import estimate_tokens
from resources.schemas.memory import (
    MemoryAddInput,
    MemoryContextInput,
    MemoryGetInput,
    MemoryListInput,
    MemorySearchInput,
)
from resources.schemas.tools import CodeSearchInput, IndexInput
from tests.conftest import write_files

LONG = " ".join(
    f"Step {i}: the checkout applies the sales tax to the subtotal before the coupon discount is taken off."
    for i in range(1, 25)
)
BODY = "\n".join(f"    total += item_{i}.price * quantity_{i}" for i in range(40))
CODE = {
    "shop/pricing.py": textwrap.dedent(
        '''
        def total_with_tax(items, tax_rate):
            """Sum the prices of the items and add the sales tax.

            The tax is applied to the subtotal, never per item, so rounding happens once.
            """
            total = 0
        '''
    ) + BODY + "\n    return total * (1 + tax_rate)\n",
}
CHECKOUT = [
    ("requirements", "Checkout charges sales tax on the subtotal before any coupon discount",
     {"requirement_id": "REQ-SHOP-001", "title": "Tax before discount", "priority": "High", "status": "Approved"}),
    ("design", "Tax is computed by the pricing module; the checkout only applies coupons afterwards",
     {"design_type": "ADR", "title": "ADR-3 tax then coupon", "status": "Accepted"}),
    ("test_history", "test_checkout_tax_before_coupon failed when the coupon was applied first; fixed by reordering",
     {"test_name": "test_checkout_tax_before_coupon", "test_file": "tests/test_checkout.py", "status": "Passed"}),
    ("session", LONG, {}),
]


@pytest.fixture
def svc(project: Path, service_factory):  # noqa: ANN001, ANN201
    service = service_factory(project)
    for memory_type, content, metadata in CHECKOUT:
        service.memory.memory_add(MemoryAddInput(memory_type=memory_type, content=content, metadata=metadata))
    service.memory.memory_add(MemoryAddInput(memory_type="session", content="Renamed the logging helpers in the admin panel"))
    return service


def test_search_hits_are_summaries_unless_full(svc) -> None:  # noqa: ANN001
    [summary] = svc.memory.memory_search(MemorySearchInput(query="order of tax and coupon steps", memory_types=["session"], limit=1)).results
    assert summary.content_truncated and summary.content.startswith("Step 1: the checkout")
    assert len(summary.content) < 420 and "more characters" in summary.content
    assert summary.next and "memory_get" in summary.next and summary.id in summary.next
    [full] = svc.memory.memory_search(MemorySearchInput(query="order of tax and coupon steps", memory_types=["session"], limit=1, detail="full")).results
    assert full.id == summary.id and full.content == LONG and not full.content_truncated and full.next is None
    # short memories are whole either way; memory_get returns the whole of a summarized one
    short = svc.memory.memory_search(MemorySearchInput(query="tax before coupon", memory_types=["requirements"])).results[0]
    assert short.content == CHECKOUT[0][1] and not short.content_truncated and short.next is None
    assert svc.memory.memory_get(MemoryGetInput(memory_id=summary.id, memory_type="session")).content == LONG
    listed = svc.memory.memory_list(MemoryListInput(memory_types=["session"]))
    assert any(h.content_truncated for h in listed.results)
    # a cursor stays valid when only the detail changes
    first = svc.memory.memory_search(MemorySearchInput(query="checkout tax", limit=1))
    svc.memory.memory_search(MemorySearchInput(query="checkout tax", limit=1, cursor=first.next_cursor, detail="full"))


def test_memory_context_groups_by_type_within_the_budget(svc) -> None:  # noqa: ANN001
    context = svc.memory.memory_context(MemoryContextInput(topic="checkout sales tax and coupon order", max_tokens=4_000))
    types = [g.memory_type for g in context.groups]
    assert set(types) >= {"requirements", "design", "test_history", "session"} and len(types) == len(set(types))
    best = [max(m.score for m in g.memories) for g in context.groups]
    assert best == sorted(best, reverse=True)  # groups in the order of their most relevant memory
    for group in context.groups:
        assert group.count == len(group.memories) and group.tokens == sum(m.tokens for m in group.memories)
        assert [m.score for m in group.memories] == sorted((m.score for m in group.memories), reverse=True)
        for memory in group.memories:
            assert 0 <= memory.tokens - estimate_tokens(memory.model_dump_json()) <= 2
    assert context.total_tokens == sum(g.tokens for g in context.groups) <= context.max_tokens
    assert estimate_tokens(context.model_dump_json()) <= context.max_tokens
    assert context.memory_count == 5 and context.omitted == 0
    session = next(m for g in context.groups if g.memory_type == "session" for m in g.memories if m.content.startswith("Step 1"))
    assert session.content_truncated and context.summarized == 1 and "memory_get" in (context.next or "")
    assert next(g for g in context.groups if g.memory_type == "requirements").memories[0].title == "Tax before discount"

    tight = svc.memory.memory_context(MemoryContextInput(topic="checkout sales tax and coupon order", max_tokens=300))
    assert tight.total_tokens <= 300 and estimate_tokens(tight.model_dump_json()) <= 300
    assert tight.memory_count < 5 and tight.omitted == 5 - tight.memory_count and "max_tokens" in (tight.next or "")
    assert tight.groups[0].memories[0].id == context.groups[0].memories[0].id  # the most relevant is kept
    only = svc.memory.memory_context(MemoryContextInput(topic="checkout tax", memory_types=["design"]))
    assert [g.memory_type for g in only.groups] == ["design"]
    none = svc.memory.memory_context(MemoryContextInput(topic="checkout tax", min_score=0.99))
    assert none.groups == [] and none.total_tokens == 0
    with pytest.raises(ValueError, match="topic is blank"):
        MemoryContextInput(topic="  ")


def test_code_search_summary_and_full(project: Path, service_factory) -> None:  # noqa: ANN001
    write_files(project, CODE)
    svc = service_factory(project)
    svc.index(IndexInput())
    [summary] = svc.code_search(CodeSearchInput(query="sum prices and add sales tax", limit=1)).results
    assert summary.qualified_name == "shop.pricing.total_with_tax"
    assert summary.snippet.count("\n") == 8 and "lines cut" in summary.snippet.splitlines()[-1]
    assert summary.docstring == "Sum the prices of the items and add the sales tax."
    assert summary.next and "get_symbol" in summary.next and summary.id in summary.next
    [full] = svc.code_search(CodeSearchInput(query="sum prices and add sales tax", limit=1, detail="full")).results
    assert full.snippet.count("\n") == 30 and "rounding happens once" in (full.docstring or "")
    assert len(full.model_dump_json()) > len(summary.model_dump_json()) + 500


def test_cli_memory_context_and_scope(project: Path, service_factory) -> None:  # noqa: ANN001
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(main, [*args, "--project", str(project)])
        assert result.exit_code == 0, result.output
        return result.stdout

    run("memory", "add", "session", "Personal reminder: the coupon tests are slow on my laptop", "--scope", "local")
    run("memory", "add", "requirements", CHECKOUT[0][1], *[f"--meta={k}={v}" for k, v in CHECKOUT[0][2].items()])
    context = json.loads(run("memory", "context", "coupon and tax", "--json"))
    assert {g["memory_type"] for g in context["groups"]} == {"requirements", "session"}
    assert {m["scope"] for g in context["groups"] for m in g["memories"]} == {"project", "local"}
    text = run("memory", "context", "coupon and tax")
    assert "tokens in total" in text and "(local)" in text
    found = json.loads(run("memory", "search", "slow coupon tests", "--scope", "local", "--json"))
    assert [h["scope"] for h in found["results"]] == ["local"]

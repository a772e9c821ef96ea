"""find_duplicates, get_symbol and get_related on a real index, through the service, MCP and HTTP."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from query_server.http_api import build_http_app
from query_server.mcp_server import build_mcp_server
from query_server.ownership import ProjectHandle
from query_server.service import ToolError
from resources.schemas.tools import FindDuplicatesInput, GetRelatedInput, GetSymbolInput, IndexInput
from resources.settings import Settings
from tests.conftest import write_files

FILES = {
    "shop/pricing.py": textwrap.dedent(
        '''
        class Discount:
            """A percentage taken off a price."""

            def apply(self, price):
                return price * (1 - self.rate)


        class SeasonalDiscount(Discount):
            def apply(self, price):
                return super().apply(price) - 1


        def total_with_tax(items, tax_rate):
            """Sum the prices of the items and add the tax."""
            subtotal = sum(item.price for item in items)
            return subtotal + subtotal * tax_rate
        '''
    ),
    "shop/checkout.py": textwrap.dedent(
        '''
        from shop.pricing import total_with_tax


        def checkout(cart):
            return total_with_tax(cart.items, 0.2)


        def pay(cart):
            return checkout(cart)
        '''
    ),
}
NEAR_COPY = textwrap.dedent(
    '''
    def total_with_tax(items, tax_rate):
        """Sum the prices of the items and add the tax."""
        subtotal = sum(item.price for item in items)
        return subtotal + subtotal * tax_rate
    '''
)


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    root = tmp_path_factory.mktemp("symbols") / "project"
    root.mkdir()
    write_files(root, FILES)
    opened = ProjectHandle(Settings(project_root=root))
    opened.call("index", IndexInput())
    yield opened
    opened.close()


def test_find_duplicates_finds_the_existing_function(handle: ProjectHandle) -> None:
    result = handle.call("find_duplicates", FindDuplicatesInput(code=NEAR_COPY, language="python"))
    assert result.threshold == 0.85
    assert result.duplicates[0].qualified_name == "shop.pricing.total_with_tax"
    assert result.duplicates[0].similarity >= 0.95
    assert "reuse" in result.duplicates[0].recommendation
    unrelated = handle.call("find_duplicates", FindDuplicatesInput(code="def parse_xml(doc):\n    return etree.fromstring(doc)\n", threshold=0.95))
    assert unrelated.duplicate_count == 0
    with pytest.raises(ValueError, match="Threshold must be between 0.70 and 0.95"):
        FindDuplicatesInput(code="x", threshold=0.5)
    with pytest.raises(ToolError, match="Unknown language"):
        handle.call("find_duplicates", FindDuplicatesInput(code="x", language="cobol"))


def test_get_symbol_hydrates_progressively(handle: ProjectHandle) -> None:
    summary = handle.call("get_symbol", GetSymbolInput(symbol="shop.pricing.total_with_tax"))
    assert summary.code is None
    assert summary.symbol.signature == "def total_with_tax(items, tax_rate)"
    assert [c["qualified_name"] for c in summary.callers] == ["shop.checkout.checkout"]
    full = handle.call("get_symbol", GetSymbolInput(symbol=summary.symbol.id, include_code=True))
    assert full.code.startswith("def total_with_tax(items, tax_rate):") and full.code.rstrip().endswith("subtotal * tax_rate")
    with pytest.raises(ToolError, match="Entity not found"):
        handle.call("get_symbol", GetSymbolInput(symbol="no.such.symbol"))
    # two methods named apply live in different classes: qualified names keep them apart
    assert handle.call("get_symbol", GetSymbolInput(symbol="shop.pricing.SeasonalDiscount.apply")).symbol.name == "apply"


def test_get_related_walks_the_graph(handle: ProjectHandle) -> None:
    callers = handle.call("get_related", GetRelatedInput(entity_id="shop.pricing.total_with_tax", relationship_types=["CALLS"], direction="incoming", depth=2))
    assert [(r.qualified_name, r.distance) for r in callers.results] == [("shop.checkout.checkout", 1), ("shop.checkout.pay", 2)]
    bases = handle.call("get_related", GetRelatedInput(entity_id="shop.pricing.SeasonalDiscount", relationship_types=["EXTENDS"], direction="outgoing"))
    assert [r.name for r in bases.results] == ["Discount"]
    imports = handle.call("get_related", GetRelatedInput(entity_id="shop/checkout.py", relationship_types=["IMPORTS"], direction="outgoing"))
    assert [r.file_path for r in imports.results] == ["shop/pricing.py"]
    with pytest.raises(ValueError):
        GetRelatedInput(entity_id="x", depth=6)


def test_the_tools_over_mcp_and_http(handle: ProjectHandle) -> None:
    server = build_mcp_server(handle)

    async def scenario() -> None:
        async with Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"find_duplicates", "get_symbol", "get_related"} <= names
            dup = await client.call_tool("find_duplicates", {"code": NEAR_COPY, "threshold": 0.95})
            assert not dup.is_error and dup.structured_content["duplicates"][0]["name"] == "total_with_tax"
            bad = await client.call_tool("find_duplicates", {"code": NEAR_COPY, "threshold": 0.5})
            assert bad.is_error and "Threshold must be between 0.70 and 0.95" in bad.content[0].text
            missing = await client.call_tool("get_related", {"entity_id": "nowhere"})
            assert missing.is_error and "Entity not found" in missing.content[0].text

    anyio.run(scenario)
    with TestClient(build_http_app(handle), base_url="http://127.0.0.1:8765") as client:
        related = client.post("/tools/get_related", json={"entity_id": "shop.checkout.pay", "direction": "outgoing", "depth": 2})
        assert related.status_code == 200 and {r["name"] for r in related.json()["results"]} >= {"checkout", "total_with_tax"}
        assert client.post("/tools/get_symbol", json={"symbol": "nope"}).status_code == 400
        assert client.post("/tools/find_duplicates", json={"code": "x", "threshold": 0.99}).status_code == 422


def test_cli_commands_over_the_same_service(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from query_server.cli import main

    root = tmp_path / "cli_project"
    root.mkdir()
    write_files(root, FILES)
    runner = CliRunner()
    assert runner.invoke(main, ["index", str(root), "--json"]).exit_code == 0
    related = runner.invoke(main, ["related", "shop.pricing.total_with_tax", "--project", str(root), "--direction", "incoming", "--depth", "2", "--json"])
    assert related.exit_code == 0, related.output
    assert '"shop.checkout.pay"' in related.output
    symbol = runner.invoke(main, ["symbol", "shop.checkout.checkout", "--project", str(root), "--code"])
    assert symbol.exit_code == 0 and "return total_with_tax(cart.items, 0.2)" in symbol.output
    dup = runner.invoke(main, ["duplicates", "-", "--project", str(root), "--language", "python", "--json"], input=NEAR_COPY)
    assert dup.exit_code == 0 and '"duplicate_count": 1' in dup.output
    bad = runner.invoke(main, ["duplicates", "-", "--project", str(root), "--threshold", "0.5"], input=NEAR_COPY)
    assert bad.exit_code == 2 and "Threshold must be between 0.70 and 0.95" in bad.output
    health = runner.invoke(main, ["health", "--project", str(root), "--json"])
    assert health.exit_code == 0 and '"status": "ok"' in health.output


def test_get_related_truncates_at_the_limit(handle: ProjectHandle) -> None:
    everything = handle.call("get_related", GetRelatedInput(entity_id="shop/pricing.py", direction="both", depth=5, limit=50))
    assert not everything.truncated and len(everything.results) >= 4
    first_two = handle.call("get_related", GetRelatedInput(entity_id="shop/pricing.py", direction="both", depth=5, limit=2))
    assert first_two.truncated and len(first_two.results) == 2
    assert [r.id for r in first_two.results] == [r.id for r in everything.results[:2]]
    pages: list[str] = [r.id for r in first_two.results]
    cursor = first_two.next_cursor
    while cursor:
        page = handle.call(
            "get_related", GetRelatedInput(entity_id="shop/pricing.py", direction="both", depth=5, limit=2, cursor=cursor)
        )
        pages += [r.id for r in page.results]
        cursor = page.next_cursor
    assert pages == [r.id for r in everything.results]

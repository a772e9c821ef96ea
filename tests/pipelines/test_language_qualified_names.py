"""Qualified names as each language writes them (issue 19): Java and C# namespaces from the
declaration, Go import path + receiver, Rust module path, TS/JS module path; Python unchanged.
The path-based names of earlier releases stay findable, and the symbol ids do not change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines.index_context import CODE_COLLECTION
from pipelines.qualified_names import file_module, language_qualified_name
from pipelines.records import symbol_id
from resources.manifest_reader import ManifestReader
from resources.schemas.design import ImpactOfChangeInput
from resources.schemas.memory.writes import MemoryAddInput
from resources.schemas.tools import GetSymbolInput, IndexInput
from resources.vectors.store import PayloadFilter
from tests.conftest import write_files

# (repo-relative path, file-local name) -> (the language's qualified name, the path-based one)
POLYGLOT = {
    ("python/client/session.py", "Session.request"): (
        "python.client.session.Session.request", "python.client.session.Session.request"),
    ("java/src/main/java/com/example/shop/OrderService.java", "OrderService.place"): (
        "com.example.shop.OrderService.place", "java.src.main.java.com.example.shop.OrderService.OrderService.place"),
    ("java/src/main/java/com/example/shop/OrderService.java", "OrderService.Item.Item"): (
        "com.example.shop.OrderService.Item.Item", "java.src.main.java.com.example.shop.OrderService.OrderService.Item.Item"),
    ("java/src/main/java/com/example/shop/OrderService.java", "Priced"): (
        "com.example.shop.Priced", "java.src.main.java.com.example.shop.OrderService.Priced"),
    ("csharp/Inventory/Warehouse.cs", "Warehouse.GetLevel"): (
        "Shop.Inventory.Warehouse.GetLevel", "csharp.Inventory.Warehouse.Warehouse.GetLevel"),
    ("csharp/Inventory/Warehouse.cs", "Warehouse.SetLevel.Clamp"): (
        "Shop.Inventory.Warehouse.SetLevel.Clamp", "csharp.Inventory.Warehouse.Warehouse.SetLevel.Clamp"),
    ("csharp/Inventory/Warehouse.cs", "StockReport.Total"): (
        "Shop.Inventory.Reports.StockReport.Total", "csharp.Inventory.Warehouse.StockReport.Total"),
    ("go/server/server.go", "Server.Start"): ("go/server.Server.Start", "go.server.server.Server.Start"),
    ("go/server/server.go", "NewServer"): ("go/server.NewServer", "go.server.server.NewServer"),
    ("rust/src/shapes.rs", "Circle.new"): ("crate::shapes::Circle::new", "rust.src.shapes.Circle.new"),
    ("rust/src/shapes.rs", "Circle.validate.check"): (
        "crate::shapes::Circle::validate::check", "rust.src.shapes.Circle.validate.check"),
    ("rust/src/shapes.rs", "unit"): ("crate::shapes::presets::unit", "rust.src.shapes.unit"),
    ("typescript/src/store.ts", "MemoryStore.save"): (
        "typescript/src/store.MemoryStore.save", "typescript.src.store.MemoryStore.save"),
    ("typescript/src/store.ts", "reset"): ("typescript/src/store.Internal.reset", "typescript.src.store.reset"),
    ("typescript/src/Panel.tsx", "PanelHost.render"): (
        "typescript/src/Panel.PanelHost.render", "typescript.src.Panel.PanelHost.render"),
    ("javascript/src/api.js", "ApiClient.get"): ("javascript/src/api.ApiClient.get", "javascript.src.api.ApiClient.get"),
    ("c/ringbuf.c", "rb_push"): ("rb_push", "c.ringbuf.rb_push"),
    ("c/ringbuf.h", "ringbuf_t"): ("ringbuf_t", "c.ringbuf.ringbuf_t"),
    ("cpp/include/shapes/shape.hpp", "Circle.area"): (
        "shapes::Circle::area", "cpp.include.shapes.shape.Circle.area"),
    ("cpp/src/shape.cpp", "shapes.Circle.area"): ("shapes::Circle::area", "cpp.src.shape.shapes.Circle.area"),
    ("cpp/src/shape.cpp", "Shape.describe"): ("shapes::Shape::describe", "cpp.src.shape.Shape.describe"),
}

PROJECT = {
    "shop/go.mod": "// the shop\nmodule github.com/acme/shop\n\ngo 1.22\n",
    "shop/main.go": "package main\n\nfunc main() {}\n",
    "shop/billing/invoice.go": (
        "package billing\n\ntype Invoice struct{ lines []int }\n\n"
        "func (i *Invoice) Total() int { return len(i.lines) }\n\nfunc New() *Invoice { return &Invoice{} }\n"
    ),
    "tools/gen/gen.go": "package gen\n\nfunc Generate() {}\n",
    "engine/Cargo.toml": "[package]\nname = \"engine\"\n",
    "engine/src/lib.rs": "pub fn init() {}\n\nmod util {\n    pub fn helper() {}\n}\n",
    "engine/src/geometry/mod.rs": "pub struct Point;\n\nimpl Point {\n    pub fn norm(&self) -> f64 { 0.0 }\n}\n",
    "engine/src/geometry/shapes.rs": "pub fn area() -> f64 { 1.0 }\n",
    "engine/tests/it.rs": "fn smoke() {}\n",
    "billing/src/main/java/com/acme/billing/Invoice.java": (
        "package com.acme.billing;\n\npublic class Invoice {\n    int total() { return 0; }\n}\n"
    ),
    "Main.java": "class Main {\n    static void main(String[] args) {}\n}\n",
    "Billing/Invoice.cs": "namespace Acme.Billing;\n\npublic class Invoice\n{\n    public int Total() => 0;\n}\n",
    "web/src/utils/date.ts": "export function formatDate(d: Date): string {\n  return d.toISOString();\n}\n",
    "web/src/ui/index.tsx": "export function App() {\n  return null;\n}\n",
    "web/src/types.d.ts": "export interface Options {\n  debug: boolean;\n}\n",
    "pkg/jobs.py": "def run():\n    return 1\n",
}

EXPECTED = {
    ("shop/billing/invoice.go", "Invoice.Total"): "github.com/acme/shop/billing.Invoice.Total",
    ("shop/billing/invoice.go", "Invoice"): "github.com/acme/shop/billing.Invoice",
    ("shop/billing/invoice.go", "New"): "github.com/acme/shop/billing.New",
    ("shop/main.go", "main"): "github.com/acme/shop.main",
    ("tools/gen/gen.go", "Generate"): "tools/gen.Generate",
    ("engine/src/lib.rs", "init"): "crate::init",
    ("engine/src/lib.rs", "helper"): "crate::util::helper",
    ("engine/src/geometry/mod.rs", "Point"): "crate::geometry::Point",
    ("engine/src/geometry/mod.rs", "Point.norm"): "crate::geometry::Point::norm",
    ("engine/src/geometry/shapes.rs", "area"): "crate::geometry::shapes::area",
    ("engine/tests/it.rs", "smoke"): "tests::it::smoke",
    ("billing/src/main/java/com/acme/billing/Invoice.java", "Invoice.total"): "com.acme.billing.Invoice.total",
    ("Main.java", "Main.main"): "Main.main",
    ("Billing/Invoice.cs", "Invoice.Total"): "Acme.Billing.Invoice.Total",
    ("web/src/utils/date.ts", "formatDate"): "web/src/utils/date.formatDate",
    ("web/src/ui/index.tsx", "App"): "web/src/ui.App",
    ("web/src/types.d.ts", "Options"): "web/src/types.Options",
    ("pkg/jobs.py", "run"): "pkg.jobs.run",
}


def _payloads(svc: Any) -> dict[tuple[str, str], dict[str, Any]]:
    hits = svc.vectors.scroll(CODE_COLLECTION, PayloadFilter(), limit=100_000)
    return {(h.payload["file_path"], h.payload["local_name"]): h.payload for h in hits}


def test_the_polyglot_fixtures_get_their_languages_names_and_keep_the_old_ones(polyglot: Path, service_factory) -> None:
    svc = service_factory(polyglot, dense_embeddings=False)
    assert svc.index(IndexInput(embed=False))["failed"] == []
    payloads = _payloads(svc)
    for (path, local), (qualified, by_path) in POLYGLOT.items():
        payload = payloads[(path, local)]
        assert (payload["qualified_name"], payload["path_qualified_name"]) == (qualified, by_path), (path, local)
        assert payload["id"] == symbol_id(path, local)  # ids do not change with the names

    for qualified, by_path in POLYGLOT.values():
        for name in (qualified, by_path):
            assert svc.get_symbol(GetSymbolInput(symbol=name)).symbol.qualified_name == qualified, name


def test_go_modules_rust_crates_and_import_paths(project: Path, service_factory) -> None:
    write_files(project, PROJECT)
    svc = service_factory(project, dense_embeddings=False)
    assert svc.index(IndexInput(embed=False))["failed"] == []
    payloads = _payloads(svc)
    assert {key: payloads[key]["qualified_name"] for key in EXPECTED} == EXPECTED
    assert payloads[("shop/billing/invoice.go", "Invoice.Total")]["path_qualified_name"] == "shop.billing.invoice.Invoice.Total"
    assert payloads[("pkg/jobs.py", "run")]["path_qualified_name"] == "pkg.jobs.run"
    nodes = svc.graph.read_query(
        "MATCH (f:Function {path_qualified_name: $old}) RETURN f.qualified_name AS name", {"old": "shop.billing.invoice.Invoice.Total"}, 5
    )[1]
    assert nodes == [{"name": "github.com/acme/shop/billing.Invoice.Total"}]


def test_anchors_and_impact_accept_the_old_names(project: Path, service_factory) -> None:
    write_files(project, PROJECT)
    svc = service_factory(project, dense_embeddings=False)
    svc.index(IndexInput(embed=False))
    old, new = "billing.src.main.java.com.acme.billing.Invoice.Invoice.total", "com.acme.billing.Invoice.total"
    path = "billing/src/main/java/com/acme/billing/Invoice.java"
    for name in (old, new):
        added = svc.memory.memory_add(MemoryAddInput(
            memory_type="session", content=f"total() rounds down ({name}).", metadata={"anchors": [{"qualified_name": name}]},
        ))
        stored = svc.memory.ledger.get(added.memory_id).metadata["anchors"][0]
        assert stored["qualified_name"] == name and stored["file_path"] == path and stored["content_hash"]

    reader = ManifestReader.open(svc.settings.resolved_state_dir() / "index.db", 5.0)
    assert reader is not None
    try:
        names = reader.qualified_names(path, 900)
    finally:
        reader.close()
    assert {old, new, "com.acme.billing.Invoice"} <= set(names)

    impact = svc.design.impact.impact_of_change(ImpactOfChangeInput(symbols=[old]))
    assert [s["qualified_name"] for s in impact.changed_symbols] == [new]
    assert len(impact.anchored_memories) == 2  # anchored by either name


@pytest.mark.parametrize(
    ("path", "language", "module"),
    [
        ("src/pkg/__init__.py", "python", "src.pkg"),
        ("src/main/java/com/acme/Invoice.java", "java", ""),
        ("Billing/Invoice.cs", "csharp", ""),
        ("internal/billing/invoice.go", "go", "internal/billing"),
        ("main.go", "go", ""),
        ("src/lib.rs", "rust", "crate"),
        ("src/main.rs", "rust", "crate"),
        ("src/a/b.rs", "rust", "crate::a::b"),
        ("src/a/b/mod.rs", "rust", "crate::a::b"),
        ("src/a/lib.rs", "rust", "crate::a::lib"),
        ("crates/core/src/net/http.rs", "rust", "crate::net::http"),
        ("build.rs", "rust", "build"),
        ("src/utils/date.ts", "typescript", "src/utils/date"),
        ("src/ui/index.tsx", "tsx", "src/ui"),
        ("index.js", "javascript", "index"),
        ("lib/types.d.ts", "typescript", "lib/types"),
        ("src/ringbuf.c", "c", ""),
        ("include/shapes/shape.hpp", "cpp", ""),
    ],
)
def test_file_modules_without_a_project_root(path: str, language: str, module: str) -> None:
    assert file_module(path, language) == module


def test_names_join_as_each_language_writes_them() -> None:
    assert language_qualified_name("rust", "crate::a", "inner", "Type.method") == "crate::a::inner::Type::method"
    assert language_qualified_name("java", "", "com.acme", "Invoice.total") == "com.acme.Invoice.total"
    assert language_qualified_name("java", "", None, "Main.main") == "Main.main"
    assert language_qualified_name("go", "example.com/m/billing", None, "Invoice.Total") == "example.com/m/billing.Invoice.Total"
    assert language_qualified_name("typescript", "src/store", "Internal", "reset") == "src/store.Internal.reset"
    assert language_qualified_name("c", "", None, "rb_push") == "rb_push"
    assert language_qualified_name("cpp", "", "shapes::detail", "Circle.area") == "shapes::detail::Circle::area"
    assert language_qualified_name("cpp", "", None, "shapes.Circle.area") == "shapes::Circle::area"


def test_module_name_in_string_operations_is_pathlibs_for_any_path() -> None:
    """``module_name`` names every file of a resolution (55,000 for the Linux kernel), so it no
    longer goes through pathlib; its answer stays pathlib's, odd paths included."""
    import itertools
    from pathlib import PurePosixPath

    from pipelines.qualified_names import _MODULE_TAILS, module_name

    def by_pathlib(path: str) -> str:
        parts = list(PurePosixPath(path).with_suffix("").parts)
        if len(parts) > 1 and parts[-1] in _MODULE_TAILS:
            parts.pop()
        return ".".join(parts)

    atoms = ("a", "b.c", ".x", "x.", "..", ".", "", "index", "index.js", "mod.rs", "__init__.py", "a.tar.gz", "é.py")
    checked = 0
    for size in range(1, 4):
        for combo in itertools.product(atoms, repeat=size):
            for prefix in ("", "/", "./", "//", "///"):
                path = prefix + "/".join(combo)
                try:
                    expected = by_pathlib(path)
                except ValueError:  # pathlib has no name to take a suffix off ("", "/", ".")
                    continue
                assert module_name(path) == expected, path
                checked += 1
    assert checked > 10_000

"""Every declaration with its true kind, end to end (issue 19, item 3): Go's named types of any
underlying type (``type Labels map[string]string``, ``type Option func(...)``, aliases) and
TypeScript's ``type Handler = ...`` are kind ``type``; Java's records, annotation types and
constructors are ``record``, ``annotation`` and ``constructor``. Each is indexed, found by
``code_search`` filtered on its kind, read with ``get_symbol``, and a type contains its methods
in the graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from query_server.ownership import ProjectHandle
from resources.schemas.tools import CodeSearchInput, GetRelatedInput, GetSymbolInput, IndexInput
from resources.settings import Settings
from tests.conftest import write_files

FILES = {
    "labels/labels.go": (
        "package labels\n\n"
        "// Labels are metric label names and values.\n"
        "type Labels map[string]string\n\n"
        "// ValueType is the kind of a sample value.\n"
        "type ValueType int\n\n"
        "// Option configures a registry.\n"
        "type Option func(*Registry)\n\n"
        "// Registry holds labelled metrics.\n"
        "type Registry struct{ labels Labels }\n\n"
        "// Set is another name for Labels.\n"
        "type Set = Labels\n\n"
        "// Get returns the value of a label.\n"
        "func (l Labels) Get(name string) string { return l[name] }\n"
    ),
    "web/events.ts": "export type Handler = (event: string) => void;\n\nexport function on(handler: Handler): void { handler('x'); }\n",
    "shop/Line.java": (
        "package shop;\n\n"
        "/** One line of an order. */\n"
        "public record Line(String sku, int qty) {\n"
        "    public Line {\n        if (qty < 0) throw new IllegalArgumentException(sku);\n    }\n"
        "}\n\n"
        "/** Marks an audited operation. */\n"
        "@interface Audited {\n    String reason() default \"\";\n}\n\n"
        "class Ledger {\n    private final String name;\n\n"
        "    Ledger(String name) {\n        this.name = name;\n    }\n}\n"
    ),
}


@pytest.fixture(scope="module")
def handle(tmp_path_factory):  # noqa: ANN201
    root: Path = tmp_path_factory.mktemp("named-types") / "project"
    root.mkdir()
    write_files(root, FILES)
    opened = ProjectHandle(Settings(project_root=root))
    opened.call("index", IndexInput())
    yield opened
    opened.close()


def test_code_search_finds_named_types_by_kind(handle: ProjectHandle) -> None:
    hits = handle.call("code_search", CodeSearchInput(query="label names and values map", kind="type", limit=10)).results
    assert {h.name for h in hits} >= {"Labels", "ValueType", "Option", "Set", "Handler"}
    assert all(h.kind == "type" for h in hits)
    labels = next(h for h in hits if h.name == "Labels")
    assert (labels.file_path, labels.start_line) == ("labels/labels.go", 4)


def test_a_named_type_reads_back_and_contains_its_methods(handle: ProjectHandle) -> None:
    [hit] = [h for h in handle.call("code_search", CodeSearchInput(query="Labels", kind="type", limit=10)).results
             if h.name == "Labels"]
    symbol = handle.call("get_symbol", GetSymbolInput(symbol=hit.id))
    assert symbol.symbol.kind == "type" and symbol.symbol.signature == "type Labels map[string]string"
    related = handle.call("get_related", GetRelatedInput(entity_id=hit.id, relationship_types=["CONTAINS"], direction="outgoing"))
    assert {r.qualified_name for r in related.results} == {hit.qualified_name + ".Get"}


@pytest.mark.parametrize(("kind", "name"), [("record", "Line"), ("annotation", "Audited"), ("constructor", "Ledger")])
def test_java_declarations_keep_their_own_kind(handle: ProjectHandle, kind: str, name: str) -> None:
    hits = handle.call("code_search", CodeSearchInput(query=name, kind=kind, limit=10)).results
    assert name in {h.name for h in hits} and all(h.kind == kind for h in hits), [(h.name, h.kind) for h in hits]


def test_an_annotation_type_contains_its_elements(handle: ProjectHandle) -> None:
    [hit] = [h for h in handle.call("code_search", CodeSearchInput(query="Audited", kind="annotation")).results if h.name == "Audited"]
    related = handle.call("get_related", GetRelatedInput(entity_id=hit.id, relationship_types=["CONTAINS"], direction="outgoing"))
    assert {(r.name, r.kind) for r in related.results} == {("reason", "method")}

"""Named types of any underlying type are symbols of kind ``type`` end to end (issue 19, item 3):
Go's ``type Labels map[string]string``, ``type Option func(...)``, aliases, and TypeScript's
``type Handler = ...`` are indexed, found by ``code_search`` with ``kind="type"``, read with
``get_symbol``, and a Go method's receiver type contains the method in the graph."""

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

"""Memories as Markdown with YAML front matter, and as git notes: the round trip is lossless
(a property test over all 8 memory types and YAML's awkward strings), the file names, and the
errors a hand-edited file gets."""

from __future__ import annotations

import string
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from resources.memory.markdown import (
    MarkdownMemoryError,
    memory_file_name,
    parse_memory,
    parse_note,
    render_memory,
    render_note,
    slugify,
)
from resources.schemas.memory import MEMORY_TYPES, MemoryType, validate_metadata

PROPERTY_SETTINGS = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# Strings that YAML (1.1, as PyYAML reads it) would turn into something else, or that end front matter.
TRICKY = [
    "yes", "no", "on", "off", "Yes", "NO", "true", "False", "null", "Null", "~", "", " ", "1e3", "1.5", "0x1F", "017",
    "0o17", "1_000", "12:30:45", ".inf", "-.inf", ".nan", "2025-01-31", "2025-01-31T14:05:00Z", ": ", "a: b", "- x",
    "? q", "#comment", "a #b", "&anchor", "*alias", "!tag", "|", ">", "'single'", '"double"', "%YAML 1.1", "@at",
    "`tick`", "{flow: map}", "[flow, seq]", "<<", "=", "---", "...", "--- x", "---\nfake: front\n---", "  leading",
    "trailing  ", "\tTab", "line\n", "\nline", "a\n\nb", "a\n  b\n", " \n", "\n\n", "CRLF\r\nline", "cr\rcr",
    "nel\x85x", "ls\u2028ps\u2029", "bom\ufeff", "nul\x00ctl\x07\x1b", "é ü ß 中文 🚀 Ελληνικά", "\u200b\u00a0",
]

tricky_text = st.sampled_from(TRICKY)
any_text = st.one_of(
    tricky_text,
    st.text(),
    st.lists(st.one_of(tricky_text, st.text(max_size=12)), max_size=6).map("".join),
    st.lists(st.one_of(tricky_text, st.text(max_size=12)), max_size=6).map("\n".join),
)
nonblank = any_text.map(lambda s: s if s.strip() else f"x{s}")
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63), st.floats(allow_nan=False, allow_infinity=False), any_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)),
    max_leaves=12,
)
id_lists = st.one_of(st.none(), st.lists(any_text, max_size=3))
timestamps = st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat())


def _required(kind: MemoryType) -> st.SearchStrategy[dict[str, Any]]:
    """The fields each type needs, with awkward values, and a few optional ones."""
    if kind is MemoryType.REQUIREMENTS:
        return st.fixed_dictionaries({
            "requirement_id": st.builds("REQ-{}-{:03d}".format, st.text(string.ascii_uppercase + string.digits, min_size=1, max_size=5), st.integers(0, 99_999)),
            "title": nonblank, "priority": st.sampled_from(["Critical", "High", "Medium", "Low"]),
            "status": st.sampled_from(["Draft", "Approved", "Implemented", "Verified"]),
        }, optional={"description": any_text, "implementing_components": id_lists})
    if kind is MemoryType.DESIGN:
        return st.fixed_dictionaries({
            "design_type": st.sampled_from(["ADR", "Specification", "Architecture", "Interface"]), "title": nonblank,
            "status": st.sampled_from(["Proposed", "Accepted", "Deprecated", "Superseded"]),
        }, optional={"decision": any_text, "rationale": any_text, "related_requirements": id_lists, "commit_sha": st.text("0123456789abcdef", min_size=40, max_size=40)})
    if kind is MemoryType.CODE_PATTERN:
        return st.fixed_dictionaries({
            "pattern_name": nonblank, "pattern_type": st.sampled_from(["Template", "Convention", "Idiom", "Architecture"]),
            "language": nonblank, "code_template": nonblank, "usage_context": nonblank,
        })
    if kind is MemoryType.COMPONENT:
        return st.fixed_dictionaries({
            "component_id": nonblank, "component_type": st.sampled_from(["Frontend", "Backend", "Agent", "Library", "Service", "Database"]),
            "name": nonblank, "file_path": nonblank,
        }, optional={"public_interface": json_values, "version": any_text, "dependencies": id_lists})
    if kind is MemoryType.FUNCTION:
        return st.tuples(st.integers(1, 10_000), st.integers(0, 500)).flatmap(lambda lines: st.fixed_dictionaries({
            "name": nonblank, "signature": nonblank, "file_path": nonblank, "language": nonblank,
            "start_line": st.just(lines[0]), "end_line": st.just(lines[0] + lines[1]),
        }, optional={"docstring": any_text, "calls": id_lists}))
    if kind is MemoryType.TEST_HISTORY:
        return st.fixed_dictionaries({
            "test_name": nonblank, "test_file": nonblank, "status": st.sampled_from(["Passed", "Failed", "Skipped", "Error"]),
        }, optional={"failure_message": any_text, "design_alignment_score": st.floats(0, 1), "execution_time": timestamps})
    if kind is MemoryType.SESSION:
        return st.fixed_dictionaries({}, optional={
            "summary": any_text, "key_decisions": id_lists, "outcome": any_text, "end_time": timestamps,
        })
    return st.fixed_dictionaries({
        "category": st.sampled_from(["CodingStyle", "Naming", "Framework", "Tool", "Convention"]), "key": nonblank,
        "value": json_values, "scope": st.sampled_from(["Global", "Language", "Project", "Component"]),
    })


@st.composite
def memories(draw: st.DrawFn) -> dict[str, Any]:
    """A memory as export_memory writes it, with metadata valid for its type plus arbitrary extra keys."""
    kind = draw(st.sampled_from(MEMORY_TYPES))
    content = draw(any_text)
    metadata = draw(_required(kind))
    extras = draw(st.dictionaries(any_text, json_values, max_size=3))
    for key, value in extras.items():
        metadata.setdefault(key, value)
    if draw(st.booleans()):
        metadata["tags"] = draw(st.lists(any_text, max_size=3))
    metadata = validate_metadata(kind, metadata, content=content if content.strip() else "x")
    if draw(st.integers(0, 9)) == 0:
        metadata = {}  # empty metadata renders and parses too (the importer checks it against the type)
    deleted = draw(st.booleans())
    return {
        "id": str(draw(st.uuids())),
        "memory_type": str(kind),
        "content": content,
        "metadata": metadata,
        "importance_score": draw(st.floats(0, 1)),
        "version": draw(st.integers(1, 10_000)),
        "created_at": draw(timestamps),
        "updated_at": draw(timestamps),
        "deleted": deleted,
        "deleted_at": draw(timestamps) if deleted else None,
        "relationships": draw(st.lists(st.fixed_dictionaries({
            "type": st.sampled_from(["ADDRESSES", "IMPLEMENTS_REQ", "DEPENDS_ON", "RELATES_TO"]),
            "target_id": nonblank,
            "target_kind": st.sampled_from(["memory", "memory:requirements", "code:Function", "code:File"]),
            "properties": st.dictionaries(any_text, json_values, max_size=2),
        }), max_size=3)),
    }


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells 1 from 1.0 and True from 1 (YAML must not turn one into the other)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


BASE = {
    "id": "0b1e6a7c-3f0e-4a55-9d7e-2f1f3c1a9b10", "memory_type": "design", "content": "Use JWTs",
    "metadata": {"design_type": "ADR", "title": "ADR-7 tokens", "status": "Accepted"}, "importance_score": 0.5,
    "version": 1, "created_at": "2025-01-31T14:05:00+00:00", "updated_at": "2025-01-31T14:05:00+00:00",
    "deleted": False, "deleted_at": None, "relationships": [],
}


@PROPERTY_SETTINGS
@given(memories())
@example({**BASE, "content": "---\nid: fake\nmemory_type: session\n---\nbody\n---\n"})
@example({**BASE, "content": "  leading spaces\n\n\n", "metadata": {**BASE["metadata"], "yes": "null", "1e3": ": ", "nested": {"a": [{"b": "no"}]}}})
@example({**BASE, "memory_type": "session", "metadata": {}})
def test_render_then_parse_gives_the_same_memory(memory: dict[str, Any]) -> None:
    text = render_memory(memory)
    assert text.startswith("---\n")
    parsed = parse_memory(text)
    assert _same(parsed, memory), (text, parsed)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(memories(), max_size=4))
def test_note_round_trip_keeps_every_memory(records: list[dict[str, Any]]) -> None:
    parsed = parse_note(render_note(records))
    assert _same(parsed, records)


def test_the_file_reads_like_seed_002() -> None:
    memory = {**BASE, "metadata": {**BASE["metadata"], "tags": ["auth", "api"], "rationale": "Stateless.\nRotating keys."},
              "relationships": [{"type": "ADDRESSES", "target_id": "REQ-AUTH-001", "target_kind": "memory:requirements", "properties": {}}]}
    text = render_memory(memory)
    front, _, body = text.removeprefix("---\n").partition("\n---\n")
    assert front.splitlines()[:2] == [f"id: {BASE['id']}", "memory_type: design"]
    assert "tags:\n- auth\n- api" in front and "metadata:\n  design_type: ADR" in front
    assert "  rationale: |-\n    Stateless.\n    Rotating keys." in front  # multi-line text stays readable
    assert "properties" not in front and "deleted" not in front
    assert body == "Use JWTs\n"
    assert str(memory_file_name(memory)) == "design/adr-7-tokens-0b1e6a7c.md"


def test_file_names() -> None:
    session = {**BASE, "memory_type": "session", "metadata": {}, "content": "\n  Überarbeitung: Cache & Index!\nmore"}
    assert str(memory_file_name(session)) == "session/uberarbeitung-cache-index-0b1e6a7c.md"
    assert str(memory_file_name({**session, "content": "中文"})) == "session/session-0b1e6a7c.md"
    assert len(slugify("word " * 40)) <= 60 and not slugify("word " * 40).endswith("-")


def test_hand_written_file_without_optional_fields() -> None:
    text = "---\nmemory_type: session\ncreated_at: 2025-01-31T14:05:00Z\nmetadata:\n  outcome: shipped\n---\nFixed the cache.\n"
    assert parse_memory(text) == {
        "memory_type": "session", "created_at": "2025-01-31T14:05:00Z", "content": "Fixed the cache.",
        "metadata": {"outcome": "shipped"}, "relationships": [], "deleted": False, "deleted_at": None,
    }
    assert parse_memory(text.replace("\n", "\r\n"))["content"] == "Fixed the cache.\r"


@pytest.mark.parametrize(("text", "message"), [
    ("memory_type: design\n---\nx\n", "must start with a '---' line"),
    ("---\nmemory_type: design\nx\n", "front matter is not closed"),
    ("---\nmemory_type: design\nmetadata:\n  title: a: b\n---\nx\n", "line 4, column 11"),
    ("---\n- design\n---\nx\n", "must be a mapping of fields"),
    ("---\nmemory_type: design\ntitle: T\n---\nx\n", "unknown front matter field 'title' — put metadata fields under 'metadata:'"),
    ("---\nid: 1\nmemory_type: design\n---\nx\n", "field id: must be a string"),
    ("---\nmetadata: {}\n---\nx\n", "memory_type is missing"),
    ("---\nmemory_type: design\nmetadata: [a]\n---\nx\n", "field metadata: must be a mapping"),
    ("---\nmemory_type: design\ncreated_at: last tuesday\n---\nx\n", "field created_at: must be an ISO 8601 timestamp"),
    ("---\nmemory_type: design\nversion: 0\n---\nx\n", "field version: must be a whole number"),
    ("---\nmemory_type: design\ntags: auth\n---\nx\n", "field tags: must be a list of strings"),
    ("---\nmemory_type: design\nrelationships:\n- type: ADDRESSES\n---\nx\n", "relationships[0]: needs type and target_id"),
])
def test_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(MarkdownMemoryError, ) as caught:
        parse_memory(text)
    assert message in str(caught.value)


def test_note_errors() -> None:
    with pytest.raises(MarkdownMemoryError, match="not a codemem note"):
        parse_note("some other note\n")
    good = render_note([BASE, {**BASE, "id": str(uuid.uuid4())}])
    assert [r["id"] for r in parse_note(good)][0] == BASE["id"]
    broken = good.replace("memory_type: design", "memory_type: [", 1)
    with pytest.raises(MarkdownMemoryError, match="memory 1 of the note: front matter is not valid YAML"):
        parse_note(broken)


def test_pure_python_yaml_round_trips_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml (PyYAML's C extension) the pure-Python loader and dumper are used: the awkward
    strings must survive them as well (they write line-break-like characters differently)."""
    import importlib.util

    import yaml

    import resources.memory.markdown as module

    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    monkeypatch.delattr(yaml, "CSafeDumper", raising=False)
    spec = importlib.util.spec_from_file_location("memory_markdown_pure", module.__file__)
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    assert pure._yaml()[1].__mro__[1] is yaml.SafeLoader
    for text in TRICKY:
        memory = {**BASE, "content": text, "metadata": {**BASE["metadata"], text: text, "list": [text, {text: [text]}]},
                  "relationships": [{"type": "RELATES_TO", "target_id": text or "x", "target_kind": "memory", "properties": {text: text}}]}
        assert _same(pure.parse_memory(pure.render_memory(memory)), memory), text

"""A code point's shown-only fields are stored deflated (``resources.vectors.points``): read back
exactly, in about half the space of their JSON, and a packed value of an unknown format is
refused with what to do rather than read as garbage (issue 21, item 2: state on disk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resources.vectors.points import PACKED_KEY, SHOWN_FIELDS, read_payload, stored_payload

REPO = Path(__file__).resolve().parents[3]


def _payload(code: str) -> dict[str, object]:
    return {
        "id": "s1", "kind": "function", "name": "resolve_edges", "file_path": "pipelines/index_writes.py",
        "local_name": "resolve_edges", "signature": "def resolve_edges(ctx, touched_ids)", "docstring": "Re-resolve — ü.",
        "code": code, "code_truncated": False, "is_async": False, "extends": [], "implements": [],
        "content_hash": "9f" * 32, "symbol_hash": "a1" * 32, "indexed_at": "2026-11-28T10:25:12+00:00",
    }


@pytest.mark.parametrize("path", ["pipelines/index_writes.py", "resources/vectors/points.py", "query_server/entry.py"])
def test_shown_fields_round_trip_in_about_half_their_json(path: str) -> None:
    code = (REPO / path).read_text()[:1_500]
    payload = _payload(code)
    stored = stored_payload(payload)
    assert set(stored) == {k for k in payload if k not in SHOWN_FIELDS} | {PACKED_KEY}
    assert read_payload(stored) == payload
    shown_json = json.dumps({k: v for k, v in payload.items() if k in SHOWN_FIELDS})
    assert len(stored[PACKED_KEY]) < len(shown_json) * 0.6, (len(stored[PACKED_KEY]), len(shown_json))


def test_a_packed_value_of_another_format_is_refused_with_the_reason() -> None:
    stored = stored_payload(_payload("def f():\n    return 1\n"))
    with pytest.raises(ValueError, match="newer codemem"):
        read_payload({**stored, PACKED_KEY: "9" + stored[PACKED_KEY][1:]})

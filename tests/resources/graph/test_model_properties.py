"""What a node or relationship property may hold: checked on every value, by the fast path for
scalars and the full one for lists and floats alike, on the first use of a name and on later ones."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from resources.graph.model import GraphEdge, GraphNode

GOOD = {"line_number": 3, "confidence": "exact", "items": ["a", "b"], "weight": 0.5, "is_test": False, "note": None}


@pytest.mark.parametrize("round_", [1, 2])  # the second round meets names already seen
@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"a b": 1}, "invalid property name"),
        ({"line_number": float("inf")}, "non-finite float"),
        ({"items": [1.0, float("nan")]}, "non-finite float"),
        ({"items": ["a", None]}, "lists cannot hold null"),
        ({"items": {"nested": 1}}, "unsupported value type"),
        ({"items": [["x"]]}, "unsupported value type"),
        ({"note": b"bytes"}, "unsupported value type"),
        ({"name": "nul\x00inside"}, "U+0000 or U+0001"),
        ({"qualified_name": "a\x01b"}, "U+0000 or U+0001"),
        ({"items": ["ok", "nul\x00"]}, "U+0000 or U+0001"),
    ],
)
def test_bad_properties_are_refused(properties: dict, message: str, round_: int) -> None:
    GraphEdge(source_id="a", target_id="b", type="CALLS", properties=GOOD)
    with pytest.raises(ValidationError, match=re.escape(message)):
        GraphEdge(source_id="a", target_id="b", type="CALLS", properties=properties)
    with pytest.raises(ValidationError, match=re.escape(message)):
        GraphNode(id="n", label="Function", properties=properties)


def test_good_properties_are_kept_as_given() -> None:
    edge = GraphEdge(source_id="a", target_id="b", type="CALLS", properties={**GOOD, "signature": "f(x)\x01"})
    assert edge.properties["items"] == ["a", "b"] and edge.properties["signature"] == "f(x)\x01"  # not an indexed name

"""Cursors and the response budget shared by every tool."""

from __future__ import annotations

import base64
import json

import pytest

from query_server.paging import REPORT_LIST_CAP, ToolError, cap_report, cut_text, decode_cursor, encode_cursor


def test_cursor_round_trip_and_refusals() -> None:
    cursor = encode_cursor(40, "q1")
    assert decode_cursor(cursor, "q1") == 40 and decode_cursor(None, "q1") == 0
    with pytest.raises(ToolError, match="another query"):
        decode_cursor(cursor, "q2")
    for junk in ("%%%", base64.urlsafe_b64encode(b'{"o": Infinity, "q": "q1"}').decode(),
                 base64.urlsafe_b64encode(json.dumps({"o": -5, "q": "q1"}).encode()).decode()):
        with pytest.raises(ToolError, match="invalid cursor"):
            decode_cursor(junk, "q1")


def test_reports_are_capped_and_text_is_cut_with_a_pointer() -> None:
    report = {"files_seen": 5000, "skipped": [{"path": f"f{i}", "reason": "binary"} for i in range(4000)]}
    capped = cap_report(report)
    assert len(capped["skipped"]) == REPORT_LIST_CAP and capped["skipped_omitted"] == 4000 - REPORT_LIST_CAP
    assert capped["files_seen"] == 5000 and cap_report(None) is None
    text, cut = cut_text("x" * 10_000, 100, "memory_get returns the whole memory")
    assert cut and text.startswith("x" * 100) and "memory_get returns the whole memory" in text

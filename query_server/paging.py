"""What every tool response shares: errors, pagination cursors and the response-size budget.

Responses stay under 50,000 tokens. Tokens are estimated conservatively at 3 characters per
token (real tokenizers average 3.5-4 characters per token on source code and English), so the
cap holds for Claude's tokenizer too.
"""

from __future__ import annotations

import base64
import json

MAX_RESPONSE_TOKENS = 50_000
CHARS_PER_TOKEN = 3


class ToolError(Exception):
    """A tool call that cannot be served; the message says what went wrong and what to do."""


def estimate_tokens(text: str) -> int:
    """A conservative token estimate (over-counts, so the 50k cap holds for real tokenizers)."""
    return len(text) // CHARS_PER_TOKEN + 1


def encode_cursor(offset: int, query_key: str) -> str:
    """An opaque cursor for the page starting at ``offset`` of the query keyed ``query_key``."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "q": query_key}).encode()).decode()


def decode_cursor(cursor: str | None, query_key: str) -> int:
    """The offset a cursor points at (0 without one).

    Raises:
        ToolError: the cursor is malformed or belongs to another query.
    """
    if not cursor:
        return 0
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        offset = int(data["o"])
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise ToolError("invalid cursor — pass the next_cursor value of the previous page unchanged") from exc
    if data.get("q") != query_key:
        raise ToolError("this cursor belongs to another query — repeat the same query and filters with it")
    if offset < 0:
        raise ToolError("invalid cursor — pass the next_cursor value of the previous page unchanged")
    return offset


def cut_text(text: str, max_chars: int, hint: str) -> tuple[str, bool]:
    """``text`` cut to ``max_chars`` with a marker naming the tool that returns the whole."""
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars] + f"\n… [cut: {len(text) - max_chars} more characters — {hint}]", True


REPORT_LIST_CAP = 100


def cap_report(report: dict | None) -> dict | None:
    """An index report with its per-file lists (skipped, failed, ...) cut to their first
    ``REPORT_LIST_CAP`` entries and a ``<list>_omitted`` count, so status answers stay small on
    repositories with many skipped files (the full report is in the CLI's ``--json``)."""
    if not report:
        return report
    capped = dict(report)
    for key, value in report.items():
        if isinstance(value, list) and len(value) > REPORT_LIST_CAP:
            capped[key] = value[:REPORT_LIST_CAP]
            capped[f"{key}_omitted"] = len(value) - REPORT_LIST_CAP
    return capped

"""Claude Code session transcripts (JSONL, one entry per line): the conversation in them.

Read by the PreCompact/SessionEnd worker and by ``memory_extract``; standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def blocks(message: Any) -> list[dict[str, Any]]:
    """The content blocks of a transcript entry's message (a plain string is one text block)."""
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


NOT_A_REQUEST = ("<command-", "<local-command", "Caveat:", "[Request interrupted")
"""User text blocks that Claude Code writes itself (slash commands, caveats, interruptions)."""


def conversation_turns(text: str) -> Iterator[tuple[str, str, int, int]]:
    """The conversation of a JSONL transcript: ``(role, text, start, end)`` for each text block of
    the user's requests and the assistant's answers, ``start``/``end`` the character offsets of its
    line in ``text``. Tool calls, tool results and meta entries are left out (memory_extract reads
    the conversation, the session digest the rest)."""
    start = 0
    while start < len(text):
        newline = text.find("\n", start)
        end = len(text) if newline < 0 else newline
        line, line_start, start = text[start:end], start, end + 1
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("isMeta") or entry.get("type") not in ("user", "assistant"):
            continue
        for block in blocks(entry.get("message")):
            body = str(block.get("text", "")) if block.get("type") == "text" else ""
            if body.strip() and not (entry["type"] == "user" and body.lstrip().startswith(NOT_A_REQUEST)):
                yield entry["type"], body, line_start, line_start + len(line.rstrip("\r"))


def conversation_text(data: bytes) -> str:
    """A JSONL transcript's conversation as ``User:``/``Assistant:`` turns (what the hook hands to
    memory_extract: the prose, without the tool traffic that makes most of a transcript's size)."""
    text = data.decode("utf-8", errors="replace")
    return "\n\n".join(f"{role.capitalize()}: {body.strip()}" for role, body, _, _ in conversation_turns(text))

"""A scripted fake of the Anthropic Messages API for driving the real Claude Code CLI in tests.

``FakeAnthropic`` serves ``POST /v1/messages`` (streamed as server-sent events when the request
says ``"stream": true``, else one JSON message) and ``POST /v1/messages/count_tokens`` on
127.0.0.1, records every request body — the system prompt, the messages and the tools: what the
model would see — and answers from a script.

The script is keyed by a tag in the conversation's first user message (``[[tag]]``), so several
Claude Code sessions can share one fake at the same time. A conversation's step is the number of
assistant turns already in its messages, so the fake keeps no per-session state: step ``n`` of
``script[tag]`` is a ``Turn``, or a function of the request body that returns one (to answer
with what an earlier tool result said). Requests without a known tag (titles, summaries and
other side calls Claude Code makes) get a short text answer.

Standard library only.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TAG = re.compile(r"\[\[([A-Za-z0-9_-]+)\]\]")
_ids = itertools.count(1)


@dataclass
class Turn:
    """One assistant turn: optional text, then tool calls (name, input)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def blocks(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.text or not self.tool_calls:
            out.append({"type": "text", "text": self.text or "done"})
        for name, tool_input in self.tool_calls:
            out.append({"type": "tool_use", "id": f"toolu_fake{next(_ids):06d}", "name": name, "input": tool_input})
        return out


Step = Turn | Callable[[dict[str, Any]], Turn]


def text_of(content: Any) -> str:
    """All text in a message content (a string, or blocks with text / tool_result content), joined."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content")))
    return "\n".join(parts)


def conversation_tag(body: dict[str, Any]) -> str | None:
    """The ``[[tag]]`` in the first user message of a request, if any."""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            match = TAG.search(text_of(message.get("content")))
            if match:
                return match.group(1)
    return None


def tool_results(body: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Every tool result in a request: (tool name, result text, is_error), oldest first."""
    names: dict[str, str] = {}
    out: list[tuple[str, str, bool]] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                out.append((names.get(block.get("tool_use_id"), "?"), text_of(block.get("content")), bool(block.get("is_error"))))
    return out


class FakeAnthropic:
    """The fake API server; ``start()`` returns its base URL (for ``ANTHROPIC_BASE_URL``)."""

    def __init__(self, script: dict[str, list[Step]] | None = None) -> None:
        self.script: dict[str, list[Step]] = dict(script or {})
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # --- what the model saw -------------------------------------------------------------
    def conversation(self, tag: str) -> list[dict[str, Any]]:
        """The main-loop requests of conversation ``tag`` (those offering tools), in order."""
        with self.lock:
            return [r["body"] for r in self.requests
                    if r["path"].startswith("/v1/messages") and conversation_tag(r["body"]) == tag and r["body"].get("tools")]

    # --- answering ----------------------------------------------------------------------
    def answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        tag = conversation_tag(body)
        steps = self.script.get(tag or "")
        if not steps or not body.get("tools"):
            return Turn("ok").blocks()
        step_no = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        if step_no >= len(steps):
            return Turn("done").blocks()
        step = steps[step_no]
        turn = step(body) if callable(step) else step
        return turn.blocks()

    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - connectivity probes
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                self._json(200, {"data": [], "has_more": False})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                with fake.lock:
                    fake.requests.append({"path": path, "body": body, "headers": dict(self.headers)})
                if path.endswith("/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                    return
                if not path.endswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
                    return
                try:
                    blocks = fake.answer(body)
                except Exception as exc:  # a broken script shows in the test, not as a hang
                    blocks = Turn(f"fake API script error: {exc!r}").blocks()
                model = body.get("model") or "claude-fake"
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                message_id = f"msg_fake{next(_ids):06d}"
                if body.get("stream"):
                    self._stream(message_id, model, blocks, stop)
                else:
                    self._json(200, {
                        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
                        "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 10},
                    })

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_fake{next(_ids):06d}")
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message_id: str, model: str, blocks: list[dict[str, Any]], stop: str) -> None:
                events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
                    "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 0},
                }})]
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        start = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    else:
                        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    events += [
                        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
                        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                        ("content_block_stop", {"type": "content_block_stop", "index": index}),
                    ]
                events += [
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": 10}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_fake{next(_ids):06d}")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-anthropic", daemon=True)
        self.thread.start()
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

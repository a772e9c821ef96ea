"""The background half of the PreCompact and SessionEnd hooks: a session memory from a transcript.

``codemem hook PreCompact|SessionEnd`` answers Claude Code at once and starts this module as a
detached process (``python -m query_server.hooks.worker …``, new session, output to
``<state>/logs/hooks-worker.log``). It reads the session's JSONL transcript up to the size it had
when the hook fired and stores one ``session`` memory through the normal path — the project's
owner, ``memory_add`` with a ``request_id`` derived from the session id and the event, so a
repeated hook stores nothing twice.

One memory per Claude Code session: the first hook that fires creates it, later ones (another
compaction, the session's end) update it with the longer transcript (``memory_update``); the
mapping session → memory is kept in ``<state>/hooks/recorded-<session>.json``.
``CODEMEM_HOOK_WORKER_DRY_RUN=1`` digests the transcript and stores nothing (benchmarks, debugging).

What the transcript gives (Claude Code writes one JSON object per line: ``type`` user/assistant,
``timestamp``, ``message.content`` as text / ``tool_use`` / ``tool_result`` blocks):

* files touched — ``file_path`` of Edit, Write, MultiEdit and NotebookEdit tool uses;
* decisions — assistant text lines that decide ("decided", "chose", "will use", "going with" …);
* memories created — ids in the results of ``memory_add`` / ``memory_bulk_add`` tool calls;
* a summary — the first request, the files changed, the number of tool calls.

After the session memory, the conversation said since the last hook goes through ``memory_extract``;
its confident new decisions, preferences and gotchas (``HOOK_EXTRACT_TYPES``) are stored in one
``memory_bulk_add`` (tagged ``extracted``; contradictions of stored memories are kept and flagged in
the worker log). A failed extraction leaves the session memory stored and is retried by the next hook.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from query_server.hooks.common import session_key
from resources.transcripts import NOT_A_REQUEST, blocks, conversation_text

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
DECISION = re.compile(
    r"\b(decided|decide to|decision:|chose|choosing|opted (for|to)|going with|go with|settled on|will use|"
    r"we'll use|i'll use|switch(ed)? to|instead of|rather than)\b",
    re.I,
)
MAX_DECISIONS = 10
MAX_FILES_LISTED = 30
MAX_CONTENT = 6_000
LIST_BUDGET_CHARS = 24_000
"""At most this much JSON per list in the session's metadata (files_modified, memories_created):
metadata is capped at 64 KiB, and a session that touched thousands of files must still be stored."""
HOOK_EXTRACT_TYPES = ("design", "user_preference", "code_pattern")
"""What the hooks store from a session's conversation: decisions, preferences, gotchas and conventions
(test outcomes come from record_test_run, requirements from documents, functions from the index)."""
HOOK_MIN_CONFIDENCE = 0.75
"""Only clear cues: the hooks store without anyone reviewing the candidates."""
UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")


@dataclass
class SessionDigest:
    """What a transcript says about one session."""

    session_id: str
    requests: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)
    tools: Counter[str] = field(default_factory=Counter)
    first_at: str | None = None
    last_at: str | None = None

    @property
    def empty(self) -> bool:
        """True when there is nothing worth a memory."""
        return not (self.requests or self.files or self.decisions or self.memories or self.tools)


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root).as_posix() if os.path.isabs(path) else Path(path).as_posix()
    except (ValueError, OSError):
        return path


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def read_transcript(path: Path, upto: int | None, session_id: str, root: Path) -> SessionDigest:
    """Digest the JSONL transcript at ``path`` (its first ``upto`` bytes; whole lines only)."""
    digest = SessionDigest(session_id=session_id)
    with open(path, "rb") as handle:
        data = handle.read(upto) if upto is not None else handle.read()
    if upto is not None and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    memory_calls: set[str] = set()
    seen_decisions: set[str] = set()
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        stamp = entry.get("timestamp")
        if isinstance(stamp, str):
            digest.first_at = digest.first_at or stamp
            digest.last_at = stamp
        kind = entry.get("type")
        message = entry.get("message")
        if kind == "user":
            for block in blocks(message):
                if block.get("type") == "text" and not entry.get("isMeta"):
                    text = " ".join(str(block.get("text", "")).split())
                    if text and not text.startswith(NOT_A_REQUEST):
                        digest.requests.append(text)
                elif block.get("type") == "tool_result" and block.get("tool_use_id") in memory_calls:
                    for memory_id in UUID.findall(_result_text(block)):
                        if memory_id not in digest.memories:
                            digest.memories.append(memory_id)
        elif kind == "assistant":
            for block in blocks(message):
                if block.get("type") == "tool_use":
                    name = str(block.get("name", ""))
                    digest.tools[name.rsplit("__", 1)[-1]] += 1
                    tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                    if name in EDIT_TOOLS:
                        target = tool_input.get("file_path") or tool_input.get("notebook_path")
                        if isinstance(target, str) and target:
                            rel = _relative(target, root)
                            if rel not in digest.files:
                                digest.files.append(rel)
                    if name.endswith(("memory_add", "memory_bulk_add")):
                        memory_calls.add(str(block.get("id")))
                elif block.get("type") == "text":
                    for line in str(block.get("text", "")).splitlines():
                        line = line.strip().lstrip("-*• ").strip()
                        if 12 <= len(line) and DECISION.search(line) and len(digest.decisions) < MAX_DECISIONS:
                            line = line if len(line) <= 240 else line[:239].rstrip() + "…"
                            if line.lower() not in seen_decisions:
                                seen_decisions.add(line.lower())
                                digest.decisions.append(line)
    return digest


def render(digest: SessionDigest, event: str, detail: str) -> tuple[str, dict[str, Any]]:
    """The memory's content and its session metadata."""
    outcome = f"context compacted ({detail or 'auto'})" if event == "PreCompact" else f"session ended ({detail or 'other'})"
    first = digest.requests[0] if digest.requests else "no request recorded"
    summary = f"Claude Code session {digest.session_id[:8]}: {first[:200]}" + ("…" if len(first) > 200 else "")
    if digest.files:
        summary += f" — changed {len(digest.files)} file(s)"
    lines = [summary + "."]
    if len(digest.requests) > 1:
        last = digest.requests[-1]
        lines.append(f"Last request: {last[:200]}" + ("…" if len(last) > 200 else ""))
    if digest.files:
        shown = digest.files[:MAX_FILES_LISTED]
        more = len(digest.files) - len(shown)
        lines.append("Files changed: " + ", ".join(shown) + (f" and {more} more" if more else ""))
    if digest.decisions:
        lines.append("Decisions:")
        lines += [f"- {d}" for d in digest.decisions]
    if digest.memories:
        lines.append("Memories created: " + ", ".join(digest.memories))
    if digest.tools:
        lines.append("Tool calls: " + ", ".join(f"{name} {count}" for name, count in digest.tools.most_common(8)))
    lines.append(f"Outcome: {outcome}.")
    content = "\n".join(lines)
    if len(content) > MAX_CONTENT:
        content = content[: MAX_CONTENT - 1] + "…"
    now = datetime.now(UTC).isoformat()
    metadata: dict[str, Any] = {
        "session_id": digest.session_id,
        "start_time": digest.first_at or now,
        "end_time": digest.last_at or now,
        "summary": summary,
        "outcome": outcome,
        "source": "claude-code-hook",
        "hook_event": event,
    }
    if digest.decisions:
        metadata["key_decisions"] = digest.decisions
    for key, items in (("memories_created", digest.memories), ("files_modified", digest.files)):
        if items:
            kept = _within_budget(items)
            metadata[key] = kept
            if len(kept) < len(items):
                metadata[f"{key}_count"] = len(items)
    return content, metadata


def _within_budget(items: list[str]) -> list[str]:
    """The first items whose JSON fits ``LIST_BUDGET_CHARS`` (the rest are counted, not listed)."""
    kept: list[str] = []
    used = 2
    for item in items:
        used += len(json.dumps(item, ensure_ascii=False)) + 2
        if used > LIST_BUDGET_CHARS:
            break
        kept.append(item)
    return kept


def request_id(session_id: str, event: str) -> str:
    """The idempotency key of the hook's memory_add (the same session and event store once)."""
    return "codemem-hook:" + hashlib.sha256(f"{session_id}\0{event}".encode()).hexdigest()[:32]


def _state_path(state_dir: Path, session_id: str) -> Path:
    return state_dir / "hooks" / f"recorded-{session_key(session_id)}.json"


def record(args: argparse.Namespace) -> str:
    """Store (or update) the session's memory; returns what was done."""
    root = Path(args.project).resolve()
    state_dir = Path(args.state_dir).resolve()
    digest = read_transcript(Path(args.transcript), args.upto, args.session_id, root)
    if digest.empty:
        return "nothing to record: the transcript has no requests or tool calls"
    content, metadata = render(digest, args.event, args.detail)
    if os.environ.get("CODEMEM_HOOK_WORKER_DRY_RUN"):  # benchmarks and debugging: digest only, store nothing
        return f"dry run: would store {len(content)} characters, {len(digest.files)} file(s), {len(digest.decisions)} decision(s)"

    import fcntl

    from resources.schemas.memory import MemoryAddInput, MemoryUpdateInput
    from resources.settings import Settings

    from query_server.ownership import ProjectHandle
    from query_server.service import ToolError
    from query_server.tools import TOOLS

    state_file = _state_path(state_dir, args.session_id)
    state_file.parent.mkdir(parents=True, exist_ok=True)
    with open(state_file.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one writer per session at a time
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            state = {}
        if state.get("memory_id") and int(state.get("upto", 0)) >= (args.upto or 0):
            return f"already recorded in {state['memory_id']} (transcript up to {state['upto']} bytes)"
        handle = ProjectHandle(Settings(project_root=root, state_dir=state_dir))
        try:
            memory_id = state.get("memory_id")
            done = None
            if memory_id:
                try:
                    result = handle.call(TOOLS["memory_update"], MemoryUpdateInput(
                        memory_id=memory_id, memory_type="session", content=content, metadata=metadata,
                    ))
                    done = f"updated {memory_id} ({result.status}, version {result.version})"
                except ToolError as exc:  # deleted meanwhile: store a new one
                    print(f"memory {memory_id} could not be updated ({exc}); storing a new one", flush=True)
            if done is None:
                rid = request_id(args.session_id, args.event if not memory_id else f"{args.event}:{args.upto}")
                result = handle.call(TOOLS["memory_add"], MemoryAddInput(
                    memory_type="session", content=content, metadata=metadata, importance_score=0.4, request_id=rid,
                ))
                memory_id = result.memory_id
                done = f"stored {memory_id}"
            since = int(state.get("extracted_upto") or 0)
            try:
                done += "; " + extract_memories(handle, args, since)
                extracted_upto = args.upto
            except Exception as exc:  # noqa: BLE001 - the session memory stands; the next hook extracts again
                done += f"; extraction failed ({type(exc).__name__}: {exc})"
                extracted_upto = since
        finally:
            handle.close()
        tmp = state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"memory_id": memory_id, "upto": args.upto, "event": args.event,
                                   "extracted_upto": extracted_upto}), encoding="utf-8")
        os.replace(tmp, state_file)
    if args.event == "SessionEnd":
        done += "; " + read_ahead(root, state_dir)
    return done


def read_ahead(root: Path, state_dir: Path) -> str:
    """Read the stores for the next session's SessionStart, now that this one is recorded."""
    from query_server.hooks.session_start import read_ahead as save_for_next_start

    if save_for_next_start(str(root), str(state_dir)):
        return "next session's start read ahead"
    return "next session's start not read ahead (the stores changed meanwhile, or see logs/hooks.log)"


def extract_memories(handle: Any, args: argparse.Namespace, since: int) -> str:
    """Store the decisions, preferences and gotchas said in the session since the last hook's
    extraction (the transcript from byte ``since``): memory_extract on the conversation, then its
    confident new candidates of ``HOOK_EXTRACT_TYPES`` in one memory_bulk_add (keyed by the
    session and the transcript's size, so a repeated hook stores nothing twice)."""
    from query_server.memory.extract import memory_input
    from query_server.tools import TOOLS
    from resources.schemas.memory import (
        MAX_EXTRACT_CHARS,
        MemoryBulkAddInput,
        MemoryExtractInput,
    )

    with open(args.transcript, "rb") as transcript:
        data = transcript.read(args.upto) if args.upto is not None else transcript.read()
    data = data[: data.rfind(b"\n") + 1]
    start = data.rfind(b"\n", 0, since) + 1 if since else 0
    text = conversation_text(data[start:])[-MAX_EXTRACT_CHARS:]
    if not text.strip():
        return "no conversation to extract memories from"
    result = handle.call(TOOLS["memory_extract"], MemoryExtractInput(
        text=text, source="transcript", min_confidence=HOOK_MIN_CONFIDENCE, max_candidates=100,
    ))
    picked = [c for c in result.candidates if str(c.memory_type) in HOOK_EXTRACT_TYPES and c.duplicate_of is None]
    if not picked:
        return f"extracted nothing new ({len(result.candidates)} candidate(s))"
    inputs = []
    for candidate in picked:
        add = memory_input(candidate, "transcript", "project")
        add.metadata["extracted"].update(session_id=args.session_id, transcript_bytes=[start, len(data)])
        inputs.append(add)
    key = "codemem-hook-extract:" + hashlib.sha256(f"{args.session_id}\0{start}\0{len(data)}".encode()).hexdigest()[:32]
    added = handle.call(TOOLS["memory_bulk_add"], MemoryBulkAddInput(memories=inputs, request_id=key))
    rejected = {int(error["index"]) for error in added.errors if "index" in error}
    if added.errors and len(rejected) == len(inputs):  # each one invalid: trying again would not help
        return f"extracted memories rejected: {added.errors[0]['error']}"
    if added.errors and rejected:  # the batch is all or nothing: store the valid ones
        kept = [add for i, add in enumerate(inputs) if i not in rejected]
        added = handle.call(TOOLS["memory_bulk_add"], MemoryBulkAddInput(memories=kept, request_id=key + ":valid"))
    if added.errors:  # not the memories' fault: the next hook tries this part of the transcript again
        raise RuntimeError(f"extracted memories not stored: {added.errors[0]['error']}")
    flagged = sum(1 for c in picked if c.conflicts_with)
    return f"extracted {added.added_count} memories" + (f" ({flagged} contradict stored ones)" if flagged else "")


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments the hook passes and record the session memory (errors go to the log)."""
    parser = argparse.ArgumentParser(prog="python -m query_server.hooks.worker")
    parser.add_argument("--event", required=True, choices=("PreCompact", "SessionEnd"))
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--transcript", required=True)
    parser.add_argument("--upto", type=int, default=None, help="Read the transcript up to this many bytes.")
    parser.add_argument("--project", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--detail", default="", help="PreCompact trigger or SessionEnd reason.")
    args = parser.parse_args(argv)
    started = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        done = record(args)
    except Exception as exc:  # noqa: BLE001 - one line in the worker log, like the hooks
        print(f"{stamp} {args.event} session {args.session_id}: failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"{stamp} {args.event} session {args.session_id}: {done} in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

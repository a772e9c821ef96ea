"""Memories out and in: JSONL (a project file or inline), a directory of Markdown files, or git
notes on commits (session and design memories).

Exports read every scope's ledger; an import writes each scope's new memories in one
all-or-nothing ledger transaction, then projects them. Where an export may write is checked by
``query_server.output_paths``; what an import reads must be inside the project.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from query_server.memory.stores import MemoryStores
from query_server.output_paths import write_file_atomic
from query_server.paging import MAX_RESPONSE_TOKENS, ToolError, estimate_tokens
from resources.faults import fault_point
from resources.graph.cypher import ALL_EDGE_TYPES
from resources.memory.git_notes import NOTE_TYPES, GitNotes, GitNotesError, export_notes, import_notes
from resources.memory.ledger import LedgerError, MemoryRow, NewMemory, Relationship
from resources.memory.markdown import MarkdownMemoryError, read_directory, write_directory
from resources.schemas.memory import (
    MEMORY_SCOPES,
    MEMORY_TYPES,
    SHARED_SCOPES,
    ExportMemoryInput,
    ExportMemoryResult,
    ImportMemoryInput,
    ImportMemoryResult,
    MemoryValidationError,
    parse_memory_type,
    validate_metadata,
)


def export_memory(stores: MemoryStores, request: ExportMemoryInput) -> ExportMemoryResult:
    """Memories as JSONL (one per line, with relationships and scope), to a project file or inline;
    as Markdown files in a project directory; or as git notes on commits (session and design
    memories). JSONL exports every scope unless told otherwise; Markdown and git notes, which
    are meant to be committed, export the project scope unless told otherwise."""
    types = [str(t) for t in request.memory_types] if request.memory_types else None
    scopes = request.scopes or (list(MEMORY_SCOPES) if request.format == "jsonl" else ["project"])
    if request.format == "git_notes":
        refused = [t for t in types or () if t not in NOTE_TYPES]
        if refused:
            raise ToolError(f"git notes hold {' and '.join(NOTE_TYPES)} memories, not {', '.join(refused)} — use format markdown or jsonl for those")
        types = types or list(NOTE_TYPES)
    records: list[dict[str, Any]] = []
    rows = (
        (store, row) for store in stores.scopes.opened(scopes)
        for row in store.ledger.iter_memories(memory_types=types, include_deleted=request.include_deleted)
    )
    for store, row in rows:
        if not _matches(row, request.filters):
            continue
        out, _ = store.ledger.relationships_of(row.id)
        records.append({
            **row.snapshot(),
            "scope": row.scope,
            "access_count": row.access_count,
            "relationships": [
                {"type": r.rel_type, "target_id": r.target_id, "target_kind": r.target_kind, "properties": r.properties}
                for r in out
            ],
        })
    if request.format == "markdown":
        assert request.output_path is not None  # the input model requires it
        target = stores.output_path(request.output_path, directory=True)
        prune = [] if request.filters else (types or [str(t) for t in MEMORY_TYPES])
        try:
            count, removed = write_directory(target, records, prune_types=prune, overwrite=request.overwrite)
        except MarkdownMemoryError as exc:
            raise ToolError(str(exc)) from exc
        except (OSError, RecursionError) as exc:
            raise ToolError(
                f"cannot write {request.output_path[:200]!r}: {getattr(exc, 'strerror', None) or exc} — pass a shorter directory "
                "path inside the project"
            ) from exc
        return ExportMemoryResult(exported_count=count, output_path=str(target), removed_count=removed)
    if request.format == "git_notes":
        def deleted(memory_id: str) -> bool:
            row = stores.scopes.locate(memory_id)
            return row is not None and row.deleted and not request.include_deleted

        try:
            notes = GitNotes(stores.settings.resolved_root(), request.notes_ref)
            report = export_notes(notes, records, drop=deleted)
        except GitNotesError as exc:
            raise ToolError(str(exc)) from exc
        return ExportMemoryResult(exported_count=report.exported, output_path=notes.ref, removed_count=report.removed, errors=report.errors)
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    text = "".join(line + "\n" for line in lines)
    if request.output_path:
        path = stores.output_path(request.output_path, overwrite=request.overwrite)
        try:
            write_file_atomic(path, text.encode("utf-8"))
        except (OSError, RecursionError) as exc:  # name too long, a file in the way, no space, 1000s of levels
            raise ToolError(
                f"cannot write {request.output_path[:200]!r}: {getattr(exc, 'strerror', None) or exc} — pass a shorter file path "
                "inside the project, or leave output_path out to get the JSONL inline"
            ) from exc
        fault_point("export_memory:after_write")
        return ExportMemoryResult(exported_count=len(lines), output_path=str(path))
    if estimate_tokens(text) > MAX_RESPONSE_TOKENS - 1_000:
        raise ToolError(
            f"{len(lines)} memories are too large to return inline — pass output_path (a file inside the project) "
            "or narrow memory_types/filters"
        )
    return ExportMemoryResult(exported_count=len(lines), data=text)


def import_memory(stores: MemoryStores, request: ImportMemoryInput, *, request_id: str | None = None) -> ImportMemoryResult:
    """Memories from JSONL, a directory of Markdown memory files, or git notes, into ``scope`` (or
    the scope each JSONL line names, else project); existing ids, in any scope, are skipped,
    overwritten where they are, or refused (then nothing is imported). A repeated ``request_id``
    imports nothing twice and counts as the first call did."""
    if request.format == "markdown":
        items = _markdown_items(stores, request)
    elif request.format == "git_notes":
        items = _git_note_items(stores, request)
    else:
        items = _jsonl_items(stores, request)
    errors: list[dict[str, Any]] = []
    fresh: dict[str, list[NewMemory]] = {}
    overwrite: list[tuple[MemoryRow, dict[str, Any]]] = []
    seen: dict[str, dict[str, Any]] = {}
    skipped = 0
    for where, item in items:
        try:
            if isinstance(item, Exception):
                raise item
            memory_type = parse_memory_type(str(item.get("memory_type", "")))
            content = item.get("content")
            if not isinstance(content, str) or not content.strip():
                raise ValueError("content is missing or blank")
            metadata = validate_metadata(memory_type, item.get("metadata") or {}, content=content, strict_role=False)
            memory_id = str(item.get("id") or uuid.uuid4())
            try:
                uuid.UUID(memory_id)
            except ValueError as exc:
                raise ValueError(f"id {memory_id!r} is not a UUID — omit it to get a new one") from exc
            importance = item.get("importance_score", 0.5)
            if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
                raise ValueError(f"importance_score must be a number from 0 to 1 (got {importance!r})")
            importance = float(importance)
            if memory_id in seen:
                first = ", ".join(f"{key} {value}" for key, value in seen[memory_id].items())
                raise ValueError(f"memory {memory_id} appears twice (first at {first}) — keep one of them")
            scope = request.scope or str(item.get("scope") or "project").strip().lower()
            if scope not in MEMORY_SCOPES:
                raise ValueError(f"scope {item.get('scope')!r} is not one of {', '.join(MEMORY_SCOPES)}")
            if scope in SHARED_SCOPES and metadata.get("anchors"):
                raise ValueError(f"{scope} memories cannot be anchored to code (metadata.anchors) — import it with scope project")
        except (ValueError, TypeError, MemoryValidationError) as exc:
            errors.append({**where, "error": str(exc)})
            continue
        seen[memory_id] = where
        existing = stores.scopes.locate(memory_id)
        if existing is not None and stores.replayed(request_id, memory_id, ("create",)) is not None:
            existing = None  # this call created it before its owner died: the ledger returns it again
        if existing is not None:
            if request.conflict_resolution == "skip":
                skipped += 1
                continue
            if request.conflict_resolution == "error":
                errors.append({**where, "error": f"memory {memory_id} already exists (conflict_resolution='error')"})
                continue
            overwrite.append((existing, {"content": content, "metadata": metadata, "importance_score": importance}))
            continue
        rels = [
            Relationship(memory_id, str(r["type"]), str(r["target_id"]), str(r.get("target_kind", "memory")), r.get("properties") or {})
            for r in item.get("relationships") or []
            if isinstance(r, dict) and r.get("type") in ALL_EDGE_TYPES and r.get("target_id")
        ]
        fresh.setdefault(scope, []).append(NewMemory(
            memory_type=str(memory_type), content=content, metadata=metadata, importance_score=importance,
            relationships=rels, id=memory_id, created_at=item.get("created_at"), updated_at=item.get("updated_at"),
        ))
    if errors and request.conflict_resolution == "error":
        return ImportMemoryResult(imported=0, skipped=skipped, overwritten=0, errors=errors)
    touched: dict[str, list[str]] = {}
    added = 0
    targets = {scope: stores.store(scope, create=True) for scope in fresh}  # a scope that cannot be written refuses before any write
    try:  # one all-or-nothing transaction per scope
        for scope, news in fresh.items():
            rows = targets[scope].ledger.add(news, request_id=request_id)
            touched.setdefault(scope, []).extend(row.id for row in rows)
            added += len(rows)
        for row, change in overwrite:
            stores.store(row.scope).ledger.update(row.id, request_id=request_id, operation="import_overwrite", **change)
            touched.setdefault(row.scope, []).append(row.id)
    except LedgerError as exc:
        raise ToolError(str(exc)) from exc
    fault_point("import_memory:after_ledger")
    for scope, ids in touched.items():
        for start in range(0, len(ids), 128):
            stores.project(ids[start : start + 128], scope=scope)
    return ImportMemoryResult(imported=added, skipped=skipped, overwritten=len(overwrite), errors=errors)


def _matches(row: MemoryRow, filters: dict[str, Any] | None) -> bool:
    """Whether the row's metadata has every key of ``filters`` (a list matches any of its values)."""
    for key, value in (filters or {}).items():
        have = row.metadata.get(key)
        if isinstance(value, list) and have not in value or not isinstance(value, list) and have != value:
            return False
    return True


def _jsonl_items(stores: MemoryStores, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
    if request.input_path:
        path = stores.confined(request.input_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ToolError(f"cannot read {request.input_path}: {exc.strerror} — pass a JSONL file inside the project") from exc
    else:
        text = request.data or ""
    items: list[tuple[dict[str, Any], Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            item = ValueError(
                f"not valid JSON ({exc.msg} at column {exc.colno}) — each line must be one JSON object, "
                "as export_memory writes"
            )
        if not isinstance(item, dict | Exception):
            item = ValueError("each line must be a JSON object with memory_type and content")
        items.append(({"line": number}, item))
    return items


def _markdown_items(stores: MemoryStores, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
    assert request.input_path is not None  # the input model requires it
    source = stores.confined(request.input_path)
    if not source.exists():
        raise ToolError(f"{request.input_path} does not exist — pass a directory written by `codemem export --markdown` (inside the project)")
    root = stores.settings.resolved_root()
    return [
        ({"file": path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)}, item)
        for path, item in read_directory(source)
    ]


def _git_note_items(stores: MemoryStores, request: ImportMemoryInput) -> list[tuple[dict[str, Any], Any]]:
    try:
        notes = GitNotes(stores.settings.resolved_root(), request.notes_ref)
        return [({"note": commit}, item) for commit, item in import_notes(notes)]
    except GitNotesError as exc:
        raise ToolError(str(exc)) from exc

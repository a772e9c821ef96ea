"""The code graph and a symbol's neighbourhood: graph_query (read-only Cypher), get_symbol (summary,
callers, callees, code), get_related (entities within a few hops), and resolving what a caller
names — a symbol id, a qualified name or an indexed file path."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipelines.c_family import C_FAMILY
from pipelines.discovery import confine_path
from pipelines.indexer import CODE_COLLECTION
from pipelines.records import file_id, graph_label
from query_server.code.lookups import CodeLookups, being_rebuilt
from query_server.paging import CHARS_PER_TOKEN, MAX_RESPONSE_TOKENS, ToolError, estimate_tokens
from query_server.paging import decode_cursor as _decode_cursor
from query_server.paging import encode_cursor as _encode_cursor
from resources.schemas.tools import (
    GetRelatedInput,
    GetRelatedResult,
    GetSymbolInput,
    GetSymbolResult,
    GraphQueryInput,
    GraphQueryResult,
    RelatedEntity,
)


class SymbolTools(CodeLookups):
    """The code graph, symbols and what they relate to."""

    def graph_query(self, request: GraphQueryInput) -> GraphQueryResult:
        """Run read-only Cypher over the code graph."""
        from resources.graph.store import GraphQueryError, ReadOnlyViolation

        try:
            columns, rows, truncated = self.graph.read_query(
                request.cypher, request.parameters or {}, request.limit, timeout_s=self.settings.graph_query_timeout_s
            )
        except ReadOnlyViolation as exc:
            raise ToolError(str(exc)) from exc
        except GraphQueryError as exc:
            raise ToolError(str(exc)) from exc
        result = GraphQueryResult(columns=columns, results=rows, truncated=truncated)
        while estimate_tokens(result.model_dump_json()) > MAX_RESPONSE_TOKENS and result.results:
            result.results = result.results[: len(result.results) // 2]
            result.truncated = True
        return result

    def _resolve_entity(self, entity: str) -> tuple[str, str, dict[str, Any]]:
        """(id, graph label, description) of a symbol id, a qualified name or a file path."""
        rows = self.manifest.find_symbols(symbol_id=entity) or self.manifest.find_symbols(qualified_name=entity)
        if len(rows) > 1 and all(r.language in C_FAMILY for r in rows):  # a header's declaration names its definition too
            declared = self.manifest.declarations(r.path for r in rows)
            rows = [r for r in rows if r.id not in declared] or rows
        if len(rows) > 1:
            choices = ", ".join(f"{r.id} ({r.path} {r.local_name})" for r in rows[:5])
            raise ToolError(f"{entity!r} names {len(rows)} symbols (overloads) — pass one id: {choices}")
        if rows:
            row = rows[0]
            return row.id, graph_label(row.kind), {
                "id": row.id, "kind": row.kind, "qualified_name": row.qualified_name, "file_path": row.path,
            }
        path = entity.strip().lstrip("./")
        if self.manifest.file(path) is not None:
            return file_id(path), "File", {"id": file_id(path), "kind": "file", "file_path": path}
        running = self._running_job()
        if running is not None:
            raise ToolError(f"Entity not found: {entity!r} — {being_rebuilt(running)}")
        raise ToolError(
            f"Entity not found: {entity!r} — pass an id from code_search, a qualified name as code_search "
            "shows it ('pkg.module.Class.method', 'com.acme.Invoice.total', 'crate::a::Type::method'), or a "
            "repo-relative file path that is indexed"
        )

    def _code_target(self, entity: str) -> tuple[str, str, str | None] | None:
        """A code entity a memory may point at: (node id, label, display name), None if unknown."""
        try:
            node_id, label, info = self._resolve_entity(entity)
        except ToolError as exc:
            if str(exc).startswith("Entity not found"):
                return None
            raise
        return node_id, label, info.get("qualified_name") or info.get("file_path")

    def code_link_checker(self) -> Callable[[str], bool]:
        """For one normalization run: whether a memory's link to code (a symbol or file node id)
        still points at indexed code. Always True while that cannot be told — nothing indexed yet,
        or an index job running — so no link is dropped on an index being built or rebuilt."""
        if self._running_job() is not None or not self.manifest.counts()["files"]:
            return lambda _node_id: True
        files: dict[str, str] = {}

        def indexed(node_id: str) -> bool:
            if self.manifest.find_symbols(symbol_id=node_id):
                return True
            if not files:
                files.update(self._files_by_id())
            return node_id in files

        return indexed

    def get_symbol(self, request: GetSymbolInput) -> GetSymbolResult:
        """A symbol's summary, callers and callees; its full code with ``include_code``."""
        from resources.graph.cypher import callers_and_callees_query

        sid, label, _ = self._resolve_entity(request.symbol)
        if label == "File":
            raise ToolError(f"{request.symbol!r} is a file — get_symbol takes a function or class; use get_related for files")
        points = self.vectors.retrieve(CODE_COLLECTION, [sid])
        if not points:
            raise ToolError(f"symbol {sid} is in the index but not in the vector store — run `codemem index` to repair it")
        hit = self._to_hit(sid, 1.0, points[0].payload, {})
        _, rows, _ = self.graph.read_query(callers_and_callees_query(label), {"id": sid, "limit": 200}, 200)
        callers = [{k: v for k, v in r.items() if k != "role"} for r in rows if r["role"] == "caller"]
        callees = [{k: v for k, v in r.items() if k != "role"} for r in rows if r["role"] == "callee"]
        code = None
        if request.include_code:
            path = confine_path(self.settings.resolved_root(), hit.file_path)
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise ToolError(f"cannot read {hit.file_path}: {exc.strerror} — re-run `codemem index`") from exc
            code = "\n".join(lines[hit.start_line - 1 : hit.end_line])
            if estimate_tokens(code) > MAX_RESPONSE_TOKENS - 5_000:
                code = code[: (MAX_RESPONSE_TOKENS - 5_000) * CHARS_PER_TOKEN] + "\n… [cut at the response limit]"
        return GetSymbolResult(symbol=hit, callers=callers, callees=callees, code=code)

    def get_related(self, request: GetRelatedInput) -> GetRelatedResult:
        """Entities within ``depth`` hops of a symbol, a file or a memory, nearest first (breadth-first).

        One walk over the code graph and the memory graph: a memory's links (the ledger's
        relationships, every scope) lead to memories and code, a symbol leads to the memories
        linked to it, and the graph's edges (code edges, projected memory links, the design layer's
        derived IMPLEMENTS_REQ / TESTS / USES_PATTERN / DEPENDS_ON / FOLLOWS_DESIGN) to the rest.
        """
        from resources.graph.cypher import ALL_LABELS, one_hop_query

        start = self._resolve_start(request.entity_id)
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor"}), sort_keys=True)
        offset = _decode_cursor(request.cursor, key)
        wanted = offset + request.limit
        types = list(request.relationship_types or [])
        visited = {start.id}
        frontier: dict[str, _Walked] = {start.id: _Walked(start.label, [])}
        results: list[RelatedEntity] = []
        truncated = False
        for distance in range(1, request.depth + 1):
            steps: list[tuple[str, str, bool, dict[str, Any] | None]] = []  # (from, to, outgoing, graph row)
            by_label: dict[str, list[str]] = {}
            for node_id, walked in frontier.items():
                if walked.label in ALL_LABELS:  # a node of an unknown label is reported, not walked on
                    by_label.setdefault(walked.label, []).append(node_id)
            room = wanted + 1 - len(results)
            for node_label, ids in sorted(by_label.items()):
                _, rows, _ = self.graph.read_query(
                    one_hop_query(node_label, types, request.direction), {"ids": ids, "limit": room * 4}, room * 4
                )
                steps.extend((row["source"], row["id"], bool(row.get("outgoing", True)), row) for row in rows)
            steps.extend(self._linked(frontier, types, request.direction))
            reached = self._describe(steps, frontier, visited, distance)
            for item in reached:
                visited.add(item.id)
            results.extend(reached)
            if len(results) > wanted:
                truncated = True
                break
            frontier = {item.id: _Walked(item.label, item.via) for item in reached}
            if not frontier:
                break
        page = results[offset:wanted]
        budget = MAX_RESPONSE_TOKENS - 1_000 - estimate_tokens(json.dumps(start.entity))
        kept: list[RelatedEntity] = []
        for item in page:
            budget -= estimate_tokens(item.model_dump_json())
            if budget < 0:
                truncated = True
                break
            kept.append(item)
        return GetRelatedResult(
            entity=start.entity, results=kept, truncated=truncated,
            next_cursor=_encode_cursor(offset + len(kept), key) if truncated and kept else None,
        )

    # -- the memory side of the walk -----------------------------------------------------------------
    def _resolve_start(self, entity: str) -> _Start:
        """Where a walk starts: a memory (by id, any scope) or a code entity (``_resolve_entity``)."""
        from resources.memory.projection import GRAPH_LABELS, memory_title

        row = self.service.memory.scopes.locate(entity.strip())
        if row is not None:
            if row.deleted:
                raise ToolError(
                    f"memory {row.id} is deleted — memory_restore it first, or start from a memory that is live"
                )
            return _Start(row.id, GRAPH_LABELS[row.memory_type], {
                "id": row.id, "kind": "memory", "memory_type": row.memory_type, "scope": row.scope,
                "title": _short(memory_title(row.metadata) or row.content),
            })
        sid, label, info = self._resolve_entity(entity)
        return _Start(sid, label, info)

    def _linked(
        self, frontier: dict[str, _Walked], types: list[str], direction: str
    ) -> list[tuple[str, str, bool, dict[str, Any] | None]]:
        """One hop over the memories' own links (the ledger, every scope): from a memory to what it
        links to, and from anything to the memories that link to it."""
        steps: list[tuple[str, str, bool, dict[str, Any] | None]] = []
        wanted_types = set(types)
        for store in self.service.memory.scopes.opened():
            for rel in store.ledger.relationships_touching(list(frontier)):
                if wanted_types and rel.rel_type not in wanted_types:
                    continue
                target_label = rel.target_kind.split(":", 1)[1] if ":" in rel.target_kind else None
                step = {"rel": rel.rel_type, "target_kind": rel.target_kind, "target_label": target_label}
                if rel.source_id in frontier and direction in ("outgoing", "both"):
                    steps.append((rel.source_id, rel.target_id, True, {**step, "ledger": True}))
                if rel.target_id in frontier and direction in ("incoming", "both"):
                    steps.append((rel.target_id, rel.source_id, False, {**step, "ledger": True, "target_kind": "memory:"}))
        steps.sort(key=lambda s: (s[3]["rel"] if s[3] else "", s[1]))
        return steps

    def _describe(
        self,
        steps: list[tuple[str, str, bool, dict[str, Any] | None]],
        frontier: dict[str, _Walked],
        visited: set[str],
        distance: int,
    ) -> list[RelatedEntity]:
        """The nodes first reached by ``steps`` (in order), as related entities; links to memories
        that are deleted or gone, and to symbols no longer indexed, lead nowhere."""
        from resources.graph.cypher import MEMORY_LABELS
        from resources.memory.projection import GRAPH_LABELS, memory_title

        fresh: list[tuple[str, str, bool, dict[str, Any]]] = []
        seen: set[str] = set()
        for source, target, outgoing, row in steps:
            if target in visited or target in seen or source not in frontier or row is None:
                continue
            seen.add(target)
            fresh.append((source, target, outgoing, row))
        memory_ids = [
            t for _, t, _, row in fresh
            if (row.get("ledger") and str(row.get("target_kind", "")).startswith("memory:"))
            or (not row.get("ledger") and (row.get("labels") or ["?"])[0] in MEMORY_LABELS)
        ]
        memories = self.service.memory.scopes.get_many(memory_ids) if memory_ids else {}
        files: dict[str, str] | None = None  # read once per hop, when a link to a file is met
        reached: list[RelatedEntity] = []
        for source, target, outgoing, row in fresh:
            via = [*frontier[source].via, row["rel"]]
            common = {
                "id": target, "distance": distance, "via": via, "edge": row["rel"],
                "edge_direction": "outgoing" if outgoing else "incoming", "reached_from": source,
            }
            if target in memories or target in memory_ids:
                memory = memories.get(target)
                if memory is None or memory.deleted:
                    continue
                reached.append(RelatedEntity(
                    **common, label=GRAPH_LABELS[memory.memory_type], name=memory_title(memory.metadata),
                    file_path=memory.metadata.get("source_document") or memory.metadata.get("file_path"),
                    node_kind="memory", memory_type=memory.memory_type,
                    title=_short(memory_title(memory.metadata) or memory.content),
                ))
            elif not row.get("ledger"):
                node_type = (row.get("labels") or ["?"])[0]
                reached.append(RelatedEntity(
                    **common, label=node_type, name=row.get("name"), qualified_name=row.get("qualified_name"),
                    file_path=row.get("file_path"), start_line=row.get("start_line"), kind=row.get("kind"),
                    node_kind=_CODE_NODE_KINDS.get(node_type, "symbol"),
                    title=row.get("qualified_name") or row.get("file_path") or row.get("name"),
                ))
            else:
                if row.get("target_label") == "File" and files is None:
                    files = self._files_by_id()
                code = self._linked_code(target, files if row.get("target_label") == "File" else None)
                if code is not None:
                    reached.append(RelatedEntity(**common, **code))
        return reached

    def _files_by_id(self) -> dict[str, str]:
        """Indexed file paths by their graph node id."""
        return {file_id(path): path for path in self.manifest.paths()}

    def _linked_code(self, target: str, files: dict[str, str] | None) -> dict[str, Any] | None:
        """What a memory's link to code points at, from the index (``files``: the indexed files by
        node id, given for a link to a file); None when it is no longer indexed."""
        rows = self.manifest.find_symbols(symbol_id=target)
        if rows:
            row = rows[0]
            return {
                "label": graph_label(row.kind), "name": row.name, "qualified_name": row.qualified_name,
                "file_path": row.path, "kind": row.kind, "node_kind": "symbol", "title": row.qualified_name,
            }
        path = files.get(target) if files is not None else None
        return None if path is None else {"label": "File", "file_path": path, "node_kind": "file", "title": path}


@dataclass
class _Walked:
    """A node on the walk's frontier: its graph label and the relationship path that reached it."""

    label: str
    via: list[str]


@dataclass
class _Start:
    """Where a walk starts: its id, graph label and description (the result's ``entity``)."""

    id: str
    label: str
    entity: dict[str, Any]


_CODE_NODE_KINDS: dict[str, str] = {"File": "file", "Module": "module", "Function": "symbol", "Class": "symbol"}


def _short(text: str, limit: int = 80) -> str:
    """A one-line label of at most ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"

"""The code graph and a symbol's neighbourhood: graph_query (read-only Cypher), get_symbol (summary,
callers, callees, code), get_related (entities within a few hops), and resolving what a caller
names — a symbol id, a qualified name or an indexed file path."""

from __future__ import annotations

import json
from typing import Any

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
        """Entities within ``depth`` hops of a symbol or file, nearest first (breadth-first)."""
        from resources.graph.cypher import one_hop_query

        sid, label, entity = self._resolve_entity(request.entity_id)
        key = json.dumps(request.model_dump(mode="json", exclude={"limit", "cursor"}), sort_keys=True)
        offset = _decode_cursor(request.cursor, key)
        wanted = offset + request.limit
        types = request.relationship_types or []
        visited = {sid}
        frontier: dict[str, tuple[str, list[str]]] = {sid: (label, [])}  # id -> (label, relationship path)
        results: list[RelatedEntity] = []
        truncated = False
        for distance in range(1, request.depth + 1):
            by_label: dict[str, list[str]] = {}
            for node_id, (node_label, _) in frontier.items():
                by_label.setdefault(node_label, []).append(node_id)
            reached: dict[str, tuple[str, list[str]]] = {}
            for node_label, ids in sorted(by_label.items()):
                room = wanted + 1 - len(results)
                if room <= 0:
                    break
                _, rows, _ = self.graph.read_query(
                    one_hop_query(node_label, types, request.direction), {"ids": ids, "limit": room * 4}, room * 4
                )
                for row in rows:
                    if row["id"] in visited:
                        continue
                    visited.add(row["id"])
                    node_type = (row.get("labels") or ["?"])[0]
                    via = [*frontier[row["source"]][1], row["rel"]]
                    reached[row["id"]] = (node_type, via)
                    results.append(
                        RelatedEntity(
                            id=row["id"], label=node_type, name=row.get("name"),
                            qualified_name=row.get("qualified_name"), file_path=row.get("file_path"),
                            start_line=row.get("start_line"), kind=row.get("kind"), distance=distance, via=via,
                        )
                    )
            if len(results) > wanted:
                truncated = True
                break
            frontier = reached
            if not frontier:
                break
        page = results[offset:wanted]
        budget = MAX_RESPONSE_TOKENS - 1_000 - estimate_tokens(json.dumps(entity))
        kept: list[RelatedEntity] = []
        for item in page:
            budget -= estimate_tokens(item.model_dump_json())
            if budget < 0:
                truncated = True
                break
            kept.append(item)
        return GetRelatedResult(
            entity=entity, results=kept, truncated=truncated,
            next_cursor=_encode_cursor(offset + len(kept), key) if truncated and kept else None,
        )

"""impact_of_change: the symbols a change touches (a diff, files or symbols) and what depends on
them — callers, tests, requirements, designs, patterns and memories anchored to them."""

from __future__ import annotations

import re
from typing import Any

from pipelines.design.anchors import QUALIFIED_NAME_FIELDS
from pipelines.design.patterns import requirement_citations
from pipelines.discovery import DiscoveryError, confine_path
from pipelines.index_context import CODE_COLLECTION
from query_server.design.lookups import CLASS_KINDS, MAX_ITEMS, DesignLookups
from query_server.paging import ToolError
from resources.schemas.design import ImpactOfChangeInput, ImpactOfChangeResult

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class ChangeImpact(DesignLookups):
    """What a change touches and what depends on it."""

    def impact_of_change(self, request: ImpactOfChangeInput) -> ImpactOfChangeResult:
        """Symbols a change touches and what depends on them: callers, tests, requirements,
        designs, patterns and memories anchored to them."""
        ranges: dict[str, list[tuple[int, int]] | None] = {}
        if request.diff:
            ranges.update(_diff_ranges(request.diff))
        for raw in request.files or []:
            try:
                path = confine_path(self.settings.resolved_root(), raw)
            except DiscoveryError as exc:
                raise ToolError(f"{exc} — pass repo-relative paths inside the project") from exc
            ranges.setdefault(path.relative_to(self.settings.resolved_root()).as_posix(), None)
        changed: dict[str, dict[str, Any]] = {}
        if ranges:
            for payload in self._code(file_path=sorted(ranges)):
                spans = ranges.get(payload["file_path"])
                if spans is None or any(a <= payload["end_line"] and payload["start_line"] <= b for a, b in spans):
                    changed[payload["id"]] = payload
        for raw in request.symbols or []:
            for payload in self._code_named(raw) or self._code(id=[raw]) or self._code(name=[raw]):
                changed[payload["id"]] = payload
        if not changed and not ranges:
            raise ToolError("none of the given symbols is indexed — pass ids or qualified names from code_search, or changed files")
        callers: dict[str, dict[str, Any]] = {}
        ids = sorted(changed)
        truncated = False
        if ids:
            _, rows, truncated = self.graph.read_query(
                f"MATCH (c)-[:CALLS*1..{request.depth}]->(s) WHERE s.id IN $ids AND NOT c.id IN $ids "
                "RETURN DISTINCT c.id AS id, c.name AS name, c.qualified_name AS qualified_name, c.file_path AS file_path, c.start_line AS start_line",
                {"ids": ids}, limit=500,
            )
            for row in rows:
                callers[row["id"]] = row
        caller_payloads = {h.id: h.payload for h in self.vectors.retrieve(CODE_COLLECTION, list(callers))} if callers else {}
        every = {**changed, **caller_payloads}
        requirement_ids = sorted({r for p in every.values() for r in (p.get("requirement_ids") or [])})
        tests = {pid: p for pid, p in every.items() if p.get("is_test")}
        for hit in requirement_citations(self.vectors, requirement_ids):
            if hit.payload.get("is_test"):
                tests.setdefault(hit.id, hit.payload)
        requirements = []
        requirement_memory_ids = []
        for requirement_id in requirement_ids:
            row = self._requirement(requirement_id)
            requirements.append({"requirement_id": requirement_id, "memory_id": row.id if row else None, "title": row.metadata.get("title") if row else None})
            if row:
                requirement_memory_ids.append(row.id)
        designs = self._designs_for(requirement_ids, requirement_memory_ids)
        changed_classes = {p["id"] for p in changed.values() if p["kind"] in CLASS_KINDS}
        changed_containers = {(p["file_path"], p.get("container")) for p in changed.values()}
        changed_files = {p["file_path"] for p in changed.values()}
        patterns = []
        for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False):
            impls = row.metadata.get("implementations") or []
            hit = [i for i in impls if i.get("id") in changed_classes or any(i.get("file_path") == f and i.get("name") == c for f, c in changed_containers)]
            base_changed = row.metadata.get("base_file") in changed_files
            if hit or base_changed:
                patterns.append({
                    "memory_id": row.id, "pattern_name": row.metadata.get("pattern_name"), "base_class": row.metadata.get("base_class"),
                    "why": "the base class changed: every implementation may need the change" if base_changed else "an implementation changed: keep it consistent (check_consistency)",
                    "implementations": [i.get("name") for i in (impls if base_changed else hit)][:50],
                })
        names = {p.get(field) for p in every.values() for field in QUALIFIED_NAME_FIELDS} - {None, ""}
        anchored = [
            {"memory_id": row.id, "memory_type": row.memory_type, "preview": row.content[:200], "anchors": [a.get("qualified_name") for a in row.metadata.get("anchors") or []]}
            for row in self.ledger.anchored_memories()
            if any(a.get("qualified_name") in names for a in row.metadata.get("anchors") or [] if isinstance(a, dict))
        ]

        def brief(p: dict[str, Any]) -> dict[str, Any]:
            return {k: p.get(k) for k in ("id", "kind", "name", "qualified_name", "file_path", "start_line", "end_line")}

        summary = (
            f"{len(changed)} changed symbol(s); {len(callers)} caller(s) within {request.depth} hop(s); {len(tests)} test(s) to run; "
            f"{len(requirements)} requirement(s), {len(designs)} design(s), {len(patterns)} pattern(s), {len(anchored)} anchored memorie(s) to re-check"
        )
        return ImpactOfChangeResult(
            changed_symbols=[brief(p) for p in list(changed.values())[:MAX_ITEMS]],
            affected_callers=[brief(caller_payloads.get(i, r)) for i, r in list(callers.items())[:MAX_ITEMS]],
            tests=[brief(p) for p in sorted(tests.values(), key=lambda p: (p["file_path"], p["start_line"]))[:MAX_ITEMS]],
            requirements=requirements, designs=designs, patterns=patterns, anchored_memories=anchored[:MAX_ITEMS],
            summary=summary, truncated=truncated or len(changed) > MAX_ITEMS or len(callers) > MAX_ITEMS,
        )


def _diff_ranges(diff: str) -> dict[str, list[tuple[int, int]] | None]:
    """Changed line ranges (new side) per file of a unified diff; a deleted file maps to None."""
    ranges: dict[str, list[tuple[int, int]] | None] = {}
    current: str | None = None
    old_path: str | None = None
    for line in diff.splitlines():
        if line.startswith("--- "):
            old_path = line[4:].strip().removeprefix("a/")
        elif line.startswith("+++ "):
            new = line[4:].strip()
            if new == "/dev/null":
                current = None
                if old_path and old_path != "/dev/null":
                    ranges[old_path] = None
            else:
                current = new.removeprefix("b/")
                ranges.setdefault(current, [])
        elif current is not None and (match := _HUNK.match(line)):
            start, count = int(match.group(3)), int(match.group(4) or 1)
            spans = ranges.get(current)
            if spans is not None:
                spans.append((start, start + max(count, 1) - 1))
    return ranges

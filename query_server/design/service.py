"""The design-alignment tools as plain methods: check_consistency, validate_fix,
get_design_context, trace_requirements, record_test_run, impact_of_change and memory_health.

They read what the pipeline derives (``pipelines.design.derive``: requirement citations in the code
payloads, code_pattern and component memories, ADR and requirement memories, anchors) and the
live code index, so a result reflects the code as last indexed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

import structlog

from pipelines.design.derive import (
    CODE_COLLECTION,
    DOCS_COLLECTION,
    ORIGIN,
    DesignReport,
    DesignStores,
    PatternFamily,
    class_members,
    component_of,
    naming_convention,
    pattern_contract,
    pattern_families,
    requirement_citations,
    run_design_step,
    symbols_by_qualified_name,
)
from pipelines.discovery import DiscoveryError, confine_path
from pipelines.records import CLASS_KINDS as RECORD_CLASS_KINDS
from resources.vectors import sparse
from resources.memory.ledger import MemoryRow, NewMemory, Relationship, now_iso
from resources.schemas.design import (
    AlignmentStatement,
    CheckConsistencyInput,
    CheckConsistencyResult,
    ContextItem,
    DesignContextInput,
    DesignContextResult,
    Deviation,
    ImpactOfChangeInput,
    ImpactOfChangeResult,
    MemoryHealthResult,
    PatternExample,
    PatternMatch,
    RecordTestRunInput,
    RecordTestRunResult,
    TracedSymbol,
    TraceRequirementsInput,
    TraceRequirementsResult,
    ValidateFixInput,
    ValidateFixResult,
)
from resources.schemas.memory import validate_metadata
from resources.vectors.store import PayloadFilter

from query_server.design.alignment import NamingRule, SignatureRule, assess_fix
from query_server.paging import ToolError, cut_text, estimate_tokens
from query_server.design.signatures import compatible, describe_shape, signature_shape

log = structlog.get_logger("codemem.design")

CLASS_KINDS = sorted(RECORD_CLASS_KINDS)
MAX_ITEMS = 200
HISTORY_RUNS = 20
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class DesignService:
    """Design alignment over the code index and the project memories of one project."""

    def __init__(self, service: Any) -> None:
        """Use the stores of ``service`` (a ``CodeMemService``)."""
        self.service = service
        self.settings = service.settings
        self.vectors = service.vectors
        self.graph = service.graph
        self.memory = service.memory
        self.ledger = service.memory.ledger
        self.embedder = service.embedder

    def stores(self) -> DesignStores:
        """The stores the pipeline's design step writes to."""
        local = self.memory.scopes.store("local")
        return DesignStores(
            settings=self.settings, vectors=self.vectors, graph=self.graph, ledger=self.ledger,
            projector=self.memory.projector, embedder=self.embedder, local_ledger=local.ledger if local else None,
            manifest=self.service.manifest,
        )

    def refresh(self, *, force: bool = False) -> DesignReport:
        """Run the pipeline's design step (documents, links, anchors) on this process's stores."""
        return run_design_step(self.stores(), force=force)

    # -- resolving components ------------------------------------------------------------------
    def _code(self, **match: list[Any]) -> list[dict[str, Any]]:
        return [h.payload for h in self.vectors.scroll(CODE_COLLECTION, PayloadFilter(dict(match)), limit=100_000)]

    def _component_paths(self, component_id: str) -> tuple[str | None, str | None]:
        """(file, directory) that a component id names, if it is a path or a component memory."""
        raw = component_id.strip().rstrip("/")
        for row in self.ledger.find_by_metadata("component", "component_id", raw):
            return None, row.metadata.get("file_path") or raw
        try:
            path = confine_path(self.settings.resolved_root(), raw)
        except DiscoveryError:
            return None, None
        rel = path.relative_to(self.settings.resolved_root()).as_posix() if path.exists() else None
        if rel is None:
            return None, None
        return (rel, None) if path.is_file() else (None, rel)

    def _classes_for(self, component_id: str) -> list[dict[str, Any]]:
        """The classes a component id names: a class (name or qualified name), a file, a directory."""
        raw = component_id.strip()
        found = self._code(kind=CLASS_KINDS, qualified_name=[raw]) or self._code(kind=CLASS_KINDS, name=[raw])
        if found:
            return found
        file, directory = self._component_paths(raw)
        if file:
            return self._code(kind=CLASS_KINDS, file_path=[file])
        if directory:
            return self._code(kind=CLASS_KINDS, path_prefixes=[directory + "/"])
        return []

    # -- check_consistency -------------------------------------------------------------------------
    def check_consistency(self, request: CheckConsistencyInput) -> CheckConsistencyResult:
        """Check classes against the patterns of their families (Template and Convention)."""
        kinds = set(request.pattern_types or ["Template", "Convention"])
        classes = self._classes_for(request.component_id)
        if not classes:
            raise ToolError(
                f"Component not found: {request.component_id!r} — pass a class name or qualified name from code_search, "
                "a repo-relative file or directory, or a component id (memory_search with memory_types=['component'])"
            )
        families = pattern_families(self.vectors, self.settings.pattern_min_implementations)
        wanted = {c["id"] for c in classes}
        relevant: list[tuple[PatternFamily, list[dict[str, Any]]]] = []
        for family in families:
            if family.base["id"] in wanted:  # a base class: check all its implementations
                relevant.append((family, family.implementations))
                continue
            members = [i for i in family.implementations if i["id"] in wanted]
            if members:
                relevant.append((family, members))
        if not relevant:
            return CheckConsistencyResult(
                component_id=request.component_id, checked_classes=sorted(c["qualified_name"] for c in classes),
                matching_patterns=[], potential_deviations=[], checks=0, consistency_score=1.0,
                note=f"no pattern covers these classes: no base class here has {self.settings.pattern_min_implementations}+ implementations",
            )
        patterns: list[PatternMatch] = []
        deviations: list[Deviation] = []
        checks = 0
        checked: set[str] = set()
        pattern_ids = {row.metadata.get("base_symbol_id"): row.id for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False) if row.metadata.get("origin") == ORIGIN}
        for family, targets in relevant:
            members = class_members(self.vectors, [family.base, *family.implementations])
            contract = pattern_contract(family, members)
            naming = naming_convention([i["name"] for i in family.implementations])
            patterns.append(
                PatternMatch(
                    pattern_id=pattern_ids.get(family.base["id"]), pattern_name=f"{family.base['name']} implementations",
                    base_class=family.base["qualified_name"], base_file=family.base["file_path"],
                    implementations=len(family.implementations), contract=contract, naming=naming or None,
                )
            )
            found, count = self._family_deviations(family, targets, members, contract, naming, kinds)
            deviations.extend(found)
            checks += count
            checked.update(t["qualified_name"] for t in targets)
        score = round(1.0 - len(deviations) / checks, 4) if checks else 1.0
        return CheckConsistencyResult(
            component_id=request.component_id, checked_classes=sorted(checked), matching_patterns=patterns,
            potential_deviations=deviations, checks=checks, consistency_score=max(0.0, score),
        )

    def _family_deviations(
        self,
        family: PatternFamily,
        targets: list[dict[str, Any]],
        members: dict[tuple[str, str], list[dict[str, Any]]],
        contract: list[dict[str, Any]],
        naming: dict[str, str],
        kinds: set[str],
    ) -> tuple[list[Deviation], int]:
        methods_of = {i["id"]: {m["name"]: m for m in members.get((i["file_path"], i["local_name"]), [])} for i in family.implementations}
        base_methods = {m["name"]: m for m in members.get((family.base["file_path"], family.base["local_name"]), [])}
        language = family.base.get("language", "")
        expected_shape = {m["name"]: signature_shape(m["signature"], language) for m in contract}

        def conforming(impl: dict[str, Any]) -> bool:
            own = methods_of[impl["id"]]
            named = all(impl["name"].endswith(w) if side == "suffix" else impl["name"].startswith(w) for side, w in naming.items())
            return named and all(
                m["name"] in own and signature_shape(own[m["name"]]["signature"], language) == expected_shape[m["name"]] for m in contract
            )

        exemplars = [i for i in family.implementations if conforming(i)] or family.implementations

        def example(member: str | None) -> PatternExample | None:
            for impl in exemplars:
                if member is None:
                    return PatternExample(name=impl["name"], file_path=impl["file_path"], start_line=impl["start_line"], signature=impl.get("signature"))
                method = methods_of[impl["id"]].get(member)
                if method is not None:
                    return PatternExample(name=f"{impl['name']}.{member}", file_path=impl["file_path"], start_line=method["start_line"], signature=method["signature"])
            return None

        deviations: list[Deviation] = []
        checks = 0
        directories = defaultdict(int)
        for impl in family.implementations:
            directories[str(PurePosixPath(impl["file_path"]).parent)] += 1
        home, home_count = max(directories.items(), key=lambda kv: kv[1])
        for target in targets:
            own = methods_of.get(target["id"], {})
            if "Template" in kinds:
                for method in contract:
                    name = method["name"]
                    checks += 2
                    mine = own.get(name)
                    if mine is None:
                        if method["abstract"] or method["overridden_by"] >= 0.6:
                            deviations.append(Deviation(
                                kind="missing_override", pattern_type="Template", class_name=target["name"], file_path=target["file_path"],
                                line=target["start_line"], member=name, expected=method["signature"] or name, actual="(not implemented)",
                                message=f"{target['name']} does not implement {name}() that {family.base['name']} requires"
                                + (" (abstract)" if method["abstract"] else f" ({method['overridden_by']:.0%} of implementations override it)"),
                                example=example(name),
                            ))
                        continue
                    shape = signature_shape(mine["signature"], language)
                    want = expected_shape[name]
                    if shape != want and not compatible(shape, want):
                        deviations.append(Deviation(
                            kind="signature_drift", pattern_type="Template", class_name=target["name"], file_path=target["file_path"],
                            line=mine["start_line"], member=name, expected=describe_shape(*want), actual=describe_shape(*shape),
                            message=f"{target['name']}.{name}{describe_shape(*shape)} differs from {family.base['name']}.{name}{describe_shape(*want)}",
                            example=example(name),
                        ))
                for name, mine in sorted(own.items()):
                    base = base_methods.get(name)
                    if base is None or name.startswith("_") or any(m["name"] == name for m in contract):
                        continue
                    others = sum(1 for i in family.implementations if i["id"] != target["id"] and name in methods_of[i["id"]])
                    checks += 1
                    if others / max(1, len(family.implementations) - 1) < 0.25:
                        deviations.append(Deviation(
                            kind="extra_public_method", pattern_type="Template", class_name=target["name"], file_path=target["file_path"],
                            line=mine["start_line"], member=name, expected=f"{family.base['name']}.{name} inherited", actual="overridden",
                            message=f"{target['name']} overrides {name}() that other {family.base['name']} implementations inherit",
                            example=None,
                        ))
            if "Convention" in kinds:
                if naming:
                    checks += 1
                    missing = [f"{side} {word!r}" for side, word in naming.items() if not (target["name"].endswith(word) if side == "suffix" else target["name"].startswith(word))]
                    if missing:
                        deviations.append(Deviation(
                            kind="naming", pattern_type="Convention", class_name=target["name"], file_path=target["file_path"],
                            line=target["start_line"], member=None, expected=" and ".join(f"class name with {m}" for m in missing),
                            actual=target["name"],
                            message=f"{target['name']} breaks the naming convention of {family.base['name']} implementations (names {' and '.join(missing)})",
                            example=example(None),
                        ))
                if home_count >= max(2, 0.75 * len(family.implementations)):
                    checks += 1
                    if str(PurePosixPath(target["file_path"]).parent) != home:
                        deviations.append(Deviation(
                            kind="location", pattern_type="Convention", class_name=target["name"], file_path=target["file_path"],
                            line=target["start_line"], member=None, expected=f"in {home}/", actual=target["file_path"],
                            message=f"{target['name']} lives outside {home}/ where the other {family.base['name']} implementations are",
                            example=example(None),
                        ))
        return deviations, checks

    # -- trace_requirements ------------------------------------------------------------------------
    def _requirement(self, requirement_id: str) -> MemoryRow | None:
        found = self.ledger.find_by_metadata("requirements", "requirement_id", requirement_id)
        return found[0] if found else None

    def _latest_results(self, symbols: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        results = {}
        for symbol in symbols:
            for row in self.ledger.find_by_metadata("test_history", "symbol_id", symbol["id"]):
                results[symbol["id"]] = {
                    "status": row.metadata.get("status"), "execution_time": row.metadata.get("execution_time"),
                    "failure_message": (row.metadata.get("failure_message") or None) and cut_text(row.metadata["failure_message"], 500, "memory_get returns the whole")[0],
                    "memory_id": row.id,
                }
        return results

    def trace_requirements(self, request: TraceRequirementsInput) -> TraceRequirementsResult:
        """The requirement with the code that implements it, the tests that verify it (with their
        latest results), the designs that address it, and coverage counts."""
        requirement_id = request.requirement_id.strip().upper()
        row = self._requirement(requirement_id)
        cited = requirement_citations(self.vectors, [requirement_id])
        if row is None and not cited:
            raise ToolError(
                f"Requirement not found: {requirement_id} — no requirements memory and no code cites it; "
                "requirements come from the project's documents (codemem index) or memory_add(memory_type='requirements')"
            )
        symbols = sorted((h.payload for h in cited), key=lambda p: (p["file_path"], p["start_line"]))
        tests = [p for p in symbols if p.get("is_test")]
        code = [p for p in symbols if not p.get("is_test")]
        latest = self._latest_results(tests)

        def traced(p: dict[str, Any]) -> TracedSymbol:
            return TracedSymbol(
                id=p["id"], kind=p["kind"], name=p["name"], qualified_name=p["qualified_name"], file_path=p["file_path"],
                start_line=p["start_line"], latest_result=latest.get(p["id"]),
            )

        designs = self._designs_for([requirement_id], [row.id] if row else [])
        passing = sum(1 for t in tests if (latest.get(t["id"]) or {}).get("status") == "Passed")
        failing = sum(1 for t in tests if (latest.get(t["id"]) or {}).get("status") in ("Failed", "Error"))
        requirement = (
            {"memory_id": row.id, **{k: row.metadata.get(k) for k in ("requirement_id", "title", "priority", "status", "source_document", "line")}, "description": row.metadata.get("description") or row.content}
            if row else {"requirement_id": requirement_id, "note": "cited in code but not defined in a document or memory"}
        )
        return TraceRequirementsResult(
            requirement=requirement, implementing_components=[traced(p) for p in code[:MAX_ITEMS]],
            verifying_tests=[traced(p) for p in tests[:MAX_ITEMS]], related_designs=designs,
            coverage={
                "implementation_count": len(code), "test_count": len(tests), "design_count": len(designs),
                "tests_passing": passing, "tests_failing": failing, "tests_without_result": len(tests) - passing - failing,
            },
        )

    def _designs_for(self, requirement_ids: Sequence[str], requirement_memory_ids: Sequence[str]) -> list[dict[str, Any]]:
        found: dict[str, MemoryRow] = {}
        wanted = set(requirement_memory_ids)
        ids = set(requirement_ids)
        for row in self.ledger.iter_memories(memory_types=["design"], include_deleted=False):
            related = set(row.metadata.get("related_requirements") or [])
            if related & ids:
                found[row.id] = row
        if wanted:
            for rel in self.ledger.all_relationships():
                if rel.rel_type == "ADDRESSES" and rel.target_id in wanted and rel.source_id not in found:
                    design = self.ledger.get(rel.source_id)
                    if design is not None and not design.deleted:
                        found[design.id] = design
        return [
            {"memory_id": r.id, "title": r.metadata.get("title"), "design_type": r.metadata.get("design_type"), "status": r.metadata.get("status"),
             "source_document": r.metadata.get("source_document"), "decision": cut_text(r.metadata.get("decision") or "", 800, "memory_get returns the whole")[0] or None}
            for r in sorted(found.values(), key=lambda r: r.metadata.get("source_document") or "")
        ]

    # -- record_test_run -----------------------------------------------------------------------------
    def record_test_run(self, request: RecordTestRunInput, *, request_id: str | None = None) -> RecordTestRunResult:
        """Record a JUnit XML report as test history, linked to the test code and requirements. A
        repeated ``request_id`` records no run twice."""
        if request.junit_xml_path:
            try:
                path = confine_path(self.settings.resolved_root(), request.junit_xml_path)
            except DiscoveryError as exc:
                raise ToolError(f"{exc} — pass a report inside the project") from exc
            if not path.is_file():
                raise ToolError(f"JUnit report not found: {request.junit_xml_path} — run the tests with --junitxml=<path> first")
            text = path.read_text(encoding="utf-8", errors="replace")
        else:
            text = request.junit_xml or ""
        if "<!ENTITY" in text or "<!DOCTYPE" in text:
            raise ToolError("the report declares a DOCTYPE or entities, which are refused — pass the plain JUnit XML your test runner wrote")
        try:
            root = ET.fromstring(text)
        except ET.ParseError as exc:
            raise ToolError(f"the report is not valid XML ({exc}) — pass the JUnit XML your test runner wrote (pytest --junitxml)") from exc
        cases = list(root.iter("testcase"))
        if not cases:
            raise ToolError("the report holds no <testcase> element — is it a JUnit XML report?")
        suite_time = next((s.get("timestamp") for s in root.iter("testsuite") if s.get("timestamp")), None)
        at = suite_time or now_iso()
        parsed = []
        for case in cases:
            name = re.sub(r"\[.*\]$", "", case.get("name", "")).strip()
            classname = (case.get("classname") or "").strip()
            status, message = "Passed", None
            for tag, label in (("failure", "Failed"), ("error", "Error"), ("skipped", "Skipped")):
                element = case.find(tag)
                if element is not None:
                    status = label
                    message = (element.get("message") or "") + ("\n" + element.text.strip() if element.text and element.text.strip() else "")
                    break
            parsed.append((classname, name, status, message, case.get("time"), case.get("file")))
        qualified = [f"{c}.{n}" if c else n for c, n, *_ in parsed]
        symbols = symbols_by_qualified_name(self.vectors, qualified)
        requirement_rows = {}
        written: list[str] = []
        unmatched: list[str] = []
        counts = defaultdict(int)
        failures = []
        for case, ((classname, name, status, message, seconds, file_attr), key) in enumerate(zip(parsed, qualified, strict=True)):
            counts[status] += 1
            symbol = symbols.get(key)
            if symbol is None:
                unmatched.append(key)
            test_file = symbol["file_path"] if symbol else (file_attr or (classname.replace(".", "/") + ".py" if classname else "unknown"))
            related = list(symbol.get("requirement_ids") or []) if symbol else []
            if status in ("Failed", "Error"):
                failures.append({"test": key, "status": status, "message": cut_text(message or "", 500, "memory_get returns the whole")[0], "requirements": related})
            run = {"at": at, "status": status, "seconds": float(seconds) if seconds else None, "commit": request.commit}
            existing = self.ledger.find_by_metadata("test_history", "test_key", key)
            test_request = f"{request_id}:{case}" if request_id else None  # one key per case: parametrized cases share a test_key
            if existing and test_request and self.ledger.replayed(test_request, existing[0].id) is not None:
                written.append(existing[0].id)  # this call recorded it before its owner died
                continue
            previous_runs = list(existing[0].metadata.get("runs") or []) if existing else []
            metadata = {
                "test_name": name or key, "test_file": test_file, "status": status, "execution_time": at,
                "failure_message": message, "related_requirements": related or None, "test_key": key,
                "symbol_id": symbol["id"] if symbol else None, "runs": (previous_runs + [run])[-HISTORY_RUNS:],
                "fix_commit": existing[0].metadata.get("fix_commit") if existing else None,
            }
            if existing and existing[0].metadata.get("status") in ("Failed", "Error") and status == "Passed" and request.commit:
                metadata["fix_commit"] = request.commit
            metadata = validate_metadata("test_history", metadata, content=key)  # type: ignore[arg-type]
            content = f"{key}: {status}" + (f" — {message.splitlines()[0][:300]}" if message else "")
            rels = []
            for requirement_id in related:
                if requirement_id not in requirement_rows:
                    requirement_rows[requirement_id] = self._requirement(requirement_id)
                target = requirement_rows[requirement_id]
                if target is not None:
                    rels.append(Relationship("", "TESTS", target.id, "memory:requirements", {"requirement_id": requirement_id}))
            if symbol is not None:
                rels.append(Relationship("", "RELATES_TO", symbol["id"], "code:Function", {}))
            importance = 0.8 if status in ("Failed", "Error") else 0.4
            if existing:
                for rel in rels:
                    rel.source_id = existing[0].id
                row, changed = self.ledger.update(existing[0].id, content=content, metadata=metadata, importance_score=importance, relationships=rels, operation="test_run", request_id=test_request)
                if changed:
                    written.append(row.id)
            else:
                new = NewMemory(memory_type="test_history", content=content, metadata=metadata, importance_score=importance)
                for rel in rels:
                    rel.source_id = new.id
                new.relationships = rels
                rows = self.ledger.add([new], request_id=test_request)
                written.extend(r.id for r in rows)
        if written:
            self.memory.projector.project(written)
        return RecordTestRunResult(
            tests=len(parsed), passed=counts["Passed"], failed=counts["Failed"], errors=counts["Error"], skipped=counts["Skipped"],
            memories_written=len(written), linked_to_code=len(parsed) - len(unmatched), unmatched_tests=unmatched[:MAX_ITEMS],
            failures=failures[:MAX_ITEMS],
        )

    # -- get_design_context ------------------------------------------------------------------------
    def _item(self, row: MemoryRow, score: float, stale: set[str]) -> ContextItem:
        title = row.metadata.get("title") or row.metadata.get("pattern_name") or row.metadata.get("component_id") or row.content.splitlines()[0][:120]
        return ContextItem(
            id=row.id, kind=row.memory_type, title=str(title), content=cut_text(row.content, 1_500, "memory_get returns the whole")[0],
            score=round(score, 4), source_document=row.metadata.get("source_document"), stale=row.id in stale,
        )

    def _search_rows(self, text: str, memory_type: str, limit: int) -> list[tuple[MemoryRow, float]]:
        vector = self.embedder.embed_query(text)
        try:
            dense, _ = self.vectors.ranked_lists(
                self.memory.projector.collection(memory_type), dense=list(map(float, vector)), sparse=None, candidates=limit,
                payload_filter=PayloadFilter({"status": ["active"]}), with_payload=False,
            )
        except Exception as exc:  # noqa: BLE001 - a missing collection means no memories of the type yet
            log.info("design context search skipped", memory_type=memory_type, error=str(exc))
            return []
        rows = self.ledger.get_many([h.id for h in dense])
        return [(rows[h.id], h.score) for h in dense if h.id in rows and not rows[h.id].deleted]

    def get_design_context(self, request: DesignContextInput) -> DesignContextResult:
        """Designs, requirements, patterns, components and doc chunks for a component or a feature."""
        stale = set(self.ledger.stale_anchors())
        component: dict[str, Any] | None = None
        terms: list[str] = []
        linked: dict[str, dict[str, tuple[MemoryRow, float]]] = defaultdict(dict)
        if request.component_id:
            classes = self._classes_for(request.component_id)
            file, directory = self._component_paths(request.component_id)
            if not classes and not file and not directory:
                raise ToolError(f"Component not found: {request.component_id!r} — pass a class, a repo-relative file or directory, or a component id")
            paths = sorted({c["file_path"] for c in classes} | ({file} if file else set()))
            comp_id = directory or (component_of(paths[0], self.settings.component_depth) if paths else None)
            component = {"component_id": request.component_id, "classes": [c["qualified_name"] for c in classes[:50]], "files": paths[:50], "directory": comp_id}
            terms = [c["name"] for c in classes] + [PurePosixPath(p).stem for p in paths] + ([comp_id] if comp_id else [])
            ids = sorted({r for c in classes for r in (c.get("requirement_ids") or [])})
            for requirement_id in ids:
                row = self._requirement(requirement_id)
                if row is not None:
                    linked["requirements"][row.id] = (row, 1.0)
            for row in self.ledger.iter_memories(memory_types=["design", "code_pattern", "component"], include_deleted=False):
                text = f"{row.content}\n{row.metadata}"
                if row.memory_type == "component" and comp_id and row.metadata.get("component_id") == comp_id:
                    linked["components"][row.id] = (row, 1.0)
                elif row.memory_type == "code_pattern" and any(i.get("id") in {c["id"] for c in classes} for i in row.metadata.get("implementations") or []):
                    linked["patterns"][row.id] = (row, 1.0)
                elif row.memory_type == "design" and any(t and re.search(rf"\b{re.escape(t)}\b", text) for t in terms):
                    linked["designs"][row.id] = (row, 0.9)
        query = (request.query or "").strip() or " ".join(terms[:20])
        groups = {"designs": "design", "requirements": "requirements", "patterns": "code_pattern", "components": "component"}
        result: dict[str, list[ContextItem]] = {}
        for group, memory_type in groups.items():
            found = dict(linked[group])
            if query:
                for row, score in self._search_rows(query, memory_type, request.limit):
                    found.setdefault(row.id, (row, score))
            ranked = sorted(found.values(), key=lambda rs: -rs[1])[: request.limit]
            result[group] = [self._item(row, score, stale) for row, score in ranked]
        documents: list[ContextItem] = []
        if query:
            try:
                vector = self.embedder.embed_query(query)
                dense, sparse_hits = self.vectors.ranked_lists(DOCS_COLLECTION, dense=list(map(float, vector)), sparse=sparse.query_vector(query), candidates=request.limit)
                for hit in (dense or sparse_hits)[: request.limit]:
                    p = hit.payload
                    documents.append(ContextItem(id=hit.id, kind="doc_chunk", title=f"{p.get('file_path')} — {p.get('name')}", content=cut_text(p.get("code") or "", 1_500, "read the file")[0], score=round(hit.score, 4), source_document=p.get("file_path")))
            except Exception as exc:  # noqa: BLE001 - no documents collection yet
                log.info("doc chunk search skipped", error=str(exc))
        out = DesignContextResult(component=component, documents=documents, token_estimate=0, **result)
        out.token_estimate = estimate_tokens(out.model_dump_json())
        return out

    # -- validate_fix --------------------------------------------------------------------------------
    def validate_fix(self, request: ValidateFixInput) -> ValidateFixResult:
        """Check a proposed fix against the ADR decisions, designs and requirements that govern it."""
        designs = [r for r in self.ledger.iter_memories(memory_types=["design"], include_deleted=False) if r.metadata.get("status") not in ("Superseded", "Deprecated")]
        requirements = list(self.ledger.iter_memories(memory_types=["requirements"], include_deleted=False))
        component_terms: list[str] = []
        if request.affected_component:
            classes = self._classes_for(request.affected_component)
            component_terms = [c["name"] for c in classes] + [PurePosixPath(c["file_path"]).stem for c in classes]
        context = " ".join(t for t in component_terms if t and t[0].isupper())  # the classes being fixed
        naming = [
            NamingRule(row=row, base=str(row.metadata.get("base_class") or "").split(".")[-1], naming=row.metadata["naming"])
            for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False)
            if row.metadata.get("naming") and row.metadata.get("base_class")
        ]
        known = {p.get("name", "") for p in self._code(kind=CLASS_KINDS)} if naming else set()
        contracts = [
            SignatureRule(
                row=row, base=str(row.metadata.get("base_class") or "").split(".")[-1],
                implementations={str(i.get("name")) for i in row.metadata.get("implementations") or []},
                contract={m["name"]: [n for n, _ in signature_shape(m["signature"], row.metadata.get("language", ""))[0]] for m in row.metadata.get("contract") or [] if m.get("signature")},
                language=str(row.metadata.get("language") or ""),
            )
            for row in self.ledger.iter_memories(memory_types=["code_pattern"], include_deleted=False)
            if row.metadata.get("contract") and row.metadata.get("base_class")
        ]
        return assess_fix(
            self.embedder, request.fix_description, request.diff, designs, requirements, component_terms,
            AlignmentStatement, ValidateFixResult, naming_rules=naming, known_classes=known, signature_rules=contracts,
            context=context,
        )

    # -- impact_of_change ------------------------------------------------------------------------------
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
            for payload in self._code(qualified_name=[raw]) or self._code(id=[raw]) or self._code(name=[raw]):
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
        names = {p["qualified_name"] for p in every.values()}
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

    # -- memory_health -------------------------------------------------------------------------------
    def memory_health(self) -> MemoryHealthResult:
        """Stale (anchored code changed), orphaned, broken-linked and duplicated memories, and sync."""
        counts = self.ledger.counts()
        stale_map = self.ledger.stale_anchors()
        rows = self.ledger.get_many(list(stale_map))
        stale = [
            {"memory_id": mid, "memory_type": rows[mid].memory_type if mid in rows else None,
             "preview": rows[mid].content.splitlines()[0][:200] if mid in rows and rows[mid].content else "",
             "changed_anchors": [a["qualified_name"] + (" (gone)" if a["current_hash"] is None else " (changed)") for a in anchors]}
            for mid, anchors in list(stale_map.items())[:MAX_ITEMS]
        ]
        relationships = self.ledger.all_relationships()
        code_targets = sorted({r.target_id for r in relationships if r.target_kind.startswith("code:")})
        present: set[str] = set()
        for start in range(0, len(code_targets), 1000):
            present.update(h.id for h in self.vectors.retrieve(CODE_COLLECTION, code_targets[start:start + 1000]))
        orphans, broken = [], []
        memory_targets = self.ledger.get_many(sorted({r.target_id for r in relationships if r.target_kind.startswith("memory:")}))
        for rel in relationships:
            if rel.target_kind.startswith("code:") and rel.target_id not in present:
                orphans.append({"memory_id": rel.source_id, "relationship": rel.rel_type, "missing_code": rel.target_id, "fix": "re-link it (memory_update) or delete it if the code is gone for good"})
            elif rel.target_kind.startswith("memory:"):
                target = memory_targets.get(rel.target_id)
                if target is None or target.deleted:
                    broken.append({"memory_id": rel.source_id, "relationship": rel.rel_type, "target": rel.target_id, "target_state": "deleted" if target else "missing"})
        duplicates = [{"memory_type": t, "memory_ids": ids} for t, ids in self.ledger.duplicate_groups()]
        sync = {**self.ledger.sync_counts(), **self.ledger.outbox_stats()}
        recommendations = []
        if stale:
            recommendations.append(f"{len(stale_map)} memorie(s) are anchored to code that changed: review them, then memory_update (with confirm_anchors) or delete")
        if orphans:
            recommendations.append(f"{len(orphans)} link(s) point at code that is no longer indexed")
        if broken:
            recommendations.append(f"{len(broken)} link(s) point at deleted or missing memories")
        if duplicates:
            recommendations.append(f"{len(duplicates)} group(s) of identical memories: normalize_memory merges them")
        if sync.get("failed"):
            recommendations.append(f"{sync['failed']} memorie(s) failed to project: sync_memory retries; /health names the store")
        return MemoryHealthResult(
            status="attention" if recommendations else "healthy",
            totals={t: c["active"] for t, c in counts.items()} | {"deleted": sum(c["deleted"] for c in counts.values())},
            stale=stale, orphans=orphans[:MAX_ITEMS], broken_links=broken[:MAX_ITEMS], duplicates=duplicates, sync=sync,
            recommendations=recommendations,
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

"""record_test_run: a JUnit XML report recorded as test_history memories, linked to the test code
and the requirements it verifies (each test keeps its last runs)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from pipelines.design.anchors import symbols_by_qualified_name
from pipelines.discovery import DiscoveryError, confine_path
from query_server.design.lookups import MAX_ITEMS, DesignLookups
from query_server.paging import ToolError, cut_text
from resources.memory.ledger import NewMemory, Relationship, now_iso
from resources.schemas.design import RecordTestRunInput, RecordTestRunResult
from resources.schemas.memory import validate_metadata

HISTORY_RUNS = 20


class JunitRecorder(DesignLookups):
    """Test runs recorded as test history."""

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

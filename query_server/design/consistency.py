"""check_consistency: classes against the patterns of their families — the Template (contract
methods, signatures, overrides) and the Convention (naming, location)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

from pipelines.design.memories import ORIGIN
from pipelines.design.patterns import (
    PatternFamily,
    class_members,
    naming_convention,
    pattern_contract,
    pattern_families,
)
from query_server.design.lookups import DesignLookups
from query_server.design.signatures import compatible, describe_shape, signature_shape
from query_server.paging import ToolError
from resources.schemas.design import (
    CheckConsistencyInput,
    CheckConsistencyResult,
    Deviation,
    PatternExample,
    PatternMatch,
)


class ConsistencyCheck(DesignLookups):
    """Classes checked against the patterns of their families."""

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

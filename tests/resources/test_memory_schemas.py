"""The memory schemas: typed metadata (seed 001 §5) and the memory tools' inputs (seed 004)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel, ValidationError

from resources.schemas import memory as m
from resources.schemas.memory import (
    MEMORY_TYPES,
    METADATA_MODELS,
    ImportMemoryInput,
    MemoryAddInput,
    MemoryBulkAddInput,
    MemorySearchInput,
    MemoryType,
    MemoryUpdateInput,
    MemoryValidationError,
    RelationshipSpec,
    TimeRange,
    parse_memory_type,
    validate_metadata,
)
from resources.schemas.tools import MAX_QUERY_CHARS, describe_validation_error

# One good example per type, from the seeds' schemas and the memory_add example of seed 004.
GOOD_EXAMPLES: dict[MemoryType, dict] = {
    MemoryType.REQUIREMENTS: {"requirement_id": "REQ-MEM-FN-001", "title": "Search Latency", "priority": "High", "status": "Approved"},
    MemoryType.DESIGN: {
        "design_type": "ADR", "title": "Qdrant for vectors, Neo4j for relationships", "status": "Accepted",
        "decision": "Use Qdrant for primary vector search", "rationale": "Vector search less optimized in Neo4j",
        "related_requirements": ["REQ-MEM-FN-001"],
    },
    MemoryType.CODE_PATTERN: {
        "pattern_name": "Repository", "pattern_type": "Template", "language": "python",
        "code_template": "class {Name}Repository:\n    def get(self, id): ...", "usage_context": "Data access for a new entity",
        "example_implementations": ["src/users/repository.py"],
    },
    MemoryType.COMPONENT: {
        "component_id": "query-server", "component_type": "Service", "name": "Query server", "file_path": "query_server/",
        "public_interface": {"functions": ["code_search"]}, "dependencies": ["ledger"], "version": "0.1.0",
    },
    MemoryType.FUNCTION: {
        "name": "process_data", "signature": "def process_data(input: str, options: dict) -> Result",
        "file_path": "src/processor.py", "start_line": 10, "end_line": 42, "language": "python",
    },
    MemoryType.TEST_HISTORY: {
        "test_name": "test_search_latency", "test_file": "tests/test_search.py", "status": "Failed",
        "execution_time": "2025-01-31T14:05:00Z", "failure_message": "p95 310 ms > 200 ms", "design_alignment_score": 0.8,
    },
    MemoryType.SESSION: {"key_decisions": ["Use RRF for hybrid search"], "outcome": "Search ships"},
    MemoryType.USER_PREFERENCE: {"category": "CodingStyle", "key": "python.quotes", "value": "double", "scope": "Language"},
}

# (memory type, enum field, allowed values) for every enum of the seed.
ENUMS = [
    (MemoryType.REQUIREMENTS, "priority", "Critical, High, Medium, Low"),
    (MemoryType.REQUIREMENTS, "status", "Draft, Approved, Implemented, Verified"),
    (MemoryType.DESIGN, "design_type", "ADR, Specification, Architecture, Interface"),
    (MemoryType.DESIGN, "status", "Proposed, Accepted, Deprecated, Superseded"),
    (MemoryType.CODE_PATTERN, "pattern_type", "Template, Convention, Idiom, Architecture"),
    (MemoryType.COMPONENT, "component_type", "Frontend, Backend, Agent, Library, Service, Database"),
    (MemoryType.TEST_HISTORY, "status", "Passed, Failed, Skipped, Error"),
    (MemoryType.USER_PREFERENCE, "category", "CodingStyle, Naming, Framework, Tool, Convention"),
    (MemoryType.USER_PREFERENCE, "scope", "Global, Language, Project, Component"),
]


def _is_uuid4(text: str) -> bool:
    return uuid.UUID(text).version == 4


def test_memory_types_are_the_seeds_eight():
    assert [t.value for t in MEMORY_TYPES] == [
        "requirements", "design", "code_pattern", "component", "function", "test_history", "session", "user_preference",
    ]
    assert set(METADATA_MODELS) == set(MEMORY_TYPES)


@pytest.mark.parametrize("memory_type", list(MemoryType))
def test_good_example_validates_and_keeps_every_given_field(memory_type):
    given = GOOD_EXAMPLES[memory_type]
    result = validate_metadata(memory_type.value, given, content="The memory content")
    for key, value in given.items():
        assert result[key] == value
    json.dumps(result)  # JSON-ready


def test_seed_memory_add_example_is_accepted():
    request = {
        "memory_type": "requirements",
        "content": "The system shall support semantic search with sub-200ms latency",
        "metadata": {"requirement_id": "REQ-MEM-FN-001", "title": "Search Latency", "priority": "High", "status": "Approved"},
    }
    add = MemoryAddInput.model_validate(request)
    metadata = validate_metadata(add.memory_type, add.metadata, content=add.content)
    assert metadata["description"] == request["content"]
    assert "source_document" not in metadata  # unset optional fields are left out, not written as null


@pytest.mark.parametrize(("memory_type", "field", "allowed"), ENUMS)
def test_bad_enum_value_names_the_field_and_the_allowed_values(memory_type, field, allowed):
    metadata = {**GOOD_EXAMPLES[memory_type], field: "bogus"}
    with pytest.raises(MemoryValidationError) as caught:
        validate_metadata(memory_type, metadata, content="c")
    assert f"metadata.{field}: must be one of {allowed} (got 'bogus')" in str(caught.value)


def test_bad_priority_message_matches_the_contract():
    metadata = {**GOOD_EXAMPLES[MemoryType.REQUIREMENTS], "priority": "urgent"}
    with pytest.raises(MemoryValidationError, match=r"metadata\.priority: must be one of Critical, High, Medium, Low \(got 'urgent'\)"):
        validate_metadata("requirements", metadata, content="c")


def test_missing_required_fields_are_each_named():
    with pytest.raises(MemoryValidationError) as caught:
        validate_metadata("requirements", {"requirement_id": "REQ-MEM-FN-001"}, content="c")
    error = caught.value
    for field in ("title", "priority", "status"):
        assert f"metadata.{field}: required for requirements memories" in str(error)
    assert len(error.problems) == 3
    assert isinstance(error, ValueError)


@pytest.mark.parametrize("memory_type", [t for t in MemoryType if t is not MemoryType.SESSION])
def test_empty_metadata_is_refused_for_types_with_required_fields(memory_type):
    with pytest.raises(MemoryValidationError, match=f"required for {memory_type.value} memories"):
        validate_metadata(memory_type, {}, content="c")


@pytest.mark.parametrize("requirement_id", ["REQ-MEM-FN-001", "REQ-A-123", "REQ-X1-2B-0042", " req-mem-fn-001 "])
def test_requirement_id_pattern_accepts(requirement_id):
    metadata = {**GOOD_EXAMPLES[MemoryType.REQUIREMENTS], "requirement_id": requirement_id}
    assert validate_metadata("requirements", metadata, content="c")["requirement_id"] == requirement_id.strip().upper()


@pytest.mark.parametrize("requirement_id", ["REQ-001", "REQ-MEM-01", "MEM-FN-001", "REQ-MEM_FN-001", "REQ--001", ""])
def test_requirement_id_pattern_refuses(requirement_id):
    metadata = {**GOOD_EXAMPLES[MemoryType.REQUIREMENTS], "requirement_id": requirement_id}
    with pytest.raises(MemoryValidationError, match=r"metadata\.requirement_id: must look like REQ-XXX-NNN"):
        validate_metadata("requirements", metadata, content="c")


def test_description_and_summary_default_to_the_content():
    requirement = validate_metadata("requirements", GOOD_EXAMPLES[MemoryType.REQUIREMENTS], content="Full text")
    assert requirement["description"] == "Full text"
    session = validate_metadata("session", None, content="Refactored the ledger")
    assert session["summary"] == "Refactored the ledger"
    given = {**GOOD_EXAMPLES[MemoryType.REQUIREMENTS], "description": "Own text"}
    assert validate_metadata("requirements", given, content="Full text")["description"] == "Own text"


@pytest.mark.parametrize(
    ("memory_type", "id_field"),
    [
        (MemoryType.FUNCTION, "function_id"),
        (MemoryType.TEST_HISTORY, "test_id"),
        (MemoryType.SESSION, "session_id"),
        (MemoryType.USER_PREFERENCE, "preference_id"),
    ],
)
def test_generated_ids_default_to_a_new_uuid4_and_keep_a_given_one(memory_type, id_field):
    first = validate_metadata(memory_type, GOOD_EXAMPLES[memory_type], content="c")[id_field]
    second = validate_metadata(memory_type, GOOD_EXAMPLES[memory_type], content="c")[id_field]
    assert _is_uuid4(first) and _is_uuid4(second) and first != second
    given = {**GOOD_EXAMPLES[memory_type], id_field: "my-id"}
    assert validate_metadata(memory_type, given, content="c")[id_field] == "my-id"


@pytest.mark.parametrize(("memory_type", "field"), [(MemoryType.TEST_HISTORY, "execution_time"), (MemoryType.SESSION, "start_time")])
def test_timestamps_default_to_now_utc(memory_type, field):
    metadata = {k: v for k, v in GOOD_EXAMPLES[memory_type].items() if k != field}
    stamp = datetime.fromisoformat(validate_metadata(memory_type, metadata, content="c")[field])
    assert stamp.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - stamp) < timedelta(minutes=1)


def test_timestamps_must_be_iso_8601():
    metadata = {**GOOD_EXAMPLES[MemoryType.TEST_HISTORY], "execution_time": "yesterday"}
    with pytest.raises(MemoryValidationError, match=r"metadata\.execution_time: must be an ISO 8601 timestamp"):
        validate_metadata("test_history", metadata, content="c")


def test_enum_input_is_case_insensitive_and_written_canonically():
    result = validate_metadata(
        "requirements", {"requirement_id": "REQ-MEM-FN-001", "title": "t", "priority": "high", "status": "APPROVED"}, content="c"
    )
    assert (result["priority"], result["status"]) == ("High", "Approved")
    pref = validate_metadata("user_preference", {"category": "coding_style", "key": "k", "value": 4, "scope": "global"}, content="c")
    assert (pref["category"], pref["scope"]) == ("CodingStyle", "Global")
    assert validate_metadata("design", {"design_type": "adr", "title": "t", "status": "accepted"}, content="c")["design_type"] == "ADR"


def test_extra_keys_are_kept():
    metadata = {**GOOD_EXAMPLES[MemoryType.COMPONENT], "owner": "team-search", "tags": ["hot"]}
    result = validate_metadata("component", metadata, content="c")
    assert result["owner"] == "team-search" and result["tags"] == ["hot"]


def test_a_single_string_is_accepted_for_a_list_field():
    metadata = {**GOOD_EXAMPLES[MemoryType.DESIGN], "related_requirements": "REQ-MEM-FN-001"}
    assert validate_metadata("design", metadata, content="c")["related_requirements"] == ["REQ-MEM-FN-001"]


@pytest.mark.parametrize("score", [-0.1, 1.5])
def test_scores_are_between_0_and_1(score):
    metadata = {**GOOD_EXAMPLES[MemoryType.TEST_HISTORY], "design_alignment_score": score}
    with pytest.raises(MemoryValidationError, match=r"metadata\.design_alignment_score"):
        validate_metadata("test_history", metadata, content="c")


def test_function_lines_must_be_ordered():
    metadata = {**GOOD_EXAMPLES[MemoryType.FUNCTION], "start_line": 50, "end_line": 10}
    with pytest.raises(MemoryValidationError, match="end_line"):
        validate_metadata("function", metadata, content="c")


def test_user_preference_value_may_be_any_json():
    for value in ({"max_line": 120}, ["a", "b"], 4, True, None):
        metadata = {**GOOD_EXAMPLES[MemoryType.USER_PREFERENCE], "value": value}
        assert validate_metadata("user_preference", metadata, content="c")["value"] == value


def test_metadata_that_is_not_an_object_is_refused():
    with pytest.raises(MemoryValidationError, match="metadata: must be an object"):
        validate_metadata("session", ["not", "a", "dict"], content="c")  # type: ignore[arg-type]


def test_parse_memory_type():
    assert parse_memory_type("code_pattern") is MemoryType.CODE_PATTERN
    assert parse_memory_type(" Code-Pattern ") is MemoryType.CODE_PATTERN
    assert parse_memory_type(MemoryType.SESSION) is MemoryType.SESSION
    with pytest.raises(MemoryValidationError) as caught:
        parse_memory_type("notes")
    assert str(caught.value).startswith("Unknown memory type 'notes' — use one of requirements, design, code_pattern")
    with pytest.raises(MemoryValidationError, match="Unknown memory type"):
        validate_metadata("notes", {}, content="c")


# ---- tool inputs ----


def _add(**overrides) -> dict:
    return {"memory_type": "session", "content": "Worked on search", **overrides}


def test_add_input_defaults_and_lenient_type():
    add = MemoryAddInput.model_validate(_add(memory_type="Test-History"))
    assert add.memory_type is MemoryType.TEST_HISTORY
    assert (add.metadata, add.relationships, add.importance_score) == ({}, [], None)


def test_add_input_unknown_type_says_which_types_exist():
    with pytest.raises(ValidationError) as caught:
        MemoryAddInput.model_validate(_add(memory_type="notes"))
    assert "Unknown memory type 'notes' — use one of requirements" in describe_validation_error(caught.value)


@pytest.mark.parametrize(("content", "expected"), [("", "at least 1 character"), ("  \n\t", "content is blank")])
def test_add_input_refuses_empty_or_blank_content(content, expected):
    with pytest.raises(ValidationError, match=expected):
        MemoryAddInput.model_validate(_add(content=content))


def test_add_input_content_limit():
    MemoryAddInput.model_validate(_add(content="x" * m.MAX_CONTENT_CHARS))
    with pytest.raises(ValidationError, match="at most 100000 characters"):
        MemoryAddInput.model_validate(_add(content="x" * (m.MAX_CONTENT_CHARS + 1)))


@pytest.mark.parametrize("importance", [-0.01, 1.01])
def test_importance_out_of_range_is_refused(importance):
    with pytest.raises(ValidationError, match="importance_score"):
        MemoryAddInput.model_validate(_add(importance_score=importance))
    with pytest.raises(ValidationError, match="importance_score"):
        MemoryUpdateInput.model_validate({"memory_id": "x", "memory_type": "session", "importance_score": importance})
    with pytest.raises(ValidationError, match="min_importance"):
        MemorySearchInput.model_validate({"query": "q", "min_importance": importance})


def test_relationships_type_is_upper_snake_and_limited_to_100():
    spec = RelationshipSpec.model_validate({"type": "implements-req", "target_id": "REQ-MEM-FN-001"})
    assert (spec.type, spec.properties) == ("IMPLEMENTS_REQ", {})
    with pytest.raises(ValidationError, match="UPPER_SNAKE_CASE"):
        RelationshipSpec.model_validate({"type": "1abc!", "target_id": "x"})
    with pytest.raises(ValidationError, match="target_id"):
        RelationshipSpec.model_validate({"type": "DEPENDS_ON", "target_id": ""})
    many = [{"type": "RELATES_TO", "target_id": str(i)} for i in range(101)]
    with pytest.raises(ValidationError, match="at most 100 items"):
        MemoryAddInput.model_validate(_add(relationships=many))


def test_update_input_concurrency_fields():
    update = MemoryUpdateInput.model_validate(
        {"memory_id": "id", "memory_type": "requirements", "metadata": {"status": "Implemented"}, "expected_version": 3}
    )
    assert update.expected_version == 3 and update.content is None
    with pytest.raises(ValidationError, match="expected_version"):
        MemoryUpdateInput.model_validate({"memory_id": "id", "memory_type": "design", "expected_version": 0})
    with pytest.raises(ValidationError, match="ISO 8601"):
        MemoryUpdateInput.model_validate({"memory_id": "id", "memory_type": "design", "expected_updated_at": "soon"})
    with pytest.raises(ValidationError, match="content is blank"):
        MemoryUpdateInput.model_validate({"memory_id": "id", "memory_type": "design", "content": " "})
    description = MemoryUpdateInput.model_fields["expected_version"].description
    assert "refused with the current version" in description


def test_bulk_add_input_bounds():
    with pytest.raises(ValidationError, match="at least 1 item"):
        MemoryBulkAddInput.model_validate({"memories": []})
    with pytest.raises(ValidationError, match="at most 1000 items"):
        MemoryBulkAddInput.model_validate({"memories": [_add()] * 1001})
    assert len(MemoryBulkAddInput.model_validate({"memories": [_add()] * 1000}).memories) == 1000


@pytest.mark.parametrize("limit", [0, 101])
def test_search_limit_bounds(limit):
    with pytest.raises(ValidationError, match="limit"):
        MemorySearchInput.model_validate({"query": "auth", "limit": limit})


def test_search_input_defaults_and_filters():
    search = MemorySearchInput.model_validate(
        {"query": "authentication implementation", "memory_types": ["Design", "requirements"],
         "metadata_filters": {"status": ["Approved", "Implemented"], "priority": "High", "version": 2, "hot": True}}
    )
    assert search.limit == 10 and search.cursor is None and search.include_deleted is False
    assert search.memory_types == [MemoryType.DESIGN, MemoryType.REQUIREMENTS]
    assert search.metadata_filters == {"status": ["Approved", "Implemented"], "priority": "High", "version": 2, "hot": True}
    for query in ("", "   "):
        with pytest.raises(ValidationError):
            MemorySearchInput.model_validate({"query": query})
    with pytest.raises(ValidationError):
        MemorySearchInput.model_validate({"query": "x" * (MAX_QUERY_CHARS + 1)})
    with pytest.raises(ValidationError, match="Unknown memory type"):
        MemorySearchInput.model_validate({"query": "q", "memory_types": ["notes"]})


def test_time_range_is_parsed_and_ordered():
    TimeRange(start="2025-01-01T00:00:00Z", end="2025-02-01")
    TimeRange(start="2025-01-01T00:00:00Z")
    with pytest.raises(ValidationError, match="is after end"):
        TimeRange(start="2025-02-01T00:00:00Z", end="2025-01-01T00:00:00Z")
    with pytest.raises(ValidationError, match="ISO 8601"):
        MemorySearchInput.model_validate({"query": "q", "time_range": {"start": "last week"}})


def test_import_requires_exactly_one_source():
    assert ImportMemoryInput(data='{"id": "1"}\n').conflict_resolution == "skip"
    assert ImportMemoryInput(input_path="backup.jsonl", conflict_resolution="overwrite").input_path == "backup.jsonl"
    with pytest.raises(ValidationError, match="pass input_path .* or data"):
        ImportMemoryInput()
    with pytest.raises(ValidationError, match="not both"):
        ImportMemoryInput(input_path="a.jsonl", data="{}")
    with pytest.raises(ValidationError, match="conflict_resolution"):
        ImportMemoryInput(data="{}", conflict_resolution="merge")


def test_export_defaults():
    export = m.ExportMemoryInput.model_validate({"memory_types": "design"})
    assert export.memory_types == [MemoryType.DESIGN] and export.output_path is None and export.include_deleted is False


INPUT_MODELS = [
    m.RelationshipSpec, m.MemoryAddInput, m.MemoryUpdateInput, m.MemoryDeleteInput, m.MemoryGetInput, m.MemoryBulkAddInput,
    m.TimeRange, m.MemorySearchInput, m.ExportMemoryInput, m.ImportMemoryInput, *METADATA_MODELS.values(),
]
RESULT_MODELS = [
    m.MemoryConflict, m.MemoryAddResult, m.MemoryUpdateResult, m.MemoryDeleteResult, m.MemoryRelationship, m.MemoryRecord,
    m.MemoryBulkAddResult, m.MemoryProvenance, m.MemoryHit, m.MemorySearchResult, m.MemoryStatisticsResult,
    m.ExportMemoryResult, m.ImportMemoryResult,
]


@pytest.mark.parametrize("model", INPUT_MODELS + RESULT_MODELS, ids=lambda model: model.__name__)
def test_json_schema_generation(model: type[BaseModel]):
    schema = model.model_json_schema()
    json.dumps(schema)
    assert schema["type"] == "object" and schema["description"]


def test_add_schema_tells_the_caller_the_types_and_their_fields():
    schema = MemoryAddInput.model_json_schema()
    assert schema["required"] == ["memory_type", "content"]
    assert set(schema["$defs"]["MemoryType"]["enum"]) == {t.value for t in MemoryType}
    guide = schema["properties"]["metadata"]["description"]
    assert "requirements: requirement_id, title, priority (Critical|High|Medium|Low)" in guide
    assert "user_preference: category (CodingStyle|Naming|Framework|Tool|Convention)" in guide


def test_results_serialize_to_the_contract_shapes():
    now = datetime.now(UTC).isoformat()
    hit = m.MemoryHit(
        id="1", memory_type="design", content="c", score=0.85, metadata={}, created_at=now, updated_at=now,
        importance_score=0.5, access_count=0, provenance=m.MemoryProvenance(version=1, updated_at=now, sync_status="synced"),
    )
    page = m.MemorySearchResult(query="q", result_count=1, results=[hit], search_mode="hybrid").model_dump(mode="json")
    assert page["results"][0]["memory_type"] == "design" and page["next_cursor"] is None
    assert page["results"][0]["provenance"]["stale"] is False
    added = m.MemoryAddResult(memory_id="1", memory_type=MemoryType.REQUIREMENTS, sync_status="pending").model_dump(mode="json")
    assert added == {"memory_id": "1", "memory_type": "requirements", "conflicts": [], "status": "created", "version": 1,
                     "sync_status": "pending", "scope": "project"}
    record = m.MemoryRecord(id="1", memory_type="session", content="c", created_at=now, updated_at=now)
    assert (record.access_count, record.importance_score, record.deleted, record.relationships) == (0, 0.5, False, None)


@pytest.mark.parametrize("memory_type", list(MemoryType))
def test_validating_stored_metadata_again_changes_nothing(memory_type):
    """memory_update re-validates the stored metadata merged with the change: ids and times must not move."""
    stored = validate_metadata(memory_type, GOOD_EXAMPLES[memory_type], content="c")
    assert validate_metadata(memory_type, stored, content="other content") == stored


def test_scopes_and_detail_inputs():
    """Scope names are read leniently and checked; search defaults to summaries, memory_context to 4,000 tokens."""
    assert m.MemoryAddInput(memory_type="session", content="c").scope is None
    assert m.MemoryAddInput(memory_type="session", content="c", scope=" Global ").scope == "global"
    assert m.MemorySearchInput(query="q", scopes="LOCAL").scopes == ["local"]
    with pytest.raises(ValidationError, match="'project', 'local', 'global' or 'enterprise'"):
        m.MemoryAddInput(memory_type="session", content="c", scope="team")
    search = m.MemorySearchInput(query="q")
    assert (search.detail, search.scopes) == ("summary", None)
    with pytest.raises(ValidationError):
        m.MemorySearchInput(query="q", detail="everything")
    context = m.MemoryContextInput(topic="checkout")
    assert (context.max_tokens, context.limit, context.min_score) == (m.MAX_CONTEXT_TOKENS, 50, None)
    with pytest.raises(ValidationError):
        m.MemoryContextInput(topic="checkout", max_tokens=50)
    schema = m.MemoryAddInput.model_json_schema()["properties"]["scope"]
    assert "never shared" in schema["description"]

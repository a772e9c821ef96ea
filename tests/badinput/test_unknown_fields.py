"""A field a tool does not have is refused, naming the field and the ones the tool takes: a
misspelt ``path`` for ``directory_path`` used to be dropped and the call run on its defaults (it
indexed the whole project)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from query_server.tools import TOOLS
from resources.schemas.tools import describe_validation_error
from tests.badinput.conftest import assert_clean_error

INPUTS = sorted({tool.input for tool in TOOLS.values() if tool.input is not None}, key=lambda model: model.__name__)


@pytest.mark.parametrize("model", INPUTS, ids=lambda model: model.__name__)
def test_every_tool_input_refuses_a_field_it_does_not_have(model) -> None:  # noqa: ANN001
    with pytest.raises(ValidationError) as refused:
        model.model_validate({"no_such_field": 1})
    message = describe_validation_error(refused.value)
    assert "unknown field no_such_field" in message and "the fields are:" in message, message
    assert all(name in message for name in model.model_fields), message
    assert model.model_json_schema().get("additionalProperties") is False  # clients see it in the schema


def test_http_refuses_a_misspelt_field_and_starts_nothing(http: TestClient) -> None:
    before = http.post("/tools/index_status").json()
    answer = http.post("/tools/index_directory", json={"path": "/etc"})
    body = assert_clean_error(answer.status_code, answer.text)
    assert answer.status_code == 422 and "path" in str(body) and "directory_path" in str(body), answer.text
    assert http.post("/tools/index_status").json()["last_index"] == before["last_index"]  # no job ran

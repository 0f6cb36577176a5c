"""The input of `make ts` (quiz_contracts.typescript): roles from the catalogs, names, examples."""

from __future__ import annotations

import json

import pytest

from quiz_contracts.catalog import CHANNELS, OPERATIONS
from quiz_contracts.routes import HTTP_ROUTES
from quiz_contracts.typescript import (
    ContractSchemaError,
    document_type,
    typed_examples,
    typescript_bundle,
    wire_models,
)


@pytest.fixture(scope="module")
def bundle() -> dict:
    return typescript_bundle()


def test_every_catalog_model_is_exported_in_its_role(bundle: dict) -> None:
    roles = bundle["roles"]
    for op in OPERATIONS:
        assert roles[op.request.__name__] == "written"
        assert roles[op.reply.__name__] == "read"
    for channel in CHANNELS:
        expected = "written" if channel.action == "receive" else "read"
        assert roles[channel.payload.__name__] == expected
    for route in HTTP_ROUTES:
        assert roles[route.reply.__name__] == "read"
        if route.body_type_name:
            assert roles[route.body_type_name] == "written"
    assert roles["McqConfig"] == "written"
    assert roles["ErrorBody"] == "read"


def test_every_model_of_the_package_has_a_type(bundle: dict) -> None:
    defs = bundle["schema"]["$defs"]
    # A base of other shapes no message carries (ProgramConfig) is the one exception.
    missing = [m.__name__ for m in wire_models() if m.__name__ not in defs]
    assert all(m.__subclasses__() for m in wire_models() if m.__name__ in missing), missing
    assert "WireModel" not in defs and "CamelModel" not in defs  # bases, not shapes


def test_written_shapes_make_defaults_optional_read_shapes_require_every_field(
    bundle: dict,
) -> None:
    defs = bundle["schema"]["$defs"]
    # ReviewRequest is written: versionId has a default, so a client may leave it out.
    assert defs["ReviewRequest"]["required"] == ["questionId"]
    # QuestionReview is read: `findings` (default []) is always there, as on the platform.
    assert "findings" in defs["QuestionReview"]["required"]
    assert set(defs["ReviewCompleted"]["required"]) == set(defs["ReviewCompleted"]["properties"])


def test_the_role_is_said_in_each_description(bundle: dict) -> None:
    defs = bundle["schema"]["$defs"]
    assert "validation schema" in defs["ReviewRequest"]["description"]
    assert "serialization schema" in defs["ReviewCompleted"]["description"]


def test_nested_titles_are_dropped_and_refs_renamed(bundle: dict) -> None:
    text = json.dumps(bundle["schema"]["$defs"])
    assert "-Input" not in text and "-Output" not in text
    for name, schema in bundle["schema"]["$defs"].items():
        assert schema["title"] == name
        for prop in schema.get("properties", {}).values():
            assert "title" not in prop


def test_a_model_split_by_role_is_name_and_name_input(bundle: dict) -> None:
    roles = bundle["roles"]
    # Rich text is written in configs and read back in replies, with different schemas.
    assert roles["RichTextDoc"] == "read" and roles["RichTextDocInput"] == "written"


def test_subjects_come_from_the_module(bundle: dict) -> None:
    assert bundle["subjects"]["REVIEW_REQUESTS"] == "review.v1.requests"
    assert bundle["subjects"]["POLL_TALLY_FILTER"] == "poll.v1.*.tally"
    assert bundle["subjectTemplates"]["PollTallySubject"] == "poll.v1.${string}.tally"


def test_the_bundle_is_deterministic(bundle: dict) -> None:
    assert json.dumps(typescript_bundle()) == json.dumps(bundle)


def test_a_docs_example_is_typed_by_its_file_name(bundle: dict) -> None:
    defs = bundle["schema"]["$defs"]
    assert document_type("docs/examples/lesson-bees.json", defs) == "Lesson"
    assert document_type("docs/examples/review-completed-failed.json", defs) == "ReviewCompleted"
    with pytest.raises(ContractSchemaError, match="no exported shape"):
        document_type("docs/examples/bees.json", defs)


def test_schema_examples_are_typed_as_their_shape_and_field() -> None:
    bundle = {
        "schema": {
            "$defs": {
                "ReviewRequest": {
                    "examples": [{"questionId": "q"}],
                    "properties": {"user": {"examples": ["teacher-1"]}},
                }
            }
        }
    }
    text = typed_examples(bundle, {"docs/examples/review-request-x.json": {"questionId": "a"}})
    assert 'export const doc0: T.ReviewRequest = {\n  "questionId": "a"\n};' in text
    assert "export const example0: T.ReviewRequest = {" in text
    assert 'export const example1: T.ReviewRequest["user"] = "teacher-1";' in text


def test_an_error_body_leaves_its_null_fields_out(bundle: dict) -> None:
    # quiz_servicekit writes error replies with exclude_none: retry_after_s is often absent.
    error = bundle["schema"]["$defs"]["ErrorBody"]
    assert error["required"] == ["code", "message"]
    assert "absent" in error["description"]


def test_a_field_excluded_when_unset_is_optional_to_a_reader(bundle: dict) -> None:
    # ReviewFinding.code is absent on a model's finding (exclude_if), present on the lint's.
    defs = bundle["schema"]["$defs"]
    finding = defs.get("ReviewFinding-Output", defs["ReviewFinding"])
    assert "code" not in finding["required"]
    assert {"severity", "path", "message", "applied"} <= set(finding["required"])


def test_the_contracts_schema_examples_are_typed(bundle: dict) -> None:
    text = typed_examples(bundle, {})
    assert "// ReviewRequest (schema examples)\nexport const example0: T.ReviewRequest = {" in text

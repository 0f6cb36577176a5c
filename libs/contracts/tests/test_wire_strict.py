"""Wire numbers and booleans are never read from text (issue 21 item 5), as the platform's zod
schemas read them: `"1"` is not 1, `"yes"` and 1 are not true."""

from __future__ import annotations

import importlib
import json
import pkgutil
import types
import typing
from typing import Any

import pytest
from pydantic import ValidationError

import quiz_contracts
from quiz_contracts.base import WireModel
from quiz_contracts.generate import GenerateAvailability, GenerateRequest
from quiz_contracts.lesson import FixReply
from quiz_contracts.llm import CompleteRequest


def wire_models() -> list[type[WireModel]]:
    """Every WireModel the contracts define (each module imported)."""
    for info in pkgutil.walk_packages(quiz_contracts.__path__, "quiz_contracts."):
        importlib.import_module(info.name)
    found: list[type[WireModel]] = []
    todo = list(WireModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if (
            cls.__module__.startswith("quiz_contracts.")
            and not cls.__pydantic_generic_metadata__["parameters"]
        ):
            found.append(cls)
    return sorted(set(found), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def scalar_of(annotation: Any) -> type | None:
    """bool or int for `bool`, `int`, `X | None` (with X one of them); None otherwise."""
    if annotation in (bool, int):
        return typing.cast(type, annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and args[0] in (bool, int):
            return typing.cast(type, args[0])
    return None


SCALAR_FIELDS = [
    pytest.param(cls, name, kind, id=f"{cls.__name__}.{name}")
    for cls in wire_models()
    for name, field in cls.model_fields.items()
    if (kind := scalar_of(field.annotation)) is not None
]


def test_the_contracts_have_wire_numbers_and_booleans() -> None:
    kinds = {kind for _, _, kind in (p.values for p in SCALAR_FIELDS)}
    assert kinds == {bool, int} and len(SCALAR_FIELDS) > 20


@pytest.mark.parametrize(("model", "name", "kind"), SCALAR_FIELDS)
def test_every_wire_number_and_boolean_refuses_text(
    model: type[WireModel], name: str, kind: type
) -> None:
    key = model.model_fields[name].alias or name
    texts = ["true", "yes", "1", "0"] if kind is bool else ["1", "0", "1e3"]
    for text in texts:
        for validate in (model.model_validate, lambda d: model.model_validate_json(json.dumps(d))):
            with pytest.raises(ValidationError) as refused:
                validate({key: text})
            assert any(
                e["loc"][:1] == (key,) and e["type"] == f"{kind.__name__}_type"
                for e in refused.value.errors()
            ), refused.value.errors()


def test_a_boolean_is_only_true_or_false() -> None:
    assert GenerateAvailability.model_validate_json('{"available": true}').available is True
    for wrong in ('"yes"', '"true"', "1", "0", '"on"'):
        with pytest.raises(ValidationError):
            GenerateAvailability.model_validate_json(f'{{"available": {wrong}}}')


def test_an_integer_is_a_json_number_written_as_javascript_may_write_it() -> None:
    # 2.0 is 2 in JavaScript, and zod's .int() takes it; a fraction, text or a boolean is no int.
    assert GenerateRequest.model_validate_json('{"config": {}, "item": 2.0}').item == 2
    assert GenerateRequest.model_validate({"config": {}, "item": 2}).item == 2
    for wrong in ('"2"', "2.5", "true", '"two"'):
        with pytest.raises(ValidationError):
            GenerateRequest.model_validate_json(f'{{"config": {{}}, "item": {wrong}}}')
    # The bounds still hold behind the check.
    with pytest.raises(ValidationError):
        GenerateRequest.model_validate_json('{"config": {}, "item": 12}')


def test_nested_and_listed_numbers_are_strict_too() -> None:
    with pytest.raises(ValidationError) as refused:
        FixReply.model_validate_json('{"operations": [], "explanation": "", "newWarnings": "2"}')
    assert refused.value.errors()[0]["loc"] == ("newWarnings",)
    body = {
        "purpose": "generate",
        "user": "u",
        "messages": [{"role": "user", "content": "hi"}],
        "max_output_tokens": "100",
    }
    with pytest.raises(ValidationError) as refused:
        CompleteRequest.model_validate(body)
    assert ("max_output_tokens",) in [e["loc"] for e in refused.value.errors()]
    assert (
        CompleteRequest.model_validate({**body, "max_output_tokens": 100}).max_output_tokens == 100
    )


def test_the_json_schemas_are_unchanged_by_the_check() -> None:
    schema = GenerateRequest.model_json_schema()["properties"]["item"]
    assert {"type": "integer", "minimum": 0, "maximum": 11} in schema["anyOf"]

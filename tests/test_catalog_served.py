"""Every operation of the catalog is served by the service it names, decoding the catalog's model.

The apps are only built (endpoints are declared in create_app), not started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI

from quiz_contracts.catalog import OPERATIONS
from quiz_editor_assist.main import create_app as editor_assist
from quiz_lesson_fix.main import create_app as lesson_fix
from quiz_llm_gateway.main import create_app as llm_gateway
from quiz_poll.main import create_app as poll
from quiz_review.main import create_app as review
from quiz_runner.main import create_app as runner
from quiz_servicekit.app import ServiceRuntime

APPS: list[Callable[..., FastAPI]] = [
    llm_gateway,
    runner,
    editor_assist,
    review,
    poll,
    lesson_fix,
]


@pytest.fixture(scope="module")
def served() -> dict[str, tuple[str, Any]]:
    """Subject → (service name, request model) of every endpoint every service declares."""
    found: dict[str, tuple[str, Any]] = {}
    for create_app in APPS:
        runtime: ServiceRuntime = create_app().state.runtime
        for spec in runtime.endpoints:
            assert spec.subject not in found, f"{spec.subject} served twice"
            found[spec.subject] = (runtime.name, spec.request_model)
    return found


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.subject for op in OPERATIONS])
def test_every_catalog_operation_is_served(served: dict[str, tuple[str, Any]], op: Any) -> None:
    assert op.subject in served, f"nobody serves {op.subject}"
    service, request_model = served[op.subject]
    assert service == op.service
    assert request_model is op.request


def test_nothing_is_served_outside_the_catalog(served: dict[str, tuple[str, Any]]) -> None:
    assert set(served) <= {op.subject for op in OPERATIONS}

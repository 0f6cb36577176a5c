"""No HTTP route of any service resolves a dependency in a worker thread.

FastAPI runs a sync dependency through `anyio.to_thread`: a thread hop per request, and a wait
for a free thread when the pool is busy. Every dependency of every route is a coroutine
function: the service through its `ServiceRef.resolve` alias, the grant checks, the identity.
The apps are only built, not started.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from quiz_editor_assist.main import create_app as editor_assist
from quiz_lesson_fix.main import create_app as lesson_fix
from quiz_llm_gateway.main import create_app as llm_gateway
from quiz_poll.main import create_app as poll
from quiz_review.main import create_app as review
from quiz_runner.main import create_app as runner
from quiz_servicekit.app import ServiceRef

APPS: list[Callable[..., FastAPI]] = [llm_gateway, runner, editor_assist, review, poll, lesson_fix]


def api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every APIRoute, through the routers the app included (FastAPI 0.165 keeps an included
    router whole, as `original_router`, instead of copying its routes into the app's)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from api_routes(route.original_router.routes)


def dependencies(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from dependencies(sub)


def runs_on_the_loop(call: Any) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(
        getattr(call, "__call__", None)  # noqa: B004 (a callable object's own __call__)
    )


@pytest.mark.parametrize("create_app", APPS, ids=lambda f: f.__module__.split(".")[0])
def test_every_route_dependency_is_awaited_on_the_loop(create_app: Callable[..., FastAPI]) -> None:
    checked = 0
    for route in api_routes(create_app().routes):
        for call in dependencies(route.dependant):
            assert not isinstance(call, ServiceRef), f"{route.path}: Depends(ref), not ref.resolve"
            assert runs_on_the_loop(call), f"{route.path}: {call!r} would run in a worker thread"
            checked += 1
    assert checked, "no route took a dependency: the walk found nothing to check"

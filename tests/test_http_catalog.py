"""quiz_contracts.routes lists exactly the HTTP routes the services serve, with their models.

`make ts` types a route's body as written and its reply as read from that list; this keeps the
list true to the apps (built, not started), both ways: a route the list lacks and a listed
route no app serves each fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from quiz_contracts.routes import HTTP_ROUTES
from quiz_editor_assist.main import create_app as editor_assist
from quiz_lesson_fix.main import create_app as lesson_fix
from quiz_llm_gateway.main import create_app as llm_gateway
from quiz_poll.main import create_app as poll
from quiz_review.main import create_app as review
from quiz_runner.main import create_app as runner

APPS: dict[str, Callable[..., FastAPI]] = {
    "llm-gateway": llm_gateway,
    "runner": runner,
    "editor-assist": editor_assist,
    "review": review,
    "poll": poll,
    "lesson-fix": lesson_fix,
}


def api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """Every APIRoute, through included routers (as tests/test_routes_on_the_loop.py walks)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from api_routes(route.original_router.routes)


def served() -> dict[tuple[str, str, str], tuple[Any, Any]]:
    """(service, method, path) → (body type, reply model) of every route with a wire model."""
    found: dict[tuple[str, str, str], tuple[Any, Any]] = {}
    for service, create_app in APPS.items():
        for route in api_routes(create_app().routes):
            body = route.body_field.field_info.annotation if route.body_field else None
            reply = route.response_model
            is_model = isinstance(reply, type) and issubclass(reply, BaseModel)
            if body is None and not is_model:
                continue  # /healthz, /metrics, the pages, the event streams
            for method in route.methods:
                found[(service, method, route.path)] = (body, reply)
    return found


def listed() -> dict[tuple[str, str, str], tuple[Any, Any]]:
    return {(r.service, r.method, r.path): (r.body, r.reply) for r in HTTP_ROUTES}


def test_every_served_route_is_listed_with_its_models() -> None:
    routes = listed()
    for key, (body, reply) in served().items():
        assert key in routes, f"{key} is served but not in quiz_contracts.routes"
        listed_body, listed_reply = routes[key]
        assert listed_reply is reply, f"{key}: reply {reply} served, {listed_reply} listed"
        # An annotated union body (PollIdeaAction) reaches FastAPI as its bare union.
        assert body == getattr(listed_body, "__origin__", listed_body), f"{key}: body {body}"


def test_every_listed_route_is_served() -> None:
    assert not set(listed()) - set(served())

"""Caller schemas are data (issue 10, item 4): no remote $ref, patterns in linear time.

Real SDK against the scripted stub, real database; a real local HTTP server stands for the
`http://…` a schema names, and counts whether anything reached it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from quiz_contracts.errors import ErrorCode
from quiz_llm_gateway.domain.output import NO_RETRIEVAL, LinearValidator
from quiz_testkit.anthropic_stub import StubReply

from .test_gateway import expect_error, request


class Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        Recorder.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    Recorder.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def schema_with(node: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "review",
        "json_schema": {"type": "object", "properties": {"x": node}, "required": ["x"]},
    }


@pytest.mark.parametrize(
    "node",
    [
        {"$ref": "{server}/string.json"},
        {"$ref": "file:///etc/passwd"},
        {"$ref": "other.json#/a"},
        {"$dynamicRef": "{server}/x"},
        {"$ref": "#/$defs/missing"},
        {"$id": "{server}/base", "$ref": "#/x"},
        {"type": "string", "pattern": "(a)\\1"},
        {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
    ],
    ids=["http", "file", "relative", "dynamic", "dangling", "scope", "backref", "pattern-props"],
)
async def test_schemas_that_could_reach_out_are_refused_before_anything(
    make_rig: Any, schema_server: str, node: dict[str, Any]
) -> None:
    rig = make_rig()
    node = {
        k: v.replace("{server}", schema_server) if isinstance(v, str) else v
        for k, v in node.items()
    }
    error = await expect_error(
        rig.gateway.complete(request(output_schema=schema_with(node))), ErrorCode.invalid_request
    )
    assert error.message
    assert Recorder.hits == [], "nothing fetched"
    assert rig.stub.requests == [], "bad input costs nothing: no provider call"
    assert await rig.repo.ledger_rows() == []


def test_the_validator_cannot_retrieve_even_when_asked(schema_server: str) -> None:
    validator = LinearValidator({"$ref": f"{schema_server}/string.json"}, registry=NO_RETRIEVAL)
    with pytest.raises(Exception, match=r"Unresolvable|resolve"):
        list(validator.iter_errors("text"))
    assert Recorder.hits == []


async def test_local_refs_work_and_patterns_run_in_linear_time(make_rig: Any) -> None:
    rig = make_rig()
    schema = {
        "name": "review",
        "json_schema": {
            "type": "object",
            "$defs": {"word": {"type": "string", "pattern": "(a+)+$"}},
            "properties": {"x": {"$ref": "#/$defs/word"}},
            "required": ["x"],
        },
    }
    # 40 characters: with a backtracking engine this pattern takes 2^40 steps (hours).
    evil = "a" * 40 + "!"
    rig.stub.script(StubReply.tool({"x": evil}), StubReply.tool({"x": "aaaa"}))
    reply = await rig.gateway.complete(request(output_schema=schema))
    assert reply.output == {"x": "aaaa"} and reply.attempts == 2
    second = rig.stub.requests[1].body["messages"][-1]["content"][0]
    assert second["is_error"] and "does not match" in second["content"]

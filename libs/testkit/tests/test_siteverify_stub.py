"""The siteverify stub answers as Cloudflare's documented endpoint does, over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from quiz_testkit.siteverify_stub import DEFAULT_SECRET, SiteverifyStub

pytestmark = pytest.mark.integration


def verify(stub: SiteverifyStub, **form: str) -> httpx.Response:
    return httpx.post(stub.url, data=form, timeout=5)


def test_a_fresh_token_passes_once_then_is_a_duplicate(siteverify: SiteverifyStub) -> None:
    first = verify(siteverify, secret=DEFAULT_SECRET, response="tok-1")
    assert first.json()["success"] is True
    assert first.json()["hostname"] == "localhost"
    again = verify(siteverify, secret=DEFAULT_SECRET, response="tok-1")
    assert again.json() == {"success": False, "error-codes": ["timeout-or-duplicate"]}
    assert [c.response for c in siteverify.calls] == ["tok-1", "tok-1"]


def test_an_idempotent_repeat_passes_again(siteverify: SiteverifyStub) -> None:
    form = {"secret": DEFAULT_SECRET, "response": "tok-2", "idempotency_key": "k1"}
    assert verify(siteverify, **form).json()["success"] is True
    assert verify(siteverify, **form).json()["success"] is True


@pytest.mark.parametrize(
    ("form", "code"),
    [
        ({"secret": "wrong", "response": "tok"}, "invalid-input-secret"),
        ({"response": "tok"}, "missing-input-secret"),
        ({"secret": DEFAULT_SECRET, "response": ""}, "missing-input-response"),
        ({"secret": DEFAULT_SECRET, "response": "fail-me"}, "invalid-input-response"),
    ],
)
def test_refusals_carry_the_documented_codes(
    siteverify: SiteverifyStub, form: dict[str, str], code: str
) -> None:
    assert verify(siteverify, **form).json() == {"success": False, "error-codes": [code]}


def test_a_down_verifier_answers_its_status(siteverify: SiteverifyStub) -> None:
    siteverify.status = 503
    assert verify(siteverify, secret=DEFAULT_SECRET, response="tok").status_code == 503
    siteverify.reset()
    assert verify(siteverify, secret=DEFAULT_SECRET, response="tok").status_code == 200

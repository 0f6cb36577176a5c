"""Request ids derived from the work: same work, same id; other work, another id; bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from quiz_servicekit.request_ids import (
    MAX_REQUEST_ID,
    bounded_id,
    caller_key,
    digest,
)


class Body(BaseModel):
    text: str
    n: int = 0


def ident(**changes: object) -> str:
    args: dict[str, object] = {
        "principal": "teacher-1",
        "method": "post",
        "path": "/app/api/questions/42/generate",
        "body": Body(text="x"),
        "idempotency_key": None,
        **changes,
    }
    return caller_key(**args)  # type: ignore[arg-type]


def test_the_same_request_has_the_same_id() -> None:
    assert ident() == ident() == ident(method="POST", body=Body(text="x", n=0))
    assert ident().startswith("req:")


def test_who_where_and_what_each_change_the_id() -> None:
    ids = {
        ident(),
        ident(principal="teacher-2"),
        ident(path="/app/api/questions/43/generate"),
        ident(method="PUT"),
        ident(body=Body(text="y")),
        ident(body=None),
    }
    assert len(ids) == 6


def test_an_idempotency_key_names_the_request_whatever_its_body() -> None:
    keyed = ident(idempotency_key="click-1")
    assert keyed == ident(idempotency_key="click-1", body=Body(text="other"))
    assert keyed.startswith("key:")
    assert keyed != ident(idempotency_key="click-2")
    # One person's key never names another's request.
    assert keyed != ident(idempotency_key="click-1", principal="teacher-2")
    # An empty header is no key.
    assert ident(idempotency_key="") == ident()


def test_digest_of_a_model_is_the_digest_of_its_json() -> None:
    assert digest(Body(text="é")) == digest({"n": 0, "text": "é"})
    assert digest("a", "b") != digest("ab") != digest(["a", "b"])


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=4))
def test_bounded_ids_fit_the_contract_and_stay_distinct(parts: list[str]) -> None:
    made = bounded_id(*parts)
    assert len(made) <= MAX_REQUEST_ID
    if len(":".join(parts)) <= MAX_REQUEST_ID:
        assert made == ":".join(parts)
    else:
        assert made != bounded_id(*parts, "more")

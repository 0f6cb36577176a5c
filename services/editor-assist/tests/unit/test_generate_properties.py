"""Properties over random drafts and proposals, valid, partial or garbage (ADR-059 §2, D16).

The product owner's rule: nothing the teacher wrote is changed. Every non-empty top-level value
stays byte-identical (as JSON), and every list element the teacher wrote something in stays,
byte-identical and in order. Placeholder rows (nothing but id, kind, visible) may be filled in
place or dropped: there is nothing of the teacher's in them.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateRequest
from quiz_contracts.runner import CaseResult, CompileResult, Picture, RunReply
from quiz_editor_assist.generators import (
    GENERATORS,
    apply_proposal,
    plan_settle,
    prepare_generate,
    settle_reply,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies --------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=6)
)
garbage = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
written_texts = ["", " ", "Paris", "paris", "Lyon", "  Nice ", "[[a+1]]", "asset:x.png"]
texts = st.sampled_from(written_texts) | st.text(max_size=8)
ids = st.sampled_from(["c1", "c2", "m1", "t1", "k1", "col1", "a", ""]) | garbage


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, sometimes garbage of any JSON shape."""
    return st.one_of(strategy, strategy, strategy, garbage)


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object holding any subset of the fields."""
    return st.fixed_dictionaries({}, optional={k: maybe(v) for k, v in fields.items()})


def items(strategy: st.SearchStrategy[Any], max_size: int = 6) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.one_of(strategy, strategy, garbage), max_size=max_size)


mcq_choice = obj(id=ids, text=texts, correct=st.booleans())
short_matcher = obj(
    id=ids,
    kind=st.sampled_from(["text", "number", "date"]),
    value=texts | st.sampled_from(["3,14", "2020-01-31", "1.5"]),
)
case = obj(
    id=ids,
    name=texts,
    stdin=texts,
    args=st.lists(texts, max_size=2),
    visible=st.booleans(),
    expected_stdout=texts,
    expected_exit_code=st.integers(0, 3),
)
template = st.sampled_from(["", "@@edit", "def f():\n    @@edit\n@@edit", "no regions"])
reference = st.sampled_from(["", "print(1)", "a\n@@next\nb", "x\n@@next\ny\n@@next\nz"]) | texts

DRAFTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "mcq": obj(
        prompt=texts,
        mode=st.sampled_from(["single", "multiple", "other"]),
        shuffle=st.booleans(),
        choices=items(mcq_choice, 13),
    ),
    "short": obj(
        prompt=texts,
        kind=st.sampled_from(["text", "number", "date", "colour"]),
        matchers=items(short_matcher),
    ),
    "rich": obj(prompt=texts, reference=texts, rubric=texts, max_words=st.integers(1, 9)),
    "categorize": obj(
        prompt=texts,
        columns=items(obj(id=ids, label=texts), 7),
        cards=items(obj(id=ids, text=texts, column_id=ids | st.none())),
    ),
    "code": obj(
        prompt=texts,
        language=st.sampled_from(["python", "c", "cobol"]),
        template=template,
        reference=reference,
        cases=items(case),
    ),
    "codeimage": obj(
        prompt=texts,
        language=st.sampled_from(["python", "java"]),
        template=template,
        reference=reference,
        width=st.integers(1, 4),
        height=st.integers(1, 4),
        target=st.none() | obj(width=st.integers(1, 4), data=texts),
    ),
}

# Proposals carry the type's fields, and hostile ones: statement, settings, ids, whole lists.
hostile = obj(prompt=texts, mode=texts, kind=texts, shuffle=st.booleans(), id=ids, matchers=garbage)
PROPOSALS: dict[str, st.SearchStrategy[Any]] = {
    "mcq": obj(
        choices=items(obj(text=texts, correct=st.booleans(), id=ids), 14), explanation=texts
    ),
    "short": obj(values=items(texts | st.sampled_from(["3,14", "1789-07-14", "14/07/1789"]), 22)),
    "rich": obj(reference=texts, rubric=texts, explanation=texts),
    "categorize": obj(
        columns=items(obj(label=texts, cards=items(texts), id=ids), 8),
        distractors=items(texts),
        cards=garbage,
    ),
    "code": obj(reference=reference, cases=items(case, 8), explanation=texts),
    "codeimage": obj(reference=reference, target=garbage),
}


def proposal_for(name: str) -> st.SearchStrategy[Any]:
    plain = PROPOSALS[name]
    mixed = st.tuples(plain, hostile).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(plain, mixed, garbage)


# --- what the teacher wrote --------------------------------------------------------------------


def empty(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, dict)):
        return not value
    return isinstance(value, (int, float)) and value == 0


def placeholder(item: Any) -> bool:
    return isinstance(item, dict) and all(
        empty(v) for k, v in item.items() if k not in {"id", "kind", "visible"}
    )


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order kept: byte-identical means it


def is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def assert_teacher_kept(before: dict[str, Any], after: dict[str, Any]) -> None:
    for key, value in before.items():
        assert key in after, key
        if isinstance(value, list):
            assert isinstance(after[key], list), key
            written = [as_json(i) for i in value if not placeholder(i)]
            assert is_subsequence(written, [as_json(i) for i in after[key]]), key
        elif not empty(value):
            assert as_json(after[key]) == as_json(value), key


@SETTINGS
@given(data=st.data(), name=st.sampled_from(sorted(GENERATORS)))
def test_merge_never_changes_what_the_teacher_wrote(data: st.DataObject, name: str) -> None:
    draft = data.draw(DRAFTS[name], label="draft")
    proposal = data.draw(proposal_for(name), label="proposal")
    snapshot = as_json(draft)
    merged = GENERATORS[name].merge(draft, proposal if isinstance(proposal, dict) else {})
    assert as_json(draft) == snapshot  # pure: the input is not mutated
    assert_teacher_kept(draft, merged)
    # Statement and settings never move, even empty ones the proposal names.
    for key in ("prompt", "mode", "shuffle", "kind", "language", "template", "width", "height"):
        assert as_json(merged.get(key)) == as_json(draft.get(key))


@SETTINGS
@given(data=st.data(), name=st.sampled_from(sorted(GENERATORS)))
def test_the_whole_wand_on_garbage_raises_only_named_errors(data: st.DataObject, name: str) -> None:
    draft = data.draw(DRAFTS[name] | st.dictionaries(st.text(max_size=5), garbage), label="draft")
    explanation = data.draw(texts, label="explanation")
    item = data.draw(st.none() | st.integers(0, 14), label="item")
    request = GenerateRequest(config=draft, explanation=explanation, item=item)
    try:
        call = prepare_generate(name, request)
    except ContractError as exc:
        assert exc.code in {
            ErrorCode.statement_empty,
            ErrorCode.item_not_empty,
            ErrorCode.invalid_request,
        }
        return
    config, new_explanation = apply_proposal(call, request, data.draw(proposal_for(name)))
    assert_teacher_kept(draft, config)
    if explanation.strip():
        assert new_explanation == explanation
    step = plan_settle(name, config)
    assert step.request is None or not step.incomplete


statuses = st.fixed_dictionaries(
    {
        "stdout": texts,
        "exit_code": st.none() | st.integers(0, 3),
        "timed_out": st.none() | st.sampled_from(["cpu", "wall"]),
        "output_truncated": st.booleans(),
    }
)


valid_case = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "c", " d"])},
    optional={
        "stdin": texts,
        "args": st.lists(texts, max_size=2),
        "visible": st.booleans(),
        "expected_stdout": st.sampled_from(["", "", "1\n", " "]),
        "expected_exit_code": st.integers(0, 2),
        "id": st.sampled_from(["t1", "t2"]) | st.none(),
    },
)
VALID_DRAFTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "code": st.fixed_dictionaries(
        {
            "prompt": st.just("Affichez."),
            "language": st.sampled_from(["python", "c", "java"]),
            "reference": st.just("print(1)"),
            "cases": st.lists(
                valid_case, min_size=1, max_size=4, unique_by=lambda c: c["name"].strip()
            ),
        },
        optional={"template": st.just("@@edit")},
    ),
    "codeimage": st.fixed_dictionaries(
        {
            "prompt": st.just("Dessinez."),
            "language": st.just("python"),
            "reference": st.just("print('P3 2 2 255')"),
            "width": st.just(2),
            "height": st.just(2),
        },
        optional={
            "target": st.none()
            | st.just({"width": 2, "height": 2, "data": "iVBO", "sha256": "1" * 64})
        },
    ),
}


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["code", "codeimage"]))
def test_settle_never_changes_what_the_teacher_wrote(data: st.DataObject, name: str) -> None:
    draft = data.draw(VALID_DRAFTS[name] | DRAFTS[name], label="draft")
    step = plan_settle(name, draft)
    if step.request is None:
        return
    results = [
        CaseResult(name=c.name, **data.draw(statuses, label=c.name)) for c in step.request.cases
    ]
    picture = Picture(
        width=2,
        height=2,
        data="x",
        sha256="0" * 64,
        missing_pixels=data.draw(st.integers(0, 1), label="missing"),
    )
    run = RunReply(
        language="python",
        compile=CompileResult(ok=data.draw(st.booleans(), label="compiles")),
        cases=results,
        picture=picture,
    )
    settled, incomplete = settle_reply(name, draft, run)
    # Settle fills the empty fields of written cases (their outputs): compare field by field.
    for key, value in draft.items():
        if isinstance(value, list):
            assert len(settled[key]) == len(value)
            for before, after in zip(value, settled[key], strict=True):
                assert_teacher_kept(before, after)
        elif not empty(value):
            assert as_json(settled[key]) == as_json(value), key
    assert all(i.code in {ErrorCode.partial, ErrorCode.compile_failed} for i in incomplete)

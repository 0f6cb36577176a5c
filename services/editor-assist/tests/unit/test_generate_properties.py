"""Properties over random drafts and proposals, valid, partial or garbage (ADR-059 §2, D16).

The product owner's rule: nothing the teacher wrote is changed. What counts as written is the
platform's own notion, per type (heig-quiz `packages/qt-*/src/generate.ts`): a choice with text
(a tick on an EMPTY row is not the teacher's key), a matcher that is not the empty placeholder,
a labelled column and its cards, a case that is not the empty placeholder, a non-blank field.
Those stay byte-identical (as JSON) and in order; every other top-level value too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.generate import GenerateRequest
from quiz_contracts.questions.common import js_trim
from quiz_contracts.runner import CaseResult, CompileResult, Picture, RunReply
from quiz_editor_assist.generators import (
    GENERATORS,
    apply_proposal,
    plan_settle,
    prepare_generate,
    settle_reply,
)
from quiz_editor_assist.generators.code import is_empty_case
from quiz_editor_assist.generators.short import is_placeholder as short_placeholder

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
written_texts = ["", " ", "Paris", "paris", "Lyon", "  Nice ", "[[a+1]]", "asset:x.png", "\ufeff"]
texts = st.sampled_from(written_texts) | st.text(max_size=8)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, sometimes garbage of any JSON shape."""
    return st.one_of(strategy, strategy, strategy, garbage)


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object holding any subset of the fields."""
    return st.fixed_dictionaries({}, optional={k: maybe(v) for k, v in fields.items()})


def items(strategy: st.SearchStrategy[Any], max_size: int = 6) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.one_of(strategy, strategy, garbage), max_size=max_size)


ids = st.sampled_from(["col0aaaa", "col1aaaa", "card0aaa", "card1aaa", "k"]) | garbage
mcq_choice = obj(text=texts, correct=st.booleans())
short_matcher = obj(
    kind=st.sampled_from(["exact", "number", "date", "time", "regex"]),
    value=texts | st.sampled_from(["3,14", "2020-01-31", "14:05"]) | st.floats(-5, 5),
    points=st.just(1),
)
code_case = obj(
    name=texts,
    stdin=texts,
    args=st.lists(texts, max_size=2),
    visible=st.booleans(),
    expected=texts,
    compareStdout=st.booleans(),
    expectedExitCode=st.none() | st.integers(0, 3),
)
template = st.sampled_from(["", "a\n// @@lock\nb\n// @@endlock\nc\n", "# @@lock\nx\n", "plain"])
reference = st.sampled_from(["", "print(1)", "a\n// @@next\nb", "x\n# @@next\ny\n@@next\nz"])
image = obj(width=st.integers(3, 4), height=st.integers(3, 4), palette=st.sampled_from(["bw"]))

DRAFTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "mcq": obj(
        configVersion=st.just(2),
        prompt=texts,
        mode=st.sampled_from(["single", "multiple", "other"]),
        shuffleChoices=st.booleans(),
        policy=st.sampled_from(["inherit", "ripkey"]),
        choices=items(mcq_choice, 13),
    ),
    "short": obj(
        configVersion=st.just(3),
        prompt=texts,
        kind=st.sampled_from(["text", "number", "date", "time", "colour"]),
        matchers=items(short_matcher, 21),
    ),
    "rich": obj(configVersion=st.just(1), prompt=texts, reference=texts, rubric=texts),
    "categorize": obj(
        configVersion=st.just(1),
        prompt=texts,
        columns=items(obj(id=ids, label=texts, cards=st.lists(ids, max_size=3)), 7),
        cards=items(obj(id=ids, text=texts), 31),
    ),
    "code": obj(
        configVersion=st.just(1),
        prompt=texts,
        language=st.sampled_from(["python", "c", "cobol"]),
        template=template,
        referenceSolution=reference | texts,
        tests=obj(mode=st.just("io"), cases=items(code_case, 31)),
    ),
    "codeimage": obj(
        configVersion=st.just(1),
        prompt=texts,
        language=st.sampled_from(["python", "c"]),
        template=template,
        referenceSolution=reference | texts,
        image=image,
        target=st.none() | obj(width=st.integers(3, 4), pixels=texts),
    ),
}

# Proposals carry the type's fields, and hostile ones: statement, settings, whole lists.
hostile = obj(prompt=texts, mode=texts, kind=texts, template=texts, matchers=garbage, id=ids)
PROPOSALS: dict[str, st.SearchStrategy[Any]] = {
    "mcq": obj(choices=items(obj(text=texts, correct=st.booleans()), 14)),
    "short": obj(
        answers=items(
            obj(
                value=texts | st.sampled_from(["3,14", "1789-07-14", "0x10", "14:05"]),
                tolerance=st.floats(-1, 1),
            ),
            22,
        )
    ),
    "rich": obj(reference=texts, rubric=texts),
    "categorize": obj(
        columns=items(obj(label=texts, cards=items(texts)), 8),
        distractors=items(texts),
    ),
    "code": obj(
        referenceSolution=reference | texts,
        cases=items(obj(name=texts, stdin=texts, args=st.lists(texts), visible=st.booleans()), 8),
    ),
    "codeimage": obj(referenceSolution=reference | texts),
}


def proposal_for(name: str) -> st.SearchStrategy[Any]:
    plain = PROPOSALS[name]
    mixed = st.tuples(plain, hostile).map(lambda pair: {**pair[1], **pair[0]})
    return st.one_of(plain, mixed, garbage)


# --- what the teacher wrote, per type --------------------------------------------------------


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order kept: byte-identical means it


def empty(value: Any) -> bool:
    if value is None or value is False:
        return True
    if isinstance(value, str):
        return not js_trim(value)
    if isinstance(value, list | dict):
        return not value
    return isinstance(value, int | float) and value == 0


def is_subsequence(needles: list[Any], haystack: list[Any]) -> bool:
    it = iter(as_json(h) for h in haystack)
    return all(any(as_json(n) == h for h in it) for n in needles)


def kept_choices(before: list[Any], after: list[Any]) -> None:
    assert len(after) >= len(before)
    for old, new in zip(before, after, strict=False):
        blank_row = isinstance(old, dict) and (
            old.get("text") is None or (isinstance(old["text"], str) and not js_trim(old["text"]))
        )
        if not blank_row:
            assert as_json(new) == as_json(old)


def kept_columns(before: list[Any], after: list[Any]) -> None:
    assert len(after) >= len(before)
    for old, new in zip(before, after, strict=False):
        if not isinstance(old, dict):
            assert as_json(new) == as_json(old)
            continue
        for key, value in old.items():
            if key == "cards" and isinstance(value, list):
                assert new["cards"][: len(value)] == value  # never moved nor dropped
            elif key != "label" or not empty(value):
                assert as_json(new[key]) == as_json(value), key


def assert_teacher_kept(name: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    for key, value in before.items():
        assert key in after, key
        new = after[key]
        owned = (name, key, type(value))
        if owned == ("mcq", "choices", list):
            kept_choices(value, new)
        elif owned == ("short", "matchers", list):
            assert is_subsequence([m for m in value if not short_placeholder(m)], new)
        elif owned == ("categorize", "columns", list):
            kept_columns(value, new)
        elif owned == ("categorize", "cards", list):
            assert new[: len(value)] == value
        elif owned == ("code", "tests", dict):
            for k, v in value.items():
                if k == "cases" and isinstance(v, list):
                    assert is_subsequence([c for c in v if not is_empty_case(c)], new["cases"])
                else:
                    assert as_json(new[k]) == as_json(v), k
        elif not empty(value):
            assert as_json(new) == as_json(value), key


SETTING_KEYS = (
    "configVersion", "prompt", "mode", "policy", "shuffleChoices", "kind", "language",
    "template", "image", "constraints", "prefilters",
)  # fmt: skip


@SETTINGS
@given(data=st.data(), name=st.sampled_from(sorted(GENERATORS)))
def test_merge_never_changes_what_the_teacher_wrote(data: st.DataObject, name: str) -> None:
    check_merge(data.draw(DRAFTS[name], label="draft"), data.draw(proposal_for(name)), name)


@pytest.mark.parametrize(
    ("name", "draft"),
    [
        ("mcq", {"choices": [{"text": []}]}),  # found by hypothesis: a text that is not text
        ("mcq", {"choices": [{"text": 5, "correct": True}, {"text": ""}]}),
        ("categorize", {"columns": [{"label": 3, "cards": 4}], "cards": [{"text": []}]}),
        ("short", {"matchers": [{"kind": "exact", "value": []}, {"value": {}}]}),
        ("code", {"tests": {"cases": [{"name": [], "args": "x"}]}, "referenceSolution": 1}),
    ],
)
def test_merge_keeps_values_of_the_wrong_type(name: str, draft: dict[str, Any]) -> None:
    proposals = {
        "mcq": {"choices": [{"text": "a", "correct": True}]},
        "categorize": {"columns": [{"label": "A", "cards": ["c"]}], "distractors": ["d"]},
        "short": {"answers": [{"value": "v"}]},
        "code": {
            "referenceSolution": "r",
            "cases": [{"name": "n", "stdin": "", "args": [], "visible": True}],
        },
    }
    check_merge(draft, proposals[name], name)


def check_merge(draft: dict[str, Any], proposal: Any, name: str) -> None:
    snapshot = as_json(draft)
    merged = GENERATORS[name].merge(draft, proposal if isinstance(proposal, dict) else {})
    assert as_json(draft) == snapshot  # pure: the input is not mutated
    assert_teacher_kept(name, draft, merged)
    # Statement and settings never move, even empty ones the proposal names.
    for key in SETTING_KEYS:
        assert as_json(merged.get(key)) == as_json(draft.get(key)), key


@SETTINGS
@given(data=st.data(), name=st.sampled_from(sorted(GENERATORS)))
def test_the_whole_wand_on_garbage_raises_only_named_errors(data: st.DataObject, name: str) -> None:
    draft = data.draw(DRAFTS[name] | st.dictionaries(st.text(max_size=5), garbage), label="draft")
    explanation = data.draw(texts, label="explanation")
    item = data.draw(st.none() | st.integers(0, 11), label="item")
    request = GenerateRequest(config=draft, explanation=explanation, item=item)
    try:
        call = prepare_generate(name, request)
    except ContractError as exc:
        assert exc.code in {
            ErrorCode.statement_empty,
            ErrorCode.item_not_empty,
            ErrorCode.generate_unsupported,
            ErrorCode.limit_exceeded,
            ErrorCode.draft_invalid,  # a draft of another shape than its type's
        }
        return
    output = data.draw(st.fixed_dictionaries({"proposal": proposal_for(name)}) | garbage)
    config, new_explanation = apply_proposal(call, request, output)
    assert_teacher_kept(name, draft, config)
    if js_trim(explanation):
        assert new_explanation == explanation
    step = plan_settle(name, config)
    assert step.plan is None or not step.incomplete


statuses = st.fixed_dictionaries(
    {
        "stdout": texts,
        "exit_code": st.none() | st.integers(0, 3),
        "timed_out": st.none() | st.sampled_from(["cpu", "wall"]),
        "output_truncated": st.booleans(),
        "signal": st.none() | st.just("SIGSEGV"),
    }
)
valid_case = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b", "c", " d"]), "expected": st.sampled_from(["", "", "1\n"])},
    optional={
        "stdin": texts,
        "args": st.lists(texts, max_size=2),
        "visible": st.booleans(),
        "compareStdout": st.booleans(),
        "expectedExitCode": st.integers(0, 2),
        "notes": texts,  # a key the platform does not know: kept by settle
    },
)
VALID_DRAFTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "code": st.fixed_dictionaries(
        {
            "configVersion": st.just(1),
            "prompt": st.just("Affichez."),
            "language": st.sampled_from(["python", "c", "js"]),
            "referenceSolution": st.just("print(1)"),
            "tests": st.fixed_dictionaries(
                {
                    "mode": st.just("io"),
                    "cases": st.lists(
                        valid_case, min_size=1, max_size=4, unique_by=lambda c: c["name"]
                    ),
                }
            ),
        },
    ),
    "codeimage": st.fixed_dictionaries(
        {
            "configVersion": st.just(1),
            "prompt": st.just("Dessinez."),
            "language": st.just("python"),
            "referenceSolution": st.just("print('1 1 1 1 1 1 1 1 1')"),
            "image": st.just({"width": 3, "height": 3, "palette": "bw"}),
        },
        optional={
            "target": st.none()
            | st.just({"width": 3, "height": 3, "palette": "bw", "pixels": "0" * 9})
        },
    ),
}


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["code", "codeimage"]))
def test_settle_writes_only_the_outputs_of_its_targets(data: st.DataObject, name: str) -> None:
    draft = data.draw(VALID_DRAFTS[name] | DRAFTS[name], label="draft")
    step = plan_settle(name, draft)
    if step.plan is None:
        return
    results = [
        CaseResult(name=c.name, **data.draw(statuses, label=c.name))
        for c in step.plan.request.cases
    ]
    missing = data.draw(st.integers(0, 1), label="missing")
    picture = Picture(width=3, height=3, palette="bw", pixels="1" * 9, missing_pixels=missing)
    run = RunReply(
        language="python",
        compile=CompileResult(ok=data.draw(st.booleans(), label="compiles")),
        cases=results,
        picture=picture,
    )
    settled, incomplete = settle_reply(name, draft, step.plan, run)
    assert all(i.code in {ErrorCode.partial, ErrorCode.compile_failed} for i in incomplete)
    for key, value in draft.items():
        if name == "code" and key == "tests":
            for index, (before, after) in enumerate(
                zip(value["cases"], settled["tests"]["cases"], strict=True)
            ):
                writable = {"expected", "expectedExitCode"} if index in step.plan.targets else set()
                for k, v in before.items():
                    if k not in writable:
                        assert as_json(after[k]) == as_json(v), k
        elif name == "codeimage" and key == "target":
            assert value is None or settled[key] == value
        else:
            assert as_json(settled[key]) == as_json(value), key

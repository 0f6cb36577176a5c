"""The teacher's actions on the board (ADR-071 §3, §6; FACTS D `applyIdeaAction`).

After heig-quiz `packages/domain/src/brainstorm.test.ts` ("writes one mark per key", "merges
cluster heads into the target's head and never loops", detach and rename through the head, a
teacher's action makes the mark the teacher's), in our own words, plus a property: no sequence of
actions ever writes a `mergedInto` loop.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark, PollIdeaAction
from quiz_poll.domain.marks import apply_idea_action, cluster_head, upsert

ACTION = TypeAdapter(PollIdeaAction)


def act(current: list[IdeaMark], body: dict[str, Any]) -> list[IdeaMark]:
    return apply_idea_action({m.key: m for m in current}, ACTION.validate_python(body)).marks


def mark(key: str, **over: Any) -> IdeaMark:
    return IdeaMark(key=key, **over)


def test_one_mark_per_key() -> None:
    assert act([], {"action": "approve", "keys": ["bouge", "bouge"]}) == [
        mark("bouge", status="approved")
    ]


def test_approve_hide_and_reset_set_the_status() -> None:
    assert act([], {"action": "hide", "keys": ["juron"]}) == [mark("juron", status="hidden")]
    hidden = [mark("juron", status="hidden", merged_into="bouge")]
    # reset goes back to unmoderated and keeps the rest of the mark
    assert act(hidden, {"action": "reset", "keys": ["juron"]}) == [
        mark("juron", merged_into="bouge")
    ]


def test_merge_moves_heads_under_the_targets_head_and_skips_its_own_cluster() -> None:
    current = [mark("mange", merged_into="bouge")]
    merged = act(current, {"action": "merge", "keys": ["court", "bouge"], "into": "mange"})
    # "bouge" is already the target's head: only "court" moves, under "bouge".
    assert merged == [mark("court", merged_into="bouge")]
    marks = upsert({m.key: m for m in current}, merged)
    assert cluster_head("court", marks) == "bouge"


def test_merge_moves_a_whole_cluster_by_its_head_and_clears_its_label() -> None:
    current = [mark("saute", merged_into="court"), mark("court", label="Bouger")]
    merged = act(current, {"action": "merge", "keys": ["saute"], "into": "mange"})
    assert merged == [mark("court", merged_into="mange")]  # the head moved, the label went
    marks = upsert({m.key: m for m in current}, merged)
    assert {cluster_head(k, marks) for k in ("saute", "court", "mange")} == {"mange"}


def test_merge_into_itself_or_a_member_writes_nothing() -> None:
    current = [mark("saute", merged_into="court")]
    assert act(current, {"action": "merge", "keys": ["court"], "into": "saute"}) == []
    assert act([], {"action": "merge", "keys": ["court"], "into": "court"}) == []


def test_detach_clears_merged_into_only_where_there_is_one() -> None:
    current = [mark("saute", merged_into="court")]
    assert act(current, {"action": "detach", "keys": ["saute", "zebre"]}) == [mark("saute")]


def test_rename_acts_on_the_head_trims_and_a_blank_label_clears_it() -> None:
    current = [mark("saute", merged_into="court")]
    assert act(current, {"action": "rename", "key": "saute", "label": "  Bouger "}) == [
        mark("court", label="Bouger")
    ]
    named = [mark("court", label="Bouger")]
    assert act(named, {"action": "rename", "key": "court", "label": "  "}) == [mark("court")]
    assert act(named, {"action": "rename", "key": "court", "label": None}) == [mark("court")]


def test_every_action_makes_the_mark_the_teachers_and_keeps_the_models_correction() -> None:
    current = [mark("il respir", status="hidden", correction="Respiration", source="ai")]
    assert act(current, {"action": "approve", "keys": ["il respir"]}) == [
        mark("il respir", status="approved", correction="Respiration", source="teacher")
    ]


def test_an_action_is_audited_with_what_it_wrote_before_and_after() -> None:
    current = {"bouge": mark("bouge", status="approved", source="ai")}
    result = apply_idea_action(
        current, ACTION.validate_python({"action": "hide", "keys": ["bouge"]})
    )
    audit = result.audit
    assert audit.action_name == "poll.ideas"
    assert audit.action == "hide"
    assert audit.change == {"action": "hide", "keys": ["bouge"]}
    assert audit.before == {"bouge": current["bouge"]}
    assert audit.after == {"bouge": mark("bouge", status="hidden")}


def test_keys_that_are_not_idea_keys_are_refused_before_anything_is_written() -> None:
    with pytest.raises(ContractError) as refused:
        act([], {"action": "approve", "keys": ["Bouge !"]})
    assert refused.value.code == ErrorCode.invalid_request
    with pytest.raises(ContractError):
        act([], {"action": "merge", "keys": ["bouge"], "into": "La Bouge"})


def test_the_action_body_is_the_platforms_shape() -> None:
    with pytest.raises(ValueError):
        ACTION.validate_python({"action": "approve", "keys": []})
    with pytest.raises(ValueError):
        ACTION.validate_python({"action": "explode", "keys": ["a"]})
    with pytest.raises(ValueError):
        ACTION.validate_python({"action": "rename", "key": "a", "label": "x" * 61})
    with pytest.raises(ValueError):
        ACTION.validate_python({"action": "hide", "keys": ["a"] * 501})


# --- no loop, ever -----------------------------------------------------------------------------

KEYS = ["bouge", "court", "mange", "saute", "vole", "nage"]
keys = st.lists(st.sampled_from(KEYS), min_size=1, max_size=4)
actions = st.one_of(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["approve", "hide", "reset", "detach"]), "keys": keys}
    ),
    st.fixed_dictionaries(
        {"action": st.just("merge"), "keys": keys, "into": st.sampled_from(KEYS)}
    ),
    st.fixed_dictionaries(
        {
            "action": st.just("rename"),
            "key": st.sampled_from(KEYS),
            "label": st.none() | st.sampled_from(["Bouger", " ", "Nager"]),
        }
    ),
)


def chain_loops(key: str, marks: dict[str, IdeaMark]) -> bool:
    seen = {key}
    current = marks.get(key)
    while current is not None and current.merged_into is not None:
        if current.merged_into in seen:
            return True
        seen.add(current.merged_into)
        current = marks.get(current.merged_into)
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(actions, max_size=25))
def test_no_sequence_of_actions_writes_a_loop(bodies: list[dict[str, Any]]) -> None:
    marks: dict[str, IdeaMark] = {}
    for body in bodies:
        result = apply_idea_action(marks, ACTION.validate_python(body))
        assert len({m.key for m in result.marks}) == len(result.marks)
        assert all(m.source == "teacher" for m in result.marks)
        marks = upsert(marks, result.marks)
        assert not any(chain_loops(key, marks) for key in KEYS)

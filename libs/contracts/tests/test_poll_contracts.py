"""The poll wire models speak the platform's JSON (heig-quiz `packages/contracts/src/poll.ts`,
`packages/qt-brainstorm/src/schema.ts`, `apps/api/src/db/poll.ts`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import TypeAdapter, ValidationError

from quiz_contracts import subjects
from quiz_contracts.errors import ErrorCode, http_status
from quiz_contracts.poll import (
    BrainstormAnswer,
    BrainstormClose,
    BrainstormOpen,
    IdeaMark,
    PollAiRun,
    PollIdeaAction,
    PollIdeaBoard,
    PollJoin,
    PollParticipant,
    PollRevealBody,
    PollTally,
    PollTallyFrame,
)

NOW = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)


def test_the_answer_is_ideas_trimmed_one_to_sixty_characters_at_most_ten() -> None:
    assert BrainstormAnswer.model_validate({"ideas": ["  bouge ", "mange"]}).ideas == [
        "bouge",
        "mange",
    ]
    for bad in ({"ideas": [" "]}, {"ideas": ["x" * 61]}, {"ideas": ["a"] * 11}, {"ideas": "a"}):
        with pytest.raises(ValidationError):
            BrainstormAnswer.model_validate(bad)
    assert BrainstormAnswer.model_validate({"ideas": ["x" * 60]}).ideas == ["x" * 60]


def test_an_idea_is_counted_in_utf16_units_as_the_platform_counts_it() -> None:
    # zod's .max(60) counts String.length: an emoji outside the BMP is two units.
    assert BrainstormAnswer.model_validate({"ideas": ["🙂" * 30]}).ideas == ["🙂" * 30]
    for bad in ("🙂" * 31, "🙂" * 60, "x" * 59 + "🙂"):
        with pytest.raises(ValidationError):
            BrainstormAnswer.model_validate({"ideas": [bad]})
    # Counted after JavaScript's trim (U+FEFF is a space there), never coerced from a number.
    assert BrainstormAnswer.model_validate({"ideas": ["\ufeff" + "x" * 60 + " "]}).ideas == [
        "x" * 60
    ]
    with pytest.raises(ValidationError):
        BrainstormAnswer.model_validate({"ideas": [12]})


def test_a_mark_is_the_poll_idea_marks_row_in_camel_case() -> None:
    mark = IdeaMark.model_validate({"key": "bouge", "mergedInto": "court", "source": "ai"})
    assert mark.merged_into == "court"
    assert json.loads(mark.model_dump_json()) == {
        "key": "bouge",
        "status": None,
        "mergedInto": "court",
        "label": None,
        "correction": None,
        "source": "ai",
        # This service's two additions (issue 21): the approved spellings, and an idea that was
        # there when the AI was switched on.
        "seen": [],
        "teacherOnly": False,
    }
    with pytest.raises(ValidationError):
        IdeaMark.model_validate({"key": "bouge", "status": "pending"})


def test_the_tally_has_the_platforms_fields() -> None:
    tally = PollTally(joined=3, answered=2, pending=1)
    assert set(json.loads(tally.model_dump_json())) == {
        "joined",
        "answered",
        "choices",
        "answers",
        "ideas",
        "pending",
    }


def test_the_frame_is_versioned_and_camel_case() -> None:
    frame = PollTallyFrame(
        evaluation_id="ev1",
        seq=4,
        audience="phone",
        tally=None,
        shared_list=[],
        server_now=NOW,
    )
    body = json.loads(frame.model_dump_json())
    assert body["v"] == 1 and body["type"] == "poll.tally"
    assert {"evaluationId", "sharedList", "serverNow"} <= set(body)
    assert PollTallyFrame.model_validate(body) == frame


def test_the_board_reads_the_platforms_json() -> None:
    body = {
        "moderation": True,
        "ai": {"available": True, "on": True, "error": "budget_exhausted"},
        "answered": 1,
        "pending": 0,
        "clusters": [
            {
                "key": "bouge",
                "label": "Bouger",
                "renamed": False,
                "count": 1,
                "total": 1,
                "variants": [
                    {
                        "key": "bouge",
                        "text": "bouge",
                        "correction": "Bouger",
                        "ai": True,
                        "count": 1,
                        "status": "approved",
                    }
                ],
            }
        ],
    }
    board = PollIdeaBoard.model_validate(body)
    # Our additions to the AI line (the run's calls against its cap, issue 16) and a variant's
    # new spellings (issue 21), the model the gateway reports (issue 34) are the only
    # differences from the platform's JSON.
    dumped = json.loads(board.model_dump_json())
    assert dumped["ai"].pop("calls") == 0 and dumped["ai"].pop("runCap") == 200
    ai = dumped["ai"]
    assert (ai.pop("model"), ai.pop("provider"), ai.pop("demo")) == (None, None, False)
    assert dumped["clusters"][0]["variants"][0].pop("newSpellings") == []
    assert dumped["clusters"][0]["variants"][0].pop("onWall") is None
    assert dumped == body


def test_the_action_body_is_a_closed_union_on_action() -> None:
    adapter = TypeAdapter(PollIdeaAction)
    merge = adapter.validate_python({"action": "merge", "keys": ["a"], "into": "b"})
    assert json.loads(adapter.dump_json(merge)) == {"action": "merge", "keys": ["a"], "into": "b"}
    with pytest.raises(ValidationError):
        adapter.validate_python({"action": "merge", "keys": ["a"]})


def test_the_reveal_body_must_name_a_switch() -> None:
    with pytest.raises(ValidationError):
        PollRevealBody.model_validate({})
    assert PollRevealBody.model_validate({"moderation": False}).moderation is False


def test_the_edge_models() -> None:
    opened = BrainstormOpen.model_validate(
        {
            "evaluationId": "ev2",
            "againOf": "ev1",
            "teacherId": "t1",
            "audience": {"kind": "classroom", "classroomId": "c1"},
            "question": {"prompt": "Vivant ?"},
            "roster": [{"givenName": "Zoé", "familyName": "Dupont", "email": "z@d.ch"}],
            "openedAt": "2026-10-20T09:00:00Z",
        }
    )
    assert opened.question.max_ideas == 5
    assert opened.roster[0].given_name == "Zoé"
    with pytest.raises(ValidationError):
        BrainstormOpen.model_validate({**opened.model_dump(), "evaluationId": "a.b"})
    with pytest.raises(ValidationError):
        BrainstormOpen.model_validate(
            {**opened.model_dump(), "question": {"prompt": "x", "maxIdeas": 11}}
        )
    join = PollJoin.model_validate(
        {"evaluationId": "ev2", "participant": {"attemptId": "a1", "kind": "guest"}}
    )
    assert join.person is None
    with pytest.raises(ValidationError):
        PollParticipant.model_validate({"attemptId": "a1", "kind": "account"})
    with pytest.raises(ValidationError):
        PollParticipant.model_validate({"attemptId": "a1", "kind": "guest", "userId": "u"})
    # A time without its offset is refused, as review refuses one (it would be read in the
    # host's zone).
    for naive in ("2026-10-20T09:00:00", "2026-10-20 09:00"):
        with pytest.raises(ValidationError):
            BrainstormOpen.model_validate({**opened.model_dump(), "openedAt": naive})
        with pytest.raises(ValidationError):
            BrainstormClose.model_validate({"evaluationId": "ev2", "closedAt": naive})
    assert BrainstormClose.model_validate(
        {"evaluationId": "ev2", "closedAt": "2026-10-20T11:00:00+02:00"}
    ).closed_at == datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
    run = PollAiRun(evaluation_id="ev2")
    assert json.loads(run.model_dump_json())["leaseAt"] is None


def test_the_tally_subject() -> None:
    assert subjects.poll_tally_subject("ev1") == "poll.v1.ev1.tally"
    assert subjects.poll_tally_filter() == "poll.v1.*.tally"
    for bad in ("", "a.b", "*", ">", "a b"):
        with pytest.raises(ValueError):
            subjects.poll_tally_subject(bad)


def test_the_poll_error_codes_and_their_statuses() -> None:
    assert http_status(ErrorCode.poll_type) == 422
    assert http_status(ErrorCode.poll_keyless) == 422
    assert http_status(ErrorCode.answer_invalid) == 422
    assert http_status(ErrorCode.poll_frozen) == 409
    assert http_status(ErrorCode.llm_unavailable) == 422

"""The board and the cloud (ADR-071 §4–§5, §7, §11; FACTS D), on the reference and the tally alike.

Cases follow the shape of heig-quiz `packages/domain/src/brainstorm.test.ts` (counts per
participant, merges, moderation, a head that is hidden or unmoderated, the teacher's label, a
correction shown only for a visible idea), in our own words and data.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.poll import IdeaMark, PollAiState, PollRevealBody, PollSettings
from quiz_poll.domain.board import Board, Bubble, brainstorm_board, brainstorm_cloud
from quiz_poll.domain.ideas import idea_key, room_text
from quiz_poll.domain.marks import default_settings
from quiz_poll.domain.tally import tally_from_answers
from quiz_poll.domain.views import (
    apply_switches,
    board_view,
    frames,
    needs_frame,
    snapshot,
)

NOW = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)


def mark(key: str, **over: Any) -> IdeaMark:
    return IdeaMark(key=key, **over)


def answers(*ideas: list[str]) -> list[tuple[str, dict[str, list[str]]]]:
    return [(f"p{i}", {"ideas": list(group)}) for i, group in enumerate(ideas)]


def seen_all(rows: list[tuple[str, dict[str, list[str]]]], marks: list[IdeaMark]) -> list[IdeaMark]:
    """Approved marks that name no spelling approve every spelling the rows hold of their key
    (a teacher who saw them all): the cases below are about everything else."""
    held: dict[str, list[str]] = {}
    for _, payload in rows:
        for text in payload["ideas"]:
            held.setdefault(idea_key(text), []).append(room_text(" ".join(text.split())))
    return [
        m.model_copy(update={"seen": tuple(dict.fromkeys(held.get(m.key, [m.key])))})
        if m.status == "approved" and not m.seen
        else m
        for m in marks
    ]


def both(
    rows: list[tuple[str, dict[str, list[str]]]], marks: list[IdeaMark], moderation: bool
) -> tuple[Board, list[Bubble]]:
    """The reference's board and cloud, after checking the incremental tally agrees."""
    marks = seen_all(rows, marks)
    by_key = {m.key: m for m in marks}
    board = brainstorm_board(rows, by_key, moderation)
    cloud = brainstorm_cloud(board, moderation)
    tally = tally_from_answers(rows, marks, moderation)
    assert tally.board() == board
    assert tally.cloud() == cloud
    return board, cloud


ROOM = answers(
    ["Bouge", "mange"],
    ["le mouvement", "bouge !"],
    ["bouge", "Mange", "gros mot"],
    [],
)


def test_each_participant_counts_once_per_idea_most_proposed_first() -> None:
    board, _ = both(ROOM, [], moderation=False)
    assert board.answered == 3
    assert board.pending == 0
    assert [(c.label, c.count, c.total) for c in board.clusters] == [
        ("Bouge", 3, 3),
        ("mange", 2, 2),  # "mange" and "Mange" once each: the tie goes to the first met
        ("le mouvement", 1, 1),
        ("gros mot", 1, 1),
    ]


def test_a_variant_reads_the_most_typed_spelling_a_tie_the_first_met() -> None:
    rows = answers(["velo"], ["Vélo"], ["vélo"], ["Vélo!"], ["vélo"])
    board, cloud = both(rows, [], moderation=False)
    assert board.clusters[0].variants[0].text == "vélo"  # typed twice
    assert cloud[0].label == "vélo"
    # In any order of the answers, and after the most typed one leaves, the rule holds.
    board, _ = both(list(reversed(rows)), [], moderation=False)
    assert board.clusters[0].variants[0].text == "vélo"
    # A tie keeps the first spelling met (the platform's rule), not the smallest code point.
    tie = answers(["vélo"], ["Vélo"], ["velo"])
    assert both(tie, [], moderation=False)[0].clusters[0].variants[0].text == "vélo"
    tie = answers(["Vélo"], ["vélo"], ["velo"], [], ["VELO"])
    assert both(tie, [], moderation=False)[0].clusters[0].variants[0].text == "Vélo"
    tally = tally_from_answers(rows, [], moderation=False)
    tally.set_answer("p2", {"ideas": ["VÉLO"]})
    tally.set_answer("p4", {"ideas": []})
    # velo, Vélo, VÉLO, Vélo! once each: the first met is p0's "velo" (not "VÉLO", É < é).
    assert tally.board().clusters[0].variants[0].text == "velo"
    tally.set_answer("p0", {"ideas": []})
    assert tally.board().clusters[0].variants[0].text == "Vélo"


def test_a_participant_writing_one_idea_twice_counts_once() -> None:
    board, cloud = both(answers(["Bouge", "bouge !", "BOUGE"]), [], moderation=False)
    assert board.clusters[0].count == 1
    assert board.clusters[0].variants[0].count == 1
    assert cloud == [Bubble("bouge", "Bouge", 1)]


def test_merged_ideas_share_a_head_and_a_participant_counts_once_per_cluster() -> None:
    board, cloud = both(ROOM, [mark("mouvement", merged_into="bouge")], moderation=False)
    head = board.clusters[0]
    assert head.key == "bouge"
    assert head.count == 3  # p1 wrote both "le mouvement" and "bouge !": once
    assert [v.text for v in head.variants] == ["Bouge", "le mouvement"]
    assert cloud[0] == Bubble("bouge", "Bouge", 3)


def test_under_moderation_only_approved_ideas_count_for_the_room() -> None:
    marks = [mark("bouge", status="approved"), mark("gros mot", status="hidden")]
    board, cloud = both(ROOM, marks, moderation=True)
    assert board.pending == 2  # "mange" and "mouvement"
    by_key = {c.key: c for c in board.clusters}
    assert (by_key["bouge"].count, by_key["mange"].count, by_key["mange"].total) == (3, 0, 2)
    assert by_key["gros mot"].variants[0].status == "hidden"
    assert cloud == [Bubble("bouge", "Bouge", 3)]


def test_without_moderation_everything_but_hidden_is_visible() -> None:
    _, cloud = both(ROOM, [mark("gros mot", status="hidden")], moderation=False)
    assert [b.key for b in cloud] == ["bouge", "mange", "mouvement"]


def test_a_cluster_headed_by_an_unmoderated_idea_never_shows_its_head() -> None:
    rows = answers(["juron", "bouge"], ["juron"], ["mouvement"])
    # "mouvement" approved, then merged INTO the unmoderated "juron"; "bouge" hidden.
    marks = [
        mark("mouvement", merged_into="juron", status="approved"),
        mark("bouge", status="hidden"),
    ]
    _, cloud = both(rows, marks, moderation=True)
    assert cloud == [Bubble("mouvement", "mouvement", 1)]
    assert "juron" not in json.dumps([b.label for b in cloud] + [b.key for b in cloud])


def test_a_hidden_head_is_never_the_bubble_key_even_without_moderation() -> None:
    rows = answers(["insulte"], ["bouge"])
    marks = [mark("insulte", status="hidden"), mark("bouge", merged_into="insulte")]
    _, cloud = both(rows, marks, moderation=False)
    assert cloud == [Bubble("bouge", "bouge", 1)]


def test_the_bubble_key_is_the_smallest_visible_key() -> None:
    rows = answers(["zèbre"], ["mouvement"], ["bouge"])
    marks = [mark("mouvement", merged_into="zebre"), mark("bouge", merged_into="zebre")]
    _, cloud = both(rows, marks, moderation=False)
    assert cloud == [Bubble("bouge", "zèbre", 3)]  # label: the first variant in board order


def test_the_teachers_label_names_the_bubble() -> None:
    rows = answers(["bouge"], ["mange"], ["mange"])
    _, cloud = both(rows, [mark("bouge", label="Le mouvement")], moderation=False)
    assert cloud == [Bubble("mange", "mange", 2), Bubble("bouge", "Le mouvement", 1)]


def test_a_visible_ideas_correction_is_shown_and_the_typed_text_stays_on_the_board() -> None:
    rows = answers(["il respir"])
    marks = [mark("il respir", status="approved", correction="Respiration", source="ai")]
    board, cloud = both(rows, marks, moderation=True)
    variant = board.clusters[0].variants[0]
    assert (variant.text, variant.correction, variant.ai) == ("il respir", "Respiration", True)
    assert board.clusters[0].label == "Respiration"
    assert cloud == [Bubble("il respir", "Respiration", 1)]


def test_a_hidden_ideas_correction_never_reaches_the_room() -> None:
    rows = answers(["insulte"], ["bouge"])
    marks = [
        mark("insulte", status="hidden", correction="Mot masqué", source="ai"),
        mark("bouge", status="approved", merged_into="insulte"),
    ]
    _, cloud = both(rows, marks, moderation=True)
    text = json.dumps([(b.key, b.label) for b in cloud], ensure_ascii=False)
    assert "insulte" not in text
    assert "Mot masqué" not in text


def test_the_cloud_holds_at_most_sixty_bubbles_most_proposed_first() -> None:
    rows = [(f"p{i}", {"ideas": [f"idee{n}" for n in range(i % 70, 70)][:10]}) for i in range(80)]
    _, cloud = both(rows, [], moderation=False)
    assert len(cloud) == 60
    assert [b.count for b in cloud] == sorted((b.count for b in cloud), reverse=True)


def test_an_empty_key_is_skipped_everywhere() -> None:
    board, cloud = both(answers(["!!!", "’"], ["bouge"]), [], moderation=False)
    assert board.answered == 1  # the first participant holds no idea
    assert [c.key for c in board.clusters] == ["bouge"]
    assert cloud == [Bubble("bouge", "bouge", 1)]


def test_a_loop_read_from_marks_is_one_cluster_headed_by_its_smallest_key() -> None:
    # Actions never write one; two writers racing could. Every member agrees on one head.
    rows = answers(["bouge"], ["mange"], ["court"])
    marks = [mark("bouge", merged_into="mange"), mark("mange", merged_into="court")]
    marks.append(mark("court", merged_into="bouge"))
    board, cloud = both(rows, marks, moderation=False)
    assert [(c.key, c.total) for c in board.clusters] == [("bouge", 3)]
    assert cloud == [Bubble("bouge", "bouge", 3)]


# --- the public views ---------------------------------------------------------------------


def test_votes_shown_the_wall_has_the_cloud_and_the_phones_a_tally_without_pending() -> None:
    _, cloud = both(ROOM, [mark("bouge", status="approved")], moderation=True)
    settings = PollSettings(anonymous=True, moderation=True, votes=True)
    wall, phone = frames("ev1", 7, snapshot(4, 3, 3, cloud), settings, NOW)
    assert wall.tally is not None and phone.tally is not None
    assert [b.key for b in wall.tally.ideas] == ["bouge"]
    assert wall.tally.pending == 3
    assert phone.tally.pending == 0
    assert phone.tally.ideas == wall.tally.ideas
    assert json.loads(wall.model_dump_json())["evaluationId"] == "ev1"
    assert (wall.seq, phone.seq, wall.type) == (7, 7, "poll.tally")


def test_votes_hidden_the_wall_keeps_the_question_alone_and_phones_get_the_list() -> None:
    _, cloud = both(ROOM, [mark("gros mot", status="hidden")], moderation=False)
    settings = PollSettings(anonymous=False, votes=False)
    wall, phone = frames("ev1", 8, snapshot(4, 3, 0, cloud), settings, NOW)
    assert wall.tally is not None and wall.tally.ideas == []
    assert (wall.tally.joined, wall.tally.answered) == (4, 3)
    assert phone.tally is None
    assert phone.shared_list is not None
    assert [i.label for i in phone.shared_list] == ["Bouge", "le mouvement", "mange"]
    assert "count" not in json.loads(phone.model_dump_json())["sharedList"][0]
    assert "gros mot" not in wall.model_dump_json() + phone.model_dump_json()


def test_a_reconnecting_client_gets_the_latest_frame() -> None:
    assert needs_frame(None, 5)
    assert needs_frame("3", 5)
    assert needs_frame("garbage", 5)
    assert not needs_frame("5", 5)


def test_the_board_view_is_the_platforms_shape() -> None:
    board, _ = both(ROOM, [mark("gros mot", status="hidden")], moderation=True)
    view = board_view(board, True, PollAiState(available=False, on=False, error=None))
    body = json.loads(view.model_dump_json())
    assert set(body) == {"moderation", "ai", "answered", "pending", "clusters"}
    assert set(body["clusters"][0]) == {"key", "label", "renamed", "count", "total", "variants"}
    variant = body["clusters"][0]["variants"][0]
    # newSpellings is this service's addition (issue 21): the approved key's unapproved ones;
    # onWall (issue 34): what the room reads of it, null while it is not visible.
    assert set(variant) == {
        "key",
        "text",
        "correction",
        "ai",
        "count",
        "status",
        "newSpellings",
        "onWall",
    }
    by_key = {v["key"]: v for c in body["clusters"] for v in c["variants"]}
    assert by_key["gros mot"]["onWall"] is None  # hidden: the room reads nothing of it
    assert "gros mot" in view.model_dump_json()  # the board is staff-only: everything is there


# --- the switches ---------------------------------------------------------------------------


def test_moderation_defaults_on_for_an_anonymous_poll_and_off_for_a_classroom() -> None:
    assert default_settings(anonymous=True).moderation is True
    assert default_settings(anonymous=False).moderation is False
    assert default_settings(anonymous=True).ai is False


def test_switches_move_what_they_name_and_report_the_ai_transition() -> None:
    start = default_settings(anonymous=True)
    change = apply_switches(
        start, PollRevealBody(votes=True, ai=True), ai_available=True, frozen=False
    )
    assert change.settings.votes and change.settings.ai and change.settings.moderation
    assert change.ai_turned_on and not change.ai_turned_off and not change.moderation_changed
    off = apply_switches(
        change.settings, PollRevealBody(ai=False), ai_available=False, frozen=False
    )
    assert off.ai_turned_off and not off.settings.ai


@pytest.mark.parametrize(
    ("body", "available", "frozen", "code"),
    [
        (PollRevealBody(revealed=True), True, False, ErrorCode.poll_keyless),
        (PollRevealBody(ai=True), False, False, ErrorCode.llm_unavailable),
        (PollRevealBody(moderation=False), True, True, ErrorCode.poll_frozen),
        (PollRevealBody(ai=True), True, True, ErrorCode.poll_frozen),
    ],
)
def test_switches_refused(body: PollRevealBody, available: bool, frozen: bool, code: str) -> None:
    with pytest.raises(ContractError) as refused:
        apply_switches(default_settings(True), body, ai_available=available, frozen=frozen)
    assert refused.value.code == code
    assert refused.value.status in (409, 422)


def test_votes_still_move_on_a_frozen_poll() -> None:
    change = apply_switches(
        default_settings(True), PollRevealBody(votes=True), ai_available=False, frozen=True
    )
    assert change.settings.votes


# --- another spelling of an approved idea (issue 21) ------------------------------------------

RLO, STACK = "\u202e", "\u0336\u0337\u0338"


def approve(tally: Any, keys: list[str], spellings: list[str] | None = None) -> None:
    from pydantic import TypeAdapter

    from quiz_contracts.poll import PollIdeaAction
    from quiz_poll.domain.marks import apply_idea_action

    body: dict[str, Any] = {"action": "approve", "keys": keys}
    if spellings is not None:
        body["spellings"] = spellings
    change = TypeAdapter(PollIdeaAction).validate_python(body)
    tally.apply_marks(apply_idea_action(tally.marks, change, tally.spellings).marks)


def check(tally: Any, moderation: bool, rows: list[tuple[str, dict[str, list[str]]]]) -> None:
    """The tally agrees with the reference on the same answers and marks."""
    board = brainstorm_board(rows, tally.marks, moderation)
    assert tally.board() == board
    assert tally.cloud() == brainstorm_cloud(board, moderation)


def test_a_new_spelling_of_an_approved_idea_changes_nothing_the_room_reads() -> None:
    tally = tally_from_answers(answers(["vélo"]), [], moderation=True)
    approve(tally, ["velo"])
    assert tally.marks["velo"].seen == ("vélo",)
    rows = answers(
        ["vélo"],
        ["VELO 🖕"],
        ["VELO 🖕"],
        ["VELO 🖕"],
        [f"{RLO}vélo 🖕"],  # drawn "🖕 olév", right to left
        [f"v{STACK}élo"],  # reads "vélo" once the stack is dropped
    )
    for who, payload in rows[1:]:
        tally.set_answer(who, payload)
    check(tally, True, rows)
    # The room keeps reading the approved spelling; every participant of the key counts.
    assert tally.cloud() == [Bubble("velo", "vélo", 6)]
    (variant,) = tally.board().clusters[0].variants
    assert variant.text == "VELO 🖕"  # the board shows what was typed most
    assert variant.new_spellings == ("VELO 🖕", "vélo 🖕")  # as the room would read them
    # The board says what the wall reads beside them (issue 34): the approved spelling.
    view = board_view(tally.board(), True, PollAiState(available=False, on=False, error=None))
    assert view.clusters[0].variants[0].on_wall == "vélo"
    # The most typed spelling leaves the key with no approved holder: still "vélo".
    tally.set_answer("p0", {"ideas": []})
    assert tally.cloud() == [Bubble("velo", "vélo", 5)]
    # The teacher approves what the board lists: the room may then read it.
    approve(tally, ["velo"], ["VELO 🖕"])
    assert tally.marks["velo"].seen == ("vélo", "VELO 🖕")
    assert tally.cloud() == [Bubble("velo", "VELO 🖕", 5)]
    assert tally.board().clusters[0].variants[0].new_spellings == ("vélo 🖕",)
    # Without named spellings an approval covers the board's text of the key only.
    approve(tally, ["velo"])
    assert tally.board().clusters[0].variants[0].new_spellings == ("vélo 🖕",)
    # Hiding clears what was approved: approving again starts from what the board shows.
    tally.apply_marks([tally.marks["velo"].model_copy(update={"status": "hidden", "seen": ()})])
    assert tally.cloud() == []


def test_an_approval_nobody_held_shows_nothing_under_moderation() -> None:
    tally = tally_from_answers([], [], moderation=True)
    approve(tally, ["velo"])  # from a board read before its last holder left
    assert tally.marks["velo"].seen == ()
    tally.set_answer("p0", {"ideas": ["VELO 🖕"]})
    assert tally.cloud() == [] and tally.pending == 0
    assert tally.board().clusters[0].variants[0].new_spellings == ("VELO 🖕",)
    # Without moderation an approved idea is visible as typed (moderation is what holds it).
    tally.set_moderation(False)
    assert tally.cloud() == [Bubble("velo", "VELO 🖕", 1)]


def test_the_room_never_reads_a_bidirectional_control_or_a_stack_of_marks() -> None:
    rows = answers([f"{RLO}vélo"], [f"ve\u0301{STACK}lo"], [f"{RLO}vélo"], ["हैं"])
    board, cloud = both(rows, [mark("velo", label=f"{RLO}Vélo")], moderation=False)
    assert board.clusters[0].variants[0].text == f"{RLO}vélo"  # the board: as typed
    assert [b.label for b in cloud] == ["Vélo", "हैं"]  # two marks on a letter are writing
    _, cloud = both(rows, [], moderation=False)
    assert cloud[0].label == "vélo"
    assert all(RLO not in b.label and "\u0336" not in b.label for b in cloud)

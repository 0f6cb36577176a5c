"""Which of a participant's ideas wait for the teacher (issue 22, `waiting_ideas`).

The participant page says "waiting for approval" under exactly these: moderation on, the idea
neither hidden nor visible (no decision yet, or approved with no approved spelling).
"""

from __future__ import annotations

from quiz_contracts.poll import IdeaMark
from quiz_poll.domain.marks import hidden_ideas, waiting_ideas

IDEAS = ["La respiration", "l'eau", "Lucas est idiot", "soleil", "vélo"]
MARKS = {
    "respiration": IdeaMark(key="respiration", status="approved", seen=["La respiration"]),
    "lucas est idiot": IdeaMark(key="lucas est idiot", status="hidden"),
    # Approved before anyone held it: no approved spelling, still off the wall.
    "velo": IdeaMark(key="velo", status="approved"),
    "soleil": IdeaMark(key="soleil"),  # a mark with no status: undecided
}


def test_under_moderation_the_undecided_and_unspelled_ideas_wait() -> None:
    assert waiting_ideas(IDEAS, MARKS, moderation=True) == ["l'eau", "soleil", "vélo"]


def test_with_moderation_off_nothing_waits() -> None:
    assert waiting_ideas(IDEAS, MARKS, moderation=False) == []


def test_the_key_is_the_ideas_own_normalised_text() -> None:
    # "LA RESPIRATION !" folds to the approved key "respiration": it does not wait.
    assert waiting_ideas(["LA RESPIRATION !"], MARKS, moderation=True) == []


def test_an_idea_with_no_key_does_not_wait() -> None:
    # Only emoji: folded to an empty key, which no board lists, so no approval will come.
    assert waiting_ideas(["🙂🙂", "soleil"], MARKS, moderation=True) == ["soleil"]


# --- which of them the teacher or the model hid (issue 34, `hidden_ideas`) --------------------


def test_the_hidden_ideas_are_listed_whatever_the_moderation() -> None:
    for moderation in (True, False):
        assert hidden_ideas(IDEAS, MARKS) == ["Lucas est idiot"], moderation
        assert set(hidden_ideas(IDEAS, MARKS)).isdisjoint(waiting_ideas(IDEAS, MARKS, moderation))


def test_a_hidden_idea_is_found_by_its_key_and_an_empty_key_never_is() -> None:
    assert hidden_ideas(["LUCAS est IDIOT !", "🙂", "soleil"], MARKS) == ["LUCAS est IDIOT !"]

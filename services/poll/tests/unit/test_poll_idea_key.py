"""idea_key (ADR-071 §2, FACTS D): a table of French and English cases, and the answer's ideas.

The platform's own cases (heig-quiz `packages/domain/src/brainstorm.test.ts`: a leading article
and punctuation folded, an article alone kept, no edit distance, punctuation alone empty) are
restated here with other words; the rest are ours.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_poll.domain.ideas import check_answer, idea_key, ideas_of, keyed_ideas

CASES = [
    # French: case, accents, punctuation, spacing, leading articles.
    ("La Photosynthèse", "photosynthese"),
    ("  la   PHOTOSYNTHÈSE !! ", "photosynthese"),
    ("Les cellules...", "cellules"),
    ("des racines", "racines"),
    ("du soleil", "soleil"),
    ("un arbre", "arbre"),
    ("une fleur", "fleur"),
    ("Ça grandit", "ca grandit"),
    ("qu'il respire", "qu il respire"),
    # Elision, with the straight and the typographic apostrophe alike.
    ("l'énergie solaire", "energie solaire"),
    ("l’énergie solaire", "energie solaire"),
    ("L'OXYGÈNE", "oxygene"),
    ("d'abord", "abord"),
    ("d’abord", "abord"),
    ("de l'eau", "eau"),
    ("de l’eau", "eau"),
    ("aujourd'hui", "aujourd hui"),
    ("aujourd’hui", "aujourd hui"),
    # An idea that is only an article keeps it (FACTS D: "Le" gives "le", "l'" gives "l").
    ("Le", "le"),
    ("l'", "l"),
    ("l’", "l"),
    ("de la", "la"),
    ("The", "the"),
    ("the the", "the"),
    # English.
    ("The heart-beat", "heart beat"),
    ("an apple", "apple"),
    ("A cat's tail", "cat s tail"),
    ("Photosynthesis!!!", "photosynthesis"),
    ("e-mail", "e mail"),
    # Compatibility forms and numbers (NFKD).
    ("ﬁlet de pêche", "filet de peche"),
    ("CO₂", "co2"),
    ("3,14", "3 14"),
    ("Œuf", "œuf"),
    ("ΟΔΟΣ", "οδος"),
    ("İstanbul", "istanbul"),
    # Nothing but punctuation: the empty key, skipped everywhere.
    ("!!!", ""),
    ("' ’", ""),
    ("", ""),
    # The platform's quirk, kept (see ideas.py): "à" and "là" fold to the articles "a" and "la".
    ("à vélo", "velo"),
    ("là-bas", "bas"),
]


@pytest.mark.parametrize(("raw", "key"), CASES)
def test_idea_key_table(raw: str, key: str) -> None:
    assert idea_key(raw) == key


def test_no_edit_distance() -> None:
    assert idea_key("vit") != idea_key("vie")
    assert idea_key("respire") != idea_key("respiration")
    assert idea_key("cellule") != idea_key("cellules")


@given(st.text(max_size=40))
def test_a_key_is_its_own_key(raw: str) -> None:
    key = idea_key(raw)
    assert idea_key(key) == key
    assert key == key.strip()
    assert "  " not in key


def test_ideas_of_reads_a_payload_defensively() -> None:
    # After heig-quiz `ideasOf`: blanks and non-strings dropped, spaces collapsed.
    assert ideas_of({"ideas": ["  bouge  vite ", "", 7, None, "mange"]}) == ["bouge vite", "mange"]
    assert ideas_of({"text": "x"}) == []
    assert ideas_of(None) == []
    assert ideas_of({"ideas": "bouge"}) == []


def test_keyed_ideas_count_a_participant_once_per_key_and_skip_empty_keys() -> None:
    held = keyed_ideas(["Bouge", "!!!", "bouge !", "le mouvement"])
    assert held == {"bouge": (0, "Bouge"), "mouvement": (3, "le mouvement")}


def test_check_answer_refuses_more_ideas_than_the_question_allows() -> None:
    check_answer(["a", "b"], 2)
    with pytest.raises(ContractError) as refused:
        check_answer(["a", "b", "c"], 2)
    assert refused.value.code == ErrorCode.answer_invalid
    assert refused.value.status == 422

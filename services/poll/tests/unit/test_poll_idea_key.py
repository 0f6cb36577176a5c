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
    # Lookalikes outside ASCII take their TR39 prototype (issue 29, item 8): "œ" is "oe", so
    # "Œuf" and "oeuf" are one idea; Greek letters that look Latin are Latin.
    ("Œuf", "oeuf"),
    ("ΟΔΟΣ", "oẟoς"),
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


# --- disguises (issue 29, item 8) --------------------------------------------------------------

DISGUISED = [
    ("idi\u200bot", "idiot"),  # zero-width space
    ("i\u200cd\u200diot", "idiot"),  # zero-width non-joiner and joiner
    ("idiot\u3164", "idiot"),  # Hangul filler
    ("\uffa0idiot", "idiot"),  # halfwidth Hangul filler
    ("id\u115fi\u1160ot", "idiot"),  # Hangul choseong and jungseong fillers
    ("idi\u00adot", "idiot"),  # soft hyphen
    ("\u2060idiot\ufeff", "idiot"),  # word joiner, byte order mark
    ("\u202eidiot\u202c", "idiot"),  # bidi override and pop
    ("idio\ufe0ft", "idiot"),  # variation selector
    ("\u0456di\u043et", "idiot"),  # Cyrillic і and о
    ("\u0406DIOT", "idiot"),  # Cyrillic capital І
    ("idi\u03bft", "idiot"),  # Greek omicron
    ("\u0440\u0430ris", "paris"),  # Cyrillic р and а
    ("\u03c1aris", "paris"),  # Greek rho
    ("l\u2019\u0435\u0430u", "eau"),  # an article still drops, before Cyrillic е and а
    ("ｉｄｉｏｔ", "idiot"),  # fullwidth (NFKD already)
]


@pytest.mark.parametrize(("raw", "key"), DISGUISED)
def test_disguises_fold_to_the_plain_key(raw: str, key: str) -> None:
    assert idea_key(raw) == key


def platform_key(raw: str) -> str:
    """heig-quiz `ideaKey` as FACTS D writes it, steps 1-6 and nothing more."""
    import unicodedata

    import regex

    text = regex.sub(r"\p{M}", "", unicodedata.normalize("NFKD", raw)).lower()
    words = regex.sub(r"[^\p{L}\p{N}]+", " ", text).split()
    while len(words) > 1 and words[0] in {
        "le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "the", "a", "an",
    }:  # fmt: skip
        words.pop(0)
    return " ".join(words)


# What the platform's keys are made of: ASCII and the accented Latin of French and English.
LATIN = st.text(
    alphabet=st.sampled_from(list("abcdefghijklmnopqrstuvwxyzABCXYZ019 '’-.!,éèêàâçôùûüïÉÀÇ")),
    max_size=30,
)


@given(LATIN)
def test_the_platform_keys_latin_text_as_before(raw: str) -> None:
    assert idea_key(raw) == platform_key(raw)


INVISIBLE = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u3164"])


@given(st.from_regex(r"[a-z]{1,12}( [a-z]{1,12}){0,2}", fullmatch=True), st.data())
def test_invisible_characters_anywhere_change_nothing(raw: str, data: st.DataObject) -> None:
    spots = data.draw(st.lists(st.integers(0, len(raw)), max_size=4))
    disguised = raw
    for spot in sorted(spots, reverse=True):
        disguised = disguised[:spot] + data.draw(INVISIBLE) + disguised[spot:]
    assert idea_key(disguised) == idea_key(raw)


LOOKALIKES = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441"}


@given(st.from_regex(r"[aeopcxyz]{1,12}", fullmatch=True), st.data())
def test_cyrillic_lookalikes_change_nothing(raw: str, data: st.DataObject) -> None:
    swaps = data.draw(st.lists(st.booleans(), min_size=len(raw), max_size=len(raw)))
    disguised = "".join(
        LOOKALIKES.get(ch, ch) if swap else ch for ch, swap in zip(raw, swaps, strict=True)
    )
    assert idea_key(disguised) == idea_key(raw)


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=20))
def test_any_text_keys_to_its_own_key(raw: str) -> None:
    key = idea_key(raw)
    assert idea_key(key) == key

"""Every check code: a lesson that fires it, one that does not, and the known false positives.

Cases follow the lesson tool's own suite (apps/mcp/test/validate.test.js and
packages/core/src/lessonChecks.test.js of Spelling-Creator/spelling-creator): a clean lesson
gives nothing, and each test breaks it one rule at a time. Lesson and wording are ours.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from quiz_lesson_fix.domain.checks import CHECK_CODES, new_findings, validate_lesson

from .conftest import (
    append_text,
    block,
    check,
    codes,
    question,
    set_markup,
    standard_lesson,
)

Doc = dict[str, Any]


def answers(*texts: str) -> list[dict[str, str]]:
    return [{"id": f"n{i}", "text": t} for i, t in enumerate(texts)]


def insert_question(doc: Doc, section: int, kind: str, prompt: str, **fields: Any) -> None:
    """A question placed after the tight opens (three blocks from the end)."""
    doc["sections"][section]["blocks"].insert(
        -3, {"id": "extra", "type": "question", "questionType": kind, "prompt": prompt, **fields}
    )


def make_loose(doc: Doc, section: int, prompt: str, suggestions: list[str]) -> None:
    """The section's second orange question becomes the loose kind."""
    q = question(doc, section, 6)
    q["questionType"] = "multiple_open"
    q["prompt"] = prompt
    q["answers"] = answers(*suggestions)


BEES_FIRST = block(standard_lesson(), "s1t1")["text"]


# ---- one mutation per code ------------------------------------------------------------------

FIRES: list[tuple[str, Callable[[Doc], None]]] = [
    ("E_GROUNDING_SINGLE", lambda d: question(d, 0, 0).update(answer="honey")),
    (
        "E_GROUNDING_MULTIPLE",
        lambda d: question(d, 0, 5).update(answers=answers("moving with the seasons", "pollen")),
    ),
    (
        "E_ORANGE_PARAPHRASED",
        lambda d: question(d, 0, 5).update(answers=answers("sugar", "pollen", "water")),
    ),
    (
        "E_ORANGE_ANSWER_IN_PROMPT",
        lambda d: question(d, 0, 5).update(
            prompt="They bring back nectar, pollen, and water ______."
        ),
    ),
    (
        "E_ORANGE_NOT_A_LIST",
        lambda d: (
            append_text(d, "s3t2", " Past the moraine lies the Arctic Ocean."),
            question(d, 2, 5).update(answers=answers("arctic", "ocean")),
        ),
    ),
    (
        "E_ORANGE_PARTIAL_LIST",
        lambda d: question(d, 0, 5).update(answers=answers("nectar", "pollen")),
    ),
    ("E_GROUNDING_NUMBER_FILL", lambda d: question(d, 0, 3).update(answer="41")),
    ("E_BACKGROUND_IN_TEXT", lambda d: question(d, 0, 7).update(answer="clover")),
    (
        "E_ANSWER_REVEALED_CROSS",
        lambda d: question(d, 0, 3).update(prompt="How far may a worker carrying wax travel?"),
    ),
    (
        "W_ANSWER_REVEALED_OPEN",
        lambda d: question(d, 0, 12).update(
            prompt="In your own words, explain what the queen does."
        ),
    ),
    (
        "E_RETIRED_STEM",
        lambda d: question(d, 0, 8).update(prompt="Give a word that comes to mind about bees."),
    ),
    ("E_SPELLING_LENGTH", lambda d: block(d, "s1sp")["words"][0].update(text="bee")),
    ("E_SPELLING_DUPLICATE", lambda d: block(d, "s4sp")["words"][0].update(text="swarming")),
    (
        "E_SPELLING_COLLISION",
        lambda d: (
            append_text(d, "s1t1", " They also visit the orchards."),
            question(d, 0, 0).update(answer="orchards"),
        ),
    ),
    (
        "E_ANSWER_WORD_REUSED",
        lambda d: (
            append_text(d, "s6t2", " Water drips everywhere."),
            question(d, 5, 0).update(answer="water"),
        ),
    ),
    ("E_NUMBER_DUPLICATE", lambda d: question(d, 2, 4).update(answer="60")),
    (
        "E_FORMAT_HEAVY",
        lambda d: set_markup(
            d,
            "s1t1",
            "A *honeybee* *colony* lives in a *HIVE* built from *wax*. The workers bring "
            "back nectar, pollen, and water, and each load is stored in its own cell.",
        ),
    ),
    (
        "E_FORMAT_LONG_EMPHASIS",
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("each load is stored in", "**each load is stored in**")
        ),
    ),
    (
        "E_FORMAT_LONG_ITALIC",
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("The workers", "*The workers").replace("cell.", "cell.*")
        ),
    ),
    ("E_UNKNOWN_SOURCE", lambda d: set_markup(d, "s1t1", BEES_FIRST + "^[@nobody, p. 3]")),
    (
        "W_ORANGE_MULTIWORD",
        lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["full of sugar"]),
    ),
    ("W_ORANGE_ANSWER_COUNT", lambda d: question(d, 0, 5).update(answers=answers("nectar"))),
    ("W_ORANGE_NO_BLANK", lambda d: question(d, 0, 5).update(prompt="Name one.")),
    (
        "W_ORANGE_ORDER",
        lambda d: (
            make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"]),
            d["sections"][0]["blocks"].insert(8, d["sections"][0]["blocks"].pop(9)),
        ),
    ),
    ("W_WYR_SHAPE", lambda d: insert_question(d, 0, "wyr", "Which season do you like best?")),
    ("W_QUESTION_SHAPE", lambda d: question(d, 0, 0).update(questionType="open", answer=None)),
    (
        "W_NO_QUESTION",
        lambda d: d["sections"][0].update(
            blocks=[b for b in d["sections"][0]["blocks"] if b["type"] != "question"]
        ),
    ),
    (
        "W_OPEN_SPLIT",
        lambda d: question(d, 0, 8).update(
            prompt="In your own words, explain how a colony grows over many years."
        ),
    ),
    ("W_NUMBER_NO_STEPS", lambda d: question(d, 0, 4).update(steps=[])),
    ("W_SPELLING_COUNT", lambda d: block(d, "s1sp")["words"].pop()),
    (
        "W_SPELLING_IN_CAPS",
        lambda d: block(d, "s1t1").update(text=BEES_FIRST.replace("HIVE", "BLOSSOM")),
    ),
    (
        "W_VAKT_NOT_LAST",
        lambda d: d["sections"][0]["blocks"].insert(
            2, {"id": "v1", "type": "vakt", "text": "Buzz like a bee for ten seconds.", "links": []}
        ),
    ),
    ("W_FORMAT_BOLD", lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("cell", "**cell**"))),
    (
        "W_FORMAT_UNDERLINE",
        lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("cell", "<u>cell</u>")),
    ),
    ("W_FORMAT_CAPS", lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("HIVE", "*HIVE*"))),
    ("W_SECTION_COUNT", lambda d: d.update(sections=d["sections"][:3])),
]


# A near miss per code: close to the defect, but not it (the clean lesson is the first).
NEAR_MISSES: list[tuple[str, Callable[[Doc], None]]] = [
    ("E_GROUNDING_SINGLE", lambda d: question(d, 0, 0).update(answer="cell")),
    (
        "E_GROUNDING_MULTIPLE",
        lambda d: (
            append_text(d, "s1t2", " They like sweet clover, heather and lavender."),
            question(d, 0, 6).update(answers=answers("sweet clover", "heather", "lavender")),
        ),
    ),
    (
        "E_ORANGE_PARAPHRASED",
        lambda d: question(d, 0, 5).update(answers=answers("Nectar", "POLLEN", "water")),
    ),
    (
        "E_ORANGE_ANSWER_IN_PROMPT",
        lambda d: question(d, 0, 5).update(
            prompt="They bring back ______, like nectarines. Name one."
        ),
    ),
    (
        "E_ORANGE_NOT_A_LIST",
        lambda d: (
            append_text(d, "s3t2", " The wind brings dust and grit."),
            question(d, 2, 5).update(answers=answers("dust", "grit")),
        ),
    ),
    (
        "E_ORANGE_PARTIAL_LIST",
        lambda d: (
            append_text(d, "s3t2", " The wind carries dust and grit and never lets up."),
            question(d, 2, 5).update(answers=answers("dust", "grit")),
        ),
    ),
    ("E_GROUNDING_NUMBER_FILL", lambda d: question(d, 1, 3).update(answer="1,991")),
    ("E_BACKGROUND_IN_TEXT", lambda d: question(d, 0, 7).update(answer="honeycomb")),
    (
        "E_ANSWER_REVEALED_CROSS",
        lambda d: question(d, 0, 3).update(
            prompt="How far may this insect fly to find waxy flowers?"
        ),
    ),
    (
        "W_ANSWER_REVEALED_OPEN",
        lambda d: question(d, 0, 12).update(
            prompt="In your own words, explain what the queens of old did."
        ),
    ),
    ("E_RETIRED_STEM", lambda d: question(d, 0, 8).update(prompt="Name a word.")),
    ("E_SPELLING_LENGTH", lambda d: block(d, "s1sp")["words"][0].update(text="half-moon")),
    ("E_SPELLING_DUPLICATE", lambda d: block(d, "s4sp")["words"][0].update(text="swarmings")),
    ("E_SPELLING_COLLISION", lambda d: make_loose(d, 0, "Where do bees go?", ["orchards"])),
    (
        "E_ANSWER_WORD_REUSED",
        lambda d: (
            append_text(d, "s6t2", " There is a dry cave and a wet cave."),
            question(d, 5, 0).update(answer="a dry cave"),
            question(d, 5, 1).update(answer="a wet cave"),
        ),
    ),
    ("E_NUMBER_DUPLICATE", lambda d: question(d, 2, 4).update(answer="600")),
    (
        "E_FORMAT_HEAVY",
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("wax", "*wax*").replace("cell", "*cell*")
        ),
    ),
    (
        "E_FORMAT_LONG_EMPHASIS",
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("each load is stored", "**each load is stored**")
        ),
    ),
    (
        "E_FORMAT_LONG_ITALIC",
        lambda d: set_markup(
            d,
            "s1t1",
            BEES_FIRST.replace(
                "The workers bring back nectar, pollen, and water,",
                "*The workers bring back nectar, pollen, and water,*",
            ),
        ),
    ),
    ("E_UNKNOWN_SOURCE", lambda d: set_markup(d, "s1t1", BEES_FIRST + "^[@atlas, p. 3]")),
    (
        "W_ORANGE_MULTIWORD",
        lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"]),
    ),
    (
        "W_ORANGE_ANSWER_COUNT",
        lambda d: (
            append_text(d, "s1t2", " Bees also carry dust and grit."),
            question(d, 0, 6).update(answers=answers("dust", "grit")),
        ),
    ),
    ("W_ORANGE_NO_BLANK", lambda d: question(d, 0, 5).update(prompt="They carry ___.")),
    ("W_ORANGE_ORDER", lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"])),
    (
        "W_WYR_SHAPE",
        lambda d: insert_question(d, 0, "wyr", "Would you rather leave sooner or later, or never?"),
    ),
    ("W_QUESTION_SHAPE", lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"])),
    ("W_NO_QUESTION", lambda d: d["sections"][0].update(blocks=d["sections"][0]["blocks"][:4])),
    ("W_OPEN_SPLIT", lambda d: insert_question(d, 0, "open", "In your own words, explain why.")),
    ("W_NUMBER_NO_STEPS", lambda d: d["sections"][0]["blocks"].remove(question(d, 0, 4))),
    (
        "W_SPELLING_COUNT",
        lambda d: (
            block(d, "s1sp")["words"].pop(),
            d["sections"][0]["blocks"].insert(
                3, {"id": "sp2", "type": "spelling", "words": [{"id": "x", "text": "honeycomb"}]}
            ),
        ),
    ),
    ("W_SPELLING_IN_CAPS", lambda d: append_text(d, "s1t1", " Bees love an orchard.")),
    (
        "W_VAKT_NOT_LAST",
        lambda d: d["sections"][0]["blocks"].extend(
            [
                {"id": "v1", "type": "vakt", "text": "Buzz.", "links": []},
                {"id": "v2", "type": "vakt", "text": "Fly.", "links": []},
            ]
        ),
    ),
    ("W_FORMAT_BOLD", lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("cell", "*cell*"))),
    ("W_FORMAT_UNDERLINE", lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("cell", "**cell**"))),
    ("W_FORMAT_CAPS", lambda d: set_markup(d, "s1t1", BEES_FIRST.replace("cell", "*Cella*"))),
    ("W_SECTION_COUNT", lambda d: None),
]


def test_every_code_has_a_near_miss() -> None:
    assert {code for code, _ in NEAR_MISSES} == set(CHECK_CODES)


@pytest.mark.parametrize(("code", "mutate"), NEAR_MISSES, ids=[c for c, _ in NEAR_MISSES])
def test_a_near_miss_does_not_fire(code: str, mutate: Callable[[Doc], None]) -> None:
    assert code not in codes(check(mutate).findings)


def test_a_lesson_written_to_the_standard_gives_nothing() -> None:
    result = check()
    assert [f.message for f in result.errors] == []
    assert [f.message for f in result.warnings] == []


def test_every_code_of_the_checker_has_a_case() -> None:
    assert {code for code, _ in FIRES} == set(CHECK_CODES)


@pytest.mark.parametrize(("code", "mutate"), FIRES, ids=[code for code, _ in FIRES])
def test_each_code_fires_with_its_level_key_and_section(
    code: str, mutate: Callable[[Doc], None]
) -> None:
    result = check(mutate)
    found = [f for f in result.findings if f.code == code]
    assert found, codes(result.findings)
    finding = found[0]
    assert finding.level == CHECK_CODES[code].level
    assert finding.key.startswith(f"{code}:")
    if code == "W_SECTION_COUNT":
        assert (finding.section, finding.sectionId) == (None, None)
    else:
        assert finding.sectionId == f"s{finding.section}"
        assert f"ection {finding.section}" in finding.message  # the message names the section


# ---- grounding ------------------------------------------------------------------------------


def test_a_green_answer_not_in_its_passage_is_an_error_naming_section_and_answer() -> None:
    result = check(lambda d: question(d, 0, 0).update(answer="honey"))
    assert codes(result.errors) == ["E_GROUNDING_SINGLE"]
    finding = result.errors[0]
    assert finding.key == "E_GROUNDING_SINGLE:s1q1:HONEY"
    assert (finding.section, finding.sectionId, finding.blockId) == (1, "s1", "s1q1")
    assert finding.params == {"question": 1, "answer": "honey"}
    assert 'Section 1 "Bees"' in finding.message and '"honey"' in finding.message


def test_grounding_is_whole_word_and_per_section() -> None:
    # "an" is inside "and" but never a word of the passage.
    assert codes(check(lambda d: question(d, 0, 0).update(answer="an")).errors) == [
        "E_GROUNDING_SINGLE"
    ]
    # "arch" is section 2's word and answer: ungrounded here, and reused.
    assert codes(check(lambda d: question(d, 0, 0).update(answer="arch")).errors) == [
        "E_GROUNDING_SINGLE",
        "E_ANSWER_WORD_REUSED",
    ]


def test_formatting_and_footnotes_do_not_cost_an_answer_its_match() -> None:
    result = check(
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("built from wax", "built from *wax*^[Measured in 2020.]")
        )
    )
    assert codes(result.errors) == []
    assert codes(result.warnings) == []


def test_thousands_separators_and_decimals_ground_numbers() -> None:
    assert codes(check().errors) == []  # 1991 and 2212 are written 1,991 and 2,212
    result = check(
        lambda d: (
            block(d, "s1t2").update(
                text=block(d, "s1t2")["text"].replace("5 kilometres", "5.5 kilometres")
            ),
            question(d, 0, 3).update(answer="5.5"),
        )
    )
    assert codes(result.errors) == []


def test_a_word_problem_is_not_held_to_the_passage() -> None:
    assert codes(check(lambda d: question(d, 0, 4).update(answer="41")).errors) == []
    result = check(lambda d: question(d, 0, 3).update(answer="41"))
    assert result.errors[0].message.startswith('Section 1 "Bees", question 4: the answer 41')


def test_a_background_answer_must_stay_out_of_the_passage() -> None:
    result = check(lambda d: question(d, 0, 7).update(answer="clover"))
    assert codes(result.errors) == ["E_BACKGROUND_IN_TEXT"]
    assert "outside the lesson" in result.errors[0].message


# ---- orange ---------------------------------------------------------------------------------


def test_a_paraphrased_orange_answer_points_at_its_item() -> None:
    result = check(lambda d: question(d, 0, 5).update(answers=answers("sugar", "pollen", "water")))
    assert codes(result.errors) == ["E_ORANGE_PARAPHRASED"]
    assert result.errors[0].itemId == "n0"
    assert "multiple_open" in result.errors[0].message


def test_a_multi_word_orange_answer_warns_and_errors_separately() -> None:
    result = check(
        lambda d: question(d, 0, 5).update(answers=answers("moving with the seasons", "pollen"))
    )
    assert codes(result.errors) == ["E_GROUNDING_MULTIPLE"]
    assert codes(result.warnings) == ["W_ORANGE_MULTIWORD"]


def test_an_orange_prompt_holding_its_answers() -> None:
    result = check(
        lambda d: question(d, 0, 5).update(
            prompt="They bring back nectar, pollen, and water. Name one."
        )
    )
    assert codes(result.errors) == ["E_ORANGE_ANSWER_IN_PROMPT"]
    assert result.errors[0].key == "E_ORANGE_ANSWER_IN_PROMPT:s1q6:NECTAR|POLLEN|WATER"
    assert '"nectar", "pollen", "water"' in result.errors[0].message
    assert codes(result.warnings) == ["W_ORANGE_NO_BLANK"]


def test_words_of_one_phrase_are_not_a_list() -> None:
    result = check(
        lambda d: (
            append_text(d, "s3t2", " Past the moraine lies the Arctic Ocean."),
            question(d, 2, 5).update(answers=answers("arctic", "ocean")),
        )
    )
    assert codes(result.errors) == ["E_ORANGE_NOT_A_LIST"]
    assert result.errors[0].key == "E_ORANGE_NOT_A_LIST:s3q6:ARCTIC|OCEAN"


def test_list_items_must_be_near_each_other() -> None:
    far = check(
        lambda d: (
            append_text(
                d, "s3t2", " Guides use a scale called the HEI, the Hazard Estimate Index."
            ),
            question(d, 2, 5).update(answers=answers("scale", "index")),
        )
    )
    assert codes(far.errors) == ["E_ORANGE_NOT_A_LIST"]
    pair = check(
        lambda d: (
            append_text(d, "s3t2", " The wind brings dust and grit."),
            question(d, 2, 5).update(answers=answers("dust", "grit")),
        )
    )
    assert codes(pair.errors) == []


def test_a_partial_list_names_the_missing_item_as_written() -> None:
    result = check(lambda d: question(d, 0, 5).update(answers=answers("nectar", "pollen")))
    assert codes(result.errors) == ["E_ORANGE_PARTIAL_LIST"]
    assert result.errors[0].params["next"] == "water"
    assert result.errors[0].blockId == "s1q6"
    no_oxford_comma = check(
        lambda d: (
            block(d, "s1t1").update(
                text=BEES_FIRST.replace("pollen, and water", "pollen and water")
            ),
            question(d, 0, 5).update(answers=answers("nectar", "pollen")),
        )
    )
    assert codes(no_oxford_comma.errors) == ["E_ORANGE_PARTIAL_LIST"]


def test_lists_joined_by_and_or_or_are_lists() -> None:
    # "cats and dogs and rabbits": the series must end where the answers do.
    partial = check(
        lambda d: (
            append_text(d, "s1t2", " The garden held cats and dogs and rabbits."),
            question(d, 0, 5).update(answers=answers("cats", "dogs")),
        )
    )
    assert codes(partial.errors) == ["E_ORANGE_PARTIAL_LIST"]
    assert partial.errors[0].params["next"] == "rabbits"
    whole = check(
        lambda d: (
            append_text(d, "s1t2", " The garden held cats and dogs and rabbits."),
            question(d, 0, 5).update(answers=answers("cats", "dogs", "rabbits")),
        )
    )
    assert codes(whole.errors) == []
    # "first, second, or standard class" is the Trains fixture's list: clean.
    assert "E_ORANGE_NOT_A_LIST" not in codes(check().errors)
    either = check(
        lambda d: (
            append_text(d, "s1t2", " Bees sting or buzz."),
            question(d, 0, 5).update(answers=answers("sting", "buzz")),
        )
    )
    assert codes(either.errors) == []


def test_a_clause_after_a_finished_list_is_not_an_item() -> None:
    # The fixture's "nectar, pollen, and water, and each load is stored…" is already one.
    assert codes(check().errors) == []
    after_pair = check(
        lambda d: (
            append_text(d, "s3t2", " The wind carries dust and grit and never lets up."),
            question(d, 2, 5).update(answers=answers("dust", "grit")),
        )
    )
    assert codes(after_pair.errors) == []


def test_a_list_without_conjunction_or_with_a_trailing_clause_is_complete() -> None:
    for written in ("boulders, gravel, clay", "boulders, gravel, clay, all of it moving"):
        result = check(
            lambda d, w=written: block(d, "s3t1").update(
                text=block(d, "s3t1")["text"].replace("boulders, gravel, and clay", w)
            )
        )
        assert codes(result.errors) == [], written


def test_an_answer_listed_twice_skips_the_list_check_and_is_no_reuse() -> None:
    result = check(lambda d: question(d, 5, 5).update(answers=answers("bats", "bats", "beetles")))
    assert codes(result.errors) == []


def test_orange_answer_count_and_blank_warn_without_blocking() -> None:
    one = check(lambda d: question(d, 0, 5).update(answers=answers("nectar")))
    assert (codes(one.errors), codes(one.warnings)) == ([], ["W_ORANGE_ANSWER_COUNT"])
    assert one.warnings[0].params == {"question": 6, "count": 1, "open": False, "min": 2, "max": 4}
    bare = check(lambda d: question(d, 0, 5).update(prompt="Name one."))
    assert (codes(bare.errors), codes(bare.warnings)) == ([], ["W_ORANGE_NO_BLANK"])


def test_a_loose_orange_question_is_held_to_none_of_the_tight_rules() -> None:
    result = check(
        lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["sugary", "honeyed", "sweet"])
    )
    assert (codes(result.errors), codes(result.warnings)) == ([], [])
    # Its suggestions may repeat an answer ("wax") or a spelling word ("orchard").
    repeats = check(lambda d: make_loose(d, 0, "Name something bees make.", ["wax", "orchard"]))
    assert (codes(repeats.errors), codes(repeats.warnings)) == ([], [])


def test_a_loose_orange_question_still_needs_a_suggestion_and_single_words() -> None:
    def empty(d: Doc) -> None:
        make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"])
        question(d, 0, 6)["answers"] = []

    result = check(empty)
    assert (codes(result.errors), codes(result.warnings)) == ([], ["W_ORANGE_ANSWER_COUNT"])
    assert result.warnings[0].params["open"] is True
    multi = check(lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["full of sugar"]))
    assert (codes(multi.errors), codes(multi.warnings)) == ([], ["W_ORANGE_MULTIWORD"])


def test_orange_order_only_for_a_real_inversion() -> None:
    tight_first = check(lambda d: make_loose(d, 0, "Give another word for 'sweet'.", ["sugary"]))
    assert codes(tight_first.warnings) == []
    inverted = check(FIRES[[c for c, _ in FIRES].index("W_ORANGE_ORDER")][1])
    assert (codes(inverted.errors), codes(inverted.warnings)) == ([], ["W_ORANGE_ORDER"])
    assert inverted.warnings[0].blockId == "s1q7"


# ---- prompts --------------------------------------------------------------------------------


def test_a_prompt_naming_another_questions_answer() -> None:
    result = check(
        lambda d: question(d, 0, 3).update(prompt="How far may a worker carrying wax travel?")
    )
    assert codes(result.errors) == ["E_ANSWER_REVEALED_CROSS"]
    finding = result.errors[0]
    assert '"wax" (the answer to question 1)' in finding.message
    assert finding.params["leaks"] == [{"answer": "wax", "question": 1}]
    assert finding.key == "E_ANSWER_REVEALED_CROSS:s1q4:WAX"


def test_open_wyr_and_loose_prompts_only_warn() -> None:
    pink = check(
        lambda d: question(d, 0, 12).update(
            prompt="In your own words, explain what the queen does."
        )
    )
    assert (codes(pink.errors), codes(pink.warnings)) == ([], ["W_ANSWER_REVEALED_OPEN"])
    grape = check(
        lambda d: insert_question(d, 0, "wyr", "Would you rather be the queen or a forager?")
    )
    assert codes(grape.errors) == []
    assert "W_ANSWER_REVEALED_OPEN" in codes(grape.warnings)
    loose = check(lambda d: make_loose(d, 0, "Give another word for wax.", ["polish"]))
    assert (codes(loose.errors), codes(loose.warnings)) == ([], ["W_ANSWER_REVEALED_OPEN"])
    assert "multiple_open" in loose.warnings[0].message


def test_a_prompt_may_name_background_and_number_topics() -> None:
    result = check(lambda d: question(d, 0, 0).update(prompt="What is this insect's cell made of?"))
    assert (codes(result.errors), codes(result.warnings)) == ([], [])


def test_the_retired_stem() -> None:
    for prompt in (
        "Give a word that comes to mind about bees.",
        "Name two words that come to mind.",
    ):
        result = check(lambda d, p=prompt: question(d, 0, 8).update(prompt=p))
        assert "E_RETIRED_STEM" in codes(result.errors), prompt
    assert codes(check(lambda d: question(d, 0, 8).update(prompt="Name a word.")).errors) == []


def test_wyr_shape_and_its_idioms() -> None:
    def wyr(prompt: str) -> list[str]:
        return codes(check(lambda d: insert_question(d, 0, "wyr", prompt)).warnings)

    assert "W_WYR_SHAPE" in wyr("Which season do you like best?")
    chained = check(
        lambda d: insert_question(d, 0, "wyr", "Would you rather take a train or a bus or a bike?")
    )
    shape = [f for f in chained.warnings if f.code == "W_WYR_SHAPE"]
    assert shape[0].params["ors"] == 2 and 'chains 2 "or"s' in shape[0].message
    for prompt in (
        "Would you rather visit Paris, Rome, or Lisbon?",
        "Would you rather wait an hour or so, or leave right now?",
        "Would you rather leave sooner or later, or never?",
        "Would you rather eat more or less, or the same?",
        "Would you rather swim whether or not it rains, or stay in?",
    ):
        assert "W_WYR_SHAPE" not in wyr(prompt), prompt
    assert wyr("Would you rather ride a train or sail a boat?") == ["W_QUESTION_SHAPE"]


# ---- section shape --------------------------------------------------------------------------


def test_shape_warnings() -> None:
    shape = check(lambda d: question(d, 0, 0).update(questionType="open", answer=None))
    assert codes(shape.warnings) == ["W_QUESTION_SHAPE"]
    assert shape.warnings[0].params == {"count": 15}
    no_steps = check(lambda d: question(d, 0, 4).update(steps=[]))
    assert codes(no_steps.warnings) == ["W_NUMBER_NO_STEPS"]
    assert no_steps.warnings[0].blockId == "s1q5"
    split = check(
        lambda d: question(d, 0, 8).update(
            prompt="In your own words, explain how a colony grows over many years."
        )
    )
    assert (codes(split.errors), codes(split.warnings)) == ([], ["W_OPEN_SPLIT"])
    none = check(
        lambda d: d["sections"][0].update(
            blocks=[b for b in d["sections"][0]["blocks"] if b["type"] != "question"]
        )
    )
    assert codes(none.warnings) == ["W_NO_QUESTION"]
    assert none.warnings[0].key == "W_NO_QUESTION:s1"
    sections = check(lambda d: d.update(sections=d["sections"][:3]))
    assert codes(sections.warnings) == ["W_SECTION_COUNT"]
    assert sections.warnings[0].key == "W_SECTION_COUNT:3"
    assert sections.warnings[0].params == {"count": 3, "expected": 6}


def test_open_split_reads_only_seven_opens() -> None:
    eight = check(lambda d: insert_question(d, 0, "open", "In your own words, explain why."))
    assert "W_OPEN_SPLIT" not in codes(eight.warnings)


def test_vakt_goes_last() -> None:
    activity = {"id": "v1", "type": "vakt", "text": "Buzz like a bee.", "links": []}
    last = check(lambda d: d["sections"][0]["blocks"].append(dict(activity)))
    assert (codes(last.errors), codes(last.warnings)) == ([], [])
    middle = check(lambda d: d["sections"][0]["blocks"].insert(2, dict(activity)))
    assert (codes(middle.errors), codes(middle.warnings)) == ([], ["W_VAKT_NOT_LAST"])
    assert middle.warnings[0].blockId == "v1"


# ---- spelling -------------------------------------------------------------------------------


def test_spelling_length_counts_letters_only() -> None:
    short = check(lambda d: block(d, "s1sp")["words"][0].update(text="buzz"))
    assert codes(short.errors) == ["E_SPELLING_LENGTH"]
    finding = short.errors[0]
    assert (finding.blockId, finding.itemId) == ("s1sp", "s1w1")
    assert finding.params == {"word": "buzz", "letters": 4, "min": 6, "max": 9}
    # "bee" is also inside the answer "beetles": a collision as well.
    assert codes(check(FIRES[[c for c, _ in FIRES].index("E_SPELLING_LENGTH")][1]).errors) == [
        "E_SPELLING_LENGTH",
        "E_SPELLING_COLLISION",
    ]
    assert (
        codes(check(lambda d: block(d, "s1sp")["words"][0].update(text="half-moon")).errors) == []
    )
    long = check(lambda d: block(d, "s1sp")["words"][0].update(text="apiculturist"))
    assert codes(long.errors) == ["E_SPELLING_LENGTH"]


def test_spelling_duplicates_across_and_within_sections() -> None:
    across = check(lambda d: block(d, "s4sp")["words"][0].update(text="swarming"))
    assert codes(across.errors) == ["E_SPELLING_DUPLICATE"]
    assert across.errors[0].key == "E_SPELLING_DUPLICATE:s1|s4|SWARMING"
    assert "section 1 and section 4" in across.errors[0].message
    within = check(lambda d: block(d, "s1sp")["words"][1].update(text="swarming"))
    assert within.errors[0].key == "E_SPELLING_DUPLICATE:s1|SWARMING"


def test_spelling_collisions_are_raw_substrings_of_any_answer() -> None:
    result = check(FIRES[[c for c, _ in FIRES].index("E_SPELLING_COLLISION")][1])
    assert codes(result.errors) == ["E_SPELLING_COLLISION"]
    finding = result.errors[0]
    assert finding.key == "E_SPELLING_COLLISION:s1|s1q1|ORCHARD|ORCHARDS"
    assert '"orchard"' in finding.message and '"orchards"' in finding.message
    # Background answers and numbers count; loose suggestions do not.
    background = check(lambda d: question(d, 0, 7).update(answer="blossoming"))
    assert codes(background.errors) == ["E_SPELLING_COLLISION"]


def test_a_spelling_word_that_is_vocabulary_warns() -> None:
    result = check(lambda d: block(d, "s1t1").update(text=BEES_FIRST.replace("HIVE", "BLOSSOM")))
    assert (codes(result.errors), codes(result.warnings)) == ([], ["W_SPELLING_IN_CAPS"])


def test_vocabulary_boundaries_are_ascii_as_in_the_tool() -> None:
    # JavaScript's \b is ASCII: "ÉCOLES" is vocabulary from its C on, so the spelling word
    # "écoles" does not match it (FACTS A, kept so our keys are the editor's).
    result = check(
        lambda d: (
            block(d, "s1t1").update(text=BEES_FIRST + " Les ÉCOLES visitent la ruche."),
            block(d, "s1sp")["words"][0].update(text="écoles"),
        )
    )
    assert "W_SPELLING_IN_CAPS" not in codes(result.warnings)


# ---- answers and numbers used twice -----------------------------------------------------------


def test_one_answer_word_one_question() -> None:
    reused = check(FIRES[[c for c, _ in FIRES].index("E_ANSWER_WORD_REUSED")][1])
    assert codes(reused.errors) == ["E_ANSWER_WORD_REUSED"]
    assert reused.errors[0].key == "E_ANSWER_WORD_REUSED:s1q6|s6q1|WATER"
    inside = check(
        lambda d: (
            append_text(d, "s4t1", " Everyone loves fresh bread."),
            question(d, 3, 0).update(answer="fresh bread"),
        )
    )
    assert codes(inside.errors) == ["E_ANSWER_WORD_REUSED"]
    assert inside.errors[0].key == "E_ANSWER_WORD_REUSED:s4q1|s4q6|BREAD|FRESH BREAD"
    assert "also a word of the answer" in inside.errors[0].message


def test_distinct_whole_answers_sharing_words_are_allowed() -> None:
    result = check(
        lambda d: (
            append_text(d, "s6t2", " There is a dry cave and a wet cave."),
            question(d, 5, 0).update(answer="a dry cave"),
            question(d, 5, 1).update(answer="a wet cave"),
        )
    )
    assert codes(result.errors) == []


def test_number_duplicates_read_numbers() -> None:
    across = check(lambda d: question(d, 2, 4).update(answer="60"))
    assert codes(across.errors) == ["E_NUMBER_DUPLICATE"]
    assert "section 1 and section 3" in across.errors[0].message
    assert across.errors[0].key == "E_NUMBER_DUPLICATE:s1q5|s3q5|60"
    same = check(lambda d: question(d, 0, 4).update(answer="5"))
    assert "both in section 1" in same.errors[0].message
    written_otherwise = check(lambda d: question(d, 2, 4).update(answer="60.0"))
    assert codes(written_otherwise.errors) == ["E_NUMBER_DUPLICATE"]


# ---- formatting and sources -------------------------------------------------------------------


def test_one_italic_title_and_a_footnote_pass() -> None:
    result = check(
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("its own cell", "its own *Cella*") + "^[@atlas, p. 4]"
        )
    )
    assert (codes(result.errors), codes(result.warnings)) == ([], [])


def test_formatting_checks() -> None:
    heavy = check(FIRES[[c for c, _ in FIRES].index("E_FORMAT_HEAVY")][1])
    assert "E_FORMAT_HEAVY" in codes(heavy.errors)
    assert heavy.errors[0].params["tooMany"] is True
    share = check(
        lambda d: set_markup(
            d,
            "s1t1",
            BEES_FIRST.replace(
                "nectar, pollen, and water, and each load is stored",
                "*nectar, pollen, and water, and each load is stored*",
            ),
        )
    )
    assert codes(share.errors) == ["E_FORMAT_HEAVY"]
    assert share.errors[0].params["tooMany"] is False
    bold = check(FIRES[[c for c, _ in FIRES].index("E_FORMAT_LONG_EMPHASIS")][1])
    assert "E_FORMAT_LONG_EMPHASIS" in codes(bold.errors)
    assert "W_FORMAT_BOLD" in codes(bold.warnings)
    marked = check(
        lambda d: set_markup(
            d, "s1t1", BEES_FIRST.replace("HIVE", "*HIVE*").replace("cell", "<u>cell</u>")
        )
    )
    assert codes(marked.errors) == []
    assert codes(marked.warnings) == ["W_FORMAT_UNDERLINE", "W_FORMAT_CAPS"]
    assert marked.warnings[1].key == "W_FORMAT_CAPS:italic:HIVE"


def test_sources_must_be_listed() -> None:
    unknown = check(lambda d: set_markup(d, "s1t1", BEES_FIRST + "^[@nobody, p. 3]"))
    assert codes(unknown.errors) == ["E_UNKNOWN_SOURCE"]
    assert unknown.errors[0].key == "E_UNKNOWN_SOURCE:nobody"
    assert unknown.errors[0].params == {"sourceId": "nobody"}
    listed = check(lambda d: set_markup(d, "s1t1", BEES_FIRST + "^[@atlas, p. 3]"))
    assert codes(listed.errors) == []


# ---- identities -----------------------------------------------------------------------------


def test_moving_a_section_keeps_every_key() -> None:
    def broken(d: Doc) -> None:
        block(d, "s5sp")["words"][0]["text"] = "swarming"  # a duplicate of section 1's
        block(d, "s5sp")["words"].append({"id": "x", "text": "shipping"})

    doc = standard_lesson()
    broken(doc)
    before = validate_lesson(doc)
    assert "E_SPELLING_DUPLICATE" in codes(before.errors)
    doc["sections"].insert(0, doc["sections"].pop(4))
    after = validate_lesson(doc)
    assert new_findings(before.errors, after.errors) == []
    assert new_findings(before.warnings, after.warnings) == []


def test_a_question_without_id_is_named_by_position() -> None:
    doc = standard_lesson()
    del question(doc, 0, 0)["id"]
    question(doc, 0, 0)["answer"] = "honey"
    finding = validate_lesson(doc).errors[0]
    assert finding.key == "E_GROUNDING_SINGLE:s1#q0:HONEY"
    assert finding.blockId is None


def test_every_finding_has_every_field() -> None:
    result = check(
        lambda d: (d.update(sections=d["sections"][:2]), question(d, 0, 0).update(answer="honey"))
    )
    for finding in result.findings:
        assert set(finding.model_dump()) == {
            "level",
            "code",
            "key",
            "section",
            "sectionId",
            "blockId",
            "itemId",
            "params",
            "message",
        }


def test_odd_shapes_are_read_as_the_tool_reads_them() -> None:
    result = validate_lesson({"title": 3, "sections": [None, {"blocks": [None, 7, {"type": "x"}]}]})
    assert codes(result.warnings) == [
        "W_NO_QUESTION",
        "W_SPELLING_COUNT",
        "W_NO_QUESTION",
        "W_SPELLING_COUNT",
        "W_SECTION_COUNT",
    ]
    assert result.warnings[0].key == "W_NO_QUESTION:section#0"
    assert result.warnings[0].sectionId is None
    assert validate_lesson({}).warnings[0].key == "W_SECTION_COUNT:0"

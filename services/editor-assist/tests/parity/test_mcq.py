"""mcq parity: the platform's schema, views and merge, case for case.

Cases derived from heig-quiz `packages/qt-mcq/src/schema.test.ts` (accepted and rejected
configs, defaults, i18n keys, the empty draft), `toStudent.test.ts` (no key, canonical ids in a
seeded order), `generate.test.ts` (`mergeMcq` and the wand of one choice), and issue 8's list.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import StudentView, question_type, read_draft
from quiz_contracts.questions.mcq import MCQ_CONFIG_VERSION, MCQ_MAX_CHOICES, empty_mcq_draft
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed
from quiz_editor_assist.generators.mcq import accepts_item, merge_mcq_proposal, place_item

MCQ = question_type("mcq")


def base(**over: Any) -> dict[str, Any]:
    return {
        "configVersion": MCQ_CONFIG_VERSION,
        "prompt": "Which one?",
        "choices": [{"text": "a", "correct": True}, {"text": "b", "correct": False}],
        **over,
    }


TWO_KEYS = [{"text": "a", "correct": True}, {"text": "b", "correct": True}]


def twelve(n: int) -> list[dict[str, Any]]:
    return [{"text": f"c{i}", "correct": i == 0} for i in range(n)]


ACCEPTED = {
    "the minimum: two choices and one key": base(),
    **{
        f"a multiple scored {p}": base(mode="multiple", policy=p)
        for p in ("all_or_nothing", "true_false", "discordance", "symmetric", "ripkey", "inherit")
    },
    "a policy other than all_or_nothing in single mode": base(policy="ripkey"),
    "several keys in multiple mode": base(mode="multiple", choices=TWO_KEYS),
    "an explicit maxSelections": base(mode="multiple", maxSelections=2),
    "a maxSelections equal to the key size": base(
        mode="multiple", choices=TWO_KEYS, maxSelections=2
    ),
    "shuffling turned off": base(shuffleChoices=False),
    "twelve choices": base(choices=twelve(12)),
    "an integral number written 2.0": base(configVersion=2.0, mode="multiple", maxSelections=2.0),
}
REJECTED = {
    "a single choice": base(choices=[{"text": "a", "correct": True}]),
    "thirteen choices": base(choices=twelve(13)),
    "no correct choice": base(choices=[{"text": "a"}, {"text": "b", "correct": False}]),
    "two keys in single mode": base(choices=TWO_KEYS),
    "an unknown policy": base(mode="multiple", policy="curve"),
    "a v1 policy the migration should have rewritten": base(mode="multiple", policy="partial"),
    "an empty prompt": base(prompt=""),
    "an empty choice text": base(choices=[{"text": "", "correct": True}, {"text": "b"}]),
    "a missing configVersion": {k: v for k, v in base().items() if k != "configVersion"},
    "a v1 configVersion": base(configVersion=1),
    "a future configVersion": base(configVersion=MCQ_CONFIG_VERSION + 1),
    "maxSelections of 0": base(mode="multiple", maxSelections=0),
    "maxSelections below the number of correct choices": base(
        mode="multiple", choices=TWO_KEYS, maxSelections=1
    ),
    "a choice over 2,000 characters": base(
        choices=[{"text": "x" * 2001, "correct": True}, {"text": "b"}]
    ),
    "a tick written as text": base(choices=[{"text": "a", "correct": "true"}, {"text": "b"}]),
    "a snake_case key (zod reads camelCase only)": base(mode="multiple", max_selections=0)
    | {"choices": [{"text": "a"}, {"text": "b"}]},
}


@pytest.mark.parametrize("config", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_schema_accepts(config: dict[str, Any]) -> None:
    reading = read_draft("mcq", config)
    assert reading.valid, reading.problems


@pytest.mark.parametrize("config", REJECTED.values(), ids=REJECTED.keys())
def test_schema_rejects(config: dict[str, Any]) -> None:
    assert not read_draft("mcq", config).valid


def test_defaults_and_unknown_fields() -> None:
    parsed = read_draft("mcq", base(penalty=0.5, allowNegative=True)).config
    assert parsed is not None
    wire = parsed.model_dump(by_alias=True, exclude_none=True)
    assert wire["mode"] == "single" and wire["policy"] == "inherit"
    assert wire["shuffleChoices"] is True and "maxSelections" not in wire
    assert "penalty" not in wire and "allowNegative" not in wire


def test_refinements_report_the_platforms_i18n_keys_at_their_paths() -> None:
    no_key = read_draft("mcq", base(choices=[{"text": "a"}, {"text": "b"}])).problems
    assert ("", "mcq.no_correct_choice") in [(p.path, p.message) for p in no_key]
    capped = read_draft("mcq", base(mode="multiple", choices=TWO_KEYS, maxSelections=1))
    assert [(p.path, p.message) for p in capped.problems] == [
        ("maxSelections", "mcq.max_below_correct")
    ]
    single = read_draft("mcq", base(choices=TWO_KEYS)).problems
    assert [p.message for p in single] == ["mcq.single_needs_one"]


def test_the_empty_draft() -> None:
    draft = empty_mcq_draft()
    assert draft["prompt"] == "" and [c["text"] for c in draft["choices"]] == ["", ""]
    assert (draft["mode"], draft["policy"], draft["shuffleChoices"]) == ("single", "inherit", True)
    assert [i for i, c in enumerate(draft["choices"]) if c["correct"]] == [0]
    assert not read_draft("mcq", draft).valid  # D16: a fresh draft does not validate


SECRET = base(
    mode="multiple",
    choices=[
        {"text": "`int`", "correct": True},
        {"text": "`float`", "correct": False},
        {"text": "`char *`", "correct": True},
    ],
    policy="symmetric",
)


@pytest.mark.parametrize("view", [StudentView(7, "i", True), StudentView(0, "i", False)])
def test_student_view_leaks_no_key(view: StudentView) -> None:
    student = MCQ.to_student(SECRET, view)
    assert sorted(student) == ["choices", "mode", "prompt"]
    text = str(student)
    for key in ("correct", "policy", "True"):
        assert key not in text


def test_student_view_keeps_canonical_ids_in_the_seeded_order() -> None:
    config = base(choices=twelve(12))
    view = StudentView(seed=99, item_id="i", shuffle=True)
    student = MCQ.to_student(config, view)
    order = [c["id"] for c in student["choices"]]
    assert order == seeded_shuffle(list(range(12)), stream_seed(99, "i", "choices"))
    assert all(config["choices"][c["id"]]["text"] == c["text"] for c in student["choices"])
    # Golden value computed with the platform's rng.ts under Node: the same order, bit for bit.
    assert MCQ.to_student(config, StudentView(7, "i", True))["choices"][0]["id"] == 11
    unshuffled = MCQ.to_student(base(choices=twelve(12), shuffleChoices=False), view)
    assert [c["id"] for c in unshuffled["choices"]] == list(range(12))


def test_views_carry_max_selections_and_the_solution_is_indices() -> None:
    config = base(mode="multiple", choices=TWO_KEYS, maxSelections=2)
    assert MCQ.to_student(config)["maxSelections"] == 2
    assert MCQ.to_solution(SECRET) == {"correct": [0, 2]}


# --- the merge (mergeMcq) --------------------------------------------------------------------


def draft(choices: list[dict[str, Any]], mode: str = "single") -> dict[str, Any]:
    return {**empty_mcq_draft(), "prompt": "2 + 2 ?", "mode": mode, "choices": choices}


def proposal(*choices: tuple[str, bool]) -> dict[str, Any]:
    return {"choices": [{"text": t, "correct": c} for t, c in choices]}


MANY = proposal(*((f"c{i}", i < 2) for i in range(20)))
MERGES: dict[str, tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]] = {
    # The fresh draft's tick on an empty row is not the teacher's key: the model's tick wins.
    "fills the empty rows of a fresh draft, then appends": (
        {**empty_mcq_draft(), "prompt": "2 + 2 ?"},
        proposal(("4", True), ("3", False), ("5", False)),
        [
            {"text": "4", "correct": True},
            {"text": "3", "correct": False},
            {"text": "5", "correct": False},
        ],
    ),
    "a fresh draft whose model key is the second proposal": (
        {**empty_mcq_draft(), "prompt": "2 + 2 ?"},
        proposal(("3", False), ("4", True)),
        [{"text": "3", "correct": False}, {"text": "4", "correct": True}],
    ),
    "keeps every written choice, its tick too, and never repeats one": (
        draft([{"text": "4", "correct": True}, {"text": "", "correct": False}]),
        proposal((" 4 ", True), ("22", True), ("3", False)),
        [
            {"text": "4", "correct": True},
            {"text": "22", "correct": False},
            {"text": "3", "correct": False},
        ],
    ),
    "texts compare trimmed, lower-cased, spaces collapsed; blank proposals drop": (
        draft([{"text": "Mont  Blanc", "correct": True}, {"text": "", "correct": False}]),
        proposal(("mont blanc", False), ("  ", False), ("Cervin", False), ("CERVIN ", False)),
        [{"text": "Mont  Blanc", "correct": True}, {"text": "Cervin", "correct": False}],
    ),
    "an empty row no proposal fills stays as it was": (
        draft([{"text": "", "correct": True}, {"text": "", "correct": False}]),
        proposal(("x", True)),
        [{"text": "x", "correct": True}, {"text": "", "correct": False}],
    ),
    "single mode: the first proposed key taken, the next demoted": (
        draft([{"text": "", "correct": False}, {"text": "", "correct": False}]),
        proposal(("a", True), ("b", True)),
        [{"text": "a", "correct": True}, {"text": "b", "correct": False}],
    ),
    "texts are trimmed, no id is added": (
        draft([{"text": "4", "correct": True}]),
        proposal(("  5  ", False)),
        [{"text": "4", "correct": True}, {"text": "5", "correct": False}],
    ),
}


@pytest.mark.parametrize(("config", "prop", "choices"), MERGES.values(), ids=MERGES.keys())
def test_merge(config: dict[str, Any], prop: dict[str, Any], choices: list[dict[str, Any]]) -> None:
    merged = merge_mcq_proposal(config, prop)
    assert merged["choices"] == choices
    assert {**merged, "choices": config["choices"]} == config  # only `choices` changes


def test_multiple_mode_keeps_ticks_and_stops_at_twelve_thirteen_proposed_are_cut() -> None:
    merged = merge_mcq_proposal(draft([{"text": "a", "correct": True}], "multiple"), MANY)
    assert len(merged["choices"]) == MCQ_MAX_CHOICES == 12
    assert sum(c["correct"] for c in merged["choices"]) == 3
    thirteen = proposal(*((f"d{i}", i == 0) for i in range(13)))
    merged = merge_mcq_proposal({**empty_mcq_draft(), "prompt": "P"}, thirteen)
    assert len(merged["choices"]) == 12 and read_draft("mcq", merged).valid


def test_a_row_whose_text_is_not_text_is_kept_and_never_compared() -> None:
    odd = {"text": [], "correct": True}
    merged = merge_mcq_proposal(draft([odd, {"text": "", "correct": False}]), proposal(("x", True)))
    assert merged["choices"] == [odd, {"text": "x", "correct": True}]


def test_changes_nothing_but_the_choices() -> None:
    before = {
        **draft([{"text": "", "correct": True}]),
        "shuffleChoices": False,
        "policy": "symmetric",
    }
    merged = merge_mcq_proposal(before, proposal(("x", True)))
    assert {**merged, "choices": before["choices"]} == before


def test_the_wand_of_one_choice() -> None:
    config = draft([{"text": "4", "correct": True}, {"text": "", "correct": False}])
    assert [accepts_item(config, i) for i in range(3)] == [False, True, False]
    placed = place_item(config, 1, {"text": "5", "correct": True})
    assert placed["choices"] == [{"text": "4", "correct": True}, {"text": "5", "correct": False}]
    # Beyond the platform's place: a choice already written is never repeated.
    assert place_item(config, 1, {"text": " 4", "correct": False}) == config


# --- through the HTTP route, with the stub --------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    "case",
    [
        "fills the empty rows of a fresh draft, then appends",
        "keeps every written choice, its tick too, and never repeats one",
    ],
)
async def test_merge_through_http(wand: Any, case: str) -> None:
    config, prop, choices = MERGES[case]
    r = await wand.generate("mcq", config, {"proposal": prop, "explanation": "Parce que."})
    assert r.status_code == 200, r.text
    assert r.json()["config"] == {**config, "choices": choices}
    assert r.json()["explanation"] == "Parce que."


@pytest.mark.integration
async def test_thirteen_proposed_choices_are_cut_not_refused_through_http(wand: Any) -> None:
    thirteen = proposal(*((f"d{i}", i == 0) for i in range(13)))
    r = await wand.generate(
        "mcq", {**empty_mcq_draft(), "prompt": "P"}, {"proposal": thirteen, "explanation": ""}
    )
    assert r.status_code == 200, r.text
    assert len(r.json()["config"]["choices"]) == 12
    sent = wand.stub.requests[-1].body
    assert sent["max_tokens"] == 12_000


@pytest.mark.integration
async def test_item_wand_through_http(wand: Any) -> None:
    config = draft([{"text": "4", "correct": True}, {"text": "", "correct": False}])
    r = await wand.generate("mcq", config, {"text": "5", "correct": True}, item=1, explanation="")
    assert r.status_code == 200, r.text
    assert r.json()["config"]["choices"][1] == {"text": "5", "correct": False}
    assert r.json()["explanation"] == ""
    assert wand.stub.requests[-1].body["max_tokens"] == 1_500
    r = await wand.generate("mcq", config, item=0)
    assert (r.status_code, r.json()["code"]) == (422, "item_not_empty")

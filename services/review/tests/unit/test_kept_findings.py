"""Which findings of a reply are kept, and with which fix (ADR-060 §2).

The cases are our own, derived from what the platform's review tests check (heig-tin-info/
heig-quiz packages/domain/src/review.test.ts, apps/api/src/modules/pool/review.test.ts and
review.db.test.ts): a real field keeps its finding, a fix survives only when it applies to the
reviewed version, a path that is no path or names nothing drops the finding.
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.review import FindingFix, ReviewFinding
from quiz_review.domain.findings import kept_findings, read_reply, review_state_for
from quiz_review.domain.fixes import apply_fix
from quiz_review.domain.paths import MISSING, field_value, parse_path, value_at, with_value_at

CONFIG: dict[str, Any] = {
    "configVersion": 2,
    "prompt": "Quel est le resultat de 2 + 2 ?",
    "choices": [{"text": "4", "correct": True}, {"text": "5", "correct": False}],
    "mode": "single",
    "policy": "inherit",
    "shuffleChoices": True,
    "maxSelections": None,
    "explanation": "a field of the config that happens to have this name",
    "echo": "aaa",
    "twice": "a a",
}
EXPLANATION = "Parce que 2 + 2 = 4."


def finding(path: str, fix: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"severity": "warn", "path": path, "message": "m", "fix": None}
    if fix is not None:
        raw["fix"] = {"from": fix[0], "to": fix[1]}
    raw.update(extra)
    return raw


# (path, fix proposed, finding kept?, fix kept?)
CASES: list[tuple[str, tuple[str, str] | None, bool, bool]] = [
    # A text field, the fix found once: kept whole.
    ("prompt", ("resultat", "résultat"), True, True),
    # The comparison is case-sensitive: "quel" is not in "Quel est…".
    ("prompt", ("quel", "Quel"), True, False),
    # An empty `from` applies nowhere.
    ("prompt", ("", "x"), True, False),
    # Twice in the field: ambiguous, refused.
    ("twice", ("a", "b"), True, False),
    # Overlapping occurrences count: "aa" is twice in "aaa".
    ("echo", ("aa", "b"), True, False),
    ("echo", ("aaa", "b"), True, True),
    # A tick: from its current value, to true/false, both trimmed.
    ("choices.1.correct", ("false", "true"), True, True),
    ("choices.1.correct", (" false ", " true\n"), True, True),
    ("choices.0.correct", ("false", "true"), True, False),
    ("choices.1.correct", ("false", "maybe"), True, False),
    ("choices.1.correct", ("False", "True"), True, False),
    # A number, null, an object, a list take no fix but keep their finding.
    ("configVersion", ("2", "3"), True, False),
    ("maxSelections", ("null", "3"), True, False),
    ("choices.0", ("4", "5"), True, False),
    ("choices", None, True, False),
    # `explanation` is the version's explanation, never the config's field of that name.
    ("explanation", ("Parce que", "Car"), True, True),
    ("explanation", ("happens", "x"), True, False),
    ("explanation", ("absent", "x"), True, False),
    # Digit segments are indices, leading zeros read as numbers.
    ("choices.01.text", ("5", "6"), True, True),
    # No value there: dropped.
    ("choices.9.text", None, False, False),
    ("choices.-1.text", None, False, False),
    ("prompt.0", None, False, False),
    ("nope", None, False, False),
    ("choices.length", None, False, False),
    ("choices.١.text", None, False, False),  # an Arabic-Indic one is no index
    # No path at all: dropped.
    ("", None, False, False),
    ("choices..text", None, False, False),
    ("prompt.", None, False, False),
    (".prompt", None, False, False),
    ("__proto__", None, False, False),
    ("choices.0.constructor", None, False, False),
    ("prototype.x", None, False, False),
]


@pytest.mark.parametrize(("path", "fix", "kept", "fix_kept"), CASES)
def test_a_finding_is_kept_on_a_real_field_its_fix_only_when_it_applies(
    path: str, fix: tuple[str, str] | None, kept: bool, fix_kept: bool
) -> None:
    result = kept_findings(CONFIG, EXPLANATION, [finding(path, fix)])
    assert len(result) == (1 if kept else 0)
    if kept:
        assert result[0].path == path
        assert (result[0].fix is not None) == fix_kept
        if fix_kept:
            assert fix is not None
            assert result[0].fix == FindingFix(from_=fix[0], to=fix[1])


def test_the_platforms_own_example_keeps_three_of_four() -> None:
    config = {"prompt": "Le resultat", "choices": [{"text": "a", "correct": False}]}
    kept = kept_findings(
        config,
        "Parce que.",
        [
            {**finding("prompt", ("resultat", "résultat")), "severity": "notice", "message": " m "},
            {**finding("choices.0.correct", ("false", "true")), "severity": "error"},
            finding("explanation", ("absent", "x")),
            finding("choices..text"),
        ],
    )
    assert [(f.severity, f.path, f.message, f.fix is not None) for f in kept] == [
        ("notice", "prompt", "m", True),
        ("error", "choices.0.correct", "m", True),
        ("warn", "explanation", "m", False),
    ]
    assert not any(f.applied for f in kept)


def test_only_the_first_twenty_are_read_and_the_cut_comes_before_dropping() -> None:
    unreal = [finding("nope")] * 20
    assert kept_findings(CONFIG, EXPLANATION, [*unreal, *[finding("prompt")] * 5]) == []
    assert len(kept_findings(CONFIG, EXPLANATION, [finding("prompt")] * 25)) == 20


def test_the_message_is_trimmed_and_cut_to_a_thousand_characters() -> None:
    long = "  " + "é" * 1500 + "  "
    [kept] = kept_findings(CONFIG, EXPLANATION, [finding("prompt", message=long)])
    assert kept.message == "é" * 1000
    [short] = kept_findings(CONFIG, EXPLANATION, [finding("prompt", message="\n ok \t")])
    assert short.message == "ok"


def test_what_is_not_a_finding_is_dropped_and_a_broken_fix_is_none() -> None:
    raws: list[Any] = [
        finding("prompt", severity="critical"),
        finding("prompt", message=None),
        {"severity": "warn", "path": 3, "message": "m", "fix": None},
        "prompt",
        finding("prompt", fix=None) | {"fix": {"from": "resultat"}},
        finding("prompt", fix=None) | {"fix": {"from_": "resultat", "to": "x"}},
        finding("x" * 1001),
    ]
    kept = kept_findings(CONFIG, EXPLANATION, raws)
    assert [(f.path, f.fix) for f in kept] == [("prompt", None), ("prompt", None)]


def test_a_reply_without_a_findings_list_is_unreadable() -> None:
    assert read_reply({"findings": []}) == []
    outputs: list[Any] = [{}, {"findings": {}}, "findings: []", None]
    for output in outputs:
        with pytest.raises(ContractError) as caught:
            read_reply(output)
        assert caught.value.code is ErrorCode.llm_failed


def test_the_state_is_clean_without_findings() -> None:
    assert review_state_for([]) == "clean"
    one = ReviewFinding(severity="notice", path="prompt", message="m")
    assert review_state_for([one]) == "findings"


def test_paths_read_and_replace_copying_only_along_the_way() -> None:
    segments = parse_path("choices.1.correct")
    assert segments == ("choices", 1, "correct")
    assert value_at(CONFIG, segments) is False
    replaced = with_value_at(CONFIG, segments, True)
    assert replaced["choices"][1]["correct"] is True
    assert CONFIG["choices"][1]["correct"] is False
    assert replaced["choices"][0] is CONFIG["choices"][0]
    assert with_value_at(CONFIG, ("nope", "x"), 1) is MISSING
    assert with_value_at(CONFIG, ("choices", 7, "text"), 1) is MISSING
    assert value_at(CONFIG, ("maxSelections",)) is None  # null is a value
    assert field_value(CONFIG, EXPLANATION, "explanation") == EXPLANATION


def test_apply_fix_replaces_exactly_one_occurrence() -> None:
    assert apply_fix("Le resultat est 4.", "resultat", "résultat") == "Le résultat est 4."
    assert apply_fix("a a", "a", "b") is None
    assert apply_fix("abc", "x", "y") is None
    assert apply_fix("abc", "", "y") is None
    assert apply_fix("abc", "abc", "") == ""
    assert apply_fix(False, "false", "true") is True
    assert apply_fix(True, "true", "false") is False
    assert apply_fix(True, "false", "true") is None
    assert apply_fix(3, "3", "4") is None
    assert apply_fix(None, "a", "b") is None
    assert apply_fix(["a"], "a", "b") is None

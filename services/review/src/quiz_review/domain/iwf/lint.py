"""The item-writing-flaw lint of one mcq (issue 30), as a pipeline that reads as its script:

1. the type must be `mcq` (`lint_unsupported` otherwise: the rubric's flaws are those of
   multiple-choice items);
2. the config must be no larger than an mcq can be (`limit_exceeded`), then validate as the
   platform's mcq (`McqConfig`; `draft_invalid` with its problems otherwise): a rule reads
   choices and a key, and an unfinished draft has neither;
3. the item is read once (`Item`: words, folded, lemmas on demand) in the question's language;
4. every criterion runs — the eleven for fr, en, de, it; the language-free ones (4, 10, 16)
   for another language — each a pure function of the item (`choices`, `form`, `wording`,
   `cues`), its words in `words/<code>.json`;
5. the findings come in the rubric's order of criteria, then by path, all `notice`.

What the rules cannot see — whether the key is right, a distractor plausible, the stem clear —
stays the model's review (the rubric's other eight criteria).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.questions.mcq import McqConfig
from quiz_contracts.questions.registry import check_draft_size, read_draft
from quiz_contracts.review import LintFinding, LintReply
from quiz_review.domain.iwf import choices, cues, form, wording
from quiz_review.domain.iwf.item import Flaw, Item

Rule = Callable[[Item], list[Flaw]]


@dataclass(frozen=True)
class Criterion:
    """One criterion of the rubric this lint finds: its number, code, rule, and whether it
    reads words (and so needs the language's lists)."""

    number: int
    code: str
    rule: Rule
    language_free: bool = False


CRITERIA: Final = (
    Criterion(3, choices.NOTA, choices.none_of_the_above),
    Criterion(4, form.LONGEST, form.longest_answer_correct, language_free=True),
    Criterion(6, choices.TRUE_FALSE, choices.true_false),
    Criterion(9, choices.AOTA, choices.all_of_the_above),
    Criterion(10, form.BLANK, form.fill_in_blank, language_free=True),
    Criterion(11, wording.ABSOLUTE, wording.absolute_terms),
    Criterion(12, cues.REPEATS, cues.word_repeats_key),
    Criterion(14, choices.K_TYPE, choices.complex_k_type),
    Criterion(16, form.NUMBERS, form.numbers_out_of_order, language_free=True),
    Criterion(17, wording.VAGUE, wording.vague_terms),
    Criterion(19, wording.NEGATIVE, wording.negative_stem),
)
CRITERION_BY_CODE: Final = {c.code: c for c in CRITERIA}
LINTED_TYPES: Final = frozenset({"mcq"})


def lint_mcq(config: McqConfig, language: str) -> tuple[list[Flaw], list[int]]:
    """The flaws of a valid mcq in `language`, and the criteria run (ascending)."""
    item = Item.of(config, language)
    run = [c for c in CRITERIA if c.language_free or item.known_language]
    flaws = [flaw for criterion in run for flaw in criterion.rule(item)]
    return flaws, [c.number for c in run]


def read_mcq(type_name: str, config: Mapping[str, Any]) -> McqConfig:
    """The config as a valid mcq; `lint_unsupported` for another type, `limit_exceeded` for a
    draft larger than any mcq, `draft_invalid` with
    the platform's problems (`details.problems`: `[{path, message}]`) when it does not
    validate."""
    if type_name not in LINTED_TYPES:
        raise ContractError(
            ErrorCode.lint_unsupported,
            f"the lint reads mcq questions only, not {type_name!r}",
        )
    check_draft_size(type_name, config)  # limit_exceeded before any work on a huge draft
    reading = read_draft(type_name, config)
    if reading.config is None:
        where = "; ".join(f"{p.path or 'config'}: {p.message}" for p in reading.problems[:3])
        raise ContractError(
            ErrorCode.draft_invalid,
            f"The config is not a valid mcq ({where}).",
            details={"problems": [p.model_dump() for p in reading.problems[:20]]},
        )
    assert isinstance(reading.config, McqConfig)
    return reading.config


def lint_question(type_name: str, language: str, config: Mapping[str, Any]) -> LintReply:
    """`review.v1.lint`: read the config (errors above), lint it, the wire reply."""
    flaws, checked = lint_mcq(read_mcq(type_name, config), language)
    return LintReply(
        findings=[
            LintFinding(code=f.code, criterion=f.criterion, path=f.path, message=f.message)
            for f in flaws
        ],
        checked=checked,
    )

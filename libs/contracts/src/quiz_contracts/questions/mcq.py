"""mcq: 2–12 choices `{text, correct}`, one right (single) or at least one (multiple).

heig-quiz `packages/qt-mcq/src/schema.ts` (MCQ_CONFIG_VERSION 2) and `server.ts`. Choices have no
id: a choice is addressed by its index (`choices.2.text`), and the student view carries that
canonical index as `id` while its array order is the (seeded) display order.

Draft, as the platform's editor stores it:

    {"configVersion": 2, "prompt": "2 + 2 ?", "mode": "single", "policy": "inherit",
     "shuffleChoices": true,
     "choices": [{"text": "4", "correct": true}, {"text": "", "correct": false}]}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    PlatformModel,
    Prompt,
    StudentView,
    Utf16,
    int_in,
    refuse,
)
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed

MCQ_CONFIG_VERSION = 2
MCQ_MIN_CHOICES = 2
MCQ_MAX_CHOICES = 12
MCQ_CHOICE_MAX = 2_000
# @quiz/domain/mcqScore: how a `multiple` question is scored; a question may also `inherit`.
MCQ_POLICIES = ("all_or_nothing", "true_false", "discordance", "symmetric", "ripkey")

McqMode = Literal["single", "multiple"]
McqPolicy = Literal["inherit", "all_or_nothing", "true_false", "discordance", "symmetric", "ripkey"]


class McqChoice(PlatformModel):
    """One choice; `correct` is the key and never reaches a student."""

    text: Annotated[str, Utf16(1, MCQ_CHOICE_MAX)]
    correct: bool = False


class McqConfig(PlatformModel):
    """A multiple-choice question. Takes [[…]] parameters (ADR-056)."""

    config_version: Literal[2]
    prompt: Prompt
    choices: Annotated[
        list[McqChoice], Field(min_length=MCQ_MIN_CHOICES, max_length=MCQ_MAX_CHOICES)
    ]
    mode: McqMode = "single"
    # Player-side guard only; absent means no cap.
    max_selections: Annotated[int, int_in(1, MCQ_MAX_CHOICES)] | None = None
    policy: McqPolicy = "inherit"
    shuffle_choices: bool = True

    @model_validator(mode="after")
    def _key_rules(self) -> McqConfig:
        right = sum(1 for c in self.choices if c.correct)
        issues = []
        if right == 0:
            issues.append(Issue((), "mcq.no_correct_choice"))
        if self.mode == "single" and right != 1:
            issues.append(Issue((), "mcq.single_needs_one"))
        # A cap below the size of the key would make the full mark unreachable.
        if self.max_selections is not None and self.max_selections < right:
            issues.append(Issue(("maxSelections",), "mcq.max_below_correct"))
        refuse(issues)
        return self


def empty_mcq_draft() -> dict[str, Any]:
    """`emptyMcqDraft()`: the shape and the defaults, no content; it does not validate (D16)."""
    return {
        "configVersion": MCQ_CONFIG_VERSION,
        "prompt": "",
        "choices": [{"text": "", "correct": True}, {"text": "", "correct": False}],
        "mode": "single",
        "policy": "inherit",
        "shuffleChoices": True,
    }


def choice_order(config: McqConfig, view: StudentView) -> list[int]:
    """The display order as canonical indices: seeded by (seed, item, "choices") when shuffled."""
    canonical = list(range(len(config.choices)))
    if not (view.shuffle and config.shuffle_choices):
        return canonical
    return seeded_shuffle(canonical, stream_seed(view.seed, view.item_id, "choices"))


def mcq_to_student(config: McqConfig, view: StudentView) -> dict[str, Any]:
    """The prompt, the choices as `{id: canonical index, text}` in display order, the mode.

    `correct` and `policy` stay home: knowing the policy tells whether guessing costs anything.
    """
    student: dict[str, Any] = {
        "prompt": config.prompt,
        "choices": [{"id": i, "text": config.choices[i].text} for i in choice_order(config, view)],
        "mode": config.mode,
    }
    if config.max_selections is not None:
        student["maxSelections"] = config.max_selections
    return student


def mcq_to_solution(config: McqConfig) -> dict[str, Any]:
    """`{correct: [canonical indices, ascending]}`."""
    return {"correct": [i for i, c in enumerate(config.choices) if c.correct]}


# The largest valid draft, with room for the keys and the settings.
MCQ_BUDGET = DraftBudget(
    text=PROMPT_MAX + MCQ_MAX_CHOICES * (MCQ_CHOICE_MAX + 16) + 1_024,
    values=32 + MCQ_MAX_CHOICES * 4,
)

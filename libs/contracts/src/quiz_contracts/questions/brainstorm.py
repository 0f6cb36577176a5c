"""brainstorm (ADR-071 §1): a poll's prompt for several short ideas. It has no key at all.

heig-quiz `packages/qt-brainstorm/src/schema.ts` (BRAINSTORM_CONFIG_VERSION 1) and `server.ts`:
`hasKey` is always false, so only a poll runs it (an exam refuses it: `question_keyless`).

Draft:

    {"configVersion": 1, "prompt": "Un mot pour la respiration ?", "maxIdeas": 5}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    PlatformModel,
    Prompt,
    StudentView,
    int_in,
)

BRAINSTORM_CONFIG_VERSION = 1
# @quiz/domain: how many ideas one participant may hold, and the length of one idea.
BRAINSTORM_MAX_IDEAS = 10
IDEA_MAX_CHARS = 60


class BrainstormConfig(PlatformModel):
    """A brainstorm: the prompt and how many ideas a participant may hold at once."""

    config_version: Literal[1]
    prompt: Prompt
    max_ideas: Annotated[int, int_in(1, BRAINSTORM_MAX_IDEAS)] = 5


def empty_brainstorm_draft() -> dict[str, Any]:
    """`emptyBrainstormDraft()`."""
    return {"configVersion": BRAINSTORM_CONFIG_VERSION, "prompt": "", "maxIdeas": 5}


def brainstorm_to_student(config: BrainstormConfig, view: StudentView) -> dict[str, Any]:
    """`{prompt, maxIdeas}`: the whole config, since there is no key to hide."""
    return {"prompt": config.prompt, "maxIdeas": config.max_ideas}


def brainstorm_to_solution(config: BrainstormConfig) -> None:
    """No key, no solution: null."""
    return None


BRAINSTORM_BUDGET = DraftBudget(text=PROMPT_MAX + 512, values=16)

"""cloze: a text with blanks `{{answer|other accepted answer}}`; the blanks are the key.

The text is the statement and holds the key inline. A blank is `{{…}}` with one or more accepted
answers cut by `|`, each trimmed and non-empty; an answer may be a [[…]] expression (ADR-056).
The student reads the text with every blank replaced by `{{n}}` (1-based), so no answer, its
length nor its alternatives leave.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel

BLANK = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
CLOZE_MAX_BLANKS = 50


def blank_answers(text: str) -> list[list[str]]:
    """The accepted answers of every blank, in order (empty answers dropped)."""
    return [[a.strip() for a in m.split("|") if a.strip()] for m in BLANK.findall(text)]


class ClozeConfig(WireModel):
    """A fill-in-the-blanks question. Takes [[…]] parameters (ADR-056)."""

    text: str = Field(min_length=1, max_length=20_000, description="Markdown with {{…}} blanks.")
    case_sensitive: bool = False

    @model_validator(mode="after")
    def _blanks_answered(self) -> ClozeConfig:
        blanks = blank_answers(self.text)
        if not blanks:
            raise ValueError("text: no {{…}} blank")
        if len(blanks) > CLOZE_MAX_BLANKS:
            raise ValueError(f"text: more than {CLOZE_MAX_BLANKS} blanks")
        if any(not answers for answers in blanks):
            raise ValueError("text: a blank has no answer")
        return self


def cloze_to_student(config: ClozeConfig) -> dict[str, Any]:
    """The text with numbered holes, and how many there are."""
    counter = iter(range(1, CLOZE_MAX_BLANKS + 1))
    holed = BLANK.sub(lambda _m: "{{" + str(next(counter)) + "}}", config.text)
    return {"text": holed, "blanks": len(blank_answers(config.text))}


def cloze_to_solution(config: ClozeConfig) -> dict[str, Any]:
    """The accepted answers of each blank."""
    return {"blanks": blank_answers(config.text)}

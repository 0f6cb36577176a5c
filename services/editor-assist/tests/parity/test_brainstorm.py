"""brainstorm parity: the platform's schema and views; no key, no wand.

Cases derived from heig-quiz `packages/qt-brainstorm/src/schema.ts` and `server.test.ts` (the
student gets the prompt and the cap, nothing else; the solution is null).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.brainstorm import BRAINSTORM_MAX_IDEAS, empty_brainstorm_draft

BRAINSTORM = question_type("brainstorm")
CONFIG = {"configVersion": 1, "prompt": "Un être vivant ?", "maxIdeas": 2}


def test_schema_and_defaults() -> None:
    assert read_draft("brainstorm", CONFIG).valid
    config = read_draft("brainstorm", {"configVersion": 1, "prompt": "P"}).config
    assert config is not None and config.model_dump(by_alias=True)["maxIdeas"] == 5
    for bad in (0, BRAINSTORM_MAX_IDEAS + 1, 2.5, "3"):
        assert not read_draft("brainstorm", {**CONFIG, "maxIdeas": bad}).valid
    assert not read_draft("brainstorm", {**CONFIG, "configVersion": 2}).valid
    assert empty_brainstorm_draft() == {"configVersion": 1, "prompt": "", "maxIdeas": 5}


def test_views() -> None:
    assert BRAINSTORM.has_key is False
    assert BRAINSTORM.to_student(CONFIG) == {"prompt": "Un être vivant ?", "maxIdeas": 2}
    assert BRAINSTORM.to_solution(CONFIG) is None


@pytest.mark.integration
async def test_the_wand_is_unsupported_through_http(wand: Any) -> None:
    r = await wand.generate("brainstorm", CONFIG)
    assert (r.status_code, r.json()["code"]) == (422, "generate_unsupported")

"""Every HTTP route that takes or answers a wire model: its request body and its reply model.

The HTTP side of the catalog (`quiz_contracts.catalog` lists the NATS subjects). What a client
sends (`body`) and what it reads (`reply`) are the two roles `make ts` types differently
(docs/contracts-typescript.md). tests/test_http_catalog.py checks that the services' apps serve
exactly these routes with these models, so the list cannot drift from the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from quiz_contracts.generate import GenerateAvailability, GenerateRequest, GenerateResult
from quiz_contracts.lesson import CheckReply, CheckRequest, FixReply, FixRequest
from quiz_contracts.llm import AvailabilityReply, UsageReply
from quiz_contracts.poll import (
    BrainstormAnswer,
    PollIdeaAction,
    PollIdeaBoard,
    PollMyAnswer,
    PollPageSettings,
    PollRevealBody,
    PollSettings,
    PollTallyFrame,
)
from quiz_contracts.review import (
    LintReply,
    LintRequest,
    QuestionReview,
    ReviewFixRequest,
    ReviewFixResult,
    ReviewList,
    ReviewPillsReply,
    ReviewPillsRequest,
    ReviewToggle,
)
from quiz_contracts.runner import SlotsReply

_POLL = "/app/api/evaluations/{evaluationId}/poll"


@dataclass(frozen=True)
class Route:
    """One HTTP route of a service: `body` is None for a route that reads no body.

    `body` is a model or an annotated union of models (`PollIdeaAction`); a union needs
    `body_name`, the name its TypeScript type takes.
    """

    method: str
    path: str
    service: str
    body: Any
    reply: type[BaseModel]
    body_name: str | None = None

    @property
    def body_type_name(self) -> str | None:
        """The body's type name: `body_name`, else the model's class name; None without body."""
        if self.body is None:
            return None
        return self.body_name or self.body.__name__


HTTP_ROUTES: tuple[Route, ...] = (
    Route("GET", "/admin/usage", "llm-gateway", None, UsageReply),
    Route("GET", "/admin/availability", "llm-gateway", None, AvailabilityReply),
    Route("GET", "/slots", "runner", None, SlotsReply),
    Route(
        "POST", "/app/api/questions/{id}/generate", "editor-assist", GenerateRequest, GenerateResult
    ),
    Route("GET", "/app/api/generate/availability", "editor-assist", None, GenerateAvailability),
    Route("GET", "/app/api/pools/{pool_id}/reviews", "review", None, ReviewList),
    Route("PUT", "/app/api/pools/{pool_id}/review", "review", ReviewToggle, ReviewList),
    Route("POST", "/app/api/pools/{pool_id}/review/lint", "review", LintRequest, LintReply),
    Route("POST", "/app/api/reviews/pills", "review", ReviewPillsRequest, ReviewPillsReply),
    Route("POST", "/app/api/questions/{question_id}/review", "review", None, QuestionReview),
    Route("POST", "/app/api/questions/{question_id}/review/ignore", "review", None, QuestionReview),
    Route(
        "POST",
        "/app/api/questions/{question_id}/review/fix",
        "review",
        ReviewFixRequest,
        ReviewFixResult,
    ),
    Route("POST", f"{_POLL}/answer", "poll", BrainstormAnswer, PollMyAnswer),
    Route("GET", f"{_POLL}/answer", "poll", None, PollMyAnswer),
    Route("GET", f"{_POLL}/settings", "poll", None, PollPageSettings),
    Route("GET", f"{_POLL}/tally", "poll", None, PollTallyFrame),
    Route("GET", f"{_POLL}/ideas", "poll", None, PollIdeaBoard),
    Route(
        "POST", f"{_POLL}/ideas", "poll", PollIdeaAction, PollIdeaBoard, body_name="PollIdeaAction"
    ),
    Route("POST", f"{_POLL}/reveal", "poll", PollRevealBody, PollSettings),
    Route("POST", "/app/api/lessons/check", "lesson-fix", CheckRequest, CheckReply),
    Route("POST", "/app/api/lessons/fix", "lesson-fix", FixRequest, FixReply),
)

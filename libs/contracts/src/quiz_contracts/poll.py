"""The brainstorm poll (ADR-071 with the folded ADR-072): wire models in the platform's JSON shapes.

Field names are camelCase on the wire, as the platform's contracts have them
(`packages/contracts/src/poll.ts` of heig-tin-info/heig-quiz: `PollTally`, `PollIdeaBoard`,
`PollIdeaAction`, `PollRevealBody`, `PollSettings`; `PollTallyEvent` of its realtime contract;
the answer of `packages/qt-brainstorm/src/schema.ts`; the columns of `poll_idea_marks` and
`poll_ai_runs` in `apps/api/src/db/poll.ts`). Python code reads the snake_case attributes;
`model_dump()`/`model_dump_json()` write camelCase without any flag.

Four groups:
- what the room and the teacher read: `PollTally` (the cloud, `ideas`, and `pending`),
  `PollIdeaBoard` (staff only), the live `PollTallyFrame`;
- what the teacher writes: `PollIdeaAction` (POST …/poll/ideas), `PollRevealBody` (the switches);
- what a participant writes: `BrainstormAnswer` (`{ideas: string[]}`);
- the edge with the platform's poll (ADR-014 sessions are the platform's): `BrainstormOpen`
  (open, and "run again" with `againOf`), `BrainstormClose`, `PollParticipant` (from the JWT
  grant), `PollJoin` and `MaskedPerson` (the roster and the joined accounts, for masking);
  and the AI run state of `poll_ai_runs` (`PollAiRun`).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import Utf16, js_trim

# --- Limits (heig-quiz `packages/domain/src/brainstorm.ts`, `packages/contracts/src/poll.ts`) ---

IDEA_MAX_CHARS = 60  # one idea, after trimming (BRAINSTORM_IDEA_MAX)
MAX_IDEAS_LIMIT = 10  # the most a question may allow (BRAINSTORM_MAX_IDEAS)
DEFAULT_MAX_IDEAS = 5
CLOUD_CAP = 60  # bubbles in a cloud (BRAINSTORM_CLOUD_CAP)
IDEA_LABEL_MAX = 60  # a teacher's cluster label (POLL_IDEA_LABEL_MAX)
IDEA_KEY_MAX = 200  # an idea key in an action body
ACTION_KEYS_MAX = 500  # keys in one action body
SEEN_MAX = 50  # spellings of one key recorded as seen approved (more stay new: safe side)


class CamelModel(WireModel):
    """A wire model whose JSON names are camelCase, read by either name."""

    model_config = ConfigDict(
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        frozen=True,
    )


# --- The participant's answer -----------------------------------------------------------------

_IDEA_LENGTH = Utf16(1, IDEA_MAX_CHARS)


def _idea(value: object) -> str:
    """`z.string().trim().min(1).max(60)`: a string (never coerced), trimmed as JavaScript
    trims, then 1–60 UTF-16 code units as zod counts them (an emoji outside the BMP is 2)."""
    if not isinstance(value, str):
        return _IDEA_LENGTH.validate(value)  # the platform's string_type error
    return _IDEA_LENGTH.validate(js_trim(value))


Idea = Annotated[
    str,
    PlainValidator(_idea),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": IDEA_MAX_CHARS}),
]


class BrainstormAnswer(CamelModel):
    """`{ideas: string[]}`: the whole answer, sent by the phone on every Add and Remove (§8).

    Each idea is trimmed (JavaScript's `trim`) and 1–60 UTF-16 code units, counted as the
    platform's schema counts them (`qt-brainstorm` `BrainstormAnswerSchema`, zod's `.max(60)`):
    60 emoji are 120 units and are refused, as the platform refuses them. At most 10 here; the
    question's `maxIdeas` is checked by the service (422 `answer_invalid`), as the platform's
    `answerMisfit` does.
    """

    ideas: list[Idea] = Field(max_length=MAX_IDEAS_LIMIT)


# --- Marks: the teacher's (or the model's) word on an idea, keyed by idea key -------------------

MarkStatus = Literal["approved", "hidden"]
MarkSource = Literal["teacher", "ai"]
IdeaStatus = Literal["pending", "approved", "hidden"]


class IdeaMark(CamelModel):
    """One row of `poll_idea_marks` (ADR-071 §3), keyed by (evaluation, idea key), never attempt.

    `status` null means not moderated yet. `label` is only ever written by a teacher; the
    model writes `correction`. Any teacher action makes `source` "teacher" for good.

    Two fields are this service's (issue 21), beyond the platform's row:
    - `seen`: the spellings approved, as the room reads them (`room_text`), in the order they
      were approved — what the teacher saw on the board when approving (or the text the model
      judged). Under moderation the room reads only these; a new spelling of the key waits on
      the board until the teacher approves it too. Empty unless `status` is approved.
    - `teacherOnly`: the idea was there when the AI was switched on (ADR-072 §5): it stays with
      the teacher and never leaves for the model, not even as wall context, whatever its status.
    """

    key: str = Field(min_length=1, max_length=IDEA_KEY_MAX)
    status: MarkStatus | None = None
    merged_into: str | None = Field(default=None, min_length=1, max_length=IDEA_KEY_MAX)
    label: str | None = Field(default=None, max_length=IDEA_LABEL_MAX)
    correction: str | None = Field(default=None, max_length=IDEA_MAX_CHARS)
    source: MarkSource = "teacher"
    seen: tuple[str, ...] = Field(default=(), max_length=SEEN_MAX)
    teacher_only: bool = False


# --- What the room reads: the tally and its cloud ----------------------------------------------


class PollBubble(CamelModel):
    """One bubble of the cloud: a cluster with at least one visible idea (ADR-071 §5).

    `key` is the smallest key among the cluster's VISIBLE ideas (never the head's); `label`
    the teacher's, else the shown text (correction, else typed text) of the cluster's first
    visible variant; `count` the participants with a visible idea in the cluster.
    """

    key: str
    label: str
    count: int = Field(ge=0)


class PollChoiceCount(CamelModel):
    """`mcq` tallies (not the brainstorm's): one entry per canonical choice index."""

    index: int
    count: int


class PollAnswerCount(CamelModel):
    """`short` tallies (not the brainstorm's): a distinct answer and its count."""

    text: str
    count: int


class PollTally(CamelModel):
    """The aggregate of one poll (platform `PollTally`); for a brainstorm `ideas` is the cloud.

    `pending` counts the ideas awaiting moderation and is 0 in the public view (the phones).
    `choices` and `answers` belong to the other poll types and stay empty here.
    """

    joined: int = Field(ge=0, description="Attempts opened (accounts and guests).")
    answered: int = Field(ge=0, description="Attempts holding at least one idea.")
    choices: list[PollChoiceCount] = Field(default_factory=list)
    answers: list[PollAnswerCount] = Field(default_factory=list)
    ideas: list[PollBubble] = Field(default_factory=list, max_length=CLOUD_CAP)
    pending: int = Field(ge=0)


class PollMyAnswer(BrainstormAnswer):
    """`GET`/`POST …/poll/answer`: the answer as stored, and which of its ideas wait.

    This service's addition (issue 22): `waiting` lists the ideas of `ideas` that wait for the
    teacher's approval (moderation on, neither approved nor hidden), so the participant page
    says "waiting for approval" under them; empty with moderation off. `hidden` (issue 34)
    lists those the teacher or the model hid: never shown in the room, whatever the switches,
    so the page marks them "not shown".
    """

    waiting: list[str] = Field(default_factory=list, max_length=MAX_IDEAS_LIMIT)
    hidden: list[str] = Field(default_factory=list, max_length=MAX_IDEAS_LIMIT)


class PollSharedIdea(CamelModel):
    """One line of the phones' shared list of visible ideas (ADR-071 §7, §11): no count."""

    key: str
    label: str


Audience = Literal["wall", "phone"]


class PollTallyFrame(CamelModel):
    """A live frame, on SSE and on NATS `poll.v1.<evaluation>.tally` (platform `poll.tally`).

    Every frame carries the whole view, never a delta: `seq` grows by one per frame of a poll
    (the SSE id), so a client reconnecting with an older Last-Event-ID is sent the latest frame.
    - `wall` (the teacher's projection): `tally` with the cloud while "show votes" is on, with
      no idea at all while it is off (the wall keeps the question alone); `pending` is real.
    - `phone` (participants): `tally` only while "show votes" is on, `pending` 0; `sharedList`
      always: the visible ideas as a list, without counts.
    """

    v: Literal[1] = 1
    type: Literal["poll.tally"] = "poll.tally"
    evaluation_id: str
    seq: int = Field(ge=1)
    audience: Audience
    tally: PollTally | None
    shared_list: list[PollSharedIdea] | None = None
    server_now: datetime


# --- The teacher's board (staff only) ----------------------------------------------------------


class PollIdeaVariant(CamelModel):
    """One idea key on the board: its typed text, correction, source, count, status.

    `newSpellings` is this service's addition (issue 21): for an approved key, the spellings
    participants hold now, as the room would read them, that the teacher has not approved —
    the room does not read them until the teacher approves the key with them. `onWall`
    (issue 34): what the room reads of it, so a new spelling is shown beside what the wall has.
    """

    key: str
    text: str = Field(
        description="As participants typed it: the most typed spelling (a tie: the first met)."
    )
    correction: str | None = Field(description="The model's corrected form; the room reads it.")
    ai: bool = Field(description="The decision on it is the model's (source ai).")
    count: int = Field(ge=0)
    status: IdeaStatus
    new_spellings: list[str] = Field(
        default_factory=list,
        description="An approved key's spellings not approved yet (as the room would read them).",
    )
    on_wall: str | None = Field(
        default=None,
        max_length=200,
        description=(
            "What the room reads of it while it is visible (its correction, else its approved "
            "spelling), else null; issue 34: the board shows it beside a new spelling."
        ),
    )


class PollIdeaCluster(CamelModel):
    """Ideas grouped by the merges: headed by the end of the `mergedInto` chain."""

    key: str = Field(description="The head's idea key.")
    label: str
    renamed: bool
    count: int = Field(ge=0, description="Participants with a VISIBLE idea in the cluster.")
    total: int = Field(ge=0, description="Participants with any idea in the cluster.")
    variants: list[PollIdeaVariant]


class PollAiError(StrEnum):
    """Why the AI assistance stopped judging, as the platform's board shows it (PollAiError).

    The platform's LLM vocabulary (`LLM_ERROR_CODES`) plus `run_cap`; the gateway's own codes
    map onto it (`quiz_poll.domain.ai_run.board_error`).
    """

    not_configured = "not_configured"
    key_unreadable = "key_unreadable"
    budget_exhausted = "budget_exhausted"
    auth_failed = "auth_failed"
    rate_limited = "rate_limited"
    refused = "refused"
    invalid_output = "invalid_output"
    timeout = "timeout"
    provider_error = "provider_error"
    run_cap = "run_cap"


AI_RUN_CAP = 200  # model calls one poll may make (ADR-072 §12, `run_cap`)


class PollAiState(CamelModel):
    """The board's AI line: a model can be called, the switch, the last failure.

    `calls` and `runCap` are this service's additions to the platform's shape (the board shows
    the run's call count against its cap, issue 16); the run restarts at 0 when AI is switched on.
    `model`, `provider` and `demo` too (issue 34): the notices name the provider configured.
    """

    available: bool
    on: bool
    error: PollAiError | None
    calls: int = Field(default=0, ge=0, description="Model calls made by this run.")
    run_cap: int = Field(default=AI_RUN_CAP, ge=1, description="The most a run may make.")
    model: str | None = Field(
        default=None,
        max_length=200,
        description="The model the gateway calls for purpose poll, as it reports it (issue 34).",
    )
    provider: str | None = Field(
        default=None,
        max_length=200,
        description=(
            "Who runs that model, as the gateway names it (`AvailabilityReply.providers`: "
            "Anthropic, or the self-hosted server's name; issue 31), else read from its id "
            "(`claude-…`: Anthropic); null unknown."
        ),
    )
    demo: bool = Field(
        default=False,
        description="The gateway answers with the demo's canned replies (`make run DEMO=1`).",
    )


class PollIdeaBoard(CamelModel):
    """`GET /app/api/evaluations/:id/poll/ideas`: every idea, hidden and unmoderated included.

    Staff only: it never reaches a phone or the wall. Also the answer of POST …/poll/ideas.
    """

    moderation: bool
    ai: PollAiState
    answered: int = Field(ge=0)
    pending: int = Field(ge=0)
    clusters: list[PollIdeaCluster]


# --- What the teacher writes --------------------------------------------------------------------

IdeaKeyField = Annotated[str, StringConstraints(min_length=1, max_length=IDEA_KEY_MAX)]
Keys = Annotated[list[IdeaKeyField], Field(min_length=1, max_length=ACTION_KEYS_MAX)]


Spelling = Annotated[str, StringConstraints(min_length=1, max_length=IDEA_KEY_MAX)]


class StatusAction(CamelModel):
    """approve, hide, or reset (back to unmoderated) each key.

    `spellings` (approve only; this service's addition): the spellings the teacher saw on the
    board for these keys (`text` and `newSpellings`); each is approved for the key it keys to,
    if somebody holds it. Without it, approving a key approves the text the board lists for it
    now, and only that one.
    """

    action: Literal["approve", "hide", "reset"]
    keys: Keys
    spellings: list[Spelling] | None = Field(default=None, max_length=ACTION_KEYS_MAX)


class MergeAction(CamelModel):
    """Put the clusters of `keys` under the cluster of `into`."""

    action: Literal["merge"]
    keys: Keys
    into: IdeaKeyField


class DetachAction(CamelModel):
    """Take ideas out of their cluster."""

    action: Literal["detach"]
    keys: Keys


class RenameAction(CamelModel):
    """Name the cluster of `key`; null or blank drops the name."""

    action: Literal["rename"]
    key: IdeaKeyField
    label: Annotated[str, StringConstraints(strip_whitespace=True, max_length=IDEA_LABEL_MAX)] | (
        None
    )


PollIdeaAction = Annotated[
    StatusAction | MergeAction | DetachAction | RenameAction, Field(discriminator="action")
]


class PollSettings(CamelModel):
    """The poll's switches as the views carry them (platform `PollSettings`).

    `anonymous` is derived from the audience. `moderation` defaults to ON for an anonymous
    poll and OFF for a classroom's (ADR-071 §4); `ai` is off by default (ADR-072 §1).
    """

    anonymous: bool
    revealed: bool = False
    votes: bool = False
    moderation: bool = False
    ai: bool = False


class PollPageSettings(PollSettings):
    """`GET …/poll/settings`: the switches plus the question as the pages need it.

    This service's addition (issue 16): the participant page disables "Add" at `maxIdeas`
    rather than learning it from a 422, and the wall titles the cloud with the `prompt`.
    Issue 34: the model the poll's AI would call, who runs it, and whether it is the demo's
    canned replies, so the pages' notices name what is actually configured.
    """

    prompt: str = Field(default="", max_length=20_000)
    max_ideas: int = Field(default=DEFAULT_MAX_IDEAS, ge=1, le=MAX_IDEAS_LIMIT)
    ai_model: str | None = Field(
        default=None, max_length=200, description="As `PollAiState.model` (issue 34)."
    )
    ai_provider: str | None = Field(
        default=None, max_length=200, description="As `PollAiState.provider` (issue 34)."
    )
    demo: bool = Field(default=False, description="As `PollAiState.demo` (issue 34).")


class PollRevealBody(CamelModel):
    """`POST …/poll/reveal`: the display switches; an omitted one stays; naming none is refused."""

    revealed: bool | None = None
    votes: bool | None = None
    moderation: bool | None = None
    ai: bool | None = None

    @model_validator(mode="after")
    def _names_a_switch(self) -> PollRevealBody:
        if all(v is None for v in (self.revealed, self.votes, self.moderation, self.ai)):
            raise ValueError("name at least one of `revealed`, `votes`, `moderation` and `ai`")
        return self


# --- The edge with the platform's poll (ADR-014 sessions stay the platform's) -------------------

_EVALUATION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EvaluationId = Annotated[str, StringConstraints(pattern=_EVALUATION_ID.pattern)]


class AnonymousAudience(CamelModel):
    """Anyone with the code; guests answer without an account."""

    kind: Literal["anonymous"]


class ClassroomAudience(CamelModel):
    """The classroom's roster and staff, signed in."""

    kind: Literal["classroom"]
    classroom_id: str


PollAudience = Annotated[AnonymousAudience | ClassroomAudience, Field(discriminator="kind")]


class MaskedPerson(CamelModel):
    """A person the poll knows, whose name and e-mail never leave for the model (§14)."""

    given_name: str = Field(default="", max_length=200)
    family_name: str = Field(default="", max_length=200)
    email: str = Field(default="", max_length=320)


class BrainstormQuestion(CamelModel):
    """The brainstorm config as the poll runs it: prompt and maxIdeas (qt-brainstorm schema)."""

    prompt: str = Field(min_length=1, max_length=20_000)
    max_ideas: int = Field(default=DEFAULT_MAX_IDEAS, ge=1, le=MAX_IDEAS_LIMIT)


class BrainstormOpen(CamelModel):
    """The platform opened a brainstorm for an evaluation (or ran one again: `againOf`).

    A run again is a new evaluation and starts with no mark, no answer and AI off (ADR-071 §3).
    `teacherId` runs the poll and is billed for its AI calls (ADR-072 §12).
    """

    evaluation_id: EvaluationId
    again_of: EvaluationId | None = None
    teacher_id: str = Field(min_length=1, max_length=200)
    audience: PollAudience
    question: BrainstormQuestion
    roster: list[MaskedPerson] = Field(
        default_factory=list, description="A classroom's roster; empty for an anonymous poll."
    )
    # With its offset, as review's times: a naive time would be read in the host's zone.
    opened_at: AwareDatetime


class BrainstormClose(CamelModel):
    """The platform's End: no answer after this; 30 days later the poll freezes."""

    evaluation_id: EvaluationId
    closed_at: AwareDatetime  # with its offset, as `openedAt`


class PollParticipant(CamelModel):
    """Who answers, from the platform's JWT grant: the attempt, and a guest or an account."""

    attempt_id: str = Field(min_length=1, max_length=200)
    kind: Literal["guest", "account"]
    user_id: str | None = Field(default=None, max_length=200)

    @model_validator(mode="after")
    def _account_has_user(self) -> PollParticipant:
        if (self.kind == "account") != (self.user_id is not None):
            raise ValueError("an account has a userId and a guest has none")
        return self


class PollJoin(CamelModel):
    """A participant joined (an attempt opened); an account brings its name, for masking."""

    evaluation_id: EvaluationId
    participant: PollParticipant
    person: MaskedPerson | None = None


# --- The AI run state (`poll_ai_runs`) ----------------------------------------------------------


class PollAiRun(CamelModel):
    """One poll's AI passes: the lease, the heartbeat, the call count and the last failure.

    `leaseAt` is held by the one pass that may run (it names the pass: a job whose lease is no
    longer the row's does nothing); `heartbeatAt` moves at every batch; `errorAt` dates
    `error` for the 30 s cool-down (ADR-072 §13).
    """

    evaluation_id: EvaluationId
    lease_at: datetime | None = None
    heartbeat_at: datetime | None = None
    calls: int = Field(default=0, ge=0)
    error: PollAiError | None = None
    error_at: datetime | None = None


class PollAck(CamelModel):
    """The reply of `poll.v1.open`, `poll.v1.close` and `poll.v1.join`: the poll as it stands."""

    ok: Literal[True] = True
    evaluation_id: str
    settings: PollSettings
    joined: int = Field(ge=0)
    answered: int = Field(ge=0)
    closed: bool
    frozen: bool


class PollAiJob(CamelModel):
    """`poll.v1.ai.jobs` (stream POLL_AI, work queue): run the AI pass of one poll.

    Published when an answer claims the poll's lease; `lease` (epoch seconds) is the lease the
    pass holds, `dueAt` when it starts (3 s after the claim, so the ideas typed meanwhile share
    a call). Any replica may run it; the message id is `<evaluation>:<lease>` (one job a lease).
    """

    evaluation_id: EvaluationId
    lease: float
    due_at: datetime

"""The poll's tables on SQLite and PostgreSQL: migrations, the answers' order, the conditional
writes (the model never overwrites a mark; the AI lease across writers), the freeze's purge."""

from __future__ import annotations

import asyncio

import pytest

from quiz_contracts.errors import ContractError
from quiz_contracts.poll import IdeaMark, MaskedPerson, PollAiError, PollParticipant
from quiz_poll.models import MIGRATIONS
from quiz_poll.repository import AnswerToSave, NewPoll, PollRepository
from quiz_poll.service import answer_writer
from quiz_servicekit.db import Database
from quiz_servicekit.migrate import upgrade

pytestmark = [pytest.mark.integration]

T0 = 1_800_000_000.0


def guest(a: str) -> PollParticipant:
    return PollParticipant(attempt_id=a, kind="guest")


def account(a: str, user: str) -> PollParticipant:
    return PollParticipant(attempt_id=a, kind="account", user_id=user)


async def repo_at(url: str) -> PollRepository:
    await asyncio.to_thread(upgrade, url, MIGRATIONS)
    repo = PollRepository(Database(url, threads=8))
    await repo.open(
        NewPoll(
            evaluation_id="ev1",
            again_of=None,
            teacher_id="t1",
            anonymous=True,
            classroom_id=None,
            prompt="Vivant ?",
            max_ideas=5,
            roster=[MaskedPerson(given_name="Ada", family_name="Lovelace")],
            moderation=True,
        ),
        T0,
    )
    return repo


async def test_answers_keep_their_first_order_and_versions_grow(database_url: str) -> None:
    repo = await repo_at(database_url)
    v1 = await repo.save_answer("ev1", guest("a1"), ["eau"], T0)
    v2 = await repo.save_answer("ev1", account("a2", "u2"), ["air"], T0)
    v3 = await repo.save_answer("ev1", guest("a1"), ["eau", "feu"], T0)
    assert v1 < v2 < v3
    state = await repo.state("ev1")
    assert state is not None
    assert state.answers == [("a1", {"ideas": ["eau", "feu"]}), ("a2", {"ideas": ["air"]})]
    assert [j.participant.kind for j in state.joined] == ["guest", "account"]
    assert state.poll.roster[0].family_name == "Lovelace"
    assert (
        await repo.open(  # idempotent: the first open stays
            NewPoll("ev1", None, "t2", False, "c", "x", 3, [], False), T0
        )
        is False
    )
    repo.db.close()


async def test_a_batch_of_answers_is_one_row_per_participant_in_first_order(
    database_url: str,
) -> None:
    """The group commit (`save_answers`): a participant tapping twice within one batch is stored
    once, in its first tap's place, with its last answer; each item still gets its own version,
    consecutive in the order given; a poll that refuses answers refuses only its own items."""
    repo = await repo_at(database_url)
    v0 = await repo.save_answer("ev1", guest("a0"), ["sol"], T0)
    batch = [
        AnswerToSave("ev1", guest("a1"), ["eau"]),
        AnswerToSave("ev1", account("a2", "u2"), ["air"]),
        AnswerToSave("nowhere", guest("a9"), ["x"]),
        AnswerToSave("ev1", guest("a1"), ["eau", "feu"]),
        AnswerToSave("ev1", guest("a0"), ["sol", "l'été"]),
    ]
    out = await repo.save_answers(batch, T0 + 1)
    assert isinstance(out[2], ContractError) and out[2].code.value == "not_found"
    versions = [v for v in out if isinstance(v, int)]
    assert versions == list(range(v0 + 1, v0 + 5))
    state = await repo.state("ev1")
    assert state is not None
    assert state.answers == [
        ("a0", {"ideas": ["sol", "l'été"]}),
        ("a1", {"ideas": ["eau", "feu"]}),
        ("a2", {"ideas": ["air"]}),
    ]
    assert [(j.participant.attempt_id, j.participant.kind) for j in state.joined] == [
        ("a0", "guest"),
        ("a1", "guest"),
        ("a2", "account"),
    ]
    assert state.poll.version == versions[-1]
    repo.db.close()


async def test_the_model_never_overwrites_a_mark(database_url: str) -> None:
    repo = await repo_at(database_url)
    await repo.write_marks(
        "ev1", [IdeaMark(key="eau", status="hidden")], "t1", "poll.ideas", {"x": 1}, T0
    )
    written, version = await repo.write_ai_marks(
        "ev1",
        [
            IdeaMark(key="eau", status="approved", correction="Eau", source="ai"),
            IdeaMark(key="air", status="approved", correction="Air", source="ai"),
        ],
        T0,
    )
    assert [m.key for m in written] == ["air"] and version is not None
    marks = {m.key: m for m in (await repo.state("ev1")).marks}  # type: ignore[union-attr]
    assert marks["eau"].status == "hidden" and marks["eau"].source == "teacher"
    assert marks["air"].source == "ai"
    assert (await repo.audit("ev1"))[0]["action"] == "poll.ideas"
    repo.db.close()


async def test_the_lease_one_holder_cooldown_stale_and_cap(database_url: str) -> None:
    repo = await repo_at(database_url)
    # Many claimants at once (threads of one pool, as replicas would be): one wins.
    wins = await asyncio.gather(*(repo.claim("ev1", T0) for _ in range(8)))
    assert sum(wins) == 1
    assert await repo.beat("ev1", T0, T0 + 1) == 0
    assert await repo.beat("ev1", T0 + 99, T0 + 1) is None  # not the holder
    assert await repo.after_success("ev1", T0, T0 + 2)
    await repo.after_failure("ev1", T0, PollAiError.provider_error, T0 + 3)
    run = await repo.ai_run("ev1")
    assert run is not None and run.calls == 1 and run.lease_at is None
    assert run.error is PollAiError.provider_error
    assert not await repo.claim("ev1", T0 + 20)  # within 30 s of the failure
    assert await repo.claim("ev1", T0 + 34)
    assert not await repo.claim("ev1", T0 + 60)  # held, heartbeat fresh
    assert await repo.claim("ev1", T0 + 34 + 61)  # stale: its pass died
    repo.db.close()


async def test_each_lease_step_stores_the_row_its_pure_rule_gives(database_url: str) -> None:
    """The repository runs `domain.ai_run`: after every step the stored row is the rule's row,
    times as the epoch seconds given (the lease is compared by value, never rounded)."""
    repo = await repo_at(database_url)
    lease = T0 + 0.123456789  # more digits than a datetime keeps

    async def stored() -> tuple[object, ...]:
        run = await repo.ai_run("ev1")
        assert run is not None
        return (run.lease_at, run.heartbeat_at, run.calls, run.error, run.error_at)

    assert await repo.claim("ev1", lease)
    assert await stored() == (lease, lease, 0, None, None)  # ai_run.claim
    assert await repo.start_pass("ev1", lease, T0 + 3)
    assert not await repo.start_pass("ev1", lease, T0 + 4)  # its pass beats: pass_running
    assert await repo.beat("ev1", lease, T0 + 5) == 0  # ai_run.heartbeat
    await repo.pause("ev1", lease)
    assert await stored() == (lease, None, 0, None, None)  # ai_run.pause
    assert await repo.start_pass("ev1", lease, T0 + 6)  # paused: no pass holds the job
    assert await repo.after_success("ev1", lease, T0 + 7)
    assert await stored() == (lease, T0 + 7, 1, None, None)  # ai_run.after_success
    await repo.after_failure("ev1", lease, PollAiError.timeout, T0 + 8)
    assert await stored() == (None, T0 + 8, 1, PollAiError.timeout, T0 + 8)  # after_failure
    assert not await repo.after_success("ev1", lease, T0 + 9)  # ai_run.holds: not any more
    assert await repo.claim("ev1", T0 + 40)
    await repo.release("ev1", T0 + 40, T0 + 41)
    assert await stored() == (None, T0 + 41, 1, PollAiError.timeout, T0 + 8)  # ai_run.release
    await repo.set_switches(
        "ev1",
        votes=False,
        moderation=True,
        ai=True,
        retroactive=[],
        run="on",
        actor="t1",
        record={},
        now=T0 + 50,
    )
    assert await stored() == (None, T0 + 50, 0, None, None)  # ai_run.switch_on
    repo.db.close()


async def test_an_answer_that_breaks_its_batch_fails_alone(database_url: str) -> None:
    """The service's group commit of answers (`answer_writer`): a batch whose transaction fails
    is written again answer by answer, so the others are stored and only the bad one fails."""
    repo = await repo_at(database_url)
    writer = answer_writer(repo, lambda: T0)
    bad = AnswerToSave("ev1", guest("a2"), [b"\xff"])  # type: ignore[list-item]  # no JSON
    items = [
        AnswerToSave("ev1", guest("a1"), ["eau"]),
        bad,
        AnswerToSave("ev1", guest("a3"), ["air"]),
    ]
    results = await asyncio.gather(*(writer.submit(i) for i in items), return_exceptions=True)
    assert isinstance(results[1], TypeError)
    assert isinstance(results[0], int) and isinstance(results[2], int)
    state = await repo.state("ev1")
    assert state is not None
    assert state.answers == [("a1", {"ideas": ["eau"]}), ("a3", {"ideas": ["air"]})]
    await writer.close()
    repo.db.close()


async def test_freeze_keeps_the_view_and_purges_guests(database_url: str) -> None:
    repo = await repo_at(database_url)
    await repo.save_answer("ev1", guest("g1"), ["eau"], T0)
    await repo.save_answer("ev1", account("a1", "u1"), ["air"], T0)
    await repo.close("ev1", T0 + 10)
    assert await repo.due_freeze(T0 + 5) == []
    assert await repo.due_freeze(T0 + 10) == ["ev1"]
    version = await repo.freeze("ev1", {"tally": {}, "board": {}}, T0 + 20)
    assert version > 0
    assert await repo.freeze("ev1", {}, T0 + 21) == 0  # once
    state = await repo.state("ev1")
    assert state is not None and state.poll.frozen_view == {"tally": {}, "board": {}}
    assert state.answers == [("a1", {"ideas": ["air"]})]
    assert [j.participant.attempt_id for j in state.joined] == ["a1"]
    repo.db.close()

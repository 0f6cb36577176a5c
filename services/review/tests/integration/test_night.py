"""The night (task llm.review) with the real gateway: the Zurich window on a normal and on a DST
night, newest first, the share of the cap (stops before crossing, allows equality, asked of the
gateway before each call), failed versions retried the next night only, one replica at a time."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from quiz_review.domain.prompt import platform_prompt_chars, review_request
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys

from .conftest import Bus, Clock, Review, eventually, mcq, open_bus, running_review

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ZURICH = ZoneInfo("Europe/Zurich")
# What the stub says each call used: 1000 in, 1000 out = 0.012 USD at claude-sonnet-5-5's
# 2 / 10 USD per MTok (the gateway's default review model and price, the platform's).
CALL_USAGE = {"input_tokens": 1000, "output_tokens": 1000}
CALL_USD = Decimal("0.012")


def zurich(text: str, fold: int = 0) -> datetime:
    """A Zurich wall-clock time as an aware UTC instant (fold=1: the second 02:xx in October)."""
    return datetime.fromisoformat(text).replace(tzinfo=ZURICH, fold=fold).astimezone(UTC)


def clean() -> StubReply:
    return StubReply.tool({"findings": []}, usage=CALL_USAGE)


def prompts_sent(stub: AnthropicStub) -> list[str]:
    """The statement of each question the model was sent, in call order."""
    out = []
    for req in stub.requests:
        content = req.body["messages"][0]["content"]
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        document = text.split("-----\n", 1)[1].split("\n-----", 1)[0]
        out.append(json.loads(document)["config"]["prompt"])
    return out


async def opted_in_version(review: Review, pool: str, **kwargs: Any) -> dict[str, Any]:
    await review.enable_pool(pool)
    return await review.publish_version(pool_id=pool, **kwargs)


@pytest.mark.parametrize(
    ("night", "instants"),
    [
        pytest.param(
            "normal",
            [
                (zurich("2026-07-01T00:59"), False),
                (zurich("2026-07-01T01:00"), True),
                (zurich("2026-07-01T05:59"), True),
                (zurich("2026-07-01T06:00"), False),
            ],
            id="summer-night",
        ),
        pytest.param(
            "spring DST (02:00 → 03:00)",
            [
                (zurich("2026-03-29T00:59"), False),
                (zurich("2026-03-29T01:00"), True),
                (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), True),  # 03:00 CEST, just after the jump
                (zurich("2026-03-29T05:59"), True),
                (zurich("2026-03-29T06:00"), False),
            ],
            id="spring-dst-night",
        ),
        pytest.param(
            "autumn DST (03:00 → 02:00)",
            [
                (zurich("2026-10-25T00:59"), False),
                (zurich("2026-10-25T01:00"), True),
                (zurich("2026-10-25T02:30", fold=1), True),  # the second 02:30 (CET)
                (zurich("2026-10-25T05:59"), True),
                (zurich("2026-10-25T06:00"), False),
            ],
            id="autumn-dst-night",
        ),
    ],
)
async def test_the_window(
    review_sqlite: Review, stub: AnthropicStub, night: str, instants: list[tuple[datetime, bool]]
) -> None:
    review = review_sqlite
    waiting = 0  # versions published but not yet reviewed (outside the window)
    for at, works in instants:
        stub.reset()
        stub.script(clean(), clean())
        waiting += 1
        version = await opted_in_version(review, "pool-window")
        review.clock.at = at
        run = await review.service.run_night()
        label = f"{night} at {at.astimezone(ZURICH):%H:%M %Z} ({at:%H:%M} UTC)"
        assert (run.outcome != "outside_window") == works, label
        assert len(stub.requests) == (waiting if works else 0), label
        waiting = 0 if works else waiting
        row = await review.service.repo.review_of(version["versionId"])
        assert (row is not None) == works, label


async def test_failed_is_retried_the_next_night_only(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    review = review_sqlite
    version = await opted_in_version(review, "pool-retry")
    review.clock.at = zurich("2026-07-01T01:30")
    stub.script(StubReply.error(500))
    run = await review.service.run_night()
    assert run.outcome == "done" and run.failed == 1
    row = await review.service.repo.review_of(version["versionId"])
    assert row is not None and row.state.value == "failed"

    # Later the same night: failed today, not a candidate.
    review.clock.at = zurich("2026-07-01T04:00")
    stub.script(clean())
    run = await review.service.run_night()
    assert run.candidates == 0 and stub.pending == 1

    # The next night: failed before today's Zurich midnight, reviewed again.
    review.clock.at = zurich("2026-07-02T01:05")
    run = await review.service.run_night()
    assert run.reviewed == 1 and stub.pending == 0
    row = await review.service.repo.review_of(version["versionId"])
    assert row is not None and row.state.value == "clean"


async def test_only_opted_in_live_latest_reviewable(
    review_sqlite: Review, stub: AnthropicStub
) -> None:
    review = review_sqlite
    review.clock.at = zurich("2026-07-01T02:00")
    await review.enable_pool("pool-in")
    latest = await review.publish_version(pool_id="pool-in", config=mcq("Latest?"))
    await review.publish_version(
        question_id=latest["questionId"],
        pool_id="pool-in",
        version_number=2,
        config=mcq("Newer?"),
    )
    await review.publish_version(pool_id="pool-off", config=mcq("Off?"))
    await review.publish_version(pool_id="pool-in", type="diagram", config={"configVersion": 1})
    retired = await review.publish_version(pool_id="pool-in", config=mcq("Retired?"))
    await review.publish(
        "questions.v1.question.retired",
        {"questionId": retired["questionId"], "retiredAt": "2026-07-01T13:00:00Z"},
        f"retired:{retired['questionId']}",
    )

    async def not_live() -> bool:
        v = await review.service.repo.version(retired["versionId"])
        return v is not None and not v.live

    await eventually(not_live, "the retirement")
    stub.script(clean(), clean())
    run = await review.service.run_night()
    assert run.reviewed == 1
    assert prompts_sent(stub) == ["Newer?"]


async def estimate_usd(review: Review, config: dict[str, Any]) -> Decimal:
    """The worst case the night compares for the review call of `config`: the platform's
    (FACTS E), computed by the gateway from the prompt's size as the platform counts it."""
    chars = platform_prompt_chars(config, "")
    usage = await review.service.usage(review_request("mcq", config, "", user=None), chars)
    assert usage.share_estimate_usd is not None and usage.estimate_usd is not None
    # (ceil(chars / 3) × $2 + 4000 × $10) / 10⁶ at sonnet-5-5; below the hold's byte bound.
    expected = (Decimal(-(-chars // 3)) * 2 + 4000 * 10) / 1_000_000
    assert usage.share_estimate_usd == expected < usage.estimate_usd
    return usage.share_estimate_usd


# Four versions of the same size (so the same worst case), published oldest A to newest D.
PROMPTS = ["Question A ?", "Question B ?", "Question C ?", "Question D ?"]


@pytest.mark.parametrize(
    ("margin_usd", "expected"),
    [
        pytest.param(Decimal(0), ["Question D ?", "Question C ?", "Question B ?"], id="equality"),
        pytest.param(Decimal("-0.000001"), ["Question D ?", "Question C ?"], id="a-micro-under"),
    ],
)
async def test_the_share_stops_before_crossing_and_allows_equality(
    bus: Bus,
    review_sqlite: Review,
    stub: AnthropicStub,
    signing_keys: SigningKeys,
    tmp_path: Path,
    margin_usd: Decimal,
    expected: list[str],
) -> None:
    """share = 25 % of the cap = 2 calls spent + the worst case of the third (+ margin).

    With equality the third call is made (spent + worst == share) and the fourth would cross;
    one micro-dollar of share less and the night stops after two. Newest published first.
    """
    worst = await estimate_usd(review_sqlite, mcq(PROMPTS[0]))
    for prompt in PROMPTS[1:]:
        assert await estimate_usd(review_sqlite, mcq(prompt)) == worst
    share = 2 * CALL_USD + worst + margin_usd
    cap = share * 4  # LLM_REVIEW_NIGHT_SHARE 0.25
    with open_bus(stub, tmp_path / "capped", LLM_DAILY_CAP_USD=str(cap)) as own:
        clock = Clock(zurich("2026-07-01T01:10"))
        async with running_review(
            own.url, signing_keys, f"sqlite:///{tmp_path / 'r.db'}", clock
        ) as review:
            for day, prompt in enumerate(PROMPTS, start=1):
                await opted_in_version(
                    review,
                    "pool-share",
                    config=mcq(prompt),
                    published_at=f"2026-06-0{day}T10:00:00+02:00",
                )
            stub.script(*[clean() for _ in PROMPTS])
            run = await review.service.run_night()
            assert run.outcome == "share_spent"
            assert prompts_sent(stub) == expected
            budget = review.service.last_budget
            assert budget is not None and budget.share_usd == share and budget.cap_usd == cap
            assert budget.next_usd == worst
            assert budget.spent_usd == CALL_USD * len(expected)
            # It stopped because the next call would cross, never on the gateway's refusal.
            assert budget.spent_usd + worst > share
            assert budget.spent_usd <= share
            usage = await review.service.usage()
            assert usage.remaining_usd > worst
            # Another run tonight stops at once: the share is today's.
            stub.script(clean())
            again = await review.service.run_night()
            assert again.outcome == "share_spent" and again.reviewed == 0


async def test_two_replicas_one_runs_the_night(
    bus: Bus, stub: AnthropicStub, signing_keys: SigningKeys, database_url: str
) -> None:
    """Two replicas on one database (SQLite, PostgreSQL), started together: one runs."""
    db = database_url
    clock = Clock(zurich("2026-07-01T03:00"))
    async with (
        running_review(bus.url, signing_keys, db, clock) as one,
        running_review(bus.url, signing_keys, db, clock) as two,
    ):
        for i in range(3):
            await opted_in_version(one, "pool-replicas", config=mcq(f"Replica {i} ?"))
            # The second replica's consumers share the durable consumer: wait in the shared DB.
        stub.script(*[StubReply.slow(0.3, clean()) for _ in range(6)])
        runs = await asyncio.gather(one.service.run_night(), two.service.run_night())
        assert sorted(r.outcome for r in runs) == ["done", "lease_held"]
        assert sum(r.reviewed for r in runs) == 3
        assert len(stub.requests) == 3
        # Once the holder is done, the lease is free for the next hour's run (anyone's).
        stub.script(clean())
        await opted_in_version(two, "pool-replicas", config=mcq("Later ?"))
        run = await two.service.run_night()
        assert run.outcome == "done" and run.reviewed == 1


async def test_no_key_stops_the_night(
    stub: AnthropicStub, signing_keys: SigningKeys, tmp_path: Path
) -> None:
    """A gateway without a provider key: llm_not_configured ends the run, nothing is stored."""
    with open_bus(stub, tmp_path / "nokey", ANTHROPIC_API_KEY="") as own:
        clock = Clock(zurich("2026-07-01T02:00"))
        async with running_review(
            own.url, signing_keys, f"sqlite:///{tmp_path / 'r.db'}", clock
        ) as review:
            first = await opted_in_version(review, "pool-nokey", config=mcq("A ?"))
            await opted_in_version(review, "pool-nokey", config=mcq("B ?"))
            run = await review.service.run_night()
            assert run.outcome == "llm_not_configured" and run.reviewed == 0
            assert await review.service.repo.review_of(first["versionId"]) is None
            assert stub.requests == []

"""Fixtures: a migrated database, the real SDK against the stub, a gateway with a hand clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from quiz_llm_gateway.call.anthropic import AnthropicProvider
from quiz_llm_gateway.config import Settings
from quiz_llm_gateway.metrics import GatewayMetrics
from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.rows.tables import MIGRATIONS
from quiz_llm_gateway.service import Gateway
from quiz_servicekit.db import Database
from quiz_servicekit.metrics import ServiceMetrics
from quiz_servicekit.migrate import upgrade
from quiz_testkit.anthropic_stub import AnthropicStub

# 2026-11-29 12:00 UTC: an ordinary winter day in Zurich.
NOON = 1_795_953_600.0


class HandClock:
    """Wall and monotonic time the test moves by hand; sleeps advance it instantly."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@dataclass
class Rig:
    """A gateway wired to a real database and the real SDK pointed at the stub."""

    gateway: Gateway
    repo: Repository
    stub: AnthropicStub
    clock: HandClock
    registry: CollectorRegistry

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        value = self.registry.get_sample_value(name, labels or {})
        return value or 0.0


async def leased(repo: Repository) -> int:
    """Micro-USD the replicas' slices of the cap hold (issue 24): what `reserved_micros` still
    counts once every call is settled — free capacity of a replica, no call's hold."""
    return sum(amount for _, amount, _ in await repo.leases())


@pytest.fixture
async def migrated_url(database_url: str) -> str:
    await asyncio.to_thread(upgrade, database_url, MIGRATIONS)
    return database_url


def gateway_settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "anthropic_api_key": "test-key",
        "daily_cap_usd": Decimal("5"),
        "backoff_base_s": 0.2,
        "circuit_failures": 3,
        "circuit_cooldown_s": 30,
        "provider_max_retries": 3,
    }
    base.update(overrides)
    return Settings(**base)


@pytest.fixture
async def make_rig(
    migrated_url: str, anthropic_stub: AnthropicStub, tmp_path: Path
) -> AsyncIterator[Any]:
    """Build rigs with settings overrides; everything is closed after the test."""
    db = Database(migrated_url, threads=4)
    repo = Repository(db)
    providers: list[AnthropicProvider] = []

    def build(*, configured: bool = True, clock: HandClock | None = None, **overrides: Any) -> Rig:
        overrides.setdefault("settle_journal_dir", str(tmp_path / "journal"))
        settings = gateway_settings(**overrides)
        if not configured:
            settings.anthropic_api_key = None
        clock = clock or HandClock()
        provider = None
        if settings.anthropic_api_key:
            provider = AnthropicProvider(
                settings.anthropic_api_key,
                settings.anthropic_base_url or anthropic_stub.base_url,
                10,
                settings.provider_path,
            )
            providers.append(provider)
        registry = CollectorRegistry()
        gateway = Gateway(
            settings,
            repo,
            provider,
            GatewayMetrics(ServiceMetrics("llm-gateway", registry)),
            clock=clock.time,
            monotonic=clock.monotonic,
            sleep=clock.sleep,
        )
        gateways.append(gateway)
        return Rig(gateway, repo, anthropic_stub, clock, registry)

    gateways: list[Gateway] = []
    yield build
    for gateway in gateways:
        gateway.ledger.close()
    for provider in providers:
        await provider.close()
    db.close()

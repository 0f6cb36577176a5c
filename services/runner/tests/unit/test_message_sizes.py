"""Every NATS we ship takes the messages the contracts' maxima are derived from."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from quiz_contracts.bus import nats_accounts_config
from quiz_contracts.runner import MAX_REPLY_BYTES, MAX_REQUEST_BYTES, MESSAGE_HEADROOM
from quiz_contracts.subjects import NATS_MAX_PAYLOAD
from quiz_testkit.nats_server import nats_config

ROOT = Path(__file__).resolve().parents[4]


def max_payload_of(conf: str) -> int:
    found = re.search(r"^max_payload:\s*(\d+)\s*$", conf, re.MULTILINE)
    assert found, conf
    return int(found.group(1))


def test_maxima_derive_from_max_payload() -> None:
    assert MAX_REQUEST_BYTES == MAX_REPLY_BYTES == NATS_MAX_PAYLOAD - MESSAGE_HEADROOM
    # nats-server accepts up to 64 MB and advises 8 MB at most.
    assert NATS_MAX_PAYLOAD <= 8 * 1024 * 1024


def test_the_testkit_and_make_run_configure_it() -> None:
    # The open bus (a test asking for one) and the locked bus (the default, and make run's).
    assert max_payload_of(nats_config()) == NATS_MAX_PAYLOAD
    assert max_payload_of(nats_accounts_config()) == NATS_MAX_PAYLOAD
    devrun = (ROOT / "scripts" / "devrun.py").read_text()
    assert "nats_accounts_config(" in devrun and '"-c"' in devrun


def test_compose_configures_it() -> None:
    conf = (ROOT / "deploy" / "nats" / "accounts.conf").read_text()
    assert max_payload_of(conf) == NATS_MAX_PAYLOAD
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    nats = compose["services"]["nats"]
    config_at = nats["command"][nats["command"].index("-c") + 1]
    assert f"./deploy/nats/accounts.conf:{config_at}:ro" in nats["volumes"]


def test_the_helm_values_configure_it() -> None:
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "nats-values.yaml").read_text())
    assert values["config"]["merge"]["max_payload"] == NATS_MAX_PAYLOAD
    assert values["config"]["jetstream"]["enabled"] is True

"""The whole system as `make run` starts it: six processes, discovery, probes, metrics, Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import psutil
import pytest

from quiz_contracts.subjects import SERVICE_NAMES
from quiz_testkit.nats_server import nats_connect
from quiz_testkit.system import System, promtool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["embedded-nats", "external-nats"])
def system(
    request: pytest.FixtureRequest, tmp_path: Path, nats_url: str
) -> Iterator[tuple[System, str]]:
    external = nats_url if request.param == "external-nats" else None
    sys_ = System(tmp_path, external)
    try:
        yield sys_, request.param
    finally:
        sys_.kill()


async def ping_names(nats_url: str) -> list[str]:
    nc = await nats_connect(nats_url)
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish("$SRV.PING", b"", reply=inbox)
    names = []
    try:
        while True:
            msg = await sub.next_msg(timeout=1.5)
            names.append(json.loads(msg.data)["name"])
    except nats.errors.TimeoutError:
        pass
    await nc.close()
    return sorted(names)


def test_make_run_brings_up_six_services_and_stops_clean(
    system: tuple[System, str], nats_url: str
) -> None:
    sys_, mode = system
    seen_nats, urls = sys_.wait_table()
    if mode == "external-nats":
        assert seen_nats == nats_url
    assert sorted(urls) == sorted(SERVICE_NAMES)
    assert asyncio.run(ping_names(seen_nats)) == sorted(SERVICE_NAMES)
    tool = promtool()
    with httpx.Client(timeout=10) as http:
        for name, url in urls.items():
            assert http.get(f"{url}/healthz").status_code == 200, name
            assert http.get(f"{url}/readyz").status_code == 200, name
            metrics = http.get(f"{url}/metrics")
            assert metrics.status_code == 200
            prefix = "quiz_" + name.replace("-", "_")
            assert f"{prefix}_http_requests_total" in metrics.text or prefix in metrics.text
            if tool:
                check = subprocess.run(
                    [tool, "check", "metrics"], input=metrics.content, capture_output=True
                )
                assert check.returncode == 0, (name, check.stdout, check.stderr)
    children = sys_.descendants()
    assert len(children) >= 6
    sys_.interrupt()
    time.sleep(0.5)
    alive = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], [p.cmdline() for p in alive]
    log = sys_.log.read_text(errors="replace")
    # Clean means each service drained its NATS connection before the broker stopped.
    assert "Application shutdown failed" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    if tool is None:
        pytest.skip("promtool is not installed: metrics were not checked by it")

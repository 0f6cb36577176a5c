"""The wall's frame rate in headless Chromium while a room answers, against the same wall idle.

Run: `uv run python bench/poll_wall.py [--seconds 6] [--rate 40]` (needs Debian's chromium;
without it the script says so and exits 0, so `make bench` goes on).

The poll service runs as its own process (real NATS with JetStream, SQLite, its production frame
interval of 0.25 s); a poll is opened over NATS (`poll.v1.open`, a classroom's: moderation off)
with "Show votes" on, and filled with 200 ideas typed by 50 participants, which the cloud
shows as its 60 biggest clusters (`CLOUD_CAP`: the contract's `PollTally.ideas` holds at most
60 bubbles, so a wall never draws 200). The wall is opened at 1920×1080.

Chromium's own timing: a requestAnimationFrame loop records `performance.now()` at every frame
the page produces, and a PerformanceObserver sums the main thread's long tasks (> 50 ms).
- baseline: the wall idle (the same bubbles, the packing settled), over `--seconds`;
- burst: over the same time, `--rate` answers per second (whole answers of new participants,
  two ideas each, half on existing clusters and half new), each moving counts, sizes and the
  cloud's membership, every frame of the service redrawn and re-packed by d3-force.
Prints frames per second, the p95 and worst frame interval, long-task time, and burst/baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from quiz_contracts import subjects
from quiz_contracts.poll import BrainstormOpen, PollAck
from quiz_servicekit.natsio import request
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, free_port, nats_connect

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
EV = "bench-wall"
WORDS = ["eau", "soleil", "racine", "feuille", "arbre", "graine", "fleur", "sève", "air", "sol"]

RECORDER = """
() => {
  window.__frames = [];
  window.__long = 0;
  performance.clearMeasures();
  const run = (window.__run = (window.__run || 0) + 1);  // a stopped loop never comes back
  window.__recording = true;
  new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long += e.duration; })
    .observe({ type: 'longtask', buffered: false });
  const loop = (t) => { if (!window.__recording || window.__run !== run) return;
                        window.__frames.push(t);
                        requestAnimationFrame(loop); };
  requestAnimationFrame(loop);
}
"""
STOP = """
() => {
  window.__recording = false;
  const f = window.__frames;
  const gaps = f.slice(1).map((t, i) => t - f[i]).sort((a, b) => a - b);
  const sum = (name) => performance.getEntriesByName(name).reduce((s, e) => s + e.duration, 0);
  const draws = performance.getEntriesByName('poll.draw').length;
  return { frames: f.length, span: f[f.length - 1] - f[0], gaps, long: window.__long,
           draw: sum('poll.draw'), draws, tick: sum('poll.tick'),
           bubbles: document.querySelectorAll('.bubble').length };
}
"""


def idea(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.randint(0, 30)}"


def figures(raw: dict[str, Any]) -> dict[str, float]:
    gaps = raw["gaps"] or [0.0]
    return {
        "fps": (raw["frames"] - 1) / (raw["span"] / 1000) if raw["span"] else 0.0,
        "p95_ms": gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))],
        "worst_ms": gaps[-1],
        "long_tasks_ms": raw["long"],
        "bubbles": raw["bubbles"],
        "redraws": raw["draws"],
        "draw_ms": raw["draw"],
        "tick_ms": raw["tick"],
    }


async def wait_http(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(300):
            try:
                await http.get(url)
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="each measure's length")
    parser.add_argument("--rate", type=float, default=40.0, help="answers per second (burst)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args()
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        print("poll wall bench skipped: the playwright package is missing (uv sync)")
        return 0
    if not Path(CHROMIUM).exists():
        print("poll wall bench skipped: headless Chromium is missing (apt-get install chromium)")
        return 0

    work = Path(tempfile.mkdtemp(prefix="bench-poll-wall-"))
    keys = SigningKeys.load_or_create(work / "keys")
    nats_server = NatsServer(work / "nats").start()
    port = free_port()
    env = {
        **os.environ,
        "NATS_URL": nats_server.url,
        "DATABASE_URL": f"sqlite:///{work / 'poll.db'}",
        "JWKS_FILE": str(keys.jwks_path),
        "HTTP_PORT": str(port),
        "LOG_LEVEL": "WARNING",
    }
    with (work / "poll.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quiz_poll.main"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        return asyncio.run(measure(args, keys, nats_server.url, f"http://127.0.0.1:{port}"))
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        nats_server.stop()
        shutil.rmtree(work, ignore_errors=True)


async def measure(args: argparse.Namespace, keys: SigningKeys, nats_url: str, url: str) -> int:
    """Fills the poll, opens the wall, records the idle and the burst windows; prints them."""
    from playwright.async_api import async_playwright

    rng = random.Random(7)
    staff = keys.mint("teacher-1", {f"evaluation:{EV}": {"role": "owner"}})
    api = f"{url}/app/api/evaluations/{EV}/poll"

    def guest(n: int) -> dict[str, str]:
        grant = {"role": "viewer", "attempt": f"a{n}", "guest": True}
        return {"Authorization": f"Bearer {keys.mint(f'g{n}', {f'evaluation:{EV}': grant})}"}

    await wait_http(f"{url}/healthz")
    nc = await nats_connect(nats_url)
    body = BrainstormOpen.model_validate(
        {
            "evaluationId": EV,
            "teacherId": "teacher-1",
            "audience": {"kind": "classroom", "classroomId": "c1"},
            "question": {"prompt": "Le vivant ?", "maxIdeas": 5},
            "openedAt": datetime.now(UTC),
        }
    )
    await request(nc, subjects.POLL_OPEN, body, PollAck, timeout=10)
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(
            f"{api}/reveal", json={"votes": True}, headers={"Authorization": f"Bearer {staff}"}
        )
        r.raise_for_status()
        # 200 ideas: 50 participants × 4.
        await asyncio.gather(
            *(
                http.post(
                    f"{api}/answer",
                    json={"ideas": list(dict.fromkeys(idea(rng) for _ in range(4)))},
                    headers=guest(n),
                )
                for n in range(50)
            )
        )
        async with async_playwright() as p:
            browser = await p.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = await browser.new_page(viewport={"width": 1920, "height": 1080})
            await page.goto(f"{url}/poll/{EV}/wall?lang=en#token={staff}")
            await page.wait_for_selector(".bubble")
            await asyncio.sleep(4)  # the packing settles

            await page.evaluate(RECORDER)
            await asyncio.sleep(args.seconds)
            idle = figures(await page.evaluate(STOP))

            await page.evaluate(RECORDER)
            sent = 0
            start = time.monotonic()
            tasks = []
            while time.monotonic() - start < args.seconds:
                n = 1000 + sent
                ideas = [idea(rng), f"nouvelle idée {n}"]
                tasks.append(
                    asyncio.create_task(
                        http.post(f"{api}/answer", json={"ideas": ideas}, headers=guest(n))
                    )
                )
                sent += 1
                await asyncio.sleep(max(0.0, start + sent / args.rate - time.monotonic()))
            burst = figures(await page.evaluate(STOP))
            replies = await asyncio.gather(*tasks)
            assert all(r.status_code == 200 for r in replies)
            await browser.close()
    await nc.close()

    print(f"poll wall — headless Chromium 1920×1080, {args.seconds:.0f} s each, {sent} answers")
    print(
        f"{'':10}{'fps':>8}{'p95 ms':>9}{'worst ms':>10}{'long tasks ms':>15}{'bubbles':>9}"
        f"{'redraws':>9}{'redraw ms':>11}{'packing ms':>12}"
    )
    for name, f in (("baseline", idle), ("burst", burst)):
        print(
            f"{name:10}{f['fps']:8.1f}{f['p95_ms']:9.1f}{f['worst_ms']:10.1f}"
            f"{f['long_tasks_ms']:15.0f}{f['bubbles']:9.0f}{f['redraws']:9.0f}"
            f"{f['draw_ms']:11.0f}{f['tick_ms']:12.0f}"
        )
    ratio = burst["fps"] / idle["fps"] if idle["fps"] else 0.0
    print(f"burst/baseline fps: {ratio:.2f}x ({args.rate:.0f} answers/s)")
    if args.json:
        print(json.dumps({"baseline": idle, "burst": burst, "ratio": ratio, "answers": sent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

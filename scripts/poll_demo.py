"""`make poll-demo`: open a brainstorm in the system `make run` started, and print its pages.

The platform opens a poll over NATS (`poll.v1.open`); with no platform here, this does it, turns
"Show votes" on, and prints the wall, the moderation board (a teacher's token) and participant
pages (one guest token each), every token in the URL fragment as the pages expect it.

Options: --evaluation ID (default demo-<time>), --classroom (moderation starts off; default an
anonymous poll, moderation on), --participants N (default 3), --prompt TEXT, --max-ideas N.
Environment: NATS_URL (default: the bus `make run` started, as the platform's user of the locked
bus), POLL_URL (default: the poll `make run` started), both read from the URL file of the
running `make run` (.data/urls, scripts/runinfo.py), never assumed; QUIZ_DATA_DIR (the dev keys
and the URL file of `make run`, default .data).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import runinfo

ROOT = Path(__file__).resolve().parent.parent


async def open_poll(nats_url: str, body: dict[str, object]) -> dict[str, object]:
    import nats

    from quiz_servicekit.natsio import inbox_prefix_for, nats_servers

    async def quiet(_: Exception) -> None:
        pass  # the one failure is reported by main

    # No reconnect: a refused connection (wrong port, no credentials) fails at once.
    nc = await nats.connect(
        # NATS_URL may list a cluster's nodes, comma-separated (docs/operations.md).
        servers=nats_servers(nats_url),
        connect_timeout=3,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        error_cb=quiet,
        # The platform's own reply prefix: the locked bus lets it read no other inbox.
        inbox_prefix=inbox_prefix_for(nats_url),
    )
    try:
        msg = await nc.request("poll.v1.open", json.dumps(body).encode(), timeout=10)
    finally:
        await nc.close()
    reply: dict[str, object] = json.loads(msg.data)
    return reply


def running_urls(data: Path) -> tuple[str, str]:
    """The bus (as the locked bus's `platform` user) and the poll's URL of the `make run` of
    `data`, from its URL file (`.data/urls`); NotRunning when none runs there."""
    info = runinfo.read(data)
    bus = info.urls["nats"]
    if (data / "nats-credentials" / "platform.password").exists():
        bus = runinfo.with_credentials(bus, "platform", data)
    return bus, info.urls["poll"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluation", default=f"demo-{int(time.time())}")
    parser.add_argument("--classroom", action="store_true")
    parser.add_argument("--participants", type=int, default=3)
    parser.add_argument("--prompt", default="Qu'est-ce qui caractérise le vivant ?")
    parser.add_argument("--max-ideas", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "libs" / "testkit" / "src"))
    from quiz_testkit.jwt_keys import SigningKeys

    data = Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data"))
    keys = SigningKeys.load_or_create(data / "dev-keys")
    try:
        bus, poll = running_urls(data)
    except runinfo.NotRunning as e:
        if not (os.environ.get("NATS_URL") and os.environ.get("POLL_URL")):
            print(f"{e}; start `make run` first (or give both NATS_URL and POLL_URL)")
            return 1
        bus = poll = ""
    nats_url = os.environ.get("NATS_URL") or bus
    poll_url = (os.environ.get("POLL_URL") or poll).rstrip("/")
    ev = args.evaluation
    audience = (
        {"kind": "classroom", "classroomId": "demo"} if args.classroom else {"kind": "anonymous"}
    )
    body = {
        "evaluationId": ev,
        "teacherId": "teacher-1",
        "audience": audience,
        "question": {"prompt": args.prompt, "maxIdeas": args.max_ideas},
        "openedAt": datetime.now(UTC).isoformat(),
    }
    try:
        reply = asyncio.run(asyncio.wait_for(open_poll(nats_url, body), timeout=20))
    except Exception as e:  # said plainly: the usual cause is `make run` not running
        where = nats_url.split("@")[-1]  # never print the password
        print(
            f"could not open the poll over {where} ({e or type(e).__name__}); is `make run` "
            "running? (NATS_URL names another bus, as a user that may request poll.v1.open)"
        )
        return 1
    if reply.get("ok") is not True:
        print(f"poll.v1.open refused: {reply}")
        return 1
    staff = keys.mint("teacher-1", {f"evaluation:{ev}": {"role": "owner"}}, ttl_s=8 * 3600)
    r = httpx.post(
        f"{poll_url}/app/api/evaluations/{ev}/poll/reveal",
        json={"votes": True},
        headers={"Authorization": f"Bearer {staff}"},
        timeout=10,
    )
    if r.status_code != 200:
        print(f"could not show the votes: {r.status_code} {r.text}")
        return 1
    print(f"poll {ev} open ({'classroom' if args.classroom else 'anonymous'}), votes shown")
    print(f"wall:      {poll_url}/poll/{ev}/wall#token={staff}")
    print(f"board:     {poll_url}/poll/{ev}/moderate#token={staff}")
    for n in range(1, args.participants + 1):
        grant = {"role": "viewer", "attempt": f"{ev}-guest-{n}", "guest": True}
        token = keys.mint(f"guest-{n}", {f"evaluation:{ev}": grant}, ttl_s=8 * 3600)
        print(f"answer {n}:  {poll_url}/poll/{ev}/answer#token={token}")
    print("(add ?lang=fr or ?lang=en before the # to choose the language)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

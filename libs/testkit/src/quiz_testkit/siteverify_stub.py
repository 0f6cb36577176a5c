"""A Turnstile-compatible siteverify server for tests and benches: real HTTP, counted calls.

It answers `POST /turnstile/v0/siteverify` (form fields `secret`, `response`, optional
`remoteip` and `idempotency_key`) the way Cloudflare's documented endpoint does:
`{"success", "error-codes", "challenge_ts", "hostname", "action", "cdata"}`.

- a `secret` other than the stub's → `invalid-input-secret`; a missing one → `missing-input-secret`;
- a missing or empty `response` → `missing-input-response`;
- a token starting with `fail` → `invalid-input-response` (a token the widget never issued);
- a token used before → `timeout-or-duplicate` (tokens are single-use), unless the repeat
  carries the same `idempotency_key`;
- any other token → success, on `hostname`.

`status` other than 200 makes every call answer that status (the verifier is down); `calls`
records each call's form, so a test can assert that a request was refused before, or after,
verification.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from quiz_testkit.threaded_server import ThreadedServer

__all__ = ["SiteverifyStub", "VerifyCall"]

PATH = "/turnstile/v0/siteverify"
DEFAULT_SECRET = "test-siteverify-secret"  # noqa: S105 (a test server's own secret)


@dataclass(frozen=True, slots=True)
class VerifyCall:
    """One siteverify call as received: its form fields (the secret is kept for assertions)."""

    secret: str
    response: str
    remoteip: str | None
    idempotency_key: str | None


class SiteverifyStub(ThreadedServer):
    """The siteverify endpoint on a background thread; `url` is what a verifier is pointed at."""

    name = "siteverify-stub"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        secret: str = DEFAULT_SECRET,
        hostname: str = "localhost",
    ) -> None:
        super().__init__(host, port)
        self.secret = secret
        self.hostname = hostname
        self.status = 200
        self._lock = threading.Lock()
        self._calls: list[VerifyCall] = []
        self._spent: dict[str, str | None] = {}
        self.app = Starlette(routes=[Route(PATH, self._siteverify, methods=["POST"])])

    @property
    def url(self) -> str:
        """The full siteverify URL."""
        return f"http://{self.host}:{self.port}{PATH}"

    @property
    def calls(self) -> list[VerifyCall]:
        """A snapshot of the calls received so far, in order."""
        with self._lock:
            return list(self._calls)

    def reset(self) -> None:
        """Forget calls and spent tokens; answer 200 again."""
        with self._lock:
            self._calls.clear()
            self._spent.clear()
            self.status = 200

    # -- the endpoint (server thread) --------------------------------------------------------

    def _verdict(self, call: VerifyCall) -> list[str]:
        if not call.secret:
            return ["missing-input-secret"]
        if call.secret != self.secret:
            return ["invalid-input-secret"]
        if not call.response:
            return ["missing-input-response"]
        if call.response.startswith("fail"):
            return ["invalid-input-response"]
        if call.response in self._spent:
            same_key = call.idempotency_key is not None
            if not same_key or self._spent[call.response] != call.idempotency_key:
                return ["timeout-or-duplicate"]
        self._spent[call.response] = call.idempotency_key
        return []

    async def _siteverify(self, request: Request) -> Response:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))

        def field(name: str) -> str | None:
            values = form.get(name)
            return values[0] if values else None

        call = VerifyCall(
            secret=field("secret") or "",
            response=field("response") or "",
            remoteip=field("remoteip"),
            idempotency_key=field("idempotency_key"),
        )
        with self._lock:
            self._calls.append(call)
            status = self.status
            errors = self._verdict(call) if status == 200 else []
        if status != 200:
            return Response(b"upstream unavailable", status_code=status, media_type="text/plain")
        body: dict[str, object] = {"success": not errors, "error-codes": errors}
        if not errors:
            body |= {
                "challenge_ts": datetime.now(UTC).isoformat(timespec="seconds"),
                "hostname": self.hostname,
                "action": "",
                "cdata": "",
            }
        return Response(json.dumps(body).encode(), media_type="application/json")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the stub in the foreground (for trying the fix route by hand) until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m quiz_testkit.siteverify_stub")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8198)
    parser.add_argument("--secret", default=DEFAULT_SECRET)
    parser.add_argument("--hostname", default="localhost")
    args = parser.parse_args(argv)
    stub = SiteverifyStub(args.host, args.port, secret=args.secret, hostname=args.hostname)
    stub.serve_forever(lambda: f"siteverify stub on {stub.url} (secret {args.secret!r})")


if __name__ == "__main__":
    main()

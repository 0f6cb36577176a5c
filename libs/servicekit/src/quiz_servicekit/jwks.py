"""The identity provider's signing keys from a JWKS URL, fetched off the event loop (issue 29,
item 4).

PyJWT's `PyJWKClient` fetches with urllib on the calling thread: on the event loop, one token
with an unknown `kid` froze a service 3 s against a slow key server and 30 s per request against
a hung one. Here:

- the fetch runs in a worker thread (`asyncio.to_thread`), with its own deadline
  (`fetch_timeout_s`, the whole response, not each read) and a size cap (`MAX_JWKS_BYTES`);
- one fetch at a time (single flight): every request that needs it waits on the same one;
- a request waits for keys at most `wait_s` (2 s at most, JWKS_WAIT_S), then is answered 401; a
  request whose `kid` is known never waits, whatever a fetch is doing;
- an unknown `kid` triggers a refresh at most once per `min_refresh_s` (JWKS_MIN_REFRESH_S): a
  flood of tokens with invented `kid`s costs the key server one request per interval;
- keys older than `cache_s` (JWKS_CACHE_S) are refreshed in the background while the old ones
  keep answering; a failed fetch keeps the keys already held.

Shapes: `get(kid) -> PyJWK | None` (synchronous, from the cache only); `await
ready_for(token)` before it, on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable

import httpx
import jwt

log = logging.getLogger(__name__)

# A key set is a few keys of a few hundred bytes; anything this large is no key set.
MAX_JWKS_BYTES = 256 * 1024


class JwksFetchError(Exception):
    """The key server did not answer a usable key set within the deadline."""


def fetch_jwks(
    url: str, *, timeout_s: float, max_bytes: int = MAX_JWKS_BYTES
) -> dict[str, jwt.PyJWK]:
    """The keys of the JWKS document at `url`, by `kid` (blocking: run it in a thread).

    The whole response must arrive within `timeout_s` seconds (a server trickling one byte a
    second is cut off too) and hold at most `max_bytes`; JwksFetchError otherwise.
    """
    deadline = time.monotonic() + timeout_s
    body = bytearray()
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as client,
            client.stream("GET", url, headers={"accept": "application/json"}) as response,
        ):
            if response.status_code != 200:
                raise JwksFetchError(f"the key server answered {response.status_code}")
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise JwksFetchError(f"the key set is over {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise JwksFetchError(f"the key set took over {timeout_s} s")
        jwk_set = jwt.PyJWKSet.from_dict(json.loads(body))
    except (httpx.HTTPError, ValueError, jwt.PyJWTError) as e:
        raise JwksFetchError(f"no key set from the key server: {type(e).__name__}") from None
    return {k.key_id: k for k in jwk_set.keys if k.key_id is not None}


class JwksKeys:
    """The keys of one JWKS URL: cached, refreshed off the loop, waited for at most `wait_s`."""

    def __init__(
        self,
        url: str,
        *,
        wait_s: float = 2.0,
        fetch_timeout_s: float = 5.0,
        min_refresh_s: float = 30.0,
        cache_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        fetch: Callable[..., dict[str, jwt.PyJWK]] = fetch_jwks,
    ) -> None:
        self.url = url
        self._wait_s = wait_s
        self._fetch_timeout_s = fetch_timeout_s
        self._min_refresh_s = min_refresh_s
        self._cache_s = cache_s
        self._clock = clock
        self._fetch = fetch
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = -math.inf
        self._last_unknown_refresh = -math.inf
        self._last_own_refresh = -math.inf
        self._refresh: asyncio.Task[None] | None = None
        # Attempts started (each one request to the key server): tests and /metrics read it.
        self.fetches = 0

    def get(self, kid: str | None) -> jwt.PyJWK | None:
        """The cached key named `kid` (the only key, for a token without `kid`); no I/O."""
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    def start(self) -> None:
        """Begin the first fetch in the background (the lifespan calls it; nothing waits)."""
        self._start_refresh()

    async def stop(self) -> None:
        """Stop waiting for a fetch in flight (its thread ends at its own deadline)."""
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()

    async def ready_for(self, token: str) -> None:
        """Make the key of `token` cached if it can be within `wait_s`; never raises.

        A known `kid` returns at once (starting a background refresh when the keys are older
        than `cache_s`); an unknown one waits for the refresh in flight, or starts one when the
        last began `min_refresh_s` ago or more, else returns at once (the token is then refused).
        """
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            return  # malformed: verification refuses it without any key
        if self.get(kid) is not None:
            if self._clock() - self._fetched_at > self._cache_s:
                self._start_refresh()
            return
        task = self._start_refresh(for_unknown_kid=True)
        if task is None:
            return
        try:
            # shield: a request that stops waiting does not cancel the fetch the others share.
            await asyncio.wait_for(asyncio.shield(task), timeout=self._wait_s)
        except TimeoutError:
            log.warning("JWKS: no key set from %s within %.1f s", self.url, self._wait_s)

    def _start_refresh(self, *, for_unknown_kid: bool = False) -> asyncio.Task[None] | None:
        """The fetch in flight, or a new one; for an unknown `kid`, none when the last such
        refresh began under `min_refresh_s` ago (start-up and stale-cache refreshes are the
        service's own, once each, and do not count)."""
        if self._refresh is not None and not self._refresh.done():
            return self._refresh
        if for_unknown_kid:
            now = self._clock()
            if now - self._last_unknown_refresh < self._min_refresh_s:
                return None
            self._last_unknown_refresh = now
        elif self._clock() - self._last_own_refresh < self._min_refresh_s:
            return None  # a failing stale-cache refresh is retried once per interval too
        else:
            self._last_own_refresh = self._clock()
        self.fetches += 1
        self._refresh = asyncio.get_running_loop().create_task(self._run_fetch())
        return self._refresh

    async def _run_fetch(self) -> None:
        try:
            keys = await asyncio.to_thread(self._fetch, self.url, timeout_s=self._fetch_timeout_s)
        except JwksFetchError as e:
            # The keys held stay in use: a key server down does not log everyone out.
            log.warning("JWKS refresh from %s failed: %s", self.url, e)
            return
        self._keys = keys
        self._fetched_at = self._clock()
        log.info("JWKS: %d keys from %s", len(keys), self.url)

"""Verified tokens remembered until they expire: a phone sends the same token on every Add and
Remove (ADR-071 §8), so its signature is checked once, not at every tap.

The cache key is the whole token string: a different or altered token is a miss and is verified
in full (servicekit's `JwtVerifier`), so nothing is trusted that was not verified. An entry is
used only before the token's `exp` (and, for safety, at most `max_age_s`); the cache is bounded
(least recently used out first). A failed verification is never cached.
"""

from __future__ import annotations

import base64
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from quiz_servicekit.auth import Identity

CACHE_MAX = 50_000
MAX_AGE_S = 300.0


class CachingVerifier:
    """Wraps a verifier (`verify(token) -> Identity`) with a bounded, expiring cache."""

    def __init__(
        self,
        inner: Any,
        *,
        size: int = CACHE_MAX,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._inner = inner
        self._size = size
        self._max_age_s = max_age_s
        self._clock = clock
        self._cache: OrderedDict[str, tuple[Identity, float]] = OrderedDict()

    def verify(self, token: str) -> Identity:
        """The identity of a valid token (401 ContractError otherwise, from the inner verifier)."""
        now = self._clock()
        hit = self._cache.get(token)
        if hit is not None:
            identity, until = hit
            if now < until:
                self._cache.move_to_end(token)
                return identity
            del self._cache[token]
        identity = self._inner.verify(token)
        until = min(_expiry(token), now + self._max_age_s)
        if until > now:
            self._cache[token] = (identity, until)
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return identity


def _expiry(token: str) -> float:
    """The `exp` of a token that just verified (it is required); 0 when unreadable."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return 0.0

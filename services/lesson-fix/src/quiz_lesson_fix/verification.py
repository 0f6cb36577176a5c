"""Human verification of a fix request: a Turnstile-compatible siteverify call.

Seed 003: only the request's shape and size are checked before it; the finding lookup (the full
lesson checks), the rate limiter and the model come after, so an unverified request costs one
HTTP call and nothing else. The outcomes follow the tool's apps/api/src/lib/turnstile.js:

- a missing token, a refused or expired one, a hostname outside the allowed list → 403
  `verification_failed` (the editor asks for a fresh challenge);
- the verifier unreachable, answering garbage, or refusing our secret (`invalid-input-secret`,
  `missing-input-secret`, `bad-request`: our configuration, not the person's fault) → 502
  `verification_unavailable`, logged at error level.

Each call carries an `idempotency_key`, so siteverify would accept a retry of the same call; we
make one try per request (the editor's widget hands out a fresh token for the next one).
`remoteip` is not sent: behind the API gateway the peer is the proxy, and siteverify does not
need it.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Protocol

import httpx

from quiz_contracts.errors import ContractError, ErrorCode

log = logging.getLogger(__name__)

# Codes that say the secret or the call is wrong: every token would fail the same way.
_OUR_FAULT = frozenset({"missing-input-secret", "invalid-input-secret", "bad-request"})
_EXPIRED = frozenset({"timeout-or-duplicate", "invalid-input-response"})


class HumanVerifier(Protocol):
    """Checks a verification token; raises ContractError when the request may not go on."""

    async def verify(self, token: str) -> None: ...

    async def aclose(self) -> None: ...


class SiteverifyClient:
    """Verifies tokens against a siteverify endpoint (Cloudflare Turnstile's, or compatible)."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        hostnames: list[str] | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self._secret = secret
        self._hostnames = frozenset(hostnames or ())
        self._http = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False)

    async def verify(self, token: str) -> None:
        """Return when siteverify confirms `token`; else ContractError (403 or 502)."""
        if not token:
            raise ContractError(
                ErrorCode.verification_failed, "Human verification is required: no token was sent."
            )
        form = {"secret": self._secret, "response": token, "idempotency_key": str(uuid.uuid4())}
        outcome = await self._call(form)
        if outcome.get("success") is not True:
            codes = outcome.get("error-codes")
            codes = [str(c) for c in codes] if isinstance(codes, list) else []
            if _OUR_FAULT.intersection(codes):
                log.error("siteverify refuses our configuration: %s", ", ".join(codes))
                raise ContractError(
                    ErrorCode.verification_unavailable,
                    "Human verification is misconfigured on the server; try again later.",
                )
            if _EXPIRED.intersection(codes):
                raise ContractError(
                    ErrorCode.verification_failed,
                    "The verification expired or was already used: verify again and retry.",
                )
            detail = f" ({', '.join(codes)})" if codes else ""
            raise ContractError(
                ErrorCode.verification_failed, f"Human verification failed{detail}."
            )
        if self._hostnames and outcome.get("hostname") not in self._hostnames:
            raise ContractError(
                ErrorCode.verification_failed,
                "The verification was not solved on a site this service serves.",
            )

    async def _call(self, form: dict[str, str]) -> dict[str, Any]:
        try:
            response = await self._http.post(self.url, data=form)
            response.raise_for_status()
            outcome = response.json()
        except (httpx.HTTPError, ValueError) as e:
            log.warning("siteverify did not answer usably: %s", type(e).__name__)
            raise ContractError(
                ErrorCode.verification_unavailable,
                "Human verification is unavailable right now; try again in a moment.",
            ) from None
        if not isinstance(outcome, dict):
            raise ContractError(
                ErrorCode.verification_unavailable,
                "Human verification answered something unreadable; try again in a moment.",
            )
        return outcome

    async def aclose(self) -> None:
        await self._http.aclose()

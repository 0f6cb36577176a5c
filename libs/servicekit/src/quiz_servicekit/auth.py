"""JWT identity and grants: EdDSA or ES256 tokens verified against a JWKS file or URL.

Claims: `sub` (the person) and `grants`, e.g.
`{"question:42": {"role": "contributor", "type": "mcq", "pool": "7"}}`.
A missing grant answers 404 (invariant 6: what you may not reach does not exist for you);
a missing, forged, expired or oversized (over `MAX_TOKEN_BYTES`) token answers 401, and so
does one whose `exp`, `nbf` or `iat` is not a JSON number (`"1700000000"` is refused, as the
platform refuses it). Where an issuer and an audience are configured (always under
QUIZ_ENV=production, quiz_servicekit.settings), a token whose `iss` or `aud` differs, or lacks
them, answers 401 on every route.

Keys come from a JWKS file (read once) or a JWKS URL (quiz_servicekit.jwks: fetched off the
event loop, cached; a request waits for keys at most JWKS_WAIT_S, 2 s).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jwt
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_contracts.limits import MAX_TOKEN_BYTES
from quiz_servicekit.jwks import JwksKeys

ALGORITHMS = ["EdDSA", "ES256"]
# Times in seconds since the epoch (RFC 7519 NumericDate): a JSON number, never text.
NUMERIC_DATE_CLAIMS = ("exp", "nbf", "iat")
# A role reaches what every lower role reaches.
ROLE_RANK = {"viewer": 1, "contributor": 2, "owner": 3}


class Grant(BaseModel):
    """What the token says the person may do on one resource."""

    model_config = ConfigDict(extra="allow")

    role: str
    type: str | None = None
    pool: str | None = None

    def reaches(self, role: str) -> bool:
        return ROLE_RANK.get(self.role, 0) >= ROLE_RANK[role]


class Identity(BaseModel):
    """The verified caller: `sub` is never empty (a blank subject names nobody)."""

    sub: str = Field(min_length=1, pattern=r"\S")
    grants: dict[str, Grant] = Field(default_factory=dict)


class JwtVerifier:
    """Verifies tokens against the keys of a JWKS document (file read once, URL cached).

    `verify` never does I/O: with a JWKS URL, `remote_keys.ready_for(token)` (awaited by
    `current_identity`) fetches an unknown `kid`'s keys first, off the event loop.
    """

    def __init__(
        self,
        *,
        jwks_file: str | None = None,
        jwks_url: str | None = None,
        issuer: str | None = None,
        audience: str | None = None,
        remote_keys: JwksKeys | None = None,
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self.remote_keys = remote_keys or (JwksKeys(jwks_url) if jwks_url else None)
        self._keys: dict[str | None, Any] = {}
        if jwks_file:
            jwk_set = jwt.PyJWKSet.from_dict(json.loads(Path(jwks_file).read_text()))
            self._keys = {k.key_id: k for k in jwk_set.keys}
        if not self.remote_keys and not self._keys:
            raise ValueError("JWT verification needs JWKS_FILE or JWKS_URL")

    def _key_for(self, token: str) -> Any:
        kid = jwt.get_unverified_header(token).get("kid")
        if self.remote_keys is not None:
            key = self.remote_keys.get(kid)
            if key is None:
                raise jwt.InvalidTokenError("unknown signing key")
            return key
        if kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise jwt.InvalidTokenError("unknown signing key")

    def verify(self, token: str) -> Identity:
        """The identity in a valid token; ContractError(unauthorized) otherwise."""
        try:
            key = self._key_for(token)
            claims = jwt.decode(
                token,
                key=key,
                algorithms=ALGORITHMS,
                issuer=self._issuer,
                audience=self._audience,
                options={
                    "require": ["sub", "exp"],
                    "verify_aud": self._audience is not None,
                    "verify_iss": self._issuer is not None,
                },
            )
            for claim in NUMERIC_DATE_CLAIMS:
                if claim in claims and not _is_json_number(claims[claim]):
                    # PyJWT reads int("1700000000"); the platform's JWT library, as RFC 7519's
                    # NumericDate, takes a JSON number only.
                    raise ContractError(
                        ErrorCode.unauthorized, f"invalid token: the {claim} claim is not a number"
                    )
            return Identity.model_validate(
                {"sub": claims["sub"], "grants": claims.get("grants") or {}}
            )
        except (jwt.PyJWTError, ValidationError, ValueError) as e:
            # Said in our words: PyJWT's and pydantic's messages may quote the claims.
            raise ContractError(ErrorCode.unauthorized, _why_refused(e)) from None


def _is_json_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _why_refused(e: Exception) -> str:
    """Why a token was refused, naming claims but never quoting their values."""
    if isinstance(e, jwt.ExpiredSignatureError):
        return "invalid token: it has expired"
    if isinstance(e, jwt.ImmatureSignatureError):
        return "invalid token: it is not valid yet"
    if isinstance(e, jwt.InvalidAudienceError):
        return "invalid token: it is not meant for this service (aud)"
    if isinstance(e, jwt.InvalidIssuerError):
        return "invalid token: its issuer is not trusted (iss)"
    if isinstance(e, jwt.MissingRequiredClaimError):
        return f"invalid token: the {e.claim} claim is missing"
    if isinstance(e, ValidationError):
        fields = sorted({str(err["loc"][0]) for err in e.errors() if err.get("loc")})
        return f"invalid token: malformed claims ({', '.join(fields) or 'claims'})"
    return "invalid token: malformed, or its signature does not verify"


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ContractError(ErrorCode.unauthorized, "a Bearer token is required")
    token = token.strip()
    if len(token) > MAX_TOKEN_BYTES:
        # Refused unread: a token this long is no platform token, and decoding and verifying it
        # (and a cache keyed by it, as the poll's) would cost in proportion.
        raise ContractError(
            ErrorCode.unauthorized,
            f"invalid token: {len(token)} bytes long; at most {MAX_TOKEN_BYTES}",
        )
    return token


async def current_identity(request: Request) -> Identity:
    """The verified caller (401 without a valid token); as a dependency, `caller_identity`.

    With a JWKS URL (`app.state.jwt_keys`), an unknown `kid` waits for the keys at most
    JWKS_WAIT_S (quiz_servicekit.jwks); a known one never waits.
    """
    token = _bearer(request)
    keys: JwksKeys | None = getattr(request.app.state, "jwt_keys", None)
    if keys is not None:
        await keys.ready_for(token)
    verifier: JwtVerifier = request.app.state.jwt_verifier
    return verifier.verify(token)


async def caller_identity(request: Request) -> Identity:
    """FastAPI dependency: `current_identity`, on the event loop (FastAPI runs a sync dependency
    in a worker thread, a hop per request)."""
    return await current_identity(request)


class Access(BaseModel):
    """A caller and the grant that lets them reach one resource."""

    identity: Identity
    resource: str
    grant: Grant


def require_grant(resource_template: str, role: str) -> Callable[[Request], Awaitable[Access]]:
    """FastAPI dependency: 401 without a valid token, 404 without `role` on the resource.

    `resource_template` is formatted with the route's path parameters: "question:{id}".
    """
    if role not in ROLE_RANK:
        raise ValueError(f"unknown role {role!r}")

    async def dependency(request: Request) -> Access:
        identity = await current_identity(request)
        resource = resource_template.format(**request.path_params)
        grant = identity.grants.get(resource)
        if grant is None or not grant.reaches(role):
            raise ContractError(ErrorCode.not_found, f"{resource.split(':')[0]} not found")
        return Access(identity=identity, resource=resource, grant=grant)

    return dependency

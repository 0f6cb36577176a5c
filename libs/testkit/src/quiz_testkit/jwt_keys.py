"""Ed25519 signing keys as a JWKS file, and tokens minted with them (tests and dev only)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

KID = "dev-1"
# The issuer and audience of dev tokens: what `make run`, compose and the dev overlay set as
# JWT_ISSUER / JWT_AUDIENCE (docs/security.md, "Tokens"), so dev and tests check them too.
DEV_ISSUER = "urn:quiz:dev-keys"
DEV_AUDIENCE = "quiz-llm-services"


@dataclass
class SigningKeys:
    """A private key that mints tokens, and the JWKS file that verifies them."""

    private_key: Ed25519PrivateKey
    jwks_path: Path
    kid: str = KID

    @classmethod
    def load_or_create(cls, directory: str | Path) -> SigningKeys:
        """The keys under `directory`, generated on first use."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        pem = d / "jwt-private.pem"
        if pem.exists():
            key = serialization.load_pem_private_key(pem.read_bytes(), password=None)
            assert isinstance(key, Ed25519PrivateKey)
        else:
            key = Ed25519PrivateKey.generate()
            pem.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            pem.chmod(0o600)
        jwks = d / "jwks.json"
        public = json.loads(OKPAlgorithm.to_jwk(key.public_key()))
        public.update({"kid": KID, "alg": "EdDSA", "use": "sig"})
        jwks.write_text(json.dumps({"keys": [public]}, indent=2))
        return cls(private_key=key, jwks_path=jwks)

    def mint(
        self,
        sub: str,
        grants: dict[str, dict[str, Any]] | None = None,
        *,
        ttl_s: int = 3600,
        iss: str | None = DEV_ISSUER,
        aud: Any = DEV_AUDIENCE,
        **claims: Any,
    ) -> str:
        """A token for `sub` with `grants`, valid for `ttl_s` seconds (negative: expired), from
        the dev issuer to the dev audience (`iss=None` / `aud=None`: without the claim)."""
        now = int(time.time())
        payload = {"sub": sub, "grants": grants or {}, "iat": now, "exp": now + ttl_s, **claims}
        if iss is not None:
            payload["iss"] = iss
        if aud is not None:
            payload["aud"] = aud
        return jwt.encode(payload, self.private_key, algorithm="EdDSA", headers={"kid": self.kid})


def forged_token(sub: str, grants: dict[str, dict[str, Any]] | None = None) -> str:
    """A well-formed token signed by a key nobody trusts."""
    key = Ed25519PrivateKey.generate()
    now = int(time.time())
    payload = {"sub": sub, "grants": grants or {}, "iat": now, "exp": now + 3600}
    return jwt.encode(payload, key, algorithm="EdDSA", headers={"kid": KID})

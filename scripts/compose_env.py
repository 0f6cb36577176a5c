"""`make compose-env`: what docker-compose.yml reads from `.data/`, created when missing.

- `.data/compose.env`: the locked bus's passwords, `QUIZ_NATS_PASSWORD_<USER>=…` (kept under
  `.data/compose-nats-credentials/<user>.password`), for `docker-compose --env-file` and the
  nats container;
- `.data/dev-keys/jwks.json`: the dev JWT key the services verify (`make token` signs with it),
  copied to `deploy/k8s/overlays/dev/jwks.json` (git-ignored) for the dev overlay's ConfigMap;
  the env file names its issuer and audience too (`JWT_ISSUER`, `JWT_AUDIENCE`: what `make token`
  mints), which every service checks.

Prints the env file's path.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "libs" / "testkit" / "src"))

from quiz_contracts.bus import password_env  # noqa: E402
from quiz_testkit.jwt_keys import DEV_AUDIENCE, DEV_ISSUER, SigningKeys  # noqa: E402
from quiz_testkit.nats_server import dev_credentials  # noqa: E402


def main() -> int:
    data = Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data")).resolve()
    keys = SigningKeys.load_or_create(data / "dev-keys")
    dev_overlay = ROOT / "deploy" / "k8s" / "overlays" / "dev" / "jwks.json"
    dev_overlay.write_text(keys.jwks_path.read_text())
    passwords = dev_credentials(data / "compose-nats-credentials")
    env_file = data / "compose.env"
    lines = [f"{password_env(user)}={pw}" for user, pw in passwords.items()]
    lines += [f"JWT_ISSUER={DEV_ISSUER}", f"JWT_AUDIENCE={DEV_AUDIENCE}"]
    # The gateway's journal key (issue 29), kept beside the passwords and reused.
    key_file = data / "compose-journal.key"
    if not key_file.exists():
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    lines.append(f"QUIZ_JOURNAL_KEY={key_file.read_text().strip()}")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# docker-compose --env-file (scripts/compose_env.py): NATS passwords, iss/aud\n")
        f.write("\n".join(lines) + "\n")
    print(env_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())

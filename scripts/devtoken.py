"""`make token`: mint a dev JWT signed by the key `make run` created under .data/dev-keys.

GRANTS is a comma-separated list of resource=role[:type[:pool]], for example
`question:42=contributor:mcq:7,pool:7=owner`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_grants(text: str) -> dict[str, dict[str, str]]:
    """`question:42=contributor:mcq:7` → {"question:42": {"role": "contributor", ...}}."""
    grants: dict[str, dict[str, str]] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        resource, _, spec = item.partition("=")
        role, _, rest = spec.partition(":")
        qtype, _, pool = rest.partition(":")
        grant = {"role": role or "contributor"}
        if qtype:
            grant["type"] = qtype
        if pool:
            grant["pool"] = pool
        grants[resource] = grant
    return grants


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sub", default="teacher-1")
    parser.add_argument("--grants", default="")
    parser.add_argument("--ttl", type=int, default=8 * 3600)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "libs" / "testkit" / "src"))
    from quiz_testkit.jwt_keys import SigningKeys

    data = Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data"))
    keys = SigningKeys.load_or_create(data / "dev-keys")
    print(keys.mint(args.sub, parse_grants(args.grants), ttl_s=args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make token`: mint a dev JWT signed by the key `make run` created under .data/dev-keys.

GRANTS is a comma-separated list of resource=role[:type[:pool]], for example
`question:42=contributor:mcq:7,pool:7=owner`. Resources are those the services check:
`question:<id>`, `pool:<id>`, `evaluation:<id>`, `lessons` and `ops`; roles `viewer`,
`contributor`, `owner`; a type is one of the ten question types (on `question:<id>` only). A
GRANTS string that is not that is refused with the reason (exit status 2): a typo would
otherwise only show later, as a 404 from the service.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The resources the services' routes check (quiz_servicekit.auth.require_grant) and the roles
# of quiz_servicekit.auth.ROLE_RANK.
RESOURCE = re.compile(r"(question|pool|evaluation):[A-Za-z0-9._-]+|lessons|ops")
ROLES = ("viewer", "contributor", "owner")
FORM = "resource=role[:type[:pool]], comma-separated (question:42=contributor:mcq:7)"


class BadGrants(ValueError):
    """GRANTS does not read as FORM; the message says where and why."""


def parse_grants(text: str, types: frozenset[str]) -> dict[str, dict[str, str]]:
    """`question:42=contributor:mcq:7` → {"question:42": {"role": "contributor", ...}}.

    `types` are the question types a `question:<id>` grant may name. BadGrants for an item
    without `=role`, an unknown resource, role or type, a type on another resource, a
    resource given twice, or extra `:` fields.
    """
    grants: dict[str, dict[str, str]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            if text.strip():
                raise BadGrants(f"an empty item in {text!r}: expected {FORM}")
            continue
        resource, eq, spec = item.partition("=")
        fields = spec.split(":")
        if not eq or not spec:
            raise BadGrants(f"{item!r} has no role: expected {FORM}")
        if not RESOURCE.fullmatch(resource):
            raise BadGrants(
                f"{item!r}: unknown resource {resource!r} (the services check question:<id>, "
                "pool:<id>, evaluation:<id>, lessons and ops)"
            )
        if len(fields) > 3:
            raise BadGrants(f"{item!r}: too many ':' fields: expected {FORM}")
        role, qtype, pool = [*fields, "", ""][:3]
        if role not in ROLES:
            raise BadGrants(f"{item!r}: unknown role {role!r} (one of {', '.join(ROLES)})")
        if qtype and not resource.startswith("question:"):
            raise BadGrants(f"{item!r}: a question type is for a question:<id> grant only")
        if qtype and qtype not in types:
            known = ", ".join(sorted(types))
            raise BadGrants(f"{item!r}: unknown question type {qtype!r} ({known})")
        if resource in grants:
            raise BadGrants(f"{resource!r} is given twice")
        grant = {"role": role}
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
    from quiz_contracts.questions import QUESTION_TYPES
    from quiz_testkit.jwt_keys import SigningKeys

    try:
        grants = parse_grants(args.grants, frozenset(QUESTION_TYPES))
    except BadGrants as e:
        print(f"make token: GRANTS refused: {e}", file=sys.stderr)
        return 2
    data = Path(os.environ.get("QUIZ_DATA_DIR", ROOT / ".data"))
    keys = SigningKeys.load_or_create(data / "dev-keys")
    print(keys.mint(args.sub, grants, ttl_s=args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())

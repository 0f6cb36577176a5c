"""Render the locked bus (quiz_contracts.bus) into the files deployments read.

    uv run --no-sync python scripts/gen_nats_config.py          # writes them
    uv run --no-sync python scripts/gen_nats_config.py --check  # exit 1 when one is stale

- deploy/nats/accounts.conf: nats-server configuration (docker-compose), passwords read from the
  environment (`QUIZ_NATS_PASSWORD_<USER>`);
- deploy/helm/nats-values.yaml: values of the official NATS Helm chart (1.x): JetStream, a
  3-node cluster, the same accounts, the passwords from the Secret `nats-users` (one key per user).

`make run` and the test kit render their own with generated passwords (quiz_testkit.nats_server).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from quiz_contracts import bus
from quiz_contracts.subjects import NATS_MAX_PAYLOAD

ROOT = Path(__file__).resolve().parent.parent
ACCOUNTS_CONF = ROOT / "deploy" / "nats" / "accounts.conf"
DEV_OVERLAY = ROOT / "deploy" / "k8s" / "overlays" / "dev"
# The dev overlay's databases (its single PostgreSQL in quiz-data) and NATS (its single node).
DEV_DATABASES = {
    "llm-gateway": "llm_gateway",
    "review": "review",
    "poll": "poll",
    "lesson-fix": "lesson_fix",
}
DEV_POSTGRES = "postgres.quiz-data.svc.cluster.local:5432"
HELM_VALUES = ROOT / "deploy" / "helm" / "nats-values.yaml"

HELM_HEADER = """\
# Values for the official NATS Helm chart (chart `nats` 1.x, https://nats-io.github.io/k8s/helm/charts/)
# Rendered from quiz_contracts.bus by scripts/gen_nats_config.py: do not edit by hand.
#
#   kubectl -n quiz-bus create secret generic nats-users \\
#     $(for u in USERS; do printf -- '--from-literal=%s=%s ' $u "p$(openssl rand -hex 24)"; done)
#   helm install nats nats/nats -n quiz-bus -f deploy/helm/nats-values.yaml
#
# Each service reads its own password from the Secret `nats-credentials` of its namespace
# (keys NATS_USER, NATS_PASSWORD; docs/operations.md, "The locked bus"). max_payload is
# quiz_contracts.subjects.NATS_MAX_PAYLOAD: the contracts' size maxima derive from it.
# cluster.replicas (3) is what deploy/k8s/overlays/prod counts on: its NATS_URL lists the three
# pods and NATS_STREAM_REPLICAS=3 puts every stream and KV bucket on all of them.
"""


def helm_values() -> str:
    users = [
        {
            "user": u.name,
            "password": f"<< ${bus.password_env(u.name)} >>",
            "permissions": bus.permissions(u),
        }
        for u in bus.USERS
    ]
    values = {
        "config": {
            "cluster": {"enabled": True, "replicas": 3},
            "jetstream": {
                "enabled": True,
                "fileStore": {"pvc": {"size": "10Gi"}},
            },
            "merge": {
                "max_payload": NATS_MAX_PAYLOAD,
                "accounts": {bus.ACCOUNT: {"jetstream": "enabled", "users": users}},
            },
        },
        "container": {
            "env": {
                bus.password_env(u.name): {
                    "valueFrom": {"secretKeyRef": {"name": "nats-users", "key": u.name}}
                }
                for u in bus.USERS
            }
        },
        # The services reach NATS from their namespaces; the NetworkPolicies of
        # deploy/k8s allow that traffic by namespace label.
        "podTemplate": {"topologySpreadConstraints": {"kubernetes.io/hostname": {"maxSkew": 1}}},
    }
    header = HELM_HEADER.replace("for u in USERS", "for u in " + " ".join(bus.USER_NAMES))
    return header + yaml.safe_dump(values, sort_keys=False, width=100)


def dev_password(user: str) -> str:
    """The dev overlay's password of `user`: public, for a developer's cluster only."""
    return f"dev-only-{user}"


def dev_overlay_files() -> dict[Path, str]:
    """The dev overlay's NATS config, its users' passwords and each service's Secret."""
    head = "# Rendered by scripts/gen_nats_config.py (dev values, public: never in production).\n"
    files = {
        DEV_OVERLAY / "nats" / "accounts.conf": bus.nats_accounts_config(),
        DEV_OVERLAY / "nats" / "users.env": head
        + "".join(f"{bus.password_env(u.name)}={dev_password(u.name)}\n" for u in bus.USERS),
    }
    # The provisioning Job's (deploy/k8s/base/platform/provision.yaml): the operators' user.
    files[DEV_OVERLAY / "secrets" / "bus-provision.env"] = (
        head + f"NATS_USER=ops\nNATS_PASSWORD={dev_password('ops')}\n"
    )
    for u in bus.USERS:
        if not u.service:
            continue
        lines = [f"NATS_USER={u.name}", f"NATS_PASSWORD={dev_password(u.name)}"]
        if u.name in DEV_DATABASES:
            db = DEV_DATABASES[u.name]
            lines.append(f"DATABASE_URL=postgresql+psycopg://quiz:quiz@{DEV_POSTGRES}/{db}")
        if u.name == "llm-gateway":
            # Empty: the gateway answers llm_not_configured; a key goes in a local patch.
            lines.append("ANTHROPIC_API_KEY=")
            # The journal's HMAC key (issue 29): public here, a dev cluster's only.
            lines.append("LLM_GATEWAY_JOURNAL_KEY=dev-only-journal-key-0123456789abcdef")
        if u.name == "lesson-fix":
            # No siteverify secret: the dev overlay turns verification off (and says so).
            lines.append("LESSON_FIX_VERIFY_SECRET=")
        files[DEV_OVERLAY / "secrets" / f"{u.name}.env"] = head + "\n".join(lines) + "\n"
    return files


def renders() -> dict[Path, str]:
    """Each committed file and the text it must hold."""
    return {
        ACCOUNTS_CONF: bus.nats_accounts_config(),
        HELM_VALUES: helm_values(),
        **dev_overlay_files(),
    }


def main(argv: list[str]) -> int:
    stale = [p for p, text in renders().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}", file=sys.stderr)
        return 1 if stale else 0
    for p, text in renders().items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

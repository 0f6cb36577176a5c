"""Every overlay of deploy/k8s rendered and validated offline (issue 15, point 3).

`kubernetes-validate --strict` checks each object against the Kubernetes API schemas (unknown
fields refused); the tests below check what the schemas cannot: namespaces per trust level,
Pod Security levels, default-deny NetworkPolicies and what each allows, migrations as Jobs,
JWKS and Secrets that the dev overlay actually fills, the Ingress and its SSE route.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

Docs = list[dict[str, Any]]
OVERLAYS = ["dev", "prod"]
# The Kubernetes version the manifests target (user namespaces for the runner: >= 1.33).
KUBERNETES_VERSION = "1.33.0"
STATEFUL = {"llm-gateway", "review", "poll", "lesson-fix"}
SERVICES = {"llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix"}


def kubernetes_validate() -> str | None:
    """kubernetes-validate on PATH or where scripts/ensure-test-tools.sh installs it."""
    local = ROOT / ".data" / "tools" / "kv" / "bin" / "kubernetes-validate"
    return shutil.which("kubernetes-validate") or (str(local) if local.exists() else None)


def of_kind(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d["kind"] == kind]


def named(docs: Docs, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in of_kind(docs, kind)
        if d["metadata"]["name"] == name
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    assert len(found) == 1, (kind, name, namespace, len(found))
    return found[0]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_overlay_passes_strict_schema_validation(
    overlay: str, tmp_path: Path, k8s_text: Callable[[str], str]
) -> None:
    tool = kubernetes_validate()
    if tool is None:
        pytest.skip("kubernetes-validate is not installed (scripts/ensure-test-tools.sh does)")
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(k8s_text(overlay))
    done = subprocess.run(
        [tool, "--strict", "--quiet", "-k", KUBERNETES_VERSION, str(rendered)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # Custom resources (the Prometheus Operator's ServiceMonitor) have no schema here: a warning.
    errors = [line for line in done.stdout.splitlines() if not line.startswith("WARN")]
    assert done.returncode == 0 and not errors, done.stdout + done.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_namespace_per_trust_level(overlay: str, k8s_render: Callable[[str], Docs]) -> None:
    docs = k8s_render(overlay)
    namespaces = {
        d["metadata"]["name"]: d["metadata"]["labels"] for d in of_kind(docs, "Namespace")
    }
    assert namespaces["quiz"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespaces["quiz-runner"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") in namespaces or overlay == "prod", d
    # The runner alone in its privileged namespace: no other workload there.
    workloads = [
        d
        for d in docs
        if d["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet", "Pod")
        and d["metadata"].get("namespace") == "quiz-runner"
    ]
    assert [d["metadata"]["name"] for d in workloads] == ["runner"]
    for d in of_kind(docs, "Deployment"):
        expected = "quiz-runner" if d["metadata"]["name"] == "runner" else "quiz"
        assert d["metadata"]["namespace"] == expected
    if overlay == "dev":
        # Only the runner's namespace allows what restricted refuses; NATS is restricted too.
        assert namespaces["quiz-bus"]["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_default_deny_and_the_needed_allows(
    overlay: str, k8s_render: Callable[[str], Docs]
) -> None:
    docs = k8s_render(overlay)
    policies = of_kind(docs, "NetworkPolicy")
    used = {
        d["metadata"].get("namespace") for d in docs if d["kind"] in ("Deployment", "StatefulSet")
    }
    for namespace in used:
        deny = named(policies, "NetworkPolicy", "default-deny", namespace)
        assert deny["spec"]["podSelector"] == {}
        assert set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    # The runner: egress to DNS and NATS's client port only, nothing else.
    runner_egress = [
        rule
        for p in policies
        if p["metadata"]["namespace"] == "quiz-runner" and "egress" in p["spec"]
        for rule in p["spec"]["egress"]
    ]
    ports = {port["port"] for rule in runner_egress for port in rule["ports"]}
    assert ports == {53, 4222}
    for rule in runner_egress:
        assert rule.get("to"), "every runner egress rule names its peer"
    # HTTPS out only for the gateway (the provider) and lesson-fix (siteverify).
    https = named(policies, "NetworkPolicy", "allow-https-out", "quiz")
    assert https["spec"]["podSelector"]["matchExpressions"][0]["values"] == [
        "llm-gateway",
        "lesson-fix",
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_migrations_run_as_jobs_before_the_deployments(
    overlay: str, k8s_render: Callable[[str], Docs]
) -> None:
    docs = k8s_render(overlay)
    jobs = {d["metadata"]["name"]: d for d in of_kind(docs, "Job")}
    assert set(jobs) == {f"{s}-migrate" for s in STATEFUL} | {"bus-provision"}
    # Issue 29 item 1: the bus provisioned as ops, with the migrations (before the services).
    provision = jobs["bus-provision"]
    assert provision["metadata"]["labels"]["app.kubernetes.io/component"] == "migration"
    container = provision["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "quiz_servicekit.provision"]
    refs = [(n, k) for kind, n, k in _refs(container) if kind == "Secret"]
    # (the dev overlay's generated Secret has a hash suffix)
    assert any(n.startswith("bus-provision-secrets") and k == "NATS_USER" for n, k in refs)
    for service in STATEFUL:
        job = jobs[f"{service}-migrate"]
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["/app/service", "migrate"]
        assert "service" not in job["metadata"]["labels"].get("app.kubernetes.io/component", "")
        deployment = named(docs, "Deployment", service)
        env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["MIGRATE_ON_STARTUP"]["value"] == "false"
        # The same image as the Deployment (kustomize's images: applies to both).
        assert (
            container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        )


def _refs(container: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    refs: list[tuple[str, str, str | None]] = []
    for e in container.get("env", []):
        source = e.get("valueFrom", {})
        for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
            if key in source:
                refs.append((kind, source[key]["name"], source[key]["key"]))
    for e in container.get("envFrom", []):
        for kind, key in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
            if key in e:
                refs.append((kind, e[key]["name"], None))
    return refs


def test_the_dev_overlay_fills_every_reference(k8s_render: Callable[[str], Docs]) -> None:
    """Every Secret and ConfigMap key a dev pod reads exists in its namespace: it applies as is."""
    docs = k8s_render("dev")
    data = {
        (d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]): {
            **d.get("data", {}),
            **d.get("stringData", {}),
        }
        for d in docs
        if d["kind"] in ("Secret", "ConfigMap")
    }
    for d in docs:
        if d["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        namespace = d["metadata"]["namespace"]
        for container in d["spec"]["template"]["spec"]["containers"]:
            for kind, name, key in _refs(container):
                assert (kind, namespace, name) in data, (d["metadata"]["name"], kind, name)
                if key is not None:
                    assert key in data[(kind, namespace, name)], (d["metadata"]["name"], key)
    # The JWKS comes from a ConfigMap the overlay fills (the dev key), not a placeholder URL.
    for namespace in ("quiz", "quiz-runner"):
        jwks = [
            v
            for (k, ns, n), v in data.items()
            if k == "ConfigMap" and ns == namespace and n.startswith("quiz-jwks")
        ]
        assert len(jwks) == 1 and '"keys"' in jwks[0]["jwks.json"]
        config = [
            v
            for (k, ns, n), v in data.items()
            if k == "ConfigMap" and ns == namespace and n.startswith("quiz-platform-config")
        ]
        assert config[0]["JWKS_FILE"] == "/etc/quiz/jwks/jwks.json"
        assert "JWKS_URL" not in config[0]
        assert config[0]["NATS_URL"] == "nats://nats.quiz-bus.svc.cluster.local:4222"
    # NATS and PostgreSQL are there, single instances.
    assert named(docs, "StatefulSet", "nats", "quiz-bus")["spec"]["replicas"] == 1
    assert named(docs, "StatefulSet", "postgres", "quiz-data")["spec"]["replicas"] == 1


def test_the_ingress_routes_the_api_and_leaves_sse_unbuffered(
    k8s_render: Callable[[str], Docs],
) -> None:
    docs = k8s_render("prod")
    ingresses = of_kind(docs, "Ingress")
    backends = {
        path["backend"]["service"]["name"]
        for i in ingresses
        for rule in i["spec"]["rules"]
        for path in rule["http"]["paths"]
    }
    assert backends == {"editor-assist", "review", "poll", "lesson-fix"}
    sse = named(docs, "Ingress", "quiz-api-poll-events", "quiz")
    assert sse["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    for i in ingresses:
        for rule in i["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["path"].startswith("/app/api/"), path


def test_nats_helm_values_run_jetstream_on_three_replicas_with_the_accounts() -> None:
    import yaml

    values = yaml.safe_load((ROOT / "deploy" / "helm" / "nats-values.yaml").read_text())
    assert values["config"]["jetstream"]["enabled"] is True
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3}
    users = values["config"]["merge"]["accounts"]["QUIZ"]["users"]
    assert {u["user"] for u in users} >= SERVICES
    for u in users:
        assert u["password"].startswith("<< $QUIZ_NATS_PASSWORD_"), "no password in the values"


def test_prod_lists_the_three_nats_nodes_and_replicates_every_stream_on_them(
    k8s_render: Callable[[str], Docs],
) -> None:
    import yaml

    values = yaml.safe_load((ROOT / "deploy" / "helm" / "nats-values.yaml").read_text())
    nodes = values["config"]["cluster"]["replicas"]
    docs = k8s_render("prod")
    for namespace in ("quiz", "quiz-runner"):
        config = [
            d["data"]
            for d in of_kind(docs, "ConfigMap")
            if d["metadata"].get("namespace") == namespace
            and d["metadata"]["name"].startswith("quiz-platform-config")
        ]
        assert len(config) == 1, namespace
        assert config[0]["NATS_STREAM_REPLICAS"] == str(nodes)
        assert config[0]["NATS_URL"].split(",") == [
            f"nats://nats-{i}.nats-headless.quiz-bus.svc.cluster.local:4222" for i in range(nodes)
        ]
    # The dev overlay's single node: one replica, the default.
    dev = [
        d["data"]
        for d in of_kind(k8s_render("dev"), "ConfigMap")
        if d["metadata"]["name"].startswith("quiz-platform-config")
    ]
    assert dev and all(c.get("NATS_STREAM_REPLICAS", "1") == "1" for c in dev)

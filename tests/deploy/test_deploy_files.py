"""Deployment files: compose against the Compose Specification, Dockerfiles, kustomize, nginx.

Pure file checks; `kustomize build` and `nginx -t` run only when their binaries exist.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
COMPOSE_FILE = ROOT / "docker-compose.yml"
COMPOSE_SCHEMA = Path("/work/shared/schemas/compose-spec.json")
NGINX_CONF = ROOT / "deploy" / "compose" / "nginx.conf"
# The one Deployment allowed to run as uid 0: it switches to a uid per sandbox slot
# (docs/operations.md, "Runner sandbox"), with its capabilities cut to these.
ROOT_ALLOWED = {"runner": {"SETUID", "SETGID", "KILL"}}


def workspace_services() -> list[str]:
    """Every service of the uv workspace: a directory under services/ with a pyproject.toml."""
    return sorted(p.parent.name for p in (ROOT / "services").glob("*/pyproject.toml"))


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def k8s_docs() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object in deploy/k8s (kustomizations excluded)."""
    docs = []
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [(path, d) for d in load_yaml_docs(path)]
    return docs


def base_deployments() -> dict[str, dict[str, Any]]:
    return {
        d["metadata"]["name"]: d
        for path, d in k8s_docs()
        if d.get("kind") == "Deployment" and "base" in path.relative_to(K8S).parts[:1]
    }


def kustomizations() -> list[Path]:
    return sorted(K8S.rglob("kustomization.yaml"))


def kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def test_the_workspace_has_services() -> None:
    assert len(workspace_services()) >= 6


# --- compose -----------------------------------------------------------------------------


def test_compose_validates_against_the_compose_spec() -> None:
    if not COMPOSE_SCHEMA.exists():
        pytest.skip(f"{COMPOSE_SCHEMA} is not on this machine")
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    jsonschema.Draft7Validator(schema).validate(compose)


SHARED_DOCKERFILE = "deploy/docker/service.Dockerfile"


def dockerfile_of(name: str) -> str:
    """The runner has its own (toolchains); every other service builds from the shared one."""
    own = f"services/{name}/Dockerfile"
    return own if (ROOT / own).is_file() else SHARED_DOCKERFILE


def test_every_service_has_a_dockerfile_and_a_compose_service() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name in workspace_services():
        assert name in compose, f"{name} is not in docker-compose.yml"
        build = compose[name]["build"]
        assert build["context"] == "."
        assert build["dockerfile"] == dockerfile_of(name)
        if build["dockerfile"] == SHARED_DOCKERFILE:
            assert build["args"]["SERVICE"] == name
            assert (
                f'quiz-{name} = "quiz_' in (ROOT / "services" / name / "pyproject.toml").read_text()
            )


def test_compose_waits_for_healthy_dependencies() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name, svc in compose.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            if dep == "provision":
                # The one-shot provisioning (issue 29): waited for until it exits 0.
                assert spec["condition"] == "service_completed_successfully", name
                continue
            assert spec["condition"] == "service_healthy", (name, dep)
            assert "healthcheck" in compose[dep], f"{name} waits for {dep}, which has none"


def test_compose_provisions_the_bus_as_ops_before_every_service() -> None:
    """Issue 29 item 1: a one-shot service provisions the bus as `ops`; every service waits."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    job = compose["provision"]
    assert job["command"] == ["python", "-m", "quiz_servicekit.provision"]
    assert job["environment"]["NATS_USER"] == "ops"
    assert job["restart"] == "no"
    for name in workspace_services():
        assert "provision" in compose[name]["depends_on"], name


def test_compose_services_reach_nats_and_their_database() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name in workspace_services():
        env = compose[name]["environment"]
        assert env["NATS_URL"] == "nats://127.0.0.1:14222", name
        assert env["NATS_USER"] == name and env["NATS_PASSWORD"].startswith("${"), name
        assert env["JWKS_FILE"], name
        if "DATABASE_URL" in env:
            assert env["DATABASE_URL"].startswith("postgresql+psycopg://"), name
    assert "ANTHROPIC_API_KEY" in compose["llm-gateway"]["environment"]


def test_compose_databases_are_created_by_the_init_script() -> None:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    script = (ROOT / "deploy" / "compose" / "postgres-init.sh").read_text()
    for name in workspace_services():
        url = compose[name]["environment"].get("DATABASE_URL")
        if url:
            assert re.search(rf"\b{url.rsplit('/', 1)[1]}\b", script), name


# --- Dockerfiles -------------------------------------------------------------------------


@pytest.mark.parametrize("name", workspace_services())
def test_dockerfile_builds_the_service(name: str) -> None:
    text = (ROOT / dockerfile_of(name)).read_text()
    module = "quiz_" + name.replace("-", "_")
    shared = dockerfile_of(name) == SHARED_DOCKERFILE
    package = "quiz-${SERVICE}" if shared else f"quiz-{name}"
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\} AS build", text, re.M)
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    assert f"uv sync --frozen --no-dev --no-editable --package {package}" in text
    assert "/healthz" in text and "HEALTHCHECK" in text
    assert "EXPOSE 8080" in text
    assert "HTTP_HOST=0.0.0.0" in text and "HTTP_PORT=8080" in text
    if shared:
        assert 'CMD ["/app/service"]' in text and "quiz-${SERVICE}" in text
    else:
        assert f'CMD ["python", "-m", "{module}.main"]' in text
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users, "no USER"
    if name in ROOT_ALLOWED:
        assert users[-1] == "0:0"
    else:
        assert not users[-1].startswith("0"), f"{name} runs as root"


def test_runner_image_has_its_toolchains() -> None:
    text = (ROOT / "services" / "runner" / "Dockerfile").read_text()
    for package in ("python3", "gcc", "g++", "libc6-dev", "nodejs"):
        assert re.search(rf"\s{re.escape(package)}(\s|;)", text), package


def test_dockerignore_keeps_local_state_out() -> None:
    lines = (ROOT / ".dockerignore").read_text().split()
    for pattern in ("**/.venv", ".data", "**/__pycache__", "**/tests"):
        assert pattern in lines, pattern


# --- Kubernetes --------------------------------------------------------------------------


def test_every_service_has_a_deployment_and_a_service() -> None:
    deployments = base_deployments()
    services = {d["metadata"]["name"] for _, d in k8s_docs() if d.get("kind") == "Service"}
    for name in workspace_services():
        assert name in deployments, f"no Deployment for {name}"
        assert name in services, f"no Service for {name}"


@pytest.mark.parametrize("name", workspace_services())
def test_deployment_probes_and_security(name: str) -> None:
    deployment = base_deployments()[name]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]
    ctx = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True
    caps = ctx["capabilities"]
    assert caps["drop"] == ["ALL"]
    if name in ROOT_ALLOWED:
        assert set(caps.get("add", [])) <= ROOT_ALLOWED[name]
        # Root inside, but in the pod's own user namespace: not root on the node.
        assert pod["hostUsers"] is False
    else:
        assert ctx["runAsNonRoot"] is True
        assert ctx["runAsUser"] != 0
        assert "add" not in caps
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
    env = {e["name"] for e in container.get("env", [])}
    refs = [r["configMapRef"]["name"] for r in container.get("envFrom", [])]
    assert "quiz-platform-config" in refs
    assert "PUBLIC_URL" in env


def test_secrets_are_references_not_values() -> None:
    for path, doc in k8s_docs():
        assert doc.get("kind") != "Secret", f"{path} holds a Secret"
    gateway = base_deployments()["llm-gateway"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in gateway["env"]}
    for key in ("ANTHROPIC_API_KEY", "DATABASE_URL"):
        assert "secretKeyRef" in env[key]["valueFrom"], key


def test_every_kustomization_resource_exists() -> None:
    found = kustomizations()
    assert {p.parent.relative_to(K8S).as_posix() for p in found} >= {
        "base",
        "overlays/dev",
        "overlays/prod",
        "components/otel",
        "components/servicemonitor",
    }
    for path in found:
        kustomization = yaml.safe_load(path.read_text())
        for key in ("resources", "components"):
            for entry in kustomization.get(key) or []:
                target = (path.parent / entry).resolve()
                assert target.exists(), f"{path}: {key} entry {entry} is missing"
                if target.is_dir():
                    assert (target / "kustomization.yaml").is_file(), f"{path}: {entry}"


def test_every_yaml_file_parses() -> None:
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in load_yaml_docs(path):
            assert isinstance(doc, dict), path


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_kustomize_builds_the_overlay(overlay: str, k8s_render: Any) -> None:
    docs = k8s_render(overlay)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == set(workspace_services())
    if overlay == "prod":
        assert deployments["llm-gateway"]["spec"]["replicas"] == 2
        budgets = {d["metadata"]["name"] for d in docs if d["kind"] == "PodDisruptionBudget"}
        assert "llm-gateway" in budgets
        # A budget on a single replica would block every node drain.
        for name in budgets:
            assert deployments[name]["spec"]["replicas"] > 1, name


# --- nginx -------------------------------------------------------------------------------

ROUTES = {
    "/app/api/questions/42/generate": "editor_assist",
    "/app/api/generate/availability": "editor_assist",
    "/app/api/review/runs": "review",
    "/app/api/pools/7/review": "review",
    "/app/api/pools/7/reviews/3": "review",
    "/app/api/reviews/pills": "review",
    "/app/api/questions/42/review": "review",
    "/app/api/questions/42/review/ignore": "review",
    "/app/api/questions/42/review/fix": "review",
    "/app/api/evaluations/9/poll/ideas": "poll",
    "/poll/ev-9/wall": "poll",
    "/poll/ev-9/moderate": "poll",
    "/poll/assets/wall.js": "poll",
    "/app/api/lessons/check": "lesson_fix",
    "/app/api/lessons/fix": "lesson_fix",
    "/app/api/evaluations/9/poll/stream": "poll",
}


def nginx_locations() -> list[tuple[str, str, str]]:
    """(modifier, pattern, upstream) of every proxied location of the gateway."""
    text = NGINX_CONF.read_text()
    found = re.findall(r"location\s+(~|=)?\s*(\S+)\s*\{\s*proxy_pass\s+http://(\w+);", text)
    return [(m, p, u) for m, p, u in found]


@pytest.mark.parametrize(("path", "upstream"), sorted(ROUTES.items()))
def test_nginx_routes_each_path_to_its_service(path: str, upstream: str) -> None:
    matches = [
        u
        for m, p, u in nginx_locations()
        if (m == "~" and re.search(p, path)) or (not m and path.startswith(p))
    ]
    # Several locations of one service may match (nginx takes the first regex).
    assert matches and set(matches) == {upstream}


def test_nginx_passes_authorization_and_traceparent() -> None:
    text = NGINX_CONF.read_text()
    assert "proxy_set_header Authorization $http_authorization;" in text
    assert "proxy_set_header traceparent $http_traceparent;" in text


def test_nginx_upstreams_are_compose_services() -> None:
    """Every upstream is a compose service's port on the host's loopback (host network)."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    ports = {
        str(svc["environment"]["HTTP_PORT"]): name
        for name, svc in compose.items()
        if "HTTP_PORT" in (svc.get("environment") or {})
    }
    upstreams = re.findall(
        r"upstream (\w+) \{\s*server 127\.0\.0\.1:(\d+);", NGINX_CONF.read_text(), re.M
    )
    assert upstreams
    for upstream, port in upstreams:
        assert ports.get(port, "").replace("-", "_") == upstream, (upstream, port)


def test_compose_runs_on_the_host_network() -> None:
    """An engine started with --bridge=none has no other network (docker-compose.yml)."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    for name, svc in compose.items():
        assert svc.get("network_mode") == "host", name
        assert "ports" not in svc, name


def test_nginx_accepts_the_config(tmp_path: Path) -> None:
    nginx = shutil.which("nginx")
    if nginx is None:
        pytest.skip("nginx is not installed")
    # The upstream names exist only on the compose network: test the syntax against loopback.
    text = re.sub(r"server\s+[\w-]+:8080;", "server 127.0.0.1:8080;", NGINX_CONF.read_text())
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    done = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-e", "stderr", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr

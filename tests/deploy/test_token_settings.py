"""Issuer and audience as deployed (issue 29, item 3): `make run`, compose and every overlay set
JWT_ISSUER and JWT_AUDIENCE; the prod overlay runs the services as production, which refuses to
start without them."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from quiz_servicekit.settings import ServiceSettings
from quiz_testkit.jwt_keys import DEV_AUDIENCE, DEV_ISSUER

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"llm-gateway", "runner", "editor-assist", "review", "poll", "lesson-fix"}


def platform_configs(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The quiz-platform-config ConfigMap of each namespace, by namespace."""
    return {
        d["metadata"]["namespace"]: d["data"]
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("quiz-platform-config")
    }


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_every_overlay_sets_issuer_and_audience(
    overlay: str, k8s_render: Callable[[str], list[dict[str, Any]]]
) -> None:
    configs = platform_configs(k8s_render(overlay))
    assert set(configs) == {"quiz", "quiz-runner"}
    for namespace, config in configs.items():
        assert config.get("JWT_ISSUER"), (overlay, namespace)
        assert config.get("JWT_AUDIENCE"), (overlay, namespace)
        if overlay == "dev":
            # What `make token` mints, so dev tokens keep working on a dev cluster.
            assert (config["JWT_ISSUER"], config["JWT_AUDIENCE"]) == (DEV_ISSUER, DEV_AUDIENCE)


def test_the_prod_overlay_runs_as_production_and_that_needs_the_claims(
    k8s_render: Callable[[str], list[dict[str, Any]]],
) -> None:
    for config in platform_configs(k8s_render("prod")).values():
        assert config["QUIZ_ENV"] == "production"
        # The settings every service builds from that ConfigMap start…
        settings = ServiceSettings.model_validate(config)
        assert settings.quiz_env == "production" and settings.jwt_audience
        # …and, without either claim's setting, refuse to.
        for missing in ("JWT_ISSUER", "JWT_AUDIENCE"):
            without = {k: v for k, v in config.items() if k != missing}
            with pytest.raises(ValidationError, match=missing):
                ServiceSettings.model_validate(without)


def test_compose_sets_issuer_and_audience_for_every_service() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in SERVICES:
        env = compose[name]["environment"]
        for variable, dev_value in (("JWT_ISSUER", DEV_ISSUER), ("JWT_AUDIENCE", DEV_AUDIENCE)):
            # `${JWT_ISSUER:-…}`: from `make compose-env`'s env file, the dev key's by default.
            assert re.fullmatch(rf"\$\{{{variable}:-{re.escape(dev_value)}\}}", env[variable])

"""The Kubernetes overlays rendered once per session, from a copy of deploy/k8s whose dev
overlay has a JWKS (`make compose-env` writes the real one; a clean clone has none)."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from quiz_testkit.jwt_keys import SigningKeys

ROOT = Path(__file__).resolve().parents[2]


def kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


@functools.cache
def _tree() -> Path:
    tree = Path(tempfile.mkdtemp(prefix="quiz-k8s-")) / "k8s"
    shutil.copytree(ROOT / "deploy" / "k8s", tree)
    keys = SigningKeys.load_or_create(tree.parent / "keys")
    (tree / "overlays" / "dev" / "jwks.json").write_text(keys.jwks_path.read_text())
    return tree


@functools.cache
def render_text(overlay: str) -> str:
    command = kustomize_command()
    if command is None:
        pytest.skip("neither kustomize nor kubectl is installed")
    done = subprocess.run(
        [*command, str(_tree() / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="session")
def k8s_text() -> Callable[[str], str]:
    """`k8s_text(overlay)`: the overlay rendered, as YAML text."""
    return render_text


@pytest.fixture(scope="session")
def k8s_render() -> Iterator[Callable[[str], list[dict[str, Any]]]]:
    """`k8s_render(overlay)`: the overlay's objects, as `kubectl apply -k` would send them."""
    try:
        yield lambda overlay: [d for d in yaml.safe_load_all(render_text(overlay)) if d]
    finally:
        if _tree.cache_info().currsize:
            shutil.rmtree(_tree().parent, ignore_errors=True)
            _tree.cache_clear()
            render_text.cache_clear()

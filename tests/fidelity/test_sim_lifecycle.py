"""The control plane behind what an on-call sees, through the real kubectl, on a simulator
started as `gpubot sim serve` starts it (controllers running): the node lifecycle
controller's taints after a cordon and on a NotReady node (with `timeAdded`), the kubelets'
Leases in kube-node-lease (what `describe node` shows), the Jobs behind the training pods,
and the Metrics API behind `kubectl top`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpusim.launching import Simulation, start_simulator
from tests.helpers.kubectl import Kubectl, kubectl_as, needs_kubectl, rows

pytestmark = needs_kubectl


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulation]:
    simulation = start_simulator(4)
    try:
        yield simulation
    finally:
        simulation.stop()


@pytest.fixture
def kubectl(sim: Simulation, tmp_path: Path) -> Kubectl:
    return kubectl_as(sim.api, tmp_path)


def eventually(check: Callable[[], Any], what: str, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s (last: {found!r})")
        time.sleep(0.1)


def taints(kubectl: Kubectl, node: str) -> list[dict[str, str]]:
    done = kubectl("get", "node", node, "-o", "json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, str]] = json.loads(done.stdout)["spec"].get("taints") or []
    return found


def test_a_cordon_gets_the_unschedulable_taint_with_its_time_and_describe_shows_it(
    kubectl: Kubectl,
) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    assert kubectl("cordon", "gpu-a1").returncode == 0
    [taint] = eventually(lambda: taints(kubectl, "gpu-a1"), "the unschedulable taint")
    assert (taint["key"], taint["effect"]) == ("node.kubernetes.io/unschedulable", "NoSchedule")
    assert datetime.fromisoformat(taint["timeAdded"].replace("Z", "+00:00")) >= before
    described = kubectl("describe", "node", "gpu-a1").stdout
    assert "Taints:             node.kubernetes.io/unschedulable:NoSchedule" in described
    assert "Unschedulable:      true" in described
    assert kubectl("uncordon", "gpu-a1").returncode == 0
    eventually(lambda: not taints(kubectl, "gpu-a1"), "the taint lifted")


def test_a_not_ready_node_gets_the_not_ready_taints(kubectl: Kubectl) -> None:
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "container runtime network not ready",
                }
            ]
        }
    }
    patched = kubectl(
        "patch",
        "node",
        "gpu-a4",
        "--subresource=status",
        "--type=strategic",
        "-p",
        json.dumps(status),
    )
    assert patched.returncode == 0, patched.stderr
    found = eventually(lambda: taints(kubectl, "gpu-a4"), "the not-ready taints")
    assert sorted((t["key"], t["effect"]) for t in found) == [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
    ]
    assert all(t["timeAdded"] for t in found)
    nodes = {row["NAME"]: row for row in rows(kubectl("get", "nodes").stdout)}
    assert nodes["gpu-a4"]["STATUS"] == "NotReady"


def test_describe_node_shows_the_kubelets_lease(kubectl: Kubectl) -> None:
    leases = eventually(
        lambda: rows(kubectl("get", "leases", "-n", "kube-node-lease").stdout), "node leases"
    )
    assert {row["NAME"]: row["HOLDER"] for row in leases} == {
        name: name for name in ("cpu-1", "gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4")
    }
    described = kubectl("describe", "node", "gpu-a2")
    assert described.returncode == 0, described.stderr
    assert "Failed to get lease" not in described.stdout
    lines = described.stdout.splitlines()
    start = lines.index("Lease:")
    assert lines[start + 1].split() == ["HolderIdentity:", "gpu-a2"]
    assert lines[start + 2].split() == ["AcquireTime:", "<unset>"]
    assert lines[start + 3].split()[0] == "RenewTime:"


def test_get_jobs_lists_the_jobs_the_training_pods_belong_to(kubectl: Kubectl) -> None:
    done = kubectl("get", "jobs", "-n", "ml")
    assert done.returncode == 0, done.stderr
    jobs = {row["NAME"]: row for row in rows(done.stdout)}
    assert set(jobs) == {"train-llm-0", "train-llm-1"}
    assert jobs["train-llm-0"]["STATUS"] == "Running"
    described = kubectl("describe", "pod", "train-llm-0-worker-0", "-n", "ml").stdout
    [owner] = [line for line in described.splitlines() if line.startswith("Controlled By:")]
    assert owner.split() == ["Controlled", "By:", "Job/train-llm-0"]


def test_top_nodes_and_pods(kubectl: Kubectl) -> None:
    done = kubectl("top", "nodes")
    assert done.returncode == 0, done.stderr
    found = rows(done.stdout)
    assert list(found[0]) == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]
    by_name = {row["NAME"]: row for row in found}
    assert {"gpu-a1", "gpu-a2", "gpu-a3", "cpu-1"} <= set(by_name)
    assert by_name["gpu-a1"]["CPU(cores)"].endswith("m")
    assert by_name["gpu-a1"]["MEMORY(bytes)"].endswith("Mi")
    pods = kubectl("top", "pods", "-n", "ml")
    assert pods.returncode == 0, pods.stderr
    assert "train-llm-0-worker-0" in {row["NAME"] for row in rows(pods.stdout)}

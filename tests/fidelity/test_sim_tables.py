"""`kubectl get` prints what the server's Table says: the columns and cells kube-apiserver
computes (pkg/printers/internalversion/printers.go), seen through the real kubectl, for the
kinds an on-call reads during a GPU node incident. Expected values are what printers.go makes
of the objects the simulator holds (read here with `-o json`), and ages are
`duration.HumanDuration`'s: a 30-day-old node is `30d`, a 20-hour-old pod `20h`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpusim import faults
from gpusim.apiserver import SimulatedApiServer
from gpusim.scenarios import healthy_cluster, owning_jobs
from gpusim.state import ClusterState
from tests.helpers.kubectl import Kubectl, kubectl_as, needs_kubectl, rows

pytestmark = needs_kubectl


@pytest.fixture
def cluster() -> Iterator[SimulatedApiServer]:
    store = ClusterState()
    items = healthy_cluster(4, datetime.now(UTC))["items"]
    store.load(items + owning_jobs(items))
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubectl(cluster: SimulatedApiServer, tmp_path: Path) -> Kubectl:
    return kubectl_as(cluster, tmp_path)


def table(kubectl: Kubectl, *args: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    """(the header's column names, rows by NAME) of `kubectl get ARGS`."""
    done = kubectl("get", *args)
    assert done.returncode == 0, done.stderr
    found = rows(done.stdout)
    header = list(found[0]) if found else []
    return header, {row.get("NAME") or row.get("LAST SEEN", ""): row for row in found}


def as_json(kubectl: Kubectl, *args: str) -> Any:
    done = kubectl("get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def apply(kubectl: Kubectl, tmp_path: Path, text: str) -> None:
    path = tmp_path / f"apply-{abs(hash(text))}.yaml"
    path.write_text(text)
    done = kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr


# ---- nodes ---------------------------------------------------------------------------------


def test_nodes_show_status_roles_age_version_and_wide_columns(
    cluster: SimulatedApiServer, kubectl: Kubectl
) -> None:
    assert kubectl("cordon", "gpu-a1").returncode == 0
    faults.inject(cluster.store, "not-ready", "gpu-a2", datetime.now(UTC))
    header, nodes = table(kubectl, "nodes")
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes["gpu-a1"]["STATUS"] == "Ready,SchedulingDisabled"
    assert nodes["gpu-a2"]["STATUS"] == "NotReady"
    assert nodes["gpu-a3"]["STATUS"] == "Ready"
    assert {n["ROLES"] for n in nodes.values()} == {"<none>"}
    assert {n["AGE"] for n in nodes.values()} == {"30d"}
    info = as_json(kubectl, "node", "gpu-a3")["status"]["nodeInfo"]
    assert nodes["gpu-a3"]["VERSION"] == info["kubeletVersion"]

    header, wide = table(kubectl, "nodes", "-o", "wide")
    assert header == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    node = as_json(kubectl, "node", "gpu-a3")
    internal = [a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"]
    assert wide["gpu-a3"]["INTERNAL-IP"] == internal[0]
    assert wide["gpu-a3"]["EXTERNAL-IP"] == "<none>"
    assert wide["gpu-a3"]["OS-IMAGE"] == info["osImage"]
    assert wide["gpu-a3"]["KERNEL-VERSION"] == info["kernelVersion"]
    assert wide["gpu-a3"]["CONTAINER-RUNTIME"] == info["containerRuntimeVersion"]


# ---- pods ----------------------------------------------------------------------------------


def test_pods_show_crash_loops_with_the_restarts_age(
    cluster: SimulatedApiServer, kubectl: Kubectl
) -> None:
    faults.inject(cluster.store, "plugin-crashloop", "gpu-a3", datetime.now(UTC))
    header, pods = table(kubectl, "pods", "-n", "gpu-operator", "-o", "wide")
    assert header == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    listing = as_json(
        kubectl, "pods", "-n", "gpu-operator", "--field-selector", "spec.nodeName=gpu-a3"
    )
    [plugin] = [
        p
        for p in listing["items"]
        if p["metadata"]["name"].startswith("nvidia-device-plugin-daemonset")
    ]
    row = pods[plugin["metadata"]["name"]]
    restarts = plugin["status"]["containerStatuses"][0]["restartCount"]
    assert (row["READY"], row["STATUS"]) == ("0/1", "CrashLoopBackOff")
    assert re.fullmatch(rf"{restarts} \(\d+[ms]\d*s? ago\)", row["RESTARTS"]), row
    assert row["NODE"] == "gpu-a3"
    assert row["IP"] == plugin["status"]["podIP"]
    assert (row["NOMINATED NODE"], row["READINESS GATES"]) == ("<none>", "<none>")
    healthy = next(r for name, r in pods.items() if name.startswith("nvidia-driver-daemonset"))
    assert (healthy["READY"], healthy["STATUS"], healthy["RESTARTS"]) == ("1/1", "Running", "0")


def test_pods_show_init_progress_and_terminating(
    cluster: SimulatedApiServer, kubectl: Kubectl, tmp_path: Path
) -> None:
    apply(
        kubectl,
        tmp_path,
        """
apiVersion: v1
kind: Pod
metadata: {name: warmup, namespace: ml}
spec:
  nodeName: gpu-a4
  initContainers: [{name: fetch, image: busybox:1.36}]
  containers: [{name: main, image: busybox:1.36}]
---
apiVersion: v1
kind: Pod
metadata: {name: sticky, namespace: ml, finalizers: [example.com/hold]}
spec:
  containers: [{name: main, image: busybox:1.36}]
""",
    )
    # What the kubelet reports while the init container runs.
    status = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Initialized", "status": "False"}],
            "initContainerStatuses": [
                {
                    "name": "fetch",
                    "ready": False,
                    "restartCount": 0,
                    "image": "busybox:1.36",
                    "imageID": "",
                    "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}},
                }
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": False,
                    "restartCount": 0,
                    "image": "busybox:1.36",
                    "imageID": "",
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }
            ],
        }
    }
    patched = kubectl(
        "patch",
        "pod",
        "warmup",
        "-n",
        "ml",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    assert patched.returncode == 0, patched.stderr
    assert kubectl("delete", "pod", "sticky", "-n", "ml", "--wait=false").returncode == 0
    _, pods = table(kubectl, "pods", "-n", "ml")
    assert (pods["warmup"]["READY"], pods["warmup"]["STATUS"]) == ("0/1", "Init:0/1")
    assert pods["sticky"]["STATUS"] == "Terminating"
    assert pods["train-llm-0-worker-0"]["AGE"] == "20h"


# ---- events --------------------------------------------------------------------------------


def test_events_show_last_seen_and_agree_with_describe(kubectl: Kubectl) -> None:
    header, events = table(kubectl, "events", "-A")
    assert header == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    [ready] = [e for e in events.values() if e["REASON"] == "NodeReady"]
    assert ready == {
        "NAMESPACE": "default",
        "LAST SEEN": "30d",
        "TYPE": "Normal",
        "REASON": "NodeReady",
        "OBJECT": "node/gpu-a1",
        "MESSAGE": "Node gpu-a1 status is now: NodeReady",
    }
    described = kubectl("describe", "node", "gpu-a1")
    assert described.returncode == 0, described.stderr
    [line] = [x for x in described.stdout.splitlines() if "NodeReady" in x and "Normal" in x]
    assert line.split()[:3] == ["Normal", "NodeReady", "30d"]


# ---- workloads, budgets, leases, namespaces ------------------------------------------------


def test_budgets_daemonsets_and_jobs(kubectl: Kubectl) -> None:
    header, pdbs = table(kubectl, "pdb", "-n", "ml")
    assert header == ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
    assert pdbs["train-llm-0-pdb"] == {
        "NAME": "train-llm-0-pdb",
        "MIN AVAILABLE": "1",
        "MAX UNAVAILABLE": "N/A",
        "ALLOWED DISRUPTIONS": "1",
        "AGE": "30d",
    }
    header, sets = table(kubectl, "ds", "-n", "gpu-operator")
    assert header == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "UP-TO-DATE",
        "AVAILABLE",
        "NODE SELECTOR",
        "AGE",
    ]
    driver = sets["nvidia-driver-daemonset"]
    status = as_json(kubectl, "ds", "nvidia-driver-daemonset", "-n", "gpu-operator")["status"]
    assert driver["DESIRED"] == str(status["desiredNumberScheduled"]) == "4"
    assert driver["READY"] == str(status["numberReady"])
    assert driver["NODE SELECTOR"] == "nvidia.com/gpu.deploy.driver=true"
    assert driver["AGE"] == "30d"
    header, jobs = table(kubectl, "jobs", "-n", "ml")
    assert header == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs["train-llm-0"] == {
        "NAME": "train-llm-0",
        "STATUS": "Running",
        "COMPLETIONS": "0/2",
        "DURATION": "20h",
        "AGE": "20h",
    }
    header, wide = table(kubectl, "jobs", "-n", "ml", "-o", "wide")
    assert header[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide["train-llm-0"]["IMAGES"] == "nvcr.io/nvidia/pytorch:24.03-py3"


def test_deployments_replicasets_leases_and_namespaces(kubectl: Kubectl, tmp_path: Path) -> None:
    apply(
        kubectl,
        tmp_path,
        """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-5d8f7, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: gpubot-leader, namespace: default}
spec: {holderIdentity: gpubot-0, leaseDurationSeconds: 15}
""",
    )
    header, deployments = table(kubectl, "deploy")
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert [deployments["web"][c] for c in header[:4]] == ["web", "0/2", "0", "0"]
    assert re.fullmatch(r"\d+s", deployments["web"]["AGE"])
    header, sets = table(kubectl, "rs", "-o", "wide")
    assert header == [
        "NAME",
        "DESIRED",
        "CURRENT",
        "READY",
        "AGE",
        "CONTAINERS",
        "IMAGES",
        "SELECTOR",
    ]
    row = sets["web-5d8f7"]
    assert [row[c] for c in ("DESIRED", "CURRENT", "READY", "IMAGES", "SELECTOR")] == [
        "3",
        "0",
        "0",
        "nginx:1.27",
        "app=web",
    ]
    header, leases = table(kubectl, "leases")
    assert header == ["NAME", "HOLDER", "AGE"]
    assert leases["gpubot-leader"]["HOLDER"] == "gpubot-0"
    header, namespaces = table(kubectl, "ns")
    assert header == ["NAME", "STATUS", "AGE"]
    assert {"default", "kube-system", "kube-node-lease", "gpu-operator", "ml"} <= set(namespaces)
    assert {n["STATUS"] for n in namespaces.values()} == {"Active"}
    # Created with the cluster, not when the simulator started.
    assert namespaces["gpu-operator"]["AGE"] == namespaces["kube-system"]["AGE"] == "30d"

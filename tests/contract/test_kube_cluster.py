"""The Cluster adapter (official kubernetes client) against the simulator, over HTTPS."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bot.acting.cordoning import (
    add_taint,
    annotate,
    cordon,
    remove_taint,
    uncordon,
)
from bot.config import Settings
from bot.errors import (
    AlreadyExists,
    Conflict,
    EvictionBlocked,
    NotFound,
    PermanentError,
    TemporaryError,
)
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot
from bot.kube.cluster import KubeCluster
from bot.names import MAINTENANCE_TAINT
from gpusim.resources import BY_KIND

Sim = tuple[Any, KubeCluster]


def test_lists_are_plain_api_json_with_kind(sim_cluster: Sim) -> None:
    _, cluster = sim_cluster
    pods = cluster.list("Pod", field_selector="spec.nodeName=gpu-a1")
    assert len(pods) == 9 and {p["kind"] for p in pods} == {"Pod"}
    assert cluster.list("Node", label_selector="nvidia.com/gpu.present=true")[0]["kind"] == "Node"
    pdbs = cluster.list("PodDisruptionBudget", namespace="ml")
    assert {p["metadata"]["name"] for p in pdbs} == {"train-llm-0-pdb", "train-llm-1-pdb"}


def test_a_node_scoped_read_gives_the_same_facts_as_the_whole_cluster(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["Node"],
        "",
        "gpu-a2",
        "application/merge-patch+json",
        {"status": {"allocatable": {"nvidia.com/gpu": "6"}}},
    )
    now = datetime.now(UTC)
    whole = collect_facts(read_snapshot(cluster), [], Settings(), now).nodes["gpu-a2"]
    live = collect_facts(read_snapshot(cluster, "gpu-a2"), [], Settings(), now).nodes["gpu-a2"]
    assert live == whole
    assert live.gpu is not None and live.gpu.allocatable == 6
    assert all(c.present for c in live.components.values())
    assert live.driver_version == "550.54.15" and live.pool == "a100-east"


def test_cordon_uncordon_are_idempotent_and_visible(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    assert cordon(cluster, "gpu-a1").changed
    assert not cordon(cluster, "gpu-a1").changed
    assert server.store.get(BY_KIND["Node"], "", "gpu-a1")["spec"]["unschedulable"] is True
    assert uncordon(cluster, "gpu-a1").changed
    assert "unschedulable" not in server.store.get(BY_KIND["Node"], "", "gpu-a1")["spec"]
    assert not uncordon(cluster, "gpu-a1").changed


def test_maintenance_taint_and_annotation(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    assert add_taint(cluster, "gpu-a2", MAINTENANCE_TAINT, "drain", "NoSchedule").changed
    assert not add_taint(cluster, "gpu-a2", MAINTENANCE_TAINT, "drain", "NoSchedule").changed
    node = server.store.get(BY_KIND["Node"], "", "gpu-a2")
    assert node["spec"]["taints"] == [
        {"key": MAINTENANCE_TAINT, "value": "drain", "effect": "NoSchedule"}
    ]
    assert remove_taint(cluster, "gpu-a2", MAINTENANCE_TAINT).changed
    assert "taints" not in server.store.get(BY_KIND["Node"], "", "gpu-a2")["spec"]
    assert annotate(cluster, "gpu-a2", "gpubot.io/incident", "42").changed
    assert (
        server.store.get(BY_KIND["Node"], "", "gpu-a2")["metadata"]["annotations"][
            "gpubot.io/incident"
        ]
        == "42"
    )


def test_errors_become_gpubot_errors_with_their_retry_meaning(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    with pytest.raises(NotFound, match='nodes "nope" not found'):
        cluster.get("Node", "", "nope")
    with pytest.raises(PermanentError, match="field label not supported"):
        cluster.list("Pod", field_selector="spec.foo=1")
    server.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-0-pdb",
        "application/merge-patch+json",
        {"spec": {"minAvailable": 2}},
    )
    with pytest.raises(EvictionBlocked, match="disruption budget"):
        cluster.evict("ml", "train-llm-0-worker-0")
    unreachable = KubeCluster.for_url("http://127.0.0.1:9")
    with pytest.raises(TemporaryError):
        unreachable.get("Node", "", "gpu-a1")


def _lease(name: str, holder: str, version: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "gpubot"}
    if version:
        metadata["resourceVersion"] = version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def test_leases_are_created_once_and_replaced_only_from_the_version_read(sim_cluster: Sim) -> None:
    _, cluster = sim_cluster
    created = cluster.create("Lease", "gpubot", _lease("gpubot-leader", "a"))
    # A 409 on create is for good (the name is taken); a 409 on update is worth a retry.
    with pytest.raises(AlreadyExists) as taken:
        cluster.create("Lease", "gpubot", _lease("gpubot-leader", "b"))
    assert isinstance(taken.value, PermanentError)

    version = created["metadata"]["resourceVersion"]
    renewed = cluster.replace(
        "Lease", "gpubot", "gpubot-leader", _lease("gpubot-leader", "a", version)
    )
    with pytest.raises(Conflict) as stale:
        cluster.replace("Lease", "gpubot", "gpubot-leader", _lease("gpubot-leader", "b", version))
    assert isinstance(stale.value, TemporaryError)
    held = cluster.get("Lease", "gpubot", "gpubot-leader")
    assert held["spec"]["holderIdentity"] == "a"
    assert held["metadata"]["resourceVersion"] == renewed["metadata"]["resourceVersion"]
    assert [x["metadata"]["name"] for x in cluster.list("Lease", namespace="gpubot")] == [
        "gpubot-leader"
    ]


def test_pods_can_be_created_and_their_log_read(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    cluster.create("Pod", "default", pod)
    assert server.store.get(BY_KIND["Pod"], "default", "probe")["metadata"]["name"] == "probe"
    assert "default/probe" in cluster.pod_log("default", "probe")
    with pytest.raises(NotFound):
        cluster.pod_log("default", "absent")

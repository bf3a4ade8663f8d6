"""Drain with kubectl's semantics, against the simulator through the real client."""

from __future__ import annotations

import threading
from typing import Any

from bot.kube.cluster import KubeCluster
from bot.remediate.draining import DrainProgress, drain, plan_drain
from bot.sim.store import BY_KIND

Sim = tuple[Any, KubeCluster]
MERGE = "application/merge-patch+json"


def _pods_on(server: Any, node: str) -> list[str]:
    items, _ = server.store.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
    return sorted(p["metadata"]["name"] for p in items)


def test_drain_evicts_what_kubectl_would_and_reports_progress(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    progress: list[DrainProgress] = []
    result = drain(cluster, "gpu-a3", timeout_s=20, on_progress=progress.append)
    assert result.completed and not result.stalled
    assert sorted(result.evicted) == [
        ("ml", "train-llm-1-worker-0"),
        ("monitoring", "metrics-agent-gpu-a3-0"),
    ]
    assert sorted(server.store.evictions) == sorted(result.evicted)
    assert server.store.direct_deletes == []
    assert all(
        "daemonset" in p or p.startswith(("nvidia-", "gpu-feature"))
        for p in _pods_on(server, "gpu-a3")
    )
    assert server.store.get(BY_KIND["Node"], "", "gpu-a3")["spec"]["unschedulable"] is True
    gone = [p for p in progress if p.event == "gone"]
    assert [p.done for p in gone] == [1, 2] and gone[-1].total == 2


def test_refused_plan_changes_nothing(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["Pod"],
        "monitoring",
        "metrics-agent-gpu-a4-0",
        MERGE,
        {"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}},
    )
    result = drain(cluster, "gpu-a4", timeout_s=5)
    assert result.refused and not result.completed
    [refusal] = result.plan.refusals
    assert (refusal.kind, refusal.flag) == ("emptydir", "--delete-emptydir-data")
    assert server.store.evictions == []
    assert not server.store.get(BY_KIND["Node"], "", "gpu-a4")["spec"].get("unschedulable")
    allowed = drain(cluster, "gpu-a4", timeout_s=20, delete_emptydir_data=True)
    assert allowed.completed and ("monitoring", "metrics-agent-gpu-a4-0") in allowed.evicted


def test_pods_without_controller_need_force_and_force_deletes_directly(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["Pod"],
        "monitoring",
        "metrics-agent-gpu-a2-0",
        MERGE,
        {"metadata": {"ownerReferences": None}},
    )
    plan = plan_drain(cluster, "gpu-a2")
    assert [(r.kind, r.name) for r in plan.refusals] == [
        ("no-controller", "metrics-agent-gpu-a2-0")
    ]
    result = drain(cluster, "gpu-a2", timeout_s=20, force=True)
    assert result.completed and result.evicted == []
    assert sorted(server.store.direct_deletes) == sorted(result.deleted)
    assert ("monitoring", "metrics-agent-gpu-a2-0") in result.deleted


def test_missing_daemonset_is_refused_as_kubectl_does(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.delete(BY_KIND["DaemonSet"], "gpu-operator", "nvidia-dcgm-exporter")
    plan = plan_drain(cluster, "gpu-a1")
    assert [r.kind for r in plan.refusals] == ["daemonset-missing"]


def test_pdb_block_stalls_with_the_blocker_named_and_the_rest_evicted(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-0-pdb",
        MERGE,
        {"spec": {"minAvailable": 2}},
    )
    progress: list[DrainProgress] = []
    result = drain(cluster, "gpu-a1", timeout_s=2, on_progress=progress.append)
    assert not result.completed
    [stall] = result.stalled
    assert (stall.namespace, stall.name) == ("ml", "train-llm-0-worker-0")
    assert "disruption budget" in stall.reason
    assert result.evicted == [("monitoring", "metrics-agent-gpu-a1-0")]
    assert "train-llm-0-worker-0" in _pods_on(server, "gpu-a1")
    assert any(p.event == "blocked" and "train-llm-0-pdb" in p.detail for p in progress)
    assert server.store.direct_deletes == []


def test_drain_goes_on_as_soon_as_the_budget_allows(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-0-pdb",
        MERGE,
        {"spec": {"minAvailable": 2}},
    )
    release = threading.Timer(
        1.0,
        lambda: server.store.patch(
            BY_KIND["PodDisruptionBudget"],
            "ml",
            "train-llm-0-pdb",
            MERGE,
            {"spec": {"minAvailable": 1}},
        ),
    )
    release.start()
    result = drain(cluster, "gpu-a1", timeout_s=20)
    assert result.completed and ("ml", "train-llm-0-worker-0") in result.evicted
    assert result.duration_s < 5  # kubectl would wait its fixed 5 s after the 429


def test_finalizer_stall_names_the_finalizer(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["Pod"],
        "ml",
        "train-llm-1-worker-1",
        MERGE,
        {"metadata": {"finalizers": ["example.com/checkpoint-upload"]}},
    )
    result = drain(cluster, "gpu-a4", timeout_s=2)
    [stall] = result.stalled
    assert stall.name == "train-llm-1-worker-1"
    assert stall.reason == "Terminating, held by finalizers example.com/checkpoint-upload"
    assert ("ml", "train-llm-1-worker-1") in result.evicted  # evicted, but not gone

"""Drain with kubectl's semantics, against the simulator through the real client."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from bot.acting.draining import DrainProgress, drain, plan_drain
from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot
from bot.kube.cluster import KubeCluster
from gpusim.resources import BY_KIND

Sim = tuple[Any, KubeCluster]
MERGE = "application/merge-patch+json"


def _budget(server: Any, min_available: int) -> None:
    """train-llm-0 has two workers: a budget of 2 lets neither go, 1 lets one go."""
    server.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-0-pdb",
        MERGE,
        {"spec": {"minAvailable": min_available}},
    )


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


def _unmanaged(server: Any) -> None:
    server.store.patch(
        BY_KIND["Pod"],
        "monitoring",
        "metrics-agent-gpu-a2-0",
        MERGE,
        {"metadata": {"ownerReferences": None}},
    )


def test_pods_without_controller_need_allow_unmanaged_and_are_still_evicted(
    sim_cluster: Sim,
) -> None:
    server, cluster = sim_cluster
    _unmanaged(server)
    plan = plan_drain(cluster, "gpu-a2")
    assert [(r.kind, r.name, r.flag) for r in plan.refusals] == [
        ("no-controller", "metrics-agent-gpu-a2-0", "--force")
    ]
    result = drain(cluster, "gpu-a2", timeout_s=20, allow_unmanaged=True)
    assert result.completed and result.deleted == []
    assert ("monitoring", "metrics-agent-gpu-a2-0") in result.evicted
    assert server.store.direct_deletes == []  # kubectl's --force still evicts


def test_only_disable_eviction_deletes_directly_and_it_ignores_the_pdb(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    _budget(server, min_available=2)
    result = drain(cluster, "gpu-a1", timeout_s=20, disable_eviction=True)
    assert result.completed and result.evicted == []
    assert sorted(server.store.direct_deletes) == sorted(result.deleted)
    assert ("ml", "train-llm-0-worker-0") in result.deleted


def test_missing_daemonset_is_refused_as_kubectl_does(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    server.store.delete(BY_KIND["DaemonSet"], "gpu-operator", "nvidia-dcgm-exporter")
    plan = plan_drain(cluster, "gpu-a1")
    assert [r.kind for r in plan.refusals] == ["daemonset-missing"]


def test_pdb_block_stalls_with_the_blocker_named_and_the_rest_evicted(sim_cluster: Sim) -> None:
    server, cluster = sim_cluster
    _budget(server, min_available=2)
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
    _budget(server, min_available=2)
    released: list[float] = []
    gone: list[float] = []

    def release() -> None:
        _budget(server, min_available=1)
        released.append(time.monotonic())

    def progress(p: DrainProgress) -> None:
        if p.event == "gone" and "train" in p.pod:
            gone.append(time.monotonic())

    threading.Timer(1.0, release).start()
    result = drain(cluster, "gpu-a1", timeout_s=30, on_progress=progress)
    assert result.completed and ("ml", "train-llm-0-worker-0") in result.evicted
    # Backoff is capped at 2 s: the pod goes within one step of the budget allowing it,
    # where kubectl waits its fixed 5 s after every 429.
    assert gone[0] - released[0] < 3.5


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


def test_the_proposal_names_the_pods_and_flags_the_drain_refuses(sim_cluster: Sim) -> None:
    """One reading of kubectl's filters (`bot.facts.drain_filters`): the blockers a drain
    proposal shows with a flag are the drain's refusals, pod for pod, and the pods it counts
    as leaving are among those the drain evicts or waits for. Before, the proposal did not
    name a pod whose DaemonSet was gone (the drain refused it), and named emptyDir or a
    missing controller on a pod already terminating (the drain only waits for it)."""
    server, cluster = sim_cluster
    server.store.patch(
        BY_KIND["Pod"],
        "monitoring",
        "metrics-agent-gpu-a2-0",
        MERGE,
        {
            "metadata": {"ownerReferences": None},
            "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]},
        },
    )
    server.store.delete(BY_KIND["DaemonSet"], "gpu-operator", "nvidia-dcgm-exporter")
    plan = plan_drain(cluster, "gpu-a2")
    node = collect_facts(read_snapshot(cluster), [], Settings(), datetime.now(UTC)).nodes["gpu-a2"]
    flagged = {
        (b.namespace, b.pod, b.kind, b.bypass_flag)
        for b in node.blockers
        if b.kind in ("emptydir", "no-controller", "daemonset-missing", "daemonset")
        and b.bypass_flag != "--ignore-daemonsets"
    }
    refused = {(r.namespace, r.name, r.kind, r.flag) for r in plan.refusals}
    assert refused == flagged
    assert {kind for _, _, kind, _ in refused} == {"emptydir", "no-controller", "daemonset-missing"}
    leaving = {(p.namespace, p.name) for p in node.pods if p.must_leave}
    refused_pods = {(ns, name) for ns, name, _, _ in refused}
    assert leaving - refused_pods <= {(p.namespace, p.name) for p in plan.to_remove}

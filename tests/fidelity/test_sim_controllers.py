"""The simulated kubelet, scheduler and workload controllers (gpusim/controllers.py).

Deterministic through `Controllers.reconcile()` with a fixed clock on a fresh
`healthy_cluster(4)`: cpu-1 plus gpu-a1..gpu-a4, each GPU node running one 8-GPU training
worker (Jobs train-llm-0 and train-llm-1), a metrics agent (implicit ReplicaSets) and the
seven GPU Operator DaemonSet pods. One test runs the background threads in real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from bot.config import Settings
from bot.facts.collecting import collect_facts
from bot.facts.pending import split_scheduler_message
from bot.facts.snapshots import Snapshot
from bot.kube_objects import quantity
from gpusim import objects
from gpusim.controllers import Controllers
from gpusim.faults import cordon, uncordon
from gpusim.objects import GPU_OPERATOR_NS, OPERATOR_DAEMONSETS
from gpusim.resources import BY_KIND, RESOURCES
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.scheduling import node_affinity_matches
from gpusim.state import ClusterState
from tests.helpers.clocks import FakeClock

Json = dict[str, Any]
NOW = FIXTURE_NOW
SMP = "application/strategic-merge-patch+json"
POD, NODE, EVENT = BY_KIND["Pod"], BY_KIND["Node"], BY_KIND["Event"]
FULL = (
    "0/5 nodes are available: 1 node(s) were unschedulable, 4 Insufficient nvidia.com/gpu. "
    "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, "
    "3 No preemption victims found for incoming pod."
)


@pytest.fixture
def store() -> ClusterState:
    fresh = ClusterState()
    fresh.load(healthy_cluster(4, NOW)["items"])
    return fresh


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW + timedelta(minutes=1))


@pytest.fixture
def controllers(store: ClusterState, clock: FakeClock) -> Controllers:
    return Controllers(store, now_fn=clock)


def pods(store: ClusterState, namespace: str = "", selector: str = "") -> list[Json]:
    items, _ = store.list(POD, namespace, field_selector=selector)
    return items


def replacements(store: ClusterState, job: str) -> list[Json]:
    return [
        p
        for p in pods(store, "ml")
        if p["metadata"].get("generateName") == f"{job}-"
        and p["metadata"]["ownerReferences"][0]["name"] == job
    ]


def events(store: ClusterState, pod: Json, reason: str) -> list[Json]:
    items, _ = store.list(
        EVENT,
        pod["metadata"]["namespace"],
        field_selector=f"involvedObject.name={pod['metadata']['name']},reason={reason}",
    )
    return items


def condition(pod: Json, kind: str) -> Json:
    return next(c for c in pod["status"]["conditions"] if c["type"] == kind)


def add_gpu_node(store: ClusterState, name: str) -> None:
    store.load([objects.node(name, "a100-east", NOW)])


def patch_node(store: ClusterState, name: str, body: Json) -> None:
    store.patch(NODE, "", name, SMP, body)


def evict_worker(store: ClusterState, node: str) -> Json:
    """What `kubectl drain` does to the training worker on `node`: cordon, then evict."""
    cordon(store, node, NOW)
    worker = next(
        p
        for p in pods(store, "ml", f"spec.nodeName={node}")
        if p["metadata"]["name"].startswith("train-llm-")
    )
    store.evict("ml", worker["metadata"]["name"], {})
    return worker


def snapshot(store: ClusterState) -> Snapshot:
    items = []
    for resource in RESOURCES:
        listed, _ = store.list(resource, "")
        items += [{**obj, "kind": resource.kind} for obj in listed]
    return Snapshot.from_items(items)


def wait_for(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


# ---- a healthy cluster needs nothing ---------------------------------------------------------


def test_healthy_cluster_is_a_fixed_point(store: ClusterState, controllers: Controllers) -> None:
    before = store.resource_version
    assert controllers.reconcile() == []
    assert store.resource_version == before


# ---- Job replacement, scheduler refusal, and what the diagnosis reads from it ---------------


def test_evicted_worker_is_replaced_and_pending_with_the_schedulers_message(
    store: ClusterState, controllers: Controllers, clock: FakeClock
) -> None:
    old = evict_worker(store, "gpu-a1")
    changes = controllers.reconcile()
    assert changes

    [new] = replacements(store, "train-llm-0")
    meta, spec = new["metadata"], new["spec"]
    assert meta["name"].startswith("train-llm-0-") and meta["name"] != old["metadata"]["name"]
    assert meta["labels"] == old["metadata"]["labels"]
    assert meta["ownerReferences"] == old["metadata"]["ownerReferences"]
    assert "nodeName" not in spec
    assert spec["containers"] == old["spec"]["containers"]
    assert new["status"]["phase"] == "Pending"
    assert "containerStatuses" not in new["status"]
    scheduled = condition(new, "PodScheduled")
    assert (scheduled["status"], scheduled["reason"], scheduled["message"]) == (
        "False",
        "Unschedulable",
        FULL,
    )

    [failed] = events(store, new, "FailedScheduling")
    assert failed["type"] == "Warning"
    assert failed["message"] == FULL
    assert failed["reportingComponent"] == "default-scheduler"
    assert failed["action"] == "Scheduling"
    assert failed["involvedObject"]["uid"] == meta["uid"]
    assert failed["eventTime"].startswith("2026-12-02T03:01:00")

    # The kubelet on the drained node said it stopped the evicted worker's container.
    [killing] = events(store, old, "Killing")
    assert killing["source"] == {"component": "kubelet", "host": "gpu-a1"}
    assert killing["message"] == "Stopping container main"

    # The Job controller said it created the replacement.
    created, _ = store.list(EVENT, "ml", field_selector="reason=SuccessfulCreate")
    assert [e["message"] for e in created] == [f"Created pod: {meta['name']}"]

    facts = collect_facts(snapshot(store), [], Settings(), clock.now + timedelta(minutes=1))
    [pending] = [p for p in facts.pending_pods if p.name == meta["name"]]
    assert pending.evicted_from == "gpu-a1"
    assert pending.owner == "Job/train-llm-0"
    assert pending.requests == {"nvidia.com/gpu": 8}
    assert {(r.kind, r.count) for r in pending.reasons} == {
        ("unschedulable", 1),
        ("insufficient-gpu", 4),
    }
    assert split_scheduler_message(FULL) == [
        (1, "node(s) were unschedulable"),
        (4, "Insufficient nvidia.com/gpu"),
    ]


def test_a_free_node_gets_the_replacement(store: ClusterState, controllers: Controllers) -> None:
    evict_worker(store, "gpu-a1")
    add_gpu_node(store, "gpu-a5")
    controllers.reconcile()

    [new] = replacements(store, "train-llm-0")
    assert new["spec"]["nodeName"] == "gpu-a5"
    status = new["status"]
    assert status["phase"] == "Running"
    assert status["hostIP"] == objects.node_ip("gpu-a5")
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(new, kind)["status"] == "True"
    [container] = status["containerStatuses"]
    assert container["ready"] and "running" in container["state"]
    [scheduled] = events(store, new, "Scheduled")
    assert scheduled["message"] == f"Successfully assigned ml/{new['metadata']['name']} to gpu-a5"
    assert events(store, new, "FailedScheduling") == []


def test_a_cordoned_node_is_skipped_until_uncordoned(
    store: ClusterState, controllers: Controllers
) -> None:
    evict_worker(store, "gpu-a1")
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert "1 node(s) were unschedulable" in condition(new, "PodScheduled")["message"]

    uncordon(store, "gpu-a1", NOW)
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert new["spec"]["nodeName"] == "gpu-a1"
    assert new["status"]["phase"] == "Running"
    assert condition(new, "PodScheduled")["status"] == "True"


def test_terminating_pods_still_hold_their_gpus(
    store: ClusterState, controllers: Controllers
) -> None:
    cordon(store, "gpu-a1", NOW)
    store.patch(
        POD,
        "ml",
        "train-llm-0-worker-0",
        SMP,
        {"metadata": {"finalizers": ["example.com/hold"]}},
    )
    store.evict("ml", "train-llm-0-worker-0", {})
    uncordon(store, "gpu-a1", NOW)
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert new["status"]["phase"] == "Pending"
    assert condition(new, "PodScheduled")["message"].startswith(
        "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."
    )

    store.patch(POD, "ml", "train-llm-0-worker-0", SMP, {"metadata": {"finalizers": None}})
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert new["spec"]["nodeName"] == "gpu-a1"


@pytest.mark.parametrize(
    ("hide", "reason"),
    [
        (False, "node(s) had untolerated taint {gpubot.io/maintenance: true}"),
        (True, "node(s) had untolerated taint(s)"),
    ],
)
def test_an_untolerated_taint(
    store: ClusterState, clock: FakeClock, hide: bool, reason: str
) -> None:
    controllers = Controllers(store, now_fn=clock, hide_taint_values=hide)
    taint = {"key": "gpubot.io/maintenance", "value": "true", "effect": "NoSchedule"}
    patch_node(store, "gpu-a2", {"spec": {"taints": [taint]}})
    store.evict("ml", "train-llm-0-worker-1", {})
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert condition(new, "PodScheduled")["message"] == (
        f"0/5 nodes are available: 1 {reason}, 4 Insufficient nvidia.com/gpu. "
        "preemption: 0/5 nodes are available: 2 Preemption is not helpful for scheduling, "
        "3 No preemption victims found for incoming pod."
    )

    # Tolerating it is as good as removing it.
    new["spec"]["tolerations"].append({**taint, "operator": "Equal"})
    store.replace(POD, "ml", new["metadata"]["name"], new)
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    assert new["spec"]["nodeName"] == "gpu-a2"


def probe(
    store: ClusterState, name: str, gpus: int = 1, spec: Json | None = None, **options: Any
) -> Json:
    body = objects.pod(
        name,
        "ml",
        None,
        NOW,
        gpus=gpus,
        owner_ref=objects.owner("Job", name, "batch/v1"),
        **options,
    )
    body["spec"].update(spec or {})
    return store.create(POD, "ml", body)


def message_of(store: ClusterState, name: str) -> str:
    return str(condition(store.get(POD, "ml", name), "PodScheduled")["message"])


def test_a_node_selector_mismatch(store: ClusterState, controllers: Controllers) -> None:
    add_gpu_node(store, "gpu-a5")
    probe(store, "h100", spec={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}})
    controllers.reconcile()
    assert message_of(store, "h100") == (
        "0/6 nodes are available: 6 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
    )

    patch_node(store, "gpu-a5", {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-H100"}}})
    controllers.reconcile()
    assert store.get(POD, "ml", "h100")["spec"]["nodeName"] == "gpu-a5"


def test_required_node_affinity(store: ClusterState, controllers: Controllers) -> None:
    add_gpu_node(store, "gpu-a5")
    terms = [
        {
            "matchExpressions": [
                {"key": "nvidia.com/gpu.present", "operator": "Exists"},
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-a5"]},
            ]
        }
    ]
    required = {"nodeSelectorTerms": terms}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    probe(store, "not-a5", spec={"affinity": affinity})
    controllers.reconcile()
    assert message_of(store, "not-a5").startswith(
        "0/6 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "4 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: "
        "2 Preemption is not helpful for scheduling, 4 No preemption victims found"
    )


@pytest.mark.parametrize(
    ("expression", "matches"),
    [
        ({"key": "nvidia.com/gpu.count", "operator": "In", "values": ["4", "8"]}, True),
        ({"key": "nvidia.com/gpu.count", "operator": "NotIn", "values": ["8"]}, False),
        ({"key": "missing", "operator": "NotIn", "values": ["x"]}, True),
        ({"key": "nvidia.com/mig.capable", "operator": "Exists"}, True),
        ({"key": "nvidia.com/mig.capable", "operator": "DoesNotExist"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["4"]}, False),
    ],
)
def test_node_affinity_operators(expression: Json, matches: bool) -> None:
    node = objects.node("gpu-x", "a100-east", NOW)
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expression]}]
                }
            }
        }
    }
    assert node_affinity_matches(spec, node) is matches


def test_insufficient_cpu_no_where_is_unresolvable(
    store: ClusterState, controllers: Controllers
) -> None:
    body = probe(store, "greedy", gpus=0)
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200", "memory": "1Gi"}}
    store.replace(POD, "ml", "greedy", body)
    controllers.reconcile()
    assert message_of(store, "greedy") == (
        "0/5 nodes are available: 5 Insufficient cpu. "
        "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    )


def test_preemption_policy_never(store: ClusterState, controllers: Controllers) -> None:
    probe(store, "polite", gpus=8, spec={"preemptionPolicy": "Never"})
    controllers.reconcile()
    assert message_of(store, "polite") == (
        "0/5 nodes are available: 5 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


# ---- no spam -------------------------------------------------------------------------------


def test_failed_scheduling_is_not_repeated(
    store: ClusterState, controllers: Controllers, clock: FakeClock
) -> None:
    evict_worker(store, "gpu-a1")
    controllers.reconcile()
    [new] = replacements(store, "train-llm-0")
    before = store.resource_version
    for _ in range(3):
        assert controllers.reconcile() == []
    # A change that does not change the verdict records nothing either.
    patch_node(store, "gpu-a3", {"metadata": {"labels": {"example.com/rack": "r7"}}})
    before = store.resource_version
    assert controllers.reconcile() == []
    assert store.resource_version == before
    # Nor does a second set of controllers on the same cluster.
    assert Controllers(store, now_fn=clock).reconcile() == []
    [event] = events(store, new, "FailedScheduling")
    assert "series" not in event

    # Five minutes on, the scheduler retries by itself: the same event counts it.
    clock.now += timedelta(minutes=6)
    controllers.reconcile()
    [event] = events(store, new, "FailedScheduling")
    assert event["series"]["count"] == 2
    assert event["series"]["lastObservedTime"].startswith("2026-12-02T03:07:00")

    # A different verdict is a different event (the recorder keys on the message).
    cordon(store, "gpu-a2", NOW)
    controllers.reconcile()
    messages = sorted(e["message"] for e in events(store, new, "FailedScheduling"))
    assert len(messages) == 2
    assert any(
        m.startswith("0/5 nodes are available: 2 node(s) were unschedulable") for m in messages
    )
    new = store.get(POD, "ml", new["metadata"]["name"])
    assert "2 node(s) were unschedulable" in condition(new, "PodScheduled")["message"]


# ---- ReplicaSets and Jobs ------------------------------------------------------------------


def test_implicit_replicaset_and_finished_job_pods(
    store: ClusterState, controllers: Controllers
) -> None:
    store.delete(POD, "monitoring", "metrics-agent-gpu-a3-0")
    finished = store.get(POD, "ml", "train-llm-1-worker-1")
    finished["status"]["phase"] = "Succeeded"
    store.replace(POD, "ml", "train-llm-1-worker-1", finished)
    controllers.reconcile()  # the Job controller sees it succeed...
    store.delete(POD, "ml", "train-llm-1-worker-1")  # ...and then go: nothing to replace
    controllers.reconcile()

    [agent] = [
        p
        for p in pods(store, "monitoring")
        if p["metadata"].get("generateName") == "metrics-agent-0-"
    ]
    assert agent["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert agent["status"]["phase"] == "Running"
    assert replacements(store, "train-llm-1") == []


def test_replicaset_object_is_reconciled_on_its_replicas(
    store: ClusterState, controllers: Controllers
) -> None:
    rs: Json = {
        "kind": "ReplicaSet",
        "metadata": {
            "name": "metrics-agent-0",
            "namespace": "monitoring",
            "uid": objects.uid("ReplicaSet", "metrics-agent-0"),
            "generation": 1,
        },
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "metrics-agent"}},
            "template": {"metadata": {"labels": {"app": "metrics-agent"}}, "spec": {}},
        },
    }
    store.load([rs])
    controllers.reconcile()
    status = store.get(BY_KIND["ReplicaSet"], "monitoring", "metrics-agent-0")["status"]
    assert (status["replicas"], status["readyReplicas"]) == (4, 4)

    store.delete(POD, "monitoring", "metrics-agent-gpu-a3-0")
    controllers.reconcile()
    assert len(pods(store, "monitoring")) == 4

    store.patch(
        BY_KIND["ReplicaSet"], "monitoring", "metrics-agent-0", SMP, {"spec": {"replicas": 2}}
    )
    controllers.reconcile()
    assert len(pods(store, "monitoring")) == 2

    # Once the ReplicaSet is gone, its pods are nobody's to replace.
    store.delete(BY_KIND["ReplicaSet"], "monitoring", "metrics-agent-0")
    victim = pods(store, "monitoring")[0]["metadata"]["name"]
    store.delete(POD, "monitoring", victim)
    controllers.reconcile()
    assert len(pods(store, "monitoring")) == 1


# ---- DaemonSets ----------------------------------------------------------------------------


def operator_apps(store: ClusterState, node: str) -> set[str]:
    return {
        p["metadata"]["labels"]["app"]
        for p in pods(store, GPU_OPERATOR_NS, f"spec.nodeName={node}")
        if not p["metadata"].get("deletionTimestamp")
    }


def test_daemonset_pods_follow_the_node_selector(
    store: ClusterState, controllers: Controllers
) -> None:
    all_apps = {ds for ds, _ in OPERATOR_DAEMONSETS}
    add_gpu_node(store, "gpu-a5")
    cordon(store, "gpu-a5", NOW)  # DaemonSet pods tolerate unschedulable
    controllers.reconcile()
    assert operator_apps(store, "gpu-a5") == all_apps
    for pod in pods(store, GPU_OPERATOR_NS, "spec.nodeName=gpu-a5"):
        assert pod["status"]["phase"] == "Running"
        assert pod["metadata"]["generateName"] == f"{pod['metadata']['labels']['app']}-"
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert terms == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a5"]}]}
        ]
    ds = store.get(BY_KIND["DaemonSet"], GPU_OPERATOR_NS, "nvidia-dcgm-exporter")
    assert ds["status"]["desiredNumberScheduled"] == ds["status"]["numberReady"] == 5

    # The operator takes its deploy labels off a node that is no GPU node any more.
    deploy_off = {f"nvidia.com/gpu.deploy.{deploy}": None for _, deploy in OPERATOR_DAEMONSETS}
    patch_node(store, "gpu-a5", {"metadata": {"labels": deploy_off}})
    controllers.reconcile()
    assert operator_apps(store, "gpu-a5") == set()
    assert operator_apps(store, "gpu-a4") == all_apps
    ds = store.get(BY_KIND["DaemonSet"], GPU_OPERATOR_NS, "nvidia-dcgm-exporter")
    assert ds["status"]["desiredNumberScheduled"] == 4
    deleted, _ = store.list(EVENT, GPU_OPERATOR_NS, field_selector="reason=SuccessfulDelete")
    assert len(deleted) == 7


def test_mig_manager_deploy_labels_remove_and_bring_back_pods(
    store: ClusterState, controllers: Controllers
) -> None:
    """With the GPU Operator's own nodeSelector (nvidia.com/gpu.deploy.<component>=true)."""
    plugin = "nvidia-device-plugin-daemonset"
    store.load(
        [
            {
                **objects.daemonset(
                    plugin, GPU_OPERATOR_NS, 4, "nvidia.com/gpu.deploy.device-plugin"
                ),
                "kind": "DaemonSet",
            }
        ]
    )
    assert controllers.reconcile() == []
    off = {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "false"}}}
    patch_node(store, "gpu-a2", off)
    controllers.reconcile()
    assert plugin not in operator_apps(store, "gpu-a2")
    assert len(operator_apps(store, "gpu-a2")) == 6
    assert plugin in operator_apps(store, "gpu-a1")

    on = {"metadata": {"labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}}}
    patch_node(store, "gpu-a2", on)
    controllers.reconcile()
    assert plugin in operator_apps(store, "gpu-a2")


# ---- quantities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("95690m", True, 95690),
        ("96", True, 96000),
        ("0.5", True, 500),
        ("1176371860Ki", False, 1176371860 * 1024),
        ("1.5Gi", False, 1610612736),
        ("1e3", False, 1000),
        ("2k", False, 2000),
        ("8", False, 8),
        ("100m", False, 1),
        ("lots", False, 0),
    ],
)
def test_quantity(text: str, milli: bool, value: int) -> None:
    assert quantity(text, milli=milli) == value


# ---- in the background ---------------------------------------------------------------------


def test_background_threads_follow_the_watch_history(store: ClusterState) -> None:
    controllers = Controllers(store, settle_s=0.01)
    controllers.start()
    try:
        assert controllers.running
        evict_worker(store, "gpu-a1")

        def pending_with_event() -> Json | None:
            for new in replacements(store, "train-llm-0"):
                if events(store, new, "FailedScheduling"):
                    return new
            return None

        new = wait_for(pending_with_event)
        assert new["status"]["phase"] == "Pending"
        uncordon(store, "gpu-a1", NOW)

        def running() -> bool:
            current = store.get(POD, "ml", new["metadata"]["name"])
            return bool(current["status"]["phase"] == "Running")

        wait_for(running)
        assert store.get(POD, "ml", new["metadata"]["name"])["spec"]["nodeName"] == "gpu-a1"
    finally:
        controllers.stop()
    assert not controllers.running

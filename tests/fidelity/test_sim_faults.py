"""Fault injection into the simulated cluster, judged by the diagnosis pipeline.

Each fault goes into a fresh `healthy_cluster(4)`; the store is then read back as a snapshot
(every kind listed, as `kubectl get -A -o json` would) and diagnosed with the alerts the fault
returns, and the rule the runbook names must fire on that node, and nothing else there.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import pytest

from bot.config import Settings
from bot.diagnose import DiagnoseResult
from bot.facts.collecting import collect_facts
from bot.facts.snapshots import parse_snapshot
from bot.roots.offline import diagnose_snapshot
from bot.rules.loading import RuleSet, load_rules
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from gpusim.faults import (
    FAULTS,
    FaultError,
    FaultResult,
    advance_upgrade,
    cordon,
    gpu_state,
    inject,
)
from gpusim.resources import BY_KIND, RESOURCES, ApiError
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.paths import REPO

NOW = FIXTURE_NOW
NODE = "gpu-a2"
SMP = "application/strategic-merge-patch+json"
Json = dict[str, Any]


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    return load_rules([REPO / "rules"])


@pytest.fixture
def store() -> ClusterState:
    fresh = ClusterState()
    fresh.load(healthy_cluster(4, NOW)["items"])
    return fresh


def snapshot_items(store: ClusterState) -> list[Json]:
    items = []
    for resource in RESOURCES:
        objects, _ = store.list(resource, "")
        for obj in objects:
            obj.setdefault("kind", resource.kind)
            items.append(obj)
    return items


def diagnose(
    store: ClusterState, rules: RuleSet, result: FaultResult | None = None, at: datetime = NOW
) -> DiagnoseResult:
    settings = Settings()
    signals = []
    if result is not None and result.alerts:
        signals = signals_from_payload(validate_payload(result.payload()), settings.node_labels)
    diagnosis = diagnose_snapshot(
        parse_snapshot({"items": snapshot_items(store)}), signals, rules, settings, at
    )
    assert diagnosis.errors == []
    return diagnosis


def rules_on(diagnosis: DiagnoseResult, node: str = NODE) -> set[str]:
    return {d.rule for d in diagnosis.diagnoses if d.node == node}


def node(store: ClusterState, name: str = NODE) -> Json:
    return store.get(BY_KIND["Node"], "", name)


def pod(store: ClusterState, namespace: str, name: str) -> Json:
    return store.get(BY_KIND["Pod"], namespace, name)


def events(store: ClusterState, reason: str, name: str = NODE) -> list[Json]:
    items, _ = store.list(BY_KIND["Event"], "")
    return [e for e in items if e["reason"] == reason and e["involvedObject"]["name"] == name]


def device_plugin(store: ClusterState, name: str = NODE) -> Json:
    pods, _ = store.list(
        BY_KIND["Pod"],
        "gpu-operator",
        "app=nvidia-device-plugin-daemonset",
        f"spec.nodeName={name}",
    )
    [found] = pods
    return found


def test_the_healthy_cluster_has_no_diagnosis(store: ClusterState, rules: RuleSet) -> None:
    assert diagnose(store, rules).diagnoses == []


# ---- each fault fires the runbook's rule ----------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "params", "rule"),
    [
        ("zero-capacity", {}, "gpu-capacity-zero"),
        ("plugin-crashloop", {}, "device-plugin-crashloop"),
        ("xid", {"code": 79, "gpu": 3}, "gpu-fell-off-bus"),
        ("xid", {"code": 48, "gpu": 1}, "gpu-xid-error"),
        ("ecc-dbe", {"gpu": 5}, "gpu-ecc-error"),
        ("nvlink", {"gpu": 2, "link": 3}, "nvlink-error"),
        ("fabric-manager-down", {}, "fabric-manager-down"),
        ("mig-failed", {"config": "all-1g.10gb"}, "mig-config-failed"),
        ("driver-upgrade-failed", {}, "driver-upgrade-failed"),
        ("not-ready", {}, "node-not-ready"),
    ],
)
def test_fault_fires_its_rule_and_only_it(
    store: ClusterState, rules: RuleSet, fault: str, params: Json, rule: str
) -> None:
    result = inject(store, fault, NODE, NOW, **params)
    assert result.fault == fault and result.node == NODE and result.description
    diagnosis = diagnose(store, rules, result)
    assert rules_on(diagnosis) == {rule}
    assert {d.node for d in diagnosis.diagnoses} == {NODE}


def test_pdb_block_then_cordon_is_a_stuck_drain_after_the_threshold(
    store: ClusterState, rules: RuleSet
) -> None:
    result = inject(store, "pdb-block", NODE, NOW)
    cordon(store, NODE, NOW)
    # kubectl drain: the metrics agent goes, the training worker gets the PDB's 429.
    store.evict("monitoring", f"metrics-agent-{NODE}-0", {})
    with pytest.raises(ApiError) as refused:
        store.evict("ml", "train-llm-0-worker-1", {})
    assert refused.value.code == 429
    assert "disruption budget" in refused.value.message
    assert result.description == [
        "ml/train-llm-0-pdb: minAvailable=2 of 2 healthy, disruptionsAllowed=0"
    ]

    threshold = Settings().thresholds.drain_stuck_after_s
    early = diagnose(store, rules, at=NOW + timedelta(seconds=threshold - 60))
    assert rules_on(early) == set()
    late = diagnose(store, rules, at=NOW + timedelta(seconds=threshold + 300))
    [stuck] = late.diagnoses
    assert (stuck.rule, stuck.node) == ("drain-stuck", NODE)
    assert [b.kind for b in stuck.blockers if b.kind != "daemonset"] == ["pdb"]


def test_finalizer_stuck_pod_stays_terminating_and_blocks_the_drain(
    store: ClusterState, rules: RuleSet
) -> None:
    result = inject(store, "finalizer-stuck", NODE, NOW)
    assert result.description[0].startswith("ml/train-llm-0-worker-1: finalizer")
    cordon(store, NODE, NOW)
    store.evict("monitoring", f"metrics-agent-{NODE}-0", {})
    store.evict("ml", "train-llm-0-worker-1", {})
    held = pod(store, "ml", "train-llm-0-worker-1")
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["example.com/checkpoint-upload"]

    diagnosis = diagnose(store, rules, at=NOW + timedelta(minutes=30))
    [stuck] = diagnosis.diagnoses
    assert (stuck.rule, stuck.node) == ("drain-stuck", NODE)
    assert "finalizer" in {b.kind for b in stuck.blockers}


def enable_mig(store: ClusterState, name: str = NODE) -> None:
    """What mig-manager leaves after applying all-1g.10gb under the mixed strategy."""
    store.patch(
        BY_KIND["Node"],
        "",
        name,
        SMP,
        {
            "metadata": {
                "labels": {
                    "nvidia.com/mig.strategy": "mixed",
                    "nvidia.com/mig.config": "all-1g.10gb",
                    "nvidia.com/mig.config.state": "success",
                }
            },
            "status": {
                "capacity": {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"},
                "allocatable": {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"},
            },
        },
    )
    store.delete(BY_KIND["Pod"], "ml", "train-llm-0-worker-1")


def test_reboot_loses_the_mig_layout_as_the_kubelet_reports_it(
    store: ClusterState, rules: RuleSet
) -> None:
    enable_mig(store)
    before = node(store)
    result = inject(store, "reboot", NODE, NOW, boot_id="5b1f7c2e-0d4a-4e8b-9a61-2f3c8d9e7a10")
    after = node(store)
    assert after["status"]["nodeInfo"]["bootID"] == "5b1f7c2e-0d4a-4e8b-9a61-2f3c8d9e7a10"
    assert after["status"]["nodeInfo"]["bootID"] != before["status"]["nodeInfo"]["bootID"]
    # The kubelet keeps a resource its plugin once registered, at 0, until it registers again.
    assert after["status"]["capacity"]["nvidia.com/mig-1g.10gb"] == "0"
    assert after["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "0"
    assert after["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert any("MIG layout all-1g.10gb lost" in line for line in result.description)
    [rebooted] = events(store, "Rebooted")
    assert rebooted["message"] == (
        f"Node {NODE} has been rebooted, boot id: 5b1f7c2e-0d4a-4e8b-9a61-2f3c8d9e7a10"
    )
    assert (rebooted["type"], rebooted["source"]) == (
        "Warning",
        {"component": "kubelet", "host": NODE},
    )
    assert rebooted["involvedObject"]["uid"] == NODE  # the kubelet's nodeRef
    ready = next(c for c in after["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["lastTransitionTime"]) == ("True", "2026-12-02T03:00:00Z")
    facts = collect_facts(
        parse_snapshot({"items": snapshot_items(store)}), [], Settings(), NOW + timedelta(minutes=5)
    )
    rebooted_node = facts.nodes[NODE]
    assert rebooted_node.since_reboot_s == 300
    assert rebooted_node.gpu is not None
    assert rebooted_node.gpu.mig_capacity == {}  # "0" in capacity means not offered


def test_reboot_with_the_mig_layout_lost_is_a_mig_config_failure(
    store: ClusterState, rules: RuleSet
) -> None:
    enable_mig(store)
    inject(store, "reboot", NODE, NOW)
    assert rules_on(diagnose(store, rules, at=NOW + timedelta(minutes=5))) == {"mig-config-failed"}


def test_reboot_with_mig_reapplied_keeps_the_layout_and_is_quiet(
    store: ClusterState, rules: RuleSet
) -> None:
    enable_mig(store)
    inject(store, "reboot", NODE, NOW, reapply_mig=True)
    assert node(store)["status"]["capacity"]["nvidia.com/mig-1g.10gb"] == "56"
    assert diagnose(store, rules, at=NOW + timedelta(minutes=5)).diagnoses == []


def test_reboot_restarts_containers_and_heals_gpus(store: ClusterState, rules: RuleSet) -> None:
    inject(store, "xid", NODE, NOW, code=79, gpu=3)
    inject(store, "reboot", NODE, NOW + timedelta(minutes=10))
    assert node(store)["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert gpu_state(store)[NODE][3]["healthy"] is True
    worker = pod(store, "ml", "train-llm-0-worker-1")["status"]["containerStatuses"][0]
    assert worker["restartCount"] == 1
    assert worker["lastState"]["terminated"]["exitCode"] == 255
    assert worker["lastState"]["terminated"]["reason"] == "Unknown"
    assert "running" in worker["state"] and "waiting" not in worker["state"]
    assert diagnose(store, rules, at=NOW + timedelta(minutes=15)).diagnoses == []


# ---- the store changes the way the real components make them --------------------------------


def test_zero_capacity_keeps_capacity(store: ClusterState) -> None:
    inject(store, "zero-capacity", NODE, NOW)
    status = node(store)["status"]
    assert (status["allocatable"]["nvidia.com/gpu"], status["capacity"]["nvidia.com/gpu"]) == (
        "0",
        "8",
    )


def test_plugin_crashloop_looks_like_the_kubelet_shows_it(store: ClusterState) -> None:
    inject(store, "plugin-crashloop", NODE, NOW, restarts=5)
    plugin = device_plugin(store)
    [status] = plugin["status"]["containerStatuses"]
    assert status["state"] == {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 2m40s restarting failed container=main pod="
            f"{plugin['metadata']['name']}_gpu-operator({plugin['metadata']['uid']})",
        }
    }
    assert (status["ready"], status["started"], status["restartCount"]) == (False, False, 5)
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert status["lastState"]["terminated"]["reason"] == "Error"
    ready = next(c for c in plugin["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")
    [backoff] = events(store, "BackOff", plugin["metadata"]["name"])
    assert backoff["type"] == "Warning"
    assert backoff["message"].startswith("Back-off restarting failed container main in pod ")
    assert node(store)["status"]["allocatable"]["nvidia.com/gpu"] == "0"


def test_xid_marks_a_gpu_unhealthy_once_and_not_for_application_xids(store: ClusterState) -> None:
    first = inject(store, "xid", NODE, NOW, code=79, gpu=3)
    inject(store, "xid", NODE, NOW, code=45, gpu=3)
    assert node(store)["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    assert gpu_state(store)[NODE][3]["xid"] == 45
    assert gpu_state(store)[NODE][3]["healthy"] is False
    inject(store, "xid", NODE, NOW, code=13, gpu=0)
    assert node(store)["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    assert gpu_state(store)[NODE][0]["healthy"] is True
    [alert] = first.alerts
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "GPUXidError",
        "node": NODE,
        "gpu": "3",
        "xid": "79",
        "severity": "critical",
    }


def test_ecc_dbe_counts_and_takes_the_gpu_out(store: ClusterState) -> None:
    result = inject(store, "ecc-dbe", NODE, NOW, gpu=5)
    assert gpu_state(store)[NODE][5]["ecc_dbe_volatile"] == 1
    assert node(store)["status"]["allocatable"]["nvidia.com/gpu"] == "7"
    assert {a["labels"]["alertname"] for a in result.alerts} == {
        "GPUECCDoubleBitError",
        "GPUXidError",
    }


def test_not_ready_is_what_the_node_lifecycle_controller_writes(store: ClusterState) -> None:
    inject(store, "not-ready", NODE, NOW)
    current = node(store)
    for condition in current["status"]["conditions"]:
        assert (condition["status"], condition["reason"], condition["message"]) == (
            "Unknown",
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
        )
    assert [(t["key"], t["effect"]) for t in current["spec"]["taints"]] == [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    [node_event] = events(store, "NodeNotReady")
    assert node_event["source"] == {"component": "node-controller"}
    worker = pod(store, "ml", "train-llm-0-worker-1")
    ready = next(c for c in worker["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    [pod_event] = events(store, "NodeNotReady", "train-llm-0-worker-1")
    assert (pod_event["type"], pod_event["message"]) == ("Warning", "Node is not ready")


def test_driver_upgrade_walks_the_operator_states(store: ClusterState, rules: RuleSet) -> None:
    inject(store, "driver-upgrade", NODE, NOW, version="570.86.15")
    labels = node(store)["metadata"]["labels"]
    assert labels["nvidia.com/gpu-driver-upgrade-state"] == "upgrade-required"
    assert labels["nvidia.com/cuda.driver-version.full"] == "550.54.15"

    advance_upgrade(store, NODE, "drain-required", NOW + timedelta(minutes=1))
    current = node(store)
    assert current["spec"]["unschedulable"] is True
    assert current["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] == (
        "drain-required"
    )
    with pytest.raises(ApiError):  # the GPU worker was evicted for the upgrade
        pod(store, "ml", "train-llm-0-worker-1")

    advance_upgrade(store, NODE, "upgrade-done", NOW + timedelta(minutes=10))
    current = node(store)
    labels = current["metadata"]["labels"]
    assert labels["nvidia.com/gpu-driver-upgrade-state"] == "upgrade-done"
    assert labels["nvidia.com/cuda.driver-version.full"] == "570.86.15"
    assert labels["nvidia.com/cuda.driver.major"] == "570"
    assert not current["spec"].get("unschedulable")
    reasons = [e["message"] for e in events(store, "GPUDriverUpgrade")]
    assert reasons[0] == "Successfully updated node state label to upgrade-required"
    assert len(reasons) == 9
    with pytest.raises(FaultError):
        advance_upgrade(store, NODE, "drain-required", NOW)


def test_writes_reach_watchers_with_rising_resource_versions(store: ClusterState) -> None:
    since = store.resource_version
    inject(store, "plugin-crashloop", NODE, NOW)
    stop = threading.Event()
    seen = []
    for event in store.watch(BY_KIND["Node"], "", since, timeout_s=0.3, stop=stop):
        seen.append(event)
    assert [e.type for e in seen] == ["MODIFIED"]
    assert int(seen[0].object["metadata"]["resourceVersion"]) > since


# ---- bad input changes nothing --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "target", "params", "message"),
    [
        ("melt-down", NODE, {}, "unknown fault 'melt-down'"),
        ("xid", "gpu-z9", {"code": 79}, 'node "gpu-z9" not found'),
        ("xid", NODE, {}, "missing a required argument: 'code'"),
        ("xid", NODE, {"code": 79, "gpu": 8}, "gpu must be an index from 0 to 7"),
        ("xid", NODE, {"code": "79"}, "code must be an integer"),
        ("zero-capacity", NODE, {"force": True}, "unexpected keyword argument 'force'"),
        ("zero-capacity", "cpu-1", {}, "has no NVIDIA GPUs"),
        ("driver-upgrade", NODE, {"version": "latest"}, "version must look like"),
        ("driver-upgrade", NODE, {"version": "550.54.15"}, "already runs driver 550.54.15"),
        ("finalizer-stuck", NODE, {"pod": "nope"}, 'pod "nope" not found'),
        ("pdb-block", "cpu-1", {}, "no PodDisruptionBudget covers"),
    ],
)
def test_bad_input_raises_and_changes_nothing(
    store: ClusterState, fault: str, target: str, params: Json, message: str
) -> None:
    version = store.resource_version
    before = snapshot_items(store)
    with pytest.raises(FaultError, match=message.replace("(", r"\(").replace(")", r"\)")):
        inject(store, fault, target, NOW, **params)
    assert store.resource_version == version
    assert snapshot_items(store) == before
    assert gpu_state(store) == {}


def test_every_fault_has_a_test() -> None:
    assert set(FAULTS) == {
        "zero-capacity",
        "plugin-crashloop",
        "xid",
        "ecc-dbe",
        "nvlink",
        "reboot",
        "mig-failed",
        "driver-upgrade",
        "driver-upgrade-failed",
        "fabric-manager-down",
        "pdb-block",
        "finalizer-stuck",
        "not-ready",
    }

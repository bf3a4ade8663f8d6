"""Facts computed from kubectl JSON: what the rules are allowed to believe about a node."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.errors import InputError
from bot.facts.collecting import resolve_signal_nodes
from bot.facts.pending import classify_reason, split_scheduler_message
from bot.facts.snapshots import Snapshot, load_snapshot
from bot.kube_objects import quantity, selector_matches
from bot.model import ClusterFacts, Signal
from tests.helpers.paths import HEALTHY

Facts = Callable[..., ClusterFacts]
Edited = Callable[..., Snapshot]

CORDON = {
    "kind": "Node",
    "name": "gpu-a1",
    "merge": {
        "spec": {
            "unschedulable": True,
            "taints": [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": "2026-12-02T02:30:00Z",
                }
            ],
        }
    },
}


def test_healthy_gpu_node_facts(edited: Edited, facts_of: Facts) -> None:
    node = facts_of(edited()).nodes["gpu-a1"]
    assert node.ready == "True"
    assert node.gpu_node and node.pool == "a100-east"
    assert node.gpu is not None
    assert (node.gpu.capacity, node.gpu.allocatable, node.gpu.count_label) == (8, 8, 8)
    assert node.driver_version == "550.54.15"
    assert node.mig_state == "success"
    assert all(c.present and not c.failing for c in node.components.values())
    assert node.gate_failures == []
    # Only what any drain skips: a drain of a healthy node meets no blocker of its own.
    assert [b.kind for b in node.blockers] == ["daemonset"] and node.remaining_pods == 2


def test_cpu_node_is_not_a_gpu_node(edited: Edited, facts_of: Facts) -> None:
    facts = facts_of(edited())
    assert not facts.nodes["cpu-1"].gpu_node
    assert facts.pools["a100-east"].gpu_pool and not facts.pools["system"].gpu_pool


def test_node_of_a_gpu_pool_without_gpu_labels_still_counts_as_gpu_node(
    edited: Edited, facts_of: Facts
) -> None:
    labels = {
        k: None
        for k in ("nvidia.com/gpu.present", "nvidia.com/gpu.count", "nvidia.com/gpu.product")
    }
    snapshot = edited(
        {
            "kind": "Node",
            "name": "gpu-a4",
            "merge": {
                "metadata": {"labels": labels},
                "status": {
                    "capacity": {"nvidia.com/gpu": None},
                    "allocatable": {"nvidia.com/gpu": None},
                },
            },
        }
    )
    node = facts_of(snapshot).nodes["gpu-a4"]
    assert node.gpu_node and node.gpu is not None and node.gpu.capacity == 0


def test_cordoned_node_names_each_drain_blocker(edited: Edited, facts_of: Facts) -> None:
    snapshot = edited(
        CORDON,
        {
            "kind": "PodDisruptionBudget",
            "namespace": "ml",
            "name": "train-llm-0-pdb",
            "merge": {"status": {"disruptionsAllowed": 0, "currentHealthy": 1}},
        },
        {
            "kind": "Pod",
            "namespace": "monitoring",
            "name": "metrics-agent-gpu-a1-0",
            "merge": {
                "metadata": {
                    "ownerReferences": None,
                    "deletionTimestamp": "2026-12-02T02:40:00Z",
                    "finalizers": ["example.com/flush-logs"],
                },
                "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]},
            },
        },
    )
    node = facts_of(snapshot).nodes["gpu-a1"]
    kinds = {b.kind: b for b in node.blockers}
    assert node.cordoned_for_s == 30 * 60
    assert (
        "train-llm-0-pdb" in kinds["pdb"].detail and "disruptionsAllowed=0" in kinds["pdb"].detail
    )
    assert kinds["emptydir"].bypass_flag == "--delete-emptydir-data"
    assert kinds["no-controller"].bypass_flag == "--force"
    assert "example.com/flush-logs" in kinds["finalizer"].detail
    assert kinds["daemonset"].bypass_flag == "--ignore-daemonsets"
    assert node.remaining_pods == 2


def test_pods_created_after_the_cordon_are_listed(edited: Edited, facts_of: Facts) -> None:
    snapshot = edited(
        CORDON,
        {
            "kind": "Pod",
            "namespace": "ml",
            "name": "train-llm-0-worker-0",
            "merge": {"metadata": {"creationTimestamp": "2026-12-02T02:50:00Z"}},
        },
    )
    assert facts_of(snapshot).nodes["gpu-a1"].pods_after_cordon == ["ml/train-llm-0-worker-0"]


def test_crashlooping_device_plugin_is_failing(
    edited: Edited, facts_of: Facts, healthy_raw: dict
) -> None:  # type: ignore[type-arg]
    plugin = next(
        i["metadata"]["name"]
        for i in healthy_raw["items"]
        if i["kind"] == "Pod"
        and i["spec"].get("nodeName") == "gpu-a2"
        and i["metadata"]["name"].startswith("nvidia-device-plugin-daemonset-")
    )
    waiting = {
        "name": "main",
        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.15.0",
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 12,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
    }
    snapshot = edited(
        {
            "kind": "Pod",
            "namespace": "gpu-operator",
            "name": plugin,
            "merge": {"status": {"containerStatuses": [waiting]}},
        }
    )
    component = facts_of(snapshot).nodes["gpu-a2"].components["nvidia-device-plugin-daemonset"]
    assert component.failing and component.restarts == 12
    assert component.waiting_reason == "CrashLoopBackOff"
    assert (
        "nvidia-device-plugin-daemonset failing (CrashLoopBackOff)"
        in facts_of(snapshot).nodes["gpu-a2"].gate_failures
    )


def test_xid_alert_feeds_node_xids_and_the_gate(edited: Edited, facts_of: Facts) -> None:
    signal = Signal(
        source="alertmanager",
        name="GPUXidError",
        node="gpu-a3",
        gpu="5",
        labels={"alertname": "GPUXidError", "xid": "48"},
        fingerprint="f",
    )
    node = facts_of(edited(), [signal]).nodes["gpu-a3"]
    assert [(x.code, x.gpu) for x in node.xids] == [(48, "5")]
    assert "Xid 48 on GPU 5" in node.gate_failures


def test_node_only_named_by_an_alert_is_unknown_but_present(
    edited: Edited, facts_of: Facts
) -> None:
    signal = Signal(
        source="alertmanager",
        name="GPUXidError",
        node="gpu-z9",
        labels={"xid": "79"},
        fingerprint="f",
    )
    node = facts_of(edited(), [signal]).nodes["gpu-z9"]
    assert not node.known and node.xids[0].code == 79


def test_scheduler_message_is_split_brace_aware() -> None:
    message = (
        "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 3 node(s) had untolerated "
        "taint {node.kubernetes.io/unschedulable: }, 5 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/12 nodes are available: 12 No preemption victims "
        "found for incoming pod."
    )
    assert split_scheduler_message(message) == [
        (4, "Insufficient nvidia.com/gpu"),
        (3, "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }"),
        (5, "node(s) didn't match Pod's node affinity/selector"),
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Insufficient nvidia.com/gpu", "insufficient-gpu"),
        ("Insufficient nvidia.com/gpus", "unknown-resource"),
        ("Insufficient cpu", "insufficient-other"),
        ("node(s) had untolerated taint {a: b}", "untolerated-taint"),
        ("node(s) didn't match Pod's node affinity/selector", "affinity-selector"),
        ("node(s) were unschedulable", "unschedulable"),
    ],
)
def test_scheduler_reasons_are_classified(text: str, kind: str) -> None:
    assert classify_reason(text, {"nvidia.com/gpu", "cpu"}, "nvidia.com/gpu") == kind


def test_quantities_and_selectors() -> None:
    assert quantity("8") == 8 and quantity("2Ki") == 2048
    # As resource.Quantity's Value() and MilliValue(): exact, rounded up, never a float.
    assert quantity("1500m") == 2 and quantity("1500m", milli=True) == 1500
    assert quantity("0.1") == 1 and quantity("100Mi") == 100 * 2**20
    assert quantity("12345678901234567890") == 12345678901234567890
    assert quantity("1e3") == 1000 and quantity("garbage") == 0
    selector = {
        "matchLabels": {"a": "1"},
        "matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]}],
    }
    assert selector_matches(selector, {"a": "1", "b": "x"})
    assert not selector_matches(selector, {"a": "1", "b": "y"})
    assert selector_matches({}, {"anything": "goes"})
    assert not selector_matches(None, {"a": "1"})


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('{"items": [\n  {"kind": "Node",}\n]}', ":2"),
        ('{"kind": "List"}', ""),
        ('{"items": [{"metadata": {"name": "x"}}]}', ": items[0]"),
        ('{"items": [{"kind": "Node", "metadata": {}}]}', ": items[0] (Node)"),
    ],
)
def test_malformed_snapshot_is_an_input_error_naming_the_place(
    tmp_path: Path, content: str, where: str
) -> None:
    path = tmp_path / "snap.json"
    path.write_text(content)
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert str(caught.value).startswith(str(path) + where)


def test_fixture_parses() -> None:
    assert len(load_snapshot(HEALTHY).nodes) == 5


def test_pdb_does_not_block_a_pod_that_is_not_running(edited: Edited, facts_of: Facts) -> None:
    # The Eviction API checks PDBs only for Running pods.
    snapshot = edited(
        CORDON,
        {
            "kind": "PodDisruptionBudget",
            "namespace": "ml",
            "name": "train-llm-0-pdb",
            "merge": {"status": {"disruptionsAllowed": 0}},
        },
        {
            "kind": "Pod",
            "namespace": "ml",
            "name": "train-llm-0-worker-0",
            "merge": {"status": {"phase": "Pending"}},
        },
    )
    assert [b for b in facts_of(snapshot).nodes["gpu-a1"].blockers if b.kind == "pdb"] == []


def test_grace_period_zero_is_kept(edited: Edited, facts_of: Facts) -> None:
    snapshot = edited(
        {
            "kind": "Pod",
            "namespace": "ml",
            "name": "train-llm-0-worker-0",
            "merge": {"spec": {"terminationGracePeriodSeconds": 0}},
        }
    )
    pod = next(
        p for p in facts_of(snapshot).nodes["gpu-a1"].pods if p.name == "train-llm-0-worker-0"
    )
    assert pod.grace_period_s == 0


def test_alert_naming_a_node_by_its_ip_is_resolved_to_the_node(
    edited: Edited, facts_of: Facts
) -> None:
    snapshot = edited()
    ip = next(
        a["address"]
        for n in snapshot.nodes
        if n["metadata"]["name"] == "gpu-a2"
        for a in n["status"]["addresses"]
        if a["type"] == "InternalIP"
    )
    signal = Signal(
        source="alertmanager",
        name="GPUXidError",
        node=ip,
        labels={"instance": f"{ip}:9400", "xid": "48"},
        fingerprint="f",
    )
    [resolved] = resolve_signal_nodes(snapshot, [signal])
    assert resolved.node == "gpu-a2"
    facts = facts_of(snapshot, [resolved])
    assert ip not in facts.nodes and facts.nodes["gpu-a2"].xids[0].code == 48


def test_the_fixture_is_what_the_scenario_builder_makes() -> None:
    import json

    from gpusim.scenarios import healthy_cluster

    assert json.loads(HEALTHY.read_text()) == healthy_cluster(4)

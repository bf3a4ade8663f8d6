"""GPU Operator must-gather bundles (tests/data/must-gather) read into objects and kernel
signals: what each bundle's README says is in it, what it says is not, and the xid79 bundle
diagnosed through the real pipeline."""

from __future__ import annotations

import contextlib
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config import Settings
from bot.errors import InputError
from bot.facts.describe import labels_from_must_gather, nodes_from_describe
from bot.facts.mustgather import Bundle, read_must_gather
from bot.facts.snapshots import Snapshot
from bot.kube_objects import Obj, name_of
from bot.model import Action, Lang
from bot.roots.offline import diagnose_snapshot, load_ruleset
from tests.helpers.paths import REPO

BUNDLES = REPO / "tests" / "data" / "must-gather"
XID79 = BUNDLES / "xid79-device-plugin-crashloop"
PARTIAL = BUNDLES / "partial-driver-crashloop-unreadable"

ALWAYS_MISSING = [
    "no events: must-gather does not collect them",
    "no pods outside namespace gpu-operator: must-gather collects only the operator's "
    "(gpu_nodes.descr names the others without their state)",
    "no PodDisruptionBudgets: must-gather does not collect them",
    "no nodes without NVIDIA PCI labels: must-gather collects only GPU nodes",
]


@pytest.fixture(scope="module")
def xid79() -> Bundle:
    return read_must_gather(XID79)


@pytest.fixture(scope="module")
def partial() -> Bundle:
    return read_must_gather(PARTIAL)


def _of(bundle: Bundle, kind: str) -> dict[str, Obj]:
    return {name_of(o): o for o in bundle.objects if o["kind"] == kind}


def _container(pod: Obj) -> dict[str, Any]:
    (status,) = pod["status"]["containerStatuses"]
    result: dict[str, Any] = status
    return result


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- the xid79 bundle ---------------------------------------------------------------------------


def test_xid79_nodes_are_the_described_ones(xid79: Bundle) -> None:
    nodes = _of(xid79, "Node")
    assert list(nodes) == ["gpu-node-1", "gpu-node-2"]
    for name, node in nodes.items():
        assert node["apiVersion"] == "v1"
        assert node["metadata"]["creationTimestamp"] == "2024-03-01T00:00:00Z"
        assert node["metadata"]["annotations"] == {"node.alpha.kubernetes.io/ttl": "0"}
        assert node["spec"] == {}  # Taints: <none>, Unschedulable: false
        assert node["status"]["addresses"] == [{"type": "Hostname", "address": name}]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.28.6"
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.7.13"
        assert node["status"]["nodeInfo"]["kernelVersion"] == "5.15.0-97-generic"
    assert nodes["gpu-node-2"]["status"]["nodeInfo"]["bootID"] == (
        "b8d74050-e190-583e-bccd-9fe54fd0c296"
    )


def test_xid79_capacity_and_allocatable_are_the_describe_texts(xid79: Bundle) -> None:
    nodes = _of(xid79, "Node")
    common = {
        "cpu": "128",
        "ephemeral-storage": "959786032Ki",
        "memory": "1056462396Ki",
        "pods": "110",
    }
    for node in nodes.values():
        assert node["status"]["capacity"] == {**common, "nvidia.com/gpu": "8"}
    assert nodes["gpu-node-1"]["status"]["allocatable"] == {**common, "nvidia.com/gpu": "8"}
    assert nodes["gpu-node-2"]["status"]["allocatable"] == {**common, "nvidia.com/gpu": "0"}


def test_xid79_conditions_are_the_describe_texts(xid79: Bundle) -> None:
    conditions = _of(xid79, "Node")["gpu-node-2"]["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    assert conditions[3] == {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": "2024-03-14T03:09:00Z",
        "lastTransitionTime": "2024-03-01T00:00:00Z",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }


def test_xid79_labels_agree_between_describe_and_the_label_list(xid79: Bundle) -> None:
    listed = labels_from_must_gather((XID79 / "gpu_nodes.labels").read_text())
    for name, node in _of(xid79, "Node").items():
        labels = node["metadata"]["labels"]
        assert labels == listed[name]
        assert len(labels) == 22
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["kubernetes.io/hostname"] == name


def test_xid79_operand_pods_keep_their_container_states(xid79: Bundle) -> None:
    pods = _of(xid79, "Pod")
    assert len(pods) == 13  # 12 operands and the operator, listed in both its files: once
    plugin = _container(pods["nvidia-device-plugin-daemonset-k7q2c"])
    assert plugin["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert plugin["restartCount"] == 11
    terminated = plugin["lastState"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 1)
    # No message in the YAML: the log's error line stands in for it.
    assert terminated["message"].startswith("E0314 03:05:41.612217")
    assert terminated["message"].endswith("error creating nvml.Device 3: nvml: GPU is lost")
    exporter = _container(pods["nvidia-dcgm-exporter-k7q2e"])
    assert exporter["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert "message" not in exporter["lastState"]["terminated"]  # its log has no error line
    running = [n for n, p in pods.items() if "running" in _container(p)["state"]]
    assert len(running) == 11
    assert pods["nvidia-device-plugin-daemonset-k7q2c"]["spec"]["nodeName"] == "gpu-node-2"


def test_xid79_daemonsets_and_cluster_policy(xid79: Bundle) -> None:
    assert sorted(_of(xid79, "DaemonSet")) == [
        "gpu-feature-discovery",
        "nvidia-container-toolkit-daemonset",
        "nvidia-dcgm-exporter",
        "nvidia-device-plugin-daemonset",
        "nvidia-driver-daemonset",
        "nvidia-operator-validator",
    ]
    (policy,) = _of(xid79, "ClusterPolicy").values()
    assert policy["status"]["state"] == "notReady"


def test_xid79_gives_gpu_node_2_its_xid_79_from_the_bug_report(xid79: Bundle) -> None:
    by_node = {(s.node, s.labels["xid"]): s for s in xid79.signals}
    assert sorted(by_node) == [("gpu-node-2", "154"), ("gpu-node-2", "79")]
    xid = by_node[("gpu-node-2", "79")]
    assert (xid.source, xid.name) == ("kernel", "GPUXidError")
    assert xid.labels["pci_bus_id"] == "0000:3b:00"
    assert xid.starts_at == _at("2024-03-14 02:46:03")
    assert xid.annotations["where"].startswith("nvidia-bug-report_gpu-node-2.log.gz:")
    assert xid79.collected_at == _at("2024-03-14 03:08:12")


def test_xid79_says_what_it_read_and_what_it_lacks(xid79: Bundle) -> None:
    assert xid79.read == [
        "gpu_nodes.descr",
        "gpu_nodes.labels",
        "gpu_operand_pods.yaml",
        "gpu_operator_pod.yaml",
        "gpu_operand_ds.yaml",
        "cluster_policy.yaml",
        "gpu_operand_pod_nvidia-device-plugin-daemonset-k7q2c.log",
        "nvidia-bug-report_gpu-node-1.log.gz",
        "nvidia-bug-report_gpu-node-2.log.gz",
    ]
    assert xid79.skipped == []
    assert xid79.missing == ALWAYS_MISSING


@pytest.mark.parametrize("folder", [XID79, PARTIAL], ids=["xid79", "partial"])
def test_a_snapshot_takes_the_bundles_objects(folder: Path) -> None:
    bundle = read_must_gather(folder)
    snapshot = Snapshot.from_items(bundle.objects, str(folder))
    assert len(snapshot.nodes) == 2
    assert len(snapshot.pods) == len(_of(bundle, "Pod"))
    assert len(snapshot.daemonsets) == 6
    assert snapshot.events == [] and snapshot.pdbs == []


# --- the partial bundle -------------------------------------------------------------------------


def test_partial_lists_what_it_skipped_and_what_is_missing(partial: Bundle) -> None:
    assert partial.skipped == [
        (
            "nvidia-bug-report_gpu-node-4.log.gz",
            "truncated gzip: member 5 ends before its end-of-stream marker; read members 1-4 "
            "and the whole lines of member 5",
        )
    ]
    assert partial.missing == [
        "node gpu-node-5: labels only, no status (not labelled nvidia.com/gpu.present=true)",
        "no ClusterPolicy (cluster_policy.missing)",
        "Xids of gpu-node-4 after the cut: nvidia-bug-report_gpu-node-4.log.gz is truncated, "
        "its kernel log may be incomplete",
        'no bug report for gpu-node-5 (must-gather.log: "Failed to collect nvidia-bug-report '
        'from gpu-node-5"; its driver pod nvidia-driver-daemonset-7kq2w was not running: '
        "CrashLoopBackOff): its kernel Xids are not known",
        *ALWAYS_MISSING,
    ]
    assert partial.read == [
        "gpu_nodes.descr",
        "gpu_nodes.labels",
        "gpu_operand_pods.yaml",
        "gpu_operator_pod.yaml",
        "gpu_operand_ds.yaml",
        "gpu_operand_pod_nvidia-driver-daemonset-7kq2w.log",
        "nvidia-bug-report_gpu-node-4.log.gz",
    ]


def test_partial_still_yields_what_it_can(partial: Bundle) -> None:
    nodes = _of(partial, "Node")
    assert list(nodes) == ["gpu-node-4", "gpu-node-5"]
    assert nodes["gpu-node-4"]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    # Listed three times (once per NFD PCI label), known by labels alone.
    assert nodes["gpu-node-5"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-node-5",
            "labels": {
                "feature.node.kubernetes.io/pci-0300_10de.present": "true",
                "feature.node.kubernetes.io/pci-0302_10de.present": "true",
                "feature.node.kubernetes.io/pci-10de.present": "true",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": "gpu-node-5",
                "kubernetes.io/os": "linux",
            },
        },
    }
    driver = _container(_of(partial, "Pod")["nvidia-driver-daemonset-7kq2w"])
    assert driver["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert driver["lastState"]["terminated"]["message"].splitlines() == [
        "modprobe: ERROR: could not insert 'nvidia': No such device",
        "[ 2751.884720] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x22:0x56:762)",
        "[ 2751.884810] NVRM: GPU 0000:3b:00.0: rm_init_adapter failed, device minor number 0",
    ]
    assert _of(partial, "ClusterPolicy") == {}
    assert partial.signals == []  # gpu-node-4's kernel log holds no Xid before the cut
    assert partial.collected_at == _at("2024-05-07 16:38:02")


# --- malformed input: an InputError, or parts listed as skipped ---------------------------------


def test_a_folder_that_is_not_a_bundle_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a GPU Operator must-gather folder"):
        read_must_gather(tmp_path)
    with pytest.raises(InputError, match="not a GPU Operator must-gather folder"):
        read_must_gather(tmp_path / "absent")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a GPU Operator must-gather folder"):
        read_must_gather(tmp_path / "file")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(XID79, tmp_path / "bundle"))


def test_garbled_describe_text_is_skipped_and_the_labels_still_give_the_nodes(copy: Path) -> None:
    (copy / "gpu_nodes.descr").write_bytes(b"\xff\x00 this is not kubectl output\n")
    bundle = read_must_gather(copy)
    assert bundle.skipped == [
        ("gpu_nodes.descr", "no 'Name:' line: not `kubectl describe nodes` output")
    ]
    nodes = _of(bundle, "Node")
    assert list(nodes) == ["gpu-node-1", "gpu-node-2"]
    assert "status" not in nodes["gpu-node-2"]
    assert bundle.missing[:2] == [
        "node gpu-node-1: labels only, no status (not in gpu_nodes.descr)",
        "node gpu-node-2: labels only, no status (not in gpu_nodes.descr)",
    ]
    Snapshot.from_items(bundle.objects)


def test_broken_yaml_and_a_cut_bug_report_are_skipped_not_fatal(copy: Path) -> None:
    (copy / "gpu_operand_ds.yaml").write_text("items: [\n")
    (copy / "cluster_policy.yaml").write_text("- just\n- a list\n")
    report = copy / "nvidia-bug-report_gpu-node-2.log.gz"
    report.write_bytes(report.read_bytes()[:700])
    bundle = read_must_gather(copy)
    skipped = dict(bundle.skipped)
    assert skipped["gpu_operand_ds.yaml"].startswith("invalid YAML at line 2")
    assert skipped["cluster_policy.yaml"] == "neither a Kubernetes object nor a List of them"
    assert skipped["nvidia-bug-report_gpu-node-2.log.gz"].startswith("truncated gzip")
    assert "no ClusterPolicy: cluster_policy.yaml could not be read" in bundle.missing
    assert _of(bundle, "DaemonSet") == {}
    assert len(_of(bundle, "Pod")) == 13
    Snapshot.from_items(bundle.objects)


def test_an_item_that_is_not_a_pod_is_skipped_alone(copy: Path) -> None:
    pods = copy / "gpu_operand_pods.yaml"
    pods.write_text(pods.read_text().replace("  kind: Pod\n", "  kind: Secret\n", 1))
    bundle = read_must_gather(copy)
    assert bundle.skipped == [("gpu_operand_pods.yaml: items[0]", "expected Pod, found Secret")]
    # The operator pod it was is still read from gpu_operator_pod.yaml.
    assert len(_of(bundle, "Pod")) == 13


def test_a_bundle_with_only_the_pod_list_is_read(tmp_path: Path) -> None:
    shutil.copy(XID79 / "gpu_operand_pods.yaml", tmp_path)
    bundle = read_must_gather(tmp_path)
    assert len(_of(bundle, "Pod")) == 13 and _of(bundle, "Node") == {}
    assert "gpu_nodes.descr: no node status (file absent)" in bundle.missing


def test_describe_and_label_readers_take_empty_text_and_refuse_garbage() -> None:
    assert nodes_from_describe("", "d") == []
    assert labels_from_must_gather("") == {}
    with pytest.raises(InputError):
        nodes_from_describe("Conditions:\n  garbage\n", "d")
    with pytest.raises(InputError, match=r"gpu_nodes.labels:1"):
        labels_from_must_gather("- key=value\n")
    with pytest.raises(InputError, match=r"gpu_nodes.labels:2"):
        labels_from_must_gather("gpu-node-1\nNot A Node Name!\n")


def test_a_label_value_is_everything_after_the_first_equals_sign() -> None:
    text = "gpu-node-1\n- example.com/empty=\n- example.com/odd=a=b\n\ngpu-node-1\n- k=v\n"
    # The later listing of a node replaces the earlier one.
    assert labels_from_must_gather(text) == {"gpu-node-1": {"k": "v"}}
    assert labels_from_must_gather(text.split("\n\n")[0]) == {
        "gpu-node-1": {"example.com/empty": "", "example.com/odd": "a=b"}
    }


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("Name: Labels=Conditions\n  -TrueFals,0123"))))
def test_arbitrary_text_gives_objects_or_an_input_error(text: str) -> None:
    for reader in (
        lambda: nodes_from_describe(text, "fuzz"),
        lambda: labels_from_must_gather(text, "fuzz"),
    ):
        with contextlib.suppress(InputError):
            reader()


# --- end to end, through the real pipeline ------------------------------------------------------


def _diagnoses(bundle: Bundle) -> dict[str, list[Any]]:
    settings_ = Settings()
    assert bundle.collected_at is not None
    result = diagnose_snapshot(
        Snapshot.from_items(bundle.objects),
        bundle.signals,
        load_ruleset(settings_),
        settings_,
        bundle.collected_at,
        Lang.EN,
    )
    assert result.errors == []
    by_node: dict[str, list[Any]] = {}
    for diagnosis in result.diagnoses:
        by_node.setdefault(diagnosis.node or "", []).append(diagnosis)
    return by_node


def test_xid79_bundle_is_diagnosed_as_a_gpu_off_the_bus_from_its_kernel_log(xid79: Bundle) -> None:
    by_node = _diagnoses(xid79)
    assert "gpu-node-1" not in by_node
    fell_off = {d.rule: d for d in by_node["gpu-node-2"]}["gpu-fell-off-bus"]
    assert [(p.action, p.node) for p in fell_off.proposals] == [(Action.DRAIN, "gpu-node-2")]
    assert any(e.startswith("Xid 79: GPU has fallen off the bus") for e in fell_off.evidence)
    kernel_xid79 = next(s for s in xid79.signals if s.labels["xid"] == "79")
    assert kernel_xid79.fingerprint in fell_off.signals


def test_xid79_bundle_gives_the_on_call_one_story(xid79: Bundle) -> None:
    by_node = _diagnoses(xid79)
    assert sorted(by_node) == ["gpu-node-2"]
    (diagnosis,) = by_node["gpu-node-2"]
    assert diagnosis.rule == "gpu-fell-off-bus"
    assert [(p.action, p.node) for p in diagnosis.proposals] == [(Action.DRAIN, "gpu-node-2")]
    assert not any("not in gpubot's Xid catalog" in e for e in diagnosis.evidence)

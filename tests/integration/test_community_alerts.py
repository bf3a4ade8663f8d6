"""The alerts people already have: real Alertmanager captures of GPU rule sets gpubot did not
write (tests/data/alertmanager/community/) give the right diagnosis through the real offline
pipeline (`diagnose_snapshot`: node resolution, facts, rules), in a cluster where their nodes
exist: the rule tests' healthy snapshot with gpu-node-1 and gpu-node-2 added, copies of gpu-a1
and gpu-a2 whose exporter and workload pods carry the names and IPs of the captures.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.commands import app
from bot.config import Settings
from bot.diagnose import DiagnoseResult
from bot.facts.snapshots import Snapshot, parse_snapshot
from bot.model import Diagnosis, Lang, Signal
from bot.roots.offline import diagnose_snapshot, load_ruleset
from bot.rules.loading import RuleSet
from bot.rules.testing import Edit, apply_edits, base_snapshot
from bot.sources.alertmanager.payloads import signals_from_body
from tests.helpers import look_alikes
from tests.helpers.paths import HEALTHY, NOW, REPO

CAPTURES = REPO / "tests" / "data" / "alertmanager" / "community"
SETTINGS = Settings()

# The capture's pods (README: "What the capture sets up"), by the pod of gpu-aN they replace.
NODE_1 = {
    "nvidia-dcgm-exporter": ("gpu-operator", "nvidia-dcgm-exporter-7lq8x", "10.244.1.23"),
    "metrics-agent": ("monitoring", "nvidia-gpu-exporter-x8k2d", "10.244.1.31"),
    "train-llm": ("research", "llm-train-worker-3", "10.244.1.40"),
}
NODE_2 = {
    "nvidia-dcgm-exporter": ("gpu-operator", "nvidia-dcgm-exporter-m2w9c", "10.244.2.17"),
    "metrics-agent": ("monitoring", "nvidia-gpu-exporter-5tq7n", "10.244.2.29"),
    "train-llm": ("inference", "embed-batch-7f9c4-x2kqp", "10.244.2.40"),
}


def _objects(raw: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [item for item in raw["items"] if item.get("kind") == kind]


def _copy_node(
    raw: dict[str, Any], source: str, target: str, address: str, pods: dict[str, Any]
) -> list[Edit]:
    """Edits adding `target`, a copy of node `source` with every pod on it; the pods named
    in `pods` (by the prefix of their name on `source`) get the capture's name and IP."""
    node = copy.deepcopy(next(n for n in _objects(raw, "Node") if n["metadata"]["name"] == source))
    node["metadata"]["name"] = target
    node["metadata"]["labels"]["kubernetes.io/hostname"] = target
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": address},
        {"type": "Hostname", "address": target},
    ]
    edits = [Edit(add=node)]
    subnet = pods["train-llm"][2].rsplit(".", 1)[0]
    on_source = [p for p in _objects(raw, "Pod") if p["spec"].get("nodeName") == source]
    for index, original in enumerate(on_source):
        pod = copy.deepcopy(original)
        name = original["metadata"]["name"]
        namespace, new_name, ip = pod["metadata"]["namespace"], f"{name}-{target}", None
        for prefix, (ns, captured, captured_ip) in pods.items():
            if name.startswith(prefix):
                namespace, new_name, ip = ns, captured, captured_ip
        ip = ip or f"{subnet}.{100 + index}"
        pod["metadata"].update(namespace=namespace, name=new_name)
        pod["spec"]["nodeName"] = target
        pod["status"].update(podIP=ip, podIPs=[{"ip": ip}])
        edits.append(Edit(add=pod))
    return edits


def community_cluster(*, extra: list[Edit] | None = None) -> Snapshot:
    raw = base_snapshot(HEALTHY)
    edits = _copy_node(raw, "gpu-a1", "gpu-node-1", "10.0.101.1", NODE_1)
    edits += _copy_node(raw, "gpu-a2", "gpu-node-2", "10.0.101.2", NODE_2)
    return parse_snapshot(apply_edits(raw, [*edits, *(extra or [])]), "community")


def _body(capture: str) -> bytes:
    return (CAPTURES / f"{capture}.json").read_bytes()


def signals(*captures: str) -> list[Signal]:
    """As the inbox splits the stored deliveries: the bytes Alertmanager sent."""
    found: list[Signal] = []
    for capture in captures:
        found += signals_from_body(_body(capture), SETTINGS.node_labels)
    return found


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    ruleset = load_ruleset(SETTINGS)
    assert ruleset.errors == []
    return ruleset


@pytest.fixture(scope="module")
def cluster() -> Snapshot:
    return community_cluster()


def run(
    cluster: Snapshot, rules: RuleSet, alerts: list[Signal], lang: Lang = Lang.EN
) -> DiagnoseResult:
    result = diagnose_snapshot(cluster, alerts, rules, SETTINGS, NOW, lang)
    assert result.errors == []
    return result


def _summary(diagnoses: list[Diagnosis]) -> list[tuple[str, str | None, str, list[str]]]:
    return [
        (d.rule, d.node, d.severity.value, [p.action.value for p in d.proposals]) for d in diagnoses
    ]


def _on(diagnoses: list[Diagnosis], rule: str, node: str) -> Diagnosis:
    return next(d for d in diagnoses if d.rule == rule and d.node == node)


# ---- each capture alone ------------------------------------------------------------------------

XID_79_79_48 = [
    ("gpu-fell-off-bus", "gpu-node-1", "critical", ["drain"]),
    ("gpu-xid-error", "gpu-node-2", "critical", ["drain"]),
]
DIAGNOSES: dict[str, tuple[list[tuple[str, str | None, str, list[str]]], list[str]]] = {
    "issue-captures-GpuXidError": (
        XID_79_79_48,
        [
            "Xid 79 GPU 0: GPU has fallen off the bus",
            "Xid 79 read from the summary of GpuXidError",
            "Xid 48 GPU 4: double-bit ECC error",
            "Xid 48 read from the label err_code of GpuXidError",
            "GPU pod research/llm-train-worker-3 (8 GPU)",
        ],
    ),
    "aws-sagemaker-hyperpod-GPUXidError": (
        XID_79_79_48,
        [
            "Xid 79 read from the description of GPUXidError",
            "Xid 48 read from the label err_code of GPUXidError",
        ],
    ),
    "nvidia-gpu-exporter-NvidiaGpuXidCritical": (
        XID_79_79_48,
        [
            "Xid 79 read from the label xid of NvidiaGpuXidCritical",
            "Xid 48 read from the label xid of NvidiaGpuXidCritical",
            "GPU pod inference/embed-batch-7f9c4-x2kqp (8 GPU)",
        ],
    ),
    "aws-sagemaker-hyperpod-GPUHighTemperature": (
        [("gpu-thermal-power", "gpu-node-1", "warning", ["none"])],
        [
            "GPUHighTemperature GPU 3: GPU Temperature Above 80C",
            "GPUHighTemperature read as temperature (GPUTemperatureHigh) by its name",
        ],
    ),
    "aws-sagemaker-hyperpod-GPUMemoryErrorDetected": (
        [("gpu-ecc-error", "gpu-node-2", "critical", ["drain"])],
        ["GPUMemoryErrorDetected GPU 4: GPU ECC Double-Bit Error Detected"],
    ),
    "aws-sagemaker-hyperpod-NVLinkErrorsDetected": (
        [("nvlink-error", "gpu-node-2", "warning", ["none"])],
        [
            "NVLinkErrorsDetected GPU 1: NVLink Errors Detected",
            "multi-GPU pod inference/embed-batch-7f9c4-x2kqp (8 GPU)",
        ],
    ),
    "nvidia-gpu-exporter-NvidiaGpuUncorrectableEccErrors": (
        [("gpu-ecc-error", "gpu-node-2", "critical", ["drain"])],
        [
            "NvidiaGpuUncorrectableEccErrors: Uncorrectable GPU memory errors on 10.244.2.29:9835",
            "read as ecc-dbe (GPUECCDoubleBitError) by its name",
        ],
    ),
    "nvidia-gpu-exporter-NvidiaGpuRowRemapFailure": (
        [("gpu-ecc-error", "gpu-node-2", "critical", ["drain"])],
        ["NvidiaGpuRowRemapFailure read as row-remap-failure (GPURowRemapFailure) by its name"],
    ),
    # The GPU Operator's node was never in this snapshot: only the alert speaks for it.
    "nvidia-gpu-operator-GPUOperatorNodeDeploymentFailed": (
        [("gpu-capacity-zero", "gpu-node-3", "critical", ["none"])],
        [
            "alert GPUCapacityZero; the node is not in the snapshot",
            "GPUOperatorNodeDeploymentFailed read as capacity-zero (GPUCapacityZero) by its name",
        ],
    ),
    # Evidence only: no rule reads their symptom yet, and they never open anything alone.
    "nvidia-gpu-operator-GPUOperatorNodeDeploymentDriverFailed": ([], []),
    "canonical-hardware-observer-GPUThermalHWThrottle": ([], []),
    "ibm-autopilot-AutopilotDCGMErrors": ([], []),
    "ibm-autopilot-AutopilotRemappedRowsActive": ([], []),
    "kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace": ([], []),
}


def test_every_capture_has_its_expected_diagnosis() -> None:
    assert set(DIAGNOSES) == {path.stem for path in CAPTURES.glob("*.json")}


@pytest.mark.parametrize("capture", sorted(DIAGNOSES))
def test_each_capture_gives_the_right_diagnosis(
    capture: str, cluster: Snapshot, rules: RuleSet
) -> None:
    expected, evidence = DIAGNOSES[capture]
    found = run(cluster, rules, signals(capture)).diagnoses
    assert sorted(_summary(found)) == sorted(expected)
    text = "\n".join(line for d in found for line in d.evidence)
    for needle in evidence:
        assert needle in text, f"{needle!r} not in:\n{text}"


def test_an_exporter_pods_ip_names_the_node_no_ip_becomes_a_node(
    cluster: Snapshot, rules: RuleSet
) -> None:
    found = run(cluster, rules, signals("nvidia-gpu-exporter-NvidiaGpuXidCritical")).diagnoses
    assert {d.node for d in found} == {"gpu-node-1", "gpu-node-2"}


def test_without_the_exporter_pods_the_pod_label_still_names_the_node(rules: RuleSet) -> None:
    gone = [
        Edit(kind="Pod", namespace="monitoring", name="nvidia-gpu-exporter-x8k2d", delete=True),
        Edit(
            add={
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {"name": "nvidia-gpu-exporter-x8k2d", "namespace": "monitoring"},
                "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "exporter"}]},
                "status": {"phase": "Running", "podIP": "10.244.1.99"},  # restarted, new IP
            }
        ),
    ]
    found = run(
        community_cluster(extra=gone), rules, signals("nvidia-gpu-exporter-NvidiaGpuXidCritical")
    ).diagnoses
    assert ("gpu-fell-off-bus", "gpu-node-1") in {(d.rule, d.node) for d in found}


# ---- alerts no rule reads: evidence on their node ----------------------------------------------


def test_an_unknown_alert_on_a_gpu_node_is_evidence_on_its_diagnosis(
    cluster: Snapshot, rules: RuleSet
) -> None:
    alerts = signals(
        "issue-captures-GpuXidError",
        "kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace",
        "canonical-hardware-observer-GPUThermalHWThrottle",
    )
    found = run(cluster, rules, alerts).diagnoses
    assert sorted(_summary(found)) == sorted(XID_79_79_48)  # nothing of its own
    bus = _on(found, "gpu-fell-off-bus", "gpu-node-1")
    assert (
        "also firing: NodeFilesystemAlmostOutOfSpace (Filesystem has less than 5% space left.)"
        in (bus.evidence)
    )
    assert (
        "also firing: GPUThermalHWThrottle GPU 3 (GPU Hardware Thermal throttling detected."
        " (instance gpu-node-1)); read as thermal-throttle"
    ) in bus.evidence
    # Its own node only, and the alert's fingerprint is among those the diagnosis explains.
    assert not any("also firing" in e for e in _on(found, "gpu-xid-error", "gpu-node-2").evidence)
    unknown = next(s for s in alerts if s.name == "NodeFilesystemAlmostOutOfSpace")
    assert unknown.fingerprint in bus.signals


def test_health_agent_alerts_join_the_xid_diagnosis_of_their_node(
    cluster: Snapshot, rules: RuleSet
) -> None:
    alerts = signals(
        "issue-captures-GpuXidError",
        "ibm-autopilot-AutopilotDCGMErrors",
        "ibm-autopilot-AutopilotRemappedRowsActive",
    )
    found = run(cluster, rules, alerts).diagnoses
    xid = _on(found, "gpu-xid-error", "gpu-node-2")
    assert "also firing: AutopilotDCGMErrors (GPUs have DCGM failures); read as gpu-health" in (
        xid.evidence
    )
    assert (
        "also firing: AutopilotRemappedRowsActive GPU 4 (A GPU device has incorrect remapped"
        " rows); read as row-remap-pending"
    ) in xid.evidence


def test_also_firing_speaks_the_diagnosis_language(cluster: Snapshot, rules: RuleSet) -> None:
    alerts = signals(
        "issue-captures-GpuXidError", "kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace"
    )
    bus = _on(run(cluster, rules, alerts, Lang.ZH).diagnoses, "gpu-fell-off-bus", "gpu-node-1")
    assert any(e.startswith("同时告警：NodeFilesystemAlmostOutOfSpace") for e in bus.evidence)


def test_the_gpu_operators_alerts_on_its_broken_node(rules: RuleSet) -> None:
    raw = base_snapshot(HEALTHY)
    node = copy.deepcopy(
        next(n for n in _objects(raw, "Node") if n["metadata"]["name"] == "gpu-a3")
    )
    node["metadata"]["name"] = "gpu-node-3"
    for part in ("capacity", "allocatable"):
        node["status"][part]["nvidia.com/gpu"] = "0"
    status_exporter = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "nvidia-node-status-exporter-2hb4m", "namespace": "gpu-operator"},
        "spec": {"nodeName": "gpu-node-3", "containers": [{"name": "exporter"}]},
        "status": {"phase": "Running", "podIP": "10.244.3.12"},
    }
    snapshot = community_cluster(extra=[Edit(add=node), Edit(add=status_exporter)])
    alerts = signals(
        "nvidia-gpu-operator-GPUOperatorNodeDeploymentFailed",
        "nvidia-gpu-operator-GPUOperatorNodeDeploymentDriverFailed",
    )
    found = run(snapshot, rules, alerts).diagnoses
    # The node's own facts (no GPU allocatable) make the diagnosis; the alerts back it.
    assert _summary(found) == [("gpu-capacity-zero", "gpu-node-3", "critical", ["cordon"])]
    [zero] = found
    assert "allocatable nvidia.com/gpu=0, capacity=0, nvidia.com/gpu.count=8" in zero.evidence
    assert (
        "GPUOperatorNodeDeploymentFailed read as capacity-zero (GPUCapacityZero) by its name"
    ) in zero.evidence
    assert (
        "also firing: GPUOperatorNodeDeploymentDriverFailed (GPU Operator could not expose"
        " GPUs (Driver)); read as gpu-stack"
    ) in zero.evidence


# ---- counting GPUs, not alerts ----------------------------------------------------------------


def _renamed(capture: str, alertname: str, **labels: str) -> bytes:
    raw = json.loads(_body(capture))
    for alert in raw["alerts"]:
        alert["labels"].update(alertname=alertname, **labels)
        alert["fingerprint"] = alert["fingerprint"][:-4] + "beef"
    return json.dumps(raw).encode()


def test_two_rules_on_one_hot_gpu_are_one_hot_gpu(cluster: Snapshot, rules: RuleSet) -> None:
    capture = "aws-sagemaker-hyperpod-GPUHighTemperature"
    same_gpu = signals(capture) + signals_from_body(
        _renamed(capture, "GPUCriticalTemperature"), SETTINGS.node_labels
    )
    found = run(cluster, rules, same_gpu).diagnoses
    assert _summary(found) == [("gpu-thermal-power", "gpu-node-1", "warning", ["none"])]
    other_gpu = signals(capture) + signals_from_body(
        _renamed(capture, "GPUCriticalTemperature", gpu="5"), SETTINGS.node_labels
    )
    found = run(cluster, rules, other_gpu).diagnoses
    assert _summary(found) == [("gpu-thermal-power", "gpu-node-1", "critical", ["cordon"])]


# ---- the command line -------------------------------------------------------------------------


def _write_snapshot(path: Path, snapshot: Snapshot) -> Path:
    items = [*snapshot.nodes, *snapshot.pods, *snapshot.events, *snapshot.pdbs]
    items += snapshot.daemonsets
    path.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    return path


def test_alerts_explain_says_how_each_alert_was_understood() -> None:
    result = CliRunner().invoke(
        app, ["alerts", "explain", str(CAPTURES / "issue-captures-GpuXidError.json")]
    )
    assert result.exit_code == 0, result.output
    assert "GpuXidError (firing) → GPUXidError" in result.output
    assert "understood: Xid 79 read from the summary of GpuXidError" in result.output
    assert "node:       gpu-node-1 (label Hostname)" in result.output
    assert "Xid:        48 (from the label err_code)" in result.output


def test_alerts_explain_says_why_not_and_finds_nodes_in_a_snapshot(
    tmp_path: Path, cluster: Snapshot
) -> None:
    unknown = CAPTURES / "kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace.json"
    result = CliRunner().invoke(app, ["alerts", "explain", str(unknown)])
    assert result.exit_code == 0, result.output
    assert "NodeFilesystemAlmostOutOfSpace not understood: no entry of the mapping names it" in (
        result.output
    )
    snapshot = _write_snapshot(tmp_path / "snapshot.json", cluster)
    exporter = CAPTURES / "nvidia-gpu-exporter-NvidiaGpuXidCritical.json"
    result = CliRunner().invoke(
        app, ["alerts", "explain", str(exporter), "--snapshot", str(snapshot), "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["node"], r["node_found"], r["xid"]) for r in rows] == [
        ("10.244.1.31", "gpu-node-1", 79),
        ("10.244.2.29", "gpu-node-2", 48),
    ]


def test_alerts_explain_shows_look_alike_nodes_escaped_and_says_the_snapshot_lacks_them(
    tmp_path: Path,
) -> None:
    """Issue 31 item 4: `gpu-a1` with a zero-width space printed as it renders read as the
    real gpu-a1, and nothing said the snapshot has no such node."""
    alerts = tmp_path / "alerts.json"
    alerts.write_text(json.dumps(look_alikes.payload()))
    args = ["alerts", "explain", str(alerts), "--snapshot", str(HEALTHY)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert not set(out) & set(look_alikes.HIDDEN), out
    for escaped in [*look_alikes.LOOK_ALIKES.values(), look_alikes.ABSENT]:
        assert f"node:       {escaped} (label Hostname)" in out
        assert f"in the snapshot: no node {escaped} in the cluster (only alerts name it)" in out
    assert "no node gpu-a1 in the cluster" not in out  # the real one is there


def test_rules_lint_checks_the_mapping_the_settings_name(tmp_path: Path) -> None:
    mapping = tmp_path / "alerts.yaml"
    text = (REPO / "rules" / "alerts.yaml").read_text()
    mapping.write_text(text.replace("as_alert: GPUNVLinkErrors", "as_alert: GPUNvLinkErrors"))
    config = tmp_path / "gpubot.yaml"
    config.write_text(f"alerts_file: {mapping}\n")
    result = CliRunner().invoke(app, ["rules", "lint", "--config", str(config)])
    assert result.exit_code == 2
    assert "symptoms.nvlink.as_alert: no rule reads an alert named 'GPUNvLinkErrors'" in (
        result.output
    )
    assert CliRunner().invoke(app, ["rules", "lint"]).exit_code == 0


def test_many_unknown_alerts_are_a_few_lines_and_a_count(cluster: Snapshot, rules: RuleSet) -> None:
    raw = json.loads(_body("kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace"))
    template = raw["alerts"][0]
    raw["alerts"] = [
        {
            **template,
            "labels": {**template["labels"], "mountpoint": f"/data{i}"},
            "annotations": {"summary": f"Filesystem /data{i} has less than 5% space left."},
            "fingerprint": f"{i:016x}",
        }
        for i in range(7)
    ]
    alerts = signals("issue-captures-GpuXidError")
    alerts += signals_from_body(json.dumps(raw).encode(), SETTINGS.node_labels)
    bus = _on(run(cluster, rules, alerts).diagnoses, "gpu-fell-off-bus", "gpu-node-1")
    also = [e for e in bus.evidence if e.startswith("also firing")]
    assert len(also) == 6
    assert also[-1] == "also firing: 2 more alert(s) no rule reads"

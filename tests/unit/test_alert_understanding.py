"""The alert mapping: how an alert gpubot did not write is read (rules/alerts.yaml's header is
the spec), from the real captures in tests/data/alertmanager/community/ and hand-made alerts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
import yaml

from bot.config import Settings
from bot.errors import InputError
from bot.facts.collecting import resolve_signal_nodes
from bot.facts.gpu_metrics import GpuEvidence, GpuMetrics, XidSeen
from bot.facts.snapshots import Snapshot
from bot.model import Signal
from bot.rules.linting import alert_names_read, lint_alert_mapping, lint_rules
from bot.rules.loading import (
    ASK_PROMETHEUS,
    EVIDENCE_ONLY,
    POD_REFS,
    SYMPTOM,
    UNDERSTOOD,
    AlertMapping,
    load_alert_mapping,
    load_rules,
    read_alert_mapping,
    rule_files,
)
from bot.sources.alertmanager.payloads import (
    WebhookAlert,
    signals_from_payload,
    validate_payload,
)
from bot.sources.alertmanager.understanding import (
    Understood,
    alert_mapping,
    expression_of,
    gpu_from_prometheus,
    metrics_in,
    understand,
    with_prometheus_xids,
    xid_from_prometheus,
)
from tests.helpers.paths import REPO, RULES

CAPTURES = REPO / "tests" / "data" / "alertmanager" / "community"
SITE = Settings().node_labels


@pytest.fixture(scope="module")
def mapping() -> AlertMapping:
    return load_alert_mapping(RULES / "alerts.yaml")


def _captured(name: str) -> list[WebhookAlert]:
    return validate_payload(json.loads((CAPTURES / f"{name}.json").read_text())).alerts


def _alert(
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    expr: str | None = None,
) -> WebhookAlert:
    url = f"http://prometheus:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1" if expr else ""
    return WebhookAlert(
        status="firing", labels=labels, annotations=annotations or {}, generatorURL=url
    )


# ---- the captures, as their README says they should be understood ----------------------------

# Per capture, per alert: symptom, as_alert, node, node label, GPU, Xid, where the Xid was read
# ("-": none), as the captures' README says.
EXPECTED = {
    "issue-captures-GpuXidError": [
        "xid GPUXidError gpu-node-1 Hostname 0 79 summary",
        "xid GPUXidError gpu-node-2 Hostname 4 48 label:err_code",
    ],
    "aws-sagemaker-hyperpod-GPUXidError": [
        "xid GPUXidError gpu-node-1 Hostname 0 79 description",
        "xid GPUXidError gpu-node-2 Hostname 4 48 label:err_code",
    ],
    "aws-sagemaker-hyperpod-GPUHighTemperature": [
        "temperature GPUTemperatureHigh gpu-node-1 Hostname 3 - -"
    ],
    "aws-sagemaker-hyperpod-GPUMemoryErrorDetected": [
        "ecc-dbe GPUECCDoubleBitError gpu-node-2 Hostname 4 - -"
    ],
    "aws-sagemaker-hyperpod-NVLinkErrorsDetected": [
        "nvlink GPUNVLinkErrors gpu-node-2 Hostname 1 - -"
    ],
    "canonical-hardware-observer-GPUThermalHWThrottle": [
        "thermal-throttle - gpu-node-1 Hostname 3 - -"
    ],
    "nvidia-gpu-operator-GPUOperatorNodeDeploymentFailed": [
        "capacity-zero GPUCapacityZero gpu-node-3 node - - -"
    ],
    "nvidia-gpu-operator-GPUOperatorNodeDeploymentDriverFailed": [
        "gpu-stack - gpu-node-3 node - - -"
    ],
    "ibm-autopilot-AutopilotDCGMErrors": ["gpu-health - gpu-node-2 node - - -"],
    "ibm-autopilot-AutopilotRemappedRowsActive": ["row-remap-pending - gpu-node-2 node 4 - -"],
    "nvidia-gpu-exporter-NvidiaGpuXidCritical": [
        "xid GPUXidError 10.244.1.31 instance - 79 label:xid",
        "xid GPUXidError 10.244.2.29 instance - 48 label:xid",
    ],
    "nvidia-gpu-exporter-NvidiaGpuUncorrectableEccErrors": [
        "ecc-dbe GPUECCDoubleBitError 10.244.2.29 instance - - -"
    ],
    "nvidia-gpu-exporter-NvidiaGpuRowRemapFailure": [
        "row-remap-failure GPURowRemapFailure 10.244.2.29 instance - - -"
    ],
    "kube-prometheus-node-exporter-NodeFilesystemAlmostOutOfSpace": [
        "unknown - gpu-node-1 instance - - -"
    ],
}


def _row(capture: str, index: int, line: str) -> tuple[Any, ...]:
    symptom, as_alert, node, label, gpu, xid, where = line.split()

    def opt(value: str) -> str | None:
        return None if value == "-" else value

    read = opt(where)
    return (
        capture,
        index,
        symptom,
        opt(as_alert),
        node,
        label,
        opt(gpu),
        None if xid == "-" else int(xid),
        None if read is None else "the " + read.replace(":", " "),
    )


READ = [_row(c, i, line) for c, lines in EXPECTED.items() for i, line in enumerate(lines)]


@pytest.mark.parametrize(
    ("capture", "index", "symptom", "as_alert", "node", "node_label", "gpu", "xid", "where"), READ
)
def test_each_capture_is_understood_as_its_readme_says(
    mapping: AlertMapping,
    capture: str,
    index: int,
    symptom: str,
    as_alert: str | None,
    node: str,
    node_label: str,
    gpu: str | None,
    xid: int | None,
    where: str | None,
) -> None:
    reading = understand(_captured(capture)[index], mapping, SITE)
    assert (reading.symptom, reading.as_alert) == (symptom, as_alert)
    assert (reading.node, reading.node_label) == (node, node_label)
    assert reading.gpu == gpu
    assert (reading.xid, reading.xid_where) == (xid, where)


def test_every_capture_file_is_covered_by_the_table() -> None:
    assert set(EXPECTED) == {path.stem for path in CAPTURES.glob("*.json")}
    for capture, lines in EXPECTED.items():
        assert len(lines) == len(_captured(capture)), capture


def test_the_issue_capture_says_where_its_xid_came_from(mapping: AlertMapping) -> None:
    reading = understand(_captured("issue-captures-GpuXidError")[0], mapping)
    assert reading.how == "Xid 79 read from the summary of GpuXidError"
    assert reading.by == "name" and reading.metrics == ("DCGM_FI_DEV_XID_ERRORS",)


def test_nvidia_gpu_exporter_alerts_name_their_exporter_pod_and_uuid(mapping: AlertMapping) -> None:
    reading = understand(_captured("nvidia-gpu-exporter-NvidiaGpuXidCritical")[0], mapping)
    assert reading.node_is_address
    assert reading.pods == ("monitoring/nvidia-gpu-exporter-x8k2d",)
    assert reading.uuid == "184c0883-ce7a-b92d-a5ba-4e276c6e7a04"


def test_dcgm_exporter_uuid_is_read_without_its_gpu_prefix(mapping: AlertMapping) -> None:
    reading = understand(_captured("aws-sagemaker-hyperpod-GPUXidError")[0], mapping)
    assert reading.uuid == "184c0883-ce7a-b92d-a5ba-4e276c6e7a04"  # the same GPU as above


def test_signals_carry_the_gpubot_name_the_original_alertname_and_how(
    mapping: AlertMapping,
) -> None:
    raw = json.loads((CAPTURES / "issue-captures-GpuXidError.json").read_text())
    first, second = signals_from_payload(validate_payload(raw), SITE, mapping)
    assert (first.name, first.node, first.gpu) == ("GPUXidError", "gpu-node-1", "0")
    assert first.labels["alertname"] == "GpuXidError"
    assert first.labels["xid"] == "79"
    assert first.annotations[UNDERSTOOD] == "Xid 79 read from the summary of GpuXidError"
    assert first.annotations[SYMPTOM] == "xid"
    assert EVIDENCE_ONLY not in first.annotations
    assert first.annotations["summary"] == "XID 79 on gpu-node-1 GPU 0"  # kept
    assert second.labels["xid"] == "48" and second.labels["err_code"] == "48"
    assert first.fingerprint == raw["alerts"][0]["fingerprint"]


def test_gpubots_own_alerts_pass_as_they_are(mapping: AlertMapping) -> None:
    alert = _alert({"alertname": "GPUXidError", "node": "gpu-a1", "gpu": "3", "xid": "79"})
    reading = understand(alert, mapping)
    assert reading.native and reading.annotations() == {}
    payload = validate_payload(
        {"status": "firing", "alerts": [{"status": "firing", "labels": alert.labels}]}
    )
    [signal] = signals_from_payload(payload, SITE, mapping)
    assert signal.name == "GPUXidError" and signal.labels == alert.labels
    assert signal.annotations == {}


def test_an_alert_cannot_bring_gpubots_own_annotations(mapping: AlertMapping) -> None:
    payload = validate_payload(
        {
            "status": "firing",
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": "GPUXidError", "node": "gpu-a1", "xid": "79"},
                    "annotations": {POD_REFS: "kube-system/anything", EVIDENCE_ONLY: "true"},
                }
            ],
        }
    )
    [signal] = signals_from_payload(payload, SITE, mapping)
    assert signal.annotations == {}


# ---- reading what an alert carries when no entry names it ------------------------------------


def test_an_unnamed_alert_on_the_xid_gauge_is_an_xid_alert_with_its_code_from_the_text(
    mapping: AlertMapping,
) -> None:
    alert = _alert(
        {"alertname": "GPUFailureDetected", "Hostname": "gpu-a1", "gpu": "2"},
        {"summary": "GPU failure", "description": "XID 错误码 79 on gpu-a1"},
        expr='DCGM_FI_DEV_XID_ERRORS{job=~"dcgm.*"} != 0',
    )
    reading = understand(alert, mapping)
    assert (reading.symptom, reading.by, reading.xid) == ("xid", "metric", 79)
    assert reading.how == (
        "Xid 79 read from the description of GPUFailureDetected"
        " (an Xid alert by the metric DCGM_FI_DEV_XID_ERRORS in its expression)"
    )


def test_an_xid_alert_without_its_code_asks_prometheus_and_is_evidence_only(
    mapping: AlertMapping,
) -> None:
    alert = _alert(
        {"alertname": "SomeGpuAlert", "Hostname": "gpu-a1", "gpu": "0"},
        {"summary": "GPU XID Error Detected"},
        expr="DCGM_FI_DEV_XID_ERRORS > 0",
    )
    reading = understand(alert, mapping)
    assert reading.symptom == "xid" and reading.xid is None
    assert reading.ask_prometheus and reading.evidence_only
    assert reading.annotations()[ASK_PROMETHEUS] == "true"
    assert reading.how.startswith("no Xid code in SomeGpuAlert: not in its labels (err_code)")


def test_an_expression_over_several_symptoms_without_a_telling_name_is_gpu_health(
    mapping: AlertMapping,
) -> None:
    alert = _alert(
        {"alertname": "GPUProblem", "Hostname": "gpu-a1", "gpu": "1"},
        expr="DCGM_FI_DEV_XID_ERRORS > 0 or DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0",
    )
    assert understand(alert, mapping).symptom == "gpu-health"
    named = _alert(
        {"alertname": "GpuDoubleBitEcc", "Hostname": "gpu-a1", "gpu": "1"},
        expr="DCGM_FI_DEV_XID_ERRORS > 0 or DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0",
    )
    assert understand(named, mapping).symptom == "ecc-dbe"  # the name pattern decides


def test_utilisation_counts_only_when_nothing_else_does(mapping: AlertMapping) -> None:
    hot = _alert(
        {"alertname": "BusyAndHot", "Hostname": "gpu-a1", "gpu": "1"},
        expr="DCGM_FI_DEV_GPU_UTIL > 90 and DCGM_FI_DEV_GPU_TEMP > 85",
    )
    assert understand(hot, mapping).symptom == "temperature"
    busy = _alert(
        {"alertname": "Busy", "Hostname": "gpu-a1", "gpu": "1"}, expr="DCGM_FI_DEV_GPU_UTIL > 90"
    )
    assert understand(busy, mapping).symptom == "usage"


def test_metric_names_are_whole_tokens_and_string_literals_are_not_metrics(
    mapping: AlertMapping,
) -> None:
    expr = 'my_DCGM_FI_DEV_GPU_TEMP_avg > 1 and up{job="DCGM_FI_DEV_XID_ERRORS"}'
    assert metrics_in(expr, mapping) == []
    assert metrics_in("sum by (gpu) (DCGM_FI_DEV_GPU_TEMP) > 80", mapping) == [
        "DCGM_FI_DEV_GPU_TEMP"
    ]
    assert expression_of("http://x/graph?g0.expr=a+%3E+1&g0.tab=1") == "a > 1"
    assert expression_of("") is None and expression_of("http://grafana/alerting/x") is None


@pytest.mark.parametrize(
    ("name", "labels", "symptom"),
    [
        ("GpuThermalThrottle", {}, "thermal-throttle"),
        ("GPUFellOffBus", {}, "gpu-missing"),
        ("NVLinkCRCErrorsClimbing", {}, "nvlink"),
        ("NodePowerSupplyFailed", {}, "unknown"),  # not GPU-looking: no pattern applies
        ("NodePowerSupplyFailed", {"UUID": "GPU-1"}, "power"),  # a GPU label: it is
        ("ArgoWorkflowTemplateFailed", {}, "unknown"),
        ("GPUNodeJobFailed", {}, "unknown"),  # GPU-looking, but no pattern says what
    ],
)
def test_name_patterns_are_the_last_resort_for_gpu_looking_alerts(
    mapping: AlertMapping, name: str, labels: dict[str, str], symptom: str
) -> None:
    reading = understand(_alert({"alertname": name, "node": "gpu-a1", **labels}), mapping)
    assert reading.symptom == symptom
    if symptom == "unknown":
        assert reading.evidence_only and reading.how.startswith(f"{name} not understood")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", 79),
        ("XID=48 on gpu-a1", 48),
        ("Xid: 13", 13),
        ("xid error 94 on GPU 2", 94),
        ("GPU XID Error Detected", None),
        ("Xid error on gpu-node-1", None),
    ],
)
def test_xid_codes_in_free_text(mapping: AlertMapping, text: str, code: int | None) -> None:
    alert = _alert({"alertname": "GpuXidError", "Hostname": "gpu-a1"}, {"summary": text})
    assert understand(alert, mapping).xid == code


def test_a_node_name_beats_an_address_and_a_long_value_is_no_node(mapping: AlertMapping) -> None:
    both = _alert({"alertname": "GPUHighTemperature", "instance": "10.0.0.1:9400", "Hostname": "a"})
    assert understand(both, mapping).node == "a"  # Hostname comes first anyway
    custom = _alert({"alertname": "X", "instance": "10.0.0.1:9400", "site_node": "gpu-z"})
    assert understand(custom, mapping, ["instance", "site_node"]).node == "gpu-z"
    long = _alert({"alertname": "GPUHighTemperature", "node": "n" * 300})
    assert understand(long, mapping).node is None


def test_a_sites_own_node_labels_come_first_once_it_sets_them(mapping: AlertMapping) -> None:
    labels = {"alertname": "GPUHighTemperature", "Hostname": "proxy", "k8s_node": "gpu-z9"}
    assert understand(_alert(labels), mapping, SITE).node == "proxy"  # as shipped
    assert understand(_alert(labels), mapping, ["k8s_node"]).node == "gpu-z9"
    own = {"alertname": "GPUOperatorNodeDeploymentFailed", "node": "gpu-3", "k8s_node": "x"}
    assert understand(_alert(own), mapping, ["k8s_node"]).node == "gpu-3"  # the entry's list


def test_a_cluster_wide_alert_names_no_node(mapping: AlertMapping) -> None:
    alert = _alert({"alertname": "GPUOperatorReconciliationFailed", "instance": "gpu-a1:8080"})
    reading = understand(alert, mapping)
    assert (reading.symptom, reading.node, reading.pods) == ("gpu-stack", None, ())


# ---- node resolution: exporter pods -----------------------------------------------------------


def _pod(namespace: str, name: str, node: str, ip: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "podIP": ip, "podIPs": [{"ip": ip}]},
    }


def test_an_exporter_pod_ip_or_name_gives_the_node_but_only_for_alerts_the_mapping_read(
    mapping: AlertMapping,
) -> None:
    snapshot = Snapshot.from_items(
        [
            {"kind": "Node", "metadata": {"name": "gpu-node-1"}, "status": {}},
            {"kind": "Node", "metadata": {"name": "gpu-node-2"}, "status": {}},
            _pod("monitoring", "old", "gpu-node-2", "10.244.1.31", phase="Succeeded"),
            _pod("monitoring", "nvidia-gpu-exporter-x8k2d", "gpu-node-1", "10.244.1.31"),
            _pod("monitoring", "nvidia-gpu-exporter-5tq7n", "gpu-node-2", "10.244.9.9"),
        ]
    )
    raw = json.loads((CAPTURES / "nvidia-gpu-exporter-NvidiaGpuXidCritical.json").read_text())
    by_ip, by_name = signals_from_payload(validate_payload(raw), SITE, mapping)
    # The second exporter's IP changed since the alert: its pod's name still tells.
    resolved = resolve_signal_nodes(snapshot, [by_ip, by_name])
    assert [s.node for s in resolved] == ["gpu-node-1", "gpu-node-2"]
    unknown = Signal(source="alertmanager", name="Other", node="10.244.1.31", fingerprint="f")
    assert resolve_signal_nodes(snapshot, [unknown])[0].node == "10.244.1.31"


def test_the_collector_reads_the_annotation_the_mapping_writes() -> None:
    source = (REPO / "bot" / "facts" / "collecting.py").read_text()
    assert f'"{POD_REFS}"' in source


# ---- Xid codes from Prometheus (the live path) ------------------------------------------------

AT = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def _evidence(available: bool = True) -> GpuEvidence:
    return GpuEvidence(
        node="gpu-node-1",
        node_label="Hostname",
        window_s=1800,
        at=AT,
        available=available,
        unavailable_reason="" if available else "Prometheus did not answer",
        gpus=(
            GpuMetrics(
                gpu="0",
                uuid="GPU-184C0883-CE7A-B92D-A5BA-4E276C6E7A04",
                xids=(
                    XidSeen(code=13, first_seen=AT - timedelta(minutes=20)),
                    XidSeen(code=79, first_seen=AT - timedelta(minutes=2)),
                ),
            ),
            GpuMetrics(gpu="3", uuid="GPU-aaa", xids=(XidSeen(code=48),)),
        ),
    )


def _waiting(**fields: Any) -> Understood:
    return Understood(alertname="GPUXidError", symptom="xid", as_alert="GPUXidError", **fields)


def test_xid_from_prometheus_reads_the_alerts_gpu_newest_first() -> None:
    assert xid_from_prometheus(_evidence(), _waiting(gpu="0")) == [79, 13]
    assert xid_from_prometheus(_evidence(), _waiting(gpu="3")) == [48]
    assert xid_from_prometheus(_evidence(), _waiting(gpu="7")) == []


def test_xid_from_prometheus_finds_the_gpu_by_uuid_or_takes_the_whole_node() -> None:
    by_uuid = _waiting(uuid="184c0883-ce7a-b92d-a5ba-4e276c6e7a04")
    assert xid_from_prometheus(_evidence(), by_uuid) == [79, 13]
    assert gpu_from_prometheus(_evidence(), by_uuid) == "0"
    assert xid_from_prometheus(_evidence(), _waiting()) == [79, 13, 48]


def test_xid_from_prometheus_without_prometheus_is_nothing() -> None:
    assert xid_from_prometheus(_evidence(available=False), _waiting(gpu="0")) == []


def test_with_prometheus_xids_completes_only_the_alerts_that_wait_for_it(
    mapping: AlertMapping,
) -> None:
    payload = validate_payload(
        {
            "status": "firing",
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": "GPUXidError", "Hostname": "gpu-node-1", "gpu": "0"},
                    "annotations": {"summary": "GPU XID Error Detected"},
                },
                {
                    "status": "firing",
                    "labels": {"alertname": "GPUXidError", "node": "gpu-a1", "xid": "13"},
                },
            ],
        }
    )
    waiting, native = signals_from_payload(payload, SITE, mapping)
    assert waiting.annotations[EVIDENCE_ONLY] == "true"
    asked: list[str] = []

    def gather(node: str) -> GpuEvidence:
        asked.append(node)
        return _evidence()

    done, same = with_prometheus_xids([waiting, native], gather)
    assert asked == ["gpu-node-1"]
    assert same is native
    assert done.labels["xid"] == "79" and done.gpu == "0"
    assert EVIDENCE_ONLY not in done.annotations and ASK_PROMETHEUS not in done.annotations
    assert done.annotations[UNDERSTOOD] == (
        "Xid 79 read from Prometheus (Hostname=gpu-node-1, GPU 0) for GPUXidError"
    )


# ---- the mapping file: loading, the loader's skip, lint ---------------------------------------


def test_the_rule_loader_skips_the_mapping_and_lint_checks_it(settings: Settings) -> None:
    assert RULES / "alerts.yaml" not in rule_files(RULES)
    ruleset = load_rules([RULES])
    assert ruleset.errors == [] and ruleset.alert_mappings == [RULES / "alerts.yaml"]
    assert lint_rules(ruleset, settings) == []


def test_the_mapping_is_loaded_once(mapping: AlertMapping) -> None:
    assert load_alert_mapping(RULES / "alerts.yaml") is mapping
    assert alert_mapping(Settings()) is mapping


def test_settings_name_the_mapping_beside_the_rules_or_their_own(tmp_path: Path) -> None:
    assert Settings().alert_mapping_file() == RULES / "alerts.yaml"
    own = tmp_path / "mine.yaml"
    assert Settings(alerts_file=own).alert_mapping_file() == own
    # A rules directory without a mapping still gets the shipped one.
    assert Settings(rules_dir=tmp_path).alert_mapping_file() == RULES / "alerts.yaml"


def _shipped() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((RULES / "alerts.yaml").read_text())
    return data


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "alerts.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_bad_regular_expression_is_named_at_its_line(tmp_path: Path) -> None:
    data = _shipped()
    data["name_patterns"][2]["pattern"] = "(?i)remap(fail"
    mapping, problems = read_alert_mapping(_write(tmp_path, data))
    assert mapping is None
    [problem] = problems
    assert "name_patterns.2.pattern" in problem.message
    assert "not a regular expression" in problem.message
    assert problem.where.startswith(f"{tmp_path / 'alerts.yaml'}:")


def test_a_symptom_that_is_not_defined_and_a_text_pattern_without_a_group(tmp_path: Path) -> None:
    data = _shipped()
    data["alerts"][0]["symptom"] = "xyd"
    data["xid_text_patterns"].append("(?i)xid \\d+")
    mapping, problems = read_alert_mapping(_write(tmp_path, data))
    assert mapping is None
    messages = sorted(p.message for p in problems)
    assert messages == [
        "symptom 'xyd' is not one of `symptoms`",
        "xid_text_patterns: needs a group for the code",
    ]


def test_lint_checks_as_alert_rules_sources_and_duplicate_names(
    tmp_path: Path, settings: Settings
) -> None:
    data = _shipped()
    data["symptoms"]["pcie"]["as_alert"] = "GPUPCIeErrors"  # no rule reads it
    data["symptoms"]["pcie"]["rules"] = ["gpu-pcie-error"]
    data["alerts"][1]["source"] = "  "
    data["alerts"][2]["names"].append("GPUXidError")  # listed first by alerts[0]
    ruleset = load_rules([RULES])
    problems = lint_alert_mapping(_write(tmp_path, data), ruleset)
    messages = [p.message for p in problems]
    assert any(
        m.startswith("symptoms.pcie.as_alert: no rule reads an alert named") for m in messages
    )
    assert "symptoms.pcie.rules: no rule 'gpu-pcie-error'" in messages
    assert "alerts[1].source: say where it comes from" in messages
    assert any("GPUXidError is listed first at" in m for m in messages)
    # The same file named in the settings is what `rules lint` checks.
    assert len(lint_rules(ruleset, Settings(alerts_file=tmp_path / "alerts.yaml"))) == 4


def test_the_alert_names_the_rules_read_include_every_as_alert_shipped(
    mapping: AlertMapping,
) -> None:
    names = alert_names_read(load_rules([RULES]))
    shipped = {s.as_alert for s in mapping.symptoms.values() if s.as_alert}
    assert shipped <= names


def test_a_broken_mapping_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "alerts.yaml"
    path.write_text("version: 1\nsymptoms: [\n")
    with pytest.raises(InputError) as caught:
        load_alert_mapping(path)
    assert str(caught.value).startswith(f"{path}:")

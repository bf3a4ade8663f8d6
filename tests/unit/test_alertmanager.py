from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.errors import InputError
from bot.sources.alertmanager.payloads import (
    load_alerts_file,
    node_from_labels,
    signals_from_payload,
    validate_payload,
)

NODE_LABELS = ["node", "kubernetes_node", "Hostname", "hostname", "instance"]

# Shaped exactly like Alertmanager's notify/webhook payload (version 4).
PAYLOAD = {
    "receiver": "gpubot",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {
                "alertname": "GPUXidError",
                "Hostname": "gpu-a1",
                "gpu": "3",
                "xid": "79",
                "severity": "critical",
            },
            "annotations": {"summary": "Xid 79 on gpu-a1 GPU 3"},
            "startsAt": "2026-12-02T02:58:30.123Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph?g0.expr=...",
            "fingerprint": "a1b2c3d4e5f60718",
        }
    ],
    "groupLabels": {"alertname": "GPUXidError"},
    "commonLabels": {"alertname": "GPUXidError"},
    "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "version": "4",
    "groupKey": '{}:{alertname="GPUXidError"}',
    "truncatedAlerts": 0,
}


def test_payload_becomes_one_signal_per_alert_with_node_gpu_and_times() -> None:
    [signal] = signals_from_payload(validate_payload(PAYLOAD), NODE_LABELS)
    assert signal.name == "GPUXidError"
    assert signal.node == "gpu-a1"
    assert signal.gpu == "3"
    assert signal.labels["xid"] == "79"
    assert signal.ends_at is None  # Alertmanager's zero time means "still firing"
    assert signal.starts_at is not None and signal.starts_at.year == 2026
    assert signal.fingerprint == "a1b2c3d4e5f60718"
    assert signal.group_key == '{}:{alertname="GPUXidError"}'


@pytest.mark.parametrize(
    ("labels", "node"),
    [
        ({"node": "gpu-a1", "instance": "10.0.0.1:9400"}, "gpu-a1"),
        ({"kubernetes_node": "gpu-b2", "hostname": "other"}, "gpu-b2"),
        ({"instance": "gpu-c3:9400"}, "gpu-c3"),
        ({"instance": "[fd00::1]:9400"}, "fd00::1"),
        ({"instance": "gpu-d4"}, "gpu-d4"),
        ({"job": "dcgm"}, None),
    ],
)
def test_node_comes_from_the_first_configured_label(
    labels: dict[str, str], node: str | None
) -> None:
    assert node_from_labels(labels, NODE_LABELS) == node


def test_node_label_list_is_configurable() -> None:
    assert node_from_labels({"exported_node": "gpu-e5", "node": "x"}, ["exported_node"]) == "gpu-e5"


def test_same_alert_delivered_twice_has_one_dedup_key() -> None:
    first = signals_from_payload(validate_payload(PAYLOAD), NODE_LABELS)[0]
    again = signals_from_payload(validate_payload(json.loads(json.dumps(PAYLOAD))), NODE_LABELS)[0]
    assert first.dedup_key == again.dedup_key


def test_missing_fingerprint_is_derived_from_labels_stably() -> None:
    alert = {k: v for k, v in PAYLOAD["alerts"][0].items() if k != "fingerprint"}  # type: ignore[union-attr]
    payload = {**PAYLOAD, "alerts": [alert]}
    one = signals_from_payload(validate_payload(payload), NODE_LABELS)[0]
    two = signals_from_payload(validate_payload(payload), NODE_LABELS)[0]
    assert one.fingerprint == two.fingerprint and len(one.fingerprint) == 16


def test_resolved_alert_keeps_its_end_time_and_truncation_is_recorded() -> None:
    alert = {**PAYLOAD["alerts"][0], "status": "resolved", "endsAt": "2026-12-02T03:10:00Z"}  # type: ignore[dict-item]
    payload = {**PAYLOAD, "status": "resolved", "alerts": [alert], "truncatedAlerts": 7}
    [signal] = signals_from_payload(validate_payload(payload), NODE_LABELS)
    assert signal.status == "resolved"
    assert signal.ends_at is not None and signal.ends_at.minute == 10
    assert signal.truncated_alerts == 7


def test_unknown_extra_fields_are_kept_not_rejected() -> None:
    payload = validate_payload({**PAYLOAD, "someFutureField": {"x": 1}})
    assert payload.model_extra == {"someFutureField": {"x": 1}}


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({**PAYLOAD, "alerts": "nope"}, "alerts"),
        ({**PAYLOAD, "status": "burning"}, "status"),
        ({k: v for k, v in PAYLOAD.items() if k != "alerts"}, "alerts"),
        ({**PAYLOAD, "alerts": [{"status": "firing"}]}, "alerts.0.labels"),
    ],
)
def test_malformed_payload_names_the_field(payload: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as caught:
        validate_payload(payload, "webhook")
    assert f"field {field}" in str(caught.value)
    assert str(caught.value).startswith("webhook: ")


def test_alerts_file_accepts_a_list_of_payloads_and_reports_bad_yaml(tmp_path: Path) -> None:
    good = tmp_path / "alerts.json"
    good.write_text(json.dumps([PAYLOAD, PAYLOAD]))
    assert len(load_alerts_file(good, NODE_LABELS)) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("alerts:\n  - labels: {a: b\n")
    with pytest.raises(InputError) as caught:
        load_alerts_file(bad, NODE_LABELS)
    assert str(caught.value).startswith(f"{bad}:")

"""Hand-made values of the shared nouns (signals, diagnoses, requests) at a fixed time, for
tests that need one without a cluster."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.model import (
    Action,
    ActionRequest,
    Diagnosis,
    IncidentState,
    Lang,
    Questions,
    Severity,
    Signal,
    Stage,
)

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
S = IncidentState


def signal(fingerprint: str = "f1", status: str = "firing", node: str = "gpu-a1") -> Signal:
    return Signal(
        source="alertmanager",
        name="GPUXidError",
        status=status,  # type: ignore[arg-type]
        node=node,
        labels={"xid": "79"},
        starts_at=T0,
        fingerprint=fingerprint,
    )


def diagnosis(rule: str = "gpu-fell-off-bus", node: str | None = "gpu-a1") -> Diagnosis:
    return Diagnosis(
        rule=rule,
        node=node,
        pool="a100-east",
        stage=Stage.STEADY,
        severity=Severity.CRITICAL,
        title="GPU fell off the bus",
        summary="",
        causes=[],
        check_first="",
        questions=Questions(registered="yes", gpu_visible="no", workloads="-", scope="1 node"),
        evidence=[],
        blockers=[],
        runbook=[],
        rollback="",
        proposals=[],
        lang=Lang.EN,
        signals=["f1"],
    )


def request_for(incident: str, request_id: str = "r1") -> ActionRequest:
    return ActionRequest(
        id=request_id,
        action=Action.DRAIN,
        node="gpu-a1",
        requested_by="gpubot",
        created_at=T0,
        expires_at=T0 + timedelta(minutes=30),
        facts_fingerprint="abc",
        incident=incident,
        risk="2 training pods without a checkpoint in the last 30 min",
    )


def webhook_alert(
    name: str = "GPUXidError", *, status: str = "firing", started: datetime = T0, **labels: str
) -> dict[str, Any]:
    """One alert as Alertmanager's webhook (version 4) sends it; its fingerprint follows from
    its labels, as Alertmanager's does."""
    alert_labels = {"alertname": name, **labels}
    canonical = ",".join(f"{k}={v}" for k, v in sorted(alert_labels.items()))
    return {
        "status": status,
        "labels": alert_labels,
        "annotations": {},
        "startsAt": started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph",
        "fingerprint": hashlib.sha256(canonical.encode()).hexdigest()[:16],
    }


def webhook_payload(
    *alerts: dict[str, Any], group_key: str = "{}:{}", truncated: int = 0
) -> dict[str, Any]:
    """Alerts as one webhook delivery of the Alertmanager group `group_key`."""
    firing = any(a["status"] == "firing" for a in alerts)
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": truncated,
        "receiver": "gpubot",
        "status": "firing" if firing else "resolved",
        "alerts": list(alerts),
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
    }

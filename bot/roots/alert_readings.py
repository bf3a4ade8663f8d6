"""The composition root of `gpubot alerts explain`: each alert of a webhook payload file as
gpubot reads it (the alert mapping), with the node it finds, in a snapshot when one is given.

It exists so that the command only prints, and so that a person can see what the webhook
would make of an alert without running `gpubot serve`. It must never store, post or diagnose
anything: it reads files and says how they are understood."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.facts.collecting import resolve_signal_nodes
from bot.facts.snapshots import load_snapshot
from bot.sources.alertmanager.payloads import read_payloads, signals_from_payload
from bot.sources.alertmanager.understanding import Understood, alert_mapping, explain, understand

if TYPE_CHECKING:
    from bot.config import Settings


@dataclass(frozen=True)
class AlertReading:
    """One alert of a payload: its status, how it is understood, and the node found for it
    (in the snapshot, when one was given, else the one its labels name)."""

    status: str
    understood: Understood
    node_found: str | None

    def explanation(self) -> list[str]:
        return explain(self.understood)


def read_alerts(payload: Path, snapshot: Path | None, settings: Settings) -> Iterator[AlertReading]:
    """Every alert of every payload in the file, in order. With a snapshot, a node an alert
    names by an address or a pod is looked up there, as the pipeline looks it up."""
    mapping = alert_mapping(settings)
    nodes = load_snapshot(snapshot, limits=settings.limits) if snapshot is not None else None
    for found in read_payloads(payload, settings.limits.alerts()):
        readings = [understand(a, mapping, settings.node_labels) for a in found.alerts]
        resolved: list[str | None] = [r.node for r in readings]
        if nodes is not None:
            signals = signals_from_payload(found, settings.node_labels, mapping)
            resolved = [s.node for s in resolve_signal_nodes(nodes, signals)]
        for alert, reading, node in zip(found.alerts, readings, resolved, strict=True):
            yield AlertReading(alert.status, reading, node)

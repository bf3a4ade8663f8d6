"""The composition root of `gpubot alerts explain`: each alert of a webhook payload file as
gpubot reads it (the alert mapping), with the node it finds, in a snapshot when one is given.

It exists so that the command only prints, and so that a person can see what the webhook
would make of an alert without running `gpubot serve`: with a snapshot, also that a node an
alert names is not there (a look-alike of a real name, `gpu-a1` with a zero-width space, is
the case to see). It must never store, post or diagnose anything: it reads files and says how
they are understood."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.facts.collecting import absent_nodes, resolve_signal_nodes
from bot.facts.nodes import absent_line
from bot.facts.snapshots import load_snapshot
from bot.sources.alertmanager.payloads import read_payloads, signals_from_payload
from bot.sources.alertmanager.understanding import Understood, alert_mapping, explain, understand

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.model import Lang


@dataclass(frozen=True)
class AlertReading:
    """One alert of a payload: its status, how it is understood, and the node found for it
    (in the snapshot, when one was given, else the one its labels name), and whether the
    snapshot has no node of that name."""

    status: str
    understood: Understood
    node_found: str | None
    absent: bool = False

    def explanation(self) -> list[str]:
        return explain(self.understood)

    def absence(self, lang: Lang) -> str | None:
        """The node the snapshot does not have, said as a diagnosis says it (escaped)."""
        return absent_line(self.node_found, lang) if self.absent and self.node_found else None


def read_alerts(payload: Path, snapshot: Path | None, settings: Settings) -> Iterator[AlertReading]:
    """Every alert of every payload in the file, in order. With a snapshot, a node an alert
    names by an address or a pod is looked up there, as the pipeline looks it up."""
    mapping = alert_mapping(settings)
    nodes = load_snapshot(snapshot, limits=settings.limits) if snapshot is not None else None
    for found in read_payloads(payload, settings.limits.alerts()):
        readings = [understand(a, mapping, settings.node_labels) for a in found.alerts]
        resolved: list[str | None] = [r.node for r in readings]
        gone: set[int] = set()
        if nodes is not None:
            signals = resolve_signal_nodes(
                nodes, signals_from_payload(found, settings.node_labels, mapping)
            )
            resolved = [s.node for s in signals]
            gone = {id(s) for s in absent_nodes(nodes, signals)[1]}
            absent = [id(s) in gone for s in signals]
        else:
            absent = [False] * len(readings)
        for alert, reading, node, lacks in zip(
            found.alerts, readings, resolved, absent, strict=True
        ):
            yield AlertReading(alert.status, reading, node, lacks)

"""What the watches report for every simulated fault and its repair, against a reference
recorded when the caches held the API's objects with their JSON shape.

The caches keep only what the diffs read; this holds their signals to what whole objects
gave: through the watch stream (faults), and through a relist against the caches (repairs
made while nobody watched). Record again only for a change meant to alter the signals:
GPUBOT_RECORD_WATCH_REFERENCE=1 pytest tests/contract/test_watch_signals_reference.py
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.kube.cluster import KubeCluster
from bot.model import Signal
from bot.sources.watches import KubeSignals
from gpusim import faults, objects
from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.state import ClusterState

PARAMETERS: dict[str, dict[str, Any]] = {
    "xid": {"code": 79},
    "driver-upgrade": {"version": "580.65.06"},
    "reboot": {"boot_id": "0b9c1f4e-reboot-fault"},
}
RANDOM_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
"""A boot ID a repair's reboot draws (uuid4), unlike the simulator's derived ids."""
VARIES = "varies"
"""The fingerprint of a change to an object the simulator gives a random uid."""
REFERENCE = Path(__file__).parent.parent / "data" / "watches" / "fault_signals.json"
NOW = FIXTURE_NOW + timedelta(hours=1)


def _as_seen(signals: list[Signal]) -> list[dict[str, Any]]:
    seen = [
        {
            "name": s.name,
            "node": s.node,
            "status": s.status,
            "labels": {k: RANDOM_UUID.sub("<random uuid>", v) for k, v in s.labels.items()},
            "fingerprint": s.fingerprint,
        }
        for s in signals
    ]
    return sorted(seen, key=_what)


def _signals_of_every_fault() -> dict[str, list[dict[str, Any]]]:
    store = ClusterState()
    store.load(healthy_cluster(len(faults.FAULTS) + 1, FIXTURE_NOW)["items"])
    faults.enable_mig(store, f"gpu-a{len(faults.FAULTS) + 1}")
    server = SimulatedApiServer(store).start()
    cluster = KubeCluster.for_url(server.url)
    seen: list[Signal] = []
    watcher = KubeSignals(cluster, seen.append, clock=lambda: NOW, watch_timeout_s=1)
    phases: dict[str, list[dict[str, Any]]] = {}
    try:
        for informer in watcher.informers:
            informer.sync()
        phases["start"], seen[:] = _as_seen(seen), []
        # Each fault on a node of its own, seen through the watch streams.
        for index, fault in enumerate(faults.FAULTS):
            faults.inject(store, fault, f"gpu-a{index + 1}", NOW, **PARAMETERS.get(fault, {}))
        faults.inject(
            store, "reboot", f"gpu-a{len(faults.FAULTS) + 1}", NOW, boot_id="5d2e-mig-reboot"
        )
        store.create(BY_KIND["Pod"], "ml", objects.pod("infer-0", "ml", None, NOW, gpus=8))
        store.create(
            BY_KIND["Event"],
            "ml",
            objects.event(
                "Pod",
                "infer-0",
                "ml",
                "FailedScheduling",
                "0/5 nodes are available: 4 Insufficient nvidia.com/gpu.",
                NOW,
                component="default-scheduler",
                type_="Warning",
            ),
        )
        for informer in watcher.informers:
            informer.watch_once()
        phases["faults"], seen[:] = _as_seen(seen), []
        # Every repair while nobody watches: a relist finds them by diffing the caches.
        for index, fault in enumerate(faults.FAULTS):
            faults.repair(store, fault, f"gpu-a{index + 1}", NOW)
        faults.repair(store, "reboot", f"gpu-a{len(faults.FAULTS) + 1}", NOW)
        store.delete(BY_KIND["Pod"], "ml", "infer-0")
        for informer in watcher.informers:
            informer.sync()
        phases["repairs"] = _as_seen(seen)
    finally:
        cluster.close()
        server.stop()
    return phases


def _what(signal: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in signal.items() if k != "fingerprint"}, sort_keys=True)


def _record() -> None:
    first, second = _signals_of_every_fault(), _signals_of_every_fault()
    for phase, signals in first.items():
        again = {_what(s): s["fingerprint"] for s in second[phase]}
        for signal in signals:
            if again.get(_what(signal)) != signal["fingerprint"]:
                signal["fingerprint"] = VARIES
    REFERENCE.write_text(json.dumps(first, indent=1, sort_keys=True) + "\n")


def test_every_fault_and_repair_gives_the_signals_whole_objects_gave() -> None:
    if os.environ.get("GPUBOT_RECORD_WATCH_REFERENCE"):
        _record()
    reference = json.loads(REFERENCE.read_text())
    phases = _signals_of_every_fault()
    assert phases["faults"] and phases["repairs"]  # the reference says something
    for phase, signals in phases.items():
        varies = {_what(s) for s in reference[phase] if s["fingerprint"] == VARIES}
        for signal in signals:
            if _what(signal) in varies:
                signal["fingerprint"] = VARIES
        assert sorted(signals, key=_what) == sorted(reference[phase], key=_what), phase

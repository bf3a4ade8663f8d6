"""`gpubot demo`: a live simulated GPU cluster, a scripted sequence of faults, and the
diagnoses as they happen, through the same parts `serve` will use: the simulator behind the
real kubernetes client, watches turning changes into signals, the rules, and a real drain.

It is a show for a person at a terminal; it never touches anything outside 127.0.0.1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.config import Settings
from bot.diagnose import diagnose
from bot.evidence.live import read_snapshot
from bot.evidence.snapshot import collect_facts, resolve_signal_nodes
from bot.kube.cluster import KubeCluster
from bot.model import Diagnosis, Lang, Signal
from bot.remediate.draining import DrainProgress, DrainResult, drain
from bot.rules.loading import RuleSet
from bot.sim import faults
from bot.sim.apiserver import SimulatedApiServer
from bot.sim.controllers import Controllers
from bot.sim.scenarios import healthy_cluster
from bot.sim.store import Store
from bot.sources.alertmanager import signals_from_payload, validate_payload
from bot.sources.kube import KubeSignals


@dataclass(frozen=True)
class Step:
    title: str
    fault: str
    node: str
    params: dict[str, Any]


SCRIPT = (
    Step("GPU 3 of gpu-a2 falls off the bus (Xid 79)", "xid", "gpu-a2", {"code": 79, "gpu": 3}),
    Step("the device plugin on gpu-a3 starts crash-looping", "plugin-crashloop", "gpu-a3", {}),
    Step("gpu-a4 reports zero allocatable GPUs", "zero-capacity", "gpu-a4", {}),
    Step("a PodDisruptionBudget pins the training job on gpu-a1", "pdb-block", "gpu-a1", {}),
)


@dataclass
class DemoOutput:
    """Where the demo writes: the CLI renders these with rich; tests collect them."""

    step: Callable[[str], None]
    signal: Callable[[Signal], None]
    diagnoses: Callable[[list[Diagnosis]], None]
    drain_progress: Callable[[DrainProgress], None]
    drain_result: Callable[[DrainResult], None]


def run(
    rules: RuleSet, settings: Settings, lang: Lang, out: DemoOutput, pause_s: float = 1.0
) -> None:
    store = Store()
    store.load(healthy_cluster(4, datetime.now(UTC))["items"])
    api = SimulatedApiServer(store).start()
    controllers = Controllers(store)
    controllers.start()
    cluster = KubeCluster.for_url(api.url)
    seen: list[Signal] = []
    lock = threading.Lock()

    def collect(signal: Signal) -> None:
        with lock:
            seen.append(signal)

    watcher = KubeSignals(
        cluster, collect, operator_namespaces=tuple(settings.operator_namespaces)
    ).start()
    watcher.wait_synced()
    alerts: list[Signal] = []
    shown: set[tuple[str, str | None]] = set()
    try:
        for step in SCRIPT:
            out.step(step.title)
            result = faults.inject(store, step.fault, step.node, datetime.now(UTC), **step.params)
            payload = validate_payload(result.payload(), "simulated Alertmanager")
            alerts += signals_from_payload(payload, settings.node_labels)
            time.sleep(pause_s)  # let the watches deliver
            with lock:
                fresh, seen[:] = list(seen), []
            for signal in fresh + [a for a in alerts if a.node == step.node]:
                out.signal(signal)
            snapshot = read_snapshot(cluster)
            signals = resolve_signal_nodes(snapshot, alerts)
            facts = collect_facts(snapshot, signals, settings, datetime.now(UTC))
            found = diagnose(facts, signals, rules, settings, lang).diagnoses
            new = [d for d in found if (d.rule, d.node) not in shown]
            shown.update((d.rule, d.node) for d in found)
            out.diagnoses(new)
        out.step("gpubot drains gpu-a1 of the simulator (in `serve`, only after an approval)")
        out.drain_result(
            drain(cluster, "gpu-a1", timeout_s=3 * pause_s + 1, on_progress=out.drain_progress)
        )
    finally:
        watcher.stop()
        controllers.stop()
        cluster.close()
        api.stop()

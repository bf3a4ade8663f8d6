"""`gpubot demo`: a live simulated GPU cluster, a scripted sequence of faults, and the
diagnoses as they happen, through the same parts `serve` will use: the simulator behind the
real kubernetes client, watches turning changes into signals, the rules, and a real drain.

It is a show for a person at a terminal; it never touches anything outside 127.0.0.1.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.clock import utcnow
from bot.config import ActionPolicy, ApprovalPolicy, Settings
from bot.diagnose import diagnose
from bot.evidence.collecting import collect_facts, resolve_signal_nodes
from bot.evidence.gate import ExternalEvidence
from bot.evidence.live import read_snapshot
from bot.kube.cluster import KubeCluster
from bot.model import (
    Action,
    ActionRequest,
    Diagnosis,
    Incident,
    IncidentState,
    Lang,
    Proposal,
    Signal,
    TimelineEntry,
)
from bot.names import GPUBOT
from bot.remediate.executor import Executor
from bot.rules.loading import RuleSet
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.sources.alertmanager.understanding import alert_mapping
from bot.sources.watches import KubeSignals
from bot.store.sql import SqlStore
from gpusim import faults
from gpusim.apiserver import SimulatedApiServer
from gpusim.controllers import Controllers
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState


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
)
LOOP_NODE = "gpu-a2"
"""The node the demo takes through the whole loop: drain, repair, gate, uncordon."""
Approver = Callable[[ActionRequest], tuple[bool, str]]


@dataclass
class DemoOutput:
    """Where the demo writes: the CLI renders these with rich; tests collect them."""

    step: Callable[[str], None]
    signal: Callable[[Signal], None]
    diagnoses: Callable[[list[Diagnosis]], None]
    timeline: Callable[[TimelineEntry], None]
    summary: Callable[[Incident, list[TimelineEntry]], None]


def demo_settings(settings: Settings, approver: str) -> Settings:
    """One person at a terminal approves everything: two-person rules would stall the demo.
    Production policies come from the settings file."""
    person = ActionPolicy(users=[approver], allow_self=True)
    approvals = ApprovalPolicy(
        cordon=person, drain=person, uncordon=person, force=person, uncordon_anyway=person
    )
    remediation = settings.remediation.model_copy(
        update={"approvals": approvals, "drain_timeout_s": 60.0}
    )
    return settings.model_copy(update={"remediation": remediation})


def gpu_errors(store: ClusterState, node: str) -> list[str]:
    """What dcgm-exporter would show for the node now (the simulator's GPU state): the demo's
    stand-in for the Prometheus window that `serve` asks."""
    errors = []
    for index, gpu in sorted(faults.gpu_state(store).get(node, {}).items()):
        if gpu.get("xid"):
            errors.append(f"GPU {index}: Xid {gpu['xid']}")
        if gpu.get("ecc_dbe_volatile"):
            errors.append(f"GPU {index}: {gpu['ecc_dbe_volatile']} ECC double-bit errors")
    return errors


def run(
    rules: RuleSet,
    settings: Settings,
    lang: Lang,
    out: DemoOutput,
    pause_s: float = 1.0,
    approve: Approver | None = None,
    store_url: str | None = None,
    approver_name: str = "you",
) -> None:
    store = ClusterState()
    store.load(healthy_cluster(4, utcnow())["items"])
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
        cluster,
        collect,
        operator_namespaces=tuple(settings.operator_namespaces),
        gpu_resource=settings.gpu_resource,
    ).start()
    watcher.wait_synced()
    alerts: list[Signal] = []
    shown: set[tuple[str, str | None]] = set()
    incidents_db = tempfile.TemporaryDirectory(prefix="gpubot-demo-")
    records = SqlStore.open(store_url or f"sqlite:///{incidents_db.name}/gpubot.db")
    acting = demo_settings(settings, approver_name)
    executor = Executor(
        cluster,
        records,
        acting,
        executor_id="demo",
        clock=utcnow,
        notify=out.timeline,
        external=lambda node: ExternalEvidence(new_gpu_errors=gpu_errors(store, node)),
    )
    loop: tuple[Incident, Diagnosis] | None = None
    try:
        for step in SCRIPT:
            out.step(step.title)
            result = faults.inject(store, step.fault, step.node, utcnow(), **step.params)
            payload = validate_payload(result.payload(), "simulated Alertmanager")
            alerts += signals_from_payload(payload, settings.node_labels, alert_mapping(settings))
            time.sleep(pause_s)  # let the watches deliver
            with lock:
                fresh, seen[:] = list(seen), []
            for signal in fresh + [a for a in alerts if a.node == step.node]:
                out.signal(signal)
            records.add_signals(fresh + alerts, utcnow())
            snapshot = read_snapshot(cluster)
            signals = resolve_signal_nodes(snapshot, alerts)
            facts = collect_facts(snapshot, signals, settings, utcnow())
            found = diagnose(facts, signals, rules, settings, lang).diagnoses
            new = [d for d in found if (d.rule, d.node) not in shown]
            shown.update((d.rule, d.node) for d in found)
            for d in new:
                incident = records.record_diagnosis(
                    settings.cluster, d, utcnow(), settings.thresholds.flap_window_s
                ).incident
                records.append(
                    TimelineEntry(
                        incident=incident.id,
                        at=utcnow(),
                        actor=GPUBOT,
                        kind="diagnosis",
                        text=f"{d.title}: {d.summary}",
                        data={"rule": d.rule, "stage": d.stage.value, "evidence": d.evidence},
                    )
                )
                wants_drain = any(p.action is Action.DRAIN for p in d.proposals)
                if d.node == LOOP_NODE and loop is None and wants_drain:
                    loop = (incident, d)
            out.diagnoses(new)
        if loop is not None:
            _remediate(loop, store, records, executor, out, pause_s, approve, approver_name, alerts)
    finally:
        watcher.stop()
        controllers.stop()
        cluster.close()
        api.stop()
        records.close()
        incidents_db.cleanup()


def _remediate(
    loop: tuple[Incident, Diagnosis],
    sim: ClusterState,
    records: SqlStore,
    executor: Executor,
    out: DemoOutput,
    pause_s: float,
    approve: Approver | None,
    approver_name: str,
    alerts: list[Signal],
) -> None:
    """The whole loop on one node, every action through the executor and an approval."""
    incident, found = loop
    node = found.node or LOOP_NODE

    def decide(request: ActionRequest) -> bool:
        if approve is None:
            out.step(f"waiting for a person: run with --approve-as NAME to approve {request.id}")
            return False
        approved, _who = approve(request)
        if not approved:
            executor.deny(request.id, approver_name)
            return False
        return executor.approve(request.id, approver_name).status == "acted"

    out.step(f"gpubot proposes taking {node} out of service")
    facts = executor.read_facts(node)
    drains = [r for r in executor.propose(incident.id, found, facts) if r.action is Action.DRAIN]
    if not drains or not decide(drains[0]):
        return
    out.step(f"repair: {node} is rebooted and its GPU reset")
    faults.inject(sim, "reboot", node, utcnow())
    # After the reboot dcgm-exporter starts afresh: the node's alerts resolve, and
    # Alertmanager says so.
    now = utcnow()
    records.add_signals(
        [
            a.model_copy(update={"status": "resolved", "ends_at": now})
            for a in alerts
            if a.node == node
        ],
        now,
    )
    time.sleep(pause_s)  # the kubelet and the operator's pods come back
    out.step(f"health gate for {node} (runbook step 9)")
    facts = executor.read_facts(node)
    back = found.model_copy(
        update={"proposals": [Proposal(action=Action.UNCORDON, node=node, requires_approval=True)]}
    )
    uncordons = executor.propose(incident.id, back, facts)
    if not uncordons or not decide(uncordons[0]):
        return
    done = records.transition(
        incident.id, IncidentState.RESOLVED, GPUBOT, utcnow(), f"{node} back in service"
    )
    out.summary(done, records.timeline(incident.id))

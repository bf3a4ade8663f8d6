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

from rich.console import Console
from rich.text import Text

from bot.acting.wing import DecisionWing
from bot.chat.console import Prose, print_diagnoses, render_summary, render_timeline
from bot.clock import utcnow
from bot.config import ActionPolicy, ApprovalPolicy, Settings
from bot.diagnose import diagnose
from bot.facts.collecting import collect_facts, resolve_signal_nodes
from bot.facts.live import read_snapshot
from bot.gate.items import ExternalEvidence, item_name, item_reason
from bot.incidents.summary import summarize, summary_lines
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
from bot.rules.loading import RuleSet
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.sources.alertmanager.understanding import alert_mapping
from bot.sources.watches import KubeSignals
from bot.store.sql import SqlStore
from bot.texts import kind_name, say
from gpusim import faults
from gpusim.apiserver import SimulatedApiServer
from gpusim.controllers import Controllers
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState


@dataclass(frozen=True)
class Step:
    fault: str
    node: str
    params: dict[str, Any]

    def title(self, lang: Lang) -> str:
        return say(lang, f"demo.fault.{self.fault}", node=self.node, **self.params)


SCRIPT = (
    Step("xid", "gpu-a2", {"code": 79, "gpu": 3}),
    Step("plugin-crashloop", "gpu-a3", {}),
    Step("zero-capacity", "gpu-a4", {}),
)
LOOP_NODE = "gpu-a2"
"""The node the demo takes through the whole loop: drain, repair, gate, uncordon."""
Approver = Callable[[ActionRequest], tuple[bool, str]]


@dataclass
class DemoOutput:
    """Where the demo writes: the CLI renders these with rich; tests collect them."""

    step: Callable[[str], None]
    """A scene's heading."""
    say: Callable[[str], None]
    """What happened in a scene that no timeline entry tells (the repair, nobody to ask)."""
    signal: Callable[[Signal], None]
    diagnoses: Callable[[list[Diagnosis]], None]
    timeline: Callable[[TimelineEntry], None]
    summary: Callable[[Incident, list[TimelineEntry]], None]
    """The loop's incident at the end, resolved or not: every ending has one."""


def demo_settings(settings: Settings, approver: str, lang: Lang) -> Settings:
    """One person at a terminal approves everything: two-person rules would stall the demo.
    Production policies come from the settings file. The timeline is written in the demo's
    language, as `serve` writes it in `lang`."""
    person = ActionPolicy(users=[approver], allow_self=True)
    approvals = ApprovalPolicy(
        cordon=person, drain=person, uncordon=person, force=person, uncordon_anyway=person
    )
    remediation = settings.remediation.model_copy(
        update={"approvals": approvals, "drain_timeout_s": 60.0}
    )
    return settings.model_copy(update={"remediation": remediation, "lang": lang})


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
    acting = demo_settings(settings, approver_name, lang)
    wing = DecisionWing.build(
        cluster,
        records,
        acting,
        executor_id="demo",
        clock=utcnow,
        external=lambda node: ExternalEvidence(new_gpu_errors=gpu_errors(store, node)),
    )
    wing.timeline.notify = out.timeline
    loop: tuple[Incident, Diagnosis] | None = None
    cordons: list[tuple[Incident, Diagnosis]] = []
    try:
        for step in SCRIPT:
            out.step(step.title(lang))
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
                elif any(p.action is Action.CORDON for p in d.proposals):
                    cordons.append((incident, d))
            out.diagnoses(new)
        if loop is not None:
            demo = _Loop(store, records, wing, out, lang, approve, approver_name)
            if demo.remediate(loop, pause_s, alerts):
                for incident, d in cordons:
                    demo.cordon(incident, d)
            out.summary(*demo.ending(loop[0]))
    finally:
        watcher.stop()
        controllers.stop()
        cluster.close()
        api.stop()
        records.close()
        incidents_db.cleanup()


class _Loop:
    """The whole loop on one node, every action through the executor and an approval, then
    the cordons the other diagnoses proposed. Nobody to ask stops it at the first request."""

    def __init__(
        self,
        sim: ClusterState,
        records: SqlStore,
        wing: DecisionWing,
        out: DemoOutput,
        lang: Lang,
        approve: Approver | None,
        approver_name: str,
    ) -> None:
        self.sim = sim
        self.records = records
        self.wing = wing
        self.out = out
        self.lang = lang
        self.approve = approve
        self.approver_name = approver_name

    def _decide(self, request: ActionRequest) -> bool:
        if self.approve is None:
            # The request's id is not worth showing: the demo's store goes with the demo.
            what = {"action": request.action.value, "node": request.node}
            self.out.say(say(self.lang, "demo.nobody", **what))
            return False
        approved, _who = self.approve(request)
        if not approved:
            self.wing.voting.record_denial(request.id, self.approver_name)
            self.out.say(
                say(self.lang, "demo.denied", action=request.action.value, node=request.node)
            )
            return False
        return self.wing.approve(request.id, self.approver_name).status == "succeeded"

    def remediate(
        self, loop: tuple[Incident, Diagnosis], pause_s: float, alerts: list[Signal]
    ) -> bool:
        """True when every step was approved (the demo may ask on)."""
        incident, found = loop
        node = found.node or LOOP_NODE
        wing, lang = self.wing, self.lang
        self.out.step(say(lang, "demo.take_out", node=node))
        facts = wing.facts.of_node(node)
        proposed = wing.proposals.propose(incident.id, found, facts)
        drains = [r for r in proposed if r.action is Action.DRAIN]
        if not drains or not self._decide(drains[0]):
            return False
        self.out.step(say(lang, "demo.repair", node=node))
        faults.inject(self.sim, "reboot", node, utcnow())
        # After the reboot dcgm-exporter starts afresh: the node's alerts resolve, and
        # Alertmanager says so.
        now = utcnow()
        resolved = [
            a.model_copy(update={"status": "resolved", "ends_at": now})
            for a in alerts
            if a.node == node
        ]
        self.records.add_signals(resolved, now)
        time.sleep(pause_s)  # the kubelet and the operator's pods come back
        facts = wing.facts.of_node(node)
        after = facts.nodes[node]
        self.out.say(
            say(
                lang,
                "demo.repaired",
                node=node,
                ready=after.ready,
                gpus=after.gpu.allocatable if after.gpu else 0,
                count=after.gpu.expected if after.gpu else 0,
                resolved=", ".join(sorted({a.name for a in resolved})) or "-",
            )
        )
        self.out.step(say(lang, "demo.gate", node=node))
        back = found.model_copy(
            update={
                "proposals": [Proposal(action=Action.UNCORDON, node=node, requires_approval=True)]
            }
        )
        uncordons = wing.proposals.propose(incident.id, back, facts)
        if not uncordons or not self._decide(uncordons[0]):
            return False
        self.records.transition(
            incident.id,
            IncidentState.RESOLVED,
            GPUBOT,
            utcnow(),
            say(lang, "demo.back", node=node),
        )
        return True

    def cordon(self, incident: Incident, found: Diagnosis) -> None:
        node = found.node or ""
        self.out.step(say(self.lang, "demo.cordon", node=node))
        facts = self.wing.facts.of_node(node)
        for request in self.wing.proposals.propose(incident.id, found, facts):
            if request.action is Action.CORDON:
                self._decide(request)

    def ending(self, incident: Incident) -> tuple[Incident, list[TimelineEntry]]:
        return self.records.incident(incident.id), self.records.timeline(incident.id)


def console_output(console: Console, lang: Lang) -> DemoOutput:
    """The demo on a terminal, every word in `lang` but the cluster's own names."""

    def signal(s: Signal) -> None:
        detail = ", ".join(
            f"{k}={v}" for k, v in s.labels.items() if k not in ("alertname", "node")
        )
        console.print(Text(f"  ⚡ {s.source}: {s.name} {s.node or ''} {detail}", style="dim"))

    def timeline(entry: TimelineEntry) -> None:
        style = {"action-result": "bold", "gate": "cyan", "approval": "green"}.get(entry.kind, "")
        kind = kind_name(entry.kind, lang)
        console.print(Prose(f"  [{kind}] {entry.actor}: {entry.text}", style=style))
        items = entry.data.get("items") if entry.kind == "gate" else None
        if not isinstance(items, list) or not items:
            return
        # What the gate checked, each item: "passed" alone tells the on-call nothing.
        console.print(Text(f"      {say(lang, 'console.gate_legend')}", style="dim"))
        for item in items:
            if isinstance(item, dict):
                passed, required = item.get("outcome") == "pass", item.get("required", True)
                mark = "✓" if passed else ("✗" if required else "○")
                reason = item_reason(lang, item.get("key"), item.get("values"), item["reason"])
                name = item_name(lang, item["name"])
                line = say(lang, "console.gate_item", mark=mark, name=name, reason=reason)
                console.print(Prose(f"      {line}", style="cyan"))

    def summary(incident: Incident, entries: list[TimelineEntry]) -> None:
        key = "demo.resolved" if incident.state is IncidentState.RESOLVED else "demo.open"
        # The rule's title goes in the body: a border title is cut, not wrapped.
        title = say(lang, key, id=incident.id, node=incident.node)
        lines = [("", incident.title), *summary_lines(summarize(incident, entries), lang)]
        console.print(render_summary(title, lines))
        console.print(render_timeline(entries, lang))

    def diagnoses(found: list[Diagnosis]) -> None:
        if found:
            print_diagnoses(found, console, lang)

    return DemoOutput(
        step=lambda title: console.rule(Text(title, style="bold")),
        say=lambda text: console.print(Prose(f"  {text}", style="yellow")),
        signal=signal,
        diagnoses=diagnoses,
        timeline=timeline,
        summary=summary,
    )

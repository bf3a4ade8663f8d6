"""`gpubot demo`: a live simulated GPU cluster, a scripted sequence of faults, and the
diagnoses as they happen, through the same parts `serve` uses: the simulator behind the real
kubernetes client, watches turning changes into signals, the diagnosis pass of
`bot.pipeline` (the one `serve` and `drill` run) telling a chat that prints to the terminal,
and a real drain.

Why it exists: a new operator's first command (the README's), showing the whole loop — a
fault, its diagnosis, an approved drain, the repair, the health gate, the uncordon — in a
minute, with nothing to install or configure. It diagnoses through the same pass as the bot,
so what it shows is what the bot would say.

What it must never do: touch anything outside 127.0.0.1, or diagnose by a loop of its own.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from bot.acting.wing import DecisionWing
from bot.chat.console import Prose, print_diagnoses, render_summary, render_timeline
from bot.clock import utcnow
from bot.config import ActionPolicy, ApprovalPolicy, Settings
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
from bot.pipeline.service import Service
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
    language, as `serve` writes it in `lang`. Proposals are not held for a better diagnosis
    (`settle_s`): the demo's faults are scripted one to a scene and nothing better follows
    them, so a hold would only keep a scene's cordon from its scene."""
    person = ActionPolicy(users=[approver], allow_self=True)
    approvals = ApprovalPolicy(
        cordon=person, drain=person, uncordon=person, force=person, uncordon_anyway=person
    )
    remediation = settings.remediation.model_copy(
        update={"approvals": approvals, "drain_timeout_s": 60.0}
    )
    thresholds = settings.thresholds.model_copy(update={"settle_s": 0})
    return settings.model_copy(
        update={"remediation": remediation, "lang": lang, "thresholds": thresholds}
    )


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
    """The show: each scripted fault in its scene, diagnosed by the pass as it happens; then
    the loop on `LOOP_NODE` and the cordons, each request put to `approve` (none: the demo
    stops at the first). Everything it started is stopped, whatever ends it."""
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
    wing.timeline.notify = _unless_proposal(out.timeline)
    cast = _Cast()
    service = Service(
        settings=acting,
        rules=rules,
        store=records,
        cluster=cluster,
        chat=_DemoChat(out),
        wing=wing,
        clock=utcnow,
        on_diagnosis=cast.take,
    )
    try:
        for step in SCRIPT:
            out.step(step.title(lang))
            result = faults.inject(store, step.fault, step.node, utcnow(), **step.params)
            payload = validate_payload(result.payload(), "simulated Alertmanager")
            alerts += signals_from_payload(payload, settings.node_labels, alert_mapping(settings))
            time.sleep(pause_s)  # let the watches deliver
            with lock:
                fresh, seen[:] = list(seen), []
            batch = fresh + [a for a in alerts if a.node == step.node]
            for signal in batch:
                out.signal(signal)
            records.add_signals(fresh + alerts, utcnow())
            # As the serving worker takes a batch: the pass `serve` and `drill` run, about
            # the nodes the batch names, telling each new diagnosis through `_DemoChat`.
            service.process(batch)
        if cast.loop is not None:
            demo = _Loop(store, records, wing, out, lang, approve, approver_name)
            if demo.remediate(cast.loop, pause_s, alerts):
                for incident in cast.cordons.values():
                    demo.cordon(incident)
            out.summary(*demo.ending(cast.loop[0]))
    finally:
        watcher.stop()
        controllers.stop()
        cluster.close()
        api.stop()
        records.close()
        incidents_db.cleanup()


def _unless_proposal(show: Callable[[TimelineEntry], None]) -> Callable[[TimelineEntry], None]:
    """The wing's timeline on the console, proposals left out: the pass makes them with
    their diagnosis, in the scene of the fault, and the scene that asks about a request
    shows its proposal (`_Loop._decide`), so each is read just before its answer."""

    def notify(entry: TimelineEntry) -> None:
        if entry.kind != "proposal":
            show(entry)

    return notify


@dataclass
class _Cast:
    """Owns which incidents the remediation scenes take, as the pass reports them: the loop
    node's incident that proposes a drain, and every other incident that proposes a cordon.
    It must never take an incident twice (a diagnosis the pass reports again is the same
    incident)."""

    loop: tuple[Incident, Diagnosis] | None = None
    cordons: dict[str, Incident] = field(default_factory=dict)

    def take(self, incident: Incident, found: Diagnosis) -> None:
        if self.loop is not None and self.loop[0].id == incident.id:
            return
        wants_drain = any(p.action is Action.DRAIN for p in found.proposals)
        if found.node == LOOP_NODE and self.loop is None and wants_drain:
            self.loop = (incident, found)
        elif any(p.action is Action.CORDON for p in found.proposals):
            self.cordons.setdefault(incident.id, incident)


@dataclass
class _DemoChat:
    """The Chat port on the demo's output: what the pass posts is shown in the scene that
    found it. Owns nothing; it must never return a message reference, since a terminal has
    no message to revise once the scene has moved on."""

    out: DemoOutput

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        self.out.diagnoses([diagnosis])
        return None

    def post_thread(self, incident: Incident, text: str) -> None:
        self.out.say(text)

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        self.out.say(why)

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        self.out.say(note)
        self.out.diagnoses([diagnosis])

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self.out.say(why)

    def post_notice(self, text: str, monospace: bool = False) -> None:
        self.out.say(text)

    def post_result(self, request: ActionRequest, text: str) -> None:
        self.out.say(text)


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

    def _undecided(self, incident: Incident, action: Action) -> list[ActionRequest]:
        """The incident's requests for `action` that nobody decided yet: the pass's."""
        return [
            r
            for r in self.records.requests(incident.id)
            if r.action is action and self.records.execution(r.id) is None
        ]

    def _decide(self, request: ActionRequest) -> bool:
        for entry in self.records.timeline(request.incident or ""):
            if entry.kind == "proposal" and entry.data.get("request") == request.id:
                self.out.timeline(entry)
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
        drains = self._undecided(incident, Action.DRAIN)
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

    def cordon(self, incident: Incident) -> None:
        self.out.step(say(self.lang, "demo.cordon", node=incident.node or ""))
        for request in self._undecided(incident, Action.CORDON):
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

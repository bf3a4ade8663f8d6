"""The one place tests build the bot's deciding parts: `build_wing` (the decision wing:
votes, proposals, the gate, the executor) and `build_service`, each a keyword per thing a test
varies, so a change to either constructor is made here once. On them, two rigs on the
simulated cluster and a SQLite store, with a clock the test moves: `make_rig`, the decision
wing with a policy naming an on-call group (what the executor and digest tests build on);
`make_live`, the serving passes and the leader's follow-up as one replica runs them, the chat
recorded (what the live-loop tests build on).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from bot.acting.wing import DecisionWing
from bot.chat.console import ConsoleChat
from bot.clock import Clock
from bot.config import ActionPolicy, ApprovalPolicy, Remediation, Settings
from bot.drills.record import RecordingChat, Seen, SeenKind
from bot.gate.items import ExternalEvidence
from bot.kube.cluster import KubeCluster
from bot.model import Action, ActionRequest, Incident, IncidentState, Lang, Signal
from bot.pipeline.service import Service
from bot.ports import Chat, Cluster, Store
from bot.process.telemetry import Telemetry
from bot.roots.offline import load_ruleset
from bot.rules.loading import RuleSet
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.store.sql import SqlStore
from gpusim import faults
from gpusim.resources import BY_KIND
from tests.helpers.builders import diagnosis
from tests.helpers.clocks import FakeClock

MERGE = "application/merge-patch+json"
POLICY = ApprovalPolicy(
    cordon=ActionPolicy(groups=["gpu-oncall"]),
    drain=ActionPolicy(groups=["gpu-oncall"], two_person=True),
    uncordon=ActionPolicy(groups=["gpu-oncall"]),
    force=ActionPolicy(users=["dave", "erin"], two_person=True),
    uncordon_anyway=ActionPolicy(users=["dave", "erin"], two_person=True),
)
ONCALL = {"alice", "bob", "carol"}


# ---- the decision wing and the service, built here only ----------------------------------------

External = Callable[[str], ExternalEvidence]
GroupsOf = Callable[[str], set[str]]


def no_new_gpu_errors(_node: str) -> ExternalEvidence:
    """Prometheus looked and saw no new GPU errors: the Kubernetes items decide the gate."""
    return ExternalEvidence(new_gpu_errors=[])


def nobody_looked(_node: str) -> ExternalEvidence:
    """No Prometheus at all, as the health gate assumes when told nothing."""
    return ExternalEvidence()


def in_no_group(_user: str) -> set[str]:
    """Without Slack there are no user groups: policies name people."""
    return set()


def build_wing(
    cluster: Cluster,
    store: Store,
    settings: Settings,
    *,
    clock: Clock,
    executor_id: str = "replica",
    groups_of: GroupsOf = in_no_group,
    external: External = no_new_gpu_errors,
) -> DecisionWing:
    """`external`: Prometheus saw nothing new, not the gate's own default (`nobody_looked`):
    most tests want the health gate decided by the Kubernetes items alone."""
    return DecisionWing.build(
        cluster,
        store,
        settings,
        executor_id=executor_id,
        groups_of=groups_of,
        clock=clock,
        external=external,
    )


def build_service(
    cluster: Cluster,
    store: Store,
    settings: Settings,
    *,
    clock: Clock,
    chat: Chat,
    wing: DecisionWing | None = None,
    rules: RuleSet | None = None,
    is_leader: Callable[[], bool] = lambda: True,
    telemetry: Telemetry | None = None,
    progress_to_chat: bool = False,
    executor_id: str = "replica",
    groups_of: GroupsOf = in_no_group,
    external: External = no_new_gpu_errors,
) -> Service:
    """One replica's `Service`; its decision wing is `wing`, or one built from the last three
    keywords. `rules`: the shipped rules unless given. `progress_to_chat`: the wing's timeline
    entries (a drain's progress) reach the incident's chat, as `serve` wires them; off, a test
    sees in the chat only what the service itself says."""
    if wing is None:
        wing = build_wing(
            cluster,
            store,
            settings,
            clock=clock,
            executor_id=executor_id,
            groups_of=groups_of,
            external=external,
        )
    service = Service(
        settings=settings,
        rules=load_ruleset(settings) if rules is None else rules,
        store=store,
        cluster=cluster,
        chat=chat,
        wing=wing,
        clock=clock,
        is_leader=is_leader,
        telemetry=telemetry,
    )
    if progress_to_chat:
        wing.timeline.notify = service.on_timeline
        wing.timeline.on_request = service.on_request
    return service


def console_chat(lang: Lang = Lang.EN) -> tuple[ConsoleChat, io.StringIO]:
    """The terminal chat, wide enough that no line a test looks for is wrapped, and what it
    printed."""
    out = io.StringIO()
    return ConsoleChat(Console(file=out, width=200), lang), out


# ---- the decision wing on the simulator, with an incident awaiting approval ---------------------


@dataclass
class Rig:
    server: Any
    cluster: KubeCluster
    store: SqlStore
    clock: FakeClock
    wing: DecisionWing
    incident: str

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.server.store.get(BY_KIND["Node"], "", name)
        return node

    def cordoned(self, name: str) -> bool:
        return bool(self.node(name)["spec"].get("unschedulable"))

    def request(self, action: Action, node: str = "gpu-a3", **options: bool) -> str:
        facts = self.wing.facts.of_node(node)
        return self.wing.proposals.request(
            action, facts.nodes[node], self.incident, "gpubot", **options
        ).id


def make_rig(sim_cluster: Any, tmp_path: Path, lang: Lang = Lang.EN, **remediation: Any) -> Rig:
    server, cluster = sim_cluster
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    clock = FakeClock()
    settings = Settings(
        lang=lang,
        remediation=Remediation(**{"approvals": POLICY, "drain_timeout_s": 10, **remediation}),
    )
    wing = build_wing(
        cluster,
        store,
        settings,
        clock=clock,
        executor_id="test",
        groups_of=lambda user: {"gpu-oncall"} if user in ONCALL else set(),
    )
    incident = store.record_diagnosis("prod", diagnosis(node="gpu-a3"), clock(), 3600).incident
    store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", clock())
    store.transition(incident.id, IncidentState.AWAITING_APPROVAL, "gpubot", clock())
    return Rig(server, cluster, store, clock, wing, incident.id)


# ---- the live loop: the serving passes over the simulator ------------------------------------

LIVE_POLICY = ApprovalPolicy(
    cordon=ActionPolicy(users=["alice", "bob"]),
    drain=ActionPolicy(users=["alice", "bob"], two_person=True),
    uncordon=ActionPolicy(users=["alice", "bob"]),
)


@dataclass
class GpuErrors:
    """What Prometheus shows of new GPU errors on a node in the gate's window (its
    no-new-gpu-errors item): none unless a test says so."""

    errors: list[str] = field(default_factory=list)
    clear_by: datetime | None = None
    """When they leave the window if no new one comes."""

    def __call__(self, _node: str) -> ExternalEvidence:
        return ExternalEvidence(new_gpu_errors=list(self.errors), errors_clear_by=self.clear_by)


@dataclass
class Live:
    """One replica's `Service` (leader) as `serve` composes it, on the simulator, with the chat
    a person reads recorded (`RecordingChat` around the console chat) and alerts stored as the
    webhook's inbox stores them. A test moves time (`clock.ahead`) and runs what the leader's
    scheduler would run (`follow_up`)."""

    server: Any
    store: SqlStore
    service: Service
    chat: RecordingChat
    out: io.StringIO
    clock: FakeClock
    prometheus: GpuErrors
    _firing: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def _store_alerts(self, payload: dict[str, Any]) -> list[Signal]:
        signals = signals_from_payload(validate_payload(payload), ["node"])
        fresh = self.store.add_signals(signals, self.clock())
        return [s for s, new in zip(signals, fresh, strict=True) if new]

    def fault(self, fault: str, node: str, **params: Any) -> list[Signal]:
        """The fault happens, and its alerts arrive at once; returns the new signals."""
        result = faults.inject(self.server.store, fault, node, datetime.now(UTC), **params)
        self._firing[(fault, node)] = result.alerts
        return self._store_alerts(result.payload()) if result.alerts else []

    def repair(self, fault: str, node: str) -> list[Signal]:
        """The fault is mended, and the alerts it fired arrive resolved."""
        faults.repair(self.server.store, fault, node, datetime.now(UTC))
        ends = self.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        alerts = [
            {**a, "status": "resolved", "endsAt": ends} for a in self._firing.pop((fault, node), [])
        ]
        if not alerts:
            return []
        payload = faults.FaultResult(fault, node, [], alerts).payload()
        return self._store_alerts({**payload, "status": "resolved"})

    def run(self, signals: Sequence[Signal] = ()) -> list[Incident]:
        """One diagnosis pass, as the worker runs it for a batch (none: a sweep)."""
        return self.service.process(list(signals))

    def follow_up(self) -> None:
        self.service.follow_up()

    def requests(self, node: str, action: Action) -> list[ActionRequest]:
        """The node's requests for `action`, oldest first."""
        found = [
            r
            for incident in self.store.incidents(node=node)
            for r in self.store.requests(incident.id)
            if r.action is action
        ]
        return sorted(found, key=lambda r: r.created_at)

    def undecided(self, node: str, action: Action) -> ActionRequest:
        [request] = [r for r in self.requests(node, action) if self.store.execution(r.id) is None]
        return request

    def shown(self, kind: SeenKind | None = None, node: str | None = None) -> list[Seen]:
        return [
            s
            for s in self.chat.shown()
            if (kind is None or s.kind == kind) and (node is None or s.node == node)
        ]

    def cordoned(self, node: str) -> bool:
        obj = self.server.store.get(BY_KIND["Node"], "", node)
        return bool(obj["spec"].get("unschedulable"))

    def uncordon_by_hand(self, node: str) -> None:
        self.server.store.patch(BY_KIND["Node"], "", node, MERGE, {"spec": {"unschedulable": None}})


def make_live(sim_cluster: Any, tmp_path: Path, **changes: Any) -> Live:
    """`changes`: settings over the defaults (e.g. `remediation=Remediation(...)`); the
    approval policy is `LIVE_POLICY` unless `remediation` says otherwise."""
    server, cluster = sim_cluster
    changes.setdefault("remediation", Remediation(approvals=LIVE_POLICY))
    settings = Settings(**changes)
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    clock = FakeClock(real_time=True)  # the simulator stamps its objects with the real time
    console, out = console_chat(settings.lang)
    chat = RecordingChat(console, clock)
    prometheus = GpuErrors()
    service = build_service(
        cluster,
        store,
        settings,
        clock=clock,
        chat=chat,
        executor_id="live",
        external=prometheus,
    )
    return Live(server, store, service, chat, out, clock, prometheus)

"""The running bot as the edges see it: the webhook and the watches hand signals in, the chat
hands decisions in, the scheduler calls the leader's duties.

`gpubot serve` builds one `Service` per process from five parts, each its own module: the
intake worker (`worker`), the notices about alerts no incident holds (`notices`), the
diagnosis pass (`passes`), the decision relay (`relay`) and the leader's duties (`duties`).
Every replica takes webhooks and clicks; what acts — executions, resumes, sweeps — runs only
while `is_leader()` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from bot.acting.wing import DecisionWing
from bot.clock import Clock
from bot.config import Settings
from bot.facts.gpu_metrics import GpuEvidence
from bot.model import (
    ActionRequest,
    Diagnosis,
    Incident,
    Outcome,
    Signal,
    TimelineEntry,
    TimelineKind,
)
from bot.pipeline.duties import LeaderDuties
from bot.pipeline.notices import tell_notices
from bot.pipeline.passes import DiagnosisPass
from bot.pipeline.recorder import EvidenceLines
from bot.pipeline.relay import DecisionRelay
from bot.pipeline.worker import Worker
from bot.ports import Chat, Cluster, Store
from bot.process.telemetry import Telemetry
from bot.rules.loading import RuleSet
from bot.sources.alertmanager.inbox import Inbox


class Service:
    """Owns the parts and their wiring, nothing else: no state of its own, so that every
    path in (a webhook, a click, a tick) reaches the one part that does the job. It must never
    act on a node itself (the executor does, after approval, on the leader)."""

    def __init__(
        self,
        *,
        settings: Settings,
        rules: RuleSet,
        store: Store,
        cluster: Cluster,
        chat: Chat,
        wing: DecisionWing,
        clock: Clock,
        is_leader: Callable[[], bool] = lambda: True,
        evidence: EvidenceLines | None = None,
        gpu_evidence: Callable[[str], GpuEvidence] | None = None,
        on_diagnosis: Callable[[Incident, Diagnosis], None] | None = None,
        inbox: Inbox | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.wing = wing
        self.proposals = wing.proposals
        self.facts = wing.facts
        self.timeline = wing.timeline
        self.telemetry = telemetry
        self.inbox = inbox
        self.chat = chat
        self.worker = Worker(self._handle, self.take_deliveries, announce=self._announce)
        self.passes = DiagnosisPass(
            settings=settings,
            rules=rules,
            store=store,
            cluster=cluster,
            chat=chat,
            proposals=wing.proposals,
            timeline=wing.timeline,
            clock=clock,
            take_deliveries=self.take_deliveries,
            later=self.worker.put,
            evidence=evidence,
            gpu_evidence=gpu_evidence,
            on_diagnosis=on_diagnosis,
            telemetry=telemetry,
        )
        self.relay = DecisionRelay(
            store=store, chat=chat, wing=wing, is_leader=is_leader, telemetry=telemetry
        )
        self.duties = LeaderDuties(
            settings=settings,
            store=store,
            cluster=cluster,
            chat=chat,
            wing=wing,
            clock=clock,
            is_leader=is_leader,
            relay=self.relay,
            passes=self.passes,
            on_delivery=self.worker.on_delivery,
        )

    def _handle(self, batch: list[Signal]) -> None:
        self.passes.run(batch)

    def _announce(self, batch: Sequence[Signal]) -> None:
        tell_notices(self.chat, batch, self.settings.lang)

    # ---- intake ---------------------------------------------------------------------------

    def on_signals(self, signals: list[Signal]) -> None:
        """Signals already stored (the Kubernetes watch's): a crash here loses nothing."""
        self.worker.put(signals)

    def on_delivery(self) -> None:
        """The webhook's hand-over: a delivery is stored; the worker splits it."""
        self.worker.on_delivery()

    def take_deliveries(self, at_most: int | None = None) -> list[Signal]:
        """Stored webhook deliveries split into signals: the ones new to the store. A split
        stops at its bound; the rest is the worker's next batch, so a backlog is diagnosed a
        part at a time and never held at once."""
        if self.inbox is None:
            return []
        new = self.inbox.split(at_most)
        if at_most is None and self.inbox.more_waiting(new):
            self.worker.on_delivery()
        return new

    def start(self) -> Service:
        self.worker.start()
        return self

    def stop(self) -> None:
        self.worker.stop()

    def drain_queue(self, timeout_s: float = 10.0) -> None:
        self.worker.drain(timeout_s)

    # ---- the diagnosis pass ---------------------------------------------------------------

    def process(
        self, batch: Sequence[Signal], nodes: frozenset[str] | None = None
    ) -> list[Incident]:
        """One batch as the worker takes it: its notices, then its diagnosis pass."""
        self._announce(batch)
        return self.passes.run(batch, nodes)

    def resolve(self, incident_id: str, why: str, *, summary: bool = True) -> Incident:
        return self.passes.resolve(incident_id, why, summary=summary)

    # ---- decisions ------------------------------------------------------------------------

    def approve(self, request_id: str, approver: str) -> Outcome:
        return self.relay.approve(request_id, approver)

    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome:
        return self.relay.deny(request_id, who, reason)

    def on_timeline(self, entry: TimelineEntry) -> None:
        self.relay.on_timeline(entry)

    def on_request(self, request: ActionRequest, kind: TimelineKind, text: str) -> None:
        self.relay.on_request(request, kind, text)

    # ---- the leader's duties --------------------------------------------------------------

    def run_leader_duties_in_background(self) -> None:
        self.duties.run_in_background()

    def run_leader_duties(self) -> list[Outcome]:
        return self.duties.run()

    def expire_requests(self) -> list[Incident]:
        return self.duties.expire_requests()

    def follow_up(self) -> None:
        self.duties.follow_up()

    def sweep(self) -> list[Incident]:
        return self.duties.sweep()

    def watch_drains(self) -> list[Incident]:
        return self.duties.watch_drains()

    def post_digest(self, window: timedelta = timedelta(days=1)) -> list[str]:
        return self.duties.post_digest(window)

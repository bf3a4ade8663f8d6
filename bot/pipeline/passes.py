"""One diagnosis pass: the cluster read (a few nodes, or all of it), the alerts still firing,
facts, rules; incidents opened, updated or resolved; proposals made; the chat told.

Why it exists: this is where signals become the on-call's story, one pass at a time. Each
step is a part of its own (`cluster_reads`, `rule_errors`, `recorder` with `telling` and
`offers`, `resolving`); the pass puts them in order and makes passes take turns.

What it must never do: run beside another pass (an older read of the cluster must not undo
what a newer one found), act on a node (it proposes; the executor acts after approval), or
resolve an incident whose approved action is running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from bot.approval.proposing import Proposals
from bot.clock import Clock
from bot.config import Settings
from bot.diagnose import diagnose
from bot.facts.gpu_metrics import GpuEvidence
from bot.incidents.timeline import Timeline
from bot.model import ClusterFacts, Diagnosis, Incident, Signal
from bot.pipeline.cluster_reads import ClusterReads, Scope, give_back_memory, scope_of
from bot.pipeline.notices import tell_absent
from bot.pipeline.offers import Offers
from bot.pipeline.recorder import EvidenceLines, Recorder
from bot.pipeline.resolving import OPEN, Resolver
from bot.pipeline.rule_errors import RuleErrors
from bot.pipeline.telling import Teller
from bot.pipeline.told import Told
from bot.ports import Chat, Cluster, Store
from bot.process.telemetry import Telemetry
from bot.rules.loading import RuleSet

MID_PASS_DELIVERIES = 2
"""Deliveries a pass splits after reading the cluster (`_run`): those that came at the same
moment as its own, not a burst that is the next pass's business."""


class DiagnosisPass:
    """Owns the lock that makes passes take turns and when a pass about the whole cluster is
    next owed (`due_at`); what passes keep between them is its parts': the cluster as last
    read (`reads`), what each incident's message states (`told`), the rules failing now
    (`rule_errors`). It must never let two passes run at once, nor act on a node."""

    def __init__(
        self,
        *,
        settings: Settings,
        rules: RuleSet,
        store: Store,
        cluster: Cluster,
        chat: Chat,
        proposals: Proposals,
        timeline: Timeline,
        clock: Clock,
        take_deliveries: Callable[[int], list[Signal]] = lambda _at_most: [],
        later: Callable[[list[Signal]], None] = lambda _signals: None,
        evidence: EvidenceLines | None = None,
        gpu_evidence: Callable[[str], GpuEvidence] | None = None,
        on_diagnosis: Callable[[Incident, Diagnosis], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """`take_deliveries(n)`: up to n stored webhook deliveries split into new signals;
        `later`: signals for the next pass (split meanwhile, about other nodes)."""
        self.settings = settings
        self.rules = rules
        self.store = store
        self.clock = clock
        self.chat = chat
        self.take_deliveries = take_deliveries
        self.later = later
        self.telemetry = telemetry
        self._lock = threading.Lock()
        self.reads = ClusterReads(
            settings=settings, cluster=cluster, store=store, gpu_evidence=gpu_evidence
        )
        self.rule_errors = RuleErrors(telemetry)
        self.teller = Teller(
            settings=settings,
            store=store,
            chat=chat,
            timeline=timeline,
            offers=Offers(settings=settings, rules=rules, store=store, proposals=proposals),
            on_diagnosis=on_diagnosis,
            telemetry=telemetry,
        )
        self.recorder = Recorder(
            settings=settings,
            rules=rules,
            store=store,
            teller=self.teller,
            clock=clock,
            evidence=evidence,
        )
        self.resolver = Resolver(
            settings=settings, store=store, chat=chat, timeline=timeline, clock=clock
        )
        self.due_at: datetime | None = None
        """When a pass about the whole cluster will see something no signal announces: a
        GPU pod Pending since the last pass crosses `pending_after_s` (the scheduler records
        its failure again only every 5 minutes). The leader's follow-up runs it then."""

    @property
    def told(self) -> Told:
        """What each open incident's message states (the teller's), for the follow-up to
        ask which revisions held back by the pause are due."""
        return self.teller.told

    def run(self, batch: Sequence[Signal], nodes: frozenset[str] | None = None) -> list[Incident]:
        """Diagnose the cluster with every alert still firing; open, update or resolve
        incidents; post what is new, and once, the batch's alerts naming a node the cluster
        does not have (`notices.tell_absent`). Returns the incidents opened or reopened. A pass is
        about the batch's nodes when it names only a few (or about `nodes` when given, and
        few enough), else about the whole cluster."""
        asked = scope_of(batch, nodes)
        with self._lock:
            opened = self._run(batch, asked)
            if asked is None:
                give_back_memory()
            return opened

    def _run(self, batch: Sequence[Signal], asked: Scope) -> list[Incident]:
        now = self.clock()
        read = self.reads.read(
            asked,
            now,
            lambda scope: self._follow_up(self.take_deliveries(MID_PASS_DELIVERIES), scope),
            batch,
        )
        facts, scope = read.facts, read.scope
        if scope is None:
            self.due_at = self._next_due(facts, now)
        # Other nodes' facts are as last found (or lack their pods): they count toward the
        # pool rules, and their own diagnoses wait for a pass about them.
        diagnosed = diagnose(
            facts,
            read.signals,
            self.rules,
            self.settings,
            only_nodes=scope,
            earlier=self.reads.matches,
        )
        self.rule_errors.tell(diagnosed.errors)
        filed = self.recorder.record(diagnosed.diagnoses, facts, now)
        self.resolver.resolve_gone(batch, filed.seen, facts.nodes, now, scope)
        # Last, so a pass tried again after a failure does not tell them twice.
        tell_absent(self.chat, read.absent, self.settings.lang)
        if self.telemetry is not None:
            self.telemetry.incidents_open.set(self.store.count_incidents(OPEN))
        return filed.opened

    def _follow_up(self, arrived: list[Signal], scope: Scope) -> list[Signal]:
        """Signals split during a pass that the pass does not cover (a node outside its scope)
        or that need a word of their own (no node, truncated): left for the next pass. The
        others join this pass (returned)."""
        later: list[Signal] = []
        joined: list[Signal] = []
        for s in arrived:
            leave = (
                s.node is None or s.truncated_alerts or (scope is not None and s.node not in scope)
            )
            (later if leave else joined).append(s)
        if later:
            self.later(later)
        return joined

    def _next_due(self, facts: ClusterFacts, now: datetime) -> datetime | None:
        after = self.settings.thresholds.pending_after_s
        waits = [after - p.pending_s for p in facts.pending_pods if p.pending_s <= after]
        return now + timedelta(seconds=min(waits) + 1) if waits else None

    def resolve(self, incident_id: str, why: str, *, summary: bool = True) -> Incident:
        """Over, as a pass ends an incident (`Resolver.resolve`)."""
        return self.resolver.resolve(incident_id, why, summary=summary)

"""The decision wing of one gpubot process, put together: the timeline's writer, fresh facts,
the health gate, the votes, the proposals, the checks, the node actions and the executor,
each built once and handed to the ones that use it.

Why it exists: `serve`, the demo, the drills and the tests must assemble these parts the
same way, and an approval must take the same path whichever of them received it: a vote
recorded, then, where this process may act, the execution (`approve`).

What it must never do: decide or act itself (its parts do), or be built twice in one process
(two executors would not see each other's reservations).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.acting.checking import Checks
from bot.acting.executor import Executor
from bot.acting.performing import NodeActions
from bot.approval.proposing import Proposals
from bot.approval.voting import GroupsOf, Voting
from bot.clock import Clock
from bot.config import Settings
from bot.facts.fresh import FreshFacts
from bot.gate.gating import Evidence, HealthGate
from bot.gate.items import ExternalEvidence
from bot.incidents.timeline import Timeline
from bot.model import Outcome
from bot.ports import Cluster, Store
from bot.texts import say


@dataclass(frozen=True)
class DecisionWing:
    """Owns the one instance of each part of the wing in this process. Never: holds state of
    its own beyond them."""

    settings: Settings
    timeline: Timeline
    facts: FreshFacts
    gate: HealthGate
    voting: Voting
    proposals: Proposals
    executor: Executor

    @classmethod
    def build(
        cls,
        cluster: Cluster,
        store: Store,
        settings: Settings,
        *,
        executor_id: str,
        clock: Clock,
        groups_of: GroupsOf = lambda _user: set(),
        external: Evidence = lambda _node: ExternalEvidence(),
        facts: FreshFacts | None = None,
    ) -> DecisionWing:
        """`facts`: how the wing reads a node afresh, when not the usual way (a benchmark
        timing those reads)."""
        timeline = Timeline(store, clock, settings)
        facts = facts or FreshFacts(cluster, store, settings, clock)
        gate = HealthGate(cluster, settings, clock, external)
        voting = Voting(store, settings, timeline, groups_of=groups_of, clock=clock)
        proposals = Proposals(
            cluster, store, settings, facts=facts, gate=gate, timeline=timeline, clock=clock
        )
        executor = Executor(
            store,
            settings,
            executor_id=executor_id,
            clock=clock,
            voting=voting,
            proposals=proposals,
            checks=Checks(settings, facts, gate, timeline),
            actions=NodeActions(cluster, store, settings, clock, timeline),
            timeline=timeline,
        )
        return cls(settings, timeline, facts, gate, voting, proposals, executor)

    def approve(self, request_id: str, approver: str, *, execute: bool = True) -> Outcome:
        """One person's approval, judged against the policy now; acted on at once when it is
        enough, unless `execute` is False (a replica that does not lead leaves it to the
        leader, whose duties pick up approvals recorded anywhere)."""
        outcome = self.voting.record_approval(request_id, approver)
        if outcome.status != "approved":
            return outcome
        if not execute:
            runs = say(self.settings.lang, "exec.leader_runs_it", message=outcome.message)
            return Outcome(request_id, "approved", runs)
        # Voting.record_approval hands on the request it approved: read once, not again here.
        assert outcome.request is not None
        return self.executor.carry_out(outcome.request, voted_here=True)

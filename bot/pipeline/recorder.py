"""Which incident each diagnosis of a pass belongs to: recorded in the store (new, updated,
reopened, superseded), left to an open incident that already tells it better, or gathered
under its pool's incident.

Why it exists: the rules find problems; the on-call must read one story per problem. A
diagnosis found again is the same incident, one a better rule explains is that rule's, and a
pool-wide failure's node incidents go under the pool's message instead of one channel message
per node.

What it must never do: post to the chat or propose itself (the teller does, for what this
records), or record a diagnosis that an open incident of its subject already tells better.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.clock import Clock
from bot.config import Settings
from bot.model import ClusterFacts, Diagnosis, Incident, NodeFacts
from bot.pipeline.resolving import OPEN
from bot.pipeline.telling import Teller
from bot.ports import Store
from bot.rules.loading import RuleSet

EvidenceLines = Callable[[str], list[str]]
"""node → evidence lines from Prometheus (or one "evidence unavailable: ..." line)."""


@dataclass(frozen=True)
class Filed:
    """What recording one pass's diagnoses came to: the incidents opened or reopened, and
    the ids of every incident whose problem the pass saw (the others are absent)."""

    opened: list[Incident]
    seen: set[str]


class Recorder:
    """Owns nothing between passes (the incidents are the store's, what their messages say is
    the teller's). It must never be called by two passes at once: what it reads as open is
    what it then records over (the pass's lock sees to it)."""

    def __init__(
        self,
        *,
        settings: Settings,
        rules: RuleSet,
        store: Store,
        teller: Teller,
        clock: Clock,
        evidence: EvidenceLines | None = None,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.store = store
        self.teller = teller
        self.clock = clock
        self.evidence = evidence

    def record(self, diagnoses: Sequence[Diagnosis], facts: ClusterFacts, now: datetime) -> Filed:
        """Every diagnosis of a pass into the incident it belongs to, told as the teller
        tells it."""
        open_here = self._open_by_subject()
        self.teller.told.forget({i.id for here in open_here.values() for i in here})
        opened: list[Incident] = []
        recorded: list[tuple[Diagnosis, Incident]] = []
        seen: set[str] = set()
        halted = {
            i.pool: i
            for here in open_here.values()
            for i in here
            if i.node is None and i.pool and i.chat_ref and self._halts(i.rule)
        }
        # Pool diagnoses first: a pool-wide failure's message is the one the messages of its
        # nodes go under (one message in the channel for the pool, not one per node).
        for found in sorted(diagnoses, key=lambda d: d.node is not None):
            if self.evidence is not None and found.node:
                found = found.model_copy(
                    update={"evidence": [*found.evidence, *self.evidence(found.node)]}
                )
            keeper = self._telling_it_better(open_here.get(found.subject, []), found.rule)
            if keeper is not None:
                seen.add(keeper.id)  # the problem is still there; its incident tells it better
                continue
            self.teller.know_what_it_says(open_here.get(found.subject, []), found.rule)
            result = self.store.record_diagnosis(
                self.settings.cluster,
                found,
                now,
                self.settings.thresholds.flap_window_s,
                replaces=sorted(self.rules.replaces(found.rule)),
            )
            seen.add(result.incident.id)
            recorded.append((found, result.incident))
            if result.change == "updated":
                self.teller.release_if_due(result.incident, found, facts, now)
                self.teller.revise_if_stale(result.incident, found, now)
                continue
            opened.append(result.incident)
            under = halted.get(found.pool or "") if found.node else None
            told = self.teller.tell(result, found, facts, now, under)
            if found.node is None and found.pool and told.chat_ref and self._halts(found.rule):
                halted[found.pool] = told
        self._group_under_pools(recorded, facts.nodes)
        return Filed(opened, seen)

    def _open_by_subject(self) -> dict[str, list[Incident]]:
        found: dict[str, list[Incident]] = {}
        for incident in self.store.incidents(states=OPEN):
            if incident.cluster == self.settings.cluster:
                found.setdefault(incident.subject, []).append(incident)
        return found

    def _telling_it_better(self, open_here: Sequence[Incident], rule: str) -> Incident | None:
        """An open incident on the subject that already tells `rule`'s problem (better, or
        from another angle): the diagnosis is that incident's, not a new one."""
        if any(i.rule == rule for i in open_here):
            return None
        better = self.rules.explained_by(rule) | self.rules.same_problem(rule)
        return next((i for i in open_here if i.rule in better), None)

    def _halts(self, rule: str) -> bool:
        spec = self.rules.spec(rule)
        return spec is not None and spec.halts_node_remediation

    def _group_under_pools(
        self, recorded: Sequence[tuple[Diagnosis, Incident]], nodes: Mapping[str, NodeFacts]
    ) -> None:
        """A pool-wide incident holds the node incidents of its pool: the on-call reads one
        story, and the timeline of each node says which pool incident it belongs to."""
        pools = {d.pool: i for d, i in recorded if d.node is None and d.pool}
        for found, incident in recorded:
            node = nodes.get(found.node or "")
            if node is None or not node.pool or node.pool not in pools:
                continue
            parent = pools[node.pool]
            if incident.parent == parent.id:
                continue
            self.store.set_parent(incident.id, parent.id)
            self.teller.timeline.part_of(incident.id, parent, node.pool)

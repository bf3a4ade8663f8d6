"""How a diagnosis pass puts a diagnosis' proposals before people: proposed now, or held for
`thresholds.settle_s` when its rule says a better diagnosis is likely to follow, then
proposed once the window passes with none.

Why it exists: the watches see GPUs go before the alert that says why arrives; a cordon
proposed on the first sight would be approved, or worse, before the diagnosis that names the
cause (and proposes what that cause needs) takes the incident over. Holding and releasing
are the pass's only way to propose, kept in one place.

What it must never do: act on a node (the executor acts, after approval), release what was
proposed meanwhile (another replica released it first), or hold a superseding diagnosis (the
better diagnosis is the one that was waited for).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.approval.proposing import Proposals
from bot.config import Settings
from bot.model import ActionRequest, ClusterFacts, Diagnosis, Incident, Recorded
from bot.ports import Store
from bot.rules.loading import RuleSet


class Offers:
    """Owns nothing of its own: the hold is the store's (`Incident.held_until`), the
    requests are made by `Proposals`. It decides, per diagnosis recorded, whether its proposals
    are made now or held, and it must never propose anything but the diagnosis' own
    proposals."""

    def __init__(
        self, *, settings: Settings, rules: RuleSet, store: Store, proposals: Proposals
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.store = store
        self.proposals = proposals

    def first(
        self, recorded: Recorded, found: Diagnosis, facts: ClusterFacts, now: datetime
    ) -> tuple[list[ActionRequest], bool]:
        """A new, reopened or superseded incident's requests, and whether they are held
        (then none are made: they come with `released`)."""
        spec = self.rules.spec(found.rule)
        settle_s = self.settings.thresholds.settle_s
        held = (
            spec is not None and spec.settles and settle_s > 0 and recorded.change != "superseded"
        )
        if held:
            self.store.hold(recorded.incident.id, now + timedelta(seconds=settle_s))
            return [], True
        return self._propose(recorded.incident.id, found, facts), False

    def released(
        self, incident: Incident, found: Diagnosis, facts: ClusterFacts, now: datetime
    ) -> list[ActionRequest]:
        """Held proposals whose settle window passed with no better diagnosis: proposed now.
        None while the window runs, or when they were proposed meanwhile (another
        replica)."""
        if incident.held_until is None or now < incident.held_until:
            return []
        self.store.hold(incident.id, None)
        if any(self.store.execution(r.id) is None for r in self.store.requests(incident.id)):
            return []
        return self._propose(incident.id, found, facts)

    def _propose(
        self, incident_id: str, found: Diagnosis, facts: ClusterFacts
    ) -> list[ActionRequest]:
        return self.proposals.propose(incident_id, found, facts)

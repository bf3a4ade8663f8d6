"""What a diagnosis pass tells about the incidents it records: the diagnosis in the timeline,
its proposals (or why they are held), the incident's message posted once and revised in place
for the rest of its life.

Why it exists: the on-call reads the message, not the timeline. A new incident, one that came
back, one a better diagnosis took over, held proposals released, a blocker of the drain gone
or new: each is a different thing to say in the same thread, and what the message already
says (`Told`) decides whether anything needs saying at all.

What it must never do: decide which incident a diagnosis belongs to (the store and the
recorder do), post a second message for an incident (it revises the first), or act on a node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from bot.config import Settings
from bot.incidents.timeline import Timeline
from bot.model import (
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    Incident,
    IncidentState,
    Recorded,
)
from bot.names import GPUBOT
from bot.pipeline.offers import Offers
from bot.pipeline.told import Told
from bot.ports import Chat, Store
from bot.process.telemetry import Telemetry
from bot.texts import say


class Teller:
    """Owns `told`: what each open incident's message states as this process told it, so a
    change is revised in place and the same facts found again are not. It must never tell an
    incident's message anything the chat was not given to show (every revision goes through
    the chat) nor remember incidents that are no longer open (`told.forget`)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        chat: Chat,
        timeline: Timeline,
        offers: Offers,
        on_diagnosis: Callable[[Incident, Diagnosis], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.chat = chat
        self.timeline = timeline
        self.offers = offers
        self.on_diagnosis = on_diagnosis or (lambda _incident, _diagnosis: None)
        self.telemetry = telemetry
        self.told = Told(settings.thresholds.revise_every_s)
        """What each open incident's message states, so a change is revised in place."""

    def tell(
        self,
        result: Recorded,
        found: Diagnosis,
        facts: ClusterFacts,
        now: datetime,
        under: Incident | None = None,
    ) -> Incident:
        """A new, reopened or superseded incident: its diagnosis in the timeline, its proposals
        (or held, when a better diagnosis is likely to follow), its message posted or
        revised in place (the same thread for its whole life). `under`: the pool-wide
        incident whose thread a new node incident's message goes in."""
        incident = result.incident
        self.timeline.diagnosed(incident.id, found, result.change, now)
        requests, held = self.offers.first(result, found, facts, now)
        if not requests:
            self._settle_state(incident.id, now)
        incident = self.store.incident(incident.id)
        if result.change == "new":
            ref = self.chat.post_diagnosis(incident, found, requests, under)
            if ref:
                self.store.set_chat_ref(incident.id, ref)
                incident = incident.model_copy(update={"chat_ref": ref})
        else:
            for request in self._withdrawn_now(incident.id, now):
                self.chat.withdraw(
                    incident,
                    request,
                    say(self.settings.lang, "pass.superseded_by", rule=found.rule),
                )
            if result.change == "superseded":
                note = say(
                    self.settings.lang,
                    "pass.superseded",
                    old=result.replaced,
                    rule=found.rule,
                    title=found.title,
                )
            else:
                note = say(
                    self.settings.lang, "pass.came_back", n=incident.reopened, title=found.title
                )
            self.chat.revise_diagnosis(incident, found, requests, note)
        self.told.said(incident.id, found, now)
        if held and incident.held_until is not None:
            self.chat.post_thread(
                incident,
                say(
                    self.settings.lang,
                    "pass.held",
                    until=f"{incident.held_until:%H:%M:%S}",
                    settle_s=self.settings.thresholds.settle_s,
                ),
            )
        if self.telemetry is not None:
            self.telemetry.diagnoses_posted.inc()
        self.on_diagnosis(incident, found)
        return incident

    def _settle_state(self, incident_id: str, now: datetime) -> None:
        """No proposal (now): the incident is diagnosed, not waiting for anyone."""
        incident = self.store.incident(incident_id)
        if incident.state is IncidentState.OPEN:
            self.store.transition(incident_id, IncidentState.DIAGNOSED, GPUBOT, now)

    def _withdrawn_now(self, incident_id: str, now: datetime) -> list[ActionRequest]:
        withdrawn = []
        for request in self.store.requests(incident_id):
            execution = self.store.execution(request.id)
            if (
                execution is not None
                and execution.outcome == "withdrawn"
                and execution.finished_at == now
            ):
                withdrawn.append(request)
        return withdrawn

    def release_if_due(
        self, incident: Incident, found: Diagnosis, facts: ClusterFacts, now: datetime
    ) -> None:
        """Held proposals released (`Offers.released`): the message revised with their
        buttons, saying the window passed with no better diagnosis."""
        requests = self.offers.released(incident, found, facts, now)
        if requests:
            self.chat.revise_diagnosis(
                self.store.incident(incident.id),
                found,
                requests,
                say(
                    self.settings.lang, "pass.released", settle_s=self.settings.thresholds.settle_s
                ),
            )
            self.told.said(incident.id, found, now)

    def know_what_it_says(self, open_here: Sequence[Incident], rule: str) -> None:
        """An incident this process has not told yet (a restart, another replica posted it):
        its message states the stored diagnosis, read before this pass overwrites it."""
        same = next((i for i in open_here if i.rule == rule), None)
        if same is None or not same.chat_ref or self.told.knows(same.id):
            return
        stored = self.store.diagnosis(same.id)
        if stored is not None:
            self.told.said(same.id, stored, None)

    def revise_if_stale(self, incident: Incident, found: Diagnosis, now: datetime) -> None:
        """The message no longer states what blocks the drain (a pod gone, a budget freed, a
        new blocker): revised in place, the change said in its thread and timeline, with
        the buttons of the requests still undecided."""
        if not incident.chat_ref:
            return
        revision = self.told.revision(incident.id, found, now, self.settings.lang)
        if revision is None:
            return
        self.timeline.revised(
            incident.id, revision.note, list(revision.gone), list(revision.new), now
        )
        undecided = [
            r
            for r in self.store.requests(incident.id)
            if self.store.execution(r.id) is None and now < r.expires_at
        ]
        self.chat.revise_diagnosis(incident, found, undecided, revision.note)
        self.told.said(incident.id, found, now)

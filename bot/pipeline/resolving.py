"""How incidents end when their problem is gone: absent from a pass, over once the symptom has
stayed away long enough, withdrawn with their undecided requests, summed up in their thread.

Why it exists: a problem that comes and goes must be one incident, not a resolve and a reopen
each pass, and an incident whose node gpubot took out of service must end with the health
gate and an uncordon, not with silence. A pass and `Service.resolve` end an incident the same
way, through `Resolver.resolve`.

What it must never do: resolve an incident whose approved action is running (the store
refuses; the action's end decides), one a person must look at (FAILED), or one that a pass
did not look at (outside its scope).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.config import Settings
from bot.errors import StateChanged
from bot.incidents.lifecycle import withdrawal_text
from bot.incidents.summary import summarize, summary_lines
from bot.incidents.timeline import Timeline
from bot.model import Action, Incident, IncidentState, NodeFacts, Signal
from bot.names import GPUBOT
from bot.ports import Chat, Store
from bot.texts import say

_SELF_RESOLVING = (
    IncidentState.OPEN,
    IncidentState.DIAGNOSED,
    IncidentState.AWAITING_APPROVAL,
    IncidentState.APPROVED,
    IncidentState.DENIED,
    IncidentState.EXPIRED,
    IncidentState.SUCCEEDED,
)
"""Never EXECUTING (something is acting) nor FAILED (a person must look). APPROVED is: the
approval has not acted yet, and a problem that is gone withdraws it (the store refuses the
resolve while its execution runs)."""

OPEN = tuple(state for state in IncidentState if state is not IncidentState.RESOLVED)


class Resolver:
    """Owns nothing between passes: an incident's absence is the store's (`absent_since`).
    It decides which incidents a pass's findings end, and it must never end one for a pass
    that did not look at its node."""

    def __init__(
        self, *, settings: Settings, store: Store, chat: Chat, timeline: Timeline, clock: Clock
    ) -> None:
        self.settings = settings
        self.store = store
        self.chat = chat
        self.timeline = timeline
        self.clock = clock

    def resolve_gone(
        self,
        batch: Sequence[Signal],
        seen: set[str],
        nodes: Mapping[str, NodeFacts],
        now: datetime,
        scope: frozenset[str] | None = None,
    ) -> None:
        """Incidents whose problem was not seen in this pass are absent from now; once their
        symptom has stayed away for `thresholds.resolve_after_s` they are over (a problem
        that comes and goes is one incident, not a resolve and a reopen each pass) — unless
        gpubot acted on the node and it is still out of service: then the loop ends with the
        health gate and an uncordon, not with silence."""
        resolved_on = {s.node for s in batch if s.status == "resolved"}
        after = timedelta(seconds=self.settings.thresholds.resolve_after_s)
        for incident in self.store.incidents(states=_SELF_RESOLVING):
            if incident.cluster != self.settings.cluster:
                continue
            if scope is not None and incident.node not in scope:
                continue  # not looked at in this pass
            if incident.id in seen:
                if incident.absent_since is not None:
                    self.store.mark_present(incident.id)
                if incident.node in resolved_on:
                    self.timeline.still_matches(incident.id, incident.rule, now)
                continue
            node = nodes.get(incident.node or "")
            absent = self.store.mark_absent(incident.id, now)
            if node is not None and node.unschedulable and self._took_out(incident.id):
                continue  # repaired, still out: the leader's follow-up offers it back
            since = absent.absent_since or now
            if now - since < after:
                continue
            try:
                self.resolve(
                    incident.id,
                    say(
                        self.settings.lang,
                        "pass.gone",
                        rule=incident.rule,
                        since=f"{since:%H:%M:%S}",
                    ),
                )
            except StateChanged:
                continue  # its approval started acting meanwhile: the action's end decides

    def _took_out(self, incident_id: str) -> bool:
        """Did gpubot take the incident's node out of service (a cordon or drain that acted)
        and not yet put it back? Such an incident ends with the gate and an uncordon."""
        out = False
        for request in sorted(self.store.requests(incident_id), key=lambda r: r.created_at):
            execution = self.store.execution(request.id)
            if execution is None or execution.outcome != "succeeded":
                continue
            out = request.action is not Action.UNCORDON
        return out

    def resolve(self, incident_id: str, why: str, *, summary: bool = True) -> Incident:
        """Over: its requests not yet decided are withdrawn with it (their buttons replaced
        by why), so no later vote can act on a problem that is gone."""
        done = self.store.transition(incident_id, IncidentState.RESOLVED, GPUBOT, self.clock(), why)
        for request in self.store.requests(incident_id):
            execution = self.store.execution(request.id)
            if (
                execution is not None
                and execution.outcome == "withdrawn"
                and execution.finished_at == done.resolved_at
            ):
                why = withdrawal_text(execution.detail, self.settings.lang)
                self.chat.withdraw(done, request, why)
        if not summary:
            self.chat.post_thread(done, say(self.settings.lang, "pass.resolved", why=why))
            return done
        told = summary_lines(summarize(done, self.store.timeline(incident_id)), self.settings.lang)
        self.chat.post_thread(done, "\n".join(f"{label}: {text}" for label, text in told))
        return done

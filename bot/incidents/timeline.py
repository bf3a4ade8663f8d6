"""The one writer of what gpubot adds to an incident's timeline beside the store's own state
moves: a diagnosis found, a message revised, a request proposed, a vote judged, a denial, a
health-gate verdict, an action's start, its progress and its result, a snooze, and the state
moves they bring.

Why it exists: the timeline is the incident's story, read back by the resolve summary, the
digest, `gpubot timeline` and the thread; its entries must say the same things in the same
words whoever wrote them (the approval room, the acting room, a resumed execution on another
replica). So the sentences of these entries are composed here, once, and the rooms that
decide and act hand over what happened.

What it must never do: decide anything (it records what the policy, the gate and the executor
decided), or fail a decision because the incident moved meanwhile (a move the incident is
already past is a no-op).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import UTC, datetime

from bot.clock import Clock
from bot.config import Settings
from bot.errors import StateChanged
from bot.gate.items import GateResult, failing_text
from bot.incidents.lifecycle import IllegalTransition
from bot.incidents.progress import Progress, ProgressReport
from bot.model import (
    Action,
    ActionRequest,
    Diagnosis,
    ExecutionOutcome,
    Incident,
    IncidentState,
    Judgement,
    RecordChange,
    TimelineEntry,
    TimelineKind,
)
from bot.names import GPUBOT
from bot.ports import Store
from bot.texts import say

Notify = Callable[[TimelineEntry], None]
"""Told of every entry written: the service sends an action's start and progress to the
incident's thread as they happen."""
OnRequest = Callable[[ActionRequest, TimelineKind, str], None]
"""Told an action's start and progress when no incident holds its request: the service says
them where the request was asked (under its proposal)."""


def command_for(request: ActionRequest) -> str:
    """The kubectl line a person would type for the same action: how the timeline, the chat
    and a dry run name it. The node was read from the cluster, so its name is a valid one;
    quoted all the same, as every value in a command line is."""
    node = shlex.quote(request.node)
    if request.action is Action.DRAIN:
        flags = " --ignore-daemonsets"
        if request.delete_emptydir_data:
            flags += " --delete-emptydir-data"
        if request.force:
            flags += " --force --disable-eviction"
        return f"kubectl drain {node}{flags}"
    return f"kubectl {request.action.value} {node}"


class Timeline:
    """Owns nothing but the words: every entry goes to the store's timeline and to `notify`.
    Never: writes an entry for a request no incident holds (an ad-hoc request's story is its
    answer, told where it was asked)."""

    def __init__(
        self, store: Store, clock: Clock, settings: Settings, notify: Notify = lambda _entry: None
    ) -> None:
        self.store = store
        self.clock = clock
        self.settings = settings
        self.notify = notify
        self.on_request: OnRequest = lambda _request, _kind, _text: None

    def _say(self, key: str, **values: object) -> str:
        """In the settings' language as it is now (a running replica's may be changed)."""
        return say(self.settings.lang, key, **values)

    def note(
        self,
        incident: str | None,
        kind: TimelineKind,
        text: str,
        actor: str = GPUBOT,
        *,
        at: datetime | None = None,
        **data: object,
    ) -> None:
        """`at`: when it happened, when not now (a pass stamps what it found with its own
        time)."""
        self._write(incident, kind, text, actor, at, data)

    def _write(
        self,
        incident: str | None,
        kind: TimelineKind,
        text: str,
        actor: str,
        at: datetime | None,
        data: dict[str, object],
    ) -> None:
        if incident is None:
            return
        when = at or self.clock()
        entry = TimelineEntry(
            incident=incident, at=when, actor=actor, kind=kind, text=text, data=data
        )
        self.store.append(entry)
        self.notify(entry)

    def move(self, incident: str | None, target: IncidentState, actor: str, text: str) -> None:
        """Moves the incident when the move is legal from where it is: several requests of
        one incident (cordon, then drain) share one state."""
        if incident is None:
            return
        for _attempt in range(3):
            # The store judges the move where it is now, in the move's own transaction: one
            # round trip, not a read and then the move.
            try:
                self.store.transition(incident, target, actor, self.clock(), text)
                return
            except IllegalTransition:
                return  # there already, or past it
            except StateChanged:
                continue  # a concurrent click moved it first: try again from there

    # ---- what a diagnosis pass found ------------------------------------------------------

    def diagnosed(
        self, incident: str, found: Diagnosis, change: RecordChange, at: datetime
    ) -> None:
        """A diagnosis that opened, reopened or took over the incident."""
        self.note(
            incident,
            "diagnosis",
            f"{found.title}: {found.summary}",
            at=at,
            rule=found.rule,
            stage=found.stage.value,
            evidence=found.evidence,
            change=change,
        )

    def revised(
        self, incident: str, note: str, gone: list[str], new: list[str], at: datetime
    ) -> None:
        """The message revised in place: what no longer holds the drain, what does now."""
        self.note(incident, "note", note, at=at, updated={"gone": gone, "new": new})

    def still_matches(self, incident: str, rule: str, at: datetime) -> None:
        """An alert resolved while its rule still matches: the incident stays."""
        self.note(incident, "note", self._say("pass.still_matches", rule=rule), at=at)

    def part_of(self, incident: str, parent: Incident, pool: str) -> None:
        """A node incident gathered under its pool's incident."""
        text = self._say("pass.part_of", id=parent.id, rule=parent.rule, pool=pool)
        self.note(incident, "note", text, parent=parent.id)

    def snoozed(self, incident: str, who: str, until: datetime, at: datetime) -> None:
        """Someone asked for quiet in the incident's thread until `until`."""
        text = self._say("slack.snoozed_note", who=who, until=f"{until.astimezone(UTC):%H:%M}")
        self.note(incident, "note", text, who, at=at, snoozed_until=until.isoformat())

    # ---- proposals and the gate -----------------------------------------------------------

    def proposed(self, request: ActionRequest) -> None:
        """A request made: the command it would run, a drain's flags and why, its risk."""
        text = self._say("exec.proposed", command=command_for(request))
        if request.action is Action.DRAIN:
            # What `command_for` shows and the drain is given are the same request fields.
            emptydir = request.delete_emptydir_data
            text += self._say("exec.drain_flags_emptydir" if emptydir else "exec.drain_flags")
        if request.risk:
            text += self._say("exec.risk", risk=request.risk)
        self.note(
            request.incident,
            "proposal",
            text,
            request.requested_by,
            request=request.id,
            action=request.action.value,
            node=request.node,
            expires_at=request.expires_at.isoformat(),
        )

    def gate(self, incident: str | None, result: GateResult) -> None:
        """A health-gate verdict, with every item kept so it can be said again in any
        language."""
        verdict = "exec.gate.passed" if result.passed else "exec.gate.failed"
        failing = failing_text(result.failing, self.settings.lang)
        self.note(
            incident,
            "gate",
            self._say(verdict, node=result.node)
            + (self._say("exec.gate.failing", failing=failing) if failing else ""),
            passed=result.passed,
            items=[i.as_data() for i in result.items],
        )

    def gate_failing(self, incident: str) -> list[str] | None:
        """The names of the failing items of the incident's last gate entry (None: no gate
        yet): the follow-up tells a failing gate again only when what fails changes."""
        entries = self.store.timeline(incident)
        last = next((e for e in reversed(entries) if e.kind == "gate"), None)
        if last is None:
            return None
        items = last.data.get("items")
        if not isinstance(items, list):
            return None
        return [
            str(i.get("name"))
            for i in items
            if isinstance(i, dict) and i.get("outcome") != "pass" and i.get("required", True)
        ]

    # ---- votes ----------------------------------------------------------------------------

    def vote_refused(self, request: ActionRequest, who: str, why: str) -> None:
        self.note(
            request.incident,
            "note",
            self._say("decide.refused", who=who, why=why),
            who,
            request=request.id,
        )

    def approval(self, request: ActionRequest, who: str, judged: Judgement) -> None:
        self.note(
            request.incident,
            "approval",
            self._say("decide.approved", who=who, command=command_for(request)),
            who,
            request=request.id,
            outcome=judged,
        )

    def denial_refused(self, request: ActionRequest, who: str, why: str) -> None:
        self.note(
            request.incident,
            "note",
            self._say("decide.denial_refused", who=who, why=why),
            who,
            request=request.id,
        )

    def denial(self, request: ActionRequest, who: str, reason: str) -> None:
        self.note(
            request.incident,
            "denial",
            self._say("decide.denied", who=who, command=command_for(request))
            + (self._say("decide.because", reason=reason) if reason else ""),
            who,
            request=request.id,
        )

    # ---- actions --------------------------------------------------------------------------

    def started(self, request: ActionRequest, approvers: list[str], pods: int | None) -> None:
        """An action under way, its incident executing. `pods`: those a drain has to move,
        for a drain taken over to tell the whole of it (a cordon reads none)."""
        self.move(request.incident, IncidentState.EXECUTING, GPUBOT, self._say("exec.executing"))
        running = self._say("exec.running", command=command_for(request), who=", ".join(approvers))
        self._about(request, "action-start", running, pods=pods)

    def drain_progress(self, request: ActionRequest) -> Callable[[Progress], None]:
        """What a drain tells as it goes (`bot.incidents.progress`): each new blocker once,
        then every quarter of the way with what still blocks. A request no incident holds
        (`/gpubot drain NODE`) tells it where it was asked (`on_request`), as its result."""

        def tell(text: str, data: dict[str, object]) -> None:
            self._about(request, "action-progress", text, **data)

        return ProgressReport(tell, lambda: self.settings.lang)

    def _about(self, request: ActionRequest, kind: TimelineKind, text: str, **data: object) -> None:
        """An entry about an action: in its incident's timeline, or for a request no incident
        holds, told where it was asked (there is no timeline to keep it)."""
        if request.incident is None:
            self.on_request(request, kind, text)
            return
        self._write(request.incident, kind, text, GPUBOT, None, {"request": request.id, **data})

    def finished(self, request: ActionRequest, outcome: ExecutionOutcome, message: str) -> None:
        self.note(request.incident, "action-result", message, request=request.id, outcome=outcome)

"""Decisions in, answers out: a click, a slash command or `gpubot approve` reaches the executor
here, and what came of it goes to the incident's thread (or, for a request no incident holds,
where it was asked).

Why it exists: every replica takes clicks, but only the leader acts; and what a person did
belongs in the incident's story, while a refused or repeated click is that person's business
(the chat answers it privately).

What it must never do: decide who may approve (the policy does, in `bot.approval`), or act
on a follower.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.acting.wing import DecisionWing
from bot.errors import GpubotError
from bot.model import ActionRequest, Outcome, RequestStatus, TimelineEntry, TimelineKind
from bot.ports import Chat, Store
from bot.process.telemetry import Telemetry

FINAL: frozenset[RequestStatus] = frozenset(
    {"succeeded", "dry-run", "refused", "failed", "denied", "changed"}
)
"""What an action came to (the rest are steps on the way: a vote recorded, another needed)."""

PRIVATE: frozenset[RequestStatus] = frozenset({"not-allowed", "duplicate", "withdrawn"})
"""Answers for the clicker alone: nothing changed for anyone else."""


class DecisionRelay:
    """Owns nothing but the path: votes to the decision wing (acting only on the leader),
    outcomes and an action's progress to the chat."""

    def __init__(
        self,
        *,
        store: Store,
        chat: Chat,
        wing: DecisionWing,
        is_leader: Callable[[], bool],
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.chat = chat
        self.wing = wing
        self.is_leader = is_leader
        self.telemetry = telemetry

    def approve(self, request_id: str, approver: str) -> Outcome:
        """A click or a command: recorded on any replica; executed here only on the leader
        (the leader's duties pick up what other replicas recorded)."""
        outcome = self.wing.approve(request_id, approver, execute=self.is_leader())
        self.tell(request_id, outcome)
        return outcome

    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome:
        outcome = self.wing.voting.record_denial(request_id, who, reason)
        self.tell(request_id, outcome)
        return outcome

    def on_timeline(self, entry: TimelineEntry) -> None:
        """The timeline's notify: an action's start and progress ("evicted 37/110", "blocked
        ... by PDB train-job-pdb") go to the incident's thread as they happen; its result is
        told once it returns (`tell`)."""
        if entry.kind not in ("action-start", "action-progress"):
            return
        try:
            incident = self.store.incident(entry.incident)
        except GpubotError:
            return
        self.chat.post_thread(incident, entry.text)

    def on_request(self, request: ActionRequest, kind: TimelineKind, text: str) -> None:
        """The timeline's `on_request`: an action no incident holds (`/gpubot drain NODE`) says
        its start and progress where it was asked, under its proposal, as its result does:
        a drain blocked for a minute is never silent."""
        if kind not in ("action-start", "action-progress"):
            return
        try:
            self.chat.post_result(request, text)
        except GpubotError:
            return

    def tell(self, request_id: str, outcome: Outcome) -> None:
        """Into the incident's thread go decisions and results; a request no incident holds
        has them told where it was asked (`Chat.post_result`)."""
        if outcome.status in PRIVATE:
            return
        try:
            request = self.store.request(request_id)
        except GpubotError:
            return
        if self.telemetry is not None and outcome.status in FINAL:
            self.telemetry.actions.labels(action=request.action.value, outcome=outcome.status).inc()
        incident = self.store.incident(request.incident) if request.incident else None
        if outcome.status == "changed" and outcome.new_request is not None:
            # Also when the leader ran an approval recorded elsewhere: the new request needs
            # its buttons, not only a line that names it.
            self.chat.ask_again(incident, request, outcome.new_request, outcome.message)
        elif incident is not None:
            self.chat.post_thread(incident, outcome.message)
        else:
            self.chat.post_result(request, outcome.message)

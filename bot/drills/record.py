"""What the on-call saw during a drill: every chat call the serving code made, with its time.

Why it exists: a drill is judged on what a person reads over its whole run, in order — the
first diagnosis, its revisions, the buttons offered, the thread lines, the notices — not on
one pass's return value. `RecordingChat` is a `Chat` like Slack's or the console's: the
serving code cannot tell it apart, and it forwards every call to the chat a person watches.

What it must never do: change, delay or drop a call (the drill would judge a bot that does
not exist), or keep more than the calls themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from bot.model import Action, ActionRequest, Diagnosis, Incident, IncidentState
from bot.ports import Chat

SeenKind = Literal[
    "diagnosis", "revision", "thread", "asked-again", "withdrawn", "notice", "outcome"
]


@dataclass(frozen=True)
class Seen:
    """One thing shown in the chat."""

    at: datetime
    kind: SeenKind
    incident: str | None
    node: str | None
    rule: str | None = None
    offered: tuple[Action, ...] = ()
    """The actions whose buttons this message carries."""
    text: str = ""
    resolved: bool = False
    """A thread line posted as its incident resolved (the resolve summary)."""
    under: str | None = None
    """A diagnosis posted in the thread of this (pool-wide) incident, not in the channel."""


def _diagnosis_text(diagnosis: Diagnosis, requests: Sequence[ActionRequest]) -> str:
    blockers = [f"{b.namespace}/{b.pod}: {b.detail}" for b in diagnosis.blockers]
    risks = [r.risk for r in requests if r.risk]
    return "\n".join([diagnosis.title, diagnosis.summary, *diagnosis.evidence, *blockers, *risks])


@dataclass
class RecordingChat:
    """A `Chat` that remembers what it was asked to show, then shows it through `inner`."""

    inner: Chat
    clock: Callable[[], datetime]
    seen: list[Seen] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _add(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def shown(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        self._add(
            Seen(
                self.clock(),
                "diagnosis",
                incident.id,
                diagnosis.node,
                diagnosis.rule,
                tuple(r.action for r in requests),
                _diagnosis_text(diagnosis, requests),
                under=under.id if under is not None else None,
            )
        )
        return self.inner.post_diagnosis(incident, diagnosis, requests, under)

    def post_thread(self, incident: Incident, text: str) -> None:
        resolved = incident.state is IncidentState.RESOLVED
        self._add(
            Seen(self.clock(), "thread", incident.id, incident.node, text=text, resolved=resolved)
        )
        self.inner.post_thread(incident, text)

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        self._add(
            Seen(
                self.clock(),
                "asked-again",
                incident.id if incident else None,
                new.node,
                incident.rule if incident else None,
                (new.action,),
                why,
            )
        )
        self.inner.ask_again(incident, old, new, why)

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        self._add(
            Seen(
                self.clock(),
                "revision",
                incident.id,
                diagnosis.node,
                diagnosis.rule,
                tuple(r.action for r in requests),
                note + "\n" + _diagnosis_text(diagnosis, requests),
            )
        )
        self.inner.revise_diagnosis(incident, diagnosis, requests, note)

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self._add(
            Seen(self.clock(), "withdrawn", incident.id, request.node, incident.rule, text=why)
        )
        self.inner.withdraw(incident, request, why)

    def post_notice(self, text: str, monospace: bool = False) -> None:
        self._add(Seen(self.clock(), "notice", None, None, text=text))
        self.inner.post_notice(text, monospace)

    def post_result(self, request: ActionRequest, text: str) -> None:
        self._add(Seen(self.clock(), "outcome", None, request.node, text=text))
        self.inner.post_result(request, text)

"""What an incident's message states that goes stale — each pod in the drain's way and what
holds it (a PodDisruptionBudget with its disruptionsAllowed, emptyDir data, a finalizer) — and
when the message was last revised; the pass revises the message in place when that changes.

Why it exists: the on-call reads the message, not the timeline. A pod evicted or deleted, a
budget freed, a new pod that blocks: a message still naming what is gone, or missing what
now blocks, sends them to the wrong place. Told remembers, per incident, what its message
says, so a pass can tell a real change from the same facts found again, and revise at most
once per `thresholds.revise_every_s` (a drain evicting a hundred pods must not edit the
message a hundred times; the next pass after the pause says where things stand). `due` tells
the leader's follow-up when that pass is owed, so a change seen during the pause does not
wait for a signal that may never come.

What it must never do: revise a message over what does not change what a person would do
(a terminating pod's age, a healthy count), or decide anything about the incident.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.model import Blocker, Diagnosis, Lang
from bot.texts import say


def _key(blocker: Blocker) -> tuple[str, str, str]:
    # Who blocks and how, not the detail: a terminating pod's age or a budget's healthy count
    # moves every pass without changing what the on-call must do.
    return (blocker.kind, blocker.namespace, blocker.pod)


def _line(blocker: Blocker) -> str:
    return f"{blocker.kind} {blocker.namespace}/{blocker.pod} ({blocker.detail})"


@dataclass(frozen=True)
class Revision:
    """What changed in what a message states, and the line that says so (in the timeline and
    the incident's thread)."""

    gone: tuple[str, ...]
    new: tuple[str, ...]
    note: str


def revision_note(gone: tuple[str, ...], new: tuple[str, ...], lang: Lang) -> str:
    join = say(lang, "list.semicolon").join
    parts = []
    if gone:
        parts.append(say(lang, "told.gone", items=join(gone)))
    if new:
        parts.append(say(lang, "told.new", items=join(new)))
    return say(lang, "told.updated") + join(parts)


class Told:
    """Owns, per open incident this process has told, the blockers its message states and
    when it was last posted or revised. Another replica's revisions are not seen here: after
    a restart or a handover the stored diagnosis is the starting point (`knows`, `said`)."""

    def __init__(self, every_s: float) -> None:
        self.every = timedelta(seconds=every_s)
        self._said: dict[str, tuple[dict[tuple[str, str, str], Blocker], datetime | None]] = {}
        self._waiting: dict[str, tuple[str | None, datetime]] = {}
        """Incidents with a change held back by the pause: (node, when it may be revised)."""
        self._lock = threading.Lock()

    def knows(self, incident_id: str) -> bool:
        with self._lock:
            return incident_id in self._said

    def said(self, incident_id: str, diagnosis: Diagnosis, at: datetime | None) -> None:
        """The message now states `diagnosis` (posted or revised at `at`; None: as stored,
        not revised by this process)."""
        with self._lock:
            self._said[incident_id] = ({_key(b): b for b in diagnosis.blockers}, at)
            self._waiting.pop(incident_id, None)

    def forget(self, keep: set[str]) -> None:
        """Only incidents still open are remembered."""
        with self._lock:
            self._said = {k: v for k, v in self._said.items() if k in keep}
            self._waiting = {k: v for k, v in self._waiting.items() if k in keep}

    def due(self, now: datetime) -> set[str | None]:
        """The nodes (None: a pool's or the cluster's incident) whose message has a change
        held back by the pause that may be revised now: a pass about them is owed. Each is
        handed out once; a pass that still finds the change too recent holds it again."""
        with self._lock:
            ready = {k: node for k, (node, at) in self._waiting.items() if at <= now}
            for incident_id in ready:
                del self._waiting[incident_id]
        return set(ready.values())

    def revision(
        self, incident_id: str, diagnosis: Diagnosis, now: datetime, lang: Lang
    ) -> Revision | None:
        """What to say if the message no longer states `diagnosis`' blockers and it may be
        revised now; None when nothing changed, it was revised too recently (the change waits
        for a later pass), or the message is unknown here."""
        with self._lock:
            said = self._said.get(incident_id)
        if said is None:
            return None
        stated, at = said
        now_blocking = {_key(b): b for b in diagnosis.blockers}
        if now_blocking.keys() == stated.keys():
            with self._lock:
                self._waiting.pop(incident_id, None)
            return None
        if at is not None and now - at < self.every:
            with self._lock:
                self._waiting[incident_id] = (diagnosis.node, at + self.every)
            return None
        gone = tuple(_line(b) for k, b in stated.items() if k not in now_blocking)
        new = tuple(_line(b) for k, b in now_blocking.items() if k not in stated)
        return Revision(gone, new, revision_note(gone, new, lang))

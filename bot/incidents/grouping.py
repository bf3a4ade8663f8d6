"""Which incident a diagnosis belongs to: the one of its rule still open (updated), one a
better diagnosis takes over (superseded), one that resolved a moment ago and fired again
(reopened), or none yet (new).

Why a module of its own: grouping is the incident lifecycle's first move, and the choice
between those four is policy (an executing incident is never taken over, a reopen only counts
within the flap window, the latest candidate wins). Kept beside the state machine and away
from the database, the policy is read and tested as a few lines of Python; the store reads
the subject's incidents, asks here, and writes what was decided in the same transaction,
under the same locks.

What it must never do: read or write anything (it is given the incidents and answers), or
decide a move the lifecycle does not allow (`check` raises before anything is written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.incidents.lifecycle import check, supersession
from bot.model import Diagnosis, Incident, IncidentState, RecordChange


@dataclass(frozen=True)
class Grouping:
    """Where a diagnosis goes, and the move the timeline records: the store's orders, so that
    the store itself chooses nothing (it only words the timeline line, as it always has)."""

    change: RecordChange
    incident: Incident | None = None
    """The incident the diagnosis goes to; None for a new one."""
    data: Mapping[str, object] = field(default_factory=dict)
    """The timeline entry's data for the move; an update writes none (the same story seen
    again)."""
    withdrawal: str | None = None
    """Why the incident's undecided requests will never act: a better diagnosis took over and
    will make its own proposals."""

    @property
    def replaced(self) -> str | None:
        """The rule a supersession took the incident over from."""
        return self.incident.rule if self.change == "superseded" and self.incident else None


def reopen_since(now: datetime, reopen_window_s: int) -> datetime:
    """The earliest resolve that firing again at `now` reopens: a resolved incident the store
    does not read from before this can never be chosen."""
    return now - timedelta(seconds=reopen_window_s)


def group(
    diagnosis: Diagnosis,
    standing: Sequence[Incident],
    now: datetime,
    reopen_window_s: int,
    replaces: Sequence[str] = (),
) -> Grouping:
    """Where `diagnosis` goes among `standing`: the incidents of its subject in its cluster,
    every unresolved one and the resolved ones of its rule since `reopen_since`.

    In this order, because each is the better story to continue: the open incident of the rule
    (updated); else the latest-updated unresolved one of a rule in `replaces` that is not
    executing (superseded: a drain under way is never re-labelled); else the latest one of the
    rule resolved within the window (reopened); else a new one.
    """
    own = [i for i in standing if i.rule == diagnosis.rule]
    live = next((i for i in own if i.state is not IncidentState.RESOLVED), None)
    if live is not None:
        return Grouping("updated", live)
    takeable = [
        i
        for i in standing
        if i.rule in replaces and i.state not in (IncidentState.RESOLVED, IncidentState.EXECUTING)
    ]
    if takeable:
        return _supersede(max(takeable, key=lambda i: i.updated_at), diagnosis, now)
    since = reopen_since(now, reopen_window_s)
    recent = [
        (i.resolved_at, i)
        for i in own
        if i.state is IncidentState.RESOLVED and i.resolved_at and i.resolved_at >= since
    ]
    if recent:
        last = max(recent, key=lambda pair: pair[0])[1]
        check(last.id, last.state, IncidentState.OPEN)
        return Grouping(
            "reopened",
            last,
            data={"from": IncidentState.RESOLVED.value, "to": IncidentState.OPEN.value},
        )
    return Grouping(
        "new",
        data={"to": IncidentState.OPEN.value, "rule": diagnosis.rule},
    )


def _supersede(older: Incident, diagnosis: Diagnosis, now: datetime) -> Grouping:
    """A better diagnosis of the same problem takes the incident over: same incident, same
    thread; the earlier diagnosis' undecided requests are withdrawn with it, and the story
    starts again (open) for the new one's proposals."""
    check(older.id, older.state, IncidentState.OPEN)
    previous = older.rule
    return Grouping(
        "superseded",
        older,
        data={
            "from": older.state.value,
            "to": IncidentState.OPEN.value,
            "superseded": previous,
            "rule": diagnosis.rule,
        },
        withdrawal=supersession(older.id, now, diagnosis.rule, diagnosis.title, previous),
    )

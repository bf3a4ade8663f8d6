"""The incident state machine. Every move not listed here is a bug somewhere upstream, so it
raises instead of being quietly allowed; the store writes each legal move to the timeline."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.errors import GpubotError
from bot.model import IncidentState as S
from bot.model import Lang, TimelineEntry
from bot.texts import said_in_english, say

TRANSITIONS: dict[S, frozenset[S]] = {
    S.OPEN: frozenset({S.DIAGNOSED, S.RESOLVED}),
    S.DIAGNOSED: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.OPEN}),
    S.AWAITING_APPROVAL: frozenset({S.APPROVED, S.DENIED, S.EXPIRED, S.RESOLVED, S.OPEN}),
    # Approved but the node changed before acting: the executor asks again. Approved but not
    # yet acting when the problem went away (or a better diagnosis took over): resolved, and
    # the approval withdrawn with it (the store refuses this while an execution runs).
    S.APPROVED: frozenset({S.EXECUTING, S.AWAITING_APPROVAL, S.EXPIRED, S.RESOLVED, S.OPEN}),
    S.EXECUTING: frozenset({S.SUCCEEDED, S.FAILED}),
    # After a drain comes the repair, the health gate and an uncordon: another approval.
    S.SUCCEEDED: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.OPEN}),
    S.FAILED: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.OPEN}),
    S.DENIED: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.OPEN}),
    S.EXPIRED: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.OPEN}),
    # Firing again after a resolve, within the reopen window.
    S.RESOLVED: frozenset({S.OPEN}),
}
"""Back to OPEN from a live state: a better diagnosis of the same problem superseded the
incident's rule in place (its undecided requests withdrawn), and its story starts again."""


def first_opened(entry: TimelineEntry) -> bool:
    """The entry that opened an incident (the store writes it with no `from`)."""
    return (
        entry.kind == "state" and entry.data.get("to") == S.OPEN.value and "from" not in entry.data
    )


def reopened(entry: TimelineEntry) -> bool:
    """A resolved incident firing again: one reopen cycle. Back to open from a live state is
    not one: that is a better diagnosis superseding the first in place."""
    return (
        entry.kind == "state"
        and entry.data.get("from") == S.RESOLVED.value
        and entry.data.get("to") == S.OPEN.value
    )


def superseded_in_place(entry: TimelineEntry) -> bool:
    """A better diagnosis of the same problem taking the incident over (the store writes the
    rule it replaced as `superseded`): the same incident goes on under the new rule."""
    return (
        entry.kind == "state"
        and entry.data.get("to") == S.OPEN.value
        and entry.data.get("superseded") is not None
    )


class IllegalTransition(GpubotError):
    def __init__(self, incident: str, current: S, target: S) -> None:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[current])) or "nothing"
        super().__init__(
            f"incident {incident}: cannot go from {current.value} to {target.value} "
            f"(from {current.value} it may go to: {allowed})"
        )
        self.current = current
        self.target = target


def check(incident: str, current: S, target: S) -> None:
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(incident, current, target)


def _when(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


# The store keeps these in English; `withdrawal_text` says them again in the reader's language.
_WITHDRAWALS = ("withdrawal.superseded", "withdrawal.resolved_why", "withdrawal.resolved")


def withdrawal(incident: str, resolved_at: datetime, why: str = "") -> str:
    """Why a request of a resolved incident will never act, as the store keeps it."""
    key = "withdrawal.resolved_why" if why else "withdrawal.resolved"
    return say(Lang.EN, key, incident=incident, when=_when(resolved_at), why=why)


def supersession(incident: str, at: datetime, rule: str, title: str, previous: str) -> str:
    """Why a request of an incident a better diagnosis took over will never act, as the store
    keeps it."""
    return say(
        Lang.EN,
        "withdrawal.superseded",
        incident=incident,
        when=_when(at),
        rule=rule,
        title=title,
        previous=previous,
    )


def withdrawal_text(detail: str, lang: Lang) -> str:
    """A withdrawn request's stored detail as a person reads it in `lang`; a detail that is
    none of gpubot's withdrawals as it is."""
    for key in _WITHDRAWALS:
        values = said_in_english(key, detail)
        if values is not None:
            return say(lang, key, **values)
    return detail

"""What the on-call reads when an incident resolves: how long, what was seen, who decided
what, what was done, the outcome, time to approve and time to recover — from the timeline
alone, so the summary can never claim what the timeline does not show.

An incident that flapped (resolved, then reopened within the reopen window, maybe many times)
has one summary, not one per cycle:

- *seen*: each distinct "signal" or "diagnosis" line once, in the order first seen (every
  reopen writes its diagnosis again: the same words are one observation), then the health
  gate's last verdict (the gate is checked again before an uncordon runs: one verdict, not
  "passed" twice);
- *reopened*: the reopen cycles (`from: resolved`, `to: open` in the timeline), said once
  ("reopened 3 times"); no line when it never reopened;
- *decided* and *done*: every decision and every action, of every cycle (each happened);
- *outcome*: how the last cycle ended: the incident's state, and for a resolve its reason (the
  last resolve's text, e.g. "superseded by incident 7 (...)");
- *duration* and *time to recover*: from the first open to the last resolve, across the cycles
  (the digest measures recovery the same way);
- *time to approve*: from the proposal that the first approval answered (the last proposal
  before it, in its own cycle) to that approval, not from a proposal of an earlier cycle that
  nobody answered.

What it must never do: repeat a line once per cycle, or measure across cycles what happened
within one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from bot.incidents.lifecycle import reopened
from bot.model import Incident, IncidentState, Lang, TimelineEntry
from bot.texts import say, state_name


@dataclass(frozen=True)
class Summary:
    incident: Incident
    duration: timedelta | None
    seen: list[str] = field(default_factory=list)
    """Each distinct line once, in the order first seen."""
    decided: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    outcome: str = ""
    """The state the last cycle ended in (an `IncidentState` value)."""
    time_to_approve: timedelta | None = None
    time_to_recover: timedelta | None = None
    reopened: int = 0
    """Reopen cycles in the timeline."""
    outcome_reason: str = ""
    """Why the last cycle ended: its resolve's text; "" while it has not."""


def _time_to_approve(entries: Sequence[TimelineEntry]) -> timedelta | None:
    approval = next((e for e in entries if e.kind == "approval"), None)
    if approval is None:
        return None
    asked = [e.at for e in entries if e.kind == "proposal" and e.at <= approval.at]
    return approval.at - asked[-1] if asked else None


def _reason(entries: Sequence[TimelineEntry], state: IncidentState) -> str:
    """The last resolve's text, if the incident is resolved and it says more than the move."""
    if state is not IncidentState.RESOLVED:
        return ""
    last = next((e for e in reversed(entries) if e.kind == "resolve"), None)
    if last is None:
        return ""
    moved = f"{last.data.get('from')} → {last.data.get('to')}"
    return "" if last.text == moved else last.text


def summarize(incident: Incident, entries: Sequence[TimelineEntry]) -> Summary:
    resolved = incident.resolved_at
    return Summary(
        incident=incident,
        duration=(resolved - incident.opened_at) if resolved else None,
        seen=[
            *dict.fromkeys(e.text for e in entries if e.kind in ("signal", "diagnosis")),
            *[e.text for e in entries if e.kind == "gate"][-1:],
        ],
        decided=[f"{e.actor}: {e.text}" for e in entries if e.kind in ("approval", "denial")],
        done=[e.text for e in entries if e.kind == "action-result"],
        outcome=incident.state.value,
        time_to_approve=_time_to_approve(entries),
        time_to_recover=(resolved - incident.opened_at) if resolved else None,
        reopened=sum(1 for e in entries if reopened(e)),
        outcome_reason=_reason(entries, incident.state),
    )


def _span(value: timedelta | None, fallback: str) -> str:
    if value is None:
        return fallback
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def _times(n: int, lang: Lang) -> str:
    return say(lang, "summary.once") if n == 1 else say(lang, "summary.times", n=n)


def _outcome(summary: Summary, lang: Lang) -> str:
    """The last cycle's end: `resolved: superseded by incident 7 (...)`."""
    state = state_name(summary.outcome, lang)
    if not summary.outcome_reason:
        return state
    return say(lang, "summary.ended", state=state, reason=summary.outcome_reason)


def summary_lines(summary: Summary, lang: Lang = Lang.EN) -> list[tuple[str, str]]:
    """(label, text) pairs, for a terminal table, Markdown or a Slack section. The reopen
    line only for an incident that reopened."""

    def label(key: str) -> str:
        return say(lang, f"summary.{key}")

    none, still_open = label("none"), label("open")
    lines = [(label("duration"), _span(summary.duration, still_open))]
    if summary.reopened:
        lines.append((label("reopened"), _times(summary.reopened, lang)))
    return [
        *lines,
        (label("seen"), "\n".join(summary.seen) or none),
        (label("decided"), "\n".join(summary.decided) or none),
        (label("done"), "\n".join(summary.done) or none),
        (label("outcome"), _outcome(summary, lang)),
        (label("to_approve"), _span(summary.time_to_approve, none)),
        (label("to_recover"), _span(summary.time_to_recover, still_open)),
    ]

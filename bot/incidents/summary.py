"""What the on-call reads when an incident resolves: how long, what was seen, who decided
what, what was done, the outcome, time to approve and time to recover — from the timeline
alone, so the summary can never claim what the timeline does not show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.model import Incident, Lang, TimelineEntry

_LABELS = {
    Lang.EN: {
        "duration": "Duration",
        "seen": "Seen",
        "decided": "Decided",
        "done": "Done",
        "outcome": "Outcome",
        "to_approve": "Time to approve",
        "to_recover": "Time to recover",
        "open": "still open",
        "none": "none",
    },
    Lang.ZH: {
        "duration": "持续时间",
        "seen": "观察到",
        "decided": "决策",
        "done": "已执行",
        "outcome": "结果",
        "to_approve": "审批耗时",
        "to_recover": "恢复耗时",
        "open": "仍未解决",
        "none": "无",
    },
}


@dataclass(frozen=True)
class Summary:
    incident: Incident
    duration: timedelta | None
    seen: list[str] = field(default_factory=list)
    decided: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    outcome: str = ""
    time_to_approve: timedelta | None = None
    time_to_recover: timedelta | None = None


def _first(entries: Sequence[TimelineEntry], *kinds: str) -> datetime | None:
    return next((e.at for e in entries if e.kind in kinds), None)


def summarize(incident: Incident, entries: Sequence[TimelineEntry]) -> Summary:
    proposed = _first(entries, "proposal")
    approved = _first(entries, "approval")
    resolved = incident.resolved_at
    return Summary(
        incident=incident,
        duration=(resolved - incident.opened_at) if resolved else None,
        seen=[e.text for e in entries if e.kind in ("signal", "diagnosis", "gate")],
        decided=[f"{e.actor}: {e.text}" for e in entries if e.kind in ("approval", "denial")],
        done=[e.text for e in entries if e.kind == "action-result"],
        outcome=incident.state.value,
        time_to_approve=(approved - proposed) if proposed and approved else None,
        time_to_recover=(resolved - incident.opened_at) if resolved else None,
    )


def _span(value: timedelta | None, fallback: str) -> str:
    if value is None:
        return fallback
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def summary_lines(summary: Summary, lang: Lang = Lang.EN) -> list[tuple[str, str]]:
    """(label, text) pairs, for a terminal table, Markdown or a Slack section."""
    labels = _LABELS[lang]
    none = labels["none"]
    return [
        (labels["duration"], _span(summary.duration, labels["open"])),
        (labels["seen"], "\n".join(summary.seen) or none),
        (labels["decided"], "\n".join(summary.decided) or none),
        (labels["done"], "\n".join(summary.done) or none),
        (labels["outcome"], summary.outcome),
        (labels["to_approve"], _span(summary.time_to_approve, none)),
        (labels["to_recover"], _span(summary.time_to_recover, labels["open"])),
    ]

"""The daily digest: what happened to the fleet in the last window, for the on-call who was
asleep — incidents opened and resolved, nodes still out of service and since when, repeat
offenders, the most frequent symptoms, the median time to recover.

Everything is counted from the incidents' timelines, read through the `Store` port, so the
digest can never claim what the timelines do not show:

- *opened*: "state" entries that open an incident (`to: open`), new or reopened within the
  reopen window, whose time is in `[since, until)`. A reopen counts again: a node that flaps
  is a node that keeps paging someone.
- *resolved*: "resolve" entries in the window.
- *time to recover*: for each resolve in the window, its time minus the (re)open before it;
  the digest shows the median.
- *repeat offenders*: nodes opened on 2 or more times in the window.
- *top symptoms*: rule ids by how often they opened in the window, at most 5.
- *still out of service* (as of `until`): a node the bot itself took out and has not given
  back, on an incident that is not resolved. That is an unresolved incident whose timeline
  has an "action-result" with outcome `succeeded` for a cordon or drain request (the
  executor's `_finish`), not followed by a succeeded uncordon; "since" is the time of the
  first such result. A node cordoned by hand, a drain that failed half-way, or an incident
  resolved while the node stayed cordoned are not shown: the timeline does not prove them.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.errors import InputError
from bot.model import Action, Incident, IncidentState, Lang, TimelineEntry
from bot.ports import Store

TOP_SYMPTOMS = 5
BAR_WIDTH = 20
"""The longest bar of the symptom chart, in block characters."""
_BLOCK = "█"
_TAKE_OUT = frozenset({Action.CORDON, Action.DRAIN})


@dataclass(frozen=True)
class Digest:
    since: datetime
    until: datetime
    opened: int
    resolved: int
    still_out: list[tuple[str, datetime, str]] = field(default_factory=list)
    """(node, out of service since, rule), longest out first; one row per node (the
    earliest time, the rules of all its incidents holding it out, joined by ", ")."""
    repeat_offenders: list[tuple[str, int]] = field(default_factory=list)
    """(node, incidents opened in the window), 2 or more only, most first."""
    top_symptoms: list[tuple[str, int]] = field(default_factory=list)
    """(rule id, incidents opened in the window), most first, at most `TOP_SYMPTOMS`."""
    median_recover_s: float | None = None
    """Over the resolves in the window; None when nothing was resolved."""
    reopened: int = 0
    """How many of `opened` were reopens of a resolved incident (flapping)."""

    @property
    def quiet(self) -> bool:
        """Nothing opened, nothing resolved, no node out of service."""
        return not (self.opened or self.resolved or self.still_out)


# ---- building -------------------------------------------------------------------------------


def _opens(entry: TimelineEntry) -> bool:
    return entry.kind == "state" and entry.data.get("to") == IncidentState.OPEN.value


def _out_since(
    store: Store, incident: Incident, entries: Sequence[TimelineEntry]
) -> tuple[str, datetime] | None:
    """(node, since when) if the bot took the incident's node out and has not given it back
    by the end of `entries`."""
    results = [
        e for e in entries if e.kind == "action-result" and e.data.get("outcome") == "succeeded"
    ]
    if not results:
        return None
    requests = {r.id: r for r in store.requests(incident.id)}
    out: tuple[str, datetime] | None = None
    for entry in results:
        request = requests.get(str(entry.data.get("request")))
        if request is None:
            continue
        if request.action in _TAKE_OUT and out is None:
            out = (incident.node or request.node, entry.at)
        elif request.action is Action.UNCORDON:
            out = None
    return out


def build_digest(store: Store, until: datetime, window: timedelta = timedelta(days=1)) -> Digest:
    """The digest of `[until - window, until)`, read only through the Store port."""
    if until.tzinfo is None or until.utcoffset() is None:
        raise ValueError(f"until must be an aware datetime, not {until!r}")
    if window <= timedelta(0):
        raise ValueError(f"the window must be positive, not {window}")
    since = until - window
    opened_by_node: Counter[str] = Counter()
    opened_by_rule: Counter[str] = Counter()
    opened = reopened = 0
    recover_s: list[float] = []
    out: dict[str, list[tuple[datetime, str]]] = {}

    for incident in store.incidents():
        # Opening and resolving move `updated_at`: an incident not touched since the window
        # began and resolved now has nothing to count (an unresolved one may still be out).
        if incident.state is IncidentState.RESOLVED and incident.updated_at < since:
            continue
        entries = [e for e in store.timeline(incident.id) if e.at < until]
        last_open: datetime | None = None
        resolved_at_until = False
        for entry in entries:
            if _opens(entry):
                last_open = entry.at
                resolved_at_until = False
                if entry.at >= since:
                    opened += 1
                    reopened += int(entry.data.get("from") == IncidentState.RESOLVED.value)
                    opened_by_rule[incident.rule] += 1
                    if incident.node:
                        opened_by_node[incident.node] += 1
            elif entry.kind == "resolve":
                resolved_at_until = True
                if entry.at >= since:
                    start = last_open or incident.opened_at
                    recover_s.append((entry.at - start).total_seconds())
        if not entries or resolved_at_until:
            continue
        taken_out = _out_since(store, incident, entries)
        if taken_out is not None:
            node, out_since = taken_out
            out.setdefault(node, []).append((out_since, incident.rule))

    still_out = []
    for node, spells in out.items():
        spells.sort()
        rules = list(dict.fromkeys(rule for _, rule in spells))
        still_out.append((node, spells[0][0], ", ".join(rules)))
    still_out.sort(key=lambda row: (row[1], row[0]))

    def most_first(counts: Counter[str]) -> list[tuple[str, int]]:
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    return Digest(
        since=since,
        until=until,
        opened=opened,
        resolved=len(recover_s),
        still_out=still_out,
        repeat_offenders=[(n, c) for n, c in most_first(opened_by_node) if c >= 2],
        top_symptoms=most_first(opened_by_rule)[:TOP_SYMPTOMS],
        median_recover_s=statistics.median(recover_s) if recover_s else None,
        reopened=reopened,
    )


# ---- rendering ------------------------------------------------------------------------------


def _span(seconds: float, lang: Lang) -> str:
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if lang is Lang.ZH:
        if days:
            return f"{days} 天 {hours} 小时"
        if hours:
            return f"{hours} 小时 {minutes} 分"
        return f"{minutes} 分 {secs} 秒"
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def _window(window: timedelta, lang: Lang) -> str:
    seconds = int(window.total_seconds())
    zh = lang is Lang.ZH
    if seconds % 86400 == 0 and seconds > 86400:
        n = seconds // 86400
        return f"过去 {n} 天" if zh else f"Last {n} days"
    if seconds % 3600 == 0:
        n = seconds // 3600
        return f"过去 {n} 小时" if zh else f"Last {n} hours" if n != 1 else "Last hour"
    n = max(1, seconds // 60)
    return f"过去 {n} 分钟" if zh else f"Last {n} minutes"


def _chart(rows: Sequence[tuple[str, int]]) -> list[str]:
    """`  rule  ████ 4`: one block per incident, scaled down when the top has more than
    `BAR_WIDTH`; never less than one block."""
    top = max(count for _, count in rows)
    width = max(len(name) for name, _ in rows)
    scale = min(1.0, BAR_WIDTH / top)
    return [
        f"  {name.ljust(width)}  {_BLOCK * max(1, round(count * scale))} {count}"
        for name, count in rows
    ]


def digest_lines(digest: Digest, lang: Lang = Lang.EN) -> list[str]:
    """The digest as plain lines (the chart needs a monospace font: a code block in Slack).
    Times are shown in the zone of `digest.until`."""
    zh = lang is Lang.ZH
    window = _window(digest.until - digest.since, lang)
    if digest.quiet:
        if zh:
            return [f"{window}：平安无事，没有事件，所有节点都在正常服务。"]
        day = "quiet day" if digest.until - digest.since <= timedelta(days=1) else "all quiet"
        return [f"{window}: {day}: no incidents, every node in service."]

    lines = []
    if zh:
        reopened = f"（其中重开 {digest.reopened} 起）" if digest.reopened else ""
        lines.append(f"{window}：新开 {digest.opened} 起{reopened}，已解决 {digest.resolved} 起")
    else:
        reopened = f" ({digest.reopened} reopened)" if digest.reopened else ""
        lines.append(f"{window}: {digest.opened} opened{reopened}, {digest.resolved} resolved")

    zone = digest.until.tzinfo
    if digest.still_out:
        count = len(digest.still_out)
        lines.append(
            f"仍处于下线状态的节点（{count} 个）：" if zh else f"Still out of service ({count}):"
        )
        width = max(len(node) for node, _, _ in digest.still_out)
        for node, since, rule in digest.still_out:
            shown = since.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
            lasted = _span((digest.until - since).total_seconds(), lang)
            if zh:
                lines.append(f"  {node.ljust(width)}  自 {shown} 起（已 {lasted}）  {rule}")
            else:
                lines.append(f"  {node.ljust(width)}  since {shown} ({lasted})  {rule}")
    else:
        lines.append("没有节点处于下线状态" if zh else "No node out of service")

    if digest.repeat_offenders:
        if zh:
            nodes = "、".join(f"{n}（{c} 次）" for n, c in digest.repeat_offenders)
            lines.append(f"反复出问题的节点：{nodes}")
        else:
            nodes = ", ".join(f"{n} ({c}×)" for n, c in digest.repeat_offenders)
            lines.append(f"Repeat offenders: {nodes}")

    if digest.top_symptoms:
        lines.append("最常见的症状：" if zh else "Most frequent symptoms:")
        lines.extend(_chart(digest.top_symptoms))

    if digest.median_recover_s is None:
        lines.append(
            "恢复时间中位数：无（没有已解决的事件）"
            if zh
            else "Median time to recover: none resolved"
        )
    else:
        median = _span(digest.median_recover_s, lang)
        if zh:
            lines.append(f"恢复时间中位数：{median}（共 {digest.resolved} 起已解决）")
        else:
            lines.append(f"Median time to recover: {median} (over {digest.resolved} resolved)")
    return lines


# ---- when ------------------------------------------------------------------------------------

_HHMM = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


def _zone(tz: str) -> ZoneInfo:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InputError(
            "digest.tz", f"unknown time zone {tz!r} (an IANA name, e.g. Asia/Shanghai)"
        ) from None


def next_run(now: datetime, at: str, tz: str) -> datetime:
    """The first wall-clock time `at` ("HH:MM") in the IANA zone `tz` strictly after `now`,
    in UTC. Calendar days, not 24-hour steps, so the digest stays at 09:00 local across DST.
    A time the clocks skip (spring forward) runs as far after the jump as it was after the
    skipped hour began (02:30 → 03:30); a time that happens twice (fall back) runs at the
    first, once."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be an aware datetime, not {now!r}")
    match = _HHMM.fullmatch(at.strip())
    if match is None:
        raise InputError("digest.at", f"{at!r} is not a time of day as HH:MM (00:00 to 23:59)")
    zone = _zone(tz)
    wall = time(int(match[1]), int(match[2]))
    now_utc = now.astimezone(UTC)
    today: date = now_utc.astimezone(zone).date()
    for days in range(3):
        candidate = datetime.combine(today + timedelta(days=days), wall, tzinfo=zone)
        if candidate.astimezone(UTC) > now_utc:
            return candidate.astimezone(UTC)
    raise AssertionError(
        "unreachable: a wall-clock time recurs within two days"
    )  # pragma: no cover

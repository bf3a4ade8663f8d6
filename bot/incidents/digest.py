"""The daily digest: what happened to the fleet in the last window, for the on-call who was
asleep — incidents opened and resolved, nodes still out of service and since when, repeat
offenders, the most frequent symptoms, the median time to recover.

Incidents are counted from their timelines, read through the `Store` port, so the digest can
never claim what the timelines do not show. Nodes out of service are read from the cluster
when the caller has it (`LeaderDuties.post_digest` does), else from the timelines.

An incident's timeline is one or more *cycles*: it opens once (a "state" entry `to: open`), and
each reopen of a resolved incident within the reopen window (`from: resolved`, `to: open`)
starts another cycle of the same incident. The digest counts incidents, each once:

- *opened*: incidents whose first open is in `[since, until)`. An incident opened before the
  window and reopened inside it was not opened in it: its reopens count as reopen cycles and
  it counts as flapped.
- *reopen cycles* (`reopened`): reopens in the window, each once; *flapped*: the incidents
  with at least one. Said apart from opened ("6 opened, 3 resolved; 3 flapped, 4 reopen
  cycles"): a flapped incident need not be one opened in the window.
- *resolved*: incidents recovered in the window: resolved as of `until`, their last resolve in
  the window, not superseded. One resolved in the window and reopened before `until` is not
  resolved: it is still going.
- *superseded*: incidents a better diagnosis of the same problem took over in the window,
  each once however many times: the store's supersede entry (`superseded_in_place`), written
  when a newer rule replaces the incident's rule in place. The incident goes on under the
  new rule: it is still one incident, opened once, and recovers (or not) as one. A database
  from before the supersede happened in place also holds incidents *resolved* as superseded
  (the resolve's text starts with "superseded by incident", or its data names
  `superseded_by`): those count here too, and their problem went on under another
  incident, so they are no recovery and not in the median.
- *time to recover*: per resolved incident, from its first open to its last resolve. A
  flapping incident recovers once, over all its cycles (each reopen came within the reopen
  window of a resolve: one problem that kept coming back), not once per cycle. The digest
  shows the median.
- *repeat offenders*: nodes that went bad 2 or more times in the window: each incident opened
  on the node, plus each reopen cycle (a node that flaps keeps paging someone).
- *top symptoms*: rule ids by the incidents that opened or reopened in the window, each
  incident once, at most 5.
- *still out of service* (as of `until`):
  - with the cluster's facts (`out_of_service`: the nodes the blast radius counts as out,
    cordoned by anyone or not Ready — `bot.approval.blast_radius.out_of_service`, which this
    layer may not import, so the caller judges and `OutOfService.of` reads the node): every
    such node, whatever the timelines say. Since: the cordon's time as the node shows it (the
    taint's `timeAdded`, else its `NodeNotSchedulable` event: `NodeFacts.cordoned_for_s`),
    else the start of gpubot's cordon or drain still in force on it (its "action-start", or a
    succeeded "action-result", not followed by a succeeded uncordon), else unknown (NotReady
    tells no time). Beside it: the rules of its incidents not resolved at `until`, or "no open
    incident"; "cordoned by hand" when no take-out of gpubot's is in force (by hand means by
    anyone but gpubot: a person, or another controller); "not Ready".
  - without them (`gpubot digest` reads no cluster): as far as the timelines show — a node the
    bot itself took out and has not given back, on an incident that is not resolved (a
    succeeded cordon or drain "action-result", not followed by a succeeded uncordon; since:
    the first such result). Nodes cordoned by hand or NotReady are missed, a node uncordoned
    by hand is kept: `still_out_note` says so.

What it must never do: count one incident twice, or call an incident handed to another (resolved
as superseded) recovered.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.errors import InputError
from bot.incidents.lifecycle import first_opened, reopened, superseded_in_place
from bot.model import Action, Incident, IncidentState, Lang, NodeFacts, TimelineEntry
from bot.ports import Store
from bot.texts import say

TOP_SYMPTOMS = 5
BAR_WIDTH = 20
"""The longest bar of the symptom chart, in block characters."""
_BLOCK = "█"
_TAKE_OUT = frozenset({Action.CORDON, Action.DRAIN})
SUPERSEDED_TEXT = "superseded by incident"
"""How `DiagnosisPass` begins the resolve of an incident a better diagnosis replaced."""

OutNote = Literal["cordoned-by-gpubot", "cordoned-by-hand", "not-ready"]


@dataclass(frozen=True)
class OutOfService:
    """A node the blast radius counts as out of service now (cordoned by anyone, or not
    Ready), as the cluster showed it."""

    cordoned: bool
    not_ready: bool
    cordoned_at: datetime | None = None
    """When the cordon began, if the node shows it (taint `timeAdded` or its event)."""

    @classmethod
    def of(cls, node: NodeFacts, observed_at: datetime) -> OutOfService:
        cordoned_at = None
        if node.unschedulable and node.cordoned_for_s is not None:
            cordoned_at = observed_at - timedelta(seconds=node.cordoned_for_s)
        return cls(
            cordoned=node.unschedulable,
            not_ready=node.known and node.ready != "True",
            cordoned_at=cordoned_at,
        )


@dataclass(frozen=True)
class Digest:
    since: datetime
    until: datetime
    opened: int
    """Incidents first opened in the window."""
    resolved: int
    """Incidents recovered in the window (resolved at `until`, not superseded)."""
    still_out: list[tuple[str, datetime | None, str]] = field(default_factory=list)
    """(node, out of service since (None: unknown), the rules of its incidents holding it out
    or open, joined by ", "; "" when none), longest out first, unknown last; one row a node."""
    repeat_offenders: list[tuple[str, int]] = field(default_factory=list)
    """(node, times it went bad in the window: incidents opened plus reopen cycles), 2 or more
    only, most first."""
    top_symptoms: list[tuple[str, int]] = field(default_factory=list)
    """(rule id, incidents that opened or reopened in the window), most first, at most
    `TOP_SYMPTOMS`."""
    median_recover_s: float | None = None
    """Over the `resolved` incidents, each from its first open to its last resolve; None
    when none recovered."""
    reopened: int = 0
    """Reopen cycles in the window: each reopen of a resolved incident once."""
    flapped: int = 0
    """Incidents with a reopen cycle in the window."""
    superseded: int = 0
    """Incidents a better diagnosis took over in the window (in place, or, in an older
    database, by a resolve that handed them to another incident)."""
    out_notes: dict[str, tuple[OutNote, ...]] = field(default_factory=dict)
    """Per node of `still_out` read from the cluster: how it is out."""
    still_out_live: bool = False
    """True when `still_out` is what the cluster showed; False: as far as the timelines
    show."""

    @property
    def quiet(self) -> bool:
        """Nothing opened, reopened or resolved, no node out of service."""
        return not (
            self.opened or self.reopened or self.resolved or self.superseded or self.still_out
        )


# ---- building -------------------------------------------------------------------------------


def is_superseded(entry: TimelineEntry) -> bool:
    """Does this resolve hand the incident to a better diagnosis? The pass's words, or a
    `superseded_by` in the data (a newer gpubot writes both)."""
    return entry.text.startswith(SUPERSEDED_TEXT) or entry.data.get("superseded_by") is not None


@dataclass(frozen=True)
class _Story:
    """One incident's timeline up to `until`: its cycles, read once."""

    first_open: datetime
    reopens: list[datetime]
    ended: TimelineEntry | None
    """The resolve it ends with, if it is resolved at the end of the timeline read."""
    supersedes: list[datetime]
    """When a better diagnosis took it over in place."""


def _story(incident: Incident, entries: Sequence[TimelineEntry]) -> _Story:
    first: datetime | None = None
    reopens: list[datetime] = []
    ended: TimelineEntry | None = None
    supersedes: list[datetime] = []
    for entry in entries:
        if first_opened(entry) and first is None:
            first = entry.at
        elif reopened(entry):
            reopens.append(entry.at)
            ended = None
        elif superseded_in_place(entry):
            supersedes.append(entry.at)
        elif entry.kind == "resolve":
            ended = entry
    return _Story(first or incident.opened_at, reopens, ended, supersedes)


def _out_since(
    store: Store, incident: Incident, entries: Sequence[TimelineEntry]
) -> tuple[str, datetime] | None:
    """(node, since when) if the bot took the incident's node out and has not given it back
    by the end of `entries` (the timelines alone)."""
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


def _moves(
    store: Store, incident: Incident, entries: Sequence[TimelineEntry]
) -> list[tuple[datetime, str, bool]]:
    """(when, node, taken out?) for each of gpubot's take-outs (a cordon or drain started, or
    succeeded) and give-backs (a succeeded uncordon) in `entries`."""
    acted = [e for e in entries if e.kind in ("action-start", "action-result")]
    if not acted:
        return []
    requests = {r.id: r for r in store.requests(incident.id)}
    moves = []
    for entry in acted:
        request = requests.get(str(entry.data.get("request")))
        if request is None:
            continue
        succeeded = entry.kind == "action-result" and entry.data.get("outcome") == "succeeded"
        if request.action in _TAKE_OUT and (entry.kind == "action-start" or succeeded):
            moves.append((entry.at, request.node, True))
        elif request.action is Action.UNCORDON and succeeded:
            moves.append((entry.at, request.node, False))
    return moves


def _held(moves: list[tuple[datetime, str, bool]]) -> dict[str, datetime]:
    """Per node, when gpubot's take-out still in force at the end began."""
    held: dict[str, datetime | None] = {}
    for at, node, out in sorted(moves, key=lambda move: move[0]):
        if not out:
            held[node] = None
        elif held.get(node) is None:
            held[node] = at
    return {node: at for node, at in held.items() if at is not None}


def build_digest(
    store: Store,
    until: datetime,
    window: timedelta = timedelta(days=1),
    out_of_service: Mapping[str, OutOfService] | None = None,
) -> Digest:
    """The digest of `[until - window, until)`, read through the Store port; `out_of_service`
    are the nodes out of service at `until` as the cluster shows them (None: not read, the
    timelines alone tell)."""
    if until.tzinfo is None or until.utcoffset() is None:
        raise ValueError(f"until must be an aware datetime, not {until!r}")
    if window <= timedelta(0):
        raise ValueError(f"the window must be positive, not {window}")
    since = until - window
    went_bad: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    opened = reopened = flapped = superseded_n = 0
    recover_s: list[float] = []
    out: dict[str, list[tuple[datetime, str]]] = {}
    open_rules: dict[str, list[tuple[datetime, str]]] = {}
    moves: list[tuple[datetime, str, bool]] = []

    for incident in store.incidents():
        about_out = out_of_service is not None and (incident.node or "") in out_of_service
        # Opening and resolving move `updated_at`: an incident not touched since the window
        # began and resolved now has nothing to count (unless its node is out: gpubot's
        # take-out may still be in force).
        if (
            incident.state is IncidentState.RESOLVED
            and incident.updated_at < since
            and not about_out
        ):
            continue
        entries = [e for e in store.timeline(incident.id) if e.at < until]
        if not entries:
            continue
        story = _story(incident, entries)
        new = since <= story.first_open < until
        cycles = sum(1 for at in story.reopens if at >= since)
        opened += int(new)
        reopened += cycles
        flapped += int(cycles > 0)
        if new or cycles:
            by_rule[incident.rule] += 1
            if incident.node:
                went_bad[incident.node] += int(new) + cycles
        handed_over = story.ended is not None and is_superseded(story.ended)
        if story.ended is not None and story.ended.at >= since and not handed_over:
            recover_s.append((story.ended.at - story.first_open).total_seconds())
        if any(at >= since for at in story.supersedes) or (
            handed_over and story.ended is not None and story.ended.at >= since
        ):
            superseded_n += 1

        if out_of_service is not None:
            if about_out and incident.node and story.ended is None:
                open_rules.setdefault(incident.node, []).append((story.first_open, incident.rule))
            moves += [m for m in _moves(store, incident, entries) if m[1] in out_of_service]
            continue
        if story.ended is not None:
            continue
        taken_out = _out_since(store, incident, entries)
        if taken_out is not None:
            node, out_since = taken_out
            out.setdefault(node, []).append((out_since, incident.rule))

    still_out: list[tuple[str, datetime | None, str]] = []
    notes: dict[str, tuple[OutNote, ...]] = {}
    if out_of_service is None:
        for node, spells in out.items():
            spells.sort()
            rules = list(dict.fromkeys(rule for _, rule in spells))
            still_out.append((node, spells[0][0], ", ".join(rules)))
    else:
        held = _held(moves)
        for node, state in out_of_service.items():
            kept = held.get(node) if state.cordoned else None
            noted: list[OutNote] = []
            if state.cordoned:
                noted.append("cordoned-by-gpubot" if kept else "cordoned-by-hand")
            if state.not_ready:
                noted.append("not-ready")
            notes[node] = tuple(noted)
            holding = dict.fromkeys(rule for _, rule in sorted(open_rules.get(node, [])))
            still_out.append((node, state.cordoned_at or kept, ", ".join(holding)))
    still_out.sort(key=lambda row: (row[1] is None, row[1] or until, row[0]))

    def most_first(counts: Counter[str]) -> list[tuple[str, int]]:
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    return Digest(
        since=since,
        until=until,
        opened=opened,
        resolved=len(recover_s),
        still_out=still_out,
        repeat_offenders=[(n, c) for n, c in most_first(went_bad) if c >= 2],
        top_symptoms=most_first(by_rule)[:TOP_SYMPTOMS],
        median_recover_s=statistics.median(recover_s) if recover_s else None,
        reopened=reopened,
        flapped=flapped,
        superseded=superseded_n,
        out_notes=notes,
        still_out_live=out_of_service is not None,
    )


# ---- rendering ------------------------------------------------------------------------------


def _span(seconds: float, lang: Lang) -> str:
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return say(lang, "digest.span.days", days=days, hours=hours)
    if hours:
        return say(lang, "digest.span.hours", hours=hours, minutes=minutes)
    return say(lang, "digest.span.minutes", minutes=minutes, secs=secs)


def _window(window: timedelta, lang: Lang) -> str:
    seconds = int(window.total_seconds())
    if seconds % 86400 == 0 and seconds > 86400:
        return say(lang, "digest.window.days", n=seconds // 86400)
    if seconds == 3600:
        return say(lang, "digest.window.hour")
    if seconds % 3600 == 0:
        return say(lang, "digest.window.hours", n=seconds // 3600)
    return say(lang, "digest.window.minutes", n=max(1, seconds // 60))


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


def _counts(digest: Digest, lang: Lang) -> str:
    """The first line: incidents opened, resolved, superseded; flapped ones and their reopen
    cycles apart."""
    window = _window(digest.until - digest.since, lang)
    line = say(lang, "digest.counts", window=window, opened=digest.opened, resolved=digest.resolved)
    if digest.superseded:
        line += say(lang, "digest.counts.superseded", superseded=digest.superseded)
    if digest.reopened:
        key = "digest.counts.reopened_once" if digest.reopened == 1 else "digest.counts.reopened"
        line += say(lang, key, flapped=digest.flapped, reopened=digest.reopened)
    return line


def _what(rules: str, notes: Sequence[OutNote], lang: Lang) -> str:
    """The incidents holding a node out, and how it is out where that is not gpubot's own
    cordon: `xid-79 (not Ready)`, `cordoned by hand, no open incident`."""
    comma = say(lang, "list.comma")
    if not rules:
        noted = [
            *(say(lang, f"digest.note.{n}") for n in notes),
            say(lang, "digest.note.no-incident"),
        ]
        return comma.join(noted)
    told = [say(lang, f"digest.note.{n}") for n in notes if n != "cordoned-by-gpubot"]
    if not told:
        return rules
    return say(lang, "digest.noted", rules=rules, notes=comma.join(told))


def still_out_note(digest: Digest, lang: Lang = Lang.EN) -> str | None:
    """What a digest built without the cluster must add: its nodes out of service are only
    those the timelines show. None when the cluster was read."""
    if digest.still_out_live:
        return None
    return say(lang, "digest.from_timelines")


def digest_lines(digest: Digest, lang: Lang = Lang.EN) -> list[str]:
    """The digest as plain lines (the chart needs a monospace font: a code block in Slack).
    Times are shown in the zone of `digest.until`."""
    window = _window(digest.until - digest.since, lang)
    if digest.quiet:
        one_day = digest.until - digest.since <= timedelta(days=1)
        return [say(lang, "digest.quiet_day" if one_day else "digest.all_quiet", window=window)]

    lines = [_counts(digest, lang)]
    zone = digest.until.tzinfo
    if digest.still_out:
        lines.append(say(lang, "digest.still_out", count=len(digest.still_out)))
        width = max(len(node) for node, _, _ in digest.still_out)
        for node, since, rules in digest.still_out:
            what = _what(rules, digest.out_notes.get(node, ()), lang)
            if since is None:
                when = say(lang, "digest.since_unknown")
            else:
                shown = since.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")
                lasted = _span((digest.until - since).total_seconds(), lang)
                when = say(lang, "digest.since", shown=shown, lasted=lasted)
            lines.append(f"  {node.ljust(width)}  {when}  {what}")
    else:
        lines.append(say(lang, "digest.none_out"))

    if digest.repeat_offenders:
        nodes = say(lang, "list.enumeration").join(
            say(lang, "digest.offender", node=n, count=c) for n, c in digest.repeat_offenders
        )
        lines.append(say(lang, "digest.offenders", nodes=nodes))

    if digest.top_symptoms:
        lines.append(say(lang, "digest.top"))
        lines.extend(_chart(digest.top_symptoms))

    if digest.median_recover_s is None:
        lines.append(say(lang, "digest.median_none"))
    else:
        median = _span(digest.median_recover_s, lang)
        lines.append(say(lang, "digest.median", median=median, resolved=digest.resolved))
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

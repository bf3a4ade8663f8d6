"""A drill's verdict: what the on-call saw, held against what the drill says they must see.

Why it exists: the checks a drill states (the right diagnosis first, one incident per problem,
no reopen, a refusal then a re-offer, the gate then an uncordon, the digest's lines) and the
figures the table prints (time to the right diagnosis, messages posted, the window in which a
wrong button could be clicked) are computed here, once, from three records: the chat calls
(`record.Seen`), the incidents' timelines and requests as stored, and what each approver was
told when they acted.

What it must never do: look at anything a person could not see or the store does not keep
(the serving code's internals), or pass a check it could not evaluate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.drills.record import Seen
from bot.drills.spec import Drill, Expectation
from bot.incidents.lifecycle import reopened
from bot.model import Action, ActionRequest, Incident, TimelineEntry


@dataclass(frozen=True)
class Event:
    """One thing that happened, on one line of the drill's story."""

    at: datetime
    kind: str
    """diagnosis, revision, thread, asked-again, withdrawn, notice (the chat); result, gate
    (the timeline); told (what an approver was answered)."""
    node: str | None
    rule: str | None = None
    offered: tuple[Action, ...] = ()
    action: Action | None = None
    outcome: str | None = None
    passed: bool | None = None
    text: str = ""
    resolved: bool = False


@dataclass(frozen=True)
class Told:
    """What a person was answered when they approved or denied (the CLI's message, the
    Slack ephemeral)."""

    at: datetime
    action: Action
    node: str
    status: str
    message: str


@dataclass(frozen=True)
class Offer:
    """A request's buttons, from when they were posted until they could no longer act."""

    request: ActionRequest
    until: datetime | None


@dataclass(frozen=True)
class Played:
    """A script step that changed the world: a fault, a repair, a person's kubectl."""

    at: datetime
    kind: str
    """fault, repair, kubectl."""
    what: str
    node: str


@dataclass(frozen=True)
class Record:
    """Everything a drill's judge reads, taken when the drill's script has ended."""

    started: datetime
    ended: datetime
    first_fault: tuple[datetime, str] | None
    """When the script's first fault happened, and on which node."""
    seen: Sequence[Seen]
    told: Sequence[Told]
    incidents: Sequence[Incident]
    timelines: dict[str, Sequence[TimelineEntry]]
    offers: Sequence[Offer]
    digest: Sequence[str]
    errors: Sequence[str] = ()
    """Script steps that could not run (a node that does not exist, no request to approve)."""
    played: Sequence[Played] = ()


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class Verdict:
    drill: str
    checks: list[Check] = field(default_factory=list)
    time_to_right_s: float | None = None
    messages: int = 0
    wrong_window_s: float | None = None
    reopened: int = 0
    incidents: int = 0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def events(record: Record) -> list[Event]:
    """The drill's story in time order: the chat's calls, the results and gates the timelines
    hold, and the approvers' answers."""
    found = [
        Event(s.at, s.kind, s.node, s.rule, s.offered, text=s.text, resolved=s.resolved)
        for s in record.seen
    ]
    incidents = {i.id: i for i in record.incidents}
    for incident_id, entries in record.timelines.items():
        node = incidents[incident_id].node if incident_id in incidents else None
        for entry in entries:
            if entry.kind == "action-result":
                action = _action_of(entry, record)
                found.append(
                    Event(
                        entry.at,
                        "result",
                        node,
                        action=action,
                        outcome=str(entry.data.get("outcome")),
                        text=entry.text,
                    )
                )
            elif entry.kind == "note" and entry.data.get("waiting"):
                found.append(
                    Event(
                        entry.at,
                        "result",
                        node,
                        action=Action(str(entry.data.get("action"))),
                        outcome="refused",
                        text=entry.text,
                    )
                )
            elif entry.kind == "gate":
                found.append(Event(entry.at, "gate", node, passed=bool(entry.data.get("passed"))))
    found += [
        Event(t.at, "told", t.node, action=t.action, outcome=t.status, text=t.message)
        for t in record.told
    ]
    return sorted(found, key=lambda e: e.at)


def _action_of(entry: TimelineEntry, record: Record) -> Action | None:
    request = str(entry.data.get("request"))
    for offer in record.offers:
        if offer.request.id == request:
            return offer.request.action
    return None


def matches(expectation: Expectation, event: Event) -> bool:
    e = expectation
    if e.node is not None and event.node != e.node:
        return False
    if e.diagnosis is not None:
        return event.kind in ("diagnosis", "revision") and event.rule == e.diagnosis
    if e.proposal is not None:
        return event.kind in ("diagnosis", "revision", "asked-again") and e.proposal in (
            event.offered
        )
    if e.action is not None:
        return (
            event.kind == "result"
            and event.action is e.action
            and (e.outcome is None or event.outcome == e.outcome)
        )
    if e.gate is not None:
        return event.kind == "gate" and event.passed == (e.gate == "passed")
    if e.resolved is not None:
        return event.kind == "thread" and event.resolved == e.resolved
    if e.reoffered is not None:
        return event.kind == "asked-again" and e.reoffered in event.offered
    if e.told is not None:
        return event.kind == "told" and event.outcome == e.told
    if e.said is not None:
        return event.kind not in ("result", "gate") and e.said in event.text
    return False


def channel_messages(record: Record) -> int:
    """Diagnosis messages posted in the channel. Revisions are not new messages, and a node's
    diagnosis posted in its pool-wide incident's thread is read there, under the one message
    that tells the pool's story."""
    return sum(1 for s in record.seen if s.kind == "diagnosis" and s.under is None)


def judge(drill: Drill, record: Record) -> Verdict:
    story = events(record)
    expect = drill.expect
    verdict = Verdict(drill.drill)
    verdict.messages = channel_messages(record)
    verdict.incidents = len(record.incidents)
    verdict.reopened = sum(
        1 for entries in record.timelines.values() for entry in entries if reopened(entry)
    )
    checks = verdict.checks
    checks += [Check("script ran", False, error) for error in record.errors]
    if expect.first is not None and record.first_fault is not None:
        verdict.time_to_right_s = _time_to_right(expect.first.rule, record, story)
        checks.append(_first(expect.first.rule, expect.first.proposal, record, story))
        if expect.first.proposal is not None:
            verdict.wrong_window_s = wrong_window(
                expect.first.proposal, record, _first_node(record)
            )
    if expect.incidents is not None:
        checks.append(_count("incidents", verdict.incidents, expect.incidents))
    if expect.messages is not None:
        checks.append(_count("diagnosis messages", verdict.messages, expect.messages))
    if expect.reopened is not None:
        checks.append(_count("reopen cycles", verdict.reopened, expect.reopened))
    if expect.wrong_proposal_window is not None:
        window = verdict.wrong_window_s or 0.0
        checks.append(
            Check(
                f"wrong-proposal window <= {expect.wrong_proposal_window:g} s",
                window <= expect.wrong_proposal_window,
                f"{window:.1f} s",
            )
        )
    if expect.sequence:
        checks.append(_sequence(expect.sequence, story))
    for never in expect.never:
        hit = next((e for e in story if matches(never, e)), None)
        checks.append(
            Check(
                f"never: {never.describe()}",
                hit is None,
                "" if hit is None else f"at +{_since(record, hit.at):.1f} s: {hit.text[:120]}",
            )
        )
    digest_text = "\n".join(record.digest)
    for line in expect.digest:
        said = line in digest_text
        detail = "" if said else f"the digest: {' | '.join(record.digest)}"
        checks.append(Check(f"digest says {line!r}", said, detail))
    return verdict


def _since(record: Record, at: datetime) -> float:
    return (at - record.started).total_seconds()


def _count(what: str, got: int, want: int) -> Check:
    return Check(f"{what} = {want}", got == want, f"got {got}")


def _first_node(record: Record) -> str | None:
    return record.first_fault[1] if record.first_fault else None


def _time_to_right(rule: str, record: Record, story: Sequence[Event]) -> float | None:
    assert record.first_fault is not None
    fault_at, node = record.first_fault
    right = next(
        (
            e
            for e in story
            if e.kind in ("diagnosis", "revision") and e.rule == rule and e.node == node
        ),
        None,
    )
    return None if right is None else (right.at - fault_at).total_seconds()


def _first(rule: str, proposal: Action | None, record: Record, story: Sequence[Event]) -> Check:
    """The first buttons offered about the node are the right diagnosis's. A message posted
    earlier without buttons (proposals held while the alert that says why is on its way)
    and revised in place is the design, not a wrong answer."""
    node = _first_node(record)
    name = f"first offer on {node}: {rule}"
    if proposal is not None:
        name += f" proposing {proposal.value}"
    offer = next(
        (
            e
            for e in story
            if e.node == node and e.offered and e.kind in ("diagnosis", "revision", "asked-again")
        ),
        None,
    )
    if offer is None:
        posted = next((e for e in story if e.kind == "diagnosis" and e.node == node), None)
        if proposal is None and posted is not None and posted.rule == rule:
            return Check(name, True, f"after {_since(record, posted.at):.1f} s")
        return Check(name, False, f"nothing was offered about {node}")
    if offer.rule != rule:
        return Check(name, False, f"the first was {offer.rule}")
    if proposal is not None and proposal not in offer.offered:
        offered = ", ".join(a.value for a in offer.offered)
        return Check(name, False, f"it offered {offered}")
    return Check(name, True, f"after {_since(record, offer.at):.1f} s")


def wrong_window(
    proposal: Action, record: Record, node: str | None, since: datetime | None = None
) -> float:
    """Seconds during which buttons of another action than the right one could be clicked on
    `node` (offered from `since` on) before the right one was offered, overlapping offers
    counted once; what comes after the right one (the uncordon after a repair) is the loop
    going on, not a wrong answer."""
    mine = [
        o
        for o in record.offers
        if o.request.node == node and (since is None or o.request.created_at >= since)
    ]
    right = min((o.request.created_at for o in mine if o.request.action is proposal), default=None)
    spans = sorted(
        (o.request.created_at, o.until or record.ended)
        for o in mine
        if o.request.action is not proposal and (right is None or o.request.created_at < right)
    )
    total = timedelta()
    end: datetime | None = None
    for start, until in spans:
        if end is not None and start < end:
            start = end
        if until > start:
            total += until - start
            end = until
    return total.total_seconds()


def _sequence(wanted: Sequence[Expectation], story: Sequence[Event]) -> Check:
    position = 0
    for step, expectation in enumerate(wanted):
        hit = next((i for i in range(position, len(story)) if matches(expectation, story[i])), None)
        if hit is None:
            earlier = any(matches(expectation, e) for e in story[:position])
            why = "it came earlier, out of order" if earlier else "it never came"
            return Check(
                f"in order: {' → '.join(e.describe() for e in wanted)}",
                False,
                f"step {step + 1} ({expectation.describe()}): {why}",
            )
        position = hit  # one message may show two things in a row (a diagnosis and its risk)
    return Check(f"in order: {' → '.join(e.describe() for e in wanted)}", True)

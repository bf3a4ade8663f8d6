"""The resolve summary of an incident that flapped, built through the real store as the pass
builds it: each thing seen said once, the reopens counted once, the last cycle's outcome, and
the time to approve measured within the cycle that was approved."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.incidents.summary import summarize, summary_lines
from bot.model import Incident, IncidentState, Lang, TimelineEntry, TimelineKind
from bot.store.sql import SqlStore
from tests.helpers.builders import diagnosis

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
SEEN = "GPU fell off the bus: Xid 79 on GPU 3"
GATE = "health gate: fails: GPU count 7 of 8"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    try:
        yield opened
    finally:
        opened.close()


def fire(store: SqlStore, at: datetime) -> Incident:
    """The pass's way: record the diagnosis; a new or reopened incident gets its line."""
    found = diagnosis(rule="xid-79").model_copy(update={"summary": "Xid 79 on GPU 3"})
    recorded = store.record_diagnosis("prod", found, at, 3600)
    incident = recorded.incident
    if recorded.change in ("new", "reopened"):
        note(store, incident, at, "diagnosis", f"{found.title}: {found.summary}")
    return incident


def note(
    store: SqlStore,
    incident: Incident,
    at: datetime,
    kind: TimelineKind,
    text: str,
    actor: str = "gpubot",
) -> None:
    store.append(TimelineEntry(incident=incident.id, at=at, actor=actor, kind=kind, text=text))


def resolve(
    store: SqlStore, incident: Incident, at: datetime, why: str, actor: str = "gpubot"
) -> Incident:
    return store.transition(incident.id, IncidentState.RESOLVED, actor, at, why)


GONE = "xid-79 no longer matches: the symptom is gone"


def a_flapping_incident(store: SqlStore) -> Incident:
    """Four cycles: the first proposes a cordon nobody answers; the middle two see the health
    gate fail; the last is approved within 5 minutes, acted on, and resolved by a person."""
    incident = fire(store, T0)
    note(store, incident, T0 + MINUTE, "proposal", "cordon gpu-a1")
    resolve(store, incident, T0 + 10 * MINUTE, GONE)
    fire(store, T0 + 20 * MINUTE)
    note(store, incident, T0 + 25 * MINUTE, "gate", GATE)
    resolve(store, incident, T0 + 30 * MINUTE, GONE)
    fire(store, T0 + 40 * MINUTE)
    note(store, incident, T0 + 45 * MINUTE, "gate", GATE)
    resolve(store, incident, T0 + 50 * MINUTE, GONE)
    fire(store, T0 + 60 * MINUTE)
    note(store, incident, T0 + 61 * MINUTE, "proposal", "cordon gpu-a1")
    note(
        store,
        incident,
        T0 + 66 * MINUTE,
        "approval",
        "alice approved kubectl cordon gpu-a1",
        actor="alice",
    )
    note(store, incident, T0 + 67 * MINUTE, "action-result", "cordon gpu-a1: succeeded")
    return resolve(store, incident, T0 + 90 * MINUTE, "replaced the GPU", actor="alice")


def test_a_flapping_incident_says_what_it_saw_once_and_how_often_it_reopened(
    store: SqlStore,
) -> None:
    done = a_flapping_incident(store)
    assert done.reopened == 3
    summary = summarize(done, store.timeline(done.id))
    assert summary.seen == [SEEN, GATE]
    assert summary.reopened == 3
    assert summary_lines(summary, Lang.EN) == [
        ("Duration", "1h 30m"),
        ("Reopened", "3 times"),
        ("Seen", f"{SEEN}\n{GATE}"),
        ("Decided", "alice: alice approved kubectl cordon gpu-a1"),
        ("Done", "cordon gpu-a1: succeeded"),
        ("Outcome", "resolved: replaced the GPU"),
        ("Time to approve", "5m 00s"),
        ("Time to recover", "1h 30m"),
    ]
    assert summary_lines(summary, Lang.ZH) == [
        ("持续时间", "1h 30m"),
        ("重开", "3 次"),
        ("观察到", f"{SEEN}\n{GATE}"),
        ("决策", "alice: alice approved kubectl cordon gpu-a1"),
        ("已执行", "cordon gpu-a1: succeeded"),
        ("结果", "已解决：replaced the GPU"),
        ("审批耗时", "5m 00s"),
        ("恢复耗时", "1h 30m"),
    ]


def test_a_single_reopen_is_said_once(store: SqlStore) -> None:
    incident = fire(store, T0)
    resolve(store, incident, T0 + 10 * MINUTE, GONE)
    fire(store, T0 + 20 * MINUTE)
    done = resolve(store, incident, T0 + 30 * MINUTE, GONE)
    lines = dict(summary_lines(summarize(done, store.timeline(done.id)), Lang.EN))
    assert lines["Reopened"] == "once"
    assert lines["Seen"] == SEEN
    assert lines["Outcome"] == f"resolved: {GONE}"
    assert dict(summary_lines(summarize(done, store.timeline(done.id)), Lang.ZH))["重开"] == "1 次"


def test_an_incident_that_never_reopened_has_no_reopen_line(store: SqlStore) -> None:
    incident = fire(store, T0)
    done = resolve(store, incident, T0 + 10 * MINUTE, GONE)
    summary = summarize(done, store.timeline(done.id))
    assert summary.reopened == 0
    assert [label for label, _ in summary_lines(summary, Lang.EN)] == [
        "Duration",
        "Seen",
        "Decided",
        "Done",
        "Outcome",
        "Time to approve",
        "Time to recover",
    ]
    assert dict(summary_lines(summary, Lang.EN))["Time to approve"] == "none"


def test_a_superseded_incidents_outcome_names_its_successor(store: SqlStore) -> None:
    incident = fire(store, T0)
    done = resolve(store, incident, T0 + 5 * MINUTE, "superseded by incident 7 (gpu-fell-off-bus)")
    lines = dict(summary_lines(summarize(done, store.timeline(done.id)), Lang.EN))
    assert lines["Outcome"] == "resolved: superseded by incident 7 (gpu-fell-off-bus)"


def test_a_still_open_incident_says_so(store: SqlStore) -> None:
    incident = fire(store, T0)
    lines = dict(summary_lines(summarize(incident, store.timeline(incident.id)), Lang.EN))
    assert (lines["Duration"], lines["Outcome"], lines["Time to recover"]) == (
        "still open",
        "open",
        "still open",
    )
    zh = dict(summary_lines(summarize(incident, store.timeline(incident.id)), Lang.ZH))
    assert (zh["持续时间"], zh["结果"]) == ("仍未解决", "待处理")

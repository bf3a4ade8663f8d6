"""The daily digest, from real incidents in a real store (SQLite and PostgreSQL): what was
opened and resolved in the window (each incident once, its reopen cycles apart, superseded ones
apart), which nodes are out of service (as the cluster shows them when it is read, else as the
timelines show), repeat offenders, the top symptoms as a chart, the median time to recover;
and when it runs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.config import Settings
from bot.errors import InputError
from bot.incidents.digest import (
    Digest,
    OutOfService,
    build_digest,
    digest_lines,
    next_run,
    still_out_note,
)
from bot.model import Action, ActionRequest, Incident, IncidentState, Lang, NodeFacts, TimelineEntry
from bot.ports import ExecutionOutcome
from bot.store.sql import SqlStore
from gpusim import faults
from tests.helpers.builders import diagnosis
from tests.helpers.rigs import build_service, console_chat, make_rig
from tests.helpers.stores import STORE_KINDS, open_store

T0 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
"""When the digest runs: it covers [T0 - 24 h, T0)."""
S = IncidentState
SHANGHAI = ZoneInfo("Asia/Shanghai")
BERLIN = ZoneInfo("Europe/Berlin")

_ids = itertools.count(1)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


# ---- building incidents through the store's public methods -----------------------------------


def opened(
    store: SqlStore, node: str | None, rule: str, at: datetime, reopen_window_s: int = 3600
) -> Incident:
    incident = store.record_diagnosis(
        "prod", diagnosis(rule=rule, node=node), at, reopen_window_s
    ).incident
    return incident


def resolve(store: SqlStore, incident: Incident, at: datetime) -> None:
    store.transition(incident.id, S.RESOLVED, "alice", at, "fixed")


def act(
    store: SqlStore,
    incident: Incident,
    action: Action,
    at: datetime,
    outcome: ExecutionOutcome = "succeeded",
) -> None:
    """An approved action run as the executor runs it: the request, the incident's moves and
    the "action-result" entry its `_finish` writes."""
    node = incident.node or "gpu-z9"
    request = ActionRequest(
        id=f"{incident.id}-{action.value}-{next(_ids)}",
        action=action,
        node=node,
        requested_by="gpubot",
        created_at=at - timedelta(minutes=5),
        expires_at=at + timedelta(minutes=30),
        facts_fingerprint="abc",
        incident=incident.id,
    )
    store.add_request(request)
    state = store.incident(incident.id).state
    path = [S.AWAITING_APPROVAL, S.APPROVED, S.EXECUTING]
    if state is S.OPEN:
        path.insert(0, S.DIAGNOSED)
    path.append(S.SUCCEEDED if outcome == "succeeded" else S.FAILED)
    for target in path:
        store.transition(incident.id, target, "gpubot", at)
    store.append(
        TimelineEntry(
            incident=incident.id,
            at=at,
            actor="gpubot",
            kind="action-result",
            text=f"{action.value} {node}: {outcome}",
            data={"request": request.id, "outcome": outcome},
        )
    )


def a_day_on_call(store: SqlStore) -> None:
    h = timedelta(hours=1)
    # Before the window: drained three days ago and never given back.
    old = opened(store, "gpu-a1", "gpu-fell-off-bus", T0 - 72 * h)
    act(store, old, Action.DRAIN, T0 - 71 * h)
    # Before the window, and over: nothing to say about it today.
    done = opened(store, "gpu-b1", "xid-79", T0 - 48 * h)
    resolve(store, done, T0 - 47 * h)
    # Opened yesterday before the window, resolved inside it: 8 h to recover.
    late = opened(store, "gpu-b2", "ecc-uncorrectable", T0 - 30 * h)
    resolve(store, late, T0 - 22 * h)
    # Inside the window.
    quick = opened(store, "gpu-a2", "xid-79", T0 - 20 * h)
    resolve(store, quick, T0 - 19 * h)  # 1 h
    cycled = opened(store, "gpu-a2", "gpu-fell-off-bus", T0 - 10 * h)
    act(store, cycled, Action.CORDON, T0 - 9 * h)
    act(store, cycled, Action.UNCORDON, T0 - 8 * h)  # given back
    resolve(store, cycled, T0 - 7 * h)  # 3 h
    failed = opened(store, "gpu-a3", "gpu-fell-off-bus", T0 - 6 * h)
    act(store, failed, Action.CORDON, T0 - 5 * h, outcome="failed")  # never taken out
    drained = opened(store, "gpu-a4", "gpu-fell-off-bus", T0 - 4 * h)
    act(store, drained, Action.DRAIN, T0 - 3 * h)
    opened(store, "gpu-a4", "xid-79", T0 - 2 * h)
    # After the digest ran: tomorrow's news.
    opened(store, "gpu-a5", "xid-79", T0 + h)


# ---- the digest ----------------------------------------------------------------------------


def test_a_day_on_call_in_numbers(store: SqlStore) -> None:
    a_day_on_call(store)
    digest = build_digest(store, T0)
    assert (digest.since, digest.until) == (T0 - timedelta(days=1), T0)
    assert (digest.opened, digest.resolved, digest.reopened) == (5, 3, 0)
    assert digest.still_out == [
        ("gpu-a1", T0 - timedelta(hours=71), "gpu-fell-off-bus"),
        ("gpu-a4", T0 - timedelta(hours=3), "gpu-fell-off-bus"),
    ]
    assert digest.repeat_offenders == [("gpu-a2", 2), ("gpu-a4", 2)]
    assert digest.top_symptoms == [("gpu-fell-off-bus", 3), ("xid-79", 2)]
    assert digest.median_recover_s == 3 * 3600  # of 1 h, 3 h and 8 h


def test_a_day_on_call_in_english(store: SqlStore) -> None:
    a_day_on_call(store)
    assert digest_lines(build_digest(store, T0), Lang.EN) == [
        "Last 24 hours: 5 opened, 3 resolved",
        "Still out of service (2):",
        "  gpu-a1  since 2026-11-29 10:00 UTC (2d 23h)  gpu-fell-off-bus",
        "  gpu-a4  since 2026-12-02 06:00 UTC (3h 00m)  gpu-fell-off-bus",
        "Repeat offenders: gpu-a2 (2×), gpu-a4 (2×)",
        "Most frequent symptoms:",
        "  gpu-fell-off-bus  ███ 3",
        "  xid-79            ██ 2",
        "Median time to recover: 3h 00m (over 3 resolved)",
    ]


def test_a_day_on_call_in_chinese_in_the_readers_time_zone(store: SqlStore) -> None:
    a_day_on_call(store)
    digest = build_digest(store, T0.astimezone(SHANGHAI))
    assert digest_lines(digest, Lang.ZH) == [
        "过去 24 小时：新开 5 起，已解决 3 起",
        "仍处于下线状态的节点（2 个）：",
        "  gpu-a1  自 2026-11-29 18:00 CST 起（已 2 天 23 小时）  gpu-fell-off-bus",
        "  gpu-a4  自 2026-12-02 14:00 CST 起（已 3 小时 0 分）  gpu-fell-off-bus",
        "反复出问题的节点：gpu-a2（2 次）、gpu-a4（2 次）",
        "最常见的症状：",
        "  gpu-fell-off-bus  ███ 3",
        "  xid-79            ██ 2",
        "恢复时间中位数：3 小时 0 分（共 3 起已解决）",
    ]


def test_a_quiet_day_says_so_in_one_line(store: SqlStore) -> None:
    done = opened(store, "gpu-b1", "xid-79", T0 - timedelta(days=3))
    resolve(store, done, T0 - timedelta(days=2))
    digest = build_digest(store, T0)
    assert digest.quiet
    assert (digest.opened, digest.resolved, digest.still_out) == (0, 0, [])
    assert digest.median_recover_s is None
    assert digest_lines(digest, Lang.EN) == [
        "Last 24 hours: quiet day: no incidents, every node in service."
    ]
    assert digest_lines(digest, Lang.ZH) == [
        "过去 24 小时：平安无事，没有事件，所有节点都在正常服务。"
    ]


def test_a_day_without_news_still_names_the_node_left_out(store: SqlStore) -> None:
    old = opened(store, "gpu-a1", "gpu-fell-off-bus", T0 - timedelta(days=3))
    act(store, old, Action.CORDON, T0 - timedelta(days=3) + timedelta(minutes=10))
    digest = build_digest(store, T0)
    assert not digest.quiet
    assert digest_lines(digest, Lang.EN) == [
        "Last 24 hours: 0 opened, 0 resolved",
        "Still out of service (1):",
        "  gpu-a1  since 2026-11-29 09:10 UTC (2d 23h)  gpu-fell-off-bus",
        "Median time to recover: none resolved",
    ]
    assert digest_lines(digest, Lang.ZH)[-1] == "恢复时间中位数：无（没有已解决的事件）"


def test_a_node_given_back_or_resolved_is_no_longer_out(store: SqlStore) -> None:
    back = opened(store, "gpu-a1", "gpu-fell-off-bus", T0 - timedelta(hours=5))
    act(store, back, Action.DRAIN, T0 - timedelta(hours=4))
    act(store, back, Action.UNCORDON, T0 - timedelta(hours=2))
    resolved = opened(store, "gpu-a2", "gpu-fell-off-bus", T0 - timedelta(hours=5))
    act(store, resolved, Action.CORDON, T0 - timedelta(hours=4))
    resolve(store, resolved, T0 - timedelta(hours=1))
    dry = opened(store, "gpu-a3", "gpu-fell-off-bus", T0 - timedelta(hours=5))
    act(store, dry, Action.CORDON, T0 - timedelta(hours=4), outcome="dry-run")
    assert build_digest(store, T0).still_out == []
    # The digest of the evening before, when both were still out.
    evening = build_digest(store, T0 - timedelta(hours=3))
    assert [node for node, _, _ in evening.still_out] == ["gpu-a1", "gpu-a2"]
    assert "No node out of service" in digest_lines(build_digest(store, T0), Lang.EN)
    assert "没有节点处于下线状态" in digest_lines(build_digest(store, T0), Lang.ZH)


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two(store: SqlStore) -> None:
    for node, minutes in [("gpu-a1", 10), ("gpu-a2", 90), ("gpu-a3", 20), ("gpu-a4", 40)]:
        incident = opened(store, node, "xid-79", T0 - timedelta(hours=3))
        resolve(store, incident, T0 - timedelta(hours=3) + timedelta(minutes=minutes))
    digest = build_digest(store, T0)
    assert digest.resolved == 4
    assert digest.median_recover_s == 30 * 60
    assert digest_lines(digest, Lang.EN)[-1] == "Median time to recover: 30m 00s (over 4 resolved)"
    assert digest_lines(digest, Lang.ZH)[-1] == "恢复时间中位数：30 分 0 秒（共 4 起已解决）"


def test_repeat_offenders_are_nodes_with_two_or_more(store: SqlStore) -> None:
    h = timedelta(hours=1)
    for hours_ago, node in [(9, "gpu-a1"), (8, "gpu-a2"), (7, "gpu-a1"), (6, "gpu-a3")]:
        opened(store, node, f"rule-{hours_ago}", T0 - hours_ago * h)
    for hours_ago in (5, 4, 3):
        opened(store, "gpu-a2", f"rule-{hours_ago}", T0 - hours_ago * h)
    opened(store, None, "pool-wide", T0 - h)  # a pool's incident names no node
    digest = build_digest(store, T0)
    assert digest.repeat_offenders == [("gpu-a2", 4), ("gpu-a1", 2)]
    assert "Repeat offenders: gpu-a2 (4×), gpu-a1 (2×)" in digest_lines(digest, Lang.EN)
    assert "反复出问题的节点：gpu-a2（4 次）、gpu-a1（2 次）" in digest_lines(digest, Lang.ZH)


def test_no_repeat_offender_line_when_every_node_had_one(store: SqlStore) -> None:
    opened(store, "gpu-a1", "xid-79", T0 - timedelta(hours=2))
    opened(store, "gpu-a2", "xid-79", T0 - timedelta(hours=1))
    digest = build_digest(store, T0)
    assert digest.repeat_offenders == []
    assert not [line for line in digest_lines(digest, Lang.EN) if "Repeat" in line]
    assert not [line for line in digest_lines(digest, Lang.ZH) if "反复" in line]


def test_a_flapping_incident_is_one_incident_and_recovers_from_its_first_open(
    store: SqlStore,
) -> None:
    h = timedelta(hours=1)
    first = opened(store, "gpu-a1", "xid-79", T0 - 10 * h)
    resolve(store, first, T0 - 9 * h)
    again = opened(store, "gpu-a1", "xid-79", T0 - 5 * h, reopen_window_s=6 * 3600)
    assert again.id == first.id and again.reopened == 1
    resolve(store, again, T0 - 4 * h)
    digest = build_digest(store, T0)
    # One incident, opened once and resolved once; its reopen is a cycle of its own.
    assert (digest.opened, digest.reopened, digest.flapped, digest.resolved) == (1, 1, 1, 1)
    assert digest.median_recover_s == 6 * 3600  # from its first open to its final resolve
    assert digest.repeat_offenders == [("gpu-a1", 2)]  # it went bad twice
    assert digest.top_symptoms == [("xid-79", 1)]
    assert digest_lines(digest, Lang.EN)[0] == (
        "Last 24 hours: 1 opened, 1 resolved; 1 flapped, 1 reopen cycle"
    )
    assert digest_lines(digest, Lang.ZH)[0] == (
        "过去 24 小时：新开 1 起，已解决 1 起；反复发作 1 起，重开 1 次"
    )


def an_hour_live(store: SqlStore) -> None:
    """What the live hour showed: incidents that resolve and reopen again and again, one
    opened before the window that flaps inside it, better diagnoses superseding first ones
    (as the pass writes it, and as a newer gpubot writes it: `superseded_by` in the data)."""
    h = timedelta(hours=1)
    six_hours = 6 * 3600
    # gpu-a1: opened, then reopened twice; over at -14 h: 6 h from its first open.
    flapper = opened(store, "gpu-a1", "xid-79", T0 - 20 * h)
    resolve(store, flapper, T0 - 19 * h)
    opened(store, "gpu-a1", "xid-79", T0 - 18 * h, reopen_window_s=six_hours)
    resolve(store, flapper, T0 - 17 * h)
    opened(store, "gpu-a1", "xid-79", T0 - 15 * h, reopen_window_s=six_hours)
    resolve(store, flapper, T0 - 14 * h)
    # gpu-b1: opened yesterday before the window, reopened inside it, over at -9 h.
    early = opened(store, "gpu-b1", "ecc-uncorrectable", T0 - 30 * h)
    resolve(store, early, T0 - 29 * h)
    opened(store, "gpu-b1", "ecc-uncorrectable", T0 - 10 * h, reopen_window_s=24 * 3600)
    resolve(store, early, T0 - 9 * h)
    # gpu-a3: a first story superseded by a better one (the pass's words); that one took 2 h.
    first = opened(store, "gpu-a3", "gpu-missing", T0 - 8 * h)
    better = opened(store, "gpu-a3", "gpu-fell-off-bus", T0 - 7 * h)
    store.transition(
        first.id,
        S.RESOLVED,
        "gpubot",
        T0 - 7 * h,
        f"superseded by incident {better.id} ({better.rule})",
    )
    resolve(store, better, T0 - 5 * h)
    # gpu-a4: the same, said in the data; the better one is still open.
    first = opened(store, "gpu-a4", "gpu-missing", T0 - 6 * h)
    better = opened(store, "gpu-a4", "gpu-fell-off-bus", T0 - 6 * h + timedelta(minutes=30))
    store.transition(
        first.id,
        S.RESOLVED,
        "gpubot",
        T0 - 6 * h + timedelta(minutes=30),
        "a better diagnosis took over",
        data={"superseded_by": better.id},
    )
    # gpu-a5: resolved and reopened: open again when the digest runs.
    again = opened(store, "gpu-a5", "xid-79", T0 - 3 * h)
    resolve(store, again, T0 - 2 * h)
    opened(store, "gpu-a5", "xid-79", T0 - h, reopen_window_s=six_hours)


def test_each_incident_counts_once_reopens_apart_and_superseded_ones_are_no_recovery(
    store: SqlStore,
) -> None:
    an_hour_live(store)
    digest = build_digest(store, T0)
    # Opened: the six new incidents of the window (not gpu-b1's, opened before it).
    assert digest.opened == 6
    # Reopen cycles: gpu-a1 2, gpu-b1 1, gpu-a5 1; three incidents flapped.
    assert (digest.reopened, digest.flapped) == (4, 3)
    # Recovered: gpu-a1 (6 h), gpu-b1 (21 h), gpu-a3's better one (2 h); two superseded.
    assert (digest.resolved, digest.superseded) == (3, 2)
    assert digest.median_recover_s == 6 * 3600
    assert digest.repeat_offenders == [("gpu-a1", 3), ("gpu-a3", 2), ("gpu-a4", 2), ("gpu-a5", 2)]
    assert digest.top_symptoms == [
        ("gpu-fell-off-bus", 2),
        ("gpu-missing", 2),
        ("xid-79", 2),
        ("ecc-uncorrectable", 1),
    ]


def test_an_hour_live_in_english_and_chinese(store: SqlStore) -> None:
    an_hour_live(store)
    assert digest_lines(build_digest(store, T0), Lang.EN) == [
        "Last 24 hours: 6 opened, 3 resolved, 2 superseded; 3 flapped, 4 reopen cycles",
        "No node out of service",
        "Repeat offenders: gpu-a1 (3×), gpu-a3 (2×), gpu-a4 (2×), gpu-a5 (2×)",
        "Most frequent symptoms:",
        "  gpu-fell-off-bus   ██ 2",
        "  gpu-missing        ██ 2",
        "  xid-79             ██ 2",
        "  ecc-uncorrectable  █ 1",
        "Median time to recover: 6h 00m (over 3 resolved)",
    ]
    zh = digest_lines(build_digest(store, T0.astimezone(SHANGHAI)), Lang.ZH)
    assert zh[0] == "过去 24 小时：新开 6 起，已解决 3 起，被取代 2 起；反复发作 3 起，重开 4 次"
    assert zh[-1] == "恢复时间中位数：6 小时 0 分（共 3 起已解决）"


def test_a_superseded_or_reopened_day_is_not_quiet(store: SqlStore) -> None:
    h = timedelta(hours=1)
    flapper = opened(store, "gpu-a1", "xid-79", T0 - 30 * h)
    resolve(store, flapper, T0 - 29 * h)
    opened(store, "gpu-a1", "xid-79", T0 - 3 * h, reopen_window_s=30 * 3600)
    digest = build_digest(store, T0)
    assert (digest.opened, digest.reopened, digest.flapped) == (0, 1, 1)
    assert not digest.quiet
    assert digest_lines(digest, Lang.EN)[0] == (
        "Last 24 hours: 0 opened, 0 resolved; 1 flapped, 1 reopen cycle"
    )


# ---- nodes out of service, as the cluster shows them -----------------------------------------


def a_cluster_with_nodes_out(store: SqlStore) -> dict[str, OutOfService]:
    """The timelines, and the nodes the blast radius counts as out of service now."""
    h = timedelta(hours=1)
    # gpu-a1: drained by gpubot three days ago; the node shows no cordon time.
    old = opened(store, "gpu-a1", "gpu-fell-off-bus", T0 - 72 * h)
    act(store, old, Action.DRAIN, T0 - 71 * h)
    # gpu-a2: cordoned by gpubot, its incident resolved while the node stayed cordoned.
    kept = opened(store, "gpu-a2", "gpu-fell-off-bus", T0 - 5 * h)
    act(store, kept, Action.CORDON, T0 - 4 * h)
    resolve(store, kept, T0 - h)
    # gpu-a5: drained by gpubot, then uncordoned by hand: back in service, whatever the
    # timeline says.
    back = opened(store, "gpu-a5", "gpu-fell-off-bus", T0 - 3 * h)
    act(store, back, Action.DRAIN, T0 - 2 * h)
    # gpu-h2: an open incident gpubot did nothing about; someone cordoned the node.
    opened(store, "gpu-h2", "xid-79", T0 - 90 * timedelta(minutes=1))
    # gpu-a4: an open incident; the node is NotReady, not cordoned.
    opened(store, "gpu-a4", "xid-79", T0 - 30 * timedelta(minutes=1))
    return {
        "gpu-a1": OutOfService(cordoned=True, not_ready=False),
        "gpu-a2": OutOfService(
            cordoned=True, not_ready=False, cordoned_at=T0 - 4 * h - timedelta(minutes=1)
        ),
        "gpu-h1": OutOfService(cordoned=True, not_ready=False, cordoned_at=T0 - 2 * h),
        "gpu-h2": OutOfService(cordoned=True, not_ready=False, cordoned_at=T0 - h),
        "gpu-a4": OutOfService(cordoned=False, not_ready=True),
        "gpu-n1": OutOfService(cordoned=False, not_ready=True),
    }


def test_still_out_is_every_node_the_cluster_shows_out_with_since_and_its_incidents(
    store: SqlStore,
) -> None:
    out = a_cluster_with_nodes_out(store)
    digest = build_digest(store, T0, out_of_service=out)
    assert digest.still_out == [
        ("gpu-a1", T0 - timedelta(hours=71), "gpu-fell-off-bus"),
        ("gpu-a2", T0 - timedelta(hours=4, minutes=1), ""),
        ("gpu-h1", T0 - timedelta(hours=2), ""),
        ("gpu-h2", T0 - timedelta(hours=1), "xid-79"),
        ("gpu-a4", None, "xid-79"),
        ("gpu-n1", None, ""),
    ]
    assert digest_lines(digest, Lang.EN) == [
        "Last 24 hours: 4 opened, 1 resolved",
        "Still out of service (6):",
        "  gpu-a1  since 2026-11-29 10:00 UTC (2d 23h)  gpu-fell-off-bus",
        "  gpu-a2  since 2026-12-02 04:59 UTC (4h 01m)  cordoned by gpubot, no open incident",
        "  gpu-h1  since 2026-12-02 07:00 UTC (2h 00m)  cordoned by hand, no open incident",
        "  gpu-h2  since 2026-12-02 08:00 UTC (1h 00m)  xid-79 (cordoned by hand)",
        "  gpu-a4  since unknown  xid-79 (not Ready)",
        "  gpu-n1  since unknown  not Ready, no open incident",
        "Most frequent symptoms:",
        "  gpu-fell-off-bus  ██ 2",
        "  xid-79            ██ 2",
        "Median time to recover: 4h 00m (over 1 resolved)",
    ]
    zh = digest_lines(build_digest(store, T0.astimezone(SHANGHAI), out_of_service=out), Lang.ZH)
    assert zh[1:8] == [
        "仍处于下线状态的节点（6 个）：",
        "  gpu-a1  自 2026-11-29 18:00 CST 起（已 2 天 23 小时）  gpu-fell-off-bus",
        "  gpu-a2  自 2026-12-02 12:59 CST 起（已 4 小时 1 分）  由 gpubot 封锁，无未解决的事件",
        "  gpu-h1  自 2026-12-02 15:00 CST 起（已 2 小时 0 分）  手动封锁，无未解决的事件",
        "  gpu-h2  自 2026-12-02 16:00 CST 起（已 1 小时 0 分）  xid-79（手动封锁）",
        "  gpu-a4  起始时间不明  xid-79（未就绪）",
        "  gpu-n1  起始时间不明  未就绪，无未解决的事件",
    ]
    assert still_out_note(digest, Lang.EN) is None


def test_without_the_cluster_still_out_is_what_the_timelines_show_and_says_so(
    store: SqlStore,
) -> None:
    a_cluster_with_nodes_out(store)
    digest = build_digest(store, T0)
    # The timelines alone: gpubot's take-outs on unresolved incidents, even gpu-a5's that a
    # person undid; nothing cordoned by hand, nothing NotReady.
    assert [node for node, _, _ in digest.still_out] == ["gpu-a1", "gpu-a5"]
    assert still_out_note(digest, Lang.EN) == (
        "(Nodes out of service as far as the timelines show: the cluster was not read.)"
    )
    assert still_out_note(digest, Lang.ZH) == "（下线节点仅依据事件时间线，未读取集群。）"


def test_a_day_without_incidents_but_a_node_cordoned_by_hand_is_not_quiet(
    store: SqlStore,
) -> None:
    out = {
        "gpu-h1": OutOfService(cordoned=True, not_ready=False, cordoned_at=T0 - timedelta(hours=30))
    }
    digest = build_digest(store, T0, out_of_service=out)
    assert not digest.quiet
    assert digest_lines(digest, Lang.EN) == [
        "Last 24 hours: 0 opened, 0 resolved",
        "Still out of service (1):",
        "  gpu-h1  since 2026-12-01 03:00 UTC (1d 6h)  cordoned by hand, no open incident",
        "Median time to recover: none resolved",
    ]


def test_out_of_service_is_read_from_a_nodes_facts() -> None:
    cordoned = NodeFacts(name="gpu-a1", unschedulable=True, cordoned_for_s=7200, ready="True")
    assert OutOfService.of(cordoned, T0) == OutOfService(
        cordoned=True, not_ready=False, cordoned_at=T0 - timedelta(hours=2)
    )
    down = NodeFacts(name="gpu-a2", ready="Unknown")
    assert OutOfService.of(down, T0) == OutOfService(cordoned=False, not_ready=True)


def test_the_leaders_digest_reads_the_cluster_for_nodes_out_of_service(
    sim_cluster: Any, tmp_path: Path
) -> None:
    rig = make_rig(sim_cluster, tmp_path)
    rig.clock.now = rig.clock.now.replace(microsecond=0)
    try:
        started = rig.clock.now
        assert rig.wing.approve(rig.request(Action.CORDON), "alice").status == "succeeded"
        faults.cordon(rig.server.store, "gpu-a1", started - timedelta(hours=2))  # by hand
        rig.clock.now += timedelta(minutes=30)
        settings = Settings()
        chat, _ = console_chat(Lang.EN)
        service = build_service(
            rig.cluster, rig.store, settings, clock=rig.clock, chat=chat, wing=rig.wing
        )
        told = service.post_digest()
        shown = started.strftime("%Y-%m-%d %H:%M UTC")
        by_hand = (started - timedelta(hours=2)).strftime("%Y-%m-%d %H:%M UTC")
        out = told[told.index("Still out of service (2):") + 1 :][:2]
        assert out == [
            f"  gpu-a1  since {by_hand} (2h 30m)  cordoned by hand, no open incident",
            f"  gpu-a3  since {shown} (30m 00s)  gpu-fell-off-bus",
        ]
    finally:
        rig.store.close()


def test_at_most_five_symptoms_most_first(store: SqlStore) -> None:
    counts = {"a-rule": 1, "b-rule": 6, "c-rule": 2, "d-rule": 3, "e-rule": 1, "f-rule": 4}
    minute = 0
    for rule, count in counts.items():
        for n in range(count):
            minute += 1
            opened(store, f"gpu-{rule}-{n}", rule, T0 - timedelta(minutes=minute))
    digest = build_digest(store, T0)
    assert digest.top_symptoms == [
        ("b-rule", 6),
        ("f-rule", 4),
        ("d-rule", 3),
        ("c-rule", 2),
        ("a-rule", 1),
    ]
    lines = digest_lines(digest, Lang.EN)
    chart = lines[lines.index("Most frequent symptoms:") + 1 :][:5]
    assert chart == [
        "  b-rule  ██████ 6",
        "  f-rule  ████ 4",
        "  d-rule  ███ 3",
        "  c-rule  ██ 2",
        "  a-rule  █ 1",
    ]


def test_a_big_day_scales_the_chart_down() -> None:
    digest = Digest(
        since=T0 - timedelta(days=7),
        until=T0,
        opened=81,
        resolved=0,
        top_symptoms=[("gpu-fell-off-bus", 80), ("xid-79", 1)],
    )
    lines = digest_lines(digest, Lang.EN)
    assert lines[0] == "Last 7 days: 81 opened, 0 resolved"
    assert "  gpu-fell-off-bus  " + "█" * 20 + " 80" in lines
    assert "  xid-79            █ 1" in lines  # never an empty bar
    assert digest_lines(digest, Lang.ZH)[0] == "过去 7 天：新开 81 起，已解决 0 起"


def test_the_executors_own_cordon_and_uncordon_move_the_node_out_and_back(
    sim_cluster: Any, tmp_path: Path
) -> None:
    rig = make_rig(sim_cluster, tmp_path)
    try:
        assert rig.wing.approve(rig.request(Action.CORDON), "alice").status == "succeeded"
        out = build_digest(rig.store, rig.clock.now + timedelta(minutes=1))
        assert [(node, rule) for node, _, rule in out.still_out] == [("gpu-a3", "gpu-fell-off-bus")]
        assert out.opened == 1
        rig.clock.now += timedelta(minutes=30)
        assert rig.wing.approve(rig.request(Action.UNCORDON), "alice").status == "succeeded"
        assert build_digest(rig.store, rig.clock.now + timedelta(minutes=1)).still_out == []
    finally:
        rig.store.close()


def test_build_refuses_a_naive_until(store: SqlStore) -> None:
    with pytest.raises(ValueError, match="aware"):
        build_digest(store, datetime(2026, 12, 2, 9, 0))


# ---- when it runs -----------------------------------------------------------------------------


def test_next_run_keeps_local_time_across_the_autumn_dst_change() -> None:
    # Berlin leaves summer time on 2026-10-25 (03:00 CEST -> 02:00 CET).
    before = next_run(datetime(2026, 10, 23, 8, 0, tzinfo=UTC), "09:00", "Europe/Berlin")
    assert before == datetime(2026, 10, 24, 7, 0, tzinfo=UTC)  # 09:00 CEST
    after = next_run(before, "09:00", "Europe/Berlin")
    assert after == datetime(2026, 10, 25, 8, 0, tzinfo=UTC)  # 09:00 CET, 25 h later
    assert after.astimezone(BERLIN).hour == 9
    assert after.utcoffset() == timedelta(0)


def test_next_run_at_a_time_that_happens_twice_runs_once() -> None:
    # 02:30 happens twice in Berlin on 2026-10-25: at 00:30 and at 01:30 UTC.
    first = next_run(datetime(2026, 10, 25, 0, 0, tzinfo=UTC), "02:30", "Europe/Berlin")
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert next_run(first, "02:30", "Europe/Berlin") == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)


def test_next_run_at_a_time_the_clocks_skip_runs_after_the_jump() -> None:
    # 02:30 does not exist in Berlin on 2026-03-29 (02:00 CET -> 03:00 CEST).
    skipped = next_run(datetime(2026, 3, 28, 12, 0, tzinfo=UTC), "02:30", "Europe/Berlin")
    assert skipped == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # 03:30 CEST


def test_next_run_in_shanghai_is_strictly_after_now() -> None:
    assert next_run(datetime(2026, 12, 2, 0, 30, tzinfo=UTC), "09:00", "Asia/Shanghai") == (
        datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    )
    # Exactly 09:00 in Shanghai, given in Shanghai time: today's run is the one happening now.
    now = datetime(2026, 12, 2, 9, 0, tzinfo=SHANGHAI)
    assert next_run(now, "09:00", "Asia/Shanghai") == datetime(2026, 12, 3, 1, 0, tzinfo=UTC)
    assert next_run(now, "9:01", "Asia/Shanghai") == datetime(2026, 12, 2, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("at", ["25:00", "24:00", "09:60", "0900", "9", "", "09:00:00", "ab:cd"])
def test_a_bad_time_of_day_is_refused(at: str) -> None:
    with pytest.raises(InputError, match="HH:MM"):
        next_run(T0, at, "Asia/Shanghai")


@pytest.mark.parametrize("tz", ["Mars/Base", "", "Europe", "../etc/passwd", "utc"])
def test_an_unknown_time_zone_is_refused(tz: str) -> None:
    with pytest.raises(InputError, match="time zone"):
        next_run(T0, "09:00", tz)


def test_a_diagnosis_superseded_in_place_is_one_incident_opened_once_and_never_reopened(
    store: SqlStore,
) -> None:
    h = timedelta(hours=1)
    first = opened(store, "gpu-a2", "gpu-capacity-short", T0 - 3 * h)
    store.transition(first.id, S.DIAGNOSED, "gpubot", T0 - 3 * h)
    store.transition(first.id, S.AWAITING_APPROVAL, "gpubot", T0 - 3 * h)
    better = store.record_diagnosis(
        "prod",
        diagnosis(rule="gpu-fell-off-bus", node="gpu-a2"),
        T0 - 3 * h + timedelta(seconds=15),
        3600,
        replaces=("gpu-capacity-short",),
    )
    assert (better.change, better.incident.id) == ("superseded", first.id)
    resolve(store, better.incident, T0 - h)
    digest = build_digest(store, T0)
    # Back to open from awaiting approval is the better story starting, not a flap.
    assert (digest.opened, digest.reopened, digest.flapped, digest.resolved) == (1, 0, 0, 1)
    assert digest.superseded == 1
    assert digest.median_recover_s == 2 * 3600
    assert digest.repeat_offenders == []


def superseded_in_place(store: SqlStore, node: str, at: datetime, *rules: str) -> Incident:
    """An incident opened with `rules[0]`, each later rule superseding the one before it in
    place (as the pass records a better diagnosis of the same node), 10 s apart."""
    first = opened(store, node, rules[0], at)
    for step, (earlier, rule) in enumerate(itertools.pairwise(rules), 1):
        store.transition(first.id, S.DIAGNOSED, "gpubot", at + timedelta(seconds=10 * step - 5))
        recorded = store.record_diagnosis(
            "prod",
            diagnosis(rule=rule, node=node),
            at + timedelta(seconds=10 * step),
            3600,
            replaces=(earlier,),
        )
        assert (recorded.change, recorded.incident.id) == ("superseded", first.id)
    return store.incident(first.id)


def test_superseded_counts_the_incidents_a_better_diagnosis_took_over_in_place(
    store: SqlStore,
) -> None:
    h = timedelta(hours=1)
    # Superseded twice inside the window, then resolved: one incident, one recovery.
    twice = superseded_in_place(
        store, "gpu-a1", T0 - 5 * h, "gpu-capacity-short", "gpu-fell-off-bus", "gpu-ecc-error"
    )
    resolve(store, twice, T0 - 3 * h)
    # Superseded inside the window, still open.
    superseded_in_place(store, "gpu-a2", T0 - 2 * h, "gpu-capacity-short", "gpu-fell-off-bus")
    # Superseded the day before: not this window's news, though it resolved inside it.
    old = superseded_in_place(
        store, "gpu-a3", T0 - 30 * h, "gpu-capacity-short", "gpu-fell-off-bus"
    )
    resolve(store, old, T0 - 20 * h)
    digest = build_digest(store, T0)
    assert (digest.opened, digest.resolved, digest.superseded) == (2, 2, 2)
    assert (digest.reopened, digest.flapped) == (0, 0)
    # Each recovers from its first open: the problem began then, whatever it was called.
    assert digest.median_recover_s == 6 * 3600
    assert digest_lines(digest, Lang.EN)[0] == ("Last 24 hours: 2 opened, 2 resolved, 2 superseded")
    assert digest_lines(digest, Lang.ZH)[0] == "过去 24 小时：新开 2 起，已解决 2 起，被取代 2 起"

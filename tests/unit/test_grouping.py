"""Where a diagnosis goes among its subject's incidents, decided without a database: the open
one of its rule, one a better diagnosis takes over, one resolved within the flap window, or a
new one; the store writes what this says (tests/contract/test_store.py proves it does)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bot.incidents.grouping import group, reopen_since
from bot.incidents.lifecycle import IllegalTransition
from bot.model import Incident, Severity
from tests.helpers.builders import T0, S, diagnosis

HOUR = 3600


def incident(
    key: str,
    rule: str = "gpu-fell-off-bus",
    state: S = S.OPEN,
    updated_at: datetime = T0,
    resolved_at: datetime | None = None,
) -> Incident:
    return Incident(
        id=key,
        cluster="prod",
        node="gpu-a1",
        pool="a100-east",
        rule=rule,
        state=state,
        severity=Severity.CRITICAL,
        title="t",
        opened_at=T0 - timedelta(hours=5),
        updated_at=updated_at,
        resolved_at=resolved_at,
    )


def test_with_nothing_standing_the_diagnosis_opens_a_new_incident() -> None:
    grouping = group(diagnosis(), [], T0, HOUR)
    assert (grouping.change, grouping.incident, grouping.withdrawal) == ("new", None, None)
    assert grouping.data == {"to": "open", "rule": "gpu-fell-off-bus"}
    assert grouping.replaced is None


@pytest.mark.parametrize("state", [s for s in S if s is not S.RESOLVED])
def test_the_open_incident_of_the_rule_is_updated_whatever_its_live_state(state: S) -> None:
    live = incident("7", state=state)
    recent = incident("3", state=S.RESOLVED, resolved_at=T0 - timedelta(minutes=5))
    grouping = group(diagnosis(), [recent, live], T0, HOUR, replaces=("gpu-capacity-short",))
    assert (grouping.change, grouping.incident) == ("updated", live)
    assert (dict(grouping.data), grouping.withdrawal) == ({}, None)


def test_a_better_diagnosis_takes_over_the_latest_updated_incident_it_replaces() -> None:
    older = incident(
        "4", rule="gpu-capacity-short", state=S.DIAGNOSED, updated_at=T0 - timedelta(minutes=9)
    )
    newer = incident(
        "5", rule="gpu-degraded", state=S.AWAITING_APPROVAL, updated_at=T0 - timedelta(minutes=1)
    )
    grouping = group(
        diagnosis(), [older, newer], T0, HOUR, replaces=("gpu-capacity-short", "gpu-degraded")
    )
    assert (grouping.change, grouping.incident, grouping.replaced) == (
        "superseded",
        newer,
        "gpu-degraded",
    )
    assert grouping.data == {
        "from": "awaiting_approval",
        "to": "open",
        "superseded": "gpu-degraded",
        "rule": "gpu-fell-off-bus",
    }
    assert grouping.withdrawal is not None and "incident 5" in grouping.withdrawal
    assert "gpu-fell-off-bus" in grouping.withdrawal


def test_an_executing_or_resolved_incident_is_never_taken_over() -> None:
    running = incident("4", rule="gpu-capacity-short", state=S.EXECUTING)
    gone = incident("5", rule="gpu-capacity-short", state=S.RESOLVED, resolved_at=T0)
    grouping = group(diagnosis(), [running, gone], T0, HOUR, replaces=("gpu-capacity-short",))
    assert (grouping.change, grouping.incident) == ("new", None)


def test_a_rule_not_named_in_replaces_is_not_taken_over() -> None:
    other = incident("4", rule="ecc-double-bit")
    assert group(diagnosis(), [other], T0, HOUR, replaces=("gpu-capacity-short",)).change == "new"
    assert group(diagnosis(), [other], T0, HOUR).change == "new"


def test_taking_over_comes_before_reopening() -> None:
    replaced = incident("4", rule="gpu-capacity-short", state=S.DENIED)
    recent = incident("3", state=S.RESOLVED, resolved_at=T0 - timedelta(minutes=5))
    grouping = group(diagnosis(), [recent, replaced], T0, HOUR, replaces=("gpu-capacity-short",))
    assert (grouping.change, grouping.incident) == ("superseded", replaced)


def test_firing_again_within_the_window_reopens_the_latest_resolved_one() -> None:
    earlier = incident("2", state=S.RESOLVED, resolved_at=T0 - timedelta(minutes=50))
    latest = incident("3", state=S.RESOLVED, resolved_at=T0 - timedelta(minutes=20))
    grouping = group(diagnosis(), [latest, earlier], T0, HOUR)
    assert (grouping.change, grouping.incident) == ("reopened", latest)
    assert grouping.data == {"from": "resolved", "to": "open"}
    assert grouping.withdrawal is None and grouping.replaced is None


def test_a_resolve_at_the_edge_of_the_window_reopens_and_one_before_it_does_not() -> None:
    edge = incident("3", state=S.RESOLVED, resolved_at=reopen_since(T0, HOUR))
    assert group(diagnosis(), [edge], T0, HOUR).change == "reopened"
    before = incident("3", state=S.RESOLVED, resolved_at=T0 - timedelta(seconds=HOUR + 1))
    assert group(diagnosis(), [before], T0, HOUR).change == "new"


def test_another_rules_resolved_incident_is_not_reopened() -> None:
    other = incident("3", rule="ecc-double-bit", state=S.RESOLVED, resolved_at=T0)
    assert group(diagnosis(), [other], T0, HOUR).change == "new"


def test_the_window_starts_that_many_seconds_before_now() -> None:
    assert reopen_since(T0, 90) == T0 - timedelta(seconds=90)


def test_a_move_the_lifecycle_forbids_is_refused_not_chosen() -> None:
    """Open to open is no move the lifecycle knows: an incident not diagnosed yet is not taken
    over, it raises (and the store, which asks first, writes nothing)."""
    undiagnosed = incident("4", rule="gpu-capacity-short", state=S.OPEN)
    with pytest.raises(IllegalTransition):
        group(diagnosis(), [undiagnosed], T0, HOUR, replaces=("gpu-capacity-short",))

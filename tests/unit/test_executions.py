"""The execution states, written down once (`bot.acting.executions.TRANSITIONS`), and the one
vocabulary of what happened to a request (`bot.model.RequestStatus`)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest

from bot.acting.executions import TRANSITIONS, UNFINISHED, Held, IllegalExecutionMove
from bot.model import ExecutionOutcome, Judgement, RequestStatus
from bot.pipeline.relay import FINAL, PRIVATE
from bot.store.sql import SqlStore
from tests.helpers.builders import T0, diagnosis, request_for
from tests.helpers.clocks import FakeClock


def test_every_state_an_execution_row_can_hold_is_in_the_table_and_reachable() -> None:
    assert set(TRANSITIONS) == {None, *get_args(ExecutionOutcome)}
    reached: set[ExecutionOutcome | None] = {None}
    frontier: list[ExecutionOutcome | None] = [None]
    while frontier:
        for after in TRANSITIONS[frontier.pop()]:
            if after not in reached:
                reached.add(after)
                frontier.append(after)
    assert reached == set(TRANSITIONS)


def test_only_running_and_acting_are_unfinished_and_a_finished_row_never_moves() -> None:
    assert frozenset({"running", "acting"}) == UNFINISHED
    for state, after in TRANSITIONS.items():
        if state not in UNFINISHED and state is not None:
            assert after == frozenset(), state


def test_a_denial_or_a_withdrawal_is_born_finished_and_a_claim_cannot_skip_its_checks(
    tmp_path: Path,
) -> None:
    assert TRANSITIONS[None] == {"running", "denied", "withdrawn"}
    assert "succeeded" not in TRANSITIONS["running"]  # only through `acting`
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    held = Held(store, "here", FakeClock(), "r1", None)
    held.move("running")
    with pytest.raises(IllegalExecutionMove, match="cannot go from running to succeeded"):
        held.move("succeeded")
    held.move("acting")
    held.move("succeeded")
    with pytest.raises(IllegalExecutionMove, match="from succeeded it may go to: nothing"):
        held.move("failed")


def test_what_the_policy_and_the_store_say_are_words_of_the_one_vocabulary() -> None:
    words = set(get_args(RequestStatus))
    assert set(get_args(Judgement)) <= words
    assert set(get_args(ExecutionOutcome)) <= words
    assert words >= FINAL and words >= PRIVATE
    assert not FINAL & PRIVATE


def test_an_owner_that_slept_past_its_freshness_asks_the_store_before_it_writes(
    tmp_path: Path,
) -> None:
    """Issue 31, finding 1: a replica frozen past its heartbeat woke up and evicted before its
    heartbeat thread learned it had been taken over. Its fence trusts its own monotonic clock
    only while ownership is fresh; after a longer gap it asks the store, and a taken-over
    execution writes nothing more."""
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    clock = FakeClock(start=T0)
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    paused = Held(store, "replica-a", clock, "r1", None, fresh_s=3600)
    assert paused.claim()
    assert paused.may_write()  # fresh: no round trip to the store
    # Replica b takes the execution over while replica a sleeps.
    assert store.take_over_execution("r1", "replica-b", T0, T0 + timedelta(days=1))
    assert paused.may_write()  # still within its freshness, by its own clock
    paused.fresh_s = 0.0  # the pause outlasted it
    assert not paused.may_write() and paused.lost
    assert not paused.may_write()  # given up for good

    owner = Held(store, "replica-b", clock, "r1", "running", fresh_s=0.0)
    assert owner.may_write()  # asked the store: still replica b's
    assert owner.hand_over()  # stopping: left to be taken over at once
    [row] = store.unfinished_executions()
    assert row.heartbeat_at is not None and row.heartbeat_at.year == 1970

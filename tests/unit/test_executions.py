"""The execution states, written down once (`bot.acting.executions.TRANSITIONS`), and the one
vocabulary of what happened to a request (`bot.model.RequestStatus`)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from bot.acting.executions import TRANSITIONS, UNFINISHED, Held, IllegalExecutionMove
from bot.model import ExecutionOutcome, Judgement, RequestStatus
from bot.pipeline.relay import FINAL, PRIVATE
from bot.store.sql import SqlStore
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

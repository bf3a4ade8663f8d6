"""A request's one execution: the states it goes through, written down once, and what a process
holds while it owns one.

The store keeps one execution row per request, ever (a uniqueness constraint: the second
claim, the retried request and the replica that woke up late all meet it). This module says
how that row may move, as `bot.incidents.lifecycle.TRANSITIONS` does for incidents:

    (no row) ──claim──▶ running ──every check passed──▶ acting ──▶ succeeded | failed
                           │
                           └──▶ refused | failed | dry-run     (a check said no, or looked)
    (no row) ──▶ denied | withdrawn                             (born finished: no vote acts)

Before the claim, the process reserves the request in memory, so that the leader's tick does
not take its own running action for an orphan; while it runs, a heartbeat tells the other
processes it is alive; a process that stops beating (paused, partitioned, dead) has its
execution taken over, from `running` with every check again, from `acting` by doing the
idempotent action again.

What it must never do: let a process that lost an execution write its end (every write names
its owner), or move a row along a path the table does not have.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from bot.clock import Clock
from bot.errors import GpubotError
from bot.model import ExecutionOutcome
from bot.ports import Store

TRANSITIONS: dict[ExecutionOutcome | None, frozenset[ExecutionOutcome]] = {
    None: frozenset({"running", "denied", "withdrawn"}),
    "running": frozenset({"acting", "refused", "failed", "dry-run"}),
    "acting": frozenset({"succeeded", "failed"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "refused": frozenset(),
    "dry-run": frozenset(),
    "denied": frozenset(),
    "withdrawn": frozenset(),
}
"""From each state (None: no row yet), where the row may go. Only `running` and `acting` are
unfinished, and only those are resumed."""

UNFINISHED = frozenset(state for state, after in TRANSITIONS.items() if after and state)


class IllegalExecutionMove(GpubotError):
    def __init__(
        self, request_id: str, current: ExecutionOutcome | None, target: ExecutionOutcome
    ) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing"
        where = current or "no row"
        super().__init__(
            f"execution of {request_id}: cannot go from {where} to {target} "
            f"(from {where} it may go to: {allowed})"
        )


class Held:
    """One execution this process owns right now: its row, moved only along `TRANSITIONS` and
    written only under this process' name, and whether another process has taken it over
    since (then nothing more is written or done for it here)."""

    def __init__(
        self,
        store: Store,
        executor_id: str,
        clock: Clock,
        request_id: str,
        state: ExecutionOutcome | None,
    ) -> None:
        self.store = store
        self.executor_id = executor_id
        self.clock = clock
        self.request_id = request_id
        self.state = state
        self.displaced = threading.Event()

    @property
    def lost(self) -> bool:
        return self.displaced.is_set()

    def move(self, target: ExecutionOutcome) -> None:
        """Checks a move against the table before the store is asked to make it."""
        if target not in TRANSITIONS[self.state]:
            raise IllegalExecutionMove(self.request_id, self.state, target)
        self.state = target

    def claim(self) -> bool:
        """The row made, `running`, unless the request has one already (a second click, a
        retry, another replica) or its incident was resolved (then it is withdrawn)."""
        if not self.store.claim_execution(self.request_id, self.executor_id, self.clock()):
            return False
        self.move("running")
        return True

    def take_over(self, stale_before: datetime) -> bool:
        """The row made this process', when its owner stopped beating before `stale_before`
        (or is this process in an earlier life)."""
        return self.store.take_over_execution(
            self.request_id, self.executor_id, self.clock(), stale_before
        )

    def acting(self) -> None:
        """Past every check: from here a crash is resumed without checking again."""
        self.move("acting")
        self.store.mark_acting(self.request_id, self.executor_id)

    def end(self, outcome: ExecutionOutcome, detail: str) -> bool:
        """The row finished; False when another process owns it now (it tells the end)."""
        self.move(outcome)
        return self.store.finish_execution(
            self.request_id, outcome, detail, self.clock(), executor=self.executor_id
        )


class Ownership:
    """Owns the set of executions reserved or running in this process, each with its
    heartbeat thread. Never: hands one request to two threads here, or keeps beating for an
    execution whose row another process now owns."""

    def __init__(self, store: Store, executor_id: str, clock: Clock, beat_every_s: float) -> None:
        self.store = store
        self.executor_id = executor_id
        self.clock = clock
        self.beat_every_s = beat_every_s
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def reserve(self, request_id: str) -> bool:
        """Marks an execution as this process' own before it is claimed or taken over, so a
        leader tick in between cannot take it for an orphan; False when already here."""
        with self._lock:
            if request_id in self._running:
                return False
            self._running.add(request_id)
            return True

    def running_here(self) -> set[str]:
        with self._lock:
            return set(self._running)

    @contextmanager
    def owning(self, request_id: str, state: ExecutionOutcome | None) -> Iterator[Held]:
        """While an execution runs here (reserved by the caller): a heartbeat tells other
        processes it is alive, and sets `Held.displaced` when the store says another owns it
        (this process looked dead: a long pause, a partition) or it finished elsewhere. The
        reservation ends with it."""
        held = Held(self.store, self.executor_id, self.clock, request_id, state)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.beat_every_s):
                try:
                    if not self.store.beat(request_id, self.executor_id, self.clock()):
                        held.displaced.set()  # the owner carries on; this process stops
                        return
                except GpubotError:
                    continue  # the store hiccuped: the next beat may get through

        beating = threading.Thread(target=beat, name=f"heartbeat-{request_id}", daemon=True)
        beating.start()
        try:
            yield held
        finally:
            stop.set()
            with self._lock:
                self._running.discard(request_id)

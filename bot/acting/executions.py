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
idempotent action again. Every write to the cluster passes a fence first (`Held.may_write`):
ownership fresh by the process' own monotonic clock, or asked of the store there and then, so
a process that wakes from a pause after its take-over sends nothing it planned before (issue
31, finding 1: nine pods were evicted twice). A stopping process hands its executions over
(`Ownership.stop`, `Held.hand_over`) instead of holding them until it is killed.

What it must never do: let a process that lost an execution write its end or the cluster
(every store write names its owner; every cluster write passes the fence), or move a row
along a path the table does not have.
"""

from __future__ import annotations

import math
import threading
import time
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
    written only under this process' name; the fence its writes to the cluster pass
    (`may_write`); and whether it has given the execution up (`displaced`): taken over by
    another process, finished elsewhere, or handed over because this process is stopping.
    Once given up, nothing more is written or done for it here."""

    def __init__(
        self,
        store: Store,
        executor_id: str,
        clock: Clock,
        request_id: str,
        state: ExecutionOutcome | None,
        fresh_s: float = 0.0,
    ) -> None:
        self.store = store
        self.executor_id = executor_id
        self.clock = clock
        self.request_id = request_id
        self.state = state
        self.fresh_s = fresh_s
        """How long a confirmed ownership stays good without asking the store again."""
        self.displaced = threading.Event()
        self.handing_over = False
        """Given up because this process is stopping: the next leader is to take it over."""
        self._confirmed = -math.inf
        self._fence = threading.Lock()

    @property
    def lost(self) -> bool:
        return self.displaced.is_set()

    def confirmed(self) -> None:
        """The store just said this process owns the row (a claim, a take-over, a beat)."""
        self._confirmed = time.monotonic()

    def may_write(self) -> bool:
        """The fence every write to the cluster passes, right before it is sent. True while
        this process' ownership is fresh by its own monotonic clock: confirmed by the store
        less than `fresh_s` ago. After a longer gap (the process was paused, the collector or
        the store stalled it) ownership is asked of the store there and then, before the
        write: a process that slept through its take-over must not act on what it planned
        before. False for good once the execution is given up; `TemporaryError` when the
        store cannot say (ask again later)."""
        if self.displaced.is_set():
            return False
        with self._fence:
            if self.displaced.is_set():
                return False
            if time.monotonic() - self._confirmed < self.fresh_s:
                return True
            if not self.store.beat(self.request_id, self.executor_id, self.clock()):
                self.displaced.set()
                return False
            self.confirmed()
            return True

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
        self.confirmed()
        self.move("running")
        return True

    def take_over(self, stale_before: datetime) -> bool:
        """The row made this process', when its owner stopped beating before `stale_before`
        (or is this process in an earlier life)."""
        taken = self.store.take_over_execution(
            self.request_id, self.executor_id, self.clock(), stale_before
        )
        if taken:
            self.confirmed()
        return taken

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

    def hand_over(self) -> bool:
        """The row left for the next leader to take over at once (its heartbeat made stale),
        this process still its owner; False when it was not (any more)."""
        return self.store.release_execution(self.request_id, self.executor_id)


class Ownership:
    """Owns the executions reserved or running in this process, each with its heartbeat
    thread, and whether the process is stopping. Never: hands one request to two threads
    here, keeps beating for an execution whose row another process now owns, or starts one
    once stopping."""

    def __init__(self, store: Store, executor_id: str, clock: Clock, stale_s: float) -> None:
        self.store = store
        self.executor_id = executor_id
        self.clock = clock
        self.beat_every_s = stale_s / 3
        # Another process takes an execution over once its heartbeat is `stale_s` old by the
        # store's record; a beat is due every third of that, so ownership confirmed less than
        # two thirds of it ago cannot have been taken yet (a clock skew under a beat's
        # interval between replicas included).
        self.fresh_s = stale_s - self.beat_every_s
        self._running: dict[str, Held | None] = {}
        self._lock = threading.Condition()
        self._stopping = False

    def reserve(self, request_id: str) -> bool:
        """Marks an execution as this process' own before it is claimed or taken over, so a
        leader tick in between cannot take it for an orphan; False when already here, or when
        this process is stopping."""
        with self._lock:
            if self._stopping or request_id in self._running:
                return False
            self._running[request_id] = None
            return True

    def running_here(self) -> set[str]:
        with self._lock:
            return set(self._running)

    def stop(self, wait_s: float) -> None:
        """This process is stopping: every execution here is given up at once (its drain ends
        its waits, sends nothing more, and its thread hands it over), none starts, and this
        waits up to `wait_s` for their threads to have done so."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            self._stopping = True
            for held in self._running.values():
                if held is not None:
                    held.handing_over = True
                    held.displaced.set()
            while self._running and time.monotonic() < deadline:
                self._lock.wait(max(0.0, min(0.2, deadline - time.monotonic())))

    @contextmanager
    def owning(self, request_id: str, state: ExecutionOutcome | None) -> Iterator[Held]:
        """While an execution runs here (reserved by the caller): a heartbeat tells other
        processes it is alive (and confirms ownership to the fence), and gives it up when the
        store says another owns it (this process looked dead: a long pause, a partition) or it
        finished elsewhere. The reservation ends with it."""
        held = Held(self.store, self.executor_id, self.clock, request_id, state, self.fresh_s)
        with self._lock:
            self._running[request_id] = held
            if self._stopping:
                held.handing_over = True
                held.displaced.set()
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.beat_every_s) and not held.displaced.is_set():
                try:
                    if self.store.beat(request_id, self.executor_id, self.clock()):
                        held.confirmed()
                    else:
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
                self._running.pop(request_id, None)
                self._lock.notify_all()

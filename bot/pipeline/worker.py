"""The intake's one thread: what the webhook and the Kubernetes watches stored is handed here,
gathered into batches, and each batch handed to the diagnosis pass.

Why it exists: Alertmanager must have its answer in milliseconds, and a pass reads the cluster
(tens to hundreds of milliseconds). Everything handed over was stored first, so a crash here
loses nothing: the next start or sweep takes it up from the store.

A batch that fails for a reason that passes (the Kubernetes API or the store unreachable:
`TemporaryError`) is tried again, 0.5 s after, doubling up to every 5 s, until it goes through:
an alert that came during an outage is diagnosed seconds after the outage ends, not at the
next sweep. The log says once that diagnosis is paused, and once that it goes on.

What it must never do: block the caller handing work over (the webhook's event loop), let
one bad batch end the thread, or give up on a batch only because a peer is away.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Literal

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_when_event_set,
    wait_exponential,
)

from bot.errors import TemporaryError
from bot.model import Signal
from bot.process.health import Outage

log = logging.getLogger("gpubot.worker")

QUIET_S = 0.05
MAX_LAG_S = 2.0
"""A burst of webhooks is diagnosed once Alertmanager has been quiet for `QUIET_S`, or when
the oldest of it has waited `MAX_LAG_S` (`Worker._gather`)."""

RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
"""A batch that failed on a `TemporaryError` is tried again after `RETRY_FIRST_S`, the wait
doubling up to `RETRY_MAX_S`: an outage's end is noticed within seconds, and a long one costs
a try every few seconds."""

Item = list[Signal] | Literal["deliveries"] | None
"""Signals already stored, "deliveries" (a webhook body is stored: split it), or None (stop)."""


class Worker:
    """Owns the intake queue and the thread that empties it: one batch at a time, handed to
    `handle`. Stored webhook deliveries are split (`take_deliveries`) on this thread, not on
    the webhook's."""

    def __init__(
        self,
        handle: Callable[[list[Signal]], object],
        take_deliveries: Callable[[], list[Signal]],
        announce: Callable[[list[Signal]], object] = lambda _batch: None,
    ) -> None:
        """`announce`: what is told about a batch before `handle`, once however often
        `handle` is tried (notices, which need no cluster)."""
        self.handle = handle
        self.take_deliveries = take_deliveries
        self.announce = announce
        self._queue: queue.Queue[Item] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.paused = Outage("diagnosis", log, down_as="paused", up_as="goes on")
        """Whether batches are waiting on a peer that is away; told once each way."""

    def put(self, signals: list[Signal]) -> None:
        """Signals already stored (the watches', or ones a pass leaves for the next)."""
        self._queue.put(signals)

    def on_delivery(self) -> None:
        """The webhook's hand-over: a delivery is stored; this thread splits it."""
        self._queue.put("deliveries")

    def start(self) -> None:
        self.on_delivery()  # deliveries a crash left unsplit go first
        self._thread = threading.Thread(target=self._work, name="signals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stopping.set()  # a batch waiting to be tried again is left to the store
            self._queue.put(None)
            self._thread.join(timeout=30)

    def drain(self, timeout_s: float = 10.0) -> None:
        """For tests and shutdown: wait until every handed-over batch is taken."""
        self._queue.put([])
        deadline = time.monotonic() + timeout_s
        while not self._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _work(self) -> None:
        ended = float("-inf")
        while True:
            pending = self._gather(self._queue.get(), ended)
            stopping = None in pending
            batch = [s for item in pending if isinstance(item, list) for s in item]
            try:
                self._through(batch, split="deliveries" in pending)
            except TemporaryError as error:  # only when stopping: the store keeps them
                log.info("stopped with %d signal(s) not diagnosed: %s", len(batch), error)
            except Exception:  # the worker must outlive one bad batch
                log.exception("processing %d signal(s) failed", len(batch))
            if stopping:
                return
            ended = time.monotonic()

    def _through(self, batch: list[Signal], *, split: bool) -> None:
        """The batch (and, with `split`, the deliveries stored meanwhile) through `handle`,
        tried again while it fails on a peer that is away, until it goes through or the
        worker stops."""
        announced = False
        for attempt in Retrying(
            retry=retry_if_exception_type(TemporaryError),
            wait=wait_exponential(multiplier=RETRY_FIRST_S, max=RETRY_MAX_S),
            stop=stop_when_event_set(self._stopping),
            sleep=self._wait,
            before_sleep=self._pause,
            reraise=True,
        ):
            with attempt:
                if split:
                    batch += self.take_deliveries()
                    split = False
                if batch and not announced:
                    self.announce(batch)
                    announced = True
                if batch:
                    self.handle(batch)
        self.paused.up()

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)  # stop() cuts the wait short

    def _pause(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        self.paused.down(str(error)[:200])

    def _gather(self, first: Item, last_pass_ended: float) -> list[Item]:
        """What the next pass takes. A webhook that finds the worker idle is diagnosed at
        once. One that came on the heels of the last pass is part of a burst: then the
        worker waits until Alertmanager has been quiet for `QUIET_S` (at most `MAX_LAG_S`)
        and diagnoses the lot once, rather than racing the webhook for the interpreter
        pass after pass while deliveries still pour in."""
        pending = [first]
        woke = time.monotonic()
        burst = woke - last_pass_ended < QUIET_S or not self._queue.empty()
        while first is not None:
            try:
                if not burst:
                    item = self._queue.get_nowait()
                else:
                    left = woke + MAX_LAG_S - time.monotonic()
                    if left <= 0:
                        break
                    item = self._queue.get(timeout=min(QUIET_S, left))
            except queue.Empty:
                break
            pending.append(item)
            if item is None:
                break
        return pending

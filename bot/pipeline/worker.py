"""The intake's one thread: what the webhook and the Kubernetes watches stored is handed here,
gathered into batches, and each batch handed to the diagnosis pass.

Why it exists: Alertmanager must have its answer in milliseconds, and a pass reads the cluster
(tens to hundreds of milliseconds). Everything handed over was stored first, so a crash here
loses nothing: the next start or sweep takes it up from the store.

What it must never do: block the caller handing work over (the webhook's event loop), or let
one bad batch end the thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Literal

from bot.model import Signal

log = logging.getLogger("gpubot.worker")

QUIET_S = 0.05
MAX_LAG_S = 2.0
"""A burst of webhooks is diagnosed once Alertmanager has been quiet for `QUIET_S`, or when
the oldest of it has waited `MAX_LAG_S` (`Worker._gather`)."""

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
    ) -> None:
        self.handle = handle
        self.take_deliveries = take_deliveries
        self._queue: queue.Queue[Item] = queue.Queue()
        self._thread: threading.Thread | None = None

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
                if "deliveries" in pending:
                    batch += self.take_deliveries()
                if batch:
                    self.handle(batch)
            except Exception:  # the worker must outlive one bad batch
                log.exception("processing %d signal(s) failed", len(batch))
            if stopping:
                return
            ended = time.monotonic()

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

"""How fast a drain asks the API server, and when it stops asking.

A drain evicts on many threads at once; the API server is one peer they share. When it says
"slow down" (a 429 with `Retry-After`, as API Priority and Fairness answers under load) or
fails (a 5xx), every thread must hear it, not only the one that got the answer: client-go
and kubectl honour `Retry-After`, and a drain that does not sent 11-14 evictions a second into
a throttling server (issue 31, finding 2). So the threads share one pacing: while the server
is unhappy, one request at a time probes it, after the wait it asked for (capped) or an
exponential back-off with jitter; the first success lets every thread go again. A pod's own
refusal by its PodDisruptionBudget (a 429 without `Retry-After`) is that pod's business: its
thread backs off alone, with jitter, as before.

Every wait ends early when the drain is told to stop (its owner gave way, or the process is
shutting down), so no eviction thread outlives the drain that started it by more than a
moment.

What it must never do: let a thread through while the server's `Retry-After` has not passed,
or sleep through a stop.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bot.errors import EvictionBlocked, TemporaryError

RETRY_AFTER_MAX_S = 30.0
"""The longest `Retry-After` honoured as said: a server asking for more is asked again then."""
TROUBLE_BACKOFF_S = (0.5, 10.0)
"""A failing server without `Retry-After`: the first wait and the longest, doubling between."""
_POLL_S = 0.2


class Stopped(Exception):
    """The drain was told to stop: no further eviction is sent."""


class Overdue(TemporaryError):
    """The drain's deadline passed while it waited for its turn: the pod stalls on what last
    refused it."""


class Pacing:
    """Owns the drain's shared view of the API server: until when nobody may ask, whether it
    is in trouble (then one thread probes at a time), and how many troubles in a row. Never:
    lets a thread ask before `not_before`, or keeps a thread waiting once `stop` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._gate = threading.Condition()
        self._not_before = 0.0
        self._troubled = False
        self._probing = False
        self._strikes = 0

    def sleep(self, seconds: float) -> None:
        """A thread's own back-off (a budget refusing its pod), cut short by a stop."""
        if self.stop.wait(max(0.0, seconds)):
            raise Stopped

    @contextmanager
    def turn(self, deadline: float) -> Iterator[None]:
        """A request's turn: waits while the server asked everyone to wait; while it is in
        trouble, only one thread at a time. Past `deadline` (monotonic) it is a
        TemporaryError: the drain has run out of time waiting for the server."""
        with self._gate:
            while True:
                if self.stop.is_set():
                    raise Stopped
                if time.monotonic() >= deadline:
                    raise Overdue("timed out")
                left = self._not_before - time.monotonic()
                if left <= 0 and not self._probing:
                    self._probing = self._troubled
                    break
                self._gate.wait(min(_POLL_S, left) if left > 0 else _POLL_S)
        try:
            yield
        finally:
            with self._gate:
                self._probing = False
                self._gate.notify_all()

    def answered(self) -> None:
        """The server took a request: every thread may go again."""
        with self._gate:
            self._troubled = False
            self._strikes = 0
            self._gate.notify_all()

    def refused(self, error: TemporaryError) -> None:
        """The server refused: wait as it says, or back off when it is failing. A budget's
        refusal of one pod changes nothing for the others."""
        if isinstance(error, EvictionBlocked) and error.retry_after is None:
            return
        if error.retry_after is not None:
            wait = min(error.retry_after, RETRY_AFTER_MAX_S)
        else:
            first, longest = TROUBLE_BACKOFF_S
            wait = min(first * 2**self._strikes, longest) * random.uniform(0.5, 1.0)
        with self._gate:
            self._strikes += 1
            self._troubled = True
            self._not_before = max(self._not_before, time.monotonic() + wait)

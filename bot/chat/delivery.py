"""The outbox's one delivery worker: takes what is due, in order per group, hands each item to
a sender, and writes down what became of it (sent, given up, or when to try again).

Why it exists: every chat gpubot talks to queues its messages in the store's outbox, so
nothing it says is lost to an outage (docs/architecture.md, invariant 8), and only the leader
delivers them. How a message is delivered (printed on the console, posted to the Slack Web
API) differs; the loop around it does not: the thread woken when something is queued, the
rounds until nothing more is due, the backoff that pauses the whole worker while the chat is
down, the rate limit that pauses one method, the item given up with its reason. That loop is
written once, here; a sender only says what happened to one item.

What it must never do: run twice over one store (the outbox has no claim, two workers would
both send: one per store, on the leader), drop an item without the outbox recording why
(`outbox_retry(..., give_up=True)`), or lose a message to a bug in a sender (its exception
leaves the item pending for the next round).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, Self, TypedDict

from bot.clock import Clock, utcnow
from bot.model import OutboxItem
from bot.ports import Outbox


@dataclass(frozen=True)
class Sent:
    """The chat took the item; `result` is what a later item that refers to it needs (Slack's
    channel and ts)."""

    result: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """The chat refused the item and would refuse it the same way again: given up."""

    why: str


@dataclass(frozen=True)
class Down:
    """The chat, or the way to it, is down: the item and everything else waits, backing off."""

    why: str


@dataclass(frozen=True)
class Later:
    """Not yet: the item is tried again at `at`; with `method_waits`, every item of its method
    waits as long (a rate limit is per method)."""

    at: datetime
    why: str
    method_waits: bool = False


Outcome = Sent | Refused | Down | Later


class WorkerOptions(TypedDict, total=False):
    """How a worker paces itself (`OutboxWorker`'s keywords), for the workers built on it to
    pass through without saying them again."""

    clock: Clock
    batch: int
    poll_s: float
    backoff_base_s: float
    backoff_max_s: float
    rng: random.Random | None


class Sender(Protocol):
    """Delivers one item to one chat, and says what became of it."""

    def send(self, item: OutboxItem, now: datetime) -> Outcome: ...


class OutboxWorker:
    """Delivers what the outbox holds through one `Sender`, in order per group.

    Owns its thread (`start`, `stop`, `wake`), and when the chat may be asked again: the
    whole worker after an outage (`_paused_until`), one method after a rate limit
    (`_method_paused`). What is due, and what was sent, is the outbox's.

    Must never run beside another worker over the same store, and never drop an item without
    the outbox recording why.
    """

    def __init__(
        self,
        outbox: Outbox,
        sender: Sender,
        *,
        name: str,
        what: str,
        log: logging.Logger,
        clock: Clock = utcnow,
        batch: int = 50,
        poll_s: float = 0.5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        """`name`: the thread's; `what`: whose delivery the log says failed (one word)."""
        self.outbox = outbox
        self.sender = sender
        self.name = name
        self.what = what
        self.log = log
        self.clock = clock
        self.batch = batch
        self.poll_s = poll_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.rng = rng or random.Random()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused_until = datetime.min.replace(tzinfo=UTC)
        self._method_paused: dict[str, datetime] = {}

    # the thread

    def start(self) -> Self:
        if self._thread is not None:
            return self  # leading again: one worker per store, never two
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def wake(self) -> None:
        """Something was queued: look now rather than at the next poll."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.deliver_once()
            except Exception:  # the store is down, or a bug: keep the worker alive
                self.log.exception(
                    "%s delivery failed; trying again in %.1f s", self.what, self.poll_s
                )
            self._wake.wait(self.poll_s)

    # one round

    def deliver_once(self, now: datetime | None = None) -> int:
        """Delivers every item due at `now` (a group's next one as soon as the one before is
        settled); returns how many the chat took."""
        with self._lock:
            now = now or self.clock()
            sent = 0
            for _round in range(1000):
                if now < self._paused_until:
                    break
                settled = 0
                for item in self.outbox.outbox_due(now, self.batch):
                    if now < self._paused_until:
                        break
                    if now < self._method_paused.get(item.method, self._paused_until):
                        continue
                    outcome = self._settle(item, self.sender.send(item, now), now)
                    sent += outcome == "sent"
                    settled += outcome in ("sent", "gave-up")
                if not settled:
                    break
            return sent

    def _settle(self, item: OutboxItem, outcome: Outcome, now: datetime) -> str:
        """Writes down what became of `item`: "sent", "gave-up" or "later"."""
        if isinstance(outcome, Sent):
            if not self.outbox.outbox_sent(item.id, dict(outcome.result), now):
                self.log.warning("%s was already marked sent (another worker?)", item.key)
            return "sent"
        if isinstance(outcome, Refused):
            self.outbox.outbox_retry(item.id, now, outcome.why, give_up=True)
            self.log.error("gave up on %s (%s): %s", item.key, item.method, outcome.why)
            return "gave-up"
        if isinstance(outcome, Later):
            if outcome.method_waits:
                self._method_paused[item.method] = outcome.at
            self.outbox.outbox_retry(item.id, outcome.at, outcome.why)
            return "later"
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** min(item.attempts, 20))
        delay *= 0.5 + 0.5 * self.rng.random()
        at = now + timedelta(seconds=delay)
        self._paused_until = at  # the chat (or the way to it) is down: everything waits
        self.outbox.outbox_retry(item.id, at, outcome.why)
        self.log.warning("%s: %s; retrying in %.1f s", item.key, outcome.why, delay)
        return "later"

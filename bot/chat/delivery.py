"""The outbox's one delivery worker: takes what is due, in order per group, hands each item to
a sender, and writes down what became of it (sent, given up, or when to try again).

Why it exists: every chat gpubot talks to queues its messages in the store's outbox, so
nothing it says is lost to an outage (docs/architecture.md, invariant 8), and only the leader
delivers them. How a message is delivered (printed on the console, posted to the Slack Web
API) differs; the loop around it does not: the thread woken when something is queued, the
rounds until nothing more is due, the backoff that pauses the whole worker while the chat is
down, the rate limit that pauses one method, the item given up with its reason. That loop is
written once, here; a sender only says what happened to one item.

The store itself may be away (a database restarting, the network to it cut): then the worker
looks again after `poll_s`, the wait doubling up to `STORE_RETRY_MAX_S`. That outage, and
one of the chat, is told as the webhook and /readyz tell theirs (`bot.process.health.Outage`):
one warning when it begins, one line when it ends, each failed try in between counted
(`gpubot_outbox_failures_total`). The worker logged a traceback every 0.5 s while the store
was away, and a warning at every retry while Slack was (issue 31, item 6).

What it must never do: run twice over one store (the outbox has no claim, two workers would
both send: one per store, on the leader), drop an item without the outbox recording why
(`outbox_retry(..., give_up=True)`), lose a message to a bug in a sender (its exception
leaves the item pending for the next round), or log a line per try while the store or the
chat is away.
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
from bot.errors import StoreUnavailable
from bot.model import OutboxItem
from bot.ports import Outbox
from bot.process.health import Outage
from bot.process.telemetry import Telemetry

STORE_RETRY_MAX_S = 15.0
"""While the store does not answer, the worker looks again after `poll_s`, the wait doubling
up to this: a long outage costs one query every 15 s, and what was queued meanwhile goes out
within 15 s of the store's return (at once when this replica queues it: `wake`)."""


def _doubling(first_s: float, cap_s: float, tries: int) -> float:
    """The wait before the try after `tries` failed ones: `first_s`, doubling, at most
    `cap_s`. Both of the worker's back-offs (the chat down, the store away) are this one."""
    return min(cap_s, first_s * 2.0 ** min(max(tries, 0), 30))


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
    metrics: Telemetry | None


class Sender(Protocol):
    """Delivers one item to one chat, and says what became of it."""

    def send(self, item: OutboxItem, now: datetime) -> Outcome: ...


class OutboxWorker:
    """Delivers what the outbox holds through one `Sender`, in order per group.

    Owns its thread (`start`, `stop`, `wake`), and when the chat may be asked again: the
    whole worker after an outage (`_paused_until`), one method after a rate limit
    (`_method_paused`); and whether the store or the chat is away (`store_outage`,
    `chat_outage`, each told once each way). What is due, and what was sent, is the outbox's.

    Must never run beside another worker over the same store, never drop an item without
    the outbox recording why, and never log a line per try while the store or chat is away.
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
        metrics: Telemetry | None = None,
    ) -> None:
        """`name`: the thread's; `what`: the chat, one word, as the log and the metrics name
        it (`console`, `slack`); `metrics`: where its failed rounds are counted."""
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
        self.metrics = metrics if metrics is not None else Telemetry()
        self.store_outage = Outage(
            f"{what} delivery", log, self._seconds, down_as="paused", up_as="resumes"
        )
        """Whether the store is away for this worker; told once each way."""
        self.chat_outage = Outage(what, log, self._seconds, down_as="unreachable")
        """Whether the chat, or the way to it, is down (`Down`); told once each way."""
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
        failed = 0  # rounds in a row that raised
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.deliver_once()
            except StoreUnavailable as error:  # told once; its traceback says nothing new
                failed += 1
                self._count("store")
                self.store_outage.down(" ".join(str(error).split()))  # one line
            except Exception:  # a bug: keep the worker alive, and its traceback
                failed += 1
                self._count("error")
                self.log.exception(
                    "%s delivery failed; trying again in %.1f s", self.what, self._wait_s(failed)
                )
            else:
                failed = 0
                self.store_outage.up()
            self._wake.wait(self._wait_s(failed))

    def _wait_s(self, failed: int) -> float:
        """Until the next round, after `failed` rounds in a row that raised."""
        return _doubling(self.poll_s, STORE_RETRY_MAX_S, failed - 1)

    def _seconds(self) -> float:
        """The worker's clock as seconds: how long an outage lasted, in the time it runs on."""
        return self.clock().timestamp()

    def _count(self, cause: str) -> None:
        self.metrics.outbox_failures.labels(chat=self.what, cause=cause).inc()

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
        if isinstance(outcome, Sent | Refused) or (
            isinstance(outcome, Later) and outcome.method_waits
        ):
            self.chat_outage.up()  # the chat answered, whatever it answered
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
        delay = _doubling(self.backoff_base_s, self.backoff_max_s, item.attempts)
        delay *= 0.5 + 0.5 * self.rng.random()
        at = now + timedelta(seconds=delay)
        self._paused_until = at  # the chat (or the way to it) is down: everything waits
        self.outbox.outbox_retry(item.id, at, outcome.why)
        self._count("chat")
        self.chat_outage.down(f"{outcome.why} ({item.key})")  # docs/hardening.md: the back-off
        return "later"

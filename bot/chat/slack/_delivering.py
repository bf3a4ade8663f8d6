"""The outbox delivery worker: `OutboxDelivery` sends what the outbox holds to the Slack Web
API, in order per group, until Slack has taken it.

Why it exists: `SlackChat` only queues, so that nothing the bot says is lost to an outage
(docs/architecture.md, invariant 8). This is the one place a queued message meets Slack. It
resolves a message's `refers_to` at delivery: a thread line is posted under the `ts` its incident's
message got, an update edits that `ts`; one whose message is still pending waits a second, one
whose message never reached Slack is posted unthreaded (an update is given up).

Errors: 429 → that method waits `Retry-After` (the item's `next_attempt_at`); 5xx,
`fatal_error`-like errors and connection failures → exponential backoff with jitter (1 s,
doubling, at most a minute), and the whole worker pauses with it (Slack is down: hammering
it helps no one); anything else Slack refuses (`channel_not_found`, `invalid_blocks`,
`not_in_channel`, `invalid_auth`, ...) would fail the same way again → given up and logged.

Delivery is at least once: a process killed between Slack's answer and `outbox_sent` sends
that one message again.

What it must never do: run twice over one store. The outbox has no claim, two workers would
both send: run one `OutboxDelivery` per store, on the leader. Nor may it lose a message to a
bug: an unexpected error backs off like an outage.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from http.client import HTTPException
from typing import Any, Literal

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.clock import Clock, utcnow
from bot.model import OutboxItem
from bot.ports import Outbox

log = logging.getLogger("gpubot.slack")

TEMPORARY_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            if isinstance(value, list):
                return str(value[0]) if value else None
            return str(value)
    return None


class OutboxDelivery:
    """Sends what the outbox holds, in order per group, until Slack has taken it.

    Owns its worker thread (`start`, `stop`, `wake`), and when Slack may be asked again: the
    whole worker after an outage (`_paused_until`), one method after a 429
    (`_method_paused`). What is due, and what was sent, is the outbox's.

    Must never run beside another worker over the same store, and never drop an item without
    the outbox recording why (`outbox_retry(..., give_up=True)`).
    """

    def __init__(
        self,
        outbox: Outbox,
        client: WebClient,
        *,
        clock: Clock = utcnow,
        batch: int = 50,
        poll_s: float = 0.5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        self.outbox = outbox
        self.client = client
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

    # the worker

    def start(self) -> OutboxDelivery:
        if self._thread is not None:
            return self  # leading again: one worker per store, never two
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="slack-outbox", daemon=True)
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
                log.exception("outbox delivery failed; trying again in %.1f s", self.poll_s)
            self._wake.wait(self.poll_s)

    # one round

    def deliver_once(self, now: datetime | None = None) -> int:
        """Sends every item due at `now` (a group's next one as soon as the one before is
        settled); returns how many Slack took."""
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
                    outcome = self._send(item, now)
                    sent += outcome == "sent"
                    settled += outcome in ("sent", "gave-up")
                if not settled:
                    break
            return sent

    def _send(self, item: OutboxItem, now: datetime) -> Literal["sent", "gave-up", "later"]:
        payload: dict[str, object] = dict(item.payload)
        if item.refers_to:
            ref = self.outbox.outbox_item(item.refers_to)
            where = ref.result if ref is not None and ref.status == "sent" else None
            if ref is not None and ref.status == "pending":
                self.outbox.outbox_retry(
                    item.id, now + timedelta(seconds=1), f"waiting for {item.refers_to}"
                )
                return "later"
            if item.method == "chat.update":
                if not where or "ts" not in where:
                    return self._give_up(item, f"{item.refers_to} was never delivered", now)
                payload["channel"] = where.get("channel", payload.get("channel"))
                payload["ts"] = where["ts"]
            elif where and "ts" in where:
                payload["channel"] = where.get("channel", payload.get("channel"))
                payload["thread_ts"] = where.get("thread_ts") or where["ts"]
            else:
                # The message it belongs under never reached Slack: posting it on its own
                # loses less than dropping it.
                log.warning("%s: %s was never delivered; posting unthreaded", item.key, ref)
        try:
            response = self.client.api_call(item.method, json=payload)
        except SlackApiError as error:
            return self._failed(item, error, now)
        except (OSError, HTTPException) as error:  # refused, reset, timed out
            return self._backoff(item, f"connection: {error!r}", now)
        except Exception as error:  # a bug must not lose the message either
            log.exception("%s: unexpected error sending %s", item.key, item.method)
            return self._backoff(item, f"unexpected: {error!r}", now)
        data = response.data if isinstance(response.data, dict) else {}
        result = {k: data[k] for k in ("channel", "ts") if isinstance(data.get(k), str)}
        thread_ts = payload.get("thread_ts")
        if isinstance(thread_ts, str):
            result["thread_ts"] = thread_ts
        if not self.outbox.outbox_sent(item.id, result, now):
            log.warning("%s was already marked sent (another worker?)", item.key)
        return "sent"

    def _failed(
        self, item: OutboxItem, error: SlackApiError, now: datetime
    ) -> Literal["gave-up", "later"]:
        response = error.response
        status = response.status_code
        code = response.get("error") if isinstance(response.data, dict) else None
        code = code if isinstance(code, str) else f"http {status}"
        if status == 429:
            raw = _header(response.headers, "Retry-After")
            try:
                wait_s = max(1.0, float(raw)) if raw is not None else 1.0
            except ValueError:
                wait_s = 1.0
            at = now + timedelta(seconds=wait_s)
            self._method_paused[item.method] = at
            self.outbox.outbox_retry(item.id, at, f"ratelimited: retry after {wait_s:g} s")
            return "later"
        if status >= 500 or code in TEMPORARY_ERRORS:
            return self._backoff(item, code, now)
        return self._give_up(item, code, now)

    def _backoff(self, item: OutboxItem, error: str, now: datetime) -> Literal["later"]:
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** min(item.attempts, 20))
        delay *= 0.5 + 0.5 * self.rng.random()
        at = now + timedelta(seconds=delay)
        self._paused_until = at  # Slack (or the way to it) is down: everything waits
        self.outbox.outbox_retry(item.id, at, error)
        log.warning("%s: %s; retrying in %.1f s", item.key, error, delay)
        return "later"

    def _give_up(self, item: OutboxItem, error: str, now: datetime) -> Literal["gave-up"]:
        self.outbox.outbox_retry(item.id, now, error, give_up=True)
        log.error("gave up on %s (%s): %s", item.key, item.method, error)
        return "gave-up"

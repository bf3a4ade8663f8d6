"""Slack's side of the outbox delivery: `SlackSender` sends one queued item to the Slack Web
API and says what Slack's answer means; `OutboxDelivery` is the outbox's one worker
(`bot.chat.delivery.OutboxWorker`: in order per group, backoff, give-up) sending through it.

Why it exists: `SlackChat` only queues, so that nothing the bot says is lost to an outage
(docs/architecture.md, invariant 8). This is the one place a queued message meets Slack. It
resolves a message's `refers_to` at delivery: a thread line is posted under the `ts` its incident's
message got, an update edits that `ts`; one whose message is still pending waits a second, one
whose message never reached Slack is posted unthreaded (an update is given up).

Errors: 429 → that method waits `Retry-After` (the item's `next_attempt_at`); 5xx,
`fatal_error`-like errors and connection failures → exponential backoff with jitter (1 s,
doubling, at most a minute), and the whole worker pauses with it (Slack is down: hammering
it helps no one; the log says so once, and once when Slack answers again); anything else
Slack refuses (`channel_not_found`, `invalid_blocks`, `not_in_channel`, `invalid_auth`, ...)
would fail the same way again → given up and logged.

Delivery is at least once: a process killed between Slack's answer and `outbox_sent` sends
that one message again.

What it must never do: run twice over one store. The outbox has no claim, two workers would
both send: run one `OutboxDelivery` per store, on the leader. Nor may it lose a message to a
bug: an unexpected error backs off like an outage.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from http.client import HTTPException
from typing import Any, Unpack

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.chat.delivery import Down, Later, OutboxWorker, Outcome, Refused, Sent, WorkerOptions
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


class SlackSender:
    """The Slack Web API's `Sender`: resolves what an item refers to, calls Slack, and says
    what Slack's answer means for the worker (taken, refused, down, or wait).

    Owns the client; reads the outbox only to find where the message an item refers to went.
    Never marks an item itself: the worker writes down what it answers."""

    def __init__(self, outbox: Outbox, client: WebClient) -> None:
        self.outbox = outbox
        self.client = client

    def send(self, item: OutboxItem, now: datetime) -> Outcome:
        payload: dict[str, object] = dict(item.payload)
        if item.refers_to:
            ref = self.outbox.outbox_item(item.refers_to)
            where = ref.result if ref is not None and ref.status == "sent" else None
            if ref is not None and ref.status == "pending":
                return Later(now + timedelta(seconds=1), f"waiting for {item.refers_to}")
            if item.method == "chat.update":
                if not where or "ts" not in where:
                    return Refused(f"{item.refers_to} was never delivered")
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
            return _failed(error, now)
        except (OSError, HTTPException) as error:  # refused, reset, timed out
            return Down(f"connection: {error!r}")
        except Exception as error:  # a bug must not lose the message either
            log.exception("%s: unexpected error sending %s", item.key, item.method)
            return Down(f"unexpected: {error!r}")
        data = response.data if isinstance(response.data, dict) else {}
        result = {k: data[k] for k in ("channel", "ts") if isinstance(data.get(k), str)}
        thread_ts = payload.get("thread_ts")
        if isinstance(thread_ts, str):
            result["thread_ts"] = thread_ts
        return Sent(result)


def _failed(error: SlackApiError, now: datetime) -> Outcome:
    """What Slack's refusal means: a 429 holds its method back for `Retry-After`, a 5xx or a
    temporary error is an outage, anything else would fail the same way again."""
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
        return Later(at, f"ratelimited: retry after {wait_s:g} s", method_waits=True)
    if status >= 500 or code in TEMPORARY_ERRORS:
        return Down(code)
    return Refused(code)


class OutboxDelivery(OutboxWorker):
    """The leader's worker for Slack: the outbox's one worker (`OutboxWorker`: its thread,
    the order per group, the backoff and the rate-limit pauses) sending through
    `SlackSender`."""

    def __init__(self, outbox: Outbox, client: WebClient, **options: Unpack[WorkerOptions]) -> None:
        super().__init__(
            outbox,
            SlackSender(outbox, client),
            name="slack-outbox",
            what="slack",
            log=log,
            **options,
        )

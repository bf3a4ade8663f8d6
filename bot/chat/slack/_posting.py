"""The Slack adapter: the `Chat` port through the store's outbox, the delivery worker, the
interaction endpoint (buttons and `/gpubot`), Socket Mode, and Slack user groups.

Why it exists: Slack is where people read a diagnosis and decide. Two things must hold at
this edge whatever Slack does: nothing the bot says is lost (DESIGN.md invariant 8), and no
request that Slack did not send, or sent before, changes anything (invariant 7).

What it must never do: decide who may approve, or act. Every click goes to the engine
(`Engine.approve` / `Engine.deny`, which `bot.service.Service` satisfies), and the answer the
engine gives is what the person sees. It never sends a chat message straight to Slack from
the pipeline: `SlackChat` only queues (`Outbox.outbox_put`), `OutboxDelivery` sends.

**Outgoing** (`SlackChat` → outbox → `OutboxDelivery`). Every message of an incident shares
the group `incident/<id>`, and the store hands out a group's messages in id order, so the
message, its thread and its updates arrive in the order they were made, after any outage.
`thread_ts`, `ts` and `channel` are taken at delivery from the result of the item a message
refers to (its `refers_to`): the incident's message may not have reached Slack yet when its
first thread line is queued. Delivery is at least once: a process killed between Slack's
answer and `outbox_sent` sends that one message again. Run one `OutboxDelivery` per store
(on the leader): the outbox has no claim, two workers would both send.

Errors: 429 → that method waits `Retry-After` (the item's `next_attempt_at`); 5xx,
`fatal_error`-like errors and connection failures → exponential backoff with jitter (1 s,
doubling, at most a minute), and the whole worker pauses with it (Slack is down: hammering
it helps no one); anything else Slack refuses (`channel_not_found`, `invalid_blocks`,
`not_in_channel`, `invalid_auth`, ...) would fail the same way again → given up and logged.
Ephemeral answers to a click go straight to the click's `response_url`: they are for one
person, now, and worthless an hour later.

**Incoming** (`SlackInteractions`, one slack-bolt `App` shared by HTTP and Socket Mode).
Checks before anything is acknowledged, in this order:

1. (HTTP, in front of bolt) a body over `max_body_bytes` → 413; a body bolt cannot parse →
   401 when its signature is bad, else 400 (bolt would answer a parse error with a 500).
2. bolt's `RequestVerification` (always on): `slack_sdk.signature.SignatureVerifier`, a bad
   signature or a timestamp more than 5 minutes away → 401.
3. replay (a global bolt middleware, so it sees verified requests only): the same
   (timestamp, signature) twice → 401. An in-memory TTL set is enough: step 2 refuses
   anything older than 5 minutes, so only 5 minutes of signatures need remembering, a few
   kilobytes at Slack's rates. Per replica: a replay sent to another replica passes this
   check, and then meets the store's once-only vote and execution (invariant 3).
4. `block_actions`: an action id that is not one of ours → 400; a value that is not a
   request (approve/deny) or incident (snooze/timeline) in the store, or not a button of the
   message clicked → 400 (a tampered value). Store down → 503.

Then the listener acknowledges at once (bolt's `process_before_response=True`: the ack is
the HTTP answer, well within Slack's 3 seconds) and hands the work to a small thread pool:
the engine's decision, the message update, the ephemeral answer. Checks 3 and 4 are bolt
middleware, so Socket Mode (where Slack authenticates the websocket with the app-level token
and there is nothing to sign) gets check 4 too.

Snooze mutes the incident's thread lines in this process for `snooze_s` (the timeline keeps
them and records the snooze); approving or denying on the incident ends it. A replica that
did not take the click keeps posting: muting is a courtesy, not a guarantee.

Who is in a user group (`SlackGroups`) comes from `usergroups.list` (ids ↔ handles) and
`usergroups.users.list`, cached for a minute; policies may name a group by id or handle.
"""

from __future__ import annotations

import logging
import random
import re
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.client import HTTPException
from typing import Any, Literal, Protocol

from slack_bolt import Ack, App, BoltRequest, BoltResponse, Respond
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import Block, SectionBlock
from slack_sdk.signature import SignatureVerifier
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.chat.blocks import (
    ACTION_IDS,
    APPROVE_ACTION,
    DENY_ACTION,
    MAX_BLOCKS,
    SECTION_TEXT_MAX,
    SNOOZE_ACTION,
    TIMELINE_ACTION,
    decided_blocks,
    decision_text,
    diagnosis_blocks,
    escape,
    fallback_text,
    fit,
    incident_block,
    mention,
    request_blocks,
)
from bot.clock import Clock, utcnow
from bot.config import ApprovalPolicy, SlackSettings
from bot.errors import GpubotError, InputError, StoreUnavailable
from bot.model import (
    Action,
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    Incident,
    IncidentState,
    Lang,
    NodeFacts,
    OutboxItem,
    TimelineEntry,
)
from bot.ports import Outbox, Store

log = logging.getLogger("gpubot.slack")

THREAD_TEXT_MAX = 3900
"""Slack cuts `text` at 40,000 characters but advises under 4,000: a thread line is a line."""
REPLAY_TTL_S = 5 * 60 + 30
"""SignatureVerifier's window (5 min either way) and a little clock skew."""
OPEN_STATES = tuple(s for s in IncidentState if s is not IncidentState.RESOLVED)
TEMPORARY_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)

_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
_INCIDENT_ID = re.compile(r"[0-9]{1,18}")
_SUBTEAM = re.compile(r"@(S[A-Z0-9]{2,})\b")


def _hhmm(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M")


# -- settings ------------------------------------------------------------------------------


def slack_client(settings: SlackSettings, *, timeout_s: int = 10) -> WebClient:
    """A WebClient without slack_sdk's own retries: the outbox decides when to try again."""
    token = settings.bot_token.get_secret_value() if settings.bot_token else None
    return WebClient(token=token, base_url=settings.api_url, timeout=timeout_s, retry_handlers=[])


# -- what the adapter needs from the engine -------------------------------------------------


class Decided(Protocol):
    """An engine's answer to a click (`bot.remediate.executor.Outcome`)."""

    @property
    def request_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def new_request(self) -> ActionRequest | None: ...


class Requests(Protocol):
    """What a slash command needs of the executor: facts of a node, and a new request."""

    def request(
        self, action: Action, node: NodeFacts, incident: str | None, requested_by: str
    ) -> ActionRequest: ...

    def read_facts(self, node: str) -> ClusterFacts: ...


class Engine(Protocol):
    """What decides (`bot.service.Service` as it is)."""

    @property
    def store(self) -> Store: ...
    @property
    def executor(self) -> Requests: ...
    def approve(self, request_id: str, approver: str) -> Decided: ...
    def deny(self, request_id: str, who: str, reason: str = "") -> Decided: ...


# -- outgoing: the Chat port ----------------------------------------------------------------


def message_key(incident: Incident) -> str:
    """The outbox key (and `chat_ref`) of an incident's message; a reopened incident gets a
    new message."""
    base = f"incident/{incident.id}/message"
    return f"{base}/{incident.reopened}" if incident.reopened else base


def group_key(incident_id: str) -> str:
    return f"incident/{incident_id}"


def proposal_key(request_id: str) -> str:
    return f"request/{request_id}/message"


def _blocks_json(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in blocks]


def _request_ids(blocks: object) -> list[str]:
    """The request ids of the approve buttons in a message's blocks, in order."""
    found: list[str] = []
    if not isinstance(blocks, list):
        return found
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "actions":
            continue
        for element in block.get("elements", []):
            if isinstance(element, dict) and element.get("action_id") == APPROVE_ACTION:
                value = element.get("value")
                if isinstance(value, str) and value not in found:
                    found.append(value)
    return found


class SlackChat:
    """The `Chat` port for Slack: every call is queued in the outbox and returns at once."""

    def __init__(
        self,
        outbox: Outbox,
        channel: str,
        lang: Lang = Lang.EN,
        *,
        clock: Clock = utcnow,
        on_queued: Callable[[], None] = lambda: None,
    ) -> None:
        """`on_queued` is called after each message is queued (the delivery's `wake`)."""
        self.outbox = outbox
        self.channel = channel
        self.lang = lang
        self.clock = clock
        self.on_queued = on_queued
        self._decisions = threading.Lock()
        self._muted: dict[str, datetime] = {}

    def _put(
        self,
        key: str,
        group: str,
        method: str,
        payload: Mapping[str, object],
        refers_to: str | None = None,
    ) -> OutboxItem:
        item = self.outbox.outbox_put(key, group, method, payload, self.clock(), refers_to)
        self.on_queued()
        return item

    def _thread_of(self, incident: Incident) -> str:
        ref = incident.chat_ref
        return ref if ref and ref.startswith("incident/") else message_key(incident)

    # the port

    def post_diagnosis(
        self, incident: Incident, diagnosis: Diagnosis, requests: Sequence[ActionRequest]
    ) -> str | None:
        key = message_key(incident)
        blocks = diagnosis_blocks(diagnosis, requests, self.lang, incident=incident.id)
        payload = {
            "channel": self.channel,
            "text": fallback_text(diagnosis, self.lang),
            "blocks": _blocks_json(blocks),
            "unfurl_links": False,
        }
        self._put(key, group_key(incident.id), "chat.postMessage", payload)
        return key

    def post_thread(self, incident: Incident, text: str) -> None:
        """A plain-text line (escaped: pod names cannot smuggle in `<!channel>`)."""
        self.post_thread_mrkdwn(incident, escape(text))

    def post_notice(self, text: str, monospace: bool = False) -> None:
        if monospace:
            # A code block: Slack's proportional font would break the digest's columns.
            body = "```" + fit(escape(text), THREAD_TEXT_MAX - 6, escaped=True) + "```"
        else:
            body = fit(escape(text), THREAD_TEXT_MAX, escaped=True)
        payload = {"channel": self.channel, "text": body}
        self._put(f"notice/{uuid.uuid4().hex}", "notices", "chat.postMessage", payload)

    # beyond the port

    def post_thread_mrkdwn(self, incident: Incident, mrkdwn: str) -> bool:
        """A line already in mrkdwn (mentions stay mentions); False when snoozed."""
        if self.muted(incident.id):
            return False
        payload = {"channel": self.channel, "text": fit(mrkdwn, THREAD_TEXT_MAX, escaped=True)}
        self._put(
            f"incident/{incident.id}/thread/{uuid.uuid4().hex}",
            group_key(incident.id),
            "chat.postMessage",
            payload,
            refers_to=self._thread_of(incident),
        )
        return True

    def post_proposal(
        self, request: ActionRequest, incident: Incident | None, *, in_thread: bool = False
    ) -> str:
        """A message with one request's buttons (a slash command's, or a request asked again
        after the node changed): in the channel, or in the incident's thread."""
        what = f"{request.action.value}{' --force' if request.force else ''} {request.node}"
        intro = f"🛠 {mention(request.requested_by)} asks to *{escape(what)}*"
        if incident is not None:
            intro += f" (incident {escape(incident.id)}: {escape(incident.title)})"
        blocks: list[Block] = [
            SectionBlock(block_id="gpubot.proposal", text=fit(intro, SECTION_TEXT_MAX))
        ]
        blocks.extend(request_blocks(request, self.lang))
        if incident is not None:
            blocks.append(incident_block(incident.id, self.lang))
        payload = {
            "channel": self.channel,
            "text": f"{what}: needs an approver",
            "blocks": _blocks_json(blocks),
        }
        key = proposal_key(request.id)
        group = group_key(incident.id) if incident else f"request/{request.id}"
        refers = self._thread_of(incident) if incident and in_thread else None
        self._put(key, group, "chat.postMessage", payload, refers_to=refers)
        return key

    def _message_holding(
        self, incident: Incident | None, request: ActionRequest
    ) -> OutboxItem | None:
        own = self.outbox.outbox_item(proposal_key(request.id))
        if own is not None:
            return own
        if incident is not None:
            return self.outbox.outbox_item(self._thread_of(incident))
        if request.incident is not None:
            return self.outbox.outbox_item(f"incident/{request.incident}/message")
        return None

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        self.update_decision(incident, old, f"↻ {for_slack(why)}")
        self.post_proposal(new, incident, in_thread=True)

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self.update_decision(incident, request, f"⊘ withdrawn: {for_slack(why)}")

    def update_decision(
        self, incident: Incident | None, request: ActionRequest, decision: str
    ) -> bool:
        """Queue a `chat.update` of the message holding `request`: its buttons replaced by
        `decision` (mrkdwn, e.g. `decision_text(...)`). One decision per request: a second
        is ignored (the outbox key is the same). False when no message holds it."""
        message = self._message_holding(incident, request)
        if message is None:
            log.warning("no message holds request %s: its decision is not shown", request.id)
            return False
        with self._decisions:
            current = self._current_blocks(message)
            blocks = decided_blocks(current, decision, request_id=request.id)
            payload = {"text": message.payload.get("text", ""), "blocks": _blocks_json(blocks)}
            self._put(
                f"{message.key}/decision/{request.id}",
                message.group_key,
                "chat.update",
                payload,
                refers_to=message.key,
            )
        return True

    def _current_blocks(self, message: OutboxItem) -> list[dict[str, Any]]:
        """The message as its latest queued decision left it (each update carries all)."""
        latest: OutboxItem | None = None
        for request_id in _request_ids(message.payload.get("blocks")):
            item = self.outbox.outbox_item(f"{message.key}/decision/{request_id}")
            if item is not None and (latest is None or item.id > latest.id):
                latest = item
        blocks = (latest or message).payload.get("blocks")
        return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []

    # snooze: thread lines of the incident are muted (the timeline keeps them)

    def snooze(self, incident_id: str, until: datetime) -> None:
        self._muted[incident_id] = until

    def unmute(self, incident_id: str) -> None:
        self._muted.pop(incident_id, None)

    def muted(self, incident_id: str) -> bool:
        until = self._muted.get(incident_id)
        if until is None:
            return False
        if self.clock() >= until:
            self._muted.pop(incident_id, None)
            return False
        return True


# -- outgoing: delivery -------------------------------------------------------------------


def _header(headers: Mapping[str, Any], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            if isinstance(value, list):
                return str(value[0]) if value else None
            return str(value)
    return None


class OutboxDelivery:
    """Sends what the outbox holds, in order per group, until Slack has taken it."""

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


# -- user groups ---------------------------------------------------------------------------


class SlackGroups:
    """`groups_of(user)` for the approval policy: the ids and handles of the policy's user
    groups that have `user`, from `usergroups.list` and `usergroups.users.list`, cached for
    `ttl_s`. When Slack cannot be asked, the last answer serves for up to `max_stale_s`,
    then nobody is in any group (approvals by group are refused, never granted)."""

    def __init__(
        self,
        client: WebClient,
        names: Iterable[str],
        *,
        ttl_s: float = 60.0,
        max_stale_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.names = sorted({n.lstrip("@") for n in names if n.strip("@ ")})
        self.ttl_s = ttl_s
        self.max_stale_s = max_stale_s
        self.clock = clock
        self._lock = threading.Lock()
        self._members: dict[str, set[str]] = {}
        self._fetched_at: float | None = None
        self._tried_at: float | None = None

    @classmethod
    def for_policy(cls, client: WebClient, policy: ApprovalPolicy, **kwargs: Any) -> SlackGroups:
        rules = (policy.cordon, policy.drain, policy.uncordon, policy.force, policy.uncordon_anyway)
        return cls(client, [g for rule in rules for g in rule.groups], **kwargs)

    def __call__(self, user_id: str) -> set[str]:
        if not self.names:
            return set()
        with self._lock:
            now = self.clock()
            fresh = self._fetched_at is not None and now - self._fetched_at < self.ttl_s
            tried = self._tried_at is not None and now - self._tried_at < min(5.0, self.ttl_s)
            if not fresh and not tried:
                self._tried_at = now
                try:
                    self._members = self._fetch()
                    self._fetched_at = now
                except (SlackApiError, OSError, HTTPException) as error:
                    log.warning("could not read Slack user groups: %s", error)
            if self._fetched_at is None or now - self._fetched_at > self.ttl_s + self.max_stale_s:
                return set()
            return set(self._members.get(user_id, set()))

    def _fetch(self) -> dict[str, set[str]]:
        listing = self.client.usergroups_list().get("usergroups") or []
        handles = {
            str(g["id"]): str(g.get("handle") or "")
            for g in listing
            if isinstance(g, dict) and "id" in g
        }
        ids = {handle: gid for gid, handle in handles.items() if handle}
        members: dict[str, set[str]] = {}
        for name in self.names:
            gid = name if name in handles else ids.get(name)
            if gid is None:
                log.warning("user group %r of the approval policy is not in Slack", name)
                continue
            users = self.client.usergroups_users_list(usergroup=gid).get("users") or []
            for user in users:
                members.setdefault(str(user), set()).update({gid, handles[gid], name} - {""})
        return members


# -- incoming ------------------------------------------------------------------------------


class _SeenSignatures:
    """(timestamp, signature) pairs seen in the last `ttl_s`: a thread-safe TTL set."""

    def __init__(self, ttl_s: float = REPLAY_TTL_S, clock: Callable[[], float] = time.time):
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()
        self._order: deque[tuple[float, tuple[str, str]]] = deque()

    def first_time(self, timestamp: str, signature: str) -> bool:
        key = (timestamp, signature)
        with self._lock:
            now = self.clock()
            while self._order and self._order[0][0] <= now:
                self._seen.discard(self._order.popleft()[1])
            if key in self._seen:
                return False
            try:
                sent_at = float(timestamp)
            except ValueError:
                sent_at = now
            self._seen.add(key)
            self._order.append((max(now, sent_at) + self.ttl_s, key))
            return True


def _first(headers: Mapping[str, Sequence[str]], name: str) -> str:
    values = headers.get(name) or [""]
    return values[0]


def _buttons_of(message: object) -> set[tuple[str, str]] | None:
    """(action_id, value) of every button of the message clicked; None without a message."""
    if not isinstance(message, dict) or not isinstance(message.get("blocks"), list):
        return None
    found: set[tuple[str, str]] = set()
    for block in message["blocks"]:
        if not isinstance(block, dict):
            continue
        for element in block.get("elements", []) or []:
            if isinstance(element, dict):
                aid, value = element.get("action_id"), element.get("value")
                if isinstance(aid, str) and isinstance(value, str):
                    found.add((aid, value))
    return found


def for_slack(text: str) -> str:
    """An engine message as mrkdwn: escaped, and `@S0123` group ids as group mentions."""
    return _SUBTEAM.sub(r"<!subteam^\1>", escape(text))


HELP = """*gpubot* — `{command} <subcommand>`
• `status [NODE]` — open incidents, or one node's state
• `incidents` — the open incidents
• `timeline INCIDENT|NODE` — what happened, in order
• `cordon NODE` · `drain NODE` · `uncordon NODE` — propose it; someone the policy names \
must approve it in the channel (not you, unless the policy allows)
• `help` — this"""


@dataclass(frozen=True)
class _Click:
    user: str
    action_id: str
    value: str


class SlackInteractions:
    """Buttons and `/gpubot`, for HTTP (`routes`) and Socket Mode (`SocketModeRunner`)."""

    def __init__(
        self,
        engine: Engine,
        chat: SlackChat,
        settings: SlackSettings,
        *,
        client: WebClient,
        lang: Lang = Lang.EN,
        clock: Clock = utcnow,
        workers: int = 4,
    ) -> None:
        self.engine = engine
        self.chat = chat
        self.settings = settings
        self.client = client
        self.lang = lang
        self.clock = clock
        self._replays = _SeenSignatures()
        secret = settings.signing_secret.get_secret_value() if settings.signing_secret else None
        if secret is None and settings.mode == "http":
            raise InputError("slack.signing_secret", "required in http mode")
        # Socket Mode has nothing to sign; an unguessable secret keeps the HTTP route shut.
        self._secret = secret or secrets.token_hex(32)
        self._verifier = SignatureVerifier(self._secret)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slack-work")
        self._pending: set[Future[None]] = set()
        self._pending_lock = threading.Condition()
        token = settings.bot_token.get_secret_value() if settings.bot_token else None

        def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            # One workspace, one token: no auth.test per request, nor when Slack is down.
            return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token=token)

        # bolt copies this client (base URL, timeout) per request and sets the token that
        # `authorize` returns; handing it a token as well only earns a warning.
        template = WebClient(base_url=client.base_url, timeout=client.timeout, retry_handlers=[])
        self.app = App(
            name="gpubot",
            signing_secret=self._secret,
            client=template,
            authorize=authorize,
            process_before_response=True,
            request_verification_enabled=True,
            ignoring_self_events_enabled=False,
        )
        self.app.use(self._guard)
        for action_id in ACTION_IDS:
            self.app.action(action_id)(self._on_action)
        self.app.command(settings.command)(self._on_command)

    # -- HTTP ---------------------------------------------------------------------------

    def routes(self, path: str = "/slack/events") -> list[Route]:
        return [Route(path, self._endpoint, methods=["POST"])]

    async def _endpoint(self, request: Request) -> Response:
        body = bytearray()
        try:
            async for chunk in request.stream():
                body.extend(chunk)
                if len(body) > self.settings.max_body_bytes:
                    return JSONResponse({"error": "request too large"}, status_code=413)
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        raw = bytes(body)
        try:
            bolt_request = to_bolt_request(request, raw)
        except Exception:  # bolt parses before it verifies: sort forged from malformed
            if not self._verifier.is_valid_request(raw, dict(request.headers)):
                return JSONResponse({"error": "invalid request"}, status_code=401)
            return JSONResponse({"error": "malformed body"}, status_code=400)
        response = await run_in_threadpool(self.app.dispatch, bolt_request)
        return to_starlette_response(response)

    # -- before the ack ------------------------------------------------------------------

    def _guard(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        """Runs after bolt verified the signature and timestamp (HTTP)."""
        if req.mode != "socket_mode":
            timestamp = _first(req.headers, "x-slack-request-timestamp")
            signature = _first(req.headers, "x-slack-signature")
            if not self._replays.first_time(timestamp, signature):
                log.warning("refused a replayed Slack request (timestamp %s)", timestamp)
                return BoltResponse(status=401, body={"error": "replayed request"})
        try:
            problem = self._problem(req.body)
        except StoreUnavailable:
            return BoltResponse(status=503, body={"error": "store unavailable"})
        if problem is not None:
            log.warning("refused a Slack interaction: %s", problem)
            return BoltResponse(status=400, body={"error": problem})
        next()
        return resp

    def _problem(self, body: Mapping[str, Any]) -> str | None:
        if body.get("type") != "block_actions":
            return None
        actions = body.get("actions")
        if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
            return "expected one action"
        action_id, value = actions[0].get("action_id"), actions[0].get("value")
        if action_id not in ACTION_IDS:
            return f"unknown action {str(action_id)[:100]!r}"
        if not isinstance(value, str) or not self._known(str(action_id), value):
            return f"unknown value for {action_id}"
        buttons = _buttons_of(body.get("message"))
        if buttons is not None and (action_id, value) not in buttons:
            return f"no such {action_id} button on the message"
        user = body.get("user")
        if not isinstance(user, dict) or not isinstance(user.get("id"), str):
            return "no user"
        return None

    def _known(self, action_id: str, value: str) -> bool:
        store = self.engine.store
        try:
            if action_id in (APPROVE_ACTION, DENY_ACTION):
                if not _REQUEST_ID.fullmatch(value):
                    return False
                store.request(value)
            else:
                if not _INCIDENT_ID.fullmatch(value):
                    return False
                store.incident(value)
        except StoreUnavailable:
            raise
        except GpubotError:
            return False
        return True

    # -- after the ack ---------------------------------------------------------------------

    def _submit(self, work: Callable[[], None]) -> None:
        def run() -> None:
            try:
                work()
            except Exception:
                log.exception("handling a Slack interaction failed")

        future = self._pool.submit(run)
        with self._pending_lock:
            self._pending.add(future)

        def done(f: Future[None]) -> None:
            with self._pending_lock:
                self._pending.discard(f)
                self._pending_lock.notify_all()

        future.add_done_callback(done)

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """True once every acknowledged interaction has been handled (for tests, shutdown)."""
        with self._pending_lock:
            return self._pending_lock.wait_for(lambda: not self._pending, timeout_s)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

    def _on_action(self, ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        action = body["actions"][0]
        click = _Click(body["user"]["id"], action["action_id"], action["value"])
        self._submit(lambda: self._handle_click(click, respond))

    def _on_command(self, ack: Ack, command: dict[str, Any], respond: Respond) -> None:
        ack()
        user, text = str(command.get("user_id", "")), str(command.get("text", ""))
        self._submit(lambda: self._handle_command(user, text, respond))

    @staticmethod
    def _ephemeral(respond: Respond, text: str, blocks: Sequence[Block] | None = None) -> None:
        try:
            respond(
                text=fit(text, THREAD_TEXT_MAX, escaped=True),
                blocks=list(blocks) if blocks else None,
                response_type="ephemeral",
                replace_original=False,
            )
        except Exception as error:  # Slack is down: the person clicks again
            log.warning("could not answer through the response URL: %s", error)

    def _incident(self, incident_id: str | None) -> Incident | None:
        if incident_id is None:
            return None
        try:
            return self.engine.store.incident(incident_id)
        except GpubotError:
            return None

    def _handle_click(self, click: _Click, respond: Respond) -> None:
        if click.action_id == APPROVE_ACTION:
            self._approve(click, respond)
        elif click.action_id == DENY_ACTION:
            self._deny(click, respond)
        elif click.action_id == SNOOZE_ACTION:
            self._snooze(click, respond)
        elif click.action_id == TIMELINE_ACTION:
            self._ephemeral(respond, "timeline", self._timeline_blocks(click.value))

    def _approve(self, click: _Click, respond: Respond) -> None:
        outcome = self.engine.approve(click.value, click.user)
        store = self.engine.store
        request = store.request(click.value)
        incident = self._incident(request.incident)
        if incident is not None:
            self.chat.unmute(incident.id)  # someone is on it: they want to see the thread
        now = self.clock()
        status = outcome.status
        if status == "need-another":
            voters = [mention(v.approver) for v in store.votes(request.id)]
            if incident is not None:
                note = f"{len(voters)} of 2 approvals: {', '.join(voters)}; needs a second approver"
                self.chat.post_thread_mrkdwn(incident, note)
            self._ephemeral(respond, f"Your approval is recorded: {for_slack(outcome.message)}")
        elif status in ("acted", "recorded", "dry-run", "failed", "refused"):
            approvers = [v.approver for v in store.votes(request.id)]
            text = decision_text(request, "approved", approvers, now, self.lang)
            self.chat.update_decision(incident, request, text)
        elif status == "expired":
            text = decision_text(request, "expired", [], request.expires_at, self.lang)
            self.chat.update_decision(incident, request, text)
            self._ephemeral(respond, for_slack(outcome.message))
        elif status == "changed":
            pass  # the service asked again (`Chat.ask_again`), wherever the action ran
        else:  # not-allowed, duplicate: for the clicker only, nothing changed
            self._ephemeral(respond, for_slack(outcome.message))

    def _deny(self, click: _Click, respond: Respond) -> None:
        outcome = self.engine.deny(click.value, click.user, "denied in Slack")
        if outcome.status != "denied":
            self._ephemeral(respond, for_slack(outcome.message))
            return
        request = self.engine.store.request(click.value)
        text = decision_text(request, "denied", [click.user], self.clock(), self.lang)
        self.chat.update_decision(self._incident(request.incident), request, text)

    def _snooze(self, click: _Click, respond: Respond) -> None:
        now = self.clock()
        until = now + timedelta(seconds=self.settings.snooze_s)
        self.chat.snooze(click.value, until)
        self.engine.store.append(
            TimelineEntry(
                incident=click.value,
                at=now,
                actor=click.user,
                kind="note",
                text=f"snoozed by {click.user} until {_hhmm(until)} UTC: thread updates muted",
                data={"snoozed_until": until.isoformat()},
            )
        )
        self._ephemeral(
            respond,
            f"Snoozed incident {escape(click.value)} until {_hhmm(until)} UTC: its thread stays "
            "quiet (the timeline keeps everything). Approving or denying ends the snooze.",
        )

    def _timeline_blocks(self, incident_id: str) -> list[Block]:
        """The timeline as sections of at most 3000 characters, the newest kept when it
        does not fit in one message."""
        store = self.engine.store
        incident = store.incident(incident_id)
        entries = store.timeline(incident_id)
        head = (
            f"*Timeline of incident {escape(incident.id)}* · {escape(incident.node or '-')} · "
            f"`{escape(incident.rule)}` · {incident.state.value}"
        )
        lines = [
            fit(
                f"`{e.at.astimezone(UTC):%m-%d %H:%M:%S}` *{e.kind}* {escape(e.actor)}: "
                f"{escape(e.text)}",
                500,
                escaped=True,
            )
            for e in entries
        ]
        chunks: list[str] = []
        current = ""
        for line in reversed(lines):  # newest first, so the cut falls on the oldest
            if current and len(current) + 1 + len(line) > SECTION_TEXT_MAX // 2:
                chunks.append(current)
                current = ""
            current = line if not current else line + "\n" + current
        if current:
            chunks.append(current)
        room = MAX_BLOCKS - 2
        shown = chunks[:room]
        dropped = sum(c.count("\n") + 1 for c in chunks[room:])
        blocks: list[Block] = [
            SectionBlock(block_id="gpubot.timeline", text=fit(head, SECTION_TEXT_MAX, escaped=True))
        ]
        if dropped:
            blocks.append(
                SectionBlock(
                    block_id="gpubot.timeline-more",
                    text=f"… {dropped} earlier entries: `gpubot timeline {escape(incident.id)}`",
                )
            )
        for n, chunk in enumerate(reversed(shown)):
            blocks.append(SectionBlock(block_id=f"gpubot.timeline.{n}", text=chunk))
        if not entries:
            blocks.append(SectionBlock(block_id="gpubot.timeline.0", text="(empty)"))
        return blocks

    # -- /gpubot -------------------------------------------------------------------------

    def _handle_command(self, user: str, text: str, respond: Respond) -> None:
        words = text.split()
        sub = words[0].lower() if words else "help"
        arg = words[1] if len(words) > 1 else None
        try:
            if sub == "status":
                self._ephemeral(respond, self._status(arg))
            elif sub == "incidents":
                self._ephemeral(respond, self._incidents())
            elif sub == "timeline" and arg:
                self._timeline_command(arg, respond)
            elif sub in ("cordon", "drain", "uncordon") and arg:
                self._propose(Action(sub), arg, user, respond)
            else:
                unknown = "" if sub == "help" else f"Unknown subcommand `{escape(text[:100])}`.\n"
                self._ephemeral(respond, unknown + HELP.format(command=self.settings.command))
        except GpubotError as error:
            self._ephemeral(respond, f"Could not do that: {for_slack(str(error))}")

    def _status(self, node: str | None) -> str:
        store = self.engine.store
        if node is None:
            open_ = store.incidents(states=OPEN_STATES)
            if not open_:
                return "No open incidents."
            states: dict[str, int] = {}
            for incident in open_:
                states[incident.state.value] = states.get(incident.state.value, 0) + 1
            counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
            return f"{len(open_)} open incident(s): {counts}"
        facts = self.engine.executor.read_facts(node).nodes.get(node)
        if facts is None or not facts.known:
            return f"No node `{escape(node)}` in the cluster."
        gpus = f"{facts.gpu.allocatable}/{facts.gpu.expected}" if facts.gpu else "none"
        lines = [
            f"*{escape(node)}* ({escape(facts.pool or 'no pool')}): ready {facts.ready or '?'}, "
            f"{'cordoned' if facts.unschedulable else 'schedulable'}, GPUs {gpus}, "
            f"{facts.remaining_pods} pod(s) a drain would move",
        ]
        if facts.gate_failures:
            lines.append("Health gate: " + escape("; ".join(facts.gate_failures)))
        for incident in store.incidents(node=node, states=OPEN_STATES):
            lines.append(
                f"• incident {incident.id} `{escape(incident.rule)}` {incident.state.value}: "
                f"{escape(incident.title)}"
            )
        return "\n".join(lines)

    def _incidents(self) -> str:
        open_ = self.engine.store.incidents(states=OPEN_STATES)
        if not open_:
            return "No open incidents."
        lines = [
            f"• {i.id} · {escape(i.node or i.pool or 'cluster')} · `{escape(i.rule)}` · "
            f"{i.state.value} · since {_hhmm(i.opened_at)} UTC"
            for i in open_[-30:]
        ]
        more = f"\n… and {len(open_) - 30} more" if len(open_) > 30 else ""
        return f"{len(open_)} open incident(s):\n" + "\n".join(lines) + more

    def _timeline_command(self, arg: str, respond: Respond) -> None:
        store = self.engine.store
        incident_id: str | None = None
        if _INCIDENT_ID.fullmatch(arg):
            incident_id = arg if self._incident(arg) is not None else None
        else:
            found = store.incidents(node=arg)
            incident_id = found[-1].id if found else None
        if incident_id is None:
            self._ephemeral(
                respond, f"No incident `{escape(arg)}`, nor one for a node of that name."
            )
            return
        self._ephemeral(
            respond, f"timeline of incident {incident_id}", self._timeline_blocks(incident_id)
        )

    def _propose(self, action: Action, node: str, user: str, respond: Respond) -> None:
        facts = self.engine.executor.read_facts(node).nodes.get(node)
        if facts is None or not facts.known:
            self._ephemeral(respond, f"No node `{escape(node)}` in the cluster.")
            return
        open_ = self.engine.store.incidents(node=node, states=OPEN_STATES)
        incident = open_[-1] if open_ else None
        request = self.engine.executor.request(
            action, facts, incident.id if incident else None, user
        )
        self.chat.post_proposal(request, incident)
        self._ephemeral(
            respond,
            f"Proposed *{action.value} {escape(node)}* as request `{escape(request.id)}` in "
            f"<#{self.chat.channel}>. Someone the approval policy names must approve it "
            f"(not you, unless the policy allows); it expires at {_hhmm(request.expires_at)} UTC.",
        )


def build_slack_routes(interactions: SlackInteractions, path: str = "/slack/events") -> list[Route]:
    """`POST /slack/events` for buttons and slash commands (one Request URL for both)."""
    return interactions.routes(path)


class SocketModeRunner:
    """Socket Mode: the same bolt app (and so the same checks and handlers) over Slack's
    websocket, with slack_sdk's built-in client (no extra dependency). A thin shell on
    purpose: the Slack double speaks no websocket, so nothing here is tested but the wiring;
    everything it calls is tested through HTTP."""

    def __init__(self, interactions: SlackInteractions, app_token: str) -> None:
        self.handler = SocketModeHandler(interactions.app, app_token)

    def start(self) -> None:
        """Connects and returns; the client reconnects by itself."""
        self.handler.connect()  # type: ignore[no-untyped-call]

    def stop(self) -> None:
        self.handler.close()  # type: ignore[no-untyped-call]


@dataclass
class SlackOutgoing:
    """What the composition root builds first: the executor needs `groups`, the service
    needs `chat`, and `SlackInteractions` needs the service."""

    client: WebClient
    chat: SlackChat
    delivery: OutboxDelivery
    groups: SlackGroups


def build_slack_outgoing(
    settings: SlackSettings,
    outbox: Outbox,
    policy: ApprovalPolicy,
    lang: Lang,
    *,
    clock: Clock = utcnow,
) -> SlackOutgoing:
    """The client, the chat (waking the delivery on every message), the delivery (not
    started: start it on the leader) and the group lookup."""
    if not settings.channel:
        raise InputError("slack.channel", "required: the channel id diagnoses go to")
    client = slack_client(settings)
    delivery = OutboxDelivery(outbox, client, clock=clock)
    chat = SlackChat(outbox, settings.channel, lang, clock=clock, on_queued=delivery.wake)
    groups = SlackGroups.for_policy(client, policy, ttl_s=settings.groups_ttl_s)
    return SlackOutgoing(client, chat, delivery, groups)

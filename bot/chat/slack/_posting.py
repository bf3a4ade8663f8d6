"""The outgoing chat: `SlackChat`, the `Chat` port for Slack, which queues every message in the
store's outbox and returns at once.

Why it exists: nothing the bot says may be lost (docs/architecture.md, invariant 8), whatever
Slack does.
A message first becomes a row in the outbox, in the pipeline's own transaction rhythm; the
delivery worker (`_delivering.OutboxDelivery`) sends it when Slack takes it.

Every message of an incident shares the group `incident/<id>`, and the store hands out a
group's messages in id order, so the message, its thread and its updates arrive in the order
they were made, after any outage. A thread line or an update names the item it belongs to
(`refers_to`) instead of a Slack `ts`: the incident's message may not have reached Slack yet
when its first thread line is queued; the delivery fills in `thread_ts`, `ts` and `channel`
from that item's result.

Snooze mutes the incident's thread lines in this process (the timeline keeps them);
approving or denying on the incident ends it (`_buttons`). A replica that did not take the
click keeps posting: muting is a courtesy, not a guarantee.

What it must never do: send anything to Slack itself (it only calls `Outbox.outbox_put`), or
decide anything: what it posts is what the pipeline and the engine said.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from slack_sdk.models.blocks import Block, SectionBlock

from bot.chat.blocks import (
    DECISION_BLOCK_PREFIX,
    INCIDENT_BLOCK_ID,
    MAX_BLOCKS,
    SECTION_TEXT_MAX,
    code_block,
    decided_blocks,
    diagnosis_blocks,
    escape,
    fallback_text,
    fit,
    incident_block,
    mention,
    request_blocks,
)
from bot.chat.slack._texts import THREAD_TEXT_MAX, for_slack
from bot.clock import Clock, utcnow
from bot.model import ActionRequest, Diagnosis, Incident, Lang, OutboxItem
from bot.ports import Outbox
from bot.texts import say

log = logging.getLogger("gpubot.slack")


def message_key(incident: Incident) -> str:
    """The outbox key (and `chat_ref`) of an incident's message: one for its whole life (a
    better diagnosis, a reopen or a released proposal revise it, in place)."""
    return f"incident/{incident.id}/message"


def group_key(incident_id: str) -> str:
    return f"incident/{incident_id}"


def proposal_key(request_id: str) -> str:
    return f"request/{request_id}/message"


def _blocks_json(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in blocks]


def _with_decisions(blocks: list[Block], shown: Sequence[dict[str, Any]]) -> list[Block]:
    """`blocks` with the decisions `shown` carries, before the incident row: a revised
    message still says who approved what. The oldest go first when Slack's block limit is
    reached."""
    decisions = [
        parsed
        for b in shown
        if str(b.get("block_id", "")).startswith(DECISION_BLOCK_PREFIX)
        and (parsed := Block.parse(b)) is not None
    ]
    if not decisions:
        return blocks
    at = next((i for i, b in enumerate(blocks) if b.block_id == INCIDENT_BLOCK_ID), len(blocks))
    room = max(0, MAX_BLOCKS - len(blocks))
    kept = decisions[len(decisions) - room :] if room else []
    return [*blocks[:at], *kept, *blocks[at:]]


class SlackChat:
    """The `Chat` port for Slack: every call is queued in the outbox and returns at once.

    Owns, in this process only: which incidents are snoozed until when (`snooze`, `muted`),
    and a lock that makes each message's decisions (`update_decision`) build on one another.
    The messages themselves are the outbox's.

    Must never call Slack, nor wait for it: a slow or absent Slack must not slow the pipeline.
    """

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
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        key = message_key(incident)
        blocks = diagnosis_blocks(diagnosis, requests, self.lang, incident=incident.id)
        payload = {
            "channel": self.channel,
            "text": fallback_text(diagnosis, self.lang),
            "blocks": _blocks_json(blocks),
            "unfurl_links": False,
        }
        # Under a pool's incident: a reply in its thread. The node's own thread lines then go
        # to that thread too (the delivery posts under the reply's thread_ts).
        refers = self._thread_of(under) if under is not None else None
        self._put(key, group_key(incident.id), "chat.postMessage", payload, refers_to=refers)
        return key

    def post_thread(self, incident: Incident, text: str) -> None:
        """A plain-text line (escaped: pod names cannot smuggle in `<!channel>`)."""
        self.post_thread_mrkdwn(incident, escape(text))

    def post_notice(self, text: str, monospace: bool = False) -> None:
        if monospace:
            # A code block: Slack's proportional font would break the digest's columns.
            body = code_block(text, THREAD_TEXT_MAX)
        else:
            body = fit(escape(text), THREAD_TEXT_MAX, escaped=True)
        payload = {"channel": self.channel, "text": body}
        self._put(f"notice/{uuid.uuid4().hex}", "notices", "chat.postMessage", payload)

    def post_result(self, request: ActionRequest, text: str) -> None:
        """A line in the thread of the request's proposal (in its group, so after the
        proposal and its decision); in the channel when no proposal of it was posted."""
        proposal = self.outbox.outbox_item(proposal_key(request.id))
        payload = {
            "channel": self.channel,
            "text": fit(escape(text), THREAD_TEXT_MAX, escaped=True),
        }
        self._put(
            f"request/{request.id}/result/{uuid.uuid4().hex}",
            proposal.group_key if proposal is not None else f"request/{request.id}",
            "chat.postMessage",
            payload,
            refers_to=proposal.key if proposal is not None else None,
        )

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
        intro = say(self.lang, "slack.asks", who=mention(request.requested_by), what=escape(what))
        if incident is not None:
            title = escape(incident.title)
            intro += say(self.lang, "slack.asks_incident", id=escape(incident.id), title=title)
        blocks: list[Block] = [
            SectionBlock(
                block_id="gpubot.proposal", text=fit(intro, SECTION_TEXT_MAX, escaped=True)
            )
        ]
        blocks.extend(request_blocks(request, self.lang))
        if incident is not None:
            blocks.append(incident_block(incident.id, self.lang))
        payload = {
            "channel": self.channel,
            "text": say(self.lang, "slack.needs_approver", what=what),
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
        """The message as its latest queued update left it (each update carries all)."""
        latest = self.outbox.outbox_latest_update(message.key)
        blocks = (latest or message).payload.get("blocks")
        return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        """A `chat.update` of the incident's message with the diagnosis and buttons it tells
        now, and `note` in its thread; the earlier buttons go with the earlier blocks, the
        decisions already shown (who approved, what was withdrawn) stay."""
        key = self._thread_of(incident)
        message = self.outbox.outbox_item(key)
        if message is None:  # never posted (an incident older than this gpubot): post it now
            self.post_diagnosis(incident, diagnosis, requests)
            self.post_thread(incident, note)
            return
        blocks = diagnosis_blocks(diagnosis, requests, self.lang, incident=incident.id)
        with self._decisions:
            blocks = _with_decisions(blocks, self._current_blocks(message))
            payload = {
                "text": fallback_text(diagnosis, self.lang),
                "blocks": _blocks_json(blocks),
            }
            self._put(
                f"{key}/revision/{uuid.uuid4().hex}",
                message.group_key,
                "chat.update",
                payload,
                refers_to=key,
            )
        self.post_thread(incident, note)

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
